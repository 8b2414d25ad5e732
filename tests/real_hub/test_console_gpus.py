"""The console's "Every GPU" while a GPU Job runs, on the real cluster with a real hub:
every row is of one moment, the reclaim loop's last cycle, and says when that was; the
Job is on its node; a MIG slice it holds is never listed free; the overview's queued counts and
the plan beside them are of the same cycle.

As in the demo where it was seen: alice and carol hold local-0's two MIG slices, a team-a Job
needs one, alice's idle server is reclaimed for it. The loop runs every 10 s here (a deployment's
default is 30 s; the tests' 1 s), so that what a cycle shows stays up a while. Before the fix the
answer was built at the end of the cycle that reclaimed alice, from the Workloads as they were
then (the Job admitted) and the Jobs' pods as the cycle had listed them at its start (none yet):
the Job sat on node "not known" and the slice it held was listed free, for a whole cycle.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.console_page import screenshot_whole, seen
from tests.support.hub import CullerHub, login, run_culler_hub, training_job
from tests.support.hub import service_get as get
from tests.support.lab_page import docs_image
from tests.support.reclaim_browser import PAIR

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-1g.5gb"
JOB = "console-gpus-train"
CYCLE_SECONDS = 10

POLICY = """\
report_stale_after: 30s
policies:
  - name: team-a-mig
    match: {teams: [team-a], kinds: [mig]}
    idle_after: 2s
    warn_before: 5s
"""

# the tests' hubs run a cycle a second: this one, one every CYCLE_SECONDS (an option given once)
SLOW_CYCLES = f"""
for _service in c.JupyterHub.services:
    if _service["name"] == "gpuaas":
        _service["command"] = [
            a for a in _service["command"] if not a.startswith("--GPUaaSService.culler_interval=")
        ] + ["--GPUaaSService.culler_interval={CYCLE_SECONDS}"]
"""


@pytest.fixture(scope="module")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    state = tmp_path_factory.mktemp("console-gpus-hub")
    with run_culler_hub(cluster, state, policy_text=POLICY, extra_config=SLOW_CYCLES) as running:
        yield running


def _time(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _job_pod(cluster: Cluster) -> dict[str, Any] | None:
    kubectl = [str(cluster.info.bin_dir / "kubectl"), "--kubeconfig", str(cluster.info.kubeconfig)]
    out = subprocess.run(
        [*kubectl, "-n", "team-a", "get", "pods", "-l", f"job-name={JOB}", "-o", "json"],
        check=True,
        capture_output=True,
    ).stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items[0] if items else None


def _scheduled_at(pod: dict[str, Any] | None) -> datetime | None:
    """When the scheduler put ``pod`` on its node (``None``: not yet)."""
    for c in (pod or {}).get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled" and c["status"] == "True":
            return _time(c["lastTransitionTime"])
    return None


def _check_one_moment(gpus: dict[str, Any], pod: dict[str, Any] | None) -> dict[str, Any] | None:
    """Assert what the answer says of the Job and its node's MIG slices; the Job's row."""
    job: dict[str, Any] | None = next(
        (r for r in gpus["devices"] if r["holder_kind"] == "training"), None
    )
    moment = _time(gpus.get("as_of") or gpus["now"])  # the moment the rows are of
    scheduled = _scheduled_at(pod)
    if job is None:
        return None
    if not job["node"]:
        # only a Job whose pod the scheduler had not yet placed at that moment (to the second)
        assert scheduled is None or scheduled >= moment - timedelta(seconds=1), (job, pod)
        return job
    assert pod is not None, job
    assert job["node"] == pod["spec"]["nodeName"], (job, pod)
    node = job["node"]
    held = sum(
        Fraction(1)
        for r in gpus["devices"]
        if r["node"] == node and r["state"] != "free" and r["device"] == "MIG 1g.5gb"
    )
    free = [r for r in gpus["devices"] if r["node"] == node and r["key"] == f"{node}/mig-1g.5gb"]
    # local-0 has two 1g.5gb slices: carol's and the Job's (alice's before); none is free
    assert held == 2, gpus["devices"]
    assert not free, gpus["devices"]
    return job


def _pair_placed(hub: CullerHub) -> dict[str, str]:
    """The nodes of alice's and carol's slices, from a cycle that saw both on their node."""
    deadline = time.monotonic() + 3 * CYCLE_SECONDS
    while time.monotonic() < deadline:
        status, gpus = get(hub, "api/console/gpus", hub.token)
        assert status == 200, gpus
        placed = {r["holder"]: r["node"] for r in gpus["devices"] if r["holder"] in PAIR}
        if len(placed) == 2 and all(placed.values()):
            return placed
        time.sleep(1)
    raise AssertionError(f"no cycle placed alice and carol: {gpus}")


async def test_every_gpu_is_of_one_cycle_with_the_job_on_its_node(
    hub: CullerHub, cluster: Cluster, browser: Any
) -> None:
    hub.start_all(PAIR)  # alice (team-a) and carol (team-b): local-0's two 1g.5gb slices
    local = _pair_placed(hub)["alice"]

    job = training_job(JOB)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1
    job["spec"]["template"]["spec"]["containers"][0]["command"] = ["sleep", "300"]

    async def submit() -> None:
        async with cluster.api("team-a", "alice") as api:
            await client.BatchV1Api(api).create_namespaced_job("team-a", job)  # type: ignore[arg-type]

    await submit()
    # every answer while alice is warned and reclaimed and the Job starts, until one of a cycle
    # after the Job's pod was placed
    deadline = time.monotonic() + 8 * CYCLE_SECONDS + 30
    while time.monotonic() < deadline:
        status, gpus = get(hub, "api/console/gpus", hub.token)
        assert status == 200, gpus
        pod = _job_pod(cluster)
        row = _check_one_moment(gpus, pod)
        if row is not None and row["node"]:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"the Job never showed on its node: {gpus}")
    assert row["node"] == local, row
    assert hub.server("alice") is None  # reclaimed for the Job
    assert gpus["as_of"], gpus

    admin = await login(browser, hub, "admin", until=lambda u: "/hub/login" not in u, commit=True)
    await admin.goto(f"{hub.url}/services/gpuaas/console/")
    training = admin.locator("#gpus tr[data-state='training']")
    await training.wait_for()
    text = await seen(training)
    assert local in text, text
    assert "MIG 1g.5gb" in text, text
    assert "not on a node yet" not in await seen(admin.locator("#gpus"))
    # local-0's two slices are held: none of them is listed free
    assert (
        await admin.locator(f"#gpus tr[data-node='{local}'][data-state='free']")
        .filter(has_text="MIG 1g.5gb")
        .count()
        == 0
    )
    nodes = await seen(admin.locator("#gpu-nodes"))
    assert nodes.startswith("As of "), nodes
    assert "the reclaim loop's last cycle" in nodes, nodes
    # what the overview says is held is what the nodes' lines add up to (all of it on local-0
    # here), not a sum of the teams' rounded figures (0.28 beside the node's 0.29)
    node_held = re.search(rf"{local}: ([\d.]+) GPU-eq\. held", nodes)
    assert node_held, nodes
    big = await seen(admin.locator("#overview #holds .big"))
    assert big == f"{node_held.group(1)} GPU-eq. held", (big, nodes)
    # the overview's queued counts and the plan are of one cycle, which they name
    for card in ("queued", "next"):
        hint = await seen(admin.locator(f"#overview #{card} .hint"))
        assert hint.startswith("From the reclaim loop's cycle of"), hint
    await screenshot_whole(admin, str(docs_image("console-gpus.png")))
    subprocess.run(
        [
            str(cluster.info.bin_dir / "kubectl"),
            "--kubeconfig",
            str(cluster.info.kubeconfig),
            "-n",
            "team-a",
            "delete",
            "job",
            JOB,
            "--wait=false",
        ],
        check=False,
    )
    hub.stop("carol")

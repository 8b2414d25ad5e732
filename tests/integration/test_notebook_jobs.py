"""Notebooks as Kueue training Jobs, end to end on the real cluster (docs/jobs.md).

Real kube-apiserver, Kueue and node agent; a real JupyterHub with the gpuaas service (its own
ServiceAccount, the catalog with jobs sections); a real Jupyter server with the extension,
holding a token with alice's server's scopes (``access:servers!server=alice/``: the service
takes jobs only from a server's own token; alice's personal token is refused). Team A's test
queue (``nbjobs-test``: one 1g.5gb slice on the node agent's node, outside the cohort) is
filled by alice's first job (a notebook that sleeps); her second — a notebook that writes a
file and prints — queues at position 1; cancelling the first (no Job, Workload or pod is left)
lets it run on the node agent's node, and its executed copy, with outputs, appears beside the
source. Bob (same team) cannot see, cancel or read it; carol (team B) cannot submit to team A's
queue.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.hub import free_port
from devcluster.queue_hub import QueueHub, queue_hub
from devcluster.testing import Cluster, wait_for
from tests.support.notebook_jobs import (
    QUEUE_YAML,
    SLEEPER,
    WRITER,
    catalog_file,
    clear_notebook_jobs,
    run_kubectl,
)

pytestmark = pytest.mark.integration


class JupyterServer:
    """A real ``jupyter server`` with the extension, holding a hub-issued server token."""

    def __init__(self, root: Path, hub_token: str, service_url: str) -> None:
        self.root = root
        self.port = free_port()
        self.token = secrets.token_hex(16)
        env = {
            **os.environ,
            "JUPYTERHUB_API_TOKEN": hub_token,
            "GPUAAS_SERVICE_URL": service_url,
            "JUPYTER_CONFIG_DIR": str(root.parent / "cfg"),
            "JUPYTER_DATA_DIR": str(root.parent / "data"),
        }
        self.log = (root.parent / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "server",
                "--no-browser",
                f"--port={self.port}",
                "--ServerApp.ip=127.0.0.1",
                f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={root}",
                "--GPUaaS.gpu_source=simulated",
                "--GPUaaS.jobs_collect_interval=2",
                "--GPUaaS.activity_report_interval=0",
                "--allow-root",
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def call(self, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def wait_up(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.call("api/status")[0] == 200:
                    return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"jupyter server did not start; see {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueueHub]:
    info = cluster.info
    run_kubectl(cluster, ["apply", "-f", "-"], stdin=QUEUE_YAML)
    tmp = tmp_path_factory.mktemp("jobs")
    args = [f"--GPUaaSService.catalog_file={catalog_file(tmp)}"]
    with queue_hub(tmp / "hub", info.settings.state_dir, service_args=args) as qh:
        yield qh
    run_kubectl(cluster, ["delete", "--ignore-not-found", "-f", "-"], stdin=QUEUE_YAML)


@pytest.fixture
def alice_server(cluster: Cluster, hub: QueueHub, tmp_path: Path) -> Iterator[JupyterServer]:
    clear_notebook_jobs(cluster)
    root = tmp_path / "home"
    (root / "work").mkdir(parents=True)
    (root / "work" / "writer.ipynb").write_text(json.dumps(WRITER))
    (root / "work" / "sleeper.ipynb").write_text(json.dumps(SLEEPER))
    server = JupyterServer(root, hub.server_token("alice"), hub.service_url)
    try:
        server.wait_up()
        yield server
    finally:
        server.stop()
        clear_notebook_jobs(cluster)


def service(
    hub: QueueHub, token: str, path: str, method: str = "GET", body: Any = None
) -> tuple[int, Any]:
    try:
        return 200, hub.request(f"/services/gpuaas/{path}", token, method, body)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


async def kube_objects(cluster: Cluster, job: dict[str, Any]) -> list[str]:
    """What is left of a job: the Job, its Workload, pods, ConfigMaps, Secret."""
    name = job["name"]
    left: list[str] = []
    for kind, sel in (
        ("jobs", f"metadata.name={name}"),
        ("pods", None),
        ("workloads.kueue.x-k8s.io", None),
        ("configmaps", None),
        ("secrets", None),
    ):
        args = ["-n", "team-a", "get", kind, "-o", "json"]
        if sel:
            args += ["--field-selector", sel]
        out = run_kubectl(cluster, args)
        for item in json.loads(out)["items"]:
            meta = item["metadata"]
            owners = [o.get("name") for o in meta.get("ownerReferences") or []]
            labels = meta.get("labels") or {}
            if (
                meta["name"].startswith(name)
                or name in owners
                or labels.get("job-name") == name
                or labels.get("batch.kubernetes.io/job-name") == name
            ):
                left.append(f"{kind}/{meta['name']}")
    return left


async def test_a_notebook_runs_as_a_job_queues_runs_and_comes_back(
    cluster: Cluster, hub: QueueHub, alice_server: JupyterServer
) -> None:
    srv = alice_server
    status, options = srv.call("gpuaas/api/jobs/options")
    assert status == 200, options
    team = next(t for t in options["teams"] if t["team"] == "team-a")
    assert [o["slug"] for o in team["offerings"]] == ["local-mig-1g"]
    assert team["offerings"][0]["headroom"]["message"]  # the spawn form's words

    # the first job takes the queue's only slice
    status, sleeper = srv.call(
        "gpuaas/api/jobs", "POST", {"path": "work/sleeper.ipynb", "offering": "local-mig-1g"}
    )
    assert status == 201, sleeper
    assert sleeper["team"] == "team-a"
    assert sleeper["name"].startswith("nb-sleeper-")

    async def state_of(name: str, want: str) -> dict[str, Any] | None:
        code, listing = await asyncio.to_thread(srv.call, "gpuaas/api/jobs")
        assert code == 200, listing
        job = next((j for j in listing["jobs"] if j["name"] == name), None)
        return job if job and job["state"] == want else None

    await wait_for("the sleeper running", lambda: state_of(sleeper["name"], "running"), 90)

    # the Workload carries the time limit as Kueue's maximum execution time
    out = run_kubectl(cluster, ["-n", "team-a", "get", "workloads.kueue.x-k8s.io", "-o", "json"])
    wl = next(
        w
        for w in json.loads(out)["items"]
        if any(o["name"] == sleeper["name"] for o in w["metadata"].get("ownerReferences") or [])
    )
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 1800
    assert wl["metadata"]["labels"]["gpuaas.jupyter.org/user"] == "alice"

    # the second queues behind it, at position 1
    status, writer = srv.call(
        "gpuaas/api/jobs",
        "POST",
        {"path": "work/writer.ipynb", "parameters": {"greeting": "hi"}, "time_limit": "10m"},
    )
    assert status == 201, writer
    queued = await wait_for(
        "the writer queued at position 1",
        lambda: _positioned(srv, writer["name"]),
        60,
    )
    assert queued["state"] == "queued"

    _no_one_else_may_touch_it(hub, writer)
    # alice's cap: two queued or running at once
    status, capped = srv.call("gpuaas/api/jobs", "POST", {"path": "work/writer.ipynb"})
    assert status == 409, capped
    assert capped["cap"] == "per_user", capped

    # cancel the sleeper: nothing of it is left
    status, _ = srv.call(f"gpuaas/api/jobs/team-a/{sleeper['name']}", "DELETE")
    assert status == 200

    async def gone() -> bool:
        return not await kube_objects(cluster, sleeper)

    await wait_for("the sleeper's Job, Workload, pod, ConfigMap and Secret gone", gone, 60)

    # the writer runs on the node agent's node and its executed copy appears beside the source
    done = await wait_for(
        "the writer succeeded", lambda: state_of(writer["name"], "succeeded"), 120
    )
    assert done["result"] == "succeeded"
    out_path = srv.root / "work" / f"writer-{writer['name']}.ipynb"

    async def written() -> bool:
        return out_path.exists()

    await wait_for("the executed copy", written, 30)
    executed = json.loads(out_path.read_text())
    texts = ["".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])]
    assert "wrote hihi local-mig-1g\n" in texts
    assert executed["cells"][1]["metadata"]["tags"] == ["injected-parameters"]
    assert json.loads((srv.root / "work" / "writer.ipynb").read_text()) == WRITER  # untouched
    code, logged = await asyncio.to_thread(srv.call, f"gpuaas/api/jobs/team-a/{writer['name']}/log")
    assert code == 200
    assert "wrote hihi" in logged["log"]
    status, listing = srv.call("gpuaas/api/jobs")
    mine = next(j for j in listing["jobs"] if j["name"] == writer["name"])
    assert mine["collected"] == f"work/writer-{writer['name']}.ipynb"
    # cleaning up: cancelling a finished job removes it
    assert srv.call(f"gpuaas/api/jobs/team-a/{writer['name']}", "DELETE")[0] == 200


def _no_one_else_may_touch_it(hub: QueueHub, writer: dict[str, Any]) -> None:
    """Only alice's server's own token reaches her Jobs: not her personal token, not bob (her
    teammate), and carol (team B) cannot use team A's queue."""
    # alice's own token (as made on /hub/token, with the service's scope) submits nothing and
    # lists nothing: only her server's own token is taken
    mine = hub.user_token("alice", ["access:services!service=gpuaas"])
    code, answer = service(
        hub, mine, "api/jobs", "POST", {"path": "work/writer.ipynb", "notebook": WRITER}
    )
    assert code == 403, answer
    assert "only a single-user server's own token" in answer["message"]
    assert service(hub, mine, "api/jobs")[0] == 403

    # bob (team A) sees none of it and can touch none of it; carol cannot use team A's queue
    bob = hub.server_token("bob")
    code, bobs = service(hub, bob, "api/jobs")
    assert code == 200
    assert bobs["jobs"] == []
    for path, method in (
        (f"api/jobs/team-a/{writer['name']}", "DELETE"),
        (f"api/jobs/team-a/{writer['name']}/log", "GET"),
        (f"api/jobs/team-a/{writer['name']}/result", "GET"),
    ):
        code, answer = service(hub, bob, path, method)
        assert code == 404, (path, answer)
    carol = hub.server_token("carol")
    code, answer = service(
        hub,
        carol,
        "api/jobs",
        "POST",
        {"team": "team-a", "path": "x.ipynb", "notebook": WRITER},
    )
    assert code == 403
    assert answer["errors"][0]["path"] == "team"


async def _positioned(srv: JupyterServer, name: str) -> dict[str, Any] | None:
    _, listing = await asyncio.to_thread(srv.call, "gpuaas/api/jobs")
    job = next((j for j in listing.get("jobs", []) if j["name"] == name), None)
    return job if job and job["position_in_local_queue"] == 1 else None

"""The culler on the real cluster with a real hub: idle GPU workbenches are warned, then stopped
through the hub for a queued training Job, which Kueue then admits; a busy one is left alone.

The hub runs the gpuaas service (culler/gpuaas_culler/service.py) as a managed service with a
short-duration policy; servers on local-0 are real jupyterhub-singleuser processes that report
their activity to it every second with their own tokens.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from gpuaas_culler.loop import HANDOFFS_CONFIGMAP, STATE_KEY
from kubernetes_asyncio import client
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from demo.hub import HubProcess, HubSettings, free_port
from demo.queue_hub import service_config
from devcluster.testing import Cluster

from .conftest import USERS_NS, Hub

pytestmark = pytest.mark.integration

MIG = "nvidia.com/mig-1g.5gb"
WARNED = "gpuaas.jupyter.org/reclaim-warned-at"
POLICY = """\
report_stale_after: 30s
handoff_timeout: 2m
policies:
  # bob and dave: the restart test, whose window must hold a service restart and a snooze.
  - name: local-mig-restart
    match: {kinds: [mig], users: [bob, dave]}
    idle_after: 2s
    warn_before: 60s
    max_snoozes: 1
    snooze_for: 1h
  - name: local-mig
    match: {kinds: [mig]}
    idle_after: 2s
    warn_before: 20s
    max_snoozes: 1
    snooze_for: 1h
"""
# The sample organisation's training queues do not cover the local flavor (its pods would run
# for real on this machine): a queue of the cohort "gpuaas" that does, for this module only. It
# owns nothing on local and borrows what the notebooks' queues lend.
QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: culler-test-training}
spec:
  cohortName: gpuaas
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: team-a}
  resourceGroups:
    - coveredResources: [nvidia.com/mig-1g.5gb]
      flavors:
        - name: local
          resources: [{name: nvidia.com/mig-1g.5gb, nominalQuota: 0}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: culler-test, namespace: team-a}
spec: {clusterQueue: culler-test-training}
"""


def culler_config(
    port: int, kubeconfig: Path, policy: Path, save_lead: float = 3, dry_run: bool = False
) -> str:
    args = [
        f"--policy={policy}",
        "--culler-interval=1",
        f"--save-lead={save_lead}",
        *(["--culler-dry-run"] if dry_run else []),
    ]
    return service_config(port, kubeconfig, poll_interval=1, culler_args=args, report_interval=1)


class CullerHub(Hub):
    def __init__(self, proc: HubProcess, token: str, port: int) -> None:
        super().__init__(proc, token)
        self.port = port

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/services/gpuaas/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return str(r.read().decode())

    def audit(self) -> list[dict[str, Any]]:
        out = []
        for line in self.proc.log_path.read_text(errors="replace").splitlines():
            if "gpuaas.culler.audit" in line and "{" in line:
                out.append(json.loads(line[line.index("{") :]))
        return out


@contextmanager
def run_culler_hub(
    cluster: Cluster, state: Path, *, save_lead: float = 3, dry_run: bool = False
) -> Iterator[CullerHub]:
    """A hub with the gpuaas service and the culler (policy above), for one test module."""
    kubectl = str(cluster.info.bin_dir / "kubectl")
    admin = [kubectl, "--kubeconfig", str(cluster.info.kubeconfig)]
    subprocess.run([*admin, "apply", "-f", "-"], input=QUEUE.encode(), check=True)
    forget_handoffs = [*admin, "-n", USERS_NS, "delete", "configmap", HANDOFFS_CONFIGMAP]
    # each module's culler starts with no hand-off records of an earlier one
    subprocess.run([*forget_handoffs, "--ignore-not-found"], check=True)
    policy = state / "policy.yaml"
    policy.write_text(POLICY)
    token = secrets.token_hex(24)
    port = free_port()
    settings = HubSettings(
        state_dir=state,
        kubeconfig=cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig"),
        service_token=token,
        start_timeout=90,
        poll_interval=1.0,
        extra_config=culler_config(
            port,
            cluster.kubeconfig_for("jupyterhub", "gpuaas", state / "gpuaas.kubeconfig"),
            policy,
            save_lead,
            dry_run,
        ),
    )
    proc = HubProcess(settings)
    proc.start()
    try:
        yield CullerHub(proc, token, port)
    finally:
        proc.stop()
        subprocess.run(
            [*admin, "-n", "team-a", "delete", "jobs", "-l", "gpuaas-test=culler", "--wait"],
            check=False,
        )
        subprocess.run([*admin, "delete", "-f", "-"], input=QUEUE.encode(), check=False)


@pytest.fixture(scope="module")
def culler_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    with run_culler_hub(cluster, tmp_path_factory.mktemp("culler-hub")) as hub:
        yield hub


async def make_busy(hub: Hub, user: str) -> None:
    """Start a kernel in the user's server and keep it executing (a long sleep)."""
    token = hub.user_token(user)
    req = urllib.request.Request(
        f"{hub.url}/user/{user}/api/kernels",
        data=b"{}",
        method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        kernel = json.loads(r.read())["id"]
    ws_url = hub.url.replace("http", "ws", 1) + f"/user/{user}/api/kernels/{kernel}/channels"
    ws = await websocket_connect(
        HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}, connect_timeout=60)
    )
    msg = {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "username": user,
            "session": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "channel": "shell",
        "content": {
            "code": "import time; time.sleep(900)",
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    }
    await ws.write_message(json.dumps(msg))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        raw = await asyncio.wait_for(ws.read_message(), 60)
        if raw is None:
            break
        reply = json.loads(raw)
        if reply.get("msg_type") == "execute_input":
            return
    raise AssertionError(f"{user}'s kernel never became busy")


def training_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "culler-test", "gpuaas-test": "culler"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {"gpuaas.dev/pool": "local"},
                    "tolerations": [
                        {
                            "key": "gpuaas.dev/local-node",
                            "operator": "Equal",
                            "value": "true",
                            "effect": "NoSchedule",
                        }
                    ],
                    "containers": [
                        {
                            "name": "train",
                            "image": "localhost/train:dev",
                            "command": ["sleep", "60"],
                            "resources": {"requests": {MIG: "1"}, "limits": {MIG: "1"}},
                        }
                    ],
                }
            },
        },
    }


async def pod_of(api: client.ApiClient, user: str) -> dict[str, Any] | None:
    core = client.CoreV1Api(api)
    resp = await core.list_namespaced_pod(
        USERS_NS, label_selector=f"hub.jupyter.org/username={user}", _preload_content=False
    )
    items: list[dict[str, Any]] = json.loads(await resp.read())["items"]  # type: ignore[attr-defined]
    return items[0] if items else None


async def wait_for(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


async def test_idle_workbenches_are_reclaimed_for_a_queued_job(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    spawns = {
        "alice": {"team": "team-a", "offering": "local-mig-1g"},
        "carol": {"team": "team-b", "offering": "local-mig-1g"},
        "dave": {"team": "team-b", "offering": "local-mig-3g"},
    }
    for user, options in spawns.items():
        r = hub.api("POST", f"/users/{user}/server", options)
        assert r.status in (201, 202), r
    for user in spawns:
        hub.wait_ready(user, timeout=120)
    await make_busy(hub, "dave")

    # Nothing is queued: idle as they are, nobody is warned.
    await asyncio.sleep(4)
    for user in spawns:
        pod = await pod_of(k8s, user)
        assert pod is not None
        assert WARNED not in (pod["metadata"].get("annotations") or {})

    # A training Job needing both local 1g.5gb slices queues behind the two idle notebooks
    # (one of team A's, one of team B's: each team's notebook queue holds one on local).
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-mig"),  # type: ignore[arg-type]
        )
    t_queued = time.monotonic()

    async def warned() -> bool:
        pods = [await pod_of(k8s, u) for u in ("alice", "carol")]
        return all(p and WARNED in (p["metadata"].get("annotations") or {}) for p in pods)

    await wait_for(warned, 60, "the warnings on alice's and carol's pods")
    dave = await pod_of(k8s, "dave")
    assert dave is not None
    assert WARNED not in (dave["metadata"].get("annotations") or {})
    core = client.CoreV1Api(k8s)
    events = await core.list_namespaced_event(USERS_NS)
    reasons = {(e.involved_object.name, e.reason) for e in events.items}
    assert any(r == "GPUReclaimWarning" and "alice" in n for n, r in reasons)
    assert any(r == "GPUReclaimWarning" and "carol" in n for n, r in reasons)

    # After the 20 s warning, both are stopped through the hub; the busy one keeps running.
    async def stopped() -> bool:
        return all(hub.server(u) is None for u in ("alice", "carol"))

    await wait_for(stopped, 90, "the hub to stop alice and carol")
    assert hub.server("dave") is not None

    async def admitted() -> bool:
        crd = client.CustomObjectsApi(k8s)
        wls = await crd.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "team-a", "workloads"
        )
        for w in wls["items"]:
            if "train-mig" in w["metadata"]["name"]:
                conds = {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
                return conds.get("Admitted") == "True"
        return False

    await wait_for(admitted, 90, "Kueue to admit the Job")
    elapsed = time.monotonic() - t_queued
    print(f"queued -> admitted through the culler: {elapsed:.1f}s")

    async def handed_off() -> bool:
        return "gpuaas_culler_handoff_latency_seconds_count 1.0" in hub.metrics()

    await wait_for(handed_off, 30, "the hand-off in the metrics")
    text = hub.metrics()
    assert 'gpuaas_culler_reclaimed_gpu_equivalents_total{team="team-a"}' in text
    assert 'gpuaas_culler_reclaimed_gpu_equivalents_total{team="team-b"}' in text
    assert "alice" not in text
    records = hub.audit()
    reclaimed = {r["user"] for r in records if r.get("action") == "reclaim"}
    assert reclaimed == {"alice", "carol"}
    assert any(r.get("event") == "culler.handoff" and r["result"] == "succeeded" for r in records)
    # The hand-off is kept where a restarted culler finds it.
    async with cluster.api("jupyterhub", "gpuaas") as culler_api:  # the hub may not read it
        kept = await client.CoreV1Api(culler_api).read_namespaced_config_map(
            HANDOFFS_CONFIGMAP, USERS_NS
        )
    assert "train-mig" in kept.data[STATE_KEY]
    assert "handoff-succeeded" in kept.data[STATE_KEY]
    hub.stop("dave")
    await delete_jobs(cluster, k8s)


async def delete_jobs(cluster: Cluster, k8s: client.ApiClient) -> None:
    async with cluster.api("team-a", "alice") as api:
        batch = client.BatchV1Api(api)
        for job in (await batch.list_namespaced_job("team-a", label_selector="gpuaas-test")).items:
            await batch.delete_namespaced_job(
                job.metadata.name, "team-a", propagation_policy="Background"
            )

    async def gone() -> bool:
        crd = client.CustomObjectsApi(k8s)
        wls = await crd.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "team-a", "workloads"
        )
        return not wls["items"]

    await wait_for(gone, 60, "the Job's workload to go")


def service_pid(hub: HubProcess) -> int | None:
    """The gpuaas service process the hub started (its child), if running."""
    assert hub.proc is not None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == hub.proc.pid and b"gpuaas_culler.service" in cmdline:
            return int(entry.name)
    return None


async def warnings_on(k8s: client.ApiClient, pod: dict[str, Any]) -> int:
    events = await client.CoreV1Api(k8s).list_namespaced_event(USERS_NS)
    return sum(
        1
        for e in events.items
        if e.involved_object.uid == pod["metadata"]["uid"] and e.reason == "GPUReclaimWarning"
    )


async def test_restart_mid_warning_does_not_warn_twice_and_a_snooze_is_honoured(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    # bob (team-a) and dave (team-b): their policy warns 60 s ahead, room for a service restart
    # on a loaded machine before the snooze.
    spawns = {
        "bob": {"team": "team-a", "offering": "local-mig-1g"},
        "dave": {"team": "team-b", "offering": "local-mig-1g"},
    }
    for user, options in spawns.items():
        r = hub.api("POST", f"/users/{user}/server", options)
        assert r.status in (201, 202), r
    for user in spawns:
        hub.wait_ready(user, timeout=120)
    async with cluster.api("team-a", "bob") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-again"),  # type: ignore[arg-type]
        )

    async def both_warned() -> list[dict[str, Any]] | None:
        pods = [await pod_of(k8s, u) for u in spawns]
        if all(p and WARNED in (p["metadata"].get("annotations") or {}) for p in pods):
            return [p for p in pods if p]
        return None

    bob, dave = await wait_for(both_warned, 60, "the warnings")
    warned_at = {p["metadata"]["name"]: p["metadata"]["annotations"][WARNED] for p in (bob, dave)}
    deadline = max(
        datetime.fromisoformat(w.replace("Z", "+00:00")) for w in warned_at.values()
    ) + timedelta(seconds=60)

    # The culler restarts in the middle of the countdown (the hub restarts its service).
    old = service_pid(hub.proc)
    assert old is not None
    os.kill(old, signal.SIGTERM)

    async def restarted() -> bool:
        pid = service_pid(hub.proc)
        if pid is None or pid == old:
            return False
        try:
            return "gpuaas_culler_decisions_total" in hub.metrics()
        except OSError:
            return False

    await wait_for(restarted, 30, "the hub to restart the gpuaas service")
    await asyncio.sleep(3)  # a few cycles of the new culler
    for p in (bob, dave):
        now = await pod_of(k8s, p["metadata"]["annotations"]["hub.jupyter.org/username"])
        assert now is not None
        assert now["metadata"]["annotations"].get(WARNED) == warned_at[p["metadata"]["name"]]
        assert await warnings_on(k8s, now) == 1
    assert hub.server("bob") is not None

    # "Keep my GPU" in bob's JupyterLab: through his server to the service.
    token = hub.user_token("bob")

    def snooze() -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(
            f"{hub.url}/user/bob/gpuaas/api/reclaim/snooze",
            data=b"",
            method="POST",
            headers={"Authorization": f"token {token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    status, answer = snooze()
    left = (deadline - datetime.now(timezone.utc)).total_seconds()
    assert left > 0, f"the restart and the snooze took longer than the 60 s warning ({-left:.0f}s)"
    assert status == 200, answer
    assert answer["allowed"] is True
    assert answer["snoozes_left"] == 0
    status, answer = snooze()
    assert status == 409
    assert "no snoozes left" in answer["reason"]

    # Past the original deadline: bob is kept, dave alone frees too little, nobody stops.
    await asyncio.sleep(left + 5)
    assert hub.server("bob") is not None
    assert hub.server("dave") is not None
    b = await pod_of(k8s, "bob")
    d = await pod_of(k8s, "dave")
    assert b is not None
    assert d is not None
    assert b["metadata"]["annotations"]["gpuaas.jupyter.org/reclaim-snoozes-used"] == "1"
    assert WARNED not in d["metadata"]["annotations"]  # its warning is withdrawn
    for user in spawns:
        hub.stop(user)
    await delete_jobs(cluster, k8s)

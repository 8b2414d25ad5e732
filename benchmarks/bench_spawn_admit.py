"""Submit → pod admitted → running → server listening → ready: GPUaaSSpawner vs KubeSpawner.

Same cluster (the dev cluster, started or reused as ``make cluster-up`` does), same run, the same
hub configuration (devcluster/hub.py) except the spawner class. Both spawn the offering
``local-mig-1g`` (size small) for alice in team-a, one server at a time: GPUaaSSpawner from the
form's options; KubeSpawner with the same resources, node selector, toleration and ``/dev/shm``
set by hand and the Kueue labels (team-a's LocalQueue, the ``interactive`` priority class) set with
``extra_labels``, so both pods go through Kueue's plain-Pod integration.

Both hubs run for the whole benchmark and take turns (the order alternates each round), so that
whatever else loads the machine falls on both alike.

"submitted": the POST to ``/hub/api/users/alice/server`` is sent. "admitted": the pod exists and
Kueue has removed its scheduling gate (quota reserved, Workload admitted). "running": the pod is
Running with its container ready (what KubeSpawner's ``start`` waits for). "listening": the
``jupyterhub-singleuser`` process answers at the pod's IP (checked by this script, every 0.1 s).
"ready": the hub's REST API says the server is ready. The hub checks the server itself with
JupyterHub's exponential backoff (random waits of up to 5 s), so listening → ready varies by
seconds between spawns with either spawner.

    python -m benchmarks.bench_spawn_admit [--spawns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devcluster import cluster as devcluster  # noqa: E402
from devcluster.config import load_settings  # noqa: E402
from devcluster.hub import HubProcess, HubSettings  # noqa: E402
from devcluster.testing import Cluster  # noqa: E402

NAMESPACE = "jupyter-users"
USER = "alice"
PHASES = ("admitted", "running", "listening", "ready")
TOLERATION = {
    "key": "gpuaas.dev/local-node",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}

# Plain KubeSpawner, given by hand what GPUaaSSpawner derives from the offering local-mig-1g.
KUBESPAWNER_CONFIG = f"""
c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
c.KubeSpawner.extra_labels = {{
    "kueue.x-k8s.io/queue-name": "team-a",
    "kueue.x-k8s.io/priority-class": "interactive",
}}
c.KubeSpawner.cpu_guarantee = 0.5
c.KubeSpawner.cpu_limit = 1
c.KubeSpawner.mem_guarantee = "512M"  # KubeSpawner: M = MiB
c.KubeSpawner.mem_limit = "1G"
c.KubeSpawner.extra_resource_guarantees = {{"nvidia.com/mig-1g.5gb": "1"}}
c.KubeSpawner.extra_resource_limits = {{"nvidia.com/mig-1g.5gb": "1"}}
c.KubeSpawner.node_selector = {{"gpuaas.dev/pool": "local"}}
c.KubeSpawner.tolerations = [{TOLERATION!r}]
c.KubeSpawner.volumes = [
    {{"name": "shm", "emptyDir": {{"medium": "Memory", "sizeLimit": "256Mi"}}}}
]
c.KubeSpawner.volume_mounts = [{{"name": "shm", "mountPath": "/dev/shm"}}]
"""


def _api(hub: HubProcess, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"{hub.url}/hub/api{path}",
        method=method,
        data=data,
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _answers(url: str) -> bool:
    """Whether a server answers at ``url`` as the hub counts it (any status below 500)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(r.status) < 500
    except urllib.error.HTTPError as e:
        return e.code < 500
    except OSError:
        return False


async def _pod(api: Any, name: str) -> dict[str, Any] | None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        pod = await client.CoreV1Api(api).read_namespaced_pod(name, NAMESPACE)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return dict(api.sanitize_for_serialization(pod))


def _running(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    ready = [c.get("ready") for c in status.get("containerStatuses") or []]
    return status.get("phase") == "Running" and bool(ready) and all(ready)


async def one_spawn(
    hub: HubProcess, token: str, api: Any, body: dict[str, Any], timeout: float
) -> dict[str, float]:
    """Seconds from submit to each phase; three watchers run side by side so none delays
    another."""
    watch = SpawnWatch(hub, token, api, time.monotonic() + timeout)
    # The POST itself waits up to the hub's slow_spawn_timeout (10 s): watch while it runs.
    post = asyncio.ensure_future(
        asyncio.to_thread(_api, hub, token, "POST", f"/users/{USER}/server", body)
    )
    await asyncio.gather(watch.pod(), watch.server(), watch.hub_ready())
    status, resp = await post
    if status not in (201, 202):
        raise RuntimeError(f"spawn refused: {status} {resp}\n{hub.log_tail()}")
    if "ready" not in watch.seen:
        raise RuntimeError(f"spawn not ready in {timeout:.0f}s\n{hub.log_tail()}")
    return passed_phases(watch.seen)


def passed_phases(seen: dict[str, float]) -> dict[str, float]:
    """A phase passed between two looks counts as reached when the next one was seen."""
    next_seen = seen["ready"]
    for phase in reversed(PHASES):
        if phase not in seen:
            seen[phase] = next_seen
        next_seen = min(next_seen, seen[phase])
    return seen


class SpawnWatch:
    """The phases of one spawn as three watchers see them, in seconds from its start."""

    def __init__(self, hub: HubProcess, token: str, api: Any, deadline: float) -> None:
        self.hub, self.token, self.api, self.deadline = hub, token, api, deadline
        self.t0 = time.monotonic()
        self.seen: dict[str, float] = {}
        self.pod_ip: str | None = None

    def mark(self, phase: str) -> None:
        self.seen.setdefault(phase, time.monotonic() - self.t0)

    def _watching(self, phase: str) -> bool:
        return phase not in self.seen and time.monotonic() < self.deadline

    async def pod(self) -> None:
        """Admitted (its scheduling gates gone; its IP noted) and Running."""
        while self._watching("running"):
            pod = await _pod(self.api, f"jupyter-{USER}")
            if pod and not (pod.get("spec") or {}).get("schedulingGates"):
                self.mark("admitted")
                self.pod_ip = self.pod_ip or (pod.get("status") or {}).get("podIP")
                if _running(pod):
                    self.mark("running")
            await asyncio.sleep(0.05)

    async def server(self) -> None:
        """Listening: the server answers at the pod's IP."""
        while self._watching("listening"):
            if self.pod_ip:
                url = f"http://{self.pod_ip}:8888/user/{USER}/api"
                if await asyncio.to_thread(_answers, url):
                    self.mark("listening")
            await asyncio.sleep(0.1)

    async def hub_ready(self) -> None:
        """Ready: the hub's REST API says so."""
        while self._watching("ready"):
            status, user = await asyncio.to_thread(
                _api, self.hub, self.token, "GET", f"/users/{USER}"
            )
            server = (user or {}).get("servers", {}).get("") if status == 200 else None
            if server and server.get("ready"):
                self.mark("ready")
            await asyncio.sleep(0.05)


async def stop(hub: HubProcess, token: str, api: Any, timeout: float = 90.0) -> None:
    await asyncio.to_thread(_api, hub, token, "DELETE", f"/users/{USER}/server")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status, user = await asyncio.to_thread(_api, hub, token, "GET", f"/users/{USER}")
        server = (user or {}).get("servers", {}).get("") if status == 200 else None
        if server is None and await _pod(api, f"jupyter-{USER}") is None:
            return
        await asyncio.sleep(0.3)
    raise RuntimeError(f"server did not stop in {timeout:.0f}s\n{hub.log_tail()}")


@contextlib.contextmanager
def run_hub(cluster: Cluster, label: str, extra_config: str) -> Iterator[tuple[HubProcess, str]]:
    with tempfile.TemporaryDirectory(prefix=f"bench-admit-{label}-") as d:
        state = Path(d)
        token = secrets.token_hex(24)
        kubeconfig = cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig")
        settings = HubSettings(
            state_dir=state,
            kubeconfig=kubeconfig,
            service_token=token,
            queue_timeout=300.0,
            start_timeout=120,
            poll_interval=1.0,
            extra_config=extra_config,
        )
        hub = HubProcess(settings)
        hub.start(timeout=180)
        try:
            yield hub, token
        finally:
            hub.stop()


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def table(results: dict[str, list[dict[str, float]]]) -> str:
    """p50 / p95 in ms of submit → each phase, and of the hub's part (listening → ready)."""
    cols = [*PHASES, "listening→ready"]
    lines = [f"{'spawner':<14} {'n':>3} " + " ".join(f"{c + ' p50/p95':>22}" for c in cols)]
    for label, rows in results.items():
        cells = []
        for c in cols:
            if c == "listening→ready":
                xs = [(r["ready"] - r["listening"]) * 1000 for r in rows]
            else:
                xs = [r[c] * 1000 for r in rows]
            cells.append(f"{pct(xs, 0.5):>9.0f} / {pct(xs, 0.95):>6.0f} ms")
        lines.append(f"{label:<14} {len(rows):>3} " + " ".join(f"{c:>22}" for c in cells))
    return "\n".join(lines)


async def main_async(spawns: int) -> dict[str, list[dict[str, float]]]:
    settings = load_settings()
    info = devcluster.up(settings)
    cluster = Cluster(info)
    gpuaas_body = {"team": "team-a", "offering": "local-mig-1g", "size": "small"}
    results: dict[str, list[dict[str, float]]] = {"GPUaaSSpawner": [], "KubeSpawner": []}
    try:
        with (
            run_hub(cluster, "gpuaas", "") as (g_hub, g_token),
            run_hub(cluster, "kubespawner", KUBESPAWNER_CONFIG) as (k_hub, k_token),
        ):
            contenders = [
                ("GPUaaSSpawner", g_hub, g_token, gpuaas_body),
                ("KubeSpawner", k_hub, k_token, {}),
            ]
            async with cluster.api("jupyterhub", "hub") as api:
                for _, hub, token, _ in contenders:
                    await stop(hub, token, api)  # nothing left from an earlier run
                for i in range(spawns + 1):  # round 0 is a warm-up (image, caches)
                    order = contenders if i % 2 == 0 else contenders[::-1]
                    for label, hub, token, body in order:
                        seen = await one_spawn(hub, token, api, body, timeout=180)
                        await stop(hub, token, api)
                        if i:
                            results[label].append(seen)
                        print(
                            f"  {label:<13} {i or 'warm-up'}: "
                            + ", ".join(f"{p} {seen[p] * 1000:.0f} ms" for p in PHASES),
                            flush=True,
                        )
    finally:
        if info.started:
            devcluster.down(settings)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spawns", type=int, default=10, help="measured spawns per spawner")
    args = parser.parse_args(argv)
    results = asyncio.run(main_async(args.spawns))
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

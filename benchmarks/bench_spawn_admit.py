"""Submit → pod admitted and submit → server ready: GPUaaSSpawner vs plain KubeSpawner.

Same cluster (the dev cluster, started or reused as ``make cluster-up`` does), same run, the same
hub configuration (demo/hub.py) except the spawner class. Both spawn the offering
``local-mig-1g`` (size small) for alice in team-a, one server at a time: GPUaaSSpawner from the
form's options; KubeSpawner with the same resources, node selector, toleration and ``/dev/shm``
set by hand and the Kueue labels (team-a's LocalQueue, the ``interactive`` priority class) set with
``extra_labels``, so both pods go through Kueue's plain-Pod integration.

"submitted": the POST to ``/hub/api/users/alice/server`` is sent. "admitted": the pod exists and
Kueue has removed its scheduling gate (quota reserved, Workload admitted). "ready": the hub's
REST API says the server is ready (the ``jupyterhub-singleuser`` process on the node agent's node
answered).

    python -m benchmarks.bench_spawn_admit [--spawns 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from demo.hub import HubProcess, HubSettings  # noqa: E402
from devcluster import cluster as devcluster  # noqa: E402
from devcluster.config import load_settings  # noqa: E402
from devcluster.testing import Cluster  # noqa: E402

NAMESPACE = "jupyter-users"
USER = "alice"
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


async def one_spawn(
    hub: HubProcess, token: str, api: Any, body: dict[str, Any], timeout: float
) -> tuple[float, float]:
    pod_name = f"jupyter-{USER}"
    t0 = time.monotonic()
    # The POST itself waits up to the hub's slow_spawn_timeout (10 s): watch while it runs.
    post = asyncio.ensure_future(
        asyncio.to_thread(_api, hub, token, "POST", f"/users/{USER}/server", body)
    )
    admitted = ready = 0.0
    deadline = t0 + timeout
    while time.monotonic() < deadline and not (admitted and ready):
        if post.done():
            status, resp = post.result()
            if status not in (201, 202):
                raise RuntimeError(f"spawn refused: {status} {resp}\n{hub.log_tail()}")
        if not admitted:
            pod = await _pod(api, pod_name)
            if pod and not (pod.get("spec") or {}).get("schedulingGates"):
                admitted = time.monotonic() - t0
        if not ready:
            status, user = await asyncio.to_thread(_api, hub, token, "GET", f"/users/{USER}")
            server = (user or {}).get("servers", {}).get("") if status == 200 else None
            if server and server.get("ready"):
                ready = time.monotonic() - t0
                admitted = admitted or ready  # gate gone before we looked
        await asyncio.sleep(0.05)
    await post
    if not (admitted and ready):
        raise RuntimeError(f"spawn not ready in {timeout:.0f}s\n{hub.log_tail()}")
    return admitted, ready


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


async def run_spawner(
    cluster: Cluster, label: str, extra_config: str, body: dict[str, Any], spawns: int
) -> list[tuple[float, float]]:
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
        out: list[tuple[float, float]] = []
        try:
            async with cluster.api("jupyterhub", "hub") as api:
                await stop(hub, token, api)  # nothing left from an earlier run
                await asyncio.to_thread(_api, hub, token, "GET", f"/users/{USER}")
                for i in range(spawns + 1):  # the first is a warm-up (image, caches)
                    admitted, ready = await one_spawn(hub, token, api, body, timeout=180)
                    await stop(hub, token, api)
                    if i:
                        out.append((admitted, ready))
                    print(
                        f"  {label} {i or 'warm-up'}: admitted {admitted * 1000:.0f} ms,"
                        f" ready {ready * 1000:.0f} ms",
                        flush=True,
                    )
        finally:
            hub.stop()
        return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = (len(xs) - 1) * p
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def table(results: dict[str, list[tuple[float, float]]]) -> str:
    lines = [
        f"{'spawner':<14} {'n':>3} {'admitted p50':>13} {'admitted p95':>13}"
        f" {'ready p50':>10} {'ready p95':>10}",
    ]
    for label, rows in results.items():
        adm = [a * 1000 for a, _ in rows]
        rdy = [r * 1000 for _, r in rows]
        lines.append(
            f"{label:<14} {len(rows):>3} {pct(adm, 0.5):>10.0f} ms {pct(adm, 0.95):>10.0f} ms"
            f" {pct(rdy, 0.5):>7.0f} ms {pct(rdy, 0.95):>7.0f} ms"
        )
    return "\n".join(lines)


async def main_async(spawns: int) -> dict[str, list[tuple[float, float]]]:
    settings = load_settings()
    info = devcluster.up(settings)
    cluster = Cluster(info)
    results: dict[str, list[tuple[float, float]]] = {}
    try:
        body = {"team": "team-a", "offering": "local-mig-1g", "size": "small"}
        results["GPUaaSSpawner"] = await run_spawner(cluster, "gpuaas", "", body, spawns)
        results["KubeSpawner"] = await run_spawner(
            cluster, "kubespawner", KUBESPAWNER_CONFIG, {}, spawns
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

"""The GPU console's API with N servers in the gpuaas service's state: latency, and the
Kubernetes and Hub calls per request.

The state comes through the service's normal inputs, as in ``bench_culler`` (whose set-up this
reuses): ``--servers`` notebook pods on kwok's nodes, seen by the service's pod watch and Kueue
watch caches (``WatchedKueueView``, the gpuaas ServiceAccount's kubeconfig through
``benchmarks/kube_counter.py``'s counting proxy); a hub whose database holds the N users with
running servers (``bench_culler.bench_hub``); an activity report per server into the
``ActivityStore``; then real ``ReclaimLoop`` cycles (real ``HubClient``, ``KubeClient``). The
console is the service's own tornado handlers (``gpuaas_culler.web.console``) on a loopback
port, with the service's ``HubOAuth`` asking the hub who the caller's token belongs to (a hub
service ``ops`` with the console scope). Counted per request: Kubernetes requests at the proxy,
Hub requests at tornado's HTTP client (every ``fetch`` to the hub's API).

Timed: ``--requests`` sequential ``GET api/console`` over one kept-alive connection (the page
polls every 5 s), after a first one (the token's hub lookup, then cached by HubOAuth); and the
answer's build from memory alone (what the first request after each cycle pays).

    python -m benchmarks.bench_console [--servers 5000] [--requests 200] [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import bench_culler as bc  # noqa: E402
from devcluster.cluster import ClusterInfo, running  # noqa: E402

OPS_TOKEN = secrets.token_hex(24)
CONSOLE_HUB_CONFIG = f"""
c.JupyterHub.custom_scopes = {{{{"custom:gpuaas:console": {{{{"description": "the console"}}}}}}}}
c.JupyterHub.services.append({{{{"name": "ops", "api_token": "{OPS_TOKEN}"}}}})
c.JupyterHub.load_roles.append(
    {{{{"name": "console", "scopes": ["custom:gpuaas:console"], "services": ["ops"]}}}}
)
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_on(args: argparse.Namespace, info: ClusterInfo) -> int:
    from jupyterhub.services.auth import HubOAuth
    from kubernetes_asyncio import config as kconfig
    from kubernetes_asyncio.config import kube_config
    from tornado import web
    from tornado.httpclient import AsyncHTTPClient

    from benchmarks.kube_counter import CountingProxy
    from devcluster.testing import Cluster
    from gpuaas_culler.clients.hub import HubClient
    from gpuaas_culler.clients.kubernetes import KubeClient, notebook_pod_reflector
    from gpuaas_culler.console.state import ConsoleState
    from gpuaas_culler.reclaim.activity_store import ActivityStore
    from gpuaas_culler.reclaim.loop import ReclaimLoop, Settings
    from gpuaas_culler.reclaim.policy import load_policy
    from gpuaas_culler.web.console import console_handlers
    from jupyter_gpuaas.core.watch import WatchedKueueView

    users = [f"bench{i:05d}" for i in range(args.servers)]
    admin = await kconfig.new_client_from_config(str(info.kubeconfig))
    t = time.monotonic()
    print(f"creating {len(users)} pods on kwok's nodes ...", flush=True)
    await bc.create_pods(admin, users)
    print(f"  {time.monotonic() - t:.1f} s", flush=True)
    logdir = Path(tempfile.mkdtemp(prefix="bench-console-"))
    direct = Cluster(info).kubeconfig_for("jupyterhub", "gpuaas", logdir / "gpuaas.kubeconfig")
    proxy = CountingProxy(direct, logdir / "counted.kubeconfig").__enter__()
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(proxy.kubeconfig)
    await kconfig.load_kube_config(config_file=str(proxy.kubeconfig))
    from kubespawner.clients import load_config, shared_client

    load_config()
    view = WatchedKueueView(
        namespaces=[bc.NS, "team-a", "team-b"],
        custom_objects_api=lambda: shared_client("CustomObjectsApi"),
        poll_interval=2.0,
    )
    await view.start(timeout=60)
    pod_watch = notebook_pod_reflector(bc.NS)
    await pod_watch.start()
    await asyncio.wait_for(pod_watch.first_load_future, 120)
    bc.HUB_CONFIG = bc.HUB_CONFIG + CONSOLE_HUB_CONFIG
    latencies: list[float] = []
    builds: list[float] = []
    status = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"starting a hub with {len(users)} running servers ...", flush=True)
            async with bc.bench_hub(Path(tmp), users) as hub:
                counter = bc.HubCounter(hub["api"])
                store = ActivityStore()
                loop = ReclaimLoop(
                    hub=HubClient(hub["api"], hub["tokens"]["culler"], timeout=120),
                    kube=KubeClient(timeout=120),
                    view=view,
                    policies=load_policy(bc.POLICY),
                    store=store,
                    settings=Settings(
                        notebook_namespace=bc.NS, job_namespaces=("team-a", "team-b")
                    ),
                    pods=lambda: pod_watch.resources.values(),
                )
                now = datetime.now(timezone.utc)
                payload = bc.idle_report(now, now - timedelta(minutes=40))
                for u in users:
                    store.record(u, "", payload, now)
                for _ in range(2):  # two cycles: the ledger counts the time between them
                    if await loop.cycle() is None:
                        raise RuntimeError(f"culler cycle failed: {loop.last_error}")
                console = ConsoleState(
                    loop,
                    view,
                    notebook_namespace=bc.NS,
                    job_namespaces=("team-a", "team-b"),
                    regret_window=timedelta(hours=1),
                )
                oauth = HubOAuth(
                    api_url=hub["api"] + "/",
                    api_token=hub["tokens"]["culler"],
                    oauth_client_id="service-gpuaas",
                    cache_max_age=300,
                )
                app = web.Application(
                    console_handlers("/services/gpuaas/", console, oauth),
                    cookie_secret=secrets.token_bytes(32),
                )
                port = bc.free_port()
                server = app.listen(port, "127.0.0.1")
                url = f"http://127.0.0.1:{port}/services/gpuaas/api/console"
                client = AsyncHTTPClient(force_instance=True)
                headers = {"Authorization": f"token {OPS_TOKEN}"}
                with counter.installed():
                    first = await client.fetch(url, headers=headers, request_timeout=120)
                    body = json.loads(first.body)
                    print(
                        f"first request (the token's hub lookup): {len(body['workbenches'])}"
                        f" workbenches, {len(body['teams'])} teams, {len(first.body) / 1e6:.1f} MB",
                        flush=True,
                    )
                    hub0, k0 = counter.n, proxy.count
                    for _ in range(args.requests):
                        t0 = time.perf_counter()
                        await client.fetch(url, headers=headers, request_timeout=120)
                        latencies.append((time.perf_counter() - t0) * 1000)
                    hub_calls, k_calls = counter.n - hub0, proxy.count - k0
                for _ in range(5):
                    t0 = time.perf_counter()
                    console._build()
                    builds.append((time.perf_counter() - t0) * 1000)
                server.stop()
                client.close()
                # said before the clean-up, which may time out on a loaded API server
                p95 = pct(latencies, 95)
                print()
                print(f"{len(users)} servers; {len(latencies)} sequential GET api/console")
                print(
                    f"  latency ms: p50 {pct(latencies, 50):.1f}  p95 {p95:.1f}"
                    f"  max {max(latencies):.1f}  (aim: p95 <= 200)"
                )
                print(
                    "  answer built from memory (the first request after a cycle): median"
                    f" {statistics.median(builds):.0f} ms, max {max(builds):.0f} ms"
                )
                print(
                    f"  Kubernetes requests during them: {k_calls}; Hub requests: {hub_calls}"
                    " (aim: 0 and 0)"
                )
                if p95 > 200 or k_calls or hub_calls:
                    status = 1
    finally:
        await view.stop()
        await pod_watch.stop()
        if not args.keep:
            await bc.delete_pods(admin)
        await admin.close()
        proxy.__exit__(None, None, None)

    return status


async def run(args: argparse.Namespace) -> int:
    with running() as info:
        return await run_on(args, info)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_console", description=__doc__)
    parser.add_argument("--servers", type=int, default=5000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="leave the pods in the cluster")
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

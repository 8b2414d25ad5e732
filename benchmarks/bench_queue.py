"""200 concurrent sidebars polling the gpuaas service's queue endpoint (loopback).

Runs the dev cluster (the running one if any), a real JupyterHub with the gpuaas service
(tests/integration/queue_hub.py), creates ``--users`` hub users each with their own server-style
token, queues a few labelled training Jobs, then has every user poll
``/services/gpuaas/api/queue`` through the hub's proxy every ``--interval`` seconds for
``--duration`` seconds. Prints p50/p95/max latency and the Kubernetes requests the service made
during the run, counted from the outside (the service's kubeconfig points at a counting proxy in
front of the API server, ``benchmarks/kube_counter.py``): they come from its pollers and
watches, not from the requests.

    python -m benchmarks.bench_queue [--users 200] [--duration 30] [--interval 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for extra in (REPO,):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))


async def _poll(
    url: str, token: str, until: float, interval: float, out: list[float], errors: list[str]
) -> None:
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    client = AsyncHTTPClient()
    while time.monotonic() < until:
        start = time.perf_counter()
        try:
            await client.fetch(url, headers={"Authorization": f"token {token}"}, request_timeout=30)
            out.append(time.perf_counter() - start)
        except (HTTPClientError, OSError) as e:
            errors.append(str(e))
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - start)))


async def _run(args: argparse.Namespace) -> None:
    from tornado.httpclient import AsyncHTTPClient

    import devcluster
    from benchmarks.kube_counter import CountingProxy
    from devcluster.config import load_settings
    from devcluster.queue_hub import OPERATOR_TOKEN, queue_hub
    from devcluster.testing import Cluster, create_job, job_manifest

    AsyncHTTPClient.configure(None, max_clients=args.users)
    info = devcluster.up(load_settings())
    cluster = Cluster(info)
    direct = info.settings.state_dir / "credentials" / "gpuaas.kubeconfig"
    with (
        tempfile.TemporaryDirectory() as tmp,
        CountingProxy(direct, Path(tmp) / "counted.kubeconfig") as proxy,
        queue_hub(Path(tmp), info.settings.state_dir, kubeconfig=proxy.kubeconfig) as hub,
    ):
        users = [f"u{i:03d}" for i in range(args.users)]
        hub.request("/hub/api/users", hub.admin_token, "POST", {"usernames": users})
        tokens = [hub.user_token(u) for u in users]
        alice = hub.user_token("alice")
        async with cluster.api("team-a", "alice") as api:
            for i in range(3):
                job = job_manifest(f"bench-q{i}", gpus=8)
                job["metadata"]["labels"]["gpuaas.jupyter.org/user"] = "alice"
                job["spec"]["template"]["spec"]["nodeSelector"] = {"gpuaas.dev/pool": "h100"}
                await create_job(api, "team-a", job)
            await asyncio.sleep(5)
            url = hub.service_url + "api/queue"
            # Warm up: one request per token (the service asks the hub once per token, cached).
            warm: list[float] = []
            await asyncio.gather(
                *(_poll(url, t, time.monotonic() + 0.1, 1, warm, []) for t in [*tokens, alice])
            )
            before = hub.request("/services/gpuaas/api/health", OPERATOR_TOKEN)
            kube_before = proxy.count
            latencies: list[float] = []
            errors: list[str] = []
            until = time.monotonic() + args.duration
            started = time.monotonic()
            await asyncio.gather(
                *(_poll(url, t, until, args.interval, latencies, errors) for t in tokens)
            )
            elapsed = time.monotonic() - started
            after = hub.request("/services/gpuaas/api/health", OPERATOR_TOKEN)
            kube = proxy.count - kube_before
            by_request = dict(proxy.by_request)
            sample: dict[str, Any] = hub.queue(alice)
            for i in range(3):
                await api.call_api(
                    f"/apis/batch/v1/namespaces/team-a/jobs/bench-q{i}",
                    "DELETE",
                    query_params=[("propagationPolicy", "Background")],
                    auth_settings=["BearerToken"],
                )
    served = after["requests_served"] - before["requests_served"]
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    print(f"users={args.users} duration={elapsed:.1f}s interval={args.interval}s")
    print(f"requests ok={len(latencies)} errors={len(errors)} ({len(latencies) / elapsed:.0f}/s)")
    print(
        f"latency p50={q[49] * 1000:.1f}ms p95={q[94] * 1000:.1f}ms "
        f"max={max(latencies, default=0) * 1000:.1f}ms"
    )
    print(
        f"service: requests served={served}, Kubernetes requests during the run={kube} "
        f"(polled queues {after['polled_queues']}), per request={kube / max(served, 1):.4f}"
    )
    print(f"  Kubernetes requests since the service started, most frequent: {_kinds(by_request)}")
    print(f"alice's items: {[(i['name'], i['position_in_local_queue']) for i in sample['items']]}")
    if errors:
        print("first error:", errors[0])


def _kinds(by_request: dict[tuple[str, str], int], top: int = 6) -> str:
    """The most frequent requests, ``GET /apis/... 12``."""
    ranked = sorted(by_request.items(), key=lambda kv: -kv[1])[:top]
    return ", ".join(f"{verb} {path} {n}" for (verb, path), n in ranked)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--users", type=int, default=200)
    p.add_argument("--duration", type=float, default=30.0)
    p.add_argument("--interval", type=float, default=2.0)
    asyncio.run(_run(p.parse_args()))


if __name__ == "__main__":
    main()

"""One user floods the gpuaas service while others poll: the others' answers before and during.

Runs the dev cluster (the running one if any) and a real JupyterHub with the gpuaas service
(devcluster/queue_hub.py). ``--users`` hub users each get a token with a server token's scopes;
every one of them asks ``api/queue`` every ``--interval`` seconds and posts an activity report
every ``--report-interval`` seconds (a sidebar and its server, sped up). After ``--phase`` seconds
of that alone, one more user ("flooder", with their own server's token) floods the service for
another ``--phase`` seconds from ``--flood-tasks`` concurrent tasks, at most ``--flood-max``
requests in all: oversized report bodies, reports as fast as answered, queue questions as fast as
answered, and malformed reports, in turn. Requests go to the service's port on loopback (the
hub's proxy is not what is measured).

Prints the normal users' p50/p95/max for queue answers and for reports, before and during the
flood, the flooder's answer codes, and the service's CPU seconds in each phase (from
/proc/PID/stat).

    python -m benchmarks.bench_service_flood [--users 20] [--phase 20] [--flood-tasks 8]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from jupyter_gpuaas.core.activity import Activity, KernelActivity, activity_json

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _report() -> bytes:
    at = datetime.now(timezone.utc)
    kernel = KernelActivity("k1", "idle", at)
    idle = Activity(sampled_at=at, source="simulated", kernels=(kernel,), idle_since=at)
    return json.dumps(activity_json(idle)).encode()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime + stime


class Phase:
    def __init__(self) -> None:
        self.queue: list[float] = []
        self.reports: list[float] = []
        self.errors: collections.Counter[str] = collections.Counter()


async def _fetch(client: Any, url: str, token: str, body: bytes | None = None) -> int:
    from tornado.httpclient import HTTPClientError

    try:
        resp = await client.fetch(
            url,
            method="POST" if body is not None else "GET",
            body=body,
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
            request_timeout=30,
        )
        return int(resp.code)
    except HTTPClientError as e:
        return int(e.code)
    except OSError:
        return 599  # the service closed the connection (an oversized body is cut off)


async def _normal_user(
    client: Any, base: str, token: str, until: float, args: argparse.Namespace, out: Phase
) -> None:
    next_report = time.monotonic()
    while time.monotonic() < until:
        start = time.perf_counter()
        code = await _fetch(client, base + "api/queue", token)
        if code == 200:
            out.queue.append(time.perf_counter() - start)
        else:
            out.errors[f"queue {code}"] += 1
        if time.monotonic() >= next_report:
            next_report += args.report_interval
            t = time.perf_counter()
            code = await _fetch(client, base + "api/activity", token, _report())
            if code == 200:
                out.reports.append(time.perf_counter() - t)
            else:
                out.errors[f"report {code}"] += 1
        await asyncio.sleep(max(0.0, args.interval - (time.perf_counter() - start)))


async def _flooder(
    client: Any,
    base: str,
    token: str,
    until: float,
    budget: list[int],
    codes: dict[str, collections.Counter[int]],
    offset: int,
) -> None:
    big = b'{"pad": "' + b"x" * (256 * 1024) + b'"}'  # 256 KiB, over the 64 KiB limit
    kinds = ("oversized", "reports", "queue", "malformed")
    i = offset
    while time.monotonic() < until and budget[0] > 0:
        budget[0] -= 1
        kind = kinds[i % len(kinds)]
        i += 1
        if kind == "oversized":
            code = await _fetch(client, base + "api/activity", token, big)
        elif kind == "reports":
            code = await _fetch(client, base + "api/activity", token, _report())
        elif kind == "queue":
            code = await _fetch(client, base + "api/queue", token)
        else:
            code = await _fetch(client, base + "api/activity", token, b'{"gpu_memory": "lots"}')
        codes[kind][code] += 1


def _q(xs: list[float]) -> str:
    if len(xs) < 2:
        return f"n={len(xs)}"
    q = statistics.quantiles(xs, n=100)
    return (
        f"n={len(xs)} p50={q[49] * 1000:.1f}ms p95={q[94] * 1000:.1f}ms max={max(xs) * 1000:.1f}ms"
    )


async def _run(args: argparse.Namespace) -> None:
    from tornado.httpclient import AsyncHTTPClient

    import devcluster
    from devcluster.config import load_settings
    from devcluster.queue_hub import queue_hub

    info = devcluster.up(load_settings())
    with tempfile.TemporaryDirectory() as tmp, queue_hub(Path(tmp), info.settings.state_dir) as hub:
        users = [f"n{i:03d}" for i in range(args.users)]
        hub.request("/hub/api/users", hub.admin_token, "POST", {"usernames": [*users, "flooder"]})

        def server_token(user: str) -> str:
            return hub.user_token(
                user, [f"access:servers!server={user}/", "access:services!service=gpuaas"]
            )

        tokens = [server_token(u) for u in users]
        flood_token = server_token("flooder")
        base = f"http://127.0.0.1:{hub.service_port}/services/gpuaas/"
        assert hub.hub.proc is not None
        pid = hub.hub.service_pid()
        if pid is None:
            raise RuntimeError("the gpuaas service process is not running")
        # Normal users and the flooder use separate clients: the flood must not queue the
        # others' requests inside this process.
        normal = AsyncHTTPClient(force_instance=True, max_clients=args.users * 2)
        flood = AsyncHTTPClient(force_instance=True, max_clients=args.flood_tasks)
        warm = Phase()  # the service asks the hub once per token; cached afterwards
        await asyncio.gather(
            *(_normal_user(normal, base, t, time.monotonic() + 0.1, args, warm) for t in tokens)
        )
        await _fetch(flood, base + "api/queue", flood_token)

        phases: dict[str, Phase] = {"before": Phase(), "during": Phase()}
        cpu: dict[str, float] = {}
        wall: dict[str, float] = {}
        codes: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
        budget = [args.flood_max]
        for name, flooding in (("before", False), ("during", True)):
            c0, t0 = _cpu_seconds(pid), time.monotonic()
            until = t0 + args.phase
            tasks = [_normal_user(normal, base, t, until, args, phases[name]) for t in tokens]
            if flooding:
                tasks += [
                    _flooder(flood, base, flood_token, until, budget, codes, k)
                    for k in range(args.flood_tasks)
                ]
            await asyncio.gather(*tasks)
            cpu[name], wall[name] = _cpu_seconds(pid) - c0, time.monotonic() - t0
        normal.close()
        flood.close()

    print(
        f"users={args.users} phase={args.phase:g}s interval={args.interval:g}s "
        f"report_interval={args.report_interval:g}s flood_tasks={args.flood_tasks} "
        f"flood_max={args.flood_max}"
    )
    for name, ph in phases.items():
        print(f"{name:>6}: queue {_q(ph.queue)}")
        print(f"{'':>6}  reports {_q(ph.reports)}")
        print(f"{'':>6}  normal users' errors: {dict(ph.errors) or 'none'}")
        print(
            f"{'':>6}  service CPU {cpu[name]:.1f}s in {wall[name]:.1f}s "
            f"({100 * cpu[name] / wall[name]:.0f}% of a core)"
        )
    sent = sum(sum(c.values()) for c in codes.values())
    print(f"flooder: {sent} requests ({sent / wall['during']:.0f}/s)")
    for kind, counter in sorted(codes.items()):
        print(f"  {kind}: {dict(sorted(counter.items()))}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--users", type=int, default=20)
    p.add_argument("--phase", type=float, default=20.0, help="seconds before, and during")
    p.add_argument("--interval", type=float, default=2.0, help="queue questions (seconds)")
    p.add_argument("--report-interval", type=float, default=5.0, help="reports (seconds)")
    p.add_argument("--flood-tasks", type=int, default=8)
    p.add_argument("--flood-max", type=int, default=20000, help="flood requests at most")
    asyncio.run(_run(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

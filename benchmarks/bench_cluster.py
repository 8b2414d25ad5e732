"""Figures of the dev cluster: build time, warm start, memory at rest, admission latency.

Run from the repository root: ``python -m benchmarks.bench_cluster`` (or ``python
benchmarks/bench_cluster.py``). It starts its own throwaway cluster (state under a temporary
directory, the first free block of ports from 28400, a free pod IP prefix from 127.44), so that
a cluster started with ``make cluster-up`` keeps running undisturbed, and stops it at the end.

- cold build: read from the timings ``build.sh`` records (``timings.tsv`` next to its log); with
  ``--cold-build DIR`` a real cold build runs into DIR (empty Go module and build caches too).
- warm start: wall time of ``devcluster.up`` with the binaries already built.
- memory at rest: RSS and PSS of every process of the cluster, 20 s after start.
- admission latency: 100 Jobs created at once in team-a's training queue (1 pod each, small cpu
  and memory, no GPU, so that all fit and none waits for quota): per Job, the time from the
  create call returning to the Workload's Admitted condition and to the pod's Running phase, as
  seen by watches in this process (millisecond resolution, unlike the API's timestamps).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from devcluster import cluster as devcluster  # noqa: E402
from devcluster.config import BUILD_SCRIPT, Settings, load_settings  # noqa: E402
from devcluster.testing import free_pod_ip_prefix, free_port_base  # noqa: E402

NAMESPACE = "team-a"


@dataclass
class Figures:
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, name: str, value: str, note: str = "") -> None:
        self.rows.append((name, value, note))
        print(f"  {name}: {value}  {note}", file=sys.stderr, flush=True)

    def table(self) -> str:
        w0 = max(len(r[0]) for r in self.rows)
        w1 = max(len(r[1]) for r in self.rows)
        lines = [
            f"| {'figure':<{w0}} | {'value':<{w1}} | note",
            f"|{'-' * (w0 + 2)}|{'-' * (w1 + 2)}|-----",
        ]
        lines += [f"| {a:<{w0}} | {b:<{w1}} | {c}" for a, b, c in self.rows]
        return "\n".join(lines)


def recorded_build_time(settings: Settings) -> tuple[str, str]:
    bin_dir = devcluster.bin_dir_for(settings)
    timings = settings.cache_dir / "build" / bin_dir.name / "timings.tsv"
    if not timings.is_file():
        return "n/a", f"no {timings}; measure with --cold-build DIR"
    steps = []
    total = None
    for line in timings.read_text().splitlines()[1:]:
        name, start, end = line.split("\t")
        if name == "total":
            total = int(end) - int(start)
        else:
            steps.append((name, int(end) - int(start)))
    if total is None:
        return "n/a", f"{timings} has no total (an interrupted build?)"
    if not any(name.startswith("building kube") for name, _ in steps):  # the Kubernetes step
        return "n/a", f"{timings} records a partial build only; measure with --cold-build DIR"
    longest = ", ".join(
        f"{n} {d // 60}m{d % 60:02d}s" for n, d in sorted(steps, key=lambda s: -s[1])[:3]
    )
    return f"{total // 60}m{total % 60:02d}s", f"recorded by build.sh; longest steps: {longest}"


def cold_build(directory: Path) -> tuple[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        GPUAAS_CACHE=str(directory / "cache"),
        GOMODCACHE=str(directory / "gomod"),
        GOCACHE=str(directory / "gocache"),
    )
    t0 = time.monotonic()
    subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, check=True, stdout=subprocess.DEVNULL)
    d = int(time.monotonic() - t0)
    return f"{d // 60}m{d % 60:02d}s", f"measured now, empty caches under {directory}"


def memory(info: devcluster.ClusterInfo) -> tuple[int, int, dict[str, int]]:
    rss = pss = 0
    per: dict[str, int] = {}
    for rec in info.processes:
        try:
            root = psutil.Process(rec.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
        for p in tree:
            try:
                mem = p.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            rss += mem.rss
            pss += getattr(mem, "pss", mem.rss)
            per[rec.name] = per.get(rec.name, 0) + mem.rss
    return rss, pss, per


def cpu_seconds(info: devcluster.ClusterInfo) -> float:
    total = 0.0
    for rec in info.processes:
        try:
            root = psutil.Process(rec.pid)
            for p in [root, *root.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(q * (len(values) - 1))))
    return values[k]


def admitted_job_uid(workload: dict[str, Any]) -> str | None:
    """The uid of the Job a Workload is for, once Kueue has admitted it (else None)."""
    uid: str | None = workload["metadata"].get("labels", {}).get("kueue.x-k8s.io/job-uid")
    conds = workload.get("status", {}).get("conditions", []) or []
    if any(c["type"] == "Admitted" and c["status"] == "True" for c in conds):
        return uid
    return None


def running_job_uid(pod: dict[str, Any]) -> str | None:
    """The uid of the Job a pod belongs to, once the pod is Running (else None)."""
    uid: str | None = pod["metadata"].get("labels", {}).get("batch.kubernetes.io/controller-uid")
    return uid if pod.get("status", {}).get("phase") == "Running" else None


def bench_job(i: int) -> dict[str, Any]:
    """The ``i``th benchmark Job: one pod that sleeps, in the training queue."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"bench-{i:03d}",
            "labels": {
                "kueue.x-k8s.io/queue-name": "training",
                "kueue.x-k8s.io/priority-class": "batch",
            },
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/bench:sim",
                            "command": ["sleep", "infinity"],
                            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                        }
                    ],
                }
            }
        },
    }


async def create_job(batch: Any, body: dict[str, Any]) -> str:
    """Create the Job; its uid."""
    resp = await batch.create_namespaced_job(NAMESPACE, body, _preload_content=False)
    raw = await resp.read()
    if resp.status >= 400:
        raise RuntimeError(f"creating a Job: HTTP {resp.status}: {raw[:300]!r}")
    return str(json.loads(raw)["metadata"]["uid"])


async def admission_latency(info: devcluster.ClusterInfo, jobs: int) -> dict[str, list[float]]:
    from kubernetes_asyncio import client, config, watch

    cfg = client.Configuration()
    await config.load_kube_config(config_file=str(info.kubeconfig), client_configuration=cfg)
    created: dict[str, float] = {}  # job uid -> time
    admitted: dict[str, float] = {}
    running: dict[str, float] = {}
    done = asyncio.Event()

    async with client.ApiClient(cfg) as api:
        custom: Any = client.CustomObjectsApi(api)
        core: Any = client.CoreV1Api(api)
        batch: Any = client.BatchV1Api(api)

        async def watch_workloads() -> None:
            w = watch.Watch(return_type="object")
            async for ev in w.stream(
                custom.list_namespaced_custom_object,
                "kueue.x-k8s.io",
                "v1beta2",
                NAMESPACE,
                "workloads",
            ):
                uid = admitted_job_uid(ev["raw_object"])
                if uid and uid not in admitted:
                    admitted[uid] = time.monotonic()

        async def watch_pods() -> None:
            w = watch.Watch(return_type="object")
            async for ev in w.stream(core.list_namespaced_pod, NAMESPACE):
                uid = running_job_uid(ev["raw_object"])
                if uid and uid not in running:
                    running[uid] = time.monotonic()
                    if len(running) == jobs:
                        done.set()

        watchers = [asyncio.create_task(watch_workloads()), asyncio.create_task(watch_pods())]
        await asyncio.sleep(1.0)  # let the watches start
        for i in range(jobs):
            uid = await create_job(batch, bench_job(i))
            created[uid] = time.monotonic()  # after the create call returned
        try:
            await asyncio.wait_for(done.wait(), timeout=300)
        finally:
            for t in watchers:
                t.cancel()
    return latency_figures(created, admitted, running)


def latency_figures(
    created: dict[str, float], admitted: dict[str, float], running: dict[str, float]
) -> dict[str, list[float]]:
    """Each Job's seconds from creation to admission, admission to Running, and creation to
    Running (Jobs that got there)."""
    to_admit = [admitted[u] - created[u] for u in created if u in admitted]
    to_run = [running[u] - created[u] for u in created if u in running]
    admit_to_run = [running[u] - admitted[u] for u in created if u in running and u in admitted]
    return {
        "created→admitted": to_admit,
        "admitted→running": admit_to_run,
        "created→running": to_run,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cold-build", type=Path, help="run a cold build into this directory")
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument(
        "--settle", type=float, default=20.0, help="seconds before measuring memory"
    )
    args = parser.parse_args(argv)

    figures = Figures()
    default = load_settings()
    print("cluster benchmark:", file=sys.stderr)
    if args.cold_build:
        figures.add("cold build", *cold_build(args.cold_build))
    else:
        figures.add("cold build", *recorded_build_time(default))

    with tempfile.TemporaryDirectory(prefix="gpuaas-bench-") as tmp:
        env = dict(os.environ)
        env.update(
            GPUAAS_CLUSTER_DIR=str(Path(tmp) / "cluster"),
            GPUAAS_CLUSTER_PORT_BASE=str(free_port_base(28400)),
            GPUAAS_CLUSTER_POD_IP_PREFIX=free_pod_ip_prefix(44),
        )
        settings = load_settings(env)
        devcluster.ensure_binaries(settings)
        t0 = time.monotonic()
        info = devcluster.up(settings, log=lambda _m: None)
        figures.add(
            "warm start",
            f"{time.monotonic() - t0:.1f} s",
            "`up` with binaries built, to every component ready",
        )
        try:
            time.sleep(args.settle)
            rss, pss, per = memory(info)
            top = ", ".join(
                f"{k} {v / 2**20:.0f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])
            )
            figures.add("memory at rest (RSS)", f"{rss / 2**20:.0f} MiB", f"MiB per process: {top}")
            figures.add(
                "memory at rest (PSS)", f"{pss / 2**20:.0f} MiB", "shared pages counted once"
            )
            c0, t0 = cpu_seconds(info), time.monotonic()
            time.sleep(10)
            share = (cpu_seconds(info) - c0) / (time.monotonic() - t0)
            figures.add("CPU at rest", f"{share * 100:.1f} % of a core", "over 10 s, all processes")
            lat = asyncio.run(admission_latency(info, args.jobs))
            for name, values in lat.items():
                if not values:
                    figures.add(name, "n/a", "nothing measured")
                    continue
                figures.add(
                    f"{name} ({len(values)} Jobs)",
                    f"p50 {statistics.median(values) * 1000:.0f} ms",
                    f"p95 {pct(values, 0.95) * 1000:.0f} ms, max {max(values) * 1000:.0f} ms",
                )
        finally:
            devcluster.down(settings, log=lambda _m: None)
    print(figures.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m benchmarks replay-check``: the replay's Kueue model against the real dev cluster.

1. **Calibration** (replay note §5.6): on the dev cluster (real kube-apiserver, scheduler,
   Kueue; kwok nodes), measured: a training Job's create → Workload admitted, admitted → pod
   Running, and delete of a running Job → the next queued Job admitted (quota freed); and the
   reclaim loop's cycle time (the project's ``ReclaimLoop`` with the real ``KubeClient`` and
   watch caches against this cluster). The compression factor is ``k = ⌊60 s ÷ L⌋`` with ``L``
   the p99 of create → Running, capped at ``--max-k``.
2. **Window**: one window of the same seeded trace (jobs submitted and sessions started in it),
   compressed by ``k``: training Jobs in the teams' namespaces through their ``training``
   LocalQueues, annotated ``gpuaas.dev/run-seconds`` = duration ÷ k (kwok ends them); notebook
   pods in ``jupyter-users`` labelled as the spawner labels them, through the teams' notebook
   LocalQueues, held for their session ÷ k (kwok never ends them; the driver deletes them).
3. The same window through the simulator (``static``: servers are kept for their session, as in
   the real window), in trace seconds.
4. Compared: which workloads were admitted, in which order, and each one's wait (real waits × k).

Not in this check (said in docs/replay.md): the reclaim loop acting on the real window (warnings,
reclaims and hand-offs on real pods).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import brain
from .policies import Static
from .run import DEFAULT_CATALOG, DEFAULT_POLICY, Task, make_trace, organisation
from .sim import NOTEBOOK_NAMESPACE, Simulation
from .trace import Trace

PRIVATE_ENV = {
    "GPUAAS_CLUSTER_PORT_BASE": "32400",
    "GPUAAS_CLUSTER_DIR": "/tmp/replay2-cluster/state",
    "GPUAAS_CLUSTER_POD_IP_PREFIX": "127.96",
}
RUN_SECONDS = "gpuaas.dev/run-seconds"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SMALL = {"cpu": "10m", "memory": "16Mi"}
"""cpu and memory of every pod: small enough that the cpu/memory quotas (which the model
leaves out) never bind."""


def pct(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    return xs[max(0, min(len(xs) - 1, math.ceil(q * len(xs)) - 1))]


# --------------------------------------------------------------------------- the window


def window_trace(trace: Trace, start_s: float, length_s: float) -> Trace:
    """The jobs submitted and sessions started in ``[start_s, start_s + length_s)``, shifted so
    the window starts at 0, on an empty cluster (both the real run and the model start so)."""
    end = start_s + length_s
    jobs = tuple(
        replace(j, submit_s=j.submit_s - start_s) for j in trace.jobs if start_s <= j.submit_s < end
    )
    sessions = tuple(
        replace(s, start_s=s.start_s - start_s)
        for s in trace.sessions
        if start_s <= s.start_s < end
    )
    return replace(trace, days=length_s / 86400, burn_in_s=0.0, jobs=jobs, sessions=sessions)


@dataclass
class Plan:
    """What the driver creates and deletes, in trace seconds."""

    name: str
    namespace: str
    kind: str
    at: float
    until: float | None
    body: dict[str, Any]


def plans(window: Trace, k: float) -> list[Plan]:
    org = organisation(Task("static", window.seed))
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    sim = Simulation(window, org, catalog, Static())
    out: list[Plan] = []
    for job in window.jobs:
        plan = _job(job.name, job.team, job.gpus, job.duration_s / k)
        out.append(replace(plan, at=job.submit_s))
    for session in window.sessions:
        offering = sim.choose_offering(session)
        tenant = catalog.tenants[session.team]
        name = f"pod-{session.user}-{session.name}-1".lower()
        gpu = {r: str(n) for r, n in offering.resources.items()}
        out.append(
            Plan(
                name,
                NOTEBOOK_NAMESPACE,
                "notebook",
                session.start_s,
                session.start_s + session.length_s,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": NOTEBOOK_NAMESPACE,
                        "labels": {
                            QUEUE_LABEL: tenant.local_queue,
                            PRIORITY_LABEL: "interactive",
                            brain.TEAM_LABEL: session.team,
                            brain.OFFERING_LABEL: offering.slug,
                            "component": "singleuser-server",
                        },
                        "annotations": {
                            brain.HUB_USERNAME_ANNOTATION: session.user,
                            brain.HUB_SERVERNAME_ANNOTATION: session.name,
                        },
                    },
                    "spec": {
                        "automountServiceAccountToken": False,
                        "nodeSelector": dict(offering.node_selector),
                        "containers": [
                            {
                                "name": "notebook",
                                "image": "registry.example/notebook:sim",
                                "resources": {"requests": {**SMALL, **gpu}, "limits": gpu},
                            }
                        ],
                    },
                },
            )
        )
    return sorted(out, key=lambda p: p.at)


def simulated(window: Trace) -> dict[str, dict[str, float]]:
    """The model's admissions of the window: name → {submitted, admitted} in trace seconds."""
    org = organisation(Task("static", window.seed))
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    sim = Simulation(window, org, catalog, Static())
    sim.run()
    out: dict[str, dict[str, float]] = {}
    for key, record in sim.jobs.items():
        out[key.split("/", 1)[1]] = {
            "submitted": record.job.submit_s,
            "admitted": record.first_admitted if record.first_admitted is not None else math.inf,
        }
    for state in sim.sessions.values():
        name = f"pod-{state.session.user}-{state.session.name}-1".lower()
        waited = [w for r, w, _after in sim.spawn_waits if r == state.session.start_s]
        out[name] = {
            "submitted": state.session.start_s,
            "admitted": (
                state.session.start_s + waited[0] - 30.0 if waited else math.inf
            ),  # spawn wait includes the 30 s server start; admission is before it
        }
    return out


# --------------------------------------------------------------------------- the cluster


class Real:
    """The dev cluster through kubernetes_asyncio: create, delete, watch Workloads."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.admitted: dict[str, float] = {}
        """owner name (Job or Pod) → monotonic time its Workload was first admitted."""
        self.running: dict[str, float] = {}
        self.created: dict[str, float] = {}

    async def __aenter__(self) -> Real:
        from kubernetes_asyncio import client, config

        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        self.custom: Any = client.CustomObjectsApi(self.api)
        self.core: Any = client.CoreV1Api(self.api)
        self.batch: Any = client.BatchV1Api(self.api)
        self.tasks = [
            asyncio.create_task(self._watch_workloads()),
            asyncio.create_task(self._watch_pods()),
        ]
        await asyncio.sleep(1.0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for t in self.tasks:
            t.cancel()
        await self.api.close()

    async def _watch_workloads(self) -> None:
        from kubernetes_asyncio import watch

        while True:
            w = watch.Watch(return_type="object")
            async for ev in w.stream(
                self.custom.list_cluster_custom_object, "kueue.x-k8s.io", "v1beta2", "workloads"
            ):
                obj = ev["raw_object"]
                owners = obj["metadata"].get("ownerReferences") or []
                conds = (obj.get("status") or {}).get("conditions") or []
                if owners and any(c["type"] == "Admitted" and c["status"] == "True" for c in conds):
                    self.admitted.setdefault(owners[0]["name"], time.monotonic())

    async def _watch_pods(self) -> None:
        from kubernetes_asyncio import watch

        while True:
            w = watch.Watch(return_type="object")
            async for ev in w.stream(self.core.list_pod_for_all_namespaces):
                obj = ev["raw_object"]
                if (obj.get("status") or {}).get("phase") == "Running":
                    labels = obj["metadata"].get("labels") or {}
                    owner = labels.get("job-name") or obj["metadata"]["name"]
                    self.running.setdefault(owner, time.monotonic())

    async def create(self, plan: Plan) -> None:
        self.created[plan.name] = time.monotonic()
        if plan.kind == "training":
            await self.batch.create_namespaced_job(plan.namespace, plan.body)
        else:
            await self.core.create_namespaced_pod(plan.namespace, plan.body)

    async def delete(self, plan: Plan) -> None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            if plan.kind == "training":
                await self.batch.delete_namespaced_job(
                    plan.name, plan.namespace, propagation_policy="Background"
                )
            else:
                await self.core.delete_namespaced_pod(
                    plan.name, plan.namespace, grace_period_seconds=0
                )
        except ApiException as e:
            if e.status != 404:
                raise


def _job(name: str, team: str, gpus: int, run_s: float | None = None) -> Plan:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": team,
            "labels": {QUEUE_LABEL: "training", PRIORITY_LABEL: "training"},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: f"{run_s:.2f}"} if run_s else {}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"gpuaas.dev/pool": "h100"},
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.example/train:sim",
                            "resources": {
                                "requests": {**SMALL, "nvidia.com/gpu": str(gpus)},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }
    return Plan(name, team, "training", 0.0, None, body)


async def _wait(cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("the cluster did not get there in time")
        await asyncio.sleep(0.02)


async def calibrate(real: Real, jobs: int, deletes: int) -> dict[str, list[float]]:
    """Latencies of the control plane, in wall seconds (see the module docstring)."""
    names = [f"cal-{i:02d}" for i in range(jobs)]
    plans_ = [_job(n, "team-a" if i % 2 == 0 else "team-b", 1) for i, n in enumerate(names)]
    for p in plans_:
        await real.create(p)
        await asyncio.sleep(0.2)  # one at a time: the latency, not a burst's drain
    await _wait(lambda: all(n in real.running for n in names), 120)
    out: dict[str, list[float]] = {
        "create→admitted": [real.admitted[n] - real.created[n] for n in names],
        "admitted→Running": [real.running[n] - real.admitted[n] for n in names],
        "create→Running": [real.running[n] - real.created[n] for n in names],
        "delete→next admitted": [],
    }
    # Fill the h100 pool (16), queue one more in the borrowing team (so that it cannot reclaim),
    # delete one running: how soon is the freed quota admitted again?
    filler = [_job(f"fill-{i:02d}", "team-a", 1) for i in range(16 - jobs)]
    for p in filler:
        await real.create(p)
    await _wait(lambda: all(p.name in real.admitted for p in filler), 120)
    running = plans_ + filler
    for i in range(deletes):
        queued = _job(f"queued-{i:02d}", "team-a", 1)  # team-a borrows: no reclaim
        await real.create(queued)
        await asyncio.sleep(1.0)
        assert queued.name not in real.admitted, "the pool should be full"
        victim = running.pop(0)
        t0 = time.monotonic()
        await real.delete(victim)
        await _wait(lambda q=queued.name: q in real.admitted, 60)
        out["delete→next admitted"].append(real.admitted[queued.name] - t0)
        running.append(queued)
    for p in running:
        await real.delete(p)
    await asyncio.sleep(3.0)
    return out


async def loop_cycle_seconds(kubeconfig: Path, cycles: int) -> list[float]:
    """The project's reclaim loop against this cluster: real KubeClient, real watch caches, a
    hub that answers that every server is running; the wall time of each cycle."""
    from kubespawner.clients import load_config, shared_client

    load_config()
    view = brain.WatchedKueueView(
        namespaces=[NOTEBOOK_NAMESPACE, "team-a", "team-b"],
        custom_objects_api=lambda: shared_client("CustomObjectsApi"),
    )
    await view.start(timeout=30)

    class Hub:
        async def user(self, name: str) -> dict[str, Any] | None:
            return None

        async def group_members(self) -> dict[str, list[str]]:
            return {}

        async def stop_server(self, user: str, server: str) -> int:
            return 404

    loop = brain.ReclaimLoop(
        hub=Hub(),
        kube=brain.KubeClient(timeout=10.0),
        view=view,
        policies=brain.load_policy_file(str(DEFAULT_POLICY)),
        settings=brain.Settings(job_namespaces=("team-a", "team-b"), dry_run=True),
    )
    out = []
    for _ in range(cycles):
        t0 = time.monotonic()
        await loop.cycle()
        out.append(time.monotonic() - t0)
    await view.stop()
    return out


async def replay(
    real: Real, plan: Sequence[Plan], k: float, length_s: float
) -> dict[str, dict[str, float]]:
    """Create and delete as the compressed window says, up to its end (what is left then is
    deleted); admissions in trace seconds."""
    t0 = time.monotonic()
    events: list[tuple[float, int, Plan, str]] = []
    for i, p in enumerate(plan):
        events.append((p.at / k, i, p, "create"))
        if p.until is not None and p.until < length_s:
            events.append((p.until / k, i, p, "delete"))
    events.sort(key=lambda e: (e[0], e[1]))
    horizon = length_s / k
    for at, _i, p, what in events:
        delay = t0 + at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        if what == "create":
            await real.create(p)
        else:
            await real.delete(p)
    await asyncio.sleep(max(0.0, t0 + horizon + 2.0 - time.monotonic()))
    out = {}
    for p in plan:
        created = real.created.get(p.name)
        admitted = real.admitted.get(p.name)
        out[p.name] = {
            "submitted": p.at,
            "submitted_real": ((created - t0) * k) if created is not None else math.nan,
            "admitted": ((admitted - t0) * k) if admitted is not None else math.inf,
        }
    for p in plan:  # leave the cluster empty
        await real.delete(p)
    return out


# --------------------------------------------------------------------------- comparing


def compare(
    model: dict[str, dict[str, float]], real: dict[str, dict[str, float]], *, horizon: float
) -> dict[str, Any]:
    names = sorted(set(model) & set(real))

    def admitted_by_end(d: dict[str, float]) -> bool:
        return d["admitted"] <= horizon

    both = [n for n in names if admitted_by_end(model[n]) and admitted_by_end(real[n])]
    only_model = [n for n in names if admitted_by_end(model[n]) and not admitted_by_end(real[n])]
    only_real = [n for n in names if admitted_by_end(real[n]) and not admitted_by_end(model[n])]
    # Order: of every pair admitted in both, the share in the same order (Kendall-like).
    pairs = agree = 0
    for i, a in enumerate(both):
        for b in both[i + 1 :]:
            dm = model[a]["admitted"] - model[b]["admitted"]
            dr = real[a]["admitted"] - real[b]["admitted"]
            if abs(dm) < 1e-6:
                continue  # the model admits them in the same instant: either order agrees
            pairs += 1
            agree += (dm > 0) == (dr > 0)

    def waits(d: dict[str, dict[str, float]], kind: str | None) -> list[float]:
        return [
            min(d[n]["admitted"], horizon) - d[n]["submitted"]
            for n in names
            if kind is None or (n.startswith("pod-") == (kind == "notebook"))
        ]

    rows = {}
    for kind in ("training", "notebook"):
        wm, wr = waits(model, kind), waits(real, kind)
        rows[kind] = {
            "n": len(wm),
            "model_p50": pct(wm, 0.5),
            "real_p50": pct(wr, 0.5),
            "model_p90": pct(wm, 0.9),
            "real_p90": pct(wr, 0.9),
        }
    return {
        "workloads": len(names),
        "admitted_both": len(both),
        "only_model": only_model,
        "only_real": only_real,
        "pairs": pairs,
        "order_agreement": agree / pairs if pairs else 1.0,
        "waits": rows,
    }


# --------------------------------------------------------------------------- main


def parse(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m benchmarks replay-check", description=__doc__)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start-h", type=float, default=10.0, help="window start, hour of the day")
    ap.add_argument("--hours", type=float, default=1.0, help="window length (simulated hours)")
    ap.add_argument("--max-k", type=float, default=30.0)
    ap.add_argument("--k", type=float, help="use this k instead of the calibrated one")
    ap.add_argument("--json", help="write the figures to this file")
    return ap.parse_args(list(argv))


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from devcluster import cluster as devcluster
    from devcluster.config import load_settings

    env = {**os.environ, **{k: os.environ.get(k, v) for k, v in PRIVATE_ENV.items()}}
    settings = load_settings(env)
    t_up = time.monotonic()
    info = devcluster.up(settings, build=False)
    up_s = time.monotonic() - t_up
    figures: dict[str, Any] = {"cluster_up_s": up_s, "load_before": os.getloadavg()}
    # kubernetes_asyncio reads KUBECONFIG when it is first imported (the loop's clients).
    os.environ["KUBECONFIG"] = str(info.kubeconfig)
    try:
        async with Real(info.kubeconfig) as real:
            cal = await calibrate(real, jobs=10, deletes=5)
            figures["calibration"] = {
                n: {"n": len(v), "p50": statistics.median(v), "p99": pct(v, 0.99), "max": max(v)}
                for n, v in cal.items()
            }
            figures["loop_cycle_s"] = await loop_cycle_seconds(info.kubeconfig, 5)
            latency = figures["calibration"]["create→Running"]["p99"]
            k = args.k or max(1.0, min(args.max_k, math.floor(60.0 / latency)))
            figures["k"] = k
            print(json.dumps(figures, indent=1, ensure_ascii=False), flush=True)
            trace = make_trace(Task("static", args.seed))
            start = trace.burn_in_s + args.start_h * 3600
            window = window_trace(trace, start, args.hours * 3600)
            plan = plans(window, k)
            figures["window"] = {
                "jobs": len(window.jobs),
                "sessions": len(window.sessions),
                "wall_s": args.hours * 3600 / k,
            }
            print(json.dumps(figures["window"]), flush=True)
            real_run = await replay(real, plan, k, args.hours * 3600)
            figures["load_after"] = os.getloadavg()
    finally:
        if info.started:
            devcluster.down(settings)
    model = simulated(window)
    figures["comparison"] = compare(model, real_run, horizon=args.hours * 3600)
    figures["per_workload"] = {
        n: {"model": model.get(n), "real": real_run.get(n)} for n in sorted(real_run)
    }
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    figures = asyncio.run(main_async(args))
    text = json.dumps(figures, indent=1, ensure_ascii=False, default=str)
    print(json.dumps(figures["comparison"], indent=1, ensure_ascii=False, default=str))
    if args.json:
        Path(args.json).write_text(text, encoding="utf-8")
    return 0

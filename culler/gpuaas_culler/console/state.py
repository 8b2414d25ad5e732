"""The console's answers, built from the running service's memory (no Kubernetes or Hub call).

:class:`ConsoleState` reads the reclaim loop (its last plan and inputs, ledger, journal, hand-off
records), the Kueue watch caches and the policy in force, and builds the ``api/console`` answer
for everything at most once per ``ttl`` seconds (and after each cycle); a caller limited to some
teams gets the same answer filtered.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from gpuaas_culler.console.aggregates import plan_rows, summary, teams
from gpuaas_culler.reclaim.decide import assess_handoff
from gpuaas_culler.reclaim.explain import explain_policies
from gpuaas_culler.reclaim.snapshot import dump_snapshot
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from jupyter_gpuaas.core.watch import KueueReader

__all__ = ["ConsoleState", "export_rows"]

EXPORT_FIELDS = (
    "day",
    "team",
    "user",
    "offering",
    "kind",
    "allocated_hours",
    "busy_hours",
    "idle_hours",
)


@dataclass
class _Built:
    at: float
    plan_id: int
    body: dict[str, Any]


class ConsoleState:
    def __init__(
        self,
        loop: Any,
        view: KueueReader,
        *,
        notebook_namespace: str,
        job_namespaces: Sequence[str],
        regret_window: timedelta,
        policy_file: Callable[[], dict[str, Any]] = dict,
        ttl: float = 2.0,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.loop = loop
        self.view = view
        self.notebook_namespace = notebook_namespace
        self.namespaces = list(dict.fromkeys([*job_namespaces, notebook_namespace]))
        self.regret_window = regret_window
        self.policy_file = policy_file
        self.ttl = ttl
        self.clock = clock or loop.clock
        self._built: _Built | None = None
        self.builds = 0

    def _workloads(self) -> list[WorkloadInfo]:
        return [read_workload(o) for ns in self.namespaces for o in self.view.workloads(ns)]

    def answer(self, only: Iterable[str] | None = None) -> dict[str, Any]:
        """The ``api/console`` answer (``only``: the teams the caller may see)."""
        plan = self.loop.last_plan
        built = self._built
        if built is None or built.plan_id != id(plan) or time.monotonic() - built.at > self.ttl:
            built = self._built = _Built(time.monotonic(), id(plan), self._build())
            self.builds += 1
        if only is None:
            return {**built.body, "visible_teams": None}
        allowed = set(only)
        body = built.body

        def mine(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [i for i in items if i.get("team") in allowed]

        return {
            **body,
            "visible_teams": sorted(allowed),
            "teams": mine(body["teams"]),
            "workbenches": mine(body["workbenches"]),
            "summary": summary(plan, teams=allowed) if plan else body["summary"],
            "events": mine(body["events"]),
            "handoffs": [h for h in body["handoffs"] if h["team"] in allowed],
            "regret": None,
        }

    def _build(self) -> dict[str, Any]:
        loop = self.loop
        now = self.clock()
        plan = loop.last_plan
        state = self.view.queue_state()
        owners_team = {
            cq: (lq.name if ns == self.notebook_namespace else ns)
            for (ns, _n), lq in state.local_queues.items()
            for cq in [lq.cluster_queue]
        }
        handoffs = []
        for record in loop.handoffs.values():
            result = assess_handoff(record, now=now, timeout=loop.policies.handoff_timeout)
            handoffs.append(
                {
                    "workload": record.workload,
                    "cluster_queue": record.cluster_queue,
                    "team": owners_team.get(record.cluster_queue, ""),
                    "reclaimed_at": isoformat_z(record.reclaimed_at),
                    "admitted_at": isoformat_z(record.admitted_at) if record.admitted_at else None,
                    "latency_seconds": result.latency.total_seconds() if result.latency else None,
                    "status": result.status.value,
                    "reason": result.reason,
                }
            )
        policies = loop.policies
        return {
            "now": isoformat_z(now),
            "decided_at": isoformat_z(plan.now) if plan else None,
            "last_completed": isoformat_z(loop.last_completed) if loop.last_completed else None,
            "last_error": loop.last_error,
            "synced": state.synced,
            "reclaim": "on" if policies.policies else "off",
            "policy": {
                **self.policy_file(),
                "in_force": explain_policies(policies) if policies.policies else "",
            },
            "teams": teams(
                state,
                plan,
                self._workloads(),
                loop.ledger.by_team(now.date()),
                notebook_namespace=self.notebook_namespace,
                now=now,
            ),
            "workbenches": plan_rows(plan) if plan else [],
            "summary": summary(plan) if plan else {},
            "events": loop.journal.recent(self.regret_window),
            "handoffs": handoffs,
            "regret": loop.journal.regret(self.regret_window),
        }

    def snapshot(self) -> dict[str, Any] | None:
        """The last cycle's inputs as ``--explain --snapshot`` reads them (``None`` before)."""
        plan, inputs = self.loop.last_plan, self.loop.last_inputs
        if plan is None or inputs is None:
            return None
        return dump_snapshot(
            plan.now,
            [d.workbench for d in plan.decisions],
            inputs.pending,
            inputs.handoffs,
            reports=inputs.reports,
            pod_utilization=inputs.pod_utilization,
        )


def export_rows(ledger: Any, day: date, only: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """One day's GPU-equivalent hours by team, user and offering."""
    allowed = set(only) if only is not None else None
    return [
        {
            "day": day.isoformat(),
            "team": key.team,
            "user": key.user,
            "offering": key.offering,
            "kind": key.kind,
            **usage.hours(),
        }
        for key, usage in sorted(ledger.day(day).items())
        if allowed is None or key.team in allowed
    ]


def export_csv(rows: Sequence[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row)
    return out.getvalue()


def update_metrics(console: ConsoleState) -> None:
    """After each cycle: the showback gauges and counters (metrics.py)."""
    from fractions import Fraction

    from gpuaas_culler.console.aggregates import queued_work
    from gpuaas_culler.reclaim.idleness import State

    loop = console.loop
    m = loop.metrics
    plan = loop.last_plan
    if plan is not None:
        m.last_cycle.set(plan.now.timestamp())
        held: dict[tuple[str, str], dict[State, Fraction]] = {}
        for d in plan.decisions:
            wb = d.workbench
            if wb.gpu_equivalents > 0:
                by = held.setdefault((wb.team or "-", wb.kind), {s: Fraction(0) for s in State})
                by[wb.idleness.state] += wb.gpu_equivalents
        for gauge in (m.gpu_allocated, m.gpu_busy, m.gpu_idle):
            gauge.clear()
        for (team, kind), by in held.items():
            m.gpu_allocated.labels(team, kind).set(float(sum(by.values(), Fraction(0))))
            m.gpu_busy.labels(team, kind).set(float(by[State.BUSY]))
            m.gpu_idle.labels(team, kind).set(float(by[State.IDLE]))
    for key, usage in loop.ledger.last_added.items():
        m.gpu_allocated_seconds.labels(key.team, key.kind).inc(usage.allocated)
        m.gpu_busy_seconds.labels(key.team, key.kind).inc(usage.busy)
        m.gpu_idle_seconds.labels(key.team, key.kind).inc(usage.idle)
    now = console.clock()
    queued = queued_work(
        console._workloads(), console.view.queue_state(), console.notebook_namespace
    )
    for gauge in (m.queued_gpu, m.queued_workloads, m.oldest_wait):
        gauge.clear()
    for team, q in queued.items():
        m.queued_gpu.labels(team).set(float(q.gpu_equivalents))
        m.queued_workloads.labels(team).set(q.count)
        m.oldest_wait.labels(team).set((now - q.oldest).total_seconds() if q.oldest else 0)

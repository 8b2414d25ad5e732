"""What the console shows, from the service's state (pure: plain data and a clock in).

- :func:`plan_rows`: one row per GPU workbench from the loop's last :class:`~.decide.Plan`
  (the same decisions ``gpuaas-admin --explain`` prints for the same state).
- :func:`teams`: per team and (flavor, resource), quota against use — notebooks, training,
  borrowed, lent — from Kueue's ClusterQueues as the watch caches hold them; the team's queued
  work (count, GPU-equivalents, the oldest wait); its GPU-equivalents held now (busy, idle,
  unknown: servers waiting for their GPU hold none, :func:`~.ledger.holds_its_gpu`) and today's
  hours (:class:`~.ledger.Ledger`).

A ClusterQueue belongs to the team whose LocalQueue points at it: in the notebook namespace the
LocalQueue is named after the team (its *notebooks* queue); elsewhere the namespace is the
team's (its *training* queue). Use is Kueue's reservation; *borrowed* is what the team's queues use
beyond the team's nominal quota (borrowing between its own notebooks and training queues
cancels out); *lent* is what the other teams of the same cohort tree borrow, shared out among
the lending teams in proportion to their unused nominal quota (Kueue does not say whose quota a
borrower uses; a Cohort's own quota is not counted as anyone's).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any, cast

from gpuaas_service import api_types as service_api
from gpuaas_service.console.ledger import Usage, holds_its_gpu
from gpuaas_service.reclaim.decide import Decision, Plan
from gpuaas_service.reclaim.idleness import State
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import (
    format_gpu_equivalents,
    resource_gpu_equivalents,
)
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, display_value, topology_wait
from jupyter_gpuaas.core.sizing import format_gib

__all__ = [
    "QueuedWork",
    "plan_row",
    "plan_rows",
    "queue_owners",
    "queued_work",
    "readable_amount",
    "summary",
    "teams",
]

GPU_PREFIX = "nvidia.com/"


def _seconds(value: timedelta) -> int:
    return int(max(value.total_seconds(), 0))


def plan_row(d: Decision, now: datetime) -> service_api.ServiceWorkbench:
    """One workbench as the console's table shows it."""
    wb = d.workbench
    idle = wb.idleness
    return {
        "key": wb.key,
        "user": wb.user,
        "server": wb.server,
        "team": wb.team,
        "offering": wb.offering,
        "kind": wb.kind,
        "gpu_equivalents": format_gpu_equivalents(wb.gpu_equivalents),
        "started_at": isoformat_z(wb.started_at),
        "age_seconds": _seconds(now - wb.started_at),
        "phase": wb.phase,
        "activity": idle.state.value,
        "signal": idle.reason,
        "idle_seconds": _seconds(idle.idle_for(now)) if idle.state is State.IDLE else None,
        "unknown_seconds": _seconds(idle.unknown_for(now)) if idle.state is State.UNKNOWN else None,
        "policy": d.policy,
        "action": d.action.value,
        # Decision.code is a str (reclaim/decide.py): the document lists what it may be
        "code": cast("api.ServiceReclaimCode", d.code),
        "reason": d.reason,
        "reclaim_at": isoformat_z(d.reclaim_at) if d.reclaim_at else None,
        "warned_at": isoformat_z(wb.warned_at) if wb.warned_at else None,
        "handoff": d.handoff,
        "snoozes_left": d.snoozes_left,
        "dry_run": d.dry_run,
    }


def plan_rows(
    plan: Plan, *, teams: Iterable[str] | None = None
) -> list[service_api.ServiceWorkbench]:
    """The plan's GPU workbenches (CPU-only servers hold nothing to reclaim), optionally only
    those of ``teams``."""
    allowed = set(teams) if teams is not None else None
    return [
        plan_row(d, plan.now)
        for d in plan.decisions
        if d.workbench.kind != "cpu" and (allowed is None or d.workbench.team in allowed)
    ]


def summary(
    plan: Plan | None, *, teams: Iterable[str] | None = None
) -> service_api.ServiceActionCounts:
    """How many workbenches get each action (``warn``, ``reclaim``, ...); none without a plan."""
    if plan is None:
        return {}
    allowed = set(teams) if teams is not None else None
    counts: service_api.ServiceActionCounts = {
        "warn": 0,
        "wait": 0,
        "reclaim": 0,
        "clear-warning": 0,
        "skip": 0,
    }
    for d in plan.decisions:
        if d.workbench.kind != "cpu" and (allowed is None or d.workbench.team in allowed):
            counts[d.action.value] += 1
    return counts


# --------------------------------------------------------------------------- teams


def queue_owners(state: QueueState, notebook_namespace: str) -> dict[str, tuple[str, str]]:
    """ClusterQueue → (team, ``notebooks`` | ``training``), from the LocalQueues."""
    out: dict[str, tuple[str, str]] = {}
    for (namespace, name), lq in sorted(state.local_queues.items()):
        if not lq.cluster_queue or lq.cluster_queue in out:
            continue
        if namespace == notebook_namespace:
            out[lq.cluster_queue] = (name, "notebooks")
        else:
            out[lq.cluster_queue] = (namespace, "training")
    return out


@dataclass(frozen=True)
class QueuedWork:
    """A team's pending GPU Workloads."""

    count: int = 0
    gpu_equivalents: Fraction = Fraction(0)
    oldest: datetime | None = None
    whole_node: int = 0
    """Of them, those Kueue's Topology Aware Scheduling holds back for one node with room
    (their quota is there: :func:`~jupyter_gpuaas.core.kueue.topology_wait`)."""


def queued_work(
    workloads: Iterable[WorkloadInfo], state: QueueState, notebook_namespace: str
) -> dict[str, QueuedWork]:
    """Per team: the pending Workloads that ask for GPUs (a queued notebook counts for the team
    of its LocalQueue; a training Workload for its namespace's), and how many of them wait for
    a whole node rather than for quota."""
    out: dict[str, QueuedWork] = {}
    for wl in workloads:
        if not wl.pending:
            continue
        gpus = {r: a for r, a in wl.resources.items() if r.startswith(GPU_PREFIX)}
        if not gpus:
            continue
        team = wl.queue_name if wl.namespace == notebook_namespace else wl.namespace
        if (wl.namespace, wl.queue_name) not in state.local_queues:
            continue
        was = out.get(team, QueuedWork())
        oldest = was.oldest
        if wl.created is not None and (oldest is None or wl.created < oldest):
            oldest = wl.created
        wait = topology_wait(wl)
        out[team] = QueuedWork(
            was.count + 1,
            was.gpu_equivalents + resource_gpu_equivalents(gpus),
            oldest,
            was.whole_node + (1 if wait is not None and wait.one_node else 0),
        )
    return out


def _root(state: QueueState, cohort: str | None) -> str | None:
    seen: list[str] = []
    while cohort and cohort not in seen:
        seen.append(cohort)
        parent = state.cohorts.get(cohort)
        if parent is None or not parent.parent:
            return cohort
        cohort = parent.parent
    return cohort


_AMOUNTS = ("nominal", "notebooks", "training", "borrowed", "lent")


def _amounts(
    row: Mapping[str, Any], show: Callable[[str, int], str]
) -> service_api.ServiceConsoleAmounts:
    """A flavor row's five amounts, each as ``show`` writes it for the row's resource."""
    r = row["resource"]
    return {
        "nominal": show(r, row["nominal"]),
        "notebooks": show(r, row["notebooks"]),
        "training": show(r, row["training"]),
        "borrowed": show(r, row["borrowed"]),
        "lent": show(r, row["lent"]),
    }


def _gpu_eq(resource: str, value: int) -> str:
    return format_gpu_equivalents(resource_gpu_equivalents({resource: Fraction(value)}))


def _flavor_rows(
    state: QueueState, owners: Mapping[str, tuple[str, str]]
) -> dict[str, list[service_api.ServiceConsoleFlavor]]:
    """Per team, per (flavor, resource) of a GPU resource: nominal, notebooks, training,
    borrowed, lent (Kueue's integer units)."""
    rows, roots = _team_use(state, owners)
    _lend_and_borrow(rows, roots)
    out: dict[str, list[service_api.ServiceConsoleFlavor]] = {}
    for (team, _f, _r), row in sorted(rows.items()):
        if not any(row[k] for k in _AMOUNTS):
            continue  # a flavor the queue lists with no quota and no use: nothing to show
        out.setdefault(team, []).append(
            {
                "flavor": row["flavor"],
                "resource": row["resource"],
                "nominal": row["nominal"],
                "notebooks": row["notebooks"],
                "training": row["training"],
                "borrowed": row["borrowed"],
                "lent": row["lent"],
                "shown": _amounts(row, display_value),
                "readable": _amounts(row, readable_amount),
                "gpu_eq": _amounts(row, _gpu_eq),
                "in_use": any(row[k] for k in ("notebooks", "training", "borrowed", "lent")),
            }
        )
    return out


_Key = tuple[str, str, str]
"""(team, flavor, resource)."""


def _team_use(
    state: QueueState, owners: Mapping[str, tuple[str, str]]
) -> tuple[dict[_Key, dict[str, Any]], dict[_Key, str | None]]:
    """Each team's nominal quota and use per GPU (flavor, resource), summed over its queues,
    and the root cohort of each."""
    rows: dict[_Key, dict[str, Any]] = {}
    roots: dict[_Key, str | None] = {}
    for name, cq in state.cluster_queues.items():
        team, role = owners.get(name, ("", ""))
        if not team:
            continue
        for flavor, resource in set(cq.quotas) | set(cq.reserved):
            if not resource.startswith(GPU_PREFIX):
                continue
            row = rows.setdefault(
                (team, flavor, resource),
                {"flavor": flavor, "resource": resource, **dict.fromkeys(_AMOUNTS, 0)},
            )
            quota = cq.quotas.get((flavor, resource))
            row["nominal"] += quota.nominal if quota else 0
            row[role] += cq.usage((flavor, resource))
            roots[(team, flavor, resource)] = _root(state, cq.cohort)
    return rows, roots


def _lend_and_borrow(rows: dict[_Key, dict[str, Any]], roots: Mapping[_Key, str | None]) -> None:
    """At the team's level, borrowing between its own notebooks and training queues cancels
    out: borrowed is what it uses beyond its own quota; lent is shared out from that (module
    doc) among the teams of one cohort tree."""
    by_tree: dict[tuple[str | None, str, str], list[_Key]] = {}
    for key, row in rows.items():
        row["borrowed"] = max(0, row["notebooks"] + row["training"] - row["nominal"])
        if roots.get(key) is not None:
            by_tree.setdefault((roots[key], key[1], key[2]), []).append(key)
    for members in by_tree.values():
        unused = {
            k: max(0, rows[k]["nominal"] - rows[k]["notebooks"] - rows[k]["training"])
            for k in members
        }
        pool = sum(unused.values())
        for key in members:
            borrowed = sum(rows[k]["borrowed"] for k in members if k[0] != key[0])
            if borrowed and unused[key] and pool:
                rows[key]["lent"] = min(unused[key], round(borrowed * unused[key] / pool))


def readable_amount(resource: str, value: int) -> str:
    """A quota amount in the units a person reads: GiB of GPU memory (HAMi's ``gpumem`` is
    in MiB), % of a GPU (``gpucores``), GPUs, MIG slices, shares."""
    name = resource.removeprefix(GPU_PREFIX)
    if name in ("gpumem", "total-gpumem"):
        return format_gib(value * (1 << 20))
    if name in ("gpucores", "total-gpucores"):
        return f"{value}% of a GPU"
    if name == "gpu":
        return f"{value} GPU" + ("s" if value != 1 else "")
    if name == "gpu.shared":
        return f"{value} share" + ("s" if value != 1 else "")
    if name.startswith("mig-"):
        return f"{value} × MIG {name.removeprefix('mig-')}"
    return str(value)


def _today(
    usage: Usage, reclaims: Mapping[str, int], failed_starts: Mapping[str, int], team: str
) -> service_api.ServiceHours:
    """A team's hours of today, and its reclaims and failed starts."""
    hours = usage.hours()
    return {
        "allocated_hours": hours["allocated_hours"],
        "busy_hours": hours["busy_hours"],
        "idle_hours": hours["idle_hours"],
        "reclaims": reclaims.get(team, 0),
        "failed_starts": failed_starts.get(team, 0),
    }


def teams(
    state: QueueState,
    plan: Plan | None,
    workloads: Sequence[WorkloadInfo],
    today: Mapping[str, Usage],
    *,
    notebook_namespace: str,
    now: datetime,
    only: Iterable[str] | None = None,
    reclaims: Mapping[str, int] | None = None,
    failed_starts: Mapping[str, int] | None = None,
    on_node: Collection[str] | None = None,
) -> list[service_api.ServiceConsoleTeam]:
    """The console's team table (see the module's docstring). ``reclaims``,
    ``failed_starts``: today's, per team; ``on_node``: the servers whose pods are on a node
    (:func:`~.ledger.servers_on_nodes`; ``None``: not known)."""
    reclaims = reclaims or {}
    failed_starts = failed_starts or {}
    owners = queue_owners(state, notebook_namespace)
    flavors = _flavor_rows(state, owners)
    queued = queued_work(workloads, state, notebook_namespace)
    held: dict[str, dict[str, Fraction]] = {}
    servers: dict[str, int] = {}
    for d in plan.decisions if plan is not None else ():
        wb = d.workbench
        if wb.gpu_equivalents <= 0 or not holds_its_gpu(wb, on_node):
            continue
        team = wb.team or "-"
        h = held.get(team)
        if h is None:  # (not setdefault: its default would be built for every workbench)
            h = held[team] = {s.value: Fraction(0) for s in State}
        h[wb.idleness.state.value] += wb.gpu_equivalents
        servers[team] = servers.get(team, 0) + 1
    names = sorted(
        {*(t for t, _ in owners.values()), *held, *queued, *today, *reclaims, *failed_starts}
    )
    allowed = set(only) if only is not None else None
    out: list[service_api.ServiceConsoleTeam] = []
    for team in names:
        if allowed is not None and team not in allowed:
            continue
        q = queued.get(team, QueuedWork())
        h = held.get(team, {s.value: Fraction(0) for s in State})
        out.append(
            {
                "team": team,
                "cluster_queues": sorted(cq for cq, (t, _) in owners.items() if t == team),
                "flavors": flavors.get(team, []),
                "queued": {
                    "workloads": q.count,
                    "gpu_equivalents": format_gpu_equivalents(q.gpu_equivalents),
                    "oldest_wait_seconds": _seconds(now - q.oldest) if q.oldest else None,
                    "waiting_for_a_whole_node": q.whole_node,
                },
                "now": {
                    "servers": servers.get(team, 0),
                    "allocated": format_gpu_equivalents(sum(h.values(), Fraction(0))),
                    "busy": format_gpu_equivalents(h[State.BUSY.value]),
                    "idle": format_gpu_equivalents(h[State.IDLE.value]),
                    "unknown": format_gpu_equivalents(h[State.UNKNOWN.value]),
                },
                "today": _today(today.get(team, Usage()), reclaims, failed_starts, team),
            }
        )
    return out

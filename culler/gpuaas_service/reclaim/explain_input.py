"""A JSON snapshot of the culler's inputs, for ``gpuaas-admin --explain --snapshot FILE``.

The live service gathers the same inputs from the Hub and Kubernetes; a snapshot lets an admin
(and the tests) ask "what would it do with this?" without either. Shape::

    {
      "now": "2026-11-30T16:40:00Z",                # optional: the clock (default: now)
      "workbenches": [{
        "user": "alice", "server": "", "groups": ["team-a"], "team": "team-a",
        "kind": "mig", "offering": "mig-1g", "gpu_equivalents": "1/7",
        "holds": [{"flavor": "a100-mig", "resource": "nvidia.com/mig-1g.5gb", "amount": 1}],
        "cluster_queue": "team-a-notebooks", "cohorts": ["team-a"],
        "started_at": "...", "phase": "running",
        "snoozes_used": 0, "snoozed_until": null, "warned_at": null,
        "activity": {... the server's `activity` payload (docs/api.md) ...},
        "activity_received_at": "...",
        "pod_utilization": 12.5,                     # optional: DCGM's per-pod %, via Prometheus
        "last_active": "...",                        # optional: the previous verdict's
        "unknown_since": "...",                      # optional: ... while it was unknown
        "warned_deadline": "...", "warned_reason": "...", # optional: the warning's, as told
        "cards": ["local-0/GPU-..."]                 # optional: the cards its share is on
      }],
      "pending": [{
        "name": "train-1", "namespace": "team-a", "cluster_queue": "team-a-training",
        "cohorts": ["team-a"], "priority": 100, "position": 0, "team": "team-a",
        "needs": [{"resource": "nvidia.com/mig-1g.5gb", "amount": 2,
                   "flavors": ["a100-mig"], "free": {"a100-mig": 0}}]
      }],
      "handoffs": [{"workload": "team-a/train-0", "cluster_queue": "team-a-training",
                    "reclaimed_at": "...", "admitted_at": null, "team": "team-a"}],
      "waits": [{                                    # optional: admitted, waiting for cards
        "name": "train-x7k2p", "namespace": "team-a", "workload": "job-train-1a2b3",
        "team": "team-a", "cluster_queue": "team-a-training", "priority": 100,
        "flavor": "local-h100", "node": "local-0", "gpu_type": "H100",
        "what": "a training Job", "cards": 1, "free_cards": 0,
        "blocked": {"local-0/GPU-...": "pod team-b/x"}, "since": "..."
      }]
    }

``activity`` may be left out or ``null``: the server has not reported (unknown). Amounts are
numbers or Kubernetes quantities; ``gpu_equivalents`` also takes ``"1/7"``.

:func:`dump_snapshot` writes the live service's inputs of a cycle in this shape (the console's
``api/console/snapshot``), so that ``--explain`` on it prints the plan the service made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, TypeVar

from gpuaas_service import api_types as service_api
from gpuaas_service.reclaim.decide import (
    PHASES,
    HandOffRecord,
    Need,
    PendingWorkload,
    PlacementWait,
    Workbench,
)
from gpuaas_service.reclaim.idleness import ActivityReport, Idleness, State, judge
from gpuaas_service.reclaim.policy import DEFAULT_BUSY_UTILIZATION, PolicySet
from jupyter_gpuaas.core.activity import ReportError, activity_json, parse_activity
from jupyter_gpuaas.core.catalog import KINDS
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.fields import FieldError, FieldErrors, key_path, object_items
from jupyter_gpuaas.core.gpu_equivalents import exact_gpu_equivalents
from jupyter_gpuaas.core.kueue import QuantityError, parse_quantity, parse_time

__all__ = ["Snapshot", "SnapshotError", "dump_snapshot", "load_snapshot", "load_snapshot_file"]

T = TypeVar("T")


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    workbenches: tuple[Workbench, ...]
    pending: tuple[PendingWorkload, ...]
    handoffs: tuple[HandOffRecord, ...]
    waits: tuple[PlacementWait, ...] = ()


class SnapshotError(ValueError):
    def __init__(self, errors: Sequence[FieldError], origin: str = "") -> None:
        self.errors = tuple(errors)
        self.origin = origin
        lines = "\n".join(f"  {e}" for e in self.errors)
        where = f" {origin}" if origin else ""
        super().__init__(f"invalid snapshot{where} ({len(self.errors)} problem(s)):\n{lines}")


def load_snapshot_file(path: str, policies: PolicySet, *, now: datetime | None = None) -> Snapshot:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise SnapshotError([FieldError("(file)", f"cannot read it: {e.strerror}")], path) from e
    except json.JSONDecodeError as e:
        raise SnapshotError([FieldError("(file)", f"not valid JSON: {e}")], path) from e
    return load_snapshot(data, policies, now=now, origin=path)


class _Reader(FieldErrors):
    """The snapshot's error collector, with its converting reader."""

    def get(
        self,
        data: Mapping[str, Any],
        path: str,
        key: str,
        convert: Callable[[Any], T],
        what: str,
        default: T,
        *,
        required: bool = False,
    ) -> T:
        where = key_path(path, key)
        value = data.get(key)
        if value is None:
            if required:
                self.add(where, "is required")
            return default
        try:
            return convert(value)
        except (ValueError, TypeError, ZeroDivisionError, QuantityError):
            self.add(where, f"{value!r} is not {what}")
            return default

    def objects(self, data: Mapping[str, Any], key: str) -> list[tuple[str, Mapping[str, Any]]]:
        return object_items(data.get(key), key, self.add)


def _percent(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 100:
        raise ValueError(value)
    return float(value)


def _time(value: Any) -> datetime:
    parsed = parse_time(value)
    if parsed is None:
        raise ValueError(value)
    return parsed


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _texts(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TypeError(value)
    return tuple(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(value)
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(value)
    return value


def _amount(value: Any) -> Fraction:
    slash = isinstance(value, str) and "/" in value
    result = Fraction(value) if slash else parse_quantity(value)
    if result < 0:
        raise ValueError(value)
    return result


def _kind(value: Any) -> str:
    if value not in KINDS:
        raise ValueError(value)
    return str(value)


def _phase(value: Any) -> str:
    if value not in PHASES:
        raise ValueError(value)
    return str(value)


def load_snapshot(
    data: Any, policies: PolicySet, *, now: datetime | None = None, origin: str = ""
) -> Snapshot:
    """Read a snapshot; judge each workbench's activity with its policy's settings."""
    r = _Reader()
    if not isinstance(data, Mapping):
        raise SnapshotError([FieldError("(top level)", "must be a JSON object")], origin)
    clock = r.get(data, "", "now", _time, "an ISO 8601 time", None)
    if clock is None:
        clock = now or datetime.now(timezone.utc)
    elif now is not None:
        clock = now
    workbenches = [
        _read_workbench(r, p, d, policies, clock) for p, d in r.objects(data, "workbenches")
    ]
    keys = [wb.key for wb in workbenches]
    for i, key in enumerate(keys):
        if key in keys[:i]:
            r.add(f"workbenches[{i}]", f"server {key!r} is listed twice")
    pending = [_read_pending(r, p, d) for p, d in r.objects(data, "pending")]
    handoffs = [_read_handoff(r, p, d, clock) for p, d in r.objects(data, "handoffs")]
    waits = [_read_wait(r, p, d) for p, d in r.objects(data, "waits")]
    if r.items:
        raise SnapshotError(r.items, origin)
    return Snapshot(clock, tuple(workbenches), tuple(pending), tuple(handoffs), tuple(waits))


def _read_workbench(
    r: _Reader, p: str, d: Mapping[str, Any], policies: PolicySet, clock: datetime
) -> Workbench:
    user = r.get(d, p, "user", _text, "a user name", "", required=True)
    server = r.get(d, p, "server", _text, "a server name", "")
    groups: tuple[str, ...] = r.get(d, p, "groups", _texts, "a list of group names", ())
    team = r.get(d, p, "team", _text, "a team name", "")
    kind = r.get(d, p, "kind", _kind, f"one of {', '.join(KINDS)}", "gpu", required=True)
    offering = r.get(d, p, "offering", _text, "an offering slug", "")
    started = r.get(d, p, "started_at", _time, "an ISO 8601 time", clock, required=True)
    holds = _read_holds(r, p, d)
    policy = policies.policy_for(team=team, kind=kind, offering=offering, user=user, groups=groups)
    report = _read_report(r, p, d, clock)
    idleness = judge(
        report,
        kind=kind,
        started_at=started,
        now=clock,
        stale_after=policies.report_stale_after,
        busy_utilization_percent=policy.busy_utilization_percent
        if policy
        else DEFAULT_BUSY_UTILIZATION,
        previous=_read_previous_verdict(r, p, d),
        pod_utilization=r.get(d, p, "pod_utilization", _percent, "a percentage (0-100)", None),
        trust_pod_utilization=bool(policy and policy.busy_signal == "gpu"),
    )
    return Workbench(
        user=user,
        server=server,
        groups=groups,
        team=team,
        kind=kind,
        offering=offering,
        holds=holds,
        gpu_equivalents=r.get(
            d, p, "gpu_equivalents", _amount, "a number such as 1 or 1/7", Fraction(0)
        ),
        cluster_queue=r.get(d, p, "cluster_queue", _text, "a ClusterQueue name", ""),
        cohorts=r.get(d, p, "cohorts", _texts, "a list of cohort names", ()),
        started_at=started,
        phase=r.get(d, p, "phase", _phase, f"one of {', '.join(PHASES)}", "running"),
        idleness=idleness,
        snoozes_used=r.get(d, p, "snoozes_used", _count, "a whole number", 0),
        snoozed_until=r.get(d, p, "snoozed_until", _time, "an ISO 8601 time", None),
        warned_at=r.get(d, p, "warned_at", _time, "an ISO 8601 time", None),
        warned_deadline=r.get(d, p, "warned_deadline", _time, "an ISO 8601 time", None),
        warned_reason=r.get(d, p, "warned_reason", _text, "a text", ""),
        cards=r.get(d, p, "cards", _texts, "a list of cards (node/UUID)", ()),
        keeps_state=report is not None and report.activity.keeps_kernel_state,
    )


def _read_holds(r: _Reader, p: str, d: Mapping[str, Any]) -> dict[tuple[str, str], Fraction]:
    holds: dict[tuple[str, str], Fraction] = {}
    what = "must be a list of {flavor, resource, amount}"
    for hp, h in object_items(d.get("holds"), f"{p}.holds", r.add, what):
        flavor = r.get(h, hp, "flavor", _text, "a flavor name", "", required=True)
        resource = r.get(h, hp, "resource", _text, "a resource name", "", required=True)
        amount = r.get(h, hp, "amount", _amount, "an amount", Fraction(0), required=True)
        holds[(flavor, resource)] = holds.get((flavor, resource), Fraction(0)) + amount
    return holds


def _read_report(
    r: _Reader, p: str, d: Mapping[str, Any], clock: datetime
) -> ActivityReport | None:
    """The workbench's last activity report, if the snapshot has one."""
    if d.get("activity") is None:
        return None
    received = r.get(d, p, "activity_received_at", _time, "an ISO 8601 time", clock, required=True)
    try:
        return ActivityReport(received, parse_activity(d["activity"]))
    except ReportError as e:
        for err in e.errors:
            r.add(f"{p}.activity.{err.path}", err.message)
        return None


def _read_previous_verdict(r: _Reader, p: str, d: Mapping[str, Any]) -> Idleness | None:
    """The verdict of the cycle before, as the snapshot kept it (``last_active``)."""
    last_active = r.get(d, p, "last_active", _time, "an ISO 8601 time", None)
    unknown_since = r.get(d, p, "unknown_since", _time, "an ISO 8601 time", None)
    if not last_active:
        return None
    return Idleness(
        State.UNKNOWN if unknown_since else State.IDLE,
        last_active,
        "previous verdict",
        unknown_since=unknown_since,
    )


def _read_need(r: _Reader, np_: str, n: Mapping[str, Any]) -> Need:
    free: dict[str, Fraction] = {}
    raw_free = n.get("free") or {}
    if not isinstance(raw_free, Mapping):
        r.add(f"{np_}.free", "must map flavor names to amounts")
        raw_free = {}
    for flavor in raw_free:
        free[str(flavor)] = r.get(
            raw_free, f"{np_}.free", flavor, _amount, "an amount", Fraction(0)
        )
    return Need(
        resource=r.get(n, np_, "resource", _text, "a resource name", "", required=True),
        amount=r.get(n, np_, "amount", _amount, "an amount", Fraction(0), required=True),
        flavors=r.get(n, np_, "flavors", _texts, "a list of flavor names", ()),
        free=free,
    )


def _read_pending(r: _Reader, p: str, d: Mapping[str, Any]) -> PendingWorkload:
    what = "must be a list of {resource, amount, flavors, free}"
    needs = [
        _read_need(r, np_, n) for np_, n in object_items(d.get("needs"), f"{p}.needs", r.add, what)
    ]
    return PendingWorkload(
        name=r.get(d, p, "name", _text, "a workload name", "", required=True),
        namespace=r.get(d, p, "namespace", _text, "a namespace", "", required=True),
        cluster_queue=r.get(d, p, "cluster_queue", _text, "a ClusterQueue name", "", required=True),
        cohorts=r.get(d, p, "cohorts", _texts, "a list of cohort names", ()),
        priority=r.get(d, p, "priority", _int, "a whole number", 0),
        position=r.get(d, p, "position", _count, "a position (0 or more)", 0),
        needs=tuple(needs),
        local_queue=r.get(d, p, "local_queue", _text, "a LocalQueue name", ""),
        team=r.get(d, p, "team", _text, "a team name", ""),
    )


def _read_handoff(r: _Reader, p: str, d: Mapping[str, Any], clock: datetime) -> HandOffRecord:
    return HandOffRecord(
        workload=r.get(d, p, "workload", _text, "namespace/name", "", required=True),
        cluster_queue=r.get(d, p, "cluster_queue", _text, "a ClusterQueue name", "", required=True),
        reclaimed_at=r.get(d, p, "reclaimed_at", _time, "an ISO 8601 time", clock, required=True),
        admitted_at=r.get(d, p, "admitted_at", _time, "an ISO 8601 time", None),
        team=r.get(d, p, "team", _text, "a team name", ""),
    )


def _read_wait(r: _Reader, p: str, d: Mapping[str, Any]) -> PlacementWait:
    blocked = d.get("blocked")
    blocked = {} if blocked is None else blocked
    if not isinstance(blocked, Mapping):
        r.add(f"{p}.blocked", "must map cards (node/UUID) to what holds them")
        blocked = {}
    return PlacementWait(
        name=r.get(d, p, "name", _text, "a pod name", "", required=True),
        namespace=r.get(d, p, "namespace", _text, "a namespace", "", required=True),
        workload=r.get(d, p, "workload", _text, "a workload name", ""),
        team=r.get(d, p, "team", _text, "a team name", ""),
        cluster_queue=r.get(d, p, "cluster_queue", _text, "a ClusterQueue name", ""),
        priority=r.get(d, p, "priority", _int, "a whole number", 0),
        flavor=r.get(d, p, "flavor", _text, "a flavor name", "", required=True),
        node=r.get(d, p, "node", _text, "a node name", ""),
        gpu_type=r.get(d, p, "gpu_type", _text, "a GPU type", "GPU"),
        what=r.get(d, p, "what", _text, "a text", "a training Job"),
        cards=r.get(d, p, "cards", _count, "a whole number", 1),
        free_cards=r.get(d, p, "free_cards", _count, "a whole number", 0),
        blocked={str(k): str(v) for k, v in blocked.items()},
        since=r.get(d, p, "since", _time, "an ISO 8601 time", None),
    )


def _iso(value: datetime | None) -> str | None:
    return isoformat_z(value) if value is not None else None


def dump_snapshot(
    now: datetime,
    workbenches: Sequence[Workbench],
    pending: Sequence[PendingWorkload],
    handoffs: Sequence[HandOffRecord],
    *,
    reports: Mapping[str, ActivityReport | None],
    pod_utilization: Mapping[str, float],
    waits: Sequence[PlacementWait] = (),
) -> service_api.ServiceConsoleSnapshot:
    """A cycle's inputs as a snapshot (the inverse of :func:`load_snapshot`): ``reports`` and
    ``pod_utilization`` by workbench key, as the cycle judged them; each workbench's verdict
    goes in as ``last_active`` (and ``unknown_since``), so the same verdict comes back."""
    out_wbs: list[service_api.ServiceSnapshotWorkbench] = []
    for wb in workbenches:
        report = reports.get(wb.key)
        idle = wb.idleness
        item: service_api.ServiceSnapshotWorkbench = {
            "user": wb.user,
            "server": wb.server,
            "groups": list(wb.groups),
            "team": wb.team,
            "kind": wb.kind,
            "offering": wb.offering,
            "gpu_equivalents": exact_gpu_equivalents(wb.gpu_equivalents),
            "holds": [
                {"flavor": f, "resource": res, "amount": str(a)}
                for (f, res), a in sorted(wb.holds.items())
            ],
            "cluster_queue": wb.cluster_queue,
            "cohorts": list(wb.cohorts),
            "started_at": isoformat_z(wb.started_at),
            "phase": wb.phase,
            "snoozes_used": wb.snoozes_used,
            "snoozed_until": _iso(wb.snoozed_until),
            "warned_at": _iso(wb.warned_at),
            "warned_deadline": _iso(wb.warned_deadline),
            "warned_reason": wb.warned_reason,
            "activity": activity_json(report.activity) if report is not None else None,
            "activity_received_at": _iso(report.received_at) if report is not None else None,
            "last_active": isoformat_z(idle.last_active),
            "unknown_since": _iso(idle.unknown_since) if idle.state is State.UNKNOWN else None,
        }
        if wb.cards:
            item["cards"] = list(wb.cards)
        if wb.key in pod_utilization:
            item["pod_utilization"] = pod_utilization[wb.key]
        out_wbs.append(item)
    return {
        "now": isoformat_z(now),
        "workbenches": out_wbs,
        "pending": [
            {
                "name": wl.name,
                "namespace": wl.namespace,
                "cluster_queue": wl.cluster_queue,
                "cohorts": list(wl.cohorts),
                "priority": wl.priority,
                "position": wl.position,
                "local_queue": wl.local_queue,
                "team": wl.team,
                "needs": [
                    {
                        "resource": n.resource,
                        "amount": str(n.amount),
                        "flavors": list(n.flavors),
                        "free": {f: str(a) for f, a in n.free.items()},
                    }
                    for n in wl.needs
                ],
            }
            for wl in pending
        ],
        "handoffs": [
            {
                "workload": h.workload,
                "cluster_queue": h.cluster_queue,
                "reclaimed_at": isoformat_z(h.reclaimed_at),
                "admitted_at": _iso(h.admitted_at),
                "team": h.team,
            }
            for h in handoffs
        ],
        "waits": [
            {
                "name": w.name,
                "namespace": w.namespace,
                "workload": w.workload,
                "team": w.team,
                "cluster_queue": w.cluster_queue,
                "priority": w.priority,
                "flavor": w.flavor,
                "node": w.node,
                "gpu_type": w.gpu_type,
                "what": w.what,
                "cards": w.cards,
                "free_cards": w.free_cards,
                "blocked": dict(w.blocked),
                "since": _iso(w.since),
            }
            for w in waits
        ],
    }

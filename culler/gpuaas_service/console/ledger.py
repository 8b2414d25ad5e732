"""GPU-equivalent time, allocated, busy and idle, per day, team, user and offering (pure).

The reclaim loop calls :meth:`Ledger.add` once per completed cycle with the cycle's workbenches
(as the hub confirmed them) and its clock. The time since the previous cycle is counted for each
workbench of ``gpu_equivalents`` > 0 that held its GPU (:func:`holds_its_gpu`), by the verdict
of this cycle: all of it as *allocated*; as *busy* or *idle* by the activity verdict (``unknown``
counts as allocated only). A workbench that waited for its GPU (in Kueue's queue, or admitted and
waiting for a node) is billed nothing: that time is *waiting*, a figure of its own.
A gap longer than ``max_gap`` (the service was down or could not read its inputs) is not
counted: nothing is known of it. Time is split at midnight UTC, so each day's figures are that
day's. The ledger lives in memory (a restarted service starts its day afresh); ``keep_days`` days
are kept.

It counts failed starts too (:meth:`Ledger.failed_start`, from :mod:`.starts`), per day, team,
user and offering.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from gpuaas_service.model.pods import hub_server
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.reclaim.decide import Workbench
from gpuaas_service.reclaim.idleness import State
from jupyter_gpuaas.core.kueue import as_mapping

__all__ = ["DayKey", "Ledger", "Usage", "holds_its_gpu", "servers_on_nodes"]

DEFAULT_MAX_GAP = timedelta(minutes=10)
DEFAULT_KEEP_DAYS = 35


@dataclass(frozen=True, order=True)
class DayKey:
    """One row of a day's showback: whose GPU time, on which offering."""

    team: str
    user: str
    offering: str
    kind: str


@dataclass
class Usage:
    """GPU-equivalent seconds (a whole GPU for an hour is 3600)."""

    allocated: float = 0.0
    busy: float = 0.0
    idle: float = 0.0
    waiting: float = 0.0
    """Asked for and not held (in the queue, or admitted and waiting for a node): not billed,
    not part of ``allocated``."""

    def add(self, other: Usage) -> None:
        self.allocated += other.allocated
        self.busy += other.busy
        self.idle += other.idle
        self.waiting += other.waiting

    def hours(self) -> dict[str, float]:
        return {
            "allocated_hours": round(self.allocated / 3600, 4),
            "busy_hours": round(self.busy / 3600, 4),
            "idle_hours": round(self.idle / 3600, 4),
        }


def servers_on_nodes(pods: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The servers (``user`` or ``user/server``) whose pod is bound to a node and has not
    ended: the pods that hold their devices. A pod Kueue still gates, or one admitted and
    waiting for a free node, has no node."""
    out: set[str] = set()
    for pod in pods:
        server = hub_server(pod)
        if server is None:
            continue
        if not as_mapping(pod.get("spec")).get("nodeName"):
            continue
        if as_mapping(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
            continue
        out.add(server_key(*server))
    return frozenset(out)


def holds_its_gpu(wb: Workbench, on_node: Collection[str] | None = None) -> bool:
    """Whether ``wb`` held its GPU: it runs (Ready), or its pod is on a node (``on_node``:
    :func:`servers_on_nodes` of the pods, where they were read), or — the pods not read —
    Kueue admitted it (it holds quota). Time in the queue never counts as held."""
    if wb.phase == "running":
        return True
    if on_node is not None:
        return wb.key in on_node
    return bool(wb.holds)


def _split_days(start: datetime, end: datetime) -> list[tuple[date, float]]:
    """``[start, end)`` as seconds per UTC day."""
    out: list[tuple[date, float]] = []
    start, end = start.astimezone(timezone.utc), end.astimezone(timezone.utc)
    while start < end:
        midnight = datetime.combine(start.date() + timedelta(days=1), time(), timezone.utc)
        stop = min(end, midnight)
        out.append((start.date(), (stop - start).total_seconds()))
        start = stop
    return out


class Ledger:
    """Per day: :class:`DayKey` → :class:`Usage`; and the running totals the metrics export."""

    def __init__(
        self, *, max_gap: timedelta = DEFAULT_MAX_GAP, keep_days: int = DEFAULT_KEEP_DAYS
    ) -> None:
        self.max_gap = max_gap
        self.keep_days = keep_days
        self.days: dict[date, dict[DayKey, Usage]] = {}
        self.last: datetime | None = None
        self.last_added: dict[DayKey, Usage] = {}
        """What the latest :meth:`add` counted (the metrics' counters)."""
        self.failed_starts: dict[date, dict[tuple[str, str, str], int]] = {}
        """Per day: (team, user, offering) → failed starts (:mod:`.starts`)."""

    def failed_start(self, team: str, user: str, offering: str, at: datetime) -> None:
        """Count one failed start of ``user``'s server on ``offering`` on ``at``'s UTC day."""
        day = at.astimezone(timezone.utc).date()
        counts = self.failed_starts.setdefault(day, {})
        counts[(team, user, offering)] = counts.get((team, user, offering), 0) + 1
        for old in sorted(self.failed_starts)[: -self.keep_days]:
            del self.failed_starts[old]

    def failed_starts_by_team(self, day: date) -> dict[str, int]:
        out: dict[str, int] = {}
        for (team, _, _), n in self.failed_starts.get(day, {}).items():
            out[team] = out.get(team, 0) + n
        return out

    def add(
        self,
        workbenches: Iterable[Workbench],
        now: datetime,
        on_node: Collection[str] | None = None,
    ) -> dict[DayKey, Usage]:
        """Count the time since the previous call; return what was added, by key.
        ``on_node``: :func:`servers_on_nodes` (``None``: not known, see :func:`holds_its_gpu`)."""
        last, self.last = self.last, now
        added: dict[DayKey, Usage] = {}
        self.last_added = added
        if last is None or now <= last or now - last > self.max_gap:
            return added
        slices = _split_days(last, now)
        for wb in workbenches:
            if wb.gpu_equivalents <= 0:
                continue
            key = DayKey(wb.team or "-", wb.user, wb.offering or wb.kind, wb.kind)
            size = float(wb.gpu_equivalents)
            state = wb.idleness.state
            held = holds_its_gpu(wb, on_node)
            if not held and wb.phase == "stopping":
                continue  # a start given up in the queue: neither held nor waiting any more
            for day, seconds in slices:
                part = (
                    Usage(
                        allocated=size * seconds,
                        busy=size * seconds if state is State.BUSY else 0.0,
                        idle=size * seconds if state is State.IDLE else 0.0,
                    )
                    if held
                    else Usage(waiting=size * seconds)
                )
                self.days.setdefault(day, {}).setdefault(key, Usage()).add(part)
                added.setdefault(key, Usage()).add(part)
        for day in sorted(self.days)[: -self.keep_days]:
            del self.days[day]
        return added

    def day(self, day: date) -> Mapping[DayKey, Usage]:
        return self.days.get(day, {})

    def by_team(self, day: date) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for key, usage in self.day(day).items():
            out.setdefault(key.team, Usage()).add(usage)
        return out

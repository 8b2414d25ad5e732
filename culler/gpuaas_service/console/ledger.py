"""GPU-equivalent time, allocated, busy and idle, per day, team, user and offering (pure).

The reclaim loop calls :meth:`Ledger.add` once per completed cycle with the cycle's workbenches
(as the hub confirmed them) and its clock. The time since the previous cycle is counted for each
workbench that holds GPUs (``gpu_equivalents`` > 0), by the verdict of this cycle: all of it as
*allocated*; as *busy* or *idle* by the activity verdict (``unknown`` counts as allocated only).
A gap longer than ``max_gap`` (the service was down or could not read its inputs) is not
counted: nothing is known of it. Time is split at midnight UTC, so each day's figures are that
day's. The ledger lives in memory (a restarted service starts its day afresh); ``keep_days`` days
are kept.

It counts failed starts too (:meth:`Ledger.failed_start`, from :mod:`.starts`), per day, team,
user and offering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from gpuaas_service.reclaim.decide import Workbench
from gpuaas_service.reclaim.idleness import State

__all__ = ["DayKey", "Ledger", "Usage"]

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

    def add(self, other: Usage) -> None:
        self.allocated += other.allocated
        self.busy += other.busy
        self.idle += other.idle

    def hours(self) -> dict[str, float]:
        return {
            "allocated_hours": round(self.allocated / 3600, 4),
            "busy_hours": round(self.busy / 3600, 4),
            "idle_hours": round(self.idle / 3600, 4),
        }


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

    def add(self, workbenches: Iterable[Workbench], now: datetime) -> dict[DayKey, Usage]:
        """Count the time since the previous call; return what was added, by key."""
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
            for day, seconds in slices:
                part = Usage(
                    allocated=size * seconds,
                    busy=size * seconds if state is State.BUSY else 0.0,
                    idle=size * seconds if state is State.IDLE else 0.0,
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

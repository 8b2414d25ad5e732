"""Recent warnings, snoozes, reclaims and hand-offs, and "regret" (pure, in memory).

The reclaim loop records what it carried out (:meth:`Journal.record`); each cycle it shows the
journal the servers running now (:meth:`Journal.observe`), so that a reclaimed user who starts
a server again is noted with when: *regret* is a reclaim whose user was back within the
console's ``regret_window``. At most ``size`` entries are kept, the oldest dropped first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from gpuaas_culler.reclaim.decide import Workbench
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = ["Entry", "Journal"]

EVENTS = ("warn", "snooze", "reclaim", "handoff")


@dataclass(frozen=True, kw_only=True)
class Entry:
    event: str
    """``warn``, ``snooze``, ``reclaim`` or ``handoff``."""
    at: datetime
    user: str = ""
    server: str = ""
    team: str = ""
    offering: str = ""
    gpu_equivalents: str = ""
    reason: str = ""
    workload: str = ""
    """The queued workload (``namespace/name``) a reclaim or a hand-off was for."""
    result: str = ""
    """A hand-off's ``succeeded``, ``failed`` or ``gone``."""
    latency_seconds: float | None = None
    """A hand-off's time from the reclaim to the admission."""
    returned_at: datetime | None = None
    """A reclaim's user started a server again at this time (the first seen after it)."""
    dry_run: bool = False

    def payload(self, regret_window: timedelta) -> dict[str, Any]:
        back = (
            (self.returned_at - self.at).total_seconds() if self.returned_at is not None else None
        )
        return {
            "event": self.event,
            "at": isoformat_z(self.at),
            "user": self.user,
            "server": self.server,
            "team": self.team,
            "offering": self.offering,
            "gpu_equivalents": self.gpu_equivalents,
            "reason": self.reason,
            "workload": self.workload,
            "result": self.result,
            "latency_seconds": self.latency_seconds,
            "returned_after_seconds": back,
            "regret": back is not None and back <= regret_window.total_seconds(),
            "dry_run": self.dry_run,
        }


class Journal:
    def __init__(self, size: int = 500) -> None:
        self.entries: deque[Entry] = deque(maxlen=size)

    def record(self, entry: Entry) -> None:
        if entry.event not in EVENTS:
            raise ValueError(f"unknown journal event {entry.event!r}")
        self.entries.append(entry)

    def observe(self, workbenches: Iterable[Workbench]) -> None:
        """Note the first server each reclaimed user started after their reclaim."""
        starts: dict[str, list[datetime]] = {}
        for wb in workbenches:
            starts.setdefault(wb.user, []).append(wb.started_at)
        if not starts:
            return
        for i, e in enumerate(self.entries):
            if e.event != "reclaim" or e.returned_at is not None or e.user not in starts:
                continue
            after = [t for t in starts[e.user] if t > e.at]
            if after:
                self.entries[i] = replace(e, returned_at=min(after))

    def recent(self, regret_window: timedelta, limit: int = 200) -> list[dict[str, Any]]:
        """Newest first."""
        out = [e.payload(regret_window) for e in reversed(self.entries)]
        return out[:limit]

    def regret(self, regret_window: timedelta) -> dict[str, Any]:
        reclaims = [e for e in self.entries if e.event == "reclaim" and not e.dry_run]
        back = [e for e in reclaims if e.payload(regret_window)["regret"]]
        return {
            "reclaims": len(reclaims),
            "returned_within_window": len(back),
            "window_seconds": regret_window.total_seconds(),
        }

"""Recent warnings, snoozes, reclaims and hand-offs, and "regret" (pure).

The reclaim loop records what it carried out (:meth:`Journal.record`); each cycle it shows the
journal the servers running now (:meth:`Journal.observe`), so that a reclaimed user who starts
a server again is noted with when: *regret* is a reclaim whose user was back within the
console's ``regret_window``. At most ``size`` entries are kept, the oldest dropped first.

The loop keeps the journal across restarts in a ConfigMap (:data:`JOURNAL_CONFIGMAP`, beside
the hand-off records), as text from :func:`journal_to_text`: the newest entries that fit in
:data:`MAX_JOURNAL_BYTES` (a ConfigMap holds at most 1 MiB), so that a reclaimed user who comes
back after a restart of the service still counts as regret.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from datetime import date, datetime, timedelta
from typing import Any, Literal, cast

from gpuaas_service import api_types as service_api
from gpuaas_service.reclaim.decide import Workbench
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kueue import parse_time

__all__ = [
    "JOURNAL_CONFIGMAP",
    "MAX_JOURNAL_BYTES",
    "Entry",
    "Journal",
    "journal_from_text",
    "journal_to_text",
]

JOURNAL_CONFIGMAP = "gpuaas-console-journal"
"""ConfigMap in the notebook namespace that keeps the console's journal across restarts."""
MAX_JOURNAL_BYTES = 256 * 1024
"""The most text kept (500 entries are about 150 KB; long reasons take more, the oldest go)."""

EVENTS = ("warn", "withdraw", "snooze", "reclaim", "lent", "handoff")
_EventName = Literal["warn", "withdraw", "snooze", "reclaim", "lent", "handoff"]
_Result = Literal[
    "", "succeeded", "failed", "gone", "state kept", "state kept with losses", "state lost"
]


@dataclass(frozen=True, kw_only=True)
class Entry:
    event: str
    """``warn``, ``withdraw`` (a warning withdrawn; ``reason`` says why), ``snooze``,
    ``reclaim``, ``lent`` (a reclaim gave the team's quota to another team's queued work) or
    ``handoff``."""
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

    def payload(self, regret_window: timedelta) -> service_api.ServiceConsoleEvent:
        back = (
            (self.returned_at - self.at).total_seconds() if self.returned_at is not None else None
        )
        return {
            # one of EVENTS (from_dict refuses others); the document lists them too
            "event": cast("_EventName", self.event),
            "at": isoformat_z(self.at),
            "user": self.user,
            "server": self.server,
            "team": self.team,
            "offering": self.offering,
            "gpu_equivalents": self.gpu_equivalents,
            "reason": self.reason,
            "workload": self.workload,
            "result": cast("_Result", self.result),
            "latency_seconds": self.latency_seconds,
            "returned_after_seconds": back,
            "regret": back is not None and back <= regret_window.total_seconds(),
            "dry_run": self.dry_run,
        }

    def to_dict(self) -> dict[str, Any]:
        """As kept in the ConfigMap (the inverse of :meth:`from_dict`)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                value = isoformat_z(value)
            if value not in (None, "", False):
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, raw: Any) -> Entry:
        if not isinstance(raw, dict) or raw.get("event") not in EVENTS:
            raise ValueError(f"not a journal entry: {raw!r:.200}")
        at = parse_time(raw.get("at"))
        if at is None:
            raise ValueError(f"a journal entry without its time: {raw!r:.200}")
        latency = raw.get("latency_seconds")
        return cls(
            event=str(raw["event"]),
            at=at,
            **{k: str(raw.get(k) or "") for k in _TEXT_FIELDS},
            latency_seconds=float(latency) if latency is not None else None,
            returned_at=parse_time(raw.get("returned_at")),
            dry_run=bool(raw.get("dry_run", False)),
        )


_TEXT_FIELDS = (
    "user",
    "server",
    "team",
    "offering",
    "gpu_equivalents",
    "reason",
    "workload",
    "result",
)


def journal_to_text(entries: Iterable[Entry], max_bytes: int = MAX_JOURNAL_BYTES) -> str:
    """The newest ``entries`` whose JSON fits in ``max_bytes``, oldest first (version 1)."""
    kept: list[str] = []
    size = len('{"entries":[],"version":1}')
    for entry in reversed(list(entries)):
        text = json.dumps(entry.to_dict(), sort_keys=True, separators=(",", ":"))
        if size + len(text.encode()) + 1 > max_bytes:
            break
        kept.append(text)
        size += len(text.encode()) + 1
    return '{"entries":[' + ",".join(reversed(kept)) + '],"version":1}'


def journal_from_text(text: str) -> list[Entry]:
    """The inverse of :func:`journal_to_text`; ``ValueError`` says what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError("not a version 1 console journal")
    return [Entry.from_dict(raw) for raw in data.get("entries") or []]


class Journal:
    def __init__(self, size: int = 500) -> None:
        self.entries: deque[Entry] = deque(maxlen=size)
        self.changes = 0
        """Bumped on every change (the loop writes the ConfigMap when it moved)."""

    def record(self, entry: Entry) -> None:
        if entry.event not in EVENTS:
            raise ValueError(f"unknown journal event {entry.event!r}")
        self.entries.append(entry)
        self.changes += 1

    def restore(self, kept: Iterable[Entry]) -> None:
        """Put back what a previous run kept, before what this run recorded already."""
        mine = list(self.entries)
        self.entries.clear()
        self.entries.extend(sorted([*kept, *mine], key=lambda e: e.at))
        self.changes += 1

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
                self.changes += 1

    def recent(
        self, regret_window: timedelta, limit: int = 200
    ) -> list[service_api.ServiceConsoleEvent]:
        """Newest first."""
        out = [e.payload(regret_window) for e in reversed(self.entries)]
        return out[:limit]

    def reclaims_by_team(self, day: date) -> dict[str, int]:
        """Per team: its servers reclaimed on ``day`` (UTC; dry runs not counted)."""
        out: dict[str, int] = {}
        for e in self.entries:
            if e.event == "reclaim" and not e.dry_run and e.at.date() == day:
                out[e.team or "-"] = out.get(e.team or "-", 0) + 1
        return out

    def regret(self, regret_window: timedelta) -> service_api.ServiceConsoleRegret:
        reclaims = [e for e in self.entries if e.event == "reclaim" and not e.dry_run]
        back = [e for e in reclaims if e.payload(regret_window)["regret"]]
        return {
            "reclaims": len(reclaims),
            "returned_within_window": len(back),
            "window_seconds": regret_window.total_seconds(),
        }

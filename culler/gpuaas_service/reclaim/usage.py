"""Each user's recent session GPU-memory peaks, recorded for the spawn form's size advice.

A listener of the reclaim loop (:class:`~.events.LoopListener`): at each complete cycle it takes,
for every workbench the hub confirmed, the GPU memory its latest activity report says its kernels
hold, and keeps the largest per session (a server's run: user and server name, from its start
until its workbench is gone from a cycle, or it starts again: a start more than
:data:`NEW_RUN_AFTER` later than the run's). A session that has ended joins the user's history
(:func:`jupyter_gpuaas.core.sizing.record_peak`), which is kept in the ConfigMap
``gpuaas-usage-history`` that the hub reads (the contract: :mod:`jupyter_gpuaas.core.sizing`).

Peaks are sampled once per cycle (``interval``), from what the server itself reports: advice,
never a limit. A move (the way up or down, :mod:`gpuaas_service.resize`) records the peak it
was made for itself (:meth:`UsageRecorder.peak_at_move`: the server's report just before it),
since a session moved at its cap ends between two cycles, its peak often seen by none. A
session with no report of known size is not recorded (nothing was measured). The history is
read once per process before anything is recorded, so a restart never writes
over what an earlier run kept; sessions still open when the process ends are not recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from gpuaas_service.clients.persisted import PersistedState, StateUnreadable
from gpuaas_service.reclaim.activity_store import ActivityStore, server_key
from gpuaas_service.reclaim.events import CycleResult, LoopEvent
from jupyter_gpuaas.core.sizing import PeakHistory, history_json, parse_history, record_peak

__all__ = ["UsageRecorder", "move_recorder"]

log = logging.getLogger("gpuaas.culler")

_Server = tuple[str, str]
"""(user, server name)."""

NEW_RUN_AFTER = timedelta(minutes=1)
"""A workbench's start later than its open run's by more than this is a new run. The start a
cycle sees moves within one run (the pod's creation, then its start; the hub's spawn time for
the servers the loop asked the hub about): counted as runs, one session was several."""


MAX_MOVED = 1000
"""Moved sessions' peaks kept for the next cycle at most."""


@dataclass
class _Open:
    started_at: datetime
    """The latest start seen of this run."""
    peak: int = 0
    measured: bool = False


class UsageRecorder:
    """Records session peaks into ``state`` (the ``gpuaas-usage-history`` ConfigMap)."""

    def __init__(self, state: PersistedState) -> None:
        self.state = state
        self.history = PeakHistory({})
        self.open: dict[_Server, _Open] = {}
        """The runs in progress, by server."""
        self._pending = False
        """Sessions recorded since the history was last written."""
        self._moved: list[tuple[str, int]] = []
        """Peaks of moved sessions no cycle had seen yet (user, bytes): recorded next cycle."""

    def happened(self, event: LoopEvent) -> None:
        """Actions are not usage: nothing to do."""

    async def cycle_completed(self, result: CycleResult) -> None:
        if not self.state.loaded and not await self._load():
            return
        for user, peak in self._moved:
            self.history = record_peak(self.history, user, peak)
            self._pending = True
        self._moved.clear()
        seen: set[_Server] = set()
        for wb in result.workbenches:
            server = (wb.user, wb.server)
            seen.add(server)
            entry = self.open.get(server)
            if entry is not None and wb.started_at > entry.started_at + NEW_RUN_AFTER:
                self._ended(server, entry)  # restarted between two cycles
                entry = None
            if entry is None:
                entry = self.open[server] = _Open(wb.started_at)
            entry.started_at = max(entry.started_at, wb.started_at)
            report = result.inputs.reports.get(wb.key)
            held = report.activity.gpu_memory if report is not None else None
            if held is not None:  # None: some memory of unknown size, nothing to record
                entry.peak = max(entry.peak, held)
                entry.measured = True
        for server in [s for s in self.open if s not in seen]:
            self._ended(server, self.open.pop(server))
        if self._pending and await self.state.write(history_json(self.history)):
            self._pending = False

    def session_peak(self, user: str, server: str, now: datetime) -> tuple[int, float] | None:
        """The open session's peak so far (bytes) and the seconds since it started, as of
        ``now``; ``None`` where it is not open or nothing of it was measured (the way down,
        :func:`gpuaas_service.resize.plan.way_down`)."""
        run = self.open.get((user, server))
        if run is None or not run.measured:
            return None
        return run.peak, max(0.0, (now - run.started_at).total_seconds())

    def peak_at_move(self, user: str, server: str, peak: int) -> None:
        """A move of this server is under way, made at ``peak`` bytes (its last activity
        report): the session's peak is at least that. The session ends with the move (the
        next cycle sees the server gone or started again) and is recorded then; one no cycle
        has seen yet is recorded at the next cycle."""
        run = self.open.get((user, server))
        if run is None:
            self._moved.append((user, max(0, peak)))
            del self._moved[:-MAX_MOVED]  # cycles that never complete keep only the latest
            return
        run.peak = max(run.peak, peak)
        run.measured = True

    def _ended(self, server: _Server, run: _Open) -> None:
        """One session more in the user's history, where it was measured."""
        if run.measured:
            self.history = record_peak(self.history, server[0], run.peak)
            self._pending = True

    async def _load(self) -> bool:
        """Read what earlier runs kept; ``False`` while it cannot be read (tried next cycle)."""
        try:
            text = await self.state.read()
        except StateUnreadable:
            return False
        if text is not None:
            self.history, problems = parse_history(text)
            for problem in problems[:5]:  # the rest of the history is kept
                log.warning("culler: usage history: ignored: %s", problem)
        return True


def move_recorder(recorder: UsageRecorder, store: ActivityStore) -> Callable[[str, str], None]:
    """What a move calls as it begins (``Resizer.peak_at_move``): the GPU memory the server's
    last activity report says its kernels hold is the peak the move was made for (the
    server's extension reports just before it asks for the move); nothing where that is not
    known."""

    def record(user: str, server: str) -> None:
        report = store.report(server_key(user, server))
        held = report.activity.gpu_memory if report is not None else None
        if held is not None:
            recorder.peak_at_move(user, server, held)

    return record

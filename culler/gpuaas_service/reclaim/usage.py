"""Each user's recent session GPU-memory peaks, recorded for the spawn form's size advice.

A listener of the reclaim loop (:class:`~.events.LoopListener`): at each complete cycle it takes,
for every workbench the hub confirmed, the GPU memory its latest activity report says its kernels
hold, and keeps the largest per session (a server's run: user, server name and start). A session
whose workbench is gone from the cycle has ended; its peak joins the user's history
(:func:`jupyter_gpuaas.core.sizing.record_peak`), which is kept in the ConfigMap
``gpuaas-usage-history`` that the hub reads (the contract: :mod:`jupyter_gpuaas.core.sizing`).

Peaks are sampled once per cycle (``interval``), from what the server itself reports: advice,
never a limit. A session with no report of known size is not recorded (nothing was measured).
The history is read once per process before anything is recorded, so a restart never writes
over what an earlier run kept; sessions still open when the process ends are not recorded.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from gpuaas_service.clients.persisted import PersistedState, StateUnreadable
from gpuaas_service.reclaim.events import CycleResult, LoopEvent
from jupyter_gpuaas.core.sizing import PeakHistory, history_json, parse_history, record_peak

__all__ = ["UsageRecorder"]

log = logging.getLogger("gpuaas.culler")

_Session = tuple[str, str, datetime]
"""(user, server, started_at): one run of one server."""


@dataclass
class _Open:
    peak: int = 0
    measured: bool = False


class UsageRecorder:
    """Records session peaks into ``state`` (the ``gpuaas-usage-history`` ConfigMap)."""

    def __init__(self, state: PersistedState) -> None:
        self.state = state
        self.history = PeakHistory({})
        self.open: dict[_Session, _Open] = {}
        self._pending = False
        """Sessions recorded since the history was last written."""

    def happened(self, event: LoopEvent) -> None:
        """Actions are not usage: nothing to do."""

    async def cycle_completed(self, result: CycleResult) -> None:
        if not self.state.loaded and not await self._load():
            return
        seen: set[_Session] = set()
        for wb in result.workbenches:
            session = (wb.user, wb.server, wb.started_at)
            seen.add(session)
            entry = self.open.setdefault(session, _Open())
            report = result.inputs.reports.get(wb.key)
            held = report.activity.gpu_memory if report is not None else None
            if held is not None:  # None: some memory of unknown size, nothing to record
                entry.peak = max(entry.peak, held)
                entry.measured = True
        for session in [s for s in self.open if s not in seen]:
            ended = self.open.pop(session)
            if ended.measured:
                self.history = record_peak(self.history, session[0], ended.peak)
                self._pending = True
        if self._pending and await self.state.write(history_json(self.history)):
            self._pending = False

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

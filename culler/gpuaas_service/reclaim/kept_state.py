"""What a reclaim kept of a server's kernels (pure): the stop step's record of its snapshot.

Before the loop stops a server whose reports say it keeps kernel state, it asks for a snapshot
and waits at most the policy file's ``snapshot_timeout`` (:mod:`.activity_store`). Whatever
came of it — every kernel's outcome, an error, or no answer in time — is a :class:`KeptState`:
its :attr:`~KeptState.result` is counted (``gpuaas_reclaim_states_total``), its
:meth:`~KeptState.record` is the audit line ``culler.kernel-state``, its
:meth:`~KeptState.words` go to the console's journal, and its :meth:`~KeptState.mark` is kept on
the pod, where the spawner reads it for the notice its user gets on return.

A session is *interrupted* (the replay's interruption level counts it) unless every kernel was
kept, with or without losses: no answer in time, a snapshot that could not run, a kernel that
failed or was running a cell, or a server that does not keep state at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from jupyter_gpuaas.core.activity import KernelStateReport, kernel_state_json
from jupyter_gpuaas.core.durations import format_duration, isoformat_z
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, summarise

__all__ = ["MARK_MAX_BYTES", "KeptState", "StateResult"]

StateResult = Literal["kept", "kept_with_losses", "interrupted"]
"""What a reclaim kept of its session (``gpuaas_reclaim_states_total``'s ``result``,
:data:`gpuaas_service.metrics.RECLAIM_STATE_RESULTS`)."""
MARK_MAX_BYTES = 8 * 1024
"""The most JSON kept on the pod for the return notice (annotations are small)."""


@dataclass(frozen=True)
class KeptState:
    """The snapshot a stop asked for at ``requested_at`` (``None``: not asked, because the
    server does not keep state or ``snapshot_timeout`` is 0), its answer (``None``: none within
    ``timeout``), and how long the stop waited for it."""

    requested_at: datetime | None
    report: KernelStateReport | None = None
    timeout: timedelta = timedelta(0)
    waited: timedelta = timedelta(0)

    @property
    def asked(self) -> bool:
        return self.requested_at is not None

    @property
    def outcomes(self) -> tuple[KernelStateOutcome, ...]:
        return self.report.outcomes if self.report is not None else ()

    @property
    def result(self) -> StateResult:
        report = self.report
        if report is None or report.error:
            return "interrupted"
        kinds = {o.outcome for o in report.outcomes}
        if kinds - {"kept", "kept_with_losses"}:
            return "interrupted"
        return "kept_with_losses" if "kept_with_losses" in kinds else "kept"

    @property
    def why_lost(self) -> str:
        """Why nothing at all was kept (``""`` when an answer came)."""
        if not self.asked:
            return "the server does not keep kernel state"
        if self.report is None:
            return f"no answer within snapshot_timeout ({format_duration(self.timeout)})"
        return self.report.error

    def words(self) -> str:
        """For the console's journal: each kernel's outcome, or why nothing was kept."""
        if self.report is None or self.report.error:
            return f"kernel state not kept: {self.why_lost}"
        if not self.report.outcomes:
            return "no kernels running"
        return f"kernel state: {summarise(self.report.outcomes)}"

    def record(self, *, user: str, server: str, at: datetime) -> dict[str, Any]:
        """The audit line (``culler.kernel-state``): per kernel its outcome, the names it lost
        and why it failed; never a variable's value."""
        return {
            "event": "culler.kernel-state",
            "at": isoformat_z(at),
            "user": user,
            "server": server,
            "asked": self.asked,
            "answered": self.report is not None,
            "result": self.result,
            "error": self.why_lost,
            "waited_seconds": round(self.waited.total_seconds(), 3),
            "kernels": [
                {
                    "kernel_id": o.kernel_id,
                    "notebook": o.notebook,
                    "outcome": o.outcome,
                    "lost": [{"name": v.name, "reason": v.reason} for v in o.lost],
                    "error": o.error,
                    "bytes": o.bytes,
                    "seconds": o.seconds,
                }
                for o in self.outcomes
            ],
        }

    def mark(self) -> str | None:
        """The pod annotation the spawner words its return notice from
        (:func:`~jupyter_gpuaas.core.activity.read_kernel_state_mark`): the answer (each
        kernel's lost list shortened to fit :data:`MARK_MAX_BYTES`) or, with no usable answer,
        why nothing was kept; ``None`` when no snapshot was asked for (the notice says nothing
        of kernel state, as before servers kept it)."""
        if self.requested_at is None:
            return None
        report = self.report
        if report is None:
            report = KernelStateReport(self.requested_at, (), self.why_lost)
        body = kernel_state_json(report, max_bytes=MARK_MAX_BYTES)
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

"""The console's own record of the reclaim loop, kept as one of its listeners: the journal of
warnings, snoozes, reclaims and hand-offs (:mod:`.journal`, kept across restarts in ConfigMap
:data:`~.journal.JOURNAL_CONFIGMAP`) and the GPU-hour ledger (:mod:`.ledger`, in memory).

The journal is the console's record, not an input of the decisions: a ConfigMap that cannot be
read never stops a cycle. It is read once (retried after each cycle until read), and not
written before it has been read, so that nothing a previous run kept is overwritten.
"""

from __future__ import annotations

from collections.abc import Collection

from gpuaas_service.clients.persisted import PersistedState, StateUnreadable
from gpuaas_service.console.journal import Entry, Journal, journal_from_text, journal_to_text
from gpuaas_service.console.ledger import Ledger
from gpuaas_service.reclaim.events import CycleResult, LoopEvent
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents

__all__ = ["ConsoleRecord", "journal_entry"]


def journal_entry(event: LoopEvent) -> Entry:
    """The journal's line for an action the loop carried out (a hand-off names no workbench:
    its team is the queued work's)."""
    wb = event.workbench
    return Entry(
        event=event.kind,
        at=event.at,
        user=wb.user if wb else "",
        server=wb.server if wb else "",
        team=wb.team if wb else event.team,
        offering=(wb.offering or wb.kind) if wb else "",
        gpu_equivalents=format_gpu_equivalents(wb.gpu_equivalents) if wb else "",
        reason=event.reason,
        workload=event.workload,
        result=event.result,
        latency_seconds=event.latency_seconds,
        dry_run=event.dry_run,
    )


class ConsoleRecord:
    """The journal and the ledger, fed by the loop (:class:`~.reclaim.events.LoopListener`).

    ``journal_state``: where the journal is kept across restarts (``None``: in memory only)."""

    def __init__(
        self,
        journal_state: PersistedState | None = None,
        *,
        journal: Journal | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.journal = journal if journal is not None else Journal()
        """Recent warnings, snoozes, reclaims and hand-offs (the console's list)."""
        self.ledger = ledger if ledger is not None else Ledger()
        """GPU-equivalent time allocated, busy and idle per day (the console's showback)."""
        self.journal_state = journal_state
        self._saved_changes = -1
        """:attr:`Journal.changes` as last written (``-1``: not written by this process)."""
        self.on_node: Collection[str] | None = None
        """The last cycle's servers on a node (``None``: not known)."""

    def happened(self, event: LoopEvent) -> None:
        self.journal.record(journal_entry(event))

    async def cycle_completed(
        self, result: CycleResult, on_node: Collection[str] | None = None
    ) -> None:
        """``on_node``: the servers whose pods are on a node (:func:`~.ledger.servers_on_nodes`;
        ``None``: not known): only their time is billed (:func:`~.ledger.holds_its_gpu`)."""
        self.on_node = on_node
        state = self.journal_state
        readable = state is None or state.loaded or await self._restore_journal(state)
        final = result.workbenches
        self.journal.observe(final)  # after the restore: a kept reclaim's user may be back
        if state is not None and readable:
            await self._write_journal(state)
        self.ledger.add(final, result.now, on_node)

    async def _write_journal(self, state: PersistedState) -> None:
        """Write the journal when it changed since last written (a failure: at the next cycle)."""
        changes = self.journal.changes
        if changes == self._saved_changes:
            return
        if await state.write(journal_to_text(self.journal.entries)):
            self._saved_changes = changes

    async def _restore_journal(self, state: PersistedState) -> bool:
        """Put back what a previous run kept, before what this run recorded already; ``False``
        while the ConfigMap cannot be read."""
        unsaved = bool(self.journal.entries)  # recorded while the ConfigMap could not be read
        try:
            text = await state.read()
        except StateUnreadable:
            return False
        if text:
            try:
                self.journal.restore(journal_from_text(text))
            except (ValueError, TypeError) as e:
                state.unusable(e)
        if not unsaved:
            self._saved_changes = self.journal.changes
        return True

"""What the reclaim loop publishes to its listeners (the console's journal, ledger and answers):
each action it carries out as it happens (:class:`LoopEvent`) and, after each complete cycle,
the cycle's result (:class:`CycleResult`). The loop never reads anything back from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from gpuaas_service.reclaim.decide import (
    HandOffRecord,
    PendingWorkload,
    PlacementWait,
    Plan,
    Workbench,
)
from gpuaas_service.reclaim.idleness import ActivityReport
from jupyter_gpuaas.core.headroom import QueueState

__all__ = ["CycleInputs", "CycleResult", "LoopEvent", "LoopListener"]


@dataclass(frozen=True)
class CycleInputs:
    """What the last complete cycle decided on, beyond its plan's workbenches (the console's
    snapshot and policy preview: :func:`~.snapshot.dump_snapshot`)."""

    pending: tuple[PendingWorkload, ...]
    handoffs: tuple[HandOffRecord, ...]
    reports: Mapping[str, ActivityReport | None]
    pod_utilization: Mapping[str, float]
    dry_run: bool
    waits: tuple[PlacementWait, ...] = ()
    """Admitted pods waiting for whole cards (:func:`~.gather.placement_waits`)."""
    queue_state: QueueState | None = None
    """What the cycle read, so that a view of it (the console) shows one moment: Kueue's
    queues (``None``: not kept), """
    workloads: tuple[Mapping[str, Any], ...] = ()
    """the Workloads of the watched namespaces,"""
    pods: tuple[Mapping[str, Any], ...] = ()
    """the notebook pods"""
    job_pods: tuple[Mapping[str, Any], ...] = ()
    """and the pods of the Jobs' namespaces."""


@dataclass(frozen=True, kw_only=True)
class LoopEvent:
    """An action carried out: a warning, a warning withdrawn (``withdraw``, with its reason), a
    snooze, a reclaim (of ``workbench``), a team's quota lent to another team's queued work by
    that reclaim (``lent``: ``team`` is the borrower's), or a hand-off's outcome (``workload``,
    ``result``: ``succeeded``, ``failed`` or ``gone``)."""

    kind: Literal["warn", "withdraw", "snooze", "reclaim", "lent", "handoff"]
    at: datetime
    workbench: Workbench | None = None
    reason: str = ""
    workload: str = ""
    """The queued workload (``namespace/name``) a reclaim or a hand-off was for."""
    team: str = ""
    """A hand-off's or a ``lent`` event's queued work's team (a workbench's team is the
    workbench's)."""
    result: str = ""
    latency_seconds: float | None = None
    """A hand-off's time from the reclaim to the admission."""
    dry_run: bool = False


@dataclass(frozen=True)
class CycleResult:
    """One complete cycle: its clock, its plan (the workbenches as the hub confirmed them) and
    what it decided on."""

    now: datetime
    plan: Plan
    inputs: CycleInputs

    @property
    def workbenches(self) -> list[Workbench]:
        return [d.workbench for d in self.plan.decisions]


class LoopListener(Protocol):
    """Told by the loop what it does (``ReclaimLoop.listeners``)."""

    def happened(self, event: LoopEvent) -> None:
        """An action carried out, as it happens (within a cycle, or a snooze between cycles)."""

    async def cycle_completed(self, result: CycleResult) -> None:
        """After each complete cycle, in the order the listeners were added."""

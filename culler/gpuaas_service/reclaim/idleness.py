"""Is a workbench busy, idle (since when), or unknown? Pure, from its last activity report.

Each single-user server's extension pushes the ``activity`` payload (docs/api.md,
:mod:`jupyter_gpuaas.core.activity`) to the gpuaas service; the service keeps the last one with
the time it arrived. :func:`judge` turns that, the offering kind, the previous verdict and a
clock into an :class:`Idleness`:

- **busy** — a kernel is executing (``busy``, see ``core.activity.BUSY_EXECUTION_STATES``);
  or, on a *whole GPU* only, the GPU's utilisation is above the policy's threshold. A MIG
  slice reports no utilisation and a time-shared GPU's figure is everyone's, so for those kinds
  utilisation never counts (unless a per-pod figure, e.g. from DCGM, is given).
- **fractions** (HAMi) — the seconds since the pod's last kernel, from HAMi's vGPU monitor on
  the node (``pod_last_kernel``), count as activity at that moment; with ``busy_signal: gpu``
  they alone decide: busy if a kernel ran in the last :data:`RECENT_KERNEL`, else idle since it.
- **unknown** — no report yet, no report for ``stale_after``, the report judged last time
  forgotten since (unknown from the last moment it was known active), or the report says the
  GPU readings failed (NVML error) on a GPU offering. Unknown is never idle.
- **idle** — otherwise, since the latest of: kernels' and terminals' last activity, the
  server's start, the last time it was seen busy, and the server's own ``idle_since``.

``last_active`` only moves forward: a verdict carries it into the next (``previous``), so a
GPU that was busy at the last report is not judged idle since an older kernel activity.
Polling by the sidebar is never activity (the extension does not count it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta

from jupyter_gpuaas.core.activity import Activity
from jupyter_gpuaas.core.catalog import GPU_KINDS
from jupyter_gpuaas.core.durations import format_duration

__all__ = ["RECENT_KERNEL", "ActivityReport", "Idleness", "State", "judge"]

RECENT_KERNEL = timedelta(seconds=60)
"""A fraction whose last kernel is this recent (HAMi's metric) is busy."""


class State(str, enum.Enum):
    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ActivityReport:
    """One ``activity`` payload and the time the service received it (the service's clock)."""

    received_at: datetime
    activity: Activity


@dataclass(frozen=True)
class Idleness:
    """The verdict on one workbench at one moment."""

    state: State
    last_active: datetime
    """The last moment it was known (or, while unknown, last known) to be active."""
    reason: str
    unknown_since: datetime | None = None
    gpu_memory: int | None = 0
    """GPU memory its kernels hold (``None``: some of unknown size) — lost on reclaim."""

    def idle_for(self, now: datetime) -> timedelta:
        return max(now - self.last_active, timedelta(0))

    def unknown_for(self, now: datetime) -> timedelta:
        if self.unknown_since is None:
            return timedelta(0)
        return max(now - self.unknown_since, timedelta(0))


def judge(
    report: ActivityReport | None,
    *,
    kind: str,
    started_at: datetime,
    now: datetime,
    stale_after: timedelta,
    busy_utilization_percent: float,
    previous: Idleness | None = None,
    pod_utilization: float | None = None,
    trust_pod_utilization: bool = False,
    pod_last_kernel: float | None = None,
    listening_since: datetime | None = None,
) -> Idleness:
    """The verdict on a workbench of offering ``kind`` at ``now``.

    ``pod_utilization`` is a per-pod GPU utilisation from outside the server (DCGM's pod
    metrics through Prometheus); it counts for whole GPUs and MIG slices, never for time-shared
    GPUs. ``previous`` is the last verdict on the same server (``None`` after a restart).

    ``trust_pod_utilization`` (a policy's ``busy_signal: gpu``): where that figure exists, it
    alone says busy or idle, and the server's own report — which its user could forge — is not
    asked; idle since the last verdict that saw the GPU busy (or the server's start). For a
    fraction the same goes for ``pod_last_kernel`` (seconds since its last kernel, HAMi).

    ``listening_since``: when the service began taking reports (its start). A server started
    before then, with no report and no verdict yet, is unknown since then, not since its start:
    the reports it sent before were forgotten with the service's memory.
    """
    verdicts = _Verdicts(
        now=now,
        evidence=[started_at] + ([previous.last_active] if previous is not None else []),
        was_unknown=previous.unknown_since
        if previous and previous.state is State.UNKNOWN
        else None,
        gpu_memory=report.activity.gpu_memory if report else None,
    )
    threshold = busy_utilization_percent
    if trust_pod_utilization and pod_utilization is not None and kind in ("gpu", "mig"):
        figure = f"pod GPU utilisation {pod_utilization:g}% (DCGM; busy above {threshold:g}%)"
        return verdicts.outside(figure, busy=pod_utilization > threshold)
    if kind == "fraction" and pod_last_kernel is not None:
        kernel_at = now - timedelta(seconds=max(pod_last_kernel, 0.0))
        figure = f"last kernel {format_duration(now - kernel_at)} ago (HAMi's vGPU monitor)"
        if trust_pod_utilization:
            return verdicts.outside(figure, busy=now - kernel_at < RECENT_KERNEL, at=kernel_at)
        verdicts.evidence.append(kernel_at)  # the server's report may say more, never less
    if report is None:
        # unknown since then; not active then: a restart of the service is no activity of the
        # server's, and the report that comes next must not find its idle clock reset
        since, reason = _without_report(started_at, previous, listening_since)
        return verdicts.unknown(since, reason)
    return _from_report(verdicts, report, kind, threshold, pod_utilization, stale_after)


@dataclass
class _Verdicts:
    """What a verdict on one workbench rests on: the moments it was seen active."""

    now: datetime
    evidence: list[datetime]
    was_unknown: datetime | None
    """Since when it was unknown, if the previous verdict was unknown."""
    gpu_memory: int | None

    def last_active(self, *more: datetime | None) -> datetime:
        return min(max([*self.evidence, *(t for t in more if t is not None)]), self.now)

    def unknown(self, candidate: datetime, reason: str, *more: datetime | None) -> Idleness:
        since = min(self.was_unknown, candidate) if self.was_unknown else candidate
        return Idleness(
            State.UNKNOWN,
            self.last_active(*more),
            reason,
            unknown_since=min(since, self.now),
            gpu_memory=self.gpu_memory,
        )

    def outside(self, figure: str, *, busy: bool, at: datetime | None = None) -> Idleness:
        """The verdict of a signal from outside the server alone (``busy_signal: gpu``)."""
        if busy:
            return Idleness(State.BUSY, self.now, figure, gpu_memory=self.gpu_memory)
        return Idleness(
            State.IDLE,
            self.last_active(at),
            f"{figure}; busy_signal: gpu, so kernels and terminals are not counted",
            gpu_memory=self.gpu_memory,
        )


def _from_report(
    verdicts: _Verdicts,
    report: ActivityReport,
    kind: str,
    threshold: float,
    pod_utilization: float | None,
    stale_after: timedelta,
) -> Idleness:
    """The verdict of the server's own report (and the pod's utilisation, where known)."""
    now = verdicts.now
    seen_at = min(report.received_at, now)
    activity = report.activity
    verdicts.evidence += [k.last_activity for k in activity.kernels if k.last_activity is not None]
    verdicts.evidence += [
        t.last_activity for t in activity.terminals if t.last_activity is not None
    ]
    if activity.idle_since is not None:
        verdicts.evidence.append(activity.idle_since)

    busy = _busy_reason(activity, kind, threshold, pod_utilization)
    age = now - seen_at
    if age > stale_after:
        return verdicts.unknown(
            seen_at,
            f"no activity report for {format_duration(age)} (expected at least every"
            f" {format_duration(stale_after)})",
            seen_at if busy else None,
        )
    if busy:
        return Idleness(
            State.BUSY, verdicts.last_active(seen_at), busy, gpu_memory=activity.gpu_memory
        )
    if kind in GPU_KINDS and (activity.source == "unavailable" or activity.error):
        what = activity.error or "no GPU readings"
        return verdicts.unknown(
            seen_at, f"GPU readings failed ({what}): cannot tell whether it is idle"
        )
    return Idleness(
        State.IDLE,
        verdicts.last_active(),
        "no kernel busy"
        + (", no terminal" if not activity.terminals else ", terminals quiet")
        + (", GPU utilisation low" if kind == "gpu" and activity.gpu_utilization else ""),
        gpu_memory=activity.gpu_memory,
    )


def _without_report(
    started_at: datetime, previous: Idleness | None, listening_since: datetime | None
) -> tuple[datetime, str]:
    """Since when a server without a report is unknown, and why."""
    if previous is not None and previous.state is not State.UNKNOWN:
        # Judged from a report that has been forgotten since (the store's bounds): unknown
        # from the last moment it was known active, never presumed idle since its start.
        return previous.last_active, "its last activity report was forgotten"
    if previous is None and listening_since is not None and listening_since > started_at:
        return listening_since, "no activity report since the service started (after the server)"
    return started_at, "no activity report since the server started"


def _busy_reason(
    activity: Activity, kind: str, threshold: float, pod_utilization: float | None
) -> str:
    for k in activity.kernels:
        if k.busy:
            return f"kernel {k.kernel_id[:8] or '?'} is {k.execution_state}"
    if kind == "gpu":
        for uuid, utilization in activity.gpu_utilization:
            if utilization > threshold:
                return f"GPU {uuid[:12]} at {utilization:g}% (busy above {threshold:g}%)"
    if pod_utilization is not None and kind in ("gpu", "mig") and pod_utilization > threshold:
        return f"pod GPU utilisation {pod_utilization:g}% (busy above {threshold:g}%)"
    return ""

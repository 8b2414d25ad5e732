"""Is a workbench busy, idle (since when), or unknown? Pure, from its last activity report.

Each single-user server's extension pushes the ``activity`` payload (docs/api.md) to the
gpuaas service; the service keeps the last one with the time it arrived. :func:`judge` turns
that, the offering kind, the previous verdict and a clock into an :class:`Idleness`:

- **busy** — a kernel is executing (or starting); or, on a *whole GPU* only, the GPU's
  utilisation is above the policy's threshold. A MIG slice reports no utilisation and a
  time-shared GPU's figure is everyone's, so for those kinds utilisation never counts (unless a
  per-pod figure, e.g. from DCGM, is given).
- **unknown** — no report yet, no report for ``stale_after``, or the report says the GPU
  readings failed (NVML error) on a GPU offering. Unknown is never idle.
- **idle** — otherwise, since the latest of: kernels' and terminals' last activity, the
  server's start, the last time it was seen busy, and the server's own ``idle_since``.

``last_active`` only moves forward: a verdict carries it into the next (``previous``), so a
GPU that was busy at the last report is not judged idle since an older kernel activity.
Polling by the sidebar is never activity (the extension does not count it).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jupyter_gpuaas.core.catalog import GPU_KINDS
from jupyter_gpuaas.core.durations import format_duration
from jupyter_gpuaas.core.fields import FieldError, object_items
from jupyter_gpuaas.core.kueue import parse_time

__all__ = [
    "BUSY_KERNEL_STATES",
    "ActivityReport",
    "Idleness",
    "KernelReport",
    "ReportError",
    "State",
    "TerminalReport",
    "judge",
    "parse_report",
]

BUSY_KERNEL_STATES = frozenset({"busy", "starting", "restarting", "autorestarting"})


class State(str, enum.Enum):
    BUSY = "busy"
    IDLE = "idle"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class KernelReport:
    kernel_id: str
    execution_state: str | None
    last_activity: datetime | None
    connections: int = 0
    gpu_memory: int | None = 0


@dataclass(frozen=True)
class TerminalReport:
    name: str
    last_activity: datetime | None


@dataclass(frozen=True)
class ActivityReport:
    """One ``activity`` payload and the time the service received it (the service's clock)."""

    received_at: datetime
    sampled_at: datetime | None = None
    source: str = "nvml"
    error: str | None = None
    kernels: tuple[KernelReport, ...] = ()
    terminals: tuple[TerminalReport, ...] = ()
    gpu_memory: int | None = 0
    gpu_utilization: tuple[tuple[str, float], ...] = ()
    idle_since: datetime | None = None


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


class ReportError(ValueError):
    """An activity payload that does not have the documented shape."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


# --------------------------------------------------------------------------- parsing


def parse_report(payload: object, received_at: datetime) -> ActivityReport:
    """Check an ``activity`` payload (docs/api.md) and read it; :class:`ReportError` lists
    every problem with its path. Unknown extra fields are ignored (newer extensions)."""
    errors: list[FieldError] = []
    if not isinstance(payload, Mapping):
        raise ReportError([FieldError("(report)", "must be a JSON object")])

    def time(path: str, value: object, *, required: bool = False) -> datetime | None:
        if value is None:
            if required:
                errors.append(FieldError(path, "is required"))
            return None
        parsed = parse_time(value)
        if parsed is None:
            errors.append(FieldError(path, f"{value!r} is not an ISO 8601 time"))
        return parsed

    def count(path: str, value: object, *, nullable: bool) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            errors.append(FieldError(path, f"must be a whole number of bytes, not {value!r}"))
            return 0
        return value

    def items(key: str) -> list[tuple[str, Mapping[str, Any]]]:
        return object_items(payload.get(key), key, lambda p, m: errors.append(FieldError(p, m)))

    source = payload.get("source", "nvml")
    if not isinstance(source, str):
        errors.append(FieldError("source", f"must be a string, not {source!r}"))
        source = "unavailable"
    error = payload.get("error")
    if error is not None and not isinstance(error, str):
        errors.append(FieldError("error", f"must be a string or null, not {error!r}"))
        error = str(error)

    kernels = []
    for p, k in items("kernels"):
        state = k.get("execution_state")
        kernels.append(
            KernelReport(
                kernel_id=str(k.get("kernel_id", "")),
                execution_state=state if isinstance(state, str) else None,
                last_activity=time(f"{p}.last_activity", k.get("last_activity")),
                connections=k["connections"] if isinstance(k.get("connections"), int) else 0,
                gpu_memory=count(f"{p}.gpu_memory", k.get("gpu_memory", 0), nullable=True),
            )
        )
    terminals = [
        TerminalReport(
            name=str(t.get("name", "")),
            last_activity=time(f"{p}.last_activity", t.get("last_activity")),
        )
        for p, t in items("terminals")
    ]
    utilization = []
    for p, u in items("gpu_utilization"):
        value = u.get("utilization")
        if isinstance(value, bool) or not isinstance(value, int | float):
            errors.append(FieldError(f"{p}.utilization", f"must be a percentage, not {value!r}"))
            continue
        utilization.append((str(u.get("uuid", "")), float(value)))

    report = ActivityReport(
        received_at=received_at,
        sampled_at=time("sampled_at", payload.get("sampled_at")),
        source=source,
        error=error,
        kernels=tuple(kernels),
        terminals=tuple(terminals),
        gpu_memory=count("gpu_memory", payload.get("gpu_memory", 0), nullable=True),
        gpu_utilization=tuple(utilization),
        idle_since=time("idle_since", payload.get("idle_since")),
    )
    if errors:
        raise ReportError(errors)
    return report


# --------------------------------------------------------------------------- judging


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
) -> Idleness:
    """The verdict on a workbench of offering ``kind`` at ``now``.

    ``pod_utilization`` is a per-pod GPU utilisation from outside the server (DCGM's pod
    metrics through Prometheus); it counts for whole GPUs and MIG slices, never for time-shared
    GPUs. ``previous`` is the last verdict on the same server (``None`` after a restart).
    """
    threshold = busy_utilization_percent
    evidence: list[datetime] = [started_at]
    if previous is not None:
        evidence.append(previous.last_active)
    was_unknown = previous.unknown_since if previous and previous.state is State.UNKNOWN else None

    def last_active(*more: datetime | None) -> datetime:
        return min(max([*evidence, *(t for t in more if t is not None)]), now)

    def unknown(candidate: datetime, reason: str, *more: datetime | None) -> Idleness:
        since = min(was_unknown, candidate) if was_unknown else candidate
        return Idleness(
            State.UNKNOWN,
            last_active(*more),
            reason,
            unknown_since=min(since, now),
            gpu_memory=report.gpu_memory if report else None,
        )

    if report is None:
        return unknown(started_at, "no activity report since the server started")

    seen_at = min(report.received_at, now)
    evidence += [k.last_activity for k in report.kernels if k.last_activity is not None]
    evidence += [t.last_activity for t in report.terminals if t.last_activity is not None]
    if report.idle_since is not None:
        evidence.append(report.idle_since)

    busy = _busy_reason(report, kind, threshold, pod_utilization)
    age = now - seen_at
    if age > stale_after:
        return unknown(
            seen_at,
            f"no activity report for {format_duration(age)} (expected at least every"
            f" {format_duration(stale_after)})",
            seen_at if busy else None,
        )
    if busy:
        return Idleness(State.BUSY, last_active(seen_at), busy, gpu_memory=report.gpu_memory)
    if kind in GPU_KINDS and (report.source == "unavailable" or report.error):
        what = report.error or "no GPU readings"
        return unknown(seen_at, f"GPU readings failed ({what}): cannot tell whether it is idle")
    active = last_active()
    return Idleness(
        State.IDLE,
        active,
        "no kernel busy"
        + (", no terminal" if not report.terminals else ", terminals quiet")
        + (", GPU utilisation low" if kind == "gpu" and report.gpu_utilization else ""),
        gpu_memory=report.gpu_memory,
    )


def _busy_reason(
    report: ActivityReport, kind: str, threshold: float, pod_utilization: float | None
) -> str:
    for k in report.kernels:
        if k.execution_state in BUSY_KERNEL_STATES:
            return f"kernel {k.kernel_id[:8] or '?'} is {k.execution_state}"
    if kind == "gpu":
        for uuid, utilization in report.gpu_utilization:
            if utilization > threshold:
                return f"GPU {uuid[:12]} at {utilization:g}% (busy above {threshold:g}%)"
    if pod_utilization is not None and kind in ("gpu", "mig") and pod_utilization > threshold:
        return f"pod GPU utilisation {pod_utilization:g}% (busy above {threshold:g}%)"
    return ""

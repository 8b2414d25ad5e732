"""The ``activity`` payload (docs/api.md): what a server reports and the culler judges (pure).

Its one definition for both sides: the single-user server builds an :class:`Activity` and
writes it with :func:`activity_json` (``GET gpuaas/api/activity``, and the body of its reports
to the gpuaas service); the service reads it back with :func:`parse_activity`, which lists every
problem with its field path. What counts as a busy kernel is :data:`BUSY_EXECUTION_STATES`, on
both sides.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.fields import FieldError, FieldErrors, object_items
from jupyter_gpuaas.core.kueue import parse_time

__all__ = [
    "BUSY_EXECUTION_STATES",
    "MAX_CLOCK_SKEW",
    "MAX_KERNELS",
    "MAX_TERMINALS",
    "MAX_UTILIZATIONS",
    "Activity",
    "KernelActivity",
    "ReportError",
    "TerminalActivity",
    "activity_json",
    "build_activity",
    "parse_activity",
    "shown",
]

# What one server can truthfully report (the parser refuses more, so that a hostile body costs
# the shared service little and its store stays small).
MAX_KERNELS = 256
MAX_TERMINALS = 256
MAX_UTILIZATIONS = 64
"""GPUs whose utilisation one server reports (a node has at most a few dozen)."""
MAX_GPU_MEMORY = 1 << 50
"""Bytes (1 PiB): more than any node's GPUs hold together."""
MAX_CONNECTIONS = 100_000
MAX_TEXT = 2000
"""Characters of ``error``; ids, names and ``source`` get :data:`MAX_NAME`."""
MAX_NAME = 256
MAX_CLOCK_SKEW = timedelta(minutes=2)
"""How far a report's times may lie ahead of the service's clock (servers' clocks drift)."""
MAX_ERRORS = 20
"""Problems listed per refused report (the rest are counted): an answer never grows with the
input."""

BUSY_EXECUTION_STATES: tuple[str, ...] = ("busy",)
"""Kernel execution states that are activity. Only ``busy``: jupyter-server reports
``starting`` until the kernel's first status message, which for a kernel no client ever
connects to is never, so counting it would hold a GPU forever; and a (re)start already sets the
kernel's ``last_activity``, so the idle clock starts afresh without it."""


@dataclass(frozen=True)
class KernelActivity:
    kernel_id: str
    execution_state: str | None
    last_activity: datetime | None
    connections: int = 0
    gpu_memory: int | None = 0
    """Bytes of GPU memory its process tree holds; ``None``: some, of unknown size."""

    @property
    def busy(self) -> bool:
        return self.execution_state in BUSY_EXECUTION_STATES


@dataclass(frozen=True)
class TerminalActivity:
    name: str
    last_activity: datetime | None


@dataclass(frozen=True)
class Activity:
    """One ``activity`` payload."""

    sampled_at: datetime | None = None
    source: str = "nvml"
    error: str | None = None
    kernels: tuple[KernelActivity, ...] = ()
    terminals: tuple[TerminalActivity, ...] = ()
    gpu_memory: int | None = 0
    """The kernels' sum; ``None`` when some kernel's size is unknown (the GPU is in use)."""
    gpu_utilization: tuple[tuple[str, float], ...] = ()
    """``(uuid, percent)`` of the GPUs whose figure is this server's alone (whole, unshared)."""
    idle_since: datetime | None = None
    """``None`` while busy (as the server judged it); else its latest activity."""


def build_activity(
    *,
    sampled_at: datetime,
    source: str,
    error: str | None,
    kernels: Sequence[KernelActivity],
    terminals: Sequence[TerminalActivity],
    utilization: Sequence[tuple[str, float]],
    busy_utilization_percent: float,
    started: datetime,
) -> Activity:
    """The payload, with the figures derived from the rest: ``gpu_memory`` and ``idle_since``
    (``None`` while a kernel is busy or an own GPU works above the threshold; otherwise the
    latest activity of kernels and terminals, the server's start without any)."""
    sizes = [k.gpu_memory for k in kernels]
    busy = any(k.busy for k in kernels) or any(u > busy_utilization_percent for _, u in utilization)
    times = [k.last_activity for k in kernels] + [t.last_activity for t in terminals]
    known = [t for t in times if t is not None]
    return Activity(
        sampled_at=sampled_at,
        source=source,
        error=error,
        kernels=tuple(kernels),
        terminals=tuple(terminals),
        gpu_memory=None if None in sizes else sum(s or 0 for s in sizes),
        gpu_utilization=tuple(utilization),
        idle_since=None if busy else max(known) if known else started,
    )


def activity_json(activity: Activity) -> dict[str, Any]:
    """The payload as JSON (docs/api.md)."""
    return {
        "sampled_at": _iso(activity.sampled_at),
        "source": activity.source,
        "error": activity.error,
        "kernels": [
            {
                "kernel_id": k.kernel_id,
                "execution_state": k.execution_state,
                "last_activity": _iso(k.last_activity),
                "connections": k.connections,
                "gpu_memory": k.gpu_memory,
            }
            for k in activity.kernels
        ],
        "terminals": [
            {"name": t.name, "last_activity": _iso(t.last_activity)} for t in activity.terminals
        ],
        "gpu_memory": activity.gpu_memory,
        "gpu_utilization": [
            {"uuid": uuid, "utilization": u} for uuid, u in activity.gpu_utilization
        ],
        "idle_since": _iso(activity.idle_since),
    }


def _iso(dt: datetime | None) -> str | None:
    return isoformat_z(dt) if dt is not None else None


class ReportError(ValueError):
    """An activity payload that does not have the documented shape (at most
    :data:`MAX_ERRORS` problems are kept; ``more`` counts the rest)."""

    def __init__(self, errors: Sequence[FieldError], more: int = 0) -> None:
        self.errors = tuple(errors)
        self.more = more
        tail = f"; and {more} more problem(s)" if more else ""
        super().__init__("; ".join(str(e) for e in self.errors) + tail)


def shown(value: object, limit: int = 40) -> str:
    """``repr(value)``, cut to ``limit`` characters: error answers and log lines never echo
    unbounded input."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_activity(
    payload: object, *, now: datetime | None = None, max_skew: timedelta = MAX_CLOCK_SKEW
) -> Activity:
    """Check an ``activity`` payload and read it; :class:`ReportError` lists every problem with
    its path. Unknown extra fields are ignored (newer extensions).

    Nothing is clamped: numbers must be finite and in range, lists at most ``MAX_*`` long, and
    with ``now`` (the receiving service's clock) no time may lie more than ``max_skew`` after it
    (a report from the future would otherwise count as activity later than it is).
    """
    if not isinstance(payload, Mapping):
        raise ReportError([FieldError("(report)", "must be a JSON object")])
    r = _PayloadReader(payload, now + max_skew if now is not None else None, max_skew)
    source = r.text("source", payload.get("source", "nvml"), MAX_NAME) or "unavailable"
    error = payload.get("error")
    if error is not None:
        error = r.text("error", error, MAX_TEXT)
    kernels = _read_kernels(r)
    terminals = [
        TerminalActivity(
            name=r.text(f"{p}.name", t.get("name", ""), MAX_NAME),
            last_activity=r.time(f"{p}.last_activity", t.get("last_activity")),
        )
        for p, t in r.items("terminals", MAX_TERMINALS)
    ]
    utilization = _read_utilization(r)
    activity = Activity(
        sampled_at=r.time("sampled_at", payload.get("sampled_at")),
        source=source,
        error=error,
        kernels=tuple(kernels),
        terminals=tuple(terminals),
        gpu_memory=r.size("gpu_memory", payload.get("gpu_memory", 0)),
        gpu_utilization=tuple(utilization),
        idle_since=r.time("idle_since", payload.get("idle_since")),
    )
    errs = r.errs
    if errs.items:
        raise ReportError(errs.items[:MAX_ERRORS], max(len(errs.items) - MAX_ERRORS, 0))
    return activity


class _PayloadReader:
    """Reads the fields of one payload, collecting every problem with its path."""

    def __init__(
        self, payload: Mapping[str, Any], latest: datetime | None, max_skew: timedelta
    ) -> None:
        self.payload = payload
        self.latest = latest
        self.max_skew = max_skew
        self.errs = FieldErrors()

    def time(self, path: str, value: object) -> datetime | None:
        if value is None:
            return None
        parsed = parse_time(value)
        if parsed is None:
            self.errs.add(path, f"{shown(value)} is not an ISO 8601 time")
        elif self.latest is not None and parsed > self.latest:
            self.errs.add(
                path,
                f"{shown(value)} lies in the future (more than "
                f"{int(self.max_skew.total_seconds())}s after the service's clock)",
            )
            return None
        return parsed

    def size(self, path: str, value: object) -> int | None:
        if value is None:
            return None  # some GPU memory, of unknown size
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MAX_GPU_MEMORY
        ):
            self.errs.add(path, f"must be a whole number of bytes up to 2^50, not {shown(value)}")
            return 0
        return value

    def text(self, path: str, value: object, limit: int) -> str:
        if not isinstance(value, str):
            self.errs.add(path, f"must be a string, not {shown(value)}")
            return ""
        if len(value) > limit:
            self.errs.add(path, f"must be at most {limit} characters, not {len(value)}")
        return value[:limit]

    def items(self, key: str, most: int) -> list[tuple[str, Mapping[str, Any]]]:
        value = self.payload.get(key)
        if isinstance(value, list) and len(value) > most:
            self.errs.add(key, f"must list at most {most} items, not {len(value)}")
            return []
        return object_items(value, key, self.errs.add)


def _read_kernels(r: _PayloadReader) -> list[KernelActivity]:
    kernels = []
    for p, k in r.items("kernels", MAX_KERNELS):
        state, connections = k.get("execution_state"), k.get("connections", 0)
        if state is not None:
            state = r.text(f"{p}.execution_state", state, MAX_NAME)
        if (
            isinstance(connections, bool)
            or not isinstance(connections, int)
            or not 0 <= connections <= MAX_CONNECTIONS
        ):
            r.errs.add(
                f"{p}.connections", f"must be a whole number from 0, not {shown(connections)}"
            )
            connections = 0
        kernels.append(
            KernelActivity(
                kernel_id=r.text(f"{p}.kernel_id", k.get("kernel_id", ""), MAX_NAME),
                execution_state=state,
                last_activity=r.time(f"{p}.last_activity", k.get("last_activity")),
                connections=connections,
                gpu_memory=r.size(f"{p}.gpu_memory", k.get("gpu_memory", 0)),
            )
        )
    return kernels


def _read_utilization(r: _PayloadReader) -> list[tuple[str, float]]:
    utilization = []
    for p, u in r.items("gpu_utilization", MAX_UTILIZATIONS):
        value = u.get("utilization")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 <= value <= 100
        ):
            r.errs.add(
                f"{p}.utilization", f"must be a percentage from 0 to 100, not {shown(value)}"
            )
            continue
        utilization.append((r.text(f"{p}.uuid", u.get("uuid", ""), MAX_NAME), float(value)))
    return utilization

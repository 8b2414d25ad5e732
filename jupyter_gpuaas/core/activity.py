"""The ``activity`` payload (docs/api.md): what a server reports and the culler judges (pure).

Its one definition for both sides: the single-user server builds an :class:`Activity` and
writes it with :func:`activity_json` (``GET gpuaas/api/activity``, and the body of its reports
to the gpuaas service); the service reads it back with :func:`parse_activity`, which lists every
problem with its field path. What counts as a busy kernel is :data:`BUSY_EXECUTION_STATES`, on
both sides.

The reclaim's conversation about kernel state rides on the same reports (docs/culler.md): a
server that can save its kernels' variables says so (``keeps_kernel_state``); before it stops
such a server the service answers a report with a :class:`SnapshotRequest` (``snapshot``), and
the server, having saved them, reports at once with its :class:`KernelStateReport`
(``kernel_state``: one outcome per kernel, :mod:`jupyter_gpuaas.core.kernel_state`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.fields import FieldError, FieldErrors, object_items
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable
from jupyter_gpuaas.core.kueue import parse_time

__all__ = [
    "BUSY_EXECUTION_STATES",
    "MAX_CLOCK_SKEW",
    "MAX_KERNELS",
    "MAX_TERMINALS",
    "MAX_UTILIZATIONS",
    "Activity",
    "KernelActivity",
    "KernelStateReport",
    "ReportError",
    "SnapshotRequest",
    "TerminalActivity",
    "activity_json",
    "build_activity",
    "kernel_state_json",
    "parse_activity",
    "read_kernel_state_mark",
    "shown",
    "snapshot_request_of",
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
KERNEL_STATE_MAX_BYTES = 32 * 1024
"""The most JSON a server's ``kernel_state`` takes (the service refuses bodies over 64 KiB by
default): past it, each kernel's list of lost variables is shortened (the rest counted)."""
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
class KernelStateReport:
    """A server's answer to the service's :class:`SnapshotRequest` of ``requested_at``: what
    became of each kernel's variables, or (``error``) why no snapshot could be taken at all."""

    requested_at: datetime
    outcomes: tuple[KernelStateOutcome, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class SnapshotRequest:
    """The service's ask, in its answer to a report: save every kernel's variables now, within
    ``deadline_seconds``, and report at once (``reason``: why, e.g. ``reclaim``)."""

    requested_at: datetime
    deadline_seconds: float
    reason: str = "reclaim"

    def to_json(self) -> api.ServiceReportAnswerSnapshot:
        return {
            "requested_at": isoformat_z(self.requested_at),
            "deadline_seconds": round(self.deadline_seconds, 3),
            "reason": self.reason,
        }


def snapshot_request_of(answer: Mapping[str, Any]) -> SnapshotRequest | None:
    """The service's snapshot request in its answer to a report (``snapshot``), or ``None``
    (none, or not one this version reads: the server then simply keeps reporting)."""
    raw = answer.get("snapshot")
    if not isinstance(raw, Mapping):
        return None
    at = parse_time(raw.get("requested_at"))
    seconds = raw.get("deadline_seconds")
    if (
        at is None
        or isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        return None
    reason = raw.get("reason")
    return SnapshotRequest(at, float(seconds), reason if isinstance(reason, str) else "reclaim")


def kernel_state_json(
    report: KernelStateReport, *, max_bytes: int = KERNEL_STATE_MAX_BYTES
) -> api.KernelStateReport:
    """A report's ``kernel_state`` field, at most ``max_bytes`` of JSON as long as the kernels'
    own fields allow: each kernel's lost variables are listed up to a shrinking number, the
    rest counted in one last entry (\"12 more\")."""
    outcomes = report.outcomes[:MAX_KERNELS]
    keep: int | None = None
    while True:
        body: api.KernelStateReport = {
            "requested_at": isoformat_z(report.requested_at),
            "outcomes": [_listing(o, keep).to_json() for o in outcomes],
            "error": report.error[:MAX_TEXT],
        }
        if keep == 0 or len(json.dumps(body)) <= max_bytes:
            return body
        keep = 64 if keep is None else keep // 2


def read_kernel_state_mark(text: object) -> KernelStateReport | None:
    """A :func:`kernel_state_json` kept as text (the pod annotation a reclaim leaves for the
    return notice, ``RECLAIMED_KERNEL_STATE``); ``None`` when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, Mapping):
        return None
    r = _PayloadReader({"kernel_state": data}, None, MAX_CLOCK_SKEW)
    report = _read_kernel_state(r)
    return report if not r.errs.items else None


def _listing(outcome: KernelStateOutcome, keep: int | None) -> KernelStateOutcome:
    if keep is None or len(outcome.lost) <= keep:
        return outcome
    more = LostVariable(f"{len(outcome.lost) - keep} more", "too many to list")
    return replace(outcome, lost=(*outcome.lost[:keep], more))


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
    keeps_kernel_state: bool = False
    """The server saves its kernels' variables when the service asks (before a reclaim)."""
    kernel_state_bytes: int | None = None
    """Bytes a snapshot of its kernels would write, as they estimate it (with
    ``keeps_kernel_state``); ``None``: not said. The service's wait for a reclaim's snapshot
    grows with it (its policy's ``snapshot_per_gib``)."""
    kernel_state: KernelStateReport | None = None
    """Its answer to the service's latest snapshot request, until the service has it."""


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


def activity_json(activity: Activity) -> api.Activity:
    """The payload as JSON (docs/api.md); ``keeps_kernel_state`` and ``kernel_state`` only
    where set."""
    out: api.Activity = {
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
    if activity.keeps_kernel_state:
        out["keeps_kernel_state"] = True
        if activity.kernel_state_bytes is not None:
            out["kernel_state_bytes"] = activity.kernel_state_bytes
    if activity.kernel_state is not None:
        out["kernel_state"] = kernel_state_json(activity.kernel_state)
    return out


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
    its path. Unknown extra fields are ignored here; the service's ``POST api/activity`` refuses
    them, and everything else its OpenAPI document rules out, before this reads a report
    (core/api_documents.py).

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
        keeps_kernel_state=_read_keeps(r),
        kernel_state_bytes=r.size("kernel_state_bytes", payload.get("kernel_state_bytes")),
        kernel_state=_read_kernel_state(r),
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


def _read_keeps(r: _PayloadReader) -> bool:
    value = r.payload.get("keeps_kernel_state", False)
    if not isinstance(value, bool):
        r.errs.add("keeps_kernel_state", f"must be true or false, not {shown(value)}")
        return False
    return value


def _read_kernel_state(r: _PayloadReader) -> KernelStateReport | None:
    raw = r.payload.get("kernel_state")
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        r.errs.add("kernel_state", f"must be an object or null, not {shown(raw)}")
        return None
    requested_at = r.time("kernel_state.requested_at", raw.get("requested_at"))
    if requested_at is None and raw.get("requested_at") is None:
        r.errs.add("kernel_state.requested_at", "is required: the request this answers")
    error = raw.get("error", "")
    error = r.text("kernel_state.error", "" if error is None else error, MAX_TEXT)
    outcomes = []
    listed = raw.get("outcomes", [])
    if not isinstance(listed, list):
        r.errs.add("kernel_state.outcomes", f"must be a list, not {shown(listed)}")
        listed = []
    elif len(listed) > MAX_KERNELS:
        r.errs.add(
            "kernel_state.outcomes", f"must list at most {MAX_KERNELS} items, not {len(listed)}"
        )
        listed = []
    for i, item in enumerate(listed):
        try:
            outcomes.append(KernelStateOutcome.from_json(item))
        except ValueError as e:
            r.errs.add(f"kernel_state.outcomes[{i}]", str(e))
    if requested_at is None:
        return None
    return KernelStateReport(requested_at, tuple(outcomes), error)

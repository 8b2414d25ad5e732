"""The `activity` payload: what a culler judges this server's idleness by (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.gpu.model import Device


@dataclass(frozen=True)
class KernelActivity:
    kernel_id: str
    execution_state: str | None
    last_activity: datetime | None
    connections: int
    gpu_memory: int | None


@dataclass(frozen=True)
class TerminalActivity:
    name: str
    last_activity: datetime | None


def attributable_utilization(devices: Sequence[Device]) -> list[tuple[str, int]]:
    """Utilisation that is this server's alone: whole, unshared GPUs. A MIG device reports
    none, and a time-shared GPU's figure is everyone's, so neither can say this server is busy."""
    return [
        (d.uuid, d.utilization)
        for d in devices
        if d.whole_gpu and not d.shared and d.utilization is not None
    ]


def idle_since(
    kernels: Sequence[KernelActivity],
    terminals: Sequence[TerminalActivity],
    utilization: Sequence[tuple[str, int]],
    busy_utilization_percent: float,
    started: datetime,
) -> datetime | None:
    """None while a kernel is busy or a GPU of this server's own works above the threshold;
    otherwise the latest activity of kernels and terminals (the server's start without any)."""
    if any(k.execution_state == "busy" for k in kernels):
        return None
    if any(u > busy_utilization_percent for _, u in utilization):
        return None
    times = [k.last_activity for k in kernels] + [t.last_activity for t in terminals]
    known = [t for t in times if t is not None]
    return max(known) if known else started


def total_gpu_memory(kernels: Sequence[KernelActivity]) -> int | None:
    """Sum over kernels; None when some kernel holds GPU memory of unknown size."""
    sizes = [k.gpu_memory for k in kernels]
    return None if None in sizes else sum(s or 0 for s in sizes)


def activity_payload(
    *,
    sampled_at: datetime,
    source: str,
    error: str | None,
    kernels: Sequence[KernelActivity],
    terminals: Sequence[TerminalActivity],
    devices: Sequence[Device],
    busy_utilization_percent: float,
    started: datetime,
) -> dict[str, Any]:
    utilization = attributable_utilization(devices)
    since = idle_since(kernels, terminals, utilization, busy_utilization_percent, started)
    return {
        "sampled_at": isoformat_z(sampled_at),
        "source": source,
        "error": error,
        "kernels": [
            {
                "kernel_id": k.kernel_id,
                "execution_state": k.execution_state,
                "last_activity": _iso(k.last_activity),
                "connections": k.connections,
                "gpu_memory": k.gpu_memory,
            }
            for k in kernels
        ],
        "terminals": [{"name": t.name, "last_activity": _iso(t.last_activity)} for t in terminals],
        "gpu_memory": total_gpu_memory(kernels),
        "gpu_utilization": [{"uuid": uuid, "utilization": u} for uuid, u in utilization],
        "idle_since": _iso(since),
    }


def _iso(dt: datetime | None) -> str | None:
    return isoformat_z(dt) if dt is not None else None

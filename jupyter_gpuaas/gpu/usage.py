"""The `usage` payload of docs/api.md, built from plain data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.gpu.attribution import Attribution
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.gpu.nvml import NvmlRead


@dataclass(frozen=True)
class KernelInfo:
    """What the server knows of a kernel at sample time (no GPU figures)."""

    kernel_id: str
    name: str | None = None
    path: str | None = None
    session_type: str | None = None
    execution_state: str | None = None
    pid: int | None = None


def device_payload(device: Device) -> api.Device:
    return {
        "uuid": device.uuid,
        "index": device.index,
        "name": device.name,
        "parent_uuid": device.parent_uuid,
        "mig_profile": device.mig_profile,
        "memory_total": device.memory_total,
        "memory_used": device.memory_used,
        "utilization": device.utilization,
        "shared": device.shared,
        "cap": cap_payload(device),
    }


def cap_payload(device: Device) -> api.Cap | None:
    """A fraction's cap: bytes, where it was read, who enforces it, its compute share."""
    if device.memory_cap is None:
        return None
    return {
        "memory": device.memory_cap,
        "source": device.cap_source,
        "enforced_by": "HAMi",
        "cores_percent": device.compute_cap,
    }


def usage_payload(
    read: NvmlRead,
    kernels: Sequence[KernelInfo],
    trees: Mapping[str, frozenset[int]],
    attribution: Attribution,
    sampled_at: datetime,
) -> api.Usage:
    rows: list[api.KernelUsage] = []
    for info in kernels:
        gpu = attribution.kernels.get(info.kernel_id)
        rows.append(
            {
                "kernel_id": info.kernel_id,
                "name": info.name,
                "path": info.path,
                "session_type": info.session_type,
                "execution_state": info.execution_state,
                "pids": sorted(trees.get(info.kernel_id, ())),
                "gpu_memory": gpu.gpu_memory if gpu else 0,
                "by_device": dict(gpu.by_device) if gpu else {},
                "attribution": gpu.attribution if gpu else "none",
            }
        )
    return {
        "source": read.source,
        "error": read.error,
        "error_kind": read.error_kind,
        "sampled_at": isoformat_z(sampled_at),
        "devices": [device_payload(d) for d in read.devices],
        "kernels": rows,
        "other_memory": dict(attribution.other_memory),
    }

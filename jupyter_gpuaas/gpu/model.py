"""Plain data shared by the NVML layer, attribution and the payload builders (no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Source = Literal["nvml", "simulated", "unavailable"]
ErrorKind = Literal["no_driver", "gpu_lost", "not_supported", "no_permission", "unknown"]
AttributionKind = Literal["exact", "size_unknown", "sole_candidate", "none"]


@dataclass(frozen=True)
class Device:
    """A whole GPU, a MIG-enabled GPU (listed for its totals) or a MIG device."""

    uuid: str
    # NVML index for a GPU; for a MIG device, its index inside the parent (nvidia-smi "MIG dev").
    index: int
    name: str
    memory_total: int
    memory_used: int
    utilization: int | None = None
    parent_uuid: str | None = None
    mig_profile: str | None = None
    # A MIG-enabled GPU: its processes live on its MIG devices, so it holds none itself.
    mig_enabled: bool = False
    shared: bool = False
    # Whether the process list of this device could be read (False: processes unknown).
    processes_read: bool = True
    # A fraction's memory cap (HAMi: what NVML reports as memory_total inside the container),
    # the environment variable it comes from, and its compute share (percent; None: unlimited).
    memory_cap: int | None = None
    cap_source: str | None = None
    compute_cap: int | None = None

    @property
    def holds_processes(self) -> bool:
        return not self.mig_enabled

    @property
    def whole_gpu(self) -> bool:
        """A GPU that is neither MIG-partitioned nor a MIG device."""
        return self.parent_uuid is None and not self.mig_enabled


@dataclass(frozen=True)
class GpuProcess:
    """One entry of NVML's compute or graphics process list of a device."""

    device_uuid: str
    pid: int
    # None when NVML reports no figure; 0 is what drivers 535.113-560 report inside a PID
    # namespace, so both mean "size unknown" to attribution.
    used_memory: int | None


@dataclass(frozen=True)
class KernelTree:
    """A running kernel and the PIDs of its whole process tree (empty when unknown)."""

    kernel_id: str
    pids: frozenset[int] = field(default_factory=frozenset)


def device_matches(
    refs: frozenset[str],
    device: Device,
    parent_index: int | None,
) -> bool:
    """Whether a device is named by any of `refs`: "all", a UUID, a GPU index ("0") or a MIG
    device as "GPU:MIG" ("0:3"). A MIG device is also matched through its parent GPU."""
    if not refs:
        return False
    if "all" in refs or device.uuid in refs:
        return True
    if device.parent_uuid is None:
        return str(device.index) in refs
    return (
        device.parent_uuid in refs
        or str(parent_index) in refs
        or f"{parent_index}:{device.index}" in refs
    )

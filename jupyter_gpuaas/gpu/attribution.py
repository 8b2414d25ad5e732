"""Which kernel holds which GPU memory: a pure function of NVML's lists and the kernels' trees.

The order follows what each driver reports inside a pod (docs/simulated-gpus.md, "Driver
behaviours"), and each kernel says which rule gave its figure:

1. ``exact``: NVML's PIDs are in the kernel's process tree and come with their memory.
2. ``size_unknown``: the PIDs match but NVML reports no size (``None``, or the 0 that drivers
   535.113-560 report inside a PID namespace).
3. ``sole_candidate``: NVML's PIDs are not processes of this PID namespace at all (host PIDs from
   a driver up to 535.104), the device is not time-shared, and this server runs exactly one
   kernel, so it is the only possible owner.

Everything else is ``other_memory``: processes that are no kernel's, host PIDs with several
candidates, and anything on a time-shared GPU that matches no kernel (possibly other users').
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from jupyter_gpuaas.gpu.model import AttributionKind, Device, GpuProcess, KernelTree

# Which kind a kernel reports when its devices were attributed differently: the least certain.
_PRECEDENCE: tuple[AttributionKind, ...] = ("size_unknown", "sole_candidate", "exact")


@dataclass(frozen=True)
class KernelGpu:
    kernel_id: str
    # Bytes per device UUID; None where NVML lists the kernel's processes without their size.
    by_device: Mapping[str, int | None]
    # Sum of by_device, None when any part of it is unknown, 0 when nothing was found.
    gpu_memory: int | None
    attribution: AttributionKind


@dataclass(frozen=True)
class Attribution:
    kernels: Mapping[str, KernelGpu]
    # Per device that holds processes (whole GPUs and MIG devices, not MIG-enabled parents):
    # used memory that belongs to no kernel; None when it cannot be split (a size is unknown,
    # or the process list could not be read).
    other_memory: Mapping[str, int | None]


def merge_processes(processes: Iterable[GpuProcess]) -> list[GpuProcess]:
    """One entry per (device, pid): a process with both a compute and a graphics context is
    listed twice by NVML. A known size wins over an unknown one; two sizes, the larger."""
    merged: dict[tuple[str, int], GpuProcess] = {}
    for proc in processes:
        key = (proc.device_uuid, proc.pid)
        seen = merged.get(key)
        if seen is None or _known(proc.used_memory) > _known(seen.used_memory):
            merged[key] = proc
    return list(merged.values())


def _known(size: int | None) -> int:
    return -1 if size is None else size


def _owners(kernels: Iterable[KernelTree]) -> dict[int, str]:
    """PID -> kernel. A PID in several trees (a kernel started by another kernel's code)
    belongs to the innermost, i.e. the smallest tree."""
    ranked = sorted(kernels, key=lambda k: (len(k.pids), k.kernel_id))
    owners: dict[int, str] = {}
    for kernel in reversed(ranked):
        for pid in kernel.pids:
            owners[pid] = kernel.kernel_id
    return owners


def attribute(
    devices: Iterable[Device],
    processes: Iterable[GpuProcess],
    kernels: Iterable[KernelTree],
    visible_pids: frozenset[int],
) -> Attribution:
    """Attribute NVML's per-process memory to kernels.

    `visible_pids` are the PIDs of this PID namespace: an NVML PID among them that is in no
    kernel's tree is some other local process; one outside them is a host PID.
    """
    kernel_list = list(kernels)
    owners = _owners(kernel_list)
    leaves = {d.uuid: d for d in devices if d.holds_processes}
    procs = [p for p in merge_processes(processes) if p.device_uuid in leaves]
    # Host PIDs can only be told from other namespaces' PIDs when NVML translates none of them.
    untranslated = not any(p.pid in visible_pids for p in procs)
    sole = kernel_list[0].kernel_id if len(kernel_list) == 1 else None

    # (kernel, device) -> sizes and kinds found there
    found: dict[tuple[str, str], list[tuple[int | None, AttributionKind]]] = {}
    for proc in procs:
        size = proc.used_memory or None  # 0 is the 535.113-560 "not translated" reading
        owner = owners.get(proc.pid)
        if owner is not None:
            kind: AttributionKind = "exact" if size is not None else "size_unknown"
        elif (
            sole is not None
            and untranslated
            and proc.pid not in visible_pids
            and not leaves[proc.device_uuid].shared
        ):
            owner, kind = sole, "sole_candidate"
        else:
            continue
        found.setdefault((owner, proc.device_uuid), []).append((size, kind))

    results: dict[str, KernelGpu] = {}
    attributed: dict[str, list[int | None]] = {uuid: [] for uuid in leaves}
    for kernel in kernel_list:
        by_device: dict[str, int | None] = {}
        kinds: set[AttributionKind] = set()
        for uuid in leaves:
            entries = found.get((kernel.kernel_id, uuid))
            if not entries:
                continue
            sizes = [size for size, _ in entries]
            by_device[uuid] = None if None in sizes else sum(s or 0 for s in sizes)
            attributed[uuid].append(by_device[uuid])
            kinds.update(kind for _, kind in entries)
        values = list(by_device.values())
        results[kernel.kernel_id] = KernelGpu(
            kernel_id=kernel.kernel_id,
            by_device=by_device,
            gpu_memory=None if None in values else sum(v or 0 for v in values),
            attribution=next((k for k in _PRECEDENCE if k in kinds), "none"),
        )

    other: dict[str, int | None] = {}
    for uuid, device in leaves.items():
        sizes = attributed[uuid]
        if not device.processes_read or None in sizes:
            other[uuid] = None
        else:
            # Clamped: device and process figures are read at slightly different moments.
            other[uuid] = max(0, device.memory_used - sum(s or 0 for s in sizes))
    return Attribution(kernels=results, other_memory=other)

"""Sizes and the simulated-GPU device spec (pure parsing, no I/O).

Spec grammar (``GPUaaS.simulated_devices``), groups separated by commas::

    group   := [COUNT "x"] MODEL "-" MEMORY "GB" (":" option)*
    option  := "mig=" N "x" PROFILE ("+" N "x" PROFILE)*   MIG devices, e.g. mig=7x1g.5gb or
                                                          mig=2x3g.20gb+1x1g.5gb
             | "other=" SIZE                              memory of processes NVML does not
                                                          list to us (other pods), e.g. other=4GiB
             | "replicas=" N                              time-sliced by NVIDIA's device plugin
                                                          into N replicas (nvidia.com/gpu.shared)
             | "hami=" N                                  managed by HAMi's device plugin, split
                                                          into N vGPUs (nvidia.com/gpu with
                                                          nvidia.com/gpumem, nvidia.com/gpucores)

    "2xH100-80GB,1xA100-40GB:mig=7x1g.5gb"

GPU memory follows the vendors' naming: "80GB" and the "5gb" of a MIG profile are GiB, except
where NVML reports another total for the model (an L4 "24GB": 23034 MiB).
The same devices can be given as a list of dicts:
``[{"model": "A100-40GB", "count": 1, "mig": "7x1g.5gb", "other": "4GiB"}]``.

``replicas`` and ``hami`` say how a node shares the GPU between pods; they matter to the node
agent that hands out devices (devcluster/gpualloc.py) and to what a pod's fake NVML shows,
not to a server that simulates GPUs on its own.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

MiB = 1024**2
GiB = 1024**3

DEFAULT_SIMULATED_DEVICES = "2xH100-80GB,1xA100-40GB:mig=7x1g.5gb"

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_MODEL = re.compile(r"^(?:(\d+)x)?([A-Za-z0-9]+)-(\d+)GB$", re.IGNORECASE)
_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb$", re.IGNORECASE)
_MIG_GROUP = re.compile(r"^(?:(\d+)x)?(\d+g\.\d+gb)$", re.IGNORECASE)
_OPTIONS = ("mig", "other", "replicas", "hami")
# How pods share a GPU: "none" (one pod: a whole GPU, or its MIG devices one pod each),
# "time-slicing" (NVIDIA's device plugin: replicas, no memory isolation), "hami" (HAMi's device
# plugin: vGPUs with a memory cap and a compute share, enforced in the container by HAMi-core).
Sharing = Literal["none", "time-slicing", "hami"]

# NVML's names for the models people are likely to write; others get "NVIDIA <model> <n>GB".
_NAMES = {
    ("H100", 80): "NVIDIA H100 80GB HBM3",
    ("H100", 94): "NVIDIA H100 NVL",
    ("H200", 141): "NVIDIA H200",
    ("A100", 40): "NVIDIA A100-SXM4-40GB",
    ("A100", 80): "NVIDIA A100-SXM4-80GB",
    ("A30", 24): "NVIDIA A30",
    ("A10", 24): "NVIDIA A10",
    ("L4", 24): "NVIDIA L4",
    ("L40S", 48): "NVIDIA L40S",
    ("T4", 16): "Tesla T4",
}
# What NVML reports as the total memory of a model, in MiB, where it is not the GiB its name says
# (an L4 "24GB" shows 23034 MiB in nvidia-smi, as its node's nvidia.com/gpu.memory label says).
_NVML_TOTAL_MIB = {("L4", 24): 23034}
# Models with MIG support; others answer nvmlDeviceGetMigMode with NotSupported, as real ones do.
MIG_CAPABLE = frozenset({"A100", "A30", "H100", "H200", "B200", "GB200"})
MIG_SLICES = 7

# Fixed namespace so the simulated UUIDs stay the same across restarts.
_UUID_NS = uuid.UUID("6f1d2a8e-3c4b-4e57-9a0f-2b8c7d9e1f30")


class SpecError(ValueError):
    """A spec or size that cannot be understood; the message says what is expected."""


def parse_size(value: str | int) -> int:
    """Bytes from an int or a string such as "2GiB", "512MiB", "1.5GB" (GB = 10^9, GiB = 2^30)."""
    if isinstance(value, bool):
        raise SpecError(f"size must be bytes or a string such as '2GiB', not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise SpecError(f"size must not be negative: {value}")
        return value
    match = _SIZE.fullmatch(value)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise SpecError(
            f"cannot read size {value!r}: write a number and a unit such as '2GiB', '512MiB', "
            "'1.5GB' or plain bytes"
        )
    return int(float(match.group(1)) * _UNITS[unit])


@dataclass(frozen=True)
class SimMig:
    profile: str  # as NVML names it, e.g. "1g.5gb"
    slices: int
    memory: int
    uuid: str


@dataclass(frozen=True)
class SimGpu:
    index: int
    model: str
    name: str
    memory: int
    uuid: str
    mig: tuple[SimMig, ...] = ()
    # Memory in use by processes outside this server's view (other pods on a shared GPU).
    other: int = 0
    sharing: Sharing = "none"
    # Pods that may share it at once: replicas (time-slicing) or vGPUs (HAMi's split count).
    slots: int = 1

    @property
    def mig_capable(self) -> bool:
        return self.model.upper() in MIG_CAPABLE

    @property
    def mig_enabled(self) -> bool:
        return bool(self.mig)


def parse_profile(profile: str) -> tuple[int, int]:
    """(compute slices, memory in bytes) of a MIG profile such as "3g.20gb"."""
    match = _PROFILE.fullmatch(profile)
    if match is None:
        raise SpecError(f"cannot read MIG profile {profile!r}: expected e.g. '1g.5gb' or '3g.40gb'")
    return int(match.group(1)), int(match.group(2)) * GiB


def _parse_mig(value: str | Sequence[str]) -> list[str]:
    if not isinstance(value, str):
        return [str(p) for p in value]
    profiles: list[str] = []
    for group in value.split("+"):
        match = _MIG_GROUP.fullmatch(group.strip())
        if match is None:
            raise SpecError(
                f"cannot read MIG layout {value!r}: expected e.g. 'mig=7x1g.5gb' or "
                "'mig=2x3g.20gb+1x1g.5gb'"
            )
        profiles += [match.group(2).lower()] * int(match.group(1) or 1)
    return profiles


def _group_from_string(text: str) -> dict[str, Any]:
    head, *options = (part.strip() for part in text.split(":"))
    match = _MODEL.fullmatch(head)
    if match is None:
        raise SpecError(
            f"cannot read simulated device {text!r}: expected [COUNTx]MODEL-MEMORYGB[:options], "
            "e.g. '2xH100-80GB' or '1xA100-40GB:mig=7x1g.5gb'"
        )
    group: dict[str, Any] = {"model": f"{match.group(2)}-{match.group(3)}GB"}
    if match.group(1):
        group["count"] = int(match.group(1))
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in _OPTIONS:
            raise SpecError(
                f"unknown option {option!r} in {text!r}: use mig=..., other=SIZE, replicas=N "
                "or hami=N"
            )
        group[key] = value
    return group


def parse_devices(spec: str | Sequence[Mapping[str, Any]]) -> list[SimGpu]:
    """The simulated GPUs of a spec string or a list of dicts (see the module docstring)."""
    if isinstance(spec, str):
        groups = [_group_from_string(g) for g in spec.split(",") if g.strip()]
    else:
        groups = [dict(g) for g in spec]
    gpus: list[SimGpu] = []
    for group in groups:
        unknown = set(group) - {"model", "count", *_OPTIONS}
        if unknown:
            raise SpecError(f"unknown keys {sorted(unknown)} in {group!r}")
        match = _MODEL.fullmatch(str(group.get("model", "")))
        if match is None or match.group(1):
            raise SpecError(f"'model' must look like 'H100-80GB', got {group.get('model')!r}")
        model, gb = match.group(2), int(match.group(3))
        count = int(group.get("count", 1))
        if count < 1:
            raise SpecError(f"'count' must be at least 1 in {group!r}")
        profiles = _parse_mig(group.get("mig") or [])
        other = parse_size(group.get("other", 0))
        sharing, slots = _sharing(group)
        if sharing != "none" and profiles:
            raise SpecError(
                f"{group.get('model')}: a MIG-enabled GPU is shared by its MIG devices; "
                "give either mig=... or replicas=/hami=, not both"
            )
        for _ in range(count):
            gpu = _make_gpu(len(gpus), model, gb, profiles, other)
            gpus.append(dataclasses.replace(gpu, sharing=sharing, slots=slots))
    return gpus


def _sharing(group: Mapping[str, Any]) -> tuple[Sharing, int]:
    if "replicas" in group and "hami" in group:
        raise SpecError(f"{group.get('model')}: give replicas=N or hami=N, not both")
    for key, sharing in (("replicas", "time-slicing"), ("hami", "hami")):
        if key in group:
            value = str(group[key]).strip()
            if not value.isdigit() or not 1 <= int(value) <= 64:
                raise SpecError(
                    f"{group.get('model')}: {key}= must be a whole number from 1 to 64, "
                    f"not {group[key]!r}"
                )
            return sharing, int(value)  # type: ignore[return-value]
    return "none", 1


def _make_gpu(index: int, model: str, gb: int, profiles: list[str], other: int) -> SimGpu:
    total_mib = _NVML_TOTAL_MIB.get((model.upper(), gb))
    memory = total_mib * MiB if total_mib is not None else gb * GiB
    name = _NAMES.get((model.upper(), gb), f"NVIDIA {model} {gb}GB")
    gpu_uuid = f"GPU-{uuid.uuid5(_UUID_NS, f'gpu/{index}/{model}-{gb}')}"
    migs: list[SimMig] = []
    for slot, profile in enumerate(profiles):
        slices, mig_memory = parse_profile(profile)
        migs.append(
            SimMig(
                profile=profile,
                slices=slices,
                memory=mig_memory,
                uuid=f"MIG-{uuid.uuid5(_UUID_NS, f'mig/{gpu_uuid}/{slot}')}",
            )
        )
    gpu = SimGpu(index, model, name, memory, gpu_uuid, tuple(migs), other)
    if migs and not gpu.mig_capable:
        raise SpecError(
            f"{model} does not support MIG (MIG models: {', '.join(sorted(MIG_CAPABLE))})"
        )
    if sum(m.slices for m in migs) > MIG_SLICES:
        raise SpecError(f"GPU {index}: MIG profiles use more than {MIG_SLICES} compute slices")
    if sum(m.memory for m in migs) > memory:
        raise SpecError(f"GPU {index}: MIG profiles need more memory than the GPU's {gb}GB")
    if other > memory:
        raise SpecError(f"GPU {index}: other={other} bytes is more than the GPU's {gb}GB")
    return gpu


def resolve_ref(gpus: Sequence[SimGpu], ref: str) -> str | None:
    """The UUID a process on `ref` runs on: a GPU index ("0"; on a MIG-enabled GPU its first MIG
    device, as CUDA would pick), a MIG device "GPU:MIG" ("2:3") or a UUID. None if unknown."""
    ref = ref.strip()
    for gpu in gpus:
        if ref == gpu.uuid:
            return gpu.mig[0].uuid if gpu.mig else gpu.uuid
        for mig in gpu.mig:
            if ref == mig.uuid:
                return mig.uuid
    gpu_part, _, mig_part = ref.partition(":")
    if not gpu_part.isdigit() or int(gpu_part) >= len(gpus):
        return None
    gpu = gpus[int(gpu_part)]
    if not mig_part:
        return gpu.mig[0].uuid if gpu.mig else gpu.uuid
    if mig_part.isdigit() and int(mig_part) < len(gpu.mig):
        return gpu.mig[int(mig_part)].uuid
    return None


def visible_gpus(gpus: Sequence[SimGpu], visible: str | None) -> list[SimGpu]:
    """The GPUs a container sees, as the NVIDIA container runtime presents them from the
    NVIDIA_VISIBLE_DEVICES its device plugin set: `None` (not set: no container runtime, every
    GPU), "all", "none" or "void" (no GPU), or a comma-separated list of GPU UUIDs, MIG UUIDs
    and GPU indexes. The GPUs named are re-indexed from 0 in the order of the machine; a MIG
    device named shows its parent GPU with only that MIG device. UUIDs stay the machine's."""
    if visible is None or visible.strip() == "all":
        return list(gpus)
    wanted = {part.strip() for part in visible.split(",") if part.strip()}
    if not wanted or wanted & {"none", "void"}:
        return []
    seen: list[SimGpu] = []
    for gpu in gpus:
        whole = gpu.uuid in wanted or str(gpu.index) in wanted
        migs = gpu.mig if whole else tuple(m for m in gpu.mig if m.uuid in wanted)
        if whole or migs:
            seen.append(dataclasses.replace(gpu, index=len(seen), mig=migs))
    return seen

"""The node agent's GPUs as NVIDIA's dcgm-exporter shows them to Prometheus (pure).

dcgm-exporter (with its Kubernetes pod mapping, as the GPU Operator runs it) serves one sample
per device and metric, labelled with the device and with the pod, namespace and container the
kubelet's pod-resources API says it was handed to. :func:`render` writes the same text format
from the node's simulated devices (``simulatedGpus``), the devices each pod was granted
(devcluster/gpualloc.py) and the processes' simulated holds (jupyter_gpuaas/gpu/simulate.py),
so that a Prometheus scraping the node agent sees what it would see on a real GPU node:

==================================  =======  ==================================================
metric                              unit     here
==================================  =======  ==================================================
``DCGM_FI_DEV_GPU_UTIL``            %        the holds' utilisation on the GPU, summed (max
                                             100); not for a MIG-enabled GPU, as DCGM gives
                                             none there
``DCGM_FI_PROF_GR_ENGINE_ACTIVE``   ratio    the same per device (MIG instances included), 0–1
``DCGM_FI_DEV_FB_USED``             MiB      memory the device's holds use
``DCGM_FI_DEV_FB_FREE``             MiB      the rest of the device's memory
==================================  =======  ==================================================

Labels are dcgm-exporter's: ``gpu`` (the GPU's index on the node), ``UUID`` (the GPU's; a MIG
instance keeps its parent's ``gpu``, ``UUID`` and ``device`` and adds ``GPU_I_PROFILE`` and
``GPU_I_ID``), ``pci_bus_id``, ``device`` (``nvidia<i>``), ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``, then ``pod``, ``namespace`` and ``container``: empty for a device no
pod holds, and one sample per pod on a device that several share (a time-sliced or HAMi GPU),
each with the whole device's figures, as dcgm-exporter reports them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from jupyter_gpuaas.gpu.simulate import HoldRecord
from jupyter_gpuaas.gpu.spec import SimGpu

__all__ = ["CONTENT_TYPE", "DRIVER_VERSION", "Holder", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DRIVER_VERSION = "570.133.20"
MiB = 1024**2

_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
}


@dataclass(frozen=True)
class Holder:
    """A pod's container that was granted a device."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class _Device:
    gpu: SimGpu
    uuid: str  # the device's own UUID (a MIG instance's MIG-..., else the GPU's)
    memory: int
    mig_profile: str = ""
    mig_id: int = -1


def _devices(gpus: Sequence[SimGpu]) -> list[_Device]:
    out: list[_Device] = []
    for gpu in gpus:
        if gpu.mig:
            out += [
                _Device(gpu, m.uuid, m.memory, m.profile, slot) for slot, m in enumerate(gpu.mig)
            ]
        else:
            out.append(_Device(gpu, gpu.uuid, gpu.memory))
    return out


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(device: _Device, hostname: str, holder: Holder | None) -> str:
    gpu = device.gpu
    pairs = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("pci_bus_id", f"00000000:{0x10 + gpu.index:02X}:00.0"),
        ("device", f"nvidia{gpu.index}"),
        ("modelName", gpu.name),
    ]
    if device.mig_profile:
        pairs += [("GPU_I_PROFILE", device.mig_profile), ("GPU_I_ID", str(device.mig_id))]
    pairs += [
        ("Hostname", hostname),
        ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION),
        ("container", holder.container if holder else ""),
        ("namespace", holder.namespace if holder else ""),
        ("pod", holder.pod if holder else ""),
    ]
    return ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)


def render(
    hostname: str,
    gpus: Sequence[SimGpu],
    holds: Iterable[HoldRecord],
    holders: Mapping[str, Sequence[Holder]],
) -> str:
    """The exposition text. ``holders``: device UUID (a GPU's or a MIG instance's) → the
    containers granted it; ``holds`` name their device by UUID, as on a node."""
    used: dict[str, int] = {}
    busy: dict[str, int] = {}
    for hold in holds:
        used[hold.device] = used.get(hold.device, 0) + hold.size
        busy[hold.device] = busy.get(hold.device, 0) + hold.utilization
    devices = _devices(gpus)
    samples: dict[str, list[str]] = {name: [] for name in _HELP}
    for device in devices:
        used_bytes = used.get(device.uuid, 0) + (0 if device.mig_profile else device.gpu.other)
        used_mib = min(used_bytes, device.memory) // MiB
        percent = min(100, busy.get(device.uuid, 0))
        values = {
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f"{percent / 100:g}",
            "DCGM_FI_DEV_FB_USED": str(used_mib),
            "DCGM_FI_DEV_FB_FREE": str(device.memory // MiB - used_mib),
        }
        if not device.gpu.mig:
            values["DCGM_FI_DEV_GPU_UTIL"] = str(percent)
        held: Sequence[Holder | None] = holders.get(device.uuid) or [None]
        for holder in held:
            labels = _labels(device, hostname, holder)
            for name, value in values.items():
                samples[name].append(f"{name}{{{labels}}} {value}")
    lines: list[str] = []
    for name, help_text in _HELP.items():
        if samples[name]:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", *samples[name]]
    return "\n".join(lines) + "\n"

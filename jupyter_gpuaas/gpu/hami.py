"""HAMi's limits inside a container, read from the environment its device plugin sets (pure).

HAMi's device plugin (Project-HAMi/HAMi, pkg/device-plugin/nvidiadevice/nvinternal/plugin/
server.go, Allocate) gives a container that asked for ``nvidia.com/gpumem`` /
``nvidia.com/gpucores``:

- ``NVIDIA_VISIBLE_DEVICES``: the UUIDs of its vGPUs' GPUs (one GPU per vGPU);
- ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` = ``"<MiB>m"`` for its i-th device;
- ``CUDA_DEVICE_SM_LIMIT`` = the cores percentage (0: no limit);
- ``CUDA_DEVICE_MEMORY_SHARED_CACHE``: the file where HAMi-core keeps the container's per-process
  usage, and ``/etc/ld.so.preload`` mounted so that every process loads HAMi-core (libvgpu.so)
  unless the container sets ``CUDA_DISABLE_CONTROL=true``.

HAMi-core (Project-HAMi/HAMi-core, src/multiprocess/multiprocess_memory_limit.c) reads a limit
as a number with an optional binary suffix ``K``/``M``/``G`` (none: bytes); 0 or unreadable is
"no limit". ``CUDA_DEVICE_MEMORY_LIMIT`` without an index is the fallback for every device, and
likewise ``CUDA_DEVICE_SM_LIMIT``/``_<i>`` (default 100). Its NVML hook (src/nvml/hook.c)
rewrites only nvmlDeviceGetMemoryInfo and _v2: on a device with a limit, total = the limit,
used = the memory of this container's processes (from that shared file), free = limit - used;
on a device without one, only used. Process lists, utilisation and device counts pass through
from the driver unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
SM_LIMIT = "CUDA_DEVICE_SM_LIMIT"
SHARED_CACHE = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
DISABLE_CONTROL = "CUDA_DISABLE_CONTROL"
# HAMi-core's CUDA_DEVICE_MAX_COUNT: the indexes it reads limits for.
MAX_DEVICES = 16
_SCALE = {"k": 1024, "m": 1024**2, "g": 1024**3}


@dataclass(frozen=True)
class Cap:
    """The memory cap of one device (by its CUDA index in the container) and where it is from."""

    memory: int  # bytes
    source: str  # the environment variable it was read from, e.g. CUDA_DEVICE_MEMORY_LIMIT_0
    cores: int | None = None  # percent of the GPU's compute; None when not limited


@dataclass(frozen=True)
class HamiEnv:
    """What HAMi-core would enforce in this process's container."""

    # HAMi-core is loaded (its environment is there and control is not disabled).
    active: bool = False
    caps: Mapping[int, Cap] = field(default_factory=dict)

    def cap(self, index: int) -> Cap | None:
        return self.caps.get(index) if self.active else None


def parse_limit(text: str | None) -> int:
    """Bytes of a HAMi-core limit ("6144m", "6g", "1048576"); 0 for none or unreadable."""
    if not text:
        return 0
    text = text.strip()
    scale = _SCALE.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale != 1 else text
    if not digits.isdigit():
        return 0
    return int(digits) * scale


def _truthy(text: str | None) -> bool:
    return (text or "").strip().lower() in ("1", "t", "true", "yes", "y", "on")


def hami_env(environ: Mapping[str, str]) -> HamiEnv:
    """HAMi's limits from a container's environment (see the module docstring)."""
    present = any(
        k == MEMORY_LIMIT or k.startswith(MEMORY_LIMIT + "_") or k.startswith(SM_LIMIT)
        for k in environ
    ) or (SHARED_CACHE in environ)
    if not present or _truthy(environ.get(DISABLE_CONTROL)):
        return HamiEnv()
    fallback = parse_limit(environ.get(MEMORY_LIMIT))
    sm_fallback = parse_limit(environ.get(SM_LIMIT)) or 100
    caps: dict[int, Cap] = {}
    for i in range(MAX_DEVICES):
        name = f"{MEMORY_LIMIT}_{i}"
        memory, source = parse_limit(environ.get(name)), name
        if memory == 0 and fallback:
            memory, source = fallback, MEMORY_LIMIT
        if memory == 0:
            continue
        cores = parse_limit(environ.get(f"{SM_LIMIT}_{i}")) or sm_fallback
        caps[i] = Cap(memory=memory, source=source, cores=None if cores >= 100 else cores)
    return HamiEnv(active=True, caps=caps)

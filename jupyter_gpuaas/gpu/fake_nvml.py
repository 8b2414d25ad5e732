"""A fake NVML library for simulated GPUs: the real nvidia-ml-py bindings run over it.

nvidia-ml-py calls C entry points on whatever ``pynvml.nvmlLib`` holds, looked up by name with
``getattr`` and called with ctypes arguments (``byref`` out-parameters, string buffers, struct
arrays). :class:`FakeNvml` implements the entry points this project uses with the same
contract: it writes into those ctypes objects and returns NVML return codes, so the bindings'
own code (their structs, error classes, two-call process lists) runs unchanged. Chosen only by
configuration (``c.GPUaaS.gpu_source = "simulated"``), never automatically.

Devices come from a spec (:mod:`jupyter_gpuaas.gpu.spec`); processes from the holds in the
simulation's state directory (:mod:`jupyter_gpuaas.gpu.simulate`), so real PIDs of real processes
show up; driver behaviours (PID namespaces, lost GPUs, missing driver, failing calls) from its
DriverState.

On a node of the dev cluster (:mod:`jupyter_gpuaas.gpu.simulate`, "A node's state") the library
plays the driver as seen from one container: `gpus` are the container's (the NVIDIA container
runtime's view, :func:`jupyter_gpuaas.gpu.spec.visible_gpus`), `container` names it, and
holds of other containers on a time-shared GPU count in its used memory and utilisation but,
with a driver that translates PIDs into the pod's namespace (565, 535.113), are not listed.

With HAMi's environment (`hami`, :mod:`jupyter_gpuaas.gpu.hami`) it also plays HAMi-core's NVML
hook: nvmlDeviceGetMemoryInfo and _v2 answer total = the cap, used = this container's holds,
free = the rest; everything else passes through, as in HAMi-core. Coarser than HAMi-core:
"this container's use" is the sum of its holds (HAMi-core counts CUDA allocations and context
memory of the processes that loaded it), nothing stops a hold beyond the cap (HAMi-core fails
the allocation with CUDA_ERROR_OUT_OF_MEMORY), and the compute share is not throttled.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml

from jupyter_gpuaas.gpu.hami import HamiEnv, hami_env
from jupyter_gpuaas.gpu.simulate import (
    ENV_CONTAINER,
    HOST_PID_OFFSET,
    VISIBLE_DEVICES,
    DriverState,
    HoldReader,
    HoldRecord,
    read_driver,
    read_node,
)
from jupyter_gpuaas.gpu.simulate import write_devices as _write_devices
from jupyter_gpuaas.gpu.spec import MIG_SLICES, SimGpu, parse_devices, resolve_ref, visible_gpus

_DRIVER_VERSIONS = {
    "565": "565.57.01",
    "535.113": "535.113.01",
    "535.104": "535.104.05",
    "no_driver": "",
}
_NOT_AVAILABLE_U32 = 0xFFFFFFFF
# NVML's return codes and constants, typed (the bindings have no type hints).
_SUCCESS: int = pynvml.NVML_SUCCESS
_ERROR_UNINITIALIZED: int = pynvml.NVML_ERROR_UNINITIALIZED
_ERROR_INVALID_ARGUMENT: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
_ERROR_NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
_ERROR_NOT_FOUND: int = pynvml.NVML_ERROR_NOT_FOUND
_ERROR_INSUFFICIENT_SIZE: int = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
_ERROR_DRIVER_NOT_LOADED: int = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
_ERROR_GPU_IS_LOST: int = pynvml.NVML_ERROR_GPU_IS_LOST
_DEVICE_MIG_ENABLE: int = pynvml.NVML_DEVICE_MIG_ENABLE
_DEVICE_MIG_DISABLE: int = pynvml.NVML_DEVICE_MIG_DISABLE


class _Fail(Exception):
    """Return this NVML code from the entry point being called."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class _Dev:
    gpu: SimGpu
    mig: int | None = None  # slot of a MIG device on gpu

    @property
    def uuid(self) -> str:
        return self.gpu.uuid if self.mig is None else self.gpu.mig[self.mig].uuid

    @property
    def name(self) -> str:
        if self.mig is None:
            return self.gpu.name
        # As the driver names MIG devices, e.g. "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
        return f"{self.gpu.name} MIG {self.gpu.mig[self.mig].profile}"


_EntryFn = Callable[..., Any]
_ENTRY_POINTS: dict[str, _EntryFn] = {}


def _entry(name: str) -> Callable[[_EntryFn], _EntryFn]:
    def register(fn: _EntryFn) -> _EntryFn:
        _ENTRY_POINTS[name] = fn
        return fn

    return register


class _EntryPoint:
    """What getattr(lib, name) gives, like a ctypes function: callable, with settable restype
    and argtypes (the bindings set ``restype`` on some)."""

    def __init__(self, lib: FakeNvml, name: str, fn: _EntryFn) -> None:
        self.lib, self.name, self.fn = lib, name, fn
        self.restype: Any = ctypes.c_int
        self.argtypes: Any = None

    def __call__(self, *args: Any) -> Any:
        return self.lib._call(self.name, self.fn, args)


def _target(arg: Any) -> Any:
    """The ctypes object an out-parameter refers to (byref(x) or pointer(x) -> x)."""
    if hasattr(arg, "_obj"):  # the CArgObject of byref()
        return arg._obj
    if isinstance(arg, ctypes._Pointer):
        return arg.contents
    return arg


def _value(arg: Any) -> int:
    return int(arg.value) if hasattr(arg, "value") else int(arg)


def _put_string(buffer: Any, length: Any, text: str) -> int:
    data = text.encode()
    if len(data) + 1 > _value(length):
        return _ERROR_INSUFFICIENT_SIZE
    buffer.value = data
    return _SUCCESS


class FakeNvml:
    """The simulated NVML library; install it with :func:`install`."""

    def __init__(
        self,
        gpus: Sequence[SimGpu],
        directory: Path | None = None,
        driver: DriverState | None = None,
        *,
        refresh: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        container: str | None = None,
        hami: HamiEnv | None = None,
        node: bool = False,
    ) -> None:
        self.gpus = list(gpus)
        # This library's container on a node (None: no containers, every process is ours).
        self.container = container
        self.hami = hami or HamiEnv()
        # A node's shared state: devices.json is not ours to write (each pod sees other GPUs).
        self.node = node
        self.directory = directory
        self.default_driver = driver or DriverState()
        self.refresh = refresh
        self.clock = clock
        self.initialized = 0
        self._lock = threading.Lock()
        self._read_at: float | None = None
        self._driver = self.default_driver
        self._reader = HoldReader(directory) if directory is not None else None
        # device UUID -> holds on it; a hold's "device" is resolved once per refresh
        self._holds: dict[str, list[HoldRecord]] = {}
        self._mig_slot = {m.uuid: slot for g in self.gpus for slot, m in enumerate(g.mig)}
        # Opaque handles are small non-null integers, never dereferenced.
        self._devices: dict[int, _Dev] = {}
        self._handle_of: dict[tuple[int, int | None], int] = {}
        for gpu in self.gpus:
            for mig in [None, *range(len(gpu.mig))]:
                handle = 0x1000 + gpu.index * 0x100 + (0 if mig is None else mig + 1)
                self._devices[handle] = _Dev(gpu, mig)
                self._handle_of[(gpu.index, mig)] = handle

    def __getattr__(self, name: str) -> _EntryPoint:
        fn = _ENTRY_POINTS.get(name)
        if fn is None:
            # The bindings turn this into NVMLError_FunctionNotFound, as with an old driver.
            raise AttributeError(name)
        return _EntryPoint(self, name, fn)

    # -- state ---------------------------------------------------------------------------
    def _state(self) -> tuple[DriverState, dict[str, list[HoldRecord]]]:
        """Driver behaviour and holds by device UUID, re-read from the state directory at most
        every `refresh` seconds (a real driver's figures are not instantaneous either)."""
        with self._lock:
            now = self.clock()
            if self._read_at is None or now - self._read_at >= self.refresh:
                self._read_at = now
                if self.directory is not None and self._reader is not None:
                    self._driver = read_driver(self.directory) or self.default_driver
                    by_uuid: dict[str, list[HoldRecord]] = {}
                    for hold in self._reader.read():
                        uuid = resolve_ref(self.gpus, hold.device)
                        if uuid is not None:  # else a device this simulation does not have
                            by_uuid.setdefault(uuid, []).append(hold)
                    self._holds = by_uuid
            return self._driver, self._holds

    def _call(self, name: str, fn: _EntryFn, args: tuple[Any, ...]) -> Any:
        driver, _ = self._state()
        forced = driver.errors.get(name)
        if forced is not None:
            return forced
        if not self.initialized and name not in ("nvmlInitWithFlags", "nvmlErrorString"):
            return _ERROR_UNINITIALIZED
        try:
            return fn(self, *args)
        except _Fail as fail:
            return fail.code

    def _dev(self, handle: Any) -> _Dev:
        dev = self._devices.get(ctypes.cast(handle, ctypes.c_void_p).value or 0)
        if dev is None:
            raise _Fail(_ERROR_INVALID_ARGUMENT)
        driver, _ = self._state()
        if {str(dev.gpu.index), dev.gpu.uuid} & driver.lost:
            raise _Fail(_ERROR_GPU_IS_LOST)
        return dev

    def _put_handle(self, arg: Any, handle: int) -> None:
        target = _target(arg)
        ctypes.c_void_p.from_address(ctypes.addressof(target)).value = handle

    def _holds_on(self, dev: _Dev) -> list[HoldRecord]:
        _, holds = self._state()
        if dev.mig is None and dev.gpu.mig:  # a MIG-enabled GPU: all its MIG devices'
            return [h for m in dev.gpu.mig for h in holds.get(m.uuid, ())]
        return holds.get(dev.uuid, [])

    def _mig_slot_of(self, dev: _Dev, hold: HoldRecord) -> int | None:
        if dev.mig is not None or not dev.gpu.mig:
            return dev.mig
        return self._mig_slot.get(resolve_ref(self.gpus, hold.device) or "")

    def _ours(self, hold: HoldRecord) -> bool:
        return self.container is None or hold.container == self.container

    def _used(self, dev: _Dev) -> int:
        holds = self._holds_on(dev)
        if self.hami.active and dev.mig is None and not dev.gpu.mig:
            # HAMi-core: this container's processes only, never a neighbour's nor "other".
            return sum(h.size for h in holds if self._ours(h))
        used = sum(h.size for h in holds)
        return used + (dev.gpu.other if dev.mig is None else 0)

    def _total(self, dev: _Dev) -> int:
        if dev.mig is not None:
            return dev.gpu.mig[dev.mig].memory
        cap = self.hami.cap(dev.gpu.index) if not dev.gpu.mig else None
        return cap.memory if cap is not None else dev.gpu.memory

    def _processes(self, handle: Any, count_arg: Any, infos: Any, kinds: set[str]) -> int:
        dev = self._dev(handle)
        driver, _ = self._state()
        # The driver lists a process once per device (MIG instance), with its total memory there,
        # however many allocations it made: several holds of one process add up.
        entries: dict[tuple[int, int | None], int] = {}
        # A driver that translates PIDs into the pod's namespace lists only the pod's own.
        namespaced = driver.behaviour != "535.104"
        for h in self._holds_on(dev):
            if h.kind in kinds and (self._ours(h) or not namespaced):
                key = (h.pid, self._mig_slot_of(dev, h))
                entries[key] = entries.get(key, 0) + h.size
        count = _target(count_arg)
        capacity = count.value
        count.value = len(entries)
        if not entries:
            return _SUCCESS
        if infos is None or capacity < len(entries):
            return _ERROR_INSUFFICIENT_SIZE
        for i, ((pid, mig), size) in enumerate(entries.items()):
            infos[i].pid = pid + (HOST_PID_OFFSET if driver.behaviour == "535.104" else 0)
            infos[i].usedGpuMemory = 0 if driver.behaviour == "535.113" else size
            infos[i].gpuInstanceId = _NOT_AVAILABLE_U32 if mig is None else mig + 1
            infos[i].computeInstanceId = _NOT_AVAILABLE_U32 if mig is None else 0
        return _SUCCESS

    def write_devices(self) -> None:
        """Tell simulate.hold() which devices exist, so it can refuse unknown ones (on a node,
        hold() reads the node's GPUs itself)."""
        if self.directory is not None and not self.node:
            _write_devices(
                self.directory,
                [
                    {"uuid": g.uuid, "name": g.name, "mig": [m.uuid for m in g.mig]}
                    for g in self.gpus
                ],
            )

    # -- entry points --------------------------------------------------------------------
    @_entry("nvmlInitWithFlags")
    def _init(self, flags: Any) -> int:
        driver, _ = self._state()
        if driver.behaviour == "no_driver":
            return _ERROR_DRIVER_NOT_LOADED
        self.initialized += 1
        self.write_devices()
        return _SUCCESS

    @_entry("nvmlShutdown")
    def _shutdown(self) -> int:
        self.initialized -= 1
        return _SUCCESS

    @_entry("nvmlErrorString")
    def _error_string(self, code: Any) -> bytes:
        return f"simulated NVML error {_value(code)}".encode()

    @_entry("nvmlSystemGetDriverVersion")
    def _driver_version(self, buffer: Any, length: Any) -> int:
        driver, _ = self._state()
        return _put_string(buffer, length, _DRIVER_VERSIONS[driver.behaviour])

    @_entry("nvmlSystemGetNVMLVersion")
    def _nvml_version(self, buffer: Any, length: Any) -> int:
        driver, _ = self._state()
        return _put_string(buffer, length, "12." + _DRIVER_VERSIONS[driver.behaviour])

    @_entry("nvmlDeviceGetCount_v2")
    def _count(self, count: Any) -> int:
        _target(count).value = len(self.gpus)
        return _SUCCESS

    @_entry("nvmlDeviceGetHandleByIndex_v2")
    def _handle_by_index(self, index: Any, device: Any) -> int:
        i = _value(index)
        if not 0 <= i < len(self.gpus):
            return _ERROR_INVALID_ARGUMENT
        self._put_handle(device, self._handle_of[(i, None)])
        return _SUCCESS

    @_entry("nvmlDeviceGetIndex")
    def _index(self, handle: Any, index: Any) -> int:
        dev = self._dev(handle)
        if dev.mig is not None:
            return _ERROR_INVALID_ARGUMENT
        _target(index).value = dev.gpu.index
        return _SUCCESS

    @_entry("nvmlDeviceGetUUID")
    def _uuid(self, handle: Any, buffer: Any, length: Any) -> int:
        return _put_string(buffer, length, self._dev(handle).uuid)

    @_entry("nvmlDeviceGetName")
    def _name(self, handle: Any, buffer: Any, length: Any) -> int:
        return _put_string(buffer, length, self._dev(handle).name)

    @_entry("nvmlDeviceGetMemoryInfo")
    def _memory(self, handle: Any, memory: Any) -> int:
        dev = self._dev(handle)
        total, used = self._total(dev), self._used(dev)
        out = _target(memory)
        out.total, out.used, out.free = total, used, max(0, total - used)
        return _SUCCESS

    @_entry("nvmlDeviceGetMemoryInfo_v2")
    def _memory_v2(self, handle: Any, memory: Any) -> int:
        # The same figures (no reserved memory is simulated); HAMi-core rewrites both.
        dev = self._dev(handle)
        total, used = self._total(dev), self._used(dev)
        out = _target(memory)
        out.total, out.used, out.free, out.reserved = total, used, max(0, total - used), 0
        return _SUCCESS

    @_entry("nvmlDeviceGetUtilizationRates")
    def _utilization(self, handle: Any, utilization: Any) -> int:
        dev = self._dev(handle)
        if dev.mig is not None or dev.gpu.mig:
            return _ERROR_NOT_SUPPORTED  # as on MIG: no per-instance figure
        busy = min(100, sum(h.utilization for h in self._holds_on(dev)))
        out = _target(utilization)
        out.gpu, out.memory = busy, busy
        return _SUCCESS

    @_entry("nvmlDeviceGetComputeRunningProcesses_v3")
    def _compute_processes(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, {"compute", "both"})

    @_entry("nvmlDeviceGetGraphicsRunningProcesses_v3")
    def _graphics_processes(self, handle: Any, count: Any, infos: Any) -> int:
        return self._processes(handle, count, infos, {"graphics", "both"})

    @_entry("nvmlDeviceGetMigMode")
    def _mig_mode(self, handle: Any, current: Any, pending: Any) -> int:
        dev = self._dev(handle)
        if dev.mig is not None:
            return _ERROR_INVALID_ARGUMENT
        if not dev.gpu.mig_capable:
            return _ERROR_NOT_SUPPORTED
        mode = _DEVICE_MIG_ENABLE if dev.gpu.mig else _DEVICE_MIG_DISABLE
        _target(current).value = mode
        _target(pending).value = mode
        return _SUCCESS

    @_entry("nvmlDeviceGetMaxMigDeviceCount")
    def _max_mig(self, handle: Any, count: Any) -> int:
        dev = self._dev(handle)
        if dev.mig is not None or not dev.gpu.mig_capable:
            return _ERROR_NOT_SUPPORTED
        _target(count).value = MIG_SLICES
        return _SUCCESS

    @_entry("nvmlDeviceGetMigDeviceHandleByIndex")
    def _mig_handle(self, handle: Any, index: Any, mig_device: Any) -> int:
        dev = self._dev(handle)
        i = _value(index)
        if dev.mig is not None or i >= MIG_SLICES:
            return _ERROR_INVALID_ARGUMENT
        if i >= len(dev.gpu.mig):
            return _ERROR_NOT_FOUND  # an empty slot
        self._put_handle(mig_device, self._handle_of[(dev.gpu.index, i)])
        return _SUCCESS

    @_entry("nvmlDeviceIsMigDeviceHandle")
    def _is_mig(self, handle: Any, is_mig: Any) -> int:
        _target(is_mig).value = int(self._dev(handle).mig is not None)
        return _SUCCESS

    @_entry("nvmlDeviceGetDeviceHandleFromMigDeviceHandle")
    def _parent(self, handle: Any, device: Any) -> int:
        dev = self._dev(handle)
        if dev.mig is None:
            return _ERROR_INVALID_ARGUMENT
        self._put_handle(device, self._handle_of[(dev.gpu.index, None)])
        return _SUCCESS


def install(lib: FakeNvml) -> None:
    """Make the bindings call `lib`: set before nvmlInit, and forget functions looked up in
    another library (the bindings cache them by name)."""
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()


def uninstall() -> None:
    """Undo install(), so the next nvmlInit loads the real library again."""
    with pynvml.libLoadLock:
        if isinstance(pynvml.nvmlLib, FakeNvml):
            pynvml.nvmlLib = None
            pynvml._nvmlGetFunctionPointer_cache.clear()


def from_environment(
    spec: str | Sequence[Any],
    directory: Path,
    driver: DriverState,
    environ: Mapping[str, str],
) -> tuple[FakeNvml, str]:
    """The library for this process and a line saying what it simulates.

    In a node's state directory (the dev cluster's node agent wrote ``node.json``) the GPUs are
    the node's, seen as this container's allocation (``NVIDIA_VISIBLE_DEVICES``), and `spec` is
    not used; elsewhere they are `spec`'s, all visible. HAMi's environment applies to both.
    """
    hami = hami_env(environ)
    node = read_node(directory)
    if node is not None:
        visible = environ.get(VISIBLE_DEVICES)
        gpus = visible_gpus(parse_devices(node), visible)
        lib = FakeNvml(
            gpus,
            directory,
            driver,
            container=environ.get(ENV_CONTAINER) or None,
            hami=hami,
            node=True,
        )
        what = (
            f"the node's simulated GPUs ({node}) as this pod's allocation "
            f"(NVIDIA_VISIBLE_DEVICES={visible if visible is not None else '(not set: all)'})"
        )
    else:
        lib = FakeNvml(parse_devices(spec), directory, driver, hami=hami)
        what = "simulated GPUs of GPUaaS.simulated_devices"
    if hami.active:
        caps = ", ".join(f"GPU {i}: {c.memory} bytes ({c.source})" for i, c in hami.caps.items())
        what += f"; HAMi-core's view, caps {caps or 'none'}"
    return lib, what

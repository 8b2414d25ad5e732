"""Reading GPUs, MIG devices and GPU processes through nvidia-ml-py (blocking; run it off the
event loop). NVML is initialised on the first read, never at import."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pynvml

from jupyter_gpuaas.gpu.attribution import merge_processes
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml, install, uninstall
from jupyter_gpuaas.gpu.hami import HamiEnv
from jupyter_gpuaas.gpu.model import Device, ErrorKind, GpuProcess, Source, device_matches

_MIG_PROFILE = re.compile(r"MIG (\d+g\.\d+gb)", re.IGNORECASE)


@dataclass(frozen=True)
class NvmlRead:
    source: Source
    devices: tuple[Device, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    error: str | None = None
    error_kind: ErrorKind | None = None
    driver_version: str | None = None


@dataclass
class _Problems:
    """Errors of one read that did not stop it (a lost GPU, an unreadable process list)."""

    items: list[tuple[ErrorKind, str]] = field(default_factory=list)

    def add(self, err: pynvml.NVMLError, what: str) -> None:
        kind, advice = classify(err)
        self.items.append((kind, f"{what}: {advice}"))


def classify(err: BaseException) -> tuple[ErrorKind, str]:
    """error_kind and a message that says what happened and what to do."""
    if isinstance(err, pynvml.NVMLError_LibraryNotFound):
        return "no_driver", (
            "NVIDIA driver library libnvidia-ml.so.1 not found, so this server sees no GPUs. "
            "On Kubernetes, request a GPU (e.g. nvidia.com/gpu: 1) so that the NVIDIA container "
            "runtime mounts the driver; to try the panel without a GPU, set "
            "c.GPUaaS.gpu_source = 'simulated'."
        )
    if isinstance(err, pynvml.NVMLError_DriverNotLoaded):
        return "no_driver", (
            "the NVIDIA kernel driver is not loaded on this machine (nvidia-smi fails too); "
            "ask the node's administrator to load or reinstall it."
        )
    if isinstance(err, pynvml.NVMLError_GpuIsLost):
        return "gpu_lost", (
            "the GPU is lost (it fell off the bus or hit a fatal error); work on it has "
            "stopped. It needs a reset or a node reboot: ask an administrator, and save your work."
        )
    if isinstance(err, pynvml.NVMLError_NotSupported):
        return "not_supported", "not supported by this GPU or driver; the figure is left out."
    if isinstance(err, pynvml.NVMLError_NoPermission):
        return "no_permission", (
            "NVML refused for lack of permission; the server's user needs access to the "
            "/dev/nvidia* devices (on Kubernetes the NVIDIA container runtime provides it)."
        )
    if isinstance(err, (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLLibraryMismatchError)):
        return "unknown", (
            "the NVIDIA driver is older than this nvidia-ml-py expects; update the driver or "
            "install an older nvidia-ml-py."
        )
    return "unknown", f"NVML error: {err}. The next sample tries again."


class NvmlReader:
    """One reader per server. read() is blocking and must not run concurrently with itself
    (the sampler runs it on a single worker thread).

    `simulated`: a FakeNvml to install as the library (source "simulated"), or None for the real
    driver. `hami`: HAMi's limits in this container (jupyter_gpuaas.gpu.hami.hami_env): a GPU
    with a memory cap is a fraction, marked with its cap and its source, and shared (HAMi packs
    other pods' vGPUs onto it). After a failure to initialise, the next attempt waits
    `backoff` seconds, doubling up to `backoff_max`, so a machine without a driver is not
    probed on every request.
    """

    def __init__(
        self,
        simulated: FakeNvml | None = None,
        *,
        shared: frozenset[str] = frozenset(),
        backoff: float = 2.0,
        backoff_max: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
        expect_gpu: bool = False,
        hami: HamiEnv | None = None,
    ) -> None:
        self.hami = hami or HamiEnv()
        # Without expect_gpu, a machine without a driver is normal (logged as info, not warning).
        self.expect_gpu = expect_gpu
        self.log = log or logging.getLogger(__name__)
        self.simulated = simulated
        self.source: Source = "simulated" if simulated is not None else "nvml"
        self.shared = shared
        self.backoff_initial, self.backoff_max = backoff, backoff_max
        self.clock = clock
        self._initialized = False
        self._backoff = 0.0
        self._retry_at = 0.0
        self._failure: NvmlRead | None = None
        self._driver_version: str | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def _init(self) -> NvmlRead | None:
        """Initialise NVML if needed; the failure to report, or None when ready."""
        if self._initialized:
            return None
        if self._failure is not None and self.clock() < self._retry_at:
            return self._failure
        if self.simulated is not None:
            install(self.simulated)
        else:
            uninstall()  # a fake left installed by simulated mode in this process
        try:
            pynvml.nvmlInit()
        except (pynvml.NVMLError, pynvml.NVMLLibraryMismatchError) as err:
            return self._fail(err, "NVML could not start")
        self._initialized = True
        try:
            self._driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            self._driver_version = None  # only informative
        self._failure = None
        self._backoff = 0.0
        self.log.info("GPUaaS: NVML (%s) ready, driver %s", self.source, self._driver_version)
        return None

    def _fail(self, err: BaseException, what: str) -> NvmlRead:
        kind, advice = classify(err)
        self._backoff = min(self.backoff_max, max(self.backoff_initial, self._backoff * 2))
        self._retry_at = self.clock() + self._backoff
        # Logged once per kind of failure, not every retry.
        if self._failure is None or self._failure.error_kind != kind:
            level = logging.INFO if kind == "no_driver" and not self.expect_gpu else logging.WARNING
            self.log.log(
                level, "GPUaaS: %s: %s (retrying in %.0fs and later)", what, advice, self._backoff
            )
        self._failure = NvmlRead(source="unavailable", error=f"{what}: {advice}", error_kind=kind)
        return self._failure

    def _shutdown(self) -> None:
        if self._initialized:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError as err:
                self.log.debug("GPUaaS: nvmlShutdown failed: %s", err)
        self._initialized = False

    def close(self) -> None:
        self._shutdown()

    # -- reading -------------------------------------------------------------------------
    def read(self) -> NvmlRead:
        failure = self._init()
        if failure is not None:
            return failure
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as err:
            # The driver went away under us: start again, with backoff.
            self._shutdown()
            return self._fail(err, "NVML stopped answering")
        devices: list[Device] = []
        processes: list[GpuProcess] = []
        problems = _Problems()
        for index in range(count):
            self._read_gpu(index, devices, processes, problems)
        kind, message = problems.items[0] if problems.items else (None, None)
        if len(problems.items) > 1:
            message = "; ".join(m for _, m in problems.items)
        return NvmlRead(
            source=self.source,
            devices=tuple(devices),
            processes=tuple(merge_processes(processes)),
            error=message,
            error_kind=kind,
            driver_version=self._driver_version,
        )

    def _read_gpu(
        self,
        index: int,
        devices: list[Device],
        processes: list[GpuProcess],
        problems: _Problems,
    ) -> None:
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            gpu = self._device(handle, index)
            mig_enabled = _mig_enabled(handle)
            utilization = None if mig_enabled else _utilization(handle)
        except pynvml.NVMLError as err:
            problems.add(err, f"GPU {index}")
            return
        gpu = replace(gpu, utilization=utilization, mig_enabled=mig_enabled)
        gpu = replace(gpu, shared=device_matches(self.shared, gpu, None))
        # HAMi-core's limits are by CUDA index, which is the NVML index in the container.
        cap = None if mig_enabled else self.hami.cap(index)
        if cap is not None:
            gpu = replace(
                gpu,
                memory_cap=cap.memory,
                cap_source=cap.source,
                compute_cap=cap.cores,
                shared=True,
            )
        devices.append(gpu)
        if not mig_enabled:
            devices[-1] = self._processes(handle, gpu, processes, problems)
            return
        try:
            slots = pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)
        except pynvml.NVMLError as err:
            problems.add(err, f"MIG devices of GPU {index}")
            return
        for slot in range(slots):
            try:
                mig_handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                mig = self._device(mig_handle, slot, parent=gpu)
            except pynvml.NVMLError_NotFound:
                continue  # an empty slot: no MIG device configured there
            except pynvml.NVMLError as err:
                problems.add(err, f"MIG device {index}:{slot}")
                continue
            mig = replace(mig, shared=device_matches(self.shared, mig, index))
            devices.append(self._processes(mig_handle, mig, processes, problems))

    def _device(self, handle: Any, index: int, parent: Device | None = None) -> Device:
        name = _text(pynvml.nvmlDeviceGetName(handle))
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        profile = _MIG_PROFILE.search(name) if parent is not None else None
        return Device(
            uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
            index=index,
            name=name,
            memory_total=int(memory.total),
            memory_used=int(memory.used),
            parent_uuid=parent.uuid if parent is not None else None,
            mig_profile=profile.group(1).lower() if profile else None,
        )

    def _processes(
        self,
        handle: Any,
        device: Device,
        processes: list[GpuProcess],
        problems: _Problems,
    ) -> Device:
        """Append the device's compute and graphics processes; the device, marked when its
        list could not be read."""
        found: list[GpuProcess] = []
        for getter in (
            pynvml.nvmlDeviceGetComputeRunningProcesses,
            pynvml.nvmlDeviceGetGraphicsRunningProcesses,
        ):
            try:
                entries = getter(handle)
            except pynvml.NVMLError as err:
                if getter is pynvml.nvmlDeviceGetGraphicsRunningProcesses and isinstance(
                    err, pynvml.NVMLError_NotSupported
                ):
                    continue  # compute-only GPUs have no graphics contexts to list
                problems.add(err, f"processes on {device.uuid}")
                return replace(device, processes_read=False)
            for entry in entries:
                used = entry.usedGpuMemory
                found.append(
                    GpuProcess(device.uuid, int(entry.pid), None if used is None else int(used))
                )
        processes.extend(found)
        return device


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _mig_enabled(handle: Any) -> bool:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError_NotSupported:
        return False  # a GPU without MIG
    return bool(current == pynvml.NVML_DEVICE_MIG_ENABLE)


def _utilization(handle: Any) -> int | None:
    try:
        return int(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except pynvml.NVMLError_NotSupported:
        return None

"""The NVML layer: the real nvidia-ml-py bindings over the fake library, error codes included."""

from __future__ import annotations

import ctypes.util
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pynvml
import pytest

from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml, install, uninstall
from jupyter_gpuaas.gpu.model import GpuProcess
from jupyter_gpuaas.gpu.nvml import NvmlReader, classify
from jupyter_gpuaas.gpu.simulate import HOST_PID_OFFSET, DriverState
from jupyter_gpuaas.gpu.spec import DEFAULT_SIMULATED_DEVICES, GiB, parse_devices
from tests.support.clock import FakeClock

GPUS = parse_devices(DEFAULT_SIMULATED_DEVICES)
H100_0, H100_1, A100 = (g.uuid for g in GPUS)
MIG = [m.uuid for m in GPUS[2].mig]


def reader_for(
    directory: Path | None,
    driver: DriverState | None = None,
    *,
    shared: frozenset[str] = frozenset(),
    clock: Callable[[], float] | None = None,
) -> NvmlReader:
    # refresh=0: the library re-reads holds on every call, so tests need not wait
    lib = FakeNvml(GPUS, directory, driver, refresh=0)
    return NvmlReader(lib, shared=shared, clock=clock or FakeClock())


def test_devices_whole_gpus_and_mig_devices(sim_dir: Path) -> None:
    read = reader_for(sim_dir).read()

    assert (read.source, read.error, read.error_kind) == ("simulated", None, None)
    assert read.driver_version == "565.57.01"
    rows = [
        (d.uuid, d.index, d.parent_uuid, d.mig_profile, d.memory_total, d.utilization)
        for d in read.devices
    ]
    assert rows == [
        (H100_0, 0, None, None, 80 * GiB, 0),
        (H100_1, 1, None, None, 80 * GiB, 0),
        (A100, 2, None, None, 40 * GiB, None),
        *[(uuid, i, A100, "1g.5gb", 5 * GiB, None) for i, uuid in enumerate(MIG)],
    ]
    assert [d.mig_enabled for d in read.devices[:3]] == [False, False, True]
    assert read.devices[3].name == "NVIDIA A100-SXM4-40GB MIG 1g.5gb"


def test_processes_of_this_process_and_another(
    sim_dir: Path, holder: Callable[[str, str], Any]
) -> None:
    reader = reader_for(sim_dir)
    with simulate.hold("2GiB", device=0, utilization=40) as mine:
        other = holder("1GiB", "2:3")
        read = reader.read()
        assert set(read.processes) == {
            GpuProcess(H100_0, os.getpid(), 2 * GiB),
            GpuProcess(MIG[3], other.pid, GiB),
        }
        used = {d.uuid: d.memory_used for d in read.devices}
        assert (used[H100_0], used[MIG[3]], used[A100], used[H100_1]) == (2 * GiB, GiB, GiB, 0)
        assert read.devices[0].utilization == 40

        other.stop()  # a process that exits no longer holds memory
        assert reader.read().processes == (GpuProcess(H100_0, os.getpid(), 2 * GiB),)
        assert os.listdir(sim_dir / "holds") == [mine.path.name]  # the dead one's is removed
    assert reader.read().processes == ()


def test_two_holds_of_one_process_on_one_device_are_one_entry(sim_dir: Path) -> None:
    # NVML lists a process once per device with its total, however many allocations it made.
    with simulate.hold("1GiB", device=0), simulate.hold("2GiB", device=0):
        read = reader_for(sim_dir).read()
        assert read.processes == (GpuProcess(H100_0, os.getpid(), 3 * GiB),)
        assert {d.uuid: d.memory_used for d in read.devices}[H100_0] == 3 * GiB


def test_a_reused_pid_is_not_the_holder(sim_dir: Path) -> None:
    (sim_dir / "holds").mkdir(parents=True)
    stale = {"pid": os.getpid(), "device": "0", "size": GiB, "create_time": 1.0}
    (sim_dir / "holds" / "stale.json").write_text(json.dumps(stale))
    assert reader_for(sim_dir).read().processes == ()
    assert not (sim_dir / "holds" / "stale.json").exists()


def test_compute_and_graphics_contexts_of_one_process_count_once(sim_dir: Path) -> None:
    with simulate.hold("1GiB", device=1, kind="both"):
        lib = FakeNvml(GPUS, sim_dir, refresh=0)
        install(lib)
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(1)
        assert len(pynvml.nvmlDeviceGetComputeRunningProcesses(handle)) == 1
        assert len(pynvml.nvmlDeviceGetGraphicsRunningProcesses(handle)) == 1
        pynvml.nvmlShutdown()
        read = NvmlReader(lib).read()
        assert read.processes == (GpuProcess(H100_1, os.getpid(), GiB),)


@pytest.mark.parametrize(
    ("behaviour", "pid_offset", "size"),
    [
        pytest.param("565", 0, 2 * GiB, id="565: pod PIDs and memory"),
        pytest.param("535.113", 0, 0, id="535.113-560: pod PIDs, memory 0"),
        pytest.param("535.104", HOST_PID_OFFSET, 2 * GiB, id="535.104: host PIDs"),
    ],
)
def test_driver_behaviours(sim_dir: Path, behaviour: str, pid_offset: int, size: int) -> None:
    with simulate.hold("2GiB", device=0):
        simulate.set_driver(behaviour)  # type: ignore[arg-type]
        read = reader_for(sim_dir).read()
    assert read.processes == (GpuProcess(H100_0, os.getpid() + pid_offset, size),)
    assert read.devices[0].memory_used == 2 * GiB  # the device's own figure stays right


def test_lost_gpu_is_reported_and_the_others_still_read(sim_dir: Path) -> None:
    simulate.set_driver(lost=[1])
    reader = reader_for(sim_dir)
    read = reader.read()
    assert (read.source, read.error_kind) == ("simulated", "gpu_lost")
    assert read.error is not None
    assert read.error.startswith("GPU 1: the GPU is lost")
    assert "reset" in read.error
    assert H100_1 not in {d.uuid for d in read.devices}
    assert len(read.devices) == 9

    simulate.reset_driver()  # the next sample tries again
    read = reader.read()
    assert read.error is None
    assert len(read.devices) == 10


def test_missing_driver_backs_off_then_recovers(sim_dir: Path) -> None:
    clock = FakeClock()
    simulate.set_driver("no_driver")
    reader = reader_for(sim_dir, clock=clock)
    read = reader.read()
    assert (read.source, read.error_kind, read.devices) == ("unavailable", "no_driver", ())
    assert read.error is not None
    assert "driver is not loaded" in read.error

    simulate.reset_driver()
    clock.now += 1.9
    assert reader.read().source == "unavailable", "retried before the backoff ran out"
    clock.now += 0.2
    assert reader.read().source == "simulated"


def test_backoff_doubles_up_to_its_maximum(sim_dir: Path) -> None:
    clock = FakeClock()
    simulate.set_driver("no_driver")
    lib = FakeNvml(GPUS, sim_dir, refresh=0)
    reader = NvmlReader(lib, clock=clock, backoff=2, backoff_max=5)
    waits = []
    for _ in range(4):
        reader.read()
        waits.append(reader._retry_at - clock.now)
        clock.now = reader._retry_at
    assert waits == [2, 4, 5, 5]


@pytest.mark.parametrize(
    ("entry_point", "code", "kind", "devices", "processes_read"),
    [
        pytest.param(
            "nvmlInitWithFlags",
            pynvml.NVML_ERROR_NO_PERMISSION,
            "no_permission",
            0,
            None,
            id="init refused",
        ),
        pytest.param(
            "nvmlDeviceGetCount_v2",
            pynvml.NVML_ERROR_GPU_IS_LOST,
            "gpu_lost",
            0,
            None,
            id="count fails",
        ),
        pytest.param(
            "nvmlDeviceGetComputeRunningProcesses_v3",
            pynvml.NVML_ERROR_NO_PERMISSION,
            "no_permission",
            10,
            False,
            id="process list refused",
        ),
        pytest.param(
            "nvmlDeviceGetComputeRunningProcesses_v3",
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            "not_supported",
            10,
            False,
            id="process list not supported",
        ),
        pytest.param(
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            None,
            10,
            True,
            id="no graphics list on compute GPUs is fine",
        ),
        pytest.param(
            "nvmlDeviceGetUtilizationRates",
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            None,
            10,
            True,
            id="no utilisation is fine",
        ),
        pytest.param(
            "nvmlDeviceGetMigMode",
            pynvml.NVML_ERROR_NOT_SUPPORTED,
            None,
            3,
            True,
            id="no MIG support: whole GPUs",
        ),
        pytest.param(
            "nvmlDeviceGetMigDeviceHandleByIndex",
            pynvml.NVML_ERROR_NOT_FOUND,
            None,
            3,
            True,
            id="all MIG slots empty",
        ),
        pytest.param(
            "nvmlDeviceGetMemoryInfo",
            pynvml.NVML_ERROR_UNKNOWN,
            "unknown",
            0,
            None,
            id="unknown error",
        ),
        pytest.param(
            "nvmlDeviceGetUUID",
            pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
            "unknown",
            0,
            None,
            id="driver too old",
        ),
    ],
)
def test_error_codes(
    sim_dir: Path,
    entry_point: str,
    code: int,
    kind: str | None,
    devices: int,
    processes_read: bool | None,
) -> None:
    read = reader_for(sim_dir, DriverState(errors={entry_point: code})).read()
    assert read.error_kind == kind
    assert (read.error is None) == (kind is None)
    assert len(read.devices) == devices
    if processes_read is not None:
        assert {d.processes_read for d in read.devices if d.holds_processes} == {processes_read}
    if entry_point == "nvmlDeviceGetUtilizationRates":
        assert {d.utilization for d in read.devices} == {None}


def test_server_keeps_reading_after_an_error(sim_dir: Path) -> None:
    failing = "nvmlDeviceGetComputeRunningProcesses_v3"
    simulate.set_driver(errors={failing: pynvml.NVML_ERROR_NO_PERMISSION})
    reader = reader_for(sim_dir)
    assert reader.read().error_kind == "no_permission"
    simulate.reset_driver()
    assert reader.read().error_kind is None


def test_shared_devices_are_marked(sim_dir: Path) -> None:
    read = reader_for(sim_dir, shared=frozenset({"1", "2:3"})).read()
    assert [d.uuid for d in read.devices if d.shared] == [H100_1, MIG[3]]


@pytest.mark.parametrize(
    ("code", "kind", "advice"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no_driver", "gpu_source = 'simulated'"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no_driver", "administrator"),
        (pynvml.NVML_ERROR_GPU_IS_LOST, "gpu_lost", "reset"),
        (pynvml.NVML_ERROR_NOT_SUPPORTED, "not_supported", "not supported"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission", "/dev/nvidia"),
        (pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, "unknown", "update the driver"),
        (pynvml.NVML_ERROR_TIMEOUT, "unknown", "Timeout"),
    ],
)
def test_classify(code: int, kind: str, advice: str) -> None:
    got_kind, message = classify(pynvml.NVMLError(code))
    assert got_kind == kind
    assert advice in message


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has an NVIDIA driver"
)
def test_real_library_missing_is_no_driver() -> None:
    uninstall()
    read = NvmlReader().read()
    assert (read.source, read.error_kind) == ("unavailable", "no_driver")
    assert read.error is not None
    assert "libnvidia-ml.so.1 not found" in read.error


def test_switching_from_simulated_back_to_real_forgets_the_fake(sim_dir: Path) -> None:
    reader = reader_for(sim_dir)
    reader.read()
    reader.close()
    assert isinstance(pynvml.nvmlLib, FakeNvml)
    NvmlReader().read()  # real mode: whatever the machine has, never the fake
    assert not isinstance(pynvml.nvmlLib, FakeNvml)


def test_importing_the_package_does_not_touch_nvml() -> None:
    code = (
        "import pynvml, jupyter_gpuaas, jupyter_gpuaas.server.app, jupyter_gpuaas.gpu.simulate; "
        "jupyter_gpuaas._jupyter_server_extension_points(); "
        "print(pynvml.nvmlLib is None, pynvml._nvmlLib_refcount)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert out.stdout.split() == ["True", "0"]

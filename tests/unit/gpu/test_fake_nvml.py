"""The fake NVML library itself (jupyter_gpuaas.gpu.fake_nvml), called through the real
nvidia-ml-py bindings: each entry point's answers and NVML error codes, the driver behaviours
it plays, how often it re-reads the holds, and the library :func:`from_environment` builds for
a plain simulation, a node's pod and HAMi. What the project's reader makes of it is
tests/unit/gpu/test_nvml.py's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pynvml
import pytest

from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml, from_environment, install, uninstall
from jupyter_gpuaas.gpu.simulate import DriverState
from jupyter_gpuaas.gpu.spec import GiB, parse_devices
from tests.support.clock import FakeClock

SPEC = "1xH100-80GB:other=2GiB,1xA100-40GB:mig=2x1g.5gb,1xL4-24GB"
GPUS = parse_devices(SPEC)
H100, A100, L4 = GPUS


def started(lib: FakeNvml) -> FakeNvml:
    install(lib)
    pynvml.nvmlInit()
    return lib


@pytest.fixture
def nvml() -> Iterator[FakeNvml]:
    lib = started(FakeNvml(GPUS))
    yield lib
    pynvml.nvmlShutdown()


def error_of(call: Any, *args: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as failed:
        call(*args)
    code: int = failed.value.value
    return code


# --------------------------------------------------------------------------- the library


def test_no_call_but_init_answers_before_init() -> None:
    install(FakeNvml(GPUS))
    assert error_of(pynvml.nvmlDeviceGetCount) == pynvml.NVML_ERROR_UNINITIALIZED


def test_init_and_shutdown_are_counted() -> None:
    lib = started(FakeNvml(GPUS))
    pynvml.nvmlInit()
    assert lib.initialized == 2
    pynvml.nvmlShutdown()
    pynvml.nvmlShutdown()
    assert lib.initialized == 0


def test_an_entry_point_it_does_not_have_is_a_missing_function(nvml: FakeNvml) -> None:
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert error_of(pynvml.nvmlDeviceGetPowerUsage, handle) == (
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND
    )


@pytest.mark.parametrize(
    ("behaviour", "version"),
    [("565", "565.57.01"), ("535.113", "535.113.01"), ("535.104", "535.104.05")],
)
def test_each_driver_says_its_version(behaviour: Any, version: str) -> None:
    started(FakeNvml(GPUS, driver=DriverState(behaviour=behaviour)))
    assert pynvml.nvmlSystemGetDriverVersion() == version
    assert pynvml.nvmlSystemGetNVMLVersion() == "12." + version


def test_no_driver_fails_init_as_an_unloaded_driver() -> None:
    lib = FakeNvml(GPUS, driver=DriverState(behaviour="no_driver"))
    install(lib)
    assert error_of(pynvml.nvmlInit) == pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    assert lib.initialized == 0


def test_a_forced_error_is_returned_by_that_entry_point_only() -> None:
    driver = DriverState(errors={"nvmlDeviceGetName": pynvml.NVML_ERROR_NO_PERMISSION})
    started(FakeNvml(GPUS, driver=driver))
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    assert error_of(pynvml.nvmlDeviceGetName, handle) == pynvml.NVML_ERROR_NO_PERMISSION
    assert pynvml.nvmlDeviceGetUUID(handle) == H100.uuid


def test_a_lost_gpu_fails_its_calls_and_the_others_answer() -> None:
    started(FakeNvml(GPUS, driver=DriverState(lost=frozenset({"1"}))))
    lost = pynvml.nvmlDeviceGetHandleByIndex(1)
    assert error_of(pynvml.nvmlDeviceGetUUID, lost) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(2)) == L4.uuid


# --------------------------------------------------------------------------- devices


def test_the_devices_are_the_specs_in_order(nvml: FakeNvml) -> None:
    assert pynvml.nvmlDeviceGetCount() == 3
    for gpu in GPUS:
        handle = pynvml.nvmlDeviceGetHandleByIndex(gpu.index)
        assert pynvml.nvmlDeviceGetIndex(handle) == gpu.index
        assert pynvml.nvmlDeviceGetUUID(handle) == gpu.uuid
        assert pynvml.nvmlDeviceGetName(handle) == gpu.name
    assert error_of(pynvml.nvmlDeviceGetHandleByIndex, 3) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_memory_used_by_others_counts_on_the_whole_gpu(nvml: FakeNvml) -> None:
    memory = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
    assert (memory.total, memory.used, memory.free) == (H100.memory, 2 * GiB, H100.memory - 2 * GiB)
    v2 = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.nvmlMemory_v2)
    assert (v2.total, v2.used, v2.reserved) == (H100.memory, 2 * GiB, 0)


def test_mig_modes_as_the_driver_reports_them(nvml: FakeNvml) -> None:
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(3)]
    assert pynvml.nvmlDeviceGetMigMode(handles[0]) == [0, 0]  # capable, not enabled
    assert pynvml.nvmlDeviceGetMigMode(handles[1]) == [1, 1]
    assert error_of(pynvml.nvmlDeviceGetMigMode, handles[2]) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(handles[1]) == 7
    assert error_of(pynvml.nvmlDeviceGetMaxMigDeviceCount, handles[2]) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_mig_devices_fill_their_slots_and_name_their_parent(nvml: FakeNvml) -> None:
    a100 = pynvml.nvmlDeviceGetHandleByIndex(1)
    second = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(a100, 1)
    assert pynvml.nvmlDeviceGetUUID(second) == A100.mig[1].uuid
    assert pynvml.nvmlDeviceGetName(second) == f"{A100.name} MIG 1g.5gb"
    assert pynvml.nvmlDeviceIsMigDeviceHandle(second)
    assert not pynvml.nvmlDeviceIsMigDeviceHandle(a100)
    parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(second)
    assert pynvml.nvmlDeviceGetIndex(parent) == 1
    memory = pynvml.nvmlDeviceGetMemoryInfo(second)
    assert (memory.total, memory.used) == (A100.mig[1].memory, 0)
    assert error_of(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, a100, 2) == (
        pynvml.NVML_ERROR_NOT_FOUND  # an empty slot
    )
    assert error_of(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, a100, 7) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )
    assert error_of(pynvml.nvmlDeviceGetIndex, second) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert error_of(pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle, a100) == (
        pynvml.NVML_ERROR_INVALID_ARGUMENT
    )


def test_utilisation_is_not_per_mig_instance(nvml: FakeNvml) -> None:
    a100 = pynvml.nvmlDeviceGetHandleByIndex(1)
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(a100, 0)
    for handle in (a100, mig):
        assert error_of(pynvml.nvmlDeviceGetUtilizationRates, handle) == (
            pynvml.NVML_ERROR_NOT_SUPPORTED
        )
    rates = pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(2))
    assert (rates.gpu, rates.memory) == (0, 0)


# --------------------------------------------------------------------------- holds


def test_holds_are_read_again_only_after_the_refresh(sim_dir: Path) -> None:
    clock = FakeClock()
    started(FakeNvml(GPUS, sim_dir, refresh=5.0, clock=clock))
    l4 = pynvml.nvmlDeviceGetHandleByIndex(2)
    assert pynvml.nvmlDeviceGetMemoryInfo(l4).used == 0
    with simulate.hold("3GiB", device="2", utilization=50):
        assert pynvml.nvmlDeviceGetMemoryInfo(l4).used == 0  # read 0 s ago
        clock.advance(5.0)
        assert pynvml.nvmlDeviceGetMemoryInfo(l4).used == 3 * GiB
        assert pynvml.nvmlDeviceGetUtilizationRates(l4).gpu == 50


def test_init_tells_the_simulation_which_devices_there_are(sim_dir: Path) -> None:
    started(FakeNvml(GPUS, sim_dir))
    written = json.loads((sim_dir / "devices.json").read_text())["gpus"]
    assert [d["uuid"] for d in written] == [g.uuid for g in GPUS]
    assert written[1]["mig"] == [m.uuid for m in A100.mig]


def test_on_a_node_the_devices_file_is_not_the_pods_to_write(sim_dir: Path) -> None:
    started(FakeNvml(GPUS, sim_dir, node=True))
    assert not (sim_dir / "devices.json").exists()


# --------------------------------------------------------------------------- from_environment


def test_a_plain_simulation_is_the_spec(sim_dir: Path) -> None:
    lib, what = from_environment(SPEC, sim_dir, DriverState(), {})
    assert [g.uuid for g in lib.gpus] == [g.uuid for g in GPUS]
    assert (lib.node, lib.container, lib.hami.active) == (False, None, False)
    assert what == "simulated GPUs of GPUaaS.simulated_devices"


def test_on_a_node_the_pod_sees_its_visible_gpus_as_its_container(sim_dir: Path) -> None:
    simulate.write_node(sim_dir, "4xL4-24GB")
    node_gpus = parse_devices("4xL4-24GB")
    environ = {"NVIDIA_VISIBLE_DEVICES": node_gpus[2].uuid, simulate.ENV_CONTAINER: "pod-a/nb"}
    lib, what = from_environment("ignored-spec", sim_dir, DriverState(), environ)
    assert [g.uuid for g in lib.gpus] == [node_gpus[2].uuid]
    assert (lib.node, lib.container) == (True, "pod-a/nb")
    assert what == (
        "the node's simulated GPUs (4xL4-24GB) as this pod's allocation"
        f" (NVIDIA_VISIBLE_DEVICES={node_gpus[2].uuid})"
    )


def test_on_a_node_without_visible_devices_set_all_are_seen(sim_dir: Path) -> None:
    simulate.write_node(sim_dir, "2xL4-24GB")
    lib, what = from_environment("", sim_dir, DriverState(), {})
    assert len(lib.gpus) == 2
    assert lib.container is None
    assert what.endswith("(NVIDIA_VISIBLE_DEVICES=(not set: all))")


def test_hamis_environment_caps_the_memory_and_is_said(sim_dir: Path) -> None:
    environ = {"CUDA_DEVICE_MEMORY_LIMIT_2": "4g"}
    lib, what = from_environment(SPEC, sim_dir, DriverState(), environ)
    assert what.startswith("simulated GPUs of GPUaaS.simulated_devices; HAMi-core's view, caps")
    assert "GPU 2: 4294967296 bytes (CUDA_DEVICE_MEMORY_LIMIT_2)" in what
    started(lib)
    capped = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(2))
    assert capped.total == 4 * GiB
    whole = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
    assert (whole.total, whole.used) == (H100.memory, 0)  # HAMi counts no one else's "other"


def test_uninstall_leaves_another_library_alone() -> None:
    other = object()
    pynvml.nvmlLib = other
    try:
        uninstall()
        assert pynvml.nvmlLib is other
    finally:
        pynvml.nvmlLib = None

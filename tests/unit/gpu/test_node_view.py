"""One node's simulated GPUs seen from its pods: each pod sees its own devices, a neighbour's
memory on a time-shared GPU, and on a HAMi fraction what HAMi-core presents. Read through the
real nvidia-ml-py bindings over the fake library, with real processes as the neighbours."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.attribution import attribute
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml, from_environment, install
from jupyter_gpuaas.gpu.model import KernelTree
from jupyter_gpuaas.gpu.nvml import NvmlReader
from jupyter_gpuaas.gpu.simulate import HOST_PID_OFFSET, DriverState
from jupyter_gpuaas.gpu.spec import GiB, MiB, SpecError, parse_devices, visible_gpus

NODE = "1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x3g.20gb,1xL4-24GB:replicas=4,1xL4-24GB:hami=4"
GPUS = parse_devices(NODE)
WHOLE, MIGGED, SLICED, HAMI = GPUS
MIG_3G = MIGGED.mig[2]
L4_TOTAL = 23034 * MiB  # what NVML reports for an L4
HAMI_ENV = {
    "CUDA_DEVICE_MEMORY_LIMIT_0": "6144m",
    "CUDA_DEVICE_SM_LIMIT": "25",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/x.cache",
}


def test_spec_sharing_options() -> None:
    assert [(g.sharing, g.slots) for g in GPUS] == [
        ("none", 1),
        ("none", 1),
        ("time-slicing", 4),
        ("hami", 4),
    ]
    for bad in ("1xL4-24GB:replicas=0", "1xL4-24GB:hami=x", "1xL4-24GB:hami=2:replicas=2"):
        with pytest.raises(SpecError):
            parse_devices(bad)
    with pytest.raises(SpecError, match="MIG-enabled"):
        parse_devices("1xA100-40GB:mig=7x1g.5gb:hami=2")


@pytest.mark.parametrize(
    ("visible", "seen"),
    [
        (None, [(0, WHOLE.uuid, 0), (1, MIGGED.uuid, 3), (2, SLICED.uuid, 0), (3, HAMI.uuid, 0)]),
        ("all", [(0, WHOLE.uuid, 0), (1, MIGGED.uuid, 3), (2, SLICED.uuid, 0), (3, HAMI.uuid, 0)]),
        ("void", []),
        ("none", []),
        ("", []),
        # One GPU: index 0 in the container, the machine's UUID.
        (HAMI.uuid, [(0, HAMI.uuid, 0)]),
        # One MIG device: its parent GPU with only that MIG device.
        (MIG_3G.uuid, [(0, MIGGED.uuid, 1)]),
        # Listed out of order: the machine's order, re-indexed.
        (f"{SLICED.uuid},{WHOLE.uuid}", [(0, WHOLE.uuid, 0), (1, SLICED.uuid, 0)]),
        ("1", [(0, MIGGED.uuid, 3)]),
    ],
)
def test_visible_gpus(visible: str | None, seen: list[tuple[int, str, int]]) -> None:
    assert [(g.index, g.uuid, len(g.mig)) for g in visible_gpus(GPUS, visible)] == seen


def test_mig_view_keeps_the_named_device() -> None:
    (gpu,) = visible_gpus(GPUS, MIG_3G.uuid)
    assert gpu.mig == (MIG_3G,)


@pytest.fixture
def node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A node's GPU state directory, as the node agent writes it; this process is container A."""
    directory = tmp_path / "gpus"
    simulate.write_node(directory, NODE)
    monkeypatch.setenv(simulate.ENV_DIR, str(directory))
    monkeypatch.setenv(simulate.ENV_CONTAINER, "pod-a/notebook")
    return directory


class Neighbour:
    """A process of another container on the node, holding GPU memory until stopped."""

    def __init__(self, directory: Path, visible: str, size: str, utilization: int = 0) -> None:
        code = (
            "import sys; from jupyter_gpuaas.gpu import simulate; "
            f"simulate.hold({size!r}, utilization={utilization}); print('held', flush=True); "
            "sys.stdin.read()"
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            simulate.ENV_DIR: str(directory),
            simulate.ENV_CONTAINER: "pod-b/notebook",
            simulate.VISIBLE_DEVICES: visible,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "held"

    def stop(self) -> None:
        """Close its input (its cue to exit), wait for it and close its output: stopped twice,
        nothing happens the second time."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def neighbours() -> Iterator[list[Neighbour]]:
    started: list[Neighbour] = []
    yield started
    for n in started:
        n.stop()


def reader(environ: dict[str, str], driver: DriverState | None = None) -> NvmlReader:
    """The server's reader, built as the server builds it from its environment."""
    from jupyter_gpuaas.gpu.hami import hami_env

    lib, _ = from_environment("1xH100-80GB", simulate.state_dir(), driver or DriverState(), environ)
    lib.refresh = 0
    return NvmlReader(lib, hami=hami_env(environ))


def env_of(visible: str, **extra: str) -> dict[str, str]:
    return {
        simulate.VISIBLE_DEVICES: visible,
        simulate.ENV_CONTAINER: "pod-a/notebook",
        **extra,
    }


def test_a_whole_gpu_pod_sees_only_its_gpu(node: Path) -> None:
    read = reader(env_of(WHOLE.uuid)).read()
    assert [(d.index, d.uuid, d.memory_total) for d in read.devices] == [(0, WHOLE.uuid, 40 * GiB)]


def test_a_mig_pod_sees_its_mig_device_under_its_parent(node: Path) -> None:
    read = reader(env_of(MIG_3G.uuid)).read()
    assert [(d.uuid, d.parent_uuid, d.mig_profile) for d in read.devices] == [
        (MIGGED.uuid, None, None),
        (MIG_3G.uuid, MIGGED.uuid, "3g.20gb"),
    ]


def test_a_pod_without_gpus_sees_none_and_cannot_hold(
    node: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert reader(env_of("void")).read().devices == ()
    monkeypatch.setenv(simulate.VISIBLE_DEVICES, "void")
    with pytest.raises(SpecError, match="no GPU"):
        simulate.hold("1GiB")


def test_holds_name_their_device_by_uuid(node: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(simulate.VISIBLE_DEVICES, SLICED.uuid)
    with simulate.hold("1GiB") as h:  # index 0 in this container
        assert h.device == SLICED.uuid
        assert h.record.container == "pod-a/notebook"
    with pytest.raises(SpecError, match="no GPU '1' in this pod"):
        simulate.hold("1GiB", device=1)


def test_time_shared_gpu_shows_the_neighbours_memory_not_their_processes(
    node: Path, neighbours: list[Neighbour], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(simulate.VISIBLE_DEVICES, SLICED.uuid)
    neighbours.append(Neighbour(node, SLICED.uuid, "3GiB", utilization=30))
    with simulate.hold("2GiB", utilization=20):
        read = reader(env_of(SLICED.uuid), DriverState(behaviour="565")).read()
        (device,) = read.devices
        # Device-level used memory and utilisation are everyone's ...
        assert (device.memory_total, device.memory_used, device.utilization) == (
            L4_TOTAL,
            5 * GiB,
            50,
        )
        # ... but a driver that translates PIDs lists only this pod's processes.
        assert [(p.pid, p.used_memory) for p in read.processes] == [(os.getpid(), 2 * GiB)]
        kernels = [KernelTree("k", frozenset({os.getpid()}))]
        result = attribute(read.devices, read.processes, kernels, frozenset({os.getpid()}))
        assert result.kernels["k"].gpu_memory == 2 * GiB
        assert result.other_memory == {SLICED.uuid: 3 * GiB}

        # A driver up to 535.104 lists every process, with host PIDs.
        old = reader(env_of(SLICED.uuid), DriverState(behaviour="535.104")).read()
        assert sorted(p.pid for p in old.processes) == sorted(
            [os.getpid() + HOST_PID_OFFSET, neighbours[0].proc.pid + HOST_PID_OFFSET]
        )


def test_a_pod_on_another_gpu_never_sees_the_neighbour(
    node: Path, neighbours: list[Neighbour]
) -> None:
    neighbours.append(Neighbour(node, SLICED.uuid, "3GiB"))
    read = reader(env_of(WHOLE.uuid)).read()
    assert [(d.uuid, d.memory_used) for d in read.devices] == [(WHOLE.uuid, 0)]
    assert read.processes == ()


def test_hami_fraction_shows_the_cap_and_only_this_pods_use(
    node: Path, neighbours: list[Neighbour], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(simulate.VISIBLE_DEVICES, HAMI.uuid)
    # Another pod's vGPU on the same GPU: 4 GiB, busy.
    neighbours.append(Neighbour(node, HAMI.uuid, "4GiB", utilization=60))
    environ = env_of(HAMI.uuid, **HAMI_ENV)
    with simulate.hold("1GiB", utilization=10):
        read = reader(environ).read()
        (device,) = read.devices
        # HAMi-core: total = the cap, used = this container's, free = the rest.
        assert (device.memory_total, device.memory_used) == (6 * GiB, GiB)
        assert (device.memory_cap, device.cap_source, device.compute_cap) == (
            6 * GiB,
            "CUDA_DEVICE_MEMORY_LIMIT_0",
            25,
        )
        assert device.shared  # compute is shared: its utilisation is not this server's
        # Utilisation passes through HAMi-core unchanged: the whole GPU's.
        assert device.utilization == 70
        assert [(p.pid, p.used_memory) for p in read.processes] == [(os.getpid(), GiB)]

        # The same through the bindings directly, both versions of the call.
        lib, _ = from_environment("1xH100-80GB", node, DriverState(), environ)
        install(lib)
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            v1 = pynvml.nvmlDeviceGetMemoryInfo(handle)
            v2 = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
            for info in (v1, v2):
                assert (info.total, info.used, info.free) == (6 * GiB, GiB, 5 * GiB)
            assert pynvml.nvmlDeviceGetCount() == 1
        finally:
            pynvml.nvmlShutdown()


def test_without_a_cap_hami_still_shows_only_this_pods_use(
    node: Path, neighbours: list[Neighbour]
) -> None:
    neighbours.append(Neighbour(node, HAMI.uuid, "4GiB"))
    read = reader(env_of(HAMI.uuid, CUDA_DEVICE_SM_LIMIT="50")).read()
    (device,) = read.devices
    assert (device.memory_total, device.memory_used, device.memory_cap) == (L4_TOTAL, 0, None)


def test_the_same_gpu_without_hami_shows_everyones_memory(
    node: Path, neighbours: list[Neighbour]
) -> None:
    neighbours.append(Neighbour(node, HAMI.uuid, "4GiB"))
    (device,) = reader(env_of(HAMI.uuid)).read().devices
    assert (device.memory_total, device.memory_used, device.memory_cap) == (L4_TOTAL, 4 * GiB, None)


def test_outside_a_node_the_spec_is_used_and_hami_env_still_applies(tmp_path: Path) -> None:
    lib, what = from_environment("1xL4-24GB", tmp_path, DriverState(), HAMI_ENV)
    assert isinstance(lib, FakeNvml)
    assert [g.uuid for g in lib.gpus] == [parse_devices("1xL4-24GB")[0].uuid]
    assert "CUDA_DEVICE_MEMORY_LIMIT_0" in what
    assert lib.hami.cap(0) is not None

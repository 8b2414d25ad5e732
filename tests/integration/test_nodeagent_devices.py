"""The node agent's device allocation from pod specs (pure: no cluster): which devices each
container gets and the environment the device plugins would give it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster.gpualloc import (
    AllocationError,
    ContainerDevices,
    Grant,
    allocate,
    capacity,
    requests_of,
)
from devcluster.nodeagent import container_env
from devcluster.nodes import NodesFileError, check_simulated_gpus, load_nodes
from jupyter_gpuaas.gpu.spec import GiB, parse_devices

MiB = 1024**2
NODE = "1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x3g.20gb,1xL4-24GB:replicas=4,2xL4-24GB:hami=4"
GPUS = parse_devices(NODE)
WHOLE, MIGGED, SLICED, HAMI_A, HAMI_B = GPUS


def pod(*limits: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "uid": "u"},
        "spec": {
            "containers": [
                {"name": f"c{i}", "resources": {"limits": lim}} for i, lim in enumerate(limits)
            ]
        },
    }


@pytest.mark.parametrize(
    ("limits", "grants"),
    [
        pytest.param({}, [], id="no GPU"),
        pytest.param({"nvidia.com/gpu": "1"}, [Grant("gpu", 0, WHOLE.uuid)], id="whole GPU"),
        pytest.param(
            {"nvidia.com/mig-3g.20gb": 1},
            [Grant("mig", 1, MIGGED.mig[2].uuid)],
            id="MIG 3g.20gb",
        ),
        pytest.param(
            {"nvidia.com/mig-1g.5gb": 2},
            [Grant("mig", 1, MIGGED.mig[0].uuid), Grant("mig", 1, MIGGED.mig[1].uuid)],
            id="two MIG 1g.5gb",
        ),
        pytest.param(
            {"nvidia.com/gpu.shared": 1},
            [Grant("replica", 2, SLICED.uuid)],
            id="time-sliced replica",
        ),
        pytest.param(
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6144, "nvidia.com/gpucores": 25},
            [Grant("vgpu", 3, HAMI_A.uuid, memory=6 * GiB, cores=25)],
            id="HAMi fraction",
        ),
        pytest.param(
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50},
            [Grant("vgpu", 3, HAMI_A.uuid, memory=12 * GiB, cores=0)],
            id="HAMi fraction by percentage",
        ),
        pytest.param(
            {"nvidia.com/gpu": 2, "nvidia.com/gpucores": 10},
            [
                Grant("vgpu", 3, HAMI_A.uuid, memory=24 * GiB, cores=10),
                Grant("vgpu", 4, HAMI_B.uuid, memory=24 * GiB, cores=10),
            ],
            id="two vGPUs on distinct GPUs, all memory by default",
        ),
    ],
)
def test_allocation_of_one_pod(limits: dict[str, Any], grants: list[Grant]) -> None:
    assert allocate(GPUS, [], pod(limits)) == {"c0": ContainerDevices("c0", tuple(grants))}


def test_requests_count_when_limits_are_absent_and_other_resources_are_ignored() -> None:
    container = {
        "name": "c",
        "resources": {"requests": {"cpu": "1", "nvidia.com/gpu.shared": "1"}, "limits": {}},
    }
    assert requests_of(container) == {"nvidia.com/gpu.shared": 1}


def test_what_others_hold_is_not_handed_out_again() -> None:
    first = allocate(GPUS, [], pod({"nvidia.com/gpu": 1}))["c0"].grants
    with pytest.raises(AllocationError, match=r"nvidia\.com/gpu: 1 requested, 0 free"):
        allocate(GPUS, first, pod({"nvidia.com/gpu": 1}))
    taken = allocate(GPUS, [], pod({"nvidia.com/mig-3g.20gb": 1}))["c0"].grants
    with pytest.raises(AllocationError, match=r"mig-3g\.20gb"):
        allocate(GPUS, taken, pod({"nvidia.com/mig-3g.20gb": 1}))


def test_replicas_go_round_until_every_slot_is_used() -> None:
    held: list[Grant] = []
    for _ in range(4):
        held += allocate(GPUS, held, pod({"nvidia.com/gpu.shared": 1}))["c0"].grants
    assert [g.uuid for g in held] == [SLICED.uuid] * 4
    with pytest.raises(AllocationError, match="free replica"):
        allocate(GPUS, held, pod({"nvidia.com/gpu.shared": 1}))


def test_vgpus_spread_and_stop_at_memory_slots_and_cores() -> None:
    quarter = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6144, "nvidia.com/gpucores": 25}
    held: list[Grant] = []
    for _ in range(8):
        held += allocate(GPUS, held, pod(quarter))["c0"].grants
    # Spread over the two HAMi GPUs, four quarters each (memory, slots and cores all full).
    assert sorted(g.gpu for g in held) == [3, 3, 3, 3, 4, 4, 4, 4]
    with pytest.raises(AllocationError, match="HAMi vGPU"):
        allocate(GPUS, held, pod(quarter))
    # Memory alone stops it too: 20 GiB on a GPU with 18 GiB left.
    one = allocate(GPUS, [], pod({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6144}))["c0"].grants
    big = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 20 * 1024}
    assert allocate(GPUS, one, pod(big))["c0"].grants[0].gpu == 4


def test_two_containers_of_one_pod_get_different_devices() -> None:
    got = allocate(GPUS, [], pod({"nvidia.com/mig-1g.5gb": 1}, {"nvidia.com/mig-1g.5gb": 1}))
    assert got["c0"].grants[0].uuid != got["c1"].grants[0].uuid


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"nvidia.com/gpumem": 1024}, "without nvidia.com/gpu"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpucores": 150}, "percentage"),
        ({"nvidia.com/gpu": "1.5"}, "whole number"),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30 * 1024}, "HAMi vGPU"),
    ],
)
def test_requests_that_cannot_be_met_say_why(limits: dict[str, Any], message: str) -> None:
    with pytest.raises(AllocationError, match=message):
        allocate(GPUS, [], pod(limits))


@pytest.mark.parametrize(
    ("grants", "env"),
    [
        ((), {"NVIDIA_VISIBLE_DEVICES": "void"}),
        ((Grant("gpu", 0, WHOLE.uuid),), {"NVIDIA_VISIBLE_DEVICES": WHOLE.uuid}),
        (
            (Grant("mig", 1, MIGGED.mig[2].uuid),),
            {"NVIDIA_VISIBLE_DEVICES": MIGGED.mig[2].uuid},
        ),
        ((Grant("replica", 2, SLICED.uuid),), {"NVIDIA_VISIBLE_DEVICES": SLICED.uuid}),
        (
            # HAMi's device plugin: limits in MiB with an "m", cores of the first vGPU.
            (
                Grant("vgpu", 4, HAMI_B.uuid, memory=2 * GiB, cores=25),
                Grant("vgpu", 3, HAMI_A.uuid, memory=6 * GiB, cores=25),
            ),
            {
                "NVIDIA_VISIBLE_DEVICES": f"{HAMI_A.uuid},{HAMI_B.uuid}",
                "CUDA_DEVICE_MEMORY_LIMIT_0": "6144m",
                "CUDA_DEVICE_MEMORY_LIMIT_1": "2048m",
                "CUDA_DEVICE_SM_LIMIT": "25",
                "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/p/vgpu/c.cache",
            },
        ),
    ],
)
def test_device_plugin_environment(grants: tuple[Grant, ...], env: dict[str, str]) -> None:
    assert ContainerDevices("c", grants).env("/p/vgpu/c.cache") == env


def test_device_env_comes_before_the_pod_specs_env(tmp_path: Path) -> None:
    container = {"name": "c", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
    devices = {"NVIDIA_VISIBLE_DEVICES": "GPU-1", "CUDA_DEVICE_SM_LIMIT": "25"}
    env = container_env(
        {"metadata": {"name": "p"}, "spec": {}},
        container,
        pod_ip="127.42.0.2",
        host_ip="127.0.0.1",
        workdir=tmp_path / "home",
        base={},
        tmpdir=tmp_path / "tmp",
        devices=devices,
    )
    # As with a kubelet, the pod spec's own env wins over the device plugin's.
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "25"
    assert (env["HOME"], env["TMPDIR"]) == (str(tmp_path / "home"), str(tmp_path / "tmp"))


def test_capacity_of_the_device_plugins() -> None:
    assert capacity(GPUS) == {
        "nvidia.com/gpu": 1 + 4 + 4,
        "nvidia.com/mig-1g.5gb": 2,
        "nvidia.com/mig-3g.20gb": 1,
        "nvidia.com/gpu.shared": 4,
    }


def test_nodes_yaml_simulated_gpus_must_match_the_capacity() -> None:
    check_simulated_gpus(
        "1xA100-40GB,1xL4-24GB:hami=4",
        {"cpu": "1", "nvidia.com/gpu": "5", "nvidia.com/gpumem": "24576"},
        "pool",
    )
    with pytest.raises(NodesFileError, match=r"make the capacity say \{'nvidia.com/gpu': 5\}"):
        check_simulated_gpus("1xA100-40GB,1xL4-24GB:hami=4", {"nvidia.com/gpu": "1"}, "pool")


def test_the_agent_pool_of_nodes_yaml_declares_its_gpus() -> None:
    (agent,) = [n for n in load_nodes() if n.run_by == "agent"]
    assert agent.simulated_gpus is not None
    assert parse_devices(agent.simulated_gpus)

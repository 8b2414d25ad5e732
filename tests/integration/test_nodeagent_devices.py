"""The node agent's device allocation from pod specs: which devices each container gets and the
environment the device plugins would give it (pure: no cluster), and that a finished pod's devices
are free again (also on the cluster, with the node agent)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.gpualloc import (
    AllocationError,
    ContainerDevices,
    Grant,
    allocate,
    capacity,
    requests_of,
)
from devcluster.nodeagent import PodRun, container_env, devices_held
from devcluster.nodes import NodesFileError, check_simulated_gpus, load_nodes
from devcluster.testing import Cluster, core, on_local_node, wait_for
from jupyter_gpuaas.gpu.spec import GiB, parse_devices

MiB = 1024**2
NODE = "1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x3g.20gb,1xL4-24GB:replicas=4,2xL4-24GB:hami=4"
GPUS = parse_devices(NODE)
WHOLE, MIGGED, SLICED, HAMI_A, HAMI_B = GPUS


def pod(*limits: dict[str, Any], placed: str = "") -> dict[str, Any]:
    """A pod of containers with these limits; ``placed``: HAMi's scheduler's choice for it
    (``hami.io/vgpu-devices-to-allocate``)."""
    return {
        "metadata": {
            "name": "p",
            "uid": "u",
            "annotations": {"hami.io/vgpu-devices-to-allocate": placed} if placed else {},
        },
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
    ],
)
def test_allocation_of_one_pod(limits: dict[str, Any], grants: list[Grant]) -> None:
    assert allocate(GPUS, [], pod(limits)) == {"c0": ContainerDevices("c0", tuple(grants))}


@pytest.mark.parametrize(
    ("limits", "placed", "grants"),
    [
        pytest.param(
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6144, "nvidia.com/gpucores": 25},
            f"{HAMI_B.uuid},NVIDIA,6144,25:;",
            [Grant("vgpu", 4, HAMI_B.uuid, memory=6 * GiB, cores=25)],
            id="HAMi fraction",
        ),
        pytest.param(
            {"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 50},
            f"{HAMI_A.uuid},NVIDIA,12288,0:;",
            [Grant("vgpu", 3, HAMI_A.uuid, memory=12 * GiB, cores=0)],
            id="HAMi fraction by percentage",
        ),
        pytest.param(
            {"nvidia.com/gpu": 2, "nvidia.com/gpucores": 10},
            f"{HAMI_B.uuid},NVIDIA,24576,10:{HAMI_A.uuid},NVIDIA,24576,10:;",
            [
                Grant("vgpu", 4, HAMI_B.uuid, memory=24 * GiB, cores=10),
                Grant("vgpu", 3, HAMI_A.uuid, memory=24 * GiB, cores=10),
            ],
            id="two vGPUs on the cards and with the caps HAMi chose",
        ),
    ],
)
def test_hami_vgpus_are_the_ones_hamis_scheduler_chose(
    limits: dict[str, Any], placed: str, grants: list[Grant]
) -> None:
    # As HAMi's device plugin: the cards and limits of the pod's annotation, whatever others
    # hold (the scheduler counted them).
    held = [Grant("vgpu", 4, HAMI_B.uuid, memory=20 * GiB, cores=90)]
    got = allocate(GPUS, held, pod(limits, placed=placed))
    assert got == {"c0": ContainerDevices("c0", tuple(grants))}


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


def test_two_containers_of_one_pod_get_different_devices() -> None:
    got = allocate(GPUS, [], pod({"nvidia.com/mig-1g.5gb": 1}, {"nvidia.com/mig-1g.5gb": 1}))
    assert got["c0"].grants[0].uuid != got["c1"].grants[0].uuid


@pytest.mark.parametrize(
    ("limits", "placed", "message"),
    [
        ({"nvidia.com/gpumem": 1024}, "", "without nvidia.com/gpu"),
        ({"nvidia.com/gpu": "1.5"}, "", "whole number"),
        # HAMi's device plugin refuses a pod its scheduler did not place, or placed otherwise.
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}, "", "not placed by HAMi's scheduler"),
        (
            {"nvidia.com/gpu": 2, "nvidia.com/gpumem": 1024},
            "GPU-x,NVIDIA,1024,0:;",
            "device number not matched",
        ),
        ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 1024}, "GPU-x,NVIDIA,1024,0:;", "GPU-x"),
    ],
)
def test_requests_that_cannot_be_met_say_why(
    limits: dict[str, Any], placed: str, message: str
) -> None:
    with pytest.raises(AllocationError, match=message):
        allocate(GPUS, [], pod(limits, placed=placed))


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


# --- a finished pod's devices are free -------------------------------------------------------


def run_of(phase: str, grants: tuple[Grant, ...]) -> PodRun:
    run = PodRun(uid=phase, namespace="ns", name=phase, pod={}, ip="", poddir=Path("/nonexistent"))
    run.phase = phase
    run.devices = {"c0": ContainerDevices("c0", grants)}
    return run


def test_a_finished_pod_holds_no_devices() -> None:
    slices = allocate(GPUS, [], pod({"nvidia.com/mig-1g.5gb": 2}))["c0"].grants
    running, succeeded, failed = (run_of(p, slices) for p in ("Running", "Succeeded", "Failed"))
    new = run_of("Pending", ())
    assert devices_held([running, succeeded, failed, new], but=new) == list(slices)
    assert devices_held([succeeded, failed, new], but=new) == []
    assert devices_held([running], but=running) == []
    # So the slices a finished Job pod had are handed out again.
    freed = allocate(
        GPUS, devices_held([succeeded, new], but=new), pod({"nvidia.com/mig-1g.5gb": 2})
    )
    assert freed["c0"].grants == slices


NS = "jupyter-users"
LOCAL_MIG = "nvidia.com/mig-1g.5gb"  # local-0 has two: nodes.yaml


def local_pod(name: str, command: list[str], slices: int) -> dict[str, Any]:
    """A pod on the node agent's node (no queue: Kueue leaves it alone) holding MIG slices."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            **on_local_node(),
            "containers": [
                {
                    "name": "main",
                    "image": "python:3.11",
                    "command": command,
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {LOCAL_MIG: str(slices)},
                    },
                }
            ],
        },
    }


@pytest.mark.integration
async def test_a_pod_starts_on_the_slices_a_finished_pod_had(cluster: Cluster) -> None:
    # Seen in the demo: after the sample Job's pod Succeeded (a Job keeps its pods), a server
    # admitted onto the slice it had used was refused by the node agent, "1 requested, 0 free".
    names = ["finished-job-pod", "after-the-job"]
    async with cluster.api("jupyterhub", "hub") as api:
        v1 = core(api)
        try:
            await v1.create_namespaced_pod(NS, local_pod(names[0], ["python3", "-c", "pass"], 2))

            async def phase_of(name: str) -> str:
                pod = await v1.read_namespaced_pod(name, NS)
                if pod.status.phase == "Failed":
                    pytest.fail(f"{name} failed: {pod.status.reason}: {pod.status.message}")
                return str(pod.status.phase)

            async def succeeded() -> bool:
                return await phase_of(names[0]) == "Succeeded"

            await wait_for(f"{names[0]} Succeeded", succeeded, 60)
            await v1.create_namespaced_pod(NS, local_pod(names[1], ["sleep", "300"], 1))

            async def running() -> bool:
                return await phase_of(names[1]) == "Running"

            await wait_for(f"{names[1]} Running on a freed slice", running, 60)
            assert await phase_of(names[0]) == "Succeeded"  # still there, holding nothing
        finally:
            for name in names:
                with contextlib.suppress(ApiException):
                    await v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)

            async def gone() -> bool:
                left = {p.metadata.name for p in (await v1.list_namespaced_pod(NS)).items}
                return not left & set(names)

            await wait_for("the pods gone", gone, 60)

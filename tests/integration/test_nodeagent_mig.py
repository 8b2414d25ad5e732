"""The node agent honours NVIDIA's MIG manager label ``nvidia.com/mig.config``: a named config
re-cuts the node's MIG-mode GPUs and the node's resources are re-advertised, but only while no
pod holds a GPU of the node; otherwise the change is refused (state ``failed``) with an Event
that names the pods and what to do. Pure parts first, then on the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.gpualloc import MigConfigError, capacity, mig_config_of, reshape
from devcluster.nodeagent import (
    Container,
    PodRun,
    gpu_holders,
    mig_label_patch,
    mig_refusal,
)
from devcluster.testing import Cluster, core, on_local_node, wait_for
from jupyter_gpuaas.core.mig_geometry import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from jupyter_gpuaas.gpu.spec import parse_devices

BOOT = "1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x3g.20gb,1xL4-24GB:hami=4,1xH100-80GB:mig=7x1g.10gb"
MIG = "nvidia.com/mig-"


def migs(spec: str) -> dict[str, int]:
    return {k: v for k, v in capacity(parse_devices(spec)).items() if k.startswith(MIG)}


def test_reshape_recuts_only_the_mig_gpus_per_model() -> None:
    balanced = reshape(BOOT, "all-balanced")
    assert balanced == (
        "1xA100-40GB,1xA100-40GB:mig=2x1g.5gb+1x2g.10gb+1x3g.20gb,1xL4-24GB:hami=4,"
        "1xH100-80GB:mig=2x1g.10gb+1x2g.20gb+1x3g.40gb"
    )
    assert capacity(parse_devices(balanced))["nvidia.com/gpu"] == 5  # the whole A100, 4 vGPUs
    assert migs(reshape(BOOT, "all-1g.10gb")) == {f"{MIG}1g.10gb": 4 + 7}
    assert mig_config_of(parse_devices(balanced)) == "all-balanced"
    assert mig_config_of(parse_devices(BOOT)) is None  # the boot geometry has no name
    assert reshape(BOOT, None) == BOOT  # no label: the node's own geometry


def test_reshape_refuses_what_the_node_cannot_apply() -> None:
    with pytest.raises(MigConfigError, match="names no config this node knows"):
        reshape(BOOT, "all-huge")
    with pytest.raises(MigConfigError, match="no MIG geometry for this node's A100-40GB"):
        reshape(BOOT, "all-1g.20gb")  # an H100-only config


def _run(name: str, user: str | None, grants: bool, phase: str = "Running") -> PodRun:
    from devcluster.gpualloc import ContainerDevices, Grant

    notes = {"hub.jupyter.org/username": user} if user else {}
    run = PodRun(
        uid=name,
        namespace="jupyter-users",
        name=name,
        pod={"metadata": {"annotations": notes}},
        ip="127.0.0.1",
        poddir=Path("/nonexistent"),
        containers=[Container({"name": "c"})],
        phase=phase,
    )
    if grants:
        run.devices = {"c": ContainerDevices("c", (Grant("mig", 1, "MIG-x"),))}
    return run


def test_holders_are_pods_with_devices_that_have_not_finished() -> None:
    runs = [
        _run("jupyter-bob", "bob", True),
        _run("jupyter-alice", "alice", True),
        _run("cpu-only", None, False),
        _run("done", None, True, phase="Succeeded"),
        _run("train-0", None, True),
    ]
    holders = gpu_holders(runs)
    assert holders == [
        "jupyter-users/jupyter-alice (alice's server)",
        "jupyter-users/jupyter-bob (bob's server)",
        "jupyter-users/train-0",
    ]
    assert mig_refusal("local-0", "all-balanced", holders[:2]) == (
        "MIG geometry change to all-balanced refused: pods jupyter-users/jupyter-alice "
        "(alice's server), jupyter-users/jupyter-bob (bob's server) hold GPUs on node local-0; "
        "stop them or wait, then set the label again (or remove nvidia.com/mig.config.state: "
        "kubectl label node local-0 nvidia.com/mig.config.state-)"
    )


def test_gfd_labels_follow_the_geometry() -> None:
    labels = {
        f"{MIG}1g.5gb.count": "2",
        f"{MIG}1g.5gb.memory": "4864",
        f"{MIG}3g.20gb.count": "1",
        f"{MIG}3g.20gb.memory": "19968",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    }
    patch = mig_label_patch(labels, parse_devices("1xA100-40GB:mig=7x1g.5gb"))
    assert patch == {
        f"{MIG}3g.20gb.count": None,
        f"{MIG}3g.20gb.memory": None,
        f"{MIG}1g.5gb.count": "7",
        f"{MIG}1g.5gb.memory": "4864",
    }
    # cut back again: the profile's memory is the figure its label had before (GFD's, from
    # NVML: 19968 MiB), not the simulated 20 GiB; a test of the node after this saw 20480
    seven = {k: v for k, v in labels.items() if "3g.20gb" not in k}
    back = mig_label_patch(seven, parse_devices("1xA100-40GB:mig=2x1g.5gb+1x3g.20gb"), labels)
    assert back[f"{MIG}3g.20gb.memory"] == "19968"
    assert mig_label_patch(seven, parse_devices("1xA100-40GB:mig=1x3g.20gb"))[
        f"{MIG}3g.20gb.memory"
    ] == str(20 * 1024)


# --- on the cluster: the node agent's node local-0 -------------------------------------------

NS = "jupyter-users"
NODE = "local-0"


def _node(cluster: Cluster) -> dict[str, Any]:
    node: dict[str, Any] = cluster.info.admin().get(f"/api/v1/nodes/{NODE}")
    return node


def _label(cluster: Cluster, labels: dict[str, str | None]) -> None:
    """What an operator does with ``kubectl label node local-0 ... --overwrite``."""
    cluster.info.admin().patch_merge(f"/api/v1/nodes/{NODE}", {"metadata": {"labels": labels}})


def _mig_allocatable(node: dict[str, Any]) -> dict[str, str]:
    return {k: v for k, v in node["status"]["allocatable"].items() if k.startswith(MIG)}


async def _settled(cluster: Cluster, state: str, allocatable: dict[str, str]) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        node = _node(cluster)
        labels = node["metadata"].get("labels") or {}
        ok = labels.get(MIG_CONFIG_STATE_LABEL) == state and _mig_allocatable(node) == allocatable
        return node if ok else None

    return await wait_for(f"{NODE}: state {state}, MIG allocatable {allocatable}", check, 30)


async def _refusals(cluster: Cluster) -> list[str]:
    events = cluster.info.admin().get(
        "/api/v1/namespaces/default/events?fieldSelector=involvedObject.kind%3DNode,"
        f"involvedObject.name%3D{NODE},reason%3DMigConfigRefused"
    )
    return [e["message"] for e in events["items"]]


@pytest.fixture
async def boot_geometry(cluster: Cluster) -> AsyncIterator[dict[str, str]]:
    """local-0's MIG resources as nodes.yaml gives them; the label removed again afterwards
    (the node goes back to them)."""
    before = _mig_allocatable(_node(cluster))
    try:
        yield before
    finally:
        _label(cluster, {MIG_CONFIG_LABEL: None, MIG_CONFIG_STATE_LABEL: None})

        async def back() -> bool:
            return _mig_allocatable(_node(cluster)) == before

        await wait_for(f"{NODE} back to its own MIG geometry", back, 30)


def _slice_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"hub.jupyter.org/username": "alice"}},
        "spec": {
            "automountServiceAccountToken": False,
            **on_local_node(),
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "notebook",
                    "image": "python:3.11",
                    "command": ["python3", "-c", "import time; time.sleep(600)"],
                    "resources": {"limits": {f"{MIG}1g.5gb": "1"}},
                }
            ],
        },
    }


@pytest.mark.integration
async def test_a_geometry_change_waits_for_the_node_s_gpus(
    cluster: Cluster, boot_geometry: dict[str, str]
) -> None:
    assert boot_geometry == {f"{MIG}1g.5gb": "2", f"{MIG}3g.20gb": "1"}

    # No pod holds a GPU: the change is applied and the node re-advertises its resources.
    _label(cluster, {MIG_CONFIG_LABEL: "all-1g.5gb"})
    node = await _settled(cluster, "success", {f"{MIG}1g.5gb": "7"})
    assert node["status"]["capacity"][f"{MIG}1g.5gb"] == "7"
    assert node["metadata"]["labels"][f"{MIG}1g.5gb.count"] == "7"
    assert f"{MIG}3g.20gb.count" not in node["metadata"]["labels"]

    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        await v1.create_namespaced_pod(NS, _slice_pod("mig-holder"))
        try:

            async def running() -> bool:
                pod = await v1.read_namespaced_pod("mig-holder", NS)
                assert pod.status.phase != "Failed", pod.status.message
                return bool(pod.status.phase == "Running")

            await wait_for("mig-holder running on a 1g.5gb slice", running, 60)

            # A pod holds a slice: refused, with the pods and what to do; nothing changes.
            _label(cluster, {MIG_CONFIG_LABEL: "all-balanced"})
            node = await _settled(cluster, "failed", {f"{MIG}1g.5gb": "7"})
            messages = await wait_for("the refusal event", lambda: _refusals(cluster), 15)
            assert messages[-1] == (
                "MIG geometry change to all-balanced refused: pods jupyter-users/mig-holder "
                "(alice's server) hold GPUs on node local-0; stop them or wait, then set the "
                "label again (or remove nvidia.com/mig.config.state: kubectl label node local-0 "
                "nvidia.com/mig.config.state-)"
            )
            assert node["metadata"]["labels"][MIG_CONFIG_LABEL] == "all-balanced"
            # The refusal stands (no retry on the node's other updates) ...
            await asyncio.sleep(2)
            assert _mig_allocatable(_node(cluster)) == {f"{MIG}1g.5gb": "7"}
        finally:
            # Gracefully, as a server stops: the pod leaves the API only once the node agent has
            # stopped it and given its slice back. A forced delete (grace 0) takes it out of the
            # API at once, and the agent could see the label below before it let the slice go.
            await v1.delete_namespaced_pod("mig-holder", NS, grace_period_seconds=1)

        async def gone() -> bool:
            names = {p.metadata.name for p in (await v1.list_namespaced_pod(NS)).items}
            return "mig-holder" not in names

        await wait_for("mig-holder gone", gone, 60)

    # ... until the label is set again once the GPUs are free.
    assert _node(cluster)["metadata"]["labels"][MIG_CONFIG_STATE_LABEL] == "failed"
    _label(cluster, {MIG_CONFIG_STATE_LABEL: None})
    await _settled(
        cluster, "success", {f"{MIG}1g.5gb": "2", f"{MIG}2g.10gb": "1", f"{MIG}3g.20gb": "1"}
    )

"""Kueue's Topology Aware Scheduling on the dev cluster (Kueue v0.19.2, the pool h200: three
kwok nodes of 8 GPUs in two racks, flavor h200 with the Topology gpu-racks; docs/deploy.md,
*Topology Aware Scheduling*), read as the product reads it.

A Job asking for all its 8 GPUs on one node is admitted onto one node, whose hostname Kueue
writes on its pod. With every node holding a 5-GPU Job (3 free on each, 9 free in the quota),
the next 8-GPU Job waits: its Workload's QuotaReserved=False message is Kueue's TAS no-fit
words, which :func:`jupyter_gpuaas.core.kueue.topology_wait` reads as waiting for a whole node
(and the queue answer words as such); a Job of the same size short of quota is not. When one
node frees up, it is admitted there. A Job that asks for no topology never lands on h200.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import (
    HOSTNAME_LEVEL,
    Cluster,
    batch,
    core,
    create_job,
    delete_jobs,
    spread_topology_pool,
    topology_job,
    wait_admitted,
    wait_for,
    wait_queues_idle,
    workload_of,
)
from gpuaas_service.queue.workloads import topology_words
from jupyter_gpuaas.core.kueue import read_workload, topology_wait

pytestmark = pytest.mark.integration

NS = "team-a"


@pytest.fixture
async def idle_pool(cluster: Cluster) -> AsyncIterator[None]:
    async def clean() -> None:
        async with cluster.api(NS, "alice") as a, cluster.api("team-b", "carol") as b:
            await delete_jobs(a, NS)
            await delete_jobs(b, "team-b")
        async with cluster.api("jupyterhub", "gpuaas") as reader:
            await wait_queues_idle(reader)

    await clean()
    yield
    await clean()


async def _workload(api: client.ApiClient, name: str) -> dict[str, Any] | None:
    job = await batch(api).read_namespaced_job(name, NS)
    return await workload_of(api, NS, job.metadata.uid)


async def _pod_of(api: client.ApiClient, name: str) -> Any:
    pods = await core(api).list_namespaced_pod(NS, label_selector=f"job-name={name}")
    return pods.items[0] if pods.items else None


async def test_a_whole_node_job_waits_for_topology_then_gets_one_node(
    cluster: Cluster, idle_pool: None
) -> None:
    async with cluster.api(NS, "alice") as alice:
        # Alone, it is admitted onto one node, whose name Kueue writes on its pod.
        await create_job(alice, NS, topology_job("first", "alice"))
        await wait_admitted(alice, NS, ["first"])
        wl = await _workload(alice, "first")
        assert wl is not None
        (assignment,) = wl["status"]["admission"]["podSetAssignments"]
        assert assignment["flavors"]["nvidia.com/gpu"] == "h200"
        domains = assignment["topologyAssignment"]
        assert HOSTNAME_LEVEL in str(domains), domains

        async def placed() -> bool:
            pod = await _pod_of(alice, "first")
            return bool(pod and pod.spec.node_name)

        await wait_for("the first Job's pod on a node", placed, 60)
        pod = await _pod_of(alice, "first")
        assert pod.spec.node_selector[HOSTNAME_LEVEL] == pod.spec.node_name
        assert pod.spec.node_name.startswith("h200-")
        await delete_jobs(alice, NS)
        async with cluster.api("jupyterhub", "gpuaas") as reader:
            await wait_queues_idle(reader)

        # Every node holds 5 GPUs: 9 free in the quota, 3 on each node.
        await spread_topology_pool(alice)
        await create_job(alice, NS, topology_job("big", "alice"))

        async def held() -> dict[str, Any] | None:
            wl = await _workload(alice, "big")
            return wl if wl and topology_wait(read_workload(wl)) is not None else None

        await wait_for("Kueue to hold the 8-GPU Job for topology", held, 60)
        wl = await held()
        assert wl is not None
        info = read_workload(wl)
        wait = topology_wait(info)
        assert wait is not None, info.conditions
        assert wait.one_node, wait
        print(f"\nKueue's words for it: {wait.message!r}")
        assert 'topology "gpu-racks"' in wait.message
        assert topology_words(wait) == "waiting for a whole node"
        assert info.pending
        assert not info.quota_reserved

        # One node frees up: the Job is admitted onto it.
        await batch(alice).delete_namespaced_job("spread-2", NS, propagation_policy="Background")
        await wait_admitted(alice, NS, ["big"])


async def test_short_of_quota_is_not_waiting_for_a_node(cluster: Cluster, idle_pool: None) -> None:
    """Team A's 12 GPUs and team B's lent 12 hold three 8-GPU Jobs at most: the fourth waits
    for quota, which Kueue says in other words."""
    async with cluster.api(NS, "alice") as alice:
        for name in ("q-1", "q-2", "q-3"):
            await create_job(alice, NS, topology_job(name, "alice"))
        await wait_admitted(alice, NS, ["q-1", "q-2", "q-3"])
        await create_job(alice, NS, topology_job("q-4", "alice"))

        async def pending() -> dict[str, Any] | None:
            wl = await _workload(alice, "q-4")
            return wl if wl and read_workload(wl).pending_message else None

        await wait_for("the fourth Job to be told why it waits", pending, 60)
        wl = await pending()
        assert wl is not None
        info = read_workload(wl)
        assert topology_wait(info) is None, info.pending_message
        assert "quota" in info.pending_message


async def test_a_job_asking_for_no_topology_never_lands_on_the_topology_pool(
    cluster: Cluster, idle_pool: None
) -> None:
    async with cluster.api(NS, "alice") as alice:
        await create_job(alice, NS, topology_job("plain", "alice", gpus=1, level=None))

        async def told() -> dict[str, Any] | None:
            wl = await _workload(alice, "plain")
            return wl if wl and read_workload(wl).pending_message else None

        await wait_for("Kueue to say why it waits", told, 60)
        wl = await told()
        assert wl is not None
        message = read_workload(wl).pending_message
        assert 'Flavor "h200" supports only TopologyAwareScheduling' in message, message
        assert topology_wait(read_workload(wl)) is None

"""HAMi fractions against the real Kueue of the dev cluster (docs/fractions.md).

The pool: l4-hami (devcluster/nodes.yaml), 8 vGPUs, 22528 MiB and 100 % cores per team's notebook
queue (manifests/30-cluster-queues.yaml); Kueue configured with the demo catalog's resource
transformations. What the spawn form's headroom forecasts for a fraction is checked against
what Kueue then does with the pod, for a sample of random request sequences; and a pod asking
for whole GPUs never gets the fractional flavor.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from fractions import Fraction
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.config import DEMO_CATALOG
from devcluster.testing import KUEUE, Cluster, cluster_queues, core, wait_for, wait_queues_idle
from jupyter_gpuaas.core.catalog import Catalog, Offering, build_catalog, load_catalog_file
from jupyter_gpuaas.core.headroom import Fit, QueueState, compute_headroom
from jupyter_gpuaas.core.kueue import (
    read_cluster_queue,
    read_local_queue,
    read_workload,
    workload_for_pod,
)

pytestmark = pytest.mark.integration

USERS_NS = "jupyter-users"
TOTALS = ("nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores")


def _catalog() -> Catalog:
    return build_catalog([load_catalog_file(str(DEMO_CATALOG))], default_namespace=USERS_NS)


async def _clean(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        for pod in (await v1.list_namespaced_pod(USERS_NS)).items:
            try:
                await v1.delete_namespaced_pod(pod.metadata.name, USERS_NS, grace_period_seconds=0)
            except ApiException as e:
                if e.status != 404:
                    raise
    async with cluster.api("jupyterhub", "gpuaas") as reader:
        await wait_queues_idle(reader)


@pytest.fixture
async def idle_queues(cluster: Cluster) -> AsyncIterator[None]:
    await _clean(cluster)
    yield
    await _clean(cluster)


def fraction_pod(name: str, offering: Offering, queue: str) -> dict[str, Any]:
    """The pod as GPUaaSSpawner shapes it for a fraction (requests = limits, HAMi's names)."""
    gpu = {k: str(v) for k, v in offering.requests(1).items()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                "kueue.x-k8s.io/queue-name": queue,
                "kueue.x-k8s.io/priority-class": "interactive",
            },
            "annotations": dict(offering.pod_annotations),
        },
        "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": dict(offering.node_selector),
            "tolerations": [dict(t) for t in offering.tolerations],
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/base-notebook",
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "256Mi", **gpu},
                        "limits": gpu,
                    },
                }
            ],
        },
    }


async def _state(api: client.ApiClient) -> QueueState:
    objs = client.CustomObjectsApi(api)
    lqs = await objs.list_namespaced_custom_object(*KUEUE, USERS_NS, "localqueues")
    cqs = [read_cluster_queue(o) for o in await cluster_queues(api)]
    return QueueState(
        cluster_queues={cq.name: cq for cq in cqs},
        local_queues={(lq.namespace, lq.name): lq for lq in map(read_local_queue, lqs["items"])},
    )


async def _workloads(api: client.ApiClient) -> list[dict[str, Any]]:
    objs = client.CustomObjectsApi(api)
    out = await objs.list_namespaced_custom_object(*KUEUE, USERS_NS, "workloads")
    items: list[dict[str, Any]] = out["items"]
    return items


async def _decided(api: client.ApiClient, uid: str) -> dict[str, Any] | None:
    """The pod's Workload once Kueue decided: admitted, or found no room (QuotaReserved False
    with what it asked for recorded in ``status.resourceRequests``)."""
    for raw in await _workloads(api):
        wl = read_workload(raw)
        if workload_for_pod([wl], pod_uid=uid) is None:
            continue
        cond = wl.conditions.get("QuotaReserved")
        if wl.admitted or (cond is not None and cond.status is False and wl.counted):
            return raw
    return None


async def _usage_settled(api: client.ApiClient, cq: str, expected: dict[str, int]) -> bool:
    for obj in await cluster_queues(api):
        if obj["metadata"]["name"] != cq:
            continue
        info = read_cluster_queue(obj)
        return all(info.usage(("l4-hami", r)) == expected.get(r, 0) for r in TOTALS)
    return False


@pytest.mark.usefixtures("idle_queues")
@pytest.mark.parametrize("seed", [15, 16, 17])
async def test_the_forms_headroom_is_what_kueue_admits(cluster: Cluster, seed: int) -> None:
    """A sample of the property tests/unit/core/test_fractions.py checks against an oracle."""
    catalog = _catalog()
    tenant = catalog.tenants["team-b"]
    rng = random.Random(seed)
    offerings = [catalog.offerings["l4-quarter"], catalog.offerings["l4-half"]]
    checked = {"now": 0, "queue": 0}
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        used: dict[str, int] = {}
        for i in range(9):  # 8 vGPUs, 22528 MiB, 100 %: quarters and halves run out
            offering = rng.choice(offerings)
            room = compute_headroom(tenant, offering, await _state(hub), namespace=USERS_NS)
            assert room.fit in (Fit.NOW, Fit.QUEUE), room
            pod = await v1.create_namespaced_pod(
                USERS_NS, fraction_pod(f"frac-{i}", offering, tenant.local_queue)
            )
            uid: str = pod.metadata.uid
            raw = await wait_for(
                f"Kueue's decision on frac-{i}", partial(_decided, hub, uid), timeout=60
            )
            wl = read_workload(raw)
            # Kueue counted exactly what the catalog's transformations say ...
            assert {k: int(v) for k, v in wl.counted.items() if k.startswith("nvidia.com/")} == (
                offering.quota_requests(1)
            )
            # ... and admitted exactly when the form said "available now".
            assert wl.admitted is (room.fit is Fit.NOW), (room.message, raw.get("status"))
            checked[room.fit.value] += 1
            if wl.admitted:
                assert wl.assigned_flavors["nvidia.com/total-gpumem"] == "l4-hami"
                for r, v in offering.quota_requests(1).items():
                    used[r] = used.get(r, 0) + v
                await wait_for(
                    "the queue's usage",
                    lambda: _usage_settled(hub, "team-b-notebooks", used),
                    timeout=30,
                )
            else:
                await v1.delete_namespaced_pod(f"frac-{i}", USERS_NS, grace_period_seconds=0)
        assert checked["now"] >= 2, checked
        assert checked["queue"] >= 1, checked
        state = await _state(hub)
        room = compute_headroom(tenant, offerings[0], state, namespace=USERS_NS)
        free_mib = 22528 - used.get("nvidia.com/total-gpumem", 0)
        assert room.free_memory_mib == free_mib
        assert room.total_memory_mib == 22528


def whole_gpu_pod(name: str, gpus: int) -> dict[str, Any]:
    """A notebook-queue pod asking for whole GPUs and naming no pool: any flavor may do."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/base-notebook",
                    "resources": {
                        "requests": {"nvidia.com/gpu": str(gpus)},
                        "limits": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


@pytest.mark.usefixtures("idle_queues")
async def test_a_whole_gpu_pod_never_gets_the_fractional_flavor(cluster: Cluster) -> None:
    """team-a's notebooks have 2 H100s and 1 local GPU, but 8 vGPU slots in l4-hami: 3 whole
    GPUs would fit there by count alone. The flavor's taint keeps Kueue from using it."""
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        pod = await v1.create_namespaced_pod(USERS_NS, whole_gpu_pod("whole-3", 3))
        raw = await wait_for(
            "Kueue's decision", lambda: _decided(hub, pod.metadata.uid), timeout=60
        )
        wl = read_workload(raw)
        assert not wl.admitted
        cond = wl.conditions["QuotaReserved"]
        assert "untolerated taint" in cond.message, cond.message
        assert "l4-hami" in cond.message, cond.message
        assert wl.counted == {"nvidia.com/gpu": Fraction(3)}

"""Sample catalog and Kueue objects for the spawner's unit tests (the sample organisation)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.core.catalog import Catalog, CatalogSource, build_catalog
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    ClusterQueueInfo,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
)

NAMESPACE = "gpuaas-users"
GPU = "nvidia.com/gpu"
MIG1 = "nvidia.com/mig-1g.5gb"
MIG3 = "nvidia.com/mig-3g.20gb"
SHARED = "nvidia.com/gpu.shared"

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

CATALOG: dict[str, Any] = {
    "images": [
        {
            "slug": "scipy",
            "display_name": "Scientific Python",
            "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
        },
        {
            "slug": "pytorch",
            "display_name": "PyTorch",
            "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02",
        },
    ],
    "sizes": [
        {
            "slug": "small",
            "display_name": "Small",
            "cpu_guarantee": 1,
            "cpu_limit": 2,
            "mem_guarantee": "4Gi",
            "mem_limit": "8Gi",
        },
        {
            "slug": "large",
            "display_name": "Large",
            "cpu_guarantee": 4,
            "cpu_limit": 8,
            "mem_guarantee": "16Gi",
            "mem_limit": "32Gi",
        },
    ],
    "offerings": [
        {
            "slug": "h100",
            "display_name": "NVIDIA H100",
            "kind": "gpu",
            "resources": {GPU: 1},
            "flavor": "h100",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [GPU_TOLERATION],
            "gpu_model": "NVIDIA H100 80GB HBM3",
            "gpu_memory": "80Gi",
            "shm_size": "16Gi",
            "max_count": 2,
            "images": ["pytorch"],
            "sizes": ["large"],
        },
        {
            "slug": "mig-1g",
            "display_name": "A100 MIG 1g.5gb",
            "kind": "mig",
            "resources": {MIG1: 1},
            "flavor": "a100-mig",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "tolerations": [GPU_TOLERATION],
            "gpu_model": "NVIDIA A100-SXM4-40GB",
            "gpu_memory": "5Gi",
            "gpu_equivalents": "1/7",
        },
        {
            "slug": "mig-3g",
            "display_name": "A100 MIG 3g.20gb",
            "kind": "mig",
            "resources": {MIG3: 1},
            "flavor": "a100-mig",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
            "tolerations": [GPU_TOLERATION],
            "gpu_model": "NVIDIA A100-SXM4-40GB",
            "gpu_memory": "20Gi",
            "gpu_equivalents": "3/7",
        },
        {
            "slug": "shared",
            "display_name": "Shared L4",
            "kind": "shared",
            "resources": {SHARED: 1},
            "flavor": "l4-shared",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"},
            "tolerations": [GPU_TOLERATION],
            "gpu_model": "NVIDIA L4",
            "gpu_memory": "24Gi",
            "gpu_equivalents": 0.25,
        },
        {"slug": "cpu", "display_name": "CPU only", "kind": "cpu"},
    ],
    "tenants": [
        {
            "name": "team-a",
            "display_name": "Team A",
            "groups": ["team-a"],
            "local_queue": "team-a",
            "offerings": ["h100", "mig-1g", "mig-3g", "shared", "cpu"],
            "default_offering": "mig-1g",
            "max_gpu_servers_per_user": 2,
            "max_gpus_per_user": 2,
            "max_queued": 5,
        },
        {
            "name": "team-b",
            "display_name": "Team B",
            "groups": ["team-b"],
            "local_queue": "team-b",
            "offerings": ["mig-1g", "shared", "cpu"],
            "max_gpu_servers_per_user": 1,
        },
    ],
}


def catalog_data() -> dict[str, Any]:
    return copy.deepcopy(CATALOG)


GPUMEM = "nvidia.com/gpumem"
GPUCORES = "nvidia.com/gpucores"
TOTAL_GPUMEM = "nvidia.com/total-gpumem"
TOTAL_GPUCORES = "nvidia.com/total-gpucores"
HAMI_TOLERATION = {
    "key": "gpuaas.dev/hami-vgpu",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}
HAMI_TRANSFORMATIONS: list[dict[str, Any]] = [
    {
        "input": GPUMEM,
        "strategy": "Replace",
        "multiplyBy": GPU,
        "outputs": {TOTAL_GPUMEM: "1"},
    },
    {
        "input": GPUCORES,
        "strategy": "Replace",
        "multiplyBy": GPU,
        "outputs": {TOTAL_GPUCORES: "1"},
    },
]


def fraction_offering(slug: str, cap: str, cores: int, eq: str, unit: str) -> dict[str, Any]:
    """A HAMi fraction of an L4 (23034 MiB) on the flavor ``l4-hami``."""
    return {
        "slug": slug,
        "display_name": slug,
        "kind": "fraction",
        "flavor": "l4-hami",
        "node_selector": {"gpuaas.dev/pool": "l4-hami"},
        "tolerations": [HAMI_TOLERATION],
        "gpu_model": "NVIDIA L4",
        "gpu_memory": "23034Mi",
        "memory_cap": cap,
        "cores_percent": cores,
        "gpu_equivalents": eq,
        "unit": unit,
        "units": unit + "s",
        "scheduler_name": "hami-scheduler",
        "pod_annotations": {"nvidia.com/use-gputype": "L4"},
    }


def fraction_catalog_data() -> dict[str, Any]:
    """The sample catalog plus HAMi's transformations and a quarter and a half L4 for team-a."""
    data = catalog_data()
    data["resource_transformations"] = copy.deepcopy(HAMI_TRANSFORMATIONS)
    data["offerings"].insert(-1, fraction_offering("l4-quarter", "5632Mi", 25, "1/4", "quarter-L4"))
    data["offerings"].insert(-1, fraction_offering("l4-half", "11264Mi", 50, "1/2", "half-L4"))
    data["tenants"][0]["offerings"][-1:-1] = ["l4-quarter", "l4-half"]
    return data


def fraction_catalog() -> Catalog:
    return build_catalog(
        [CatalogSource("GPUaaSSpawner.", fraction_catalog_data())], default_namespace=NAMESPACE
    )


def sample_catalog() -> Catalog:
    return build_catalog(
        [CatalogSource("GPUaaSSpawner.", catalog_data())], default_namespace=NAMESPACE
    )


Quota = tuple[int, int | None, int | None]  # nominal, borrowingLimit, lendingLimit


def cluster_queue(
    name: str,
    *,
    cohort: str | None = "gpus",
    quotas: dict[tuple[str, str], Quota],
    usage: dict[tuple[str, str], int] | None = None,
    pending: int = 0,
    reclaim: str = "Never",
    api: str = "v1beta2",
    active: bool = True,
    stop_policy: str | None = None,
) -> dict[str, Any]:
    """A ClusterQueue as the API returns it; one resource group per resource."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for (flavor, resource), (nominal, borrowing, lending) in quotas.items():
        entry: dict[str, Any] = {"name": resource, "nominalQuota": str(nominal)}
        if borrowing is not None:
            entry["borrowingLimit"] = str(borrowing)
        if lending is not None:
            entry["lendingLimit"] = str(lending)
        flavors = groups.setdefault(resource, [])
        for f in flavors:
            if f["name"] == flavor:
                f["resources"].append(entry)
                break
        else:
            flavors.append({"name": flavor, "resources": [entry]})
    spec: dict[str, Any] = {
        "resourceGroups": [{"coveredResources": [r], "flavors": fl} for r, fl in groups.items()],
        "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": "Never"},
    }
    if cohort:
        spec["cohortName" if api == "v1beta2" else "cohort"] = cohort
    if stop_policy:
        spec["stopPolicy"] = stop_policy
    reservation: dict[str, list[dict[str, Any]]] = {}
    for (flavor, resource), total in (usage or {}).items():
        reservation.setdefault(flavor, []).append(
            {"name": resource, "total": str(total), "borrowed": "0"}
        )
    return {
        "apiVersion": f"kueue.x-k8s.io/{api}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
        "status": {
            "flavorsReservation": [{"name": f, "resources": r} for f, r in reservation.items()],
            "flavorsUsage": [{"name": f, "resources": r} for f, r in reservation.items()],
            "pendingWorkloads": pending,
            "reservingWorkloads": 0,
            "admittedWorkloads": 0,
            "conditions": [
                {
                    "type": "Active",
                    "status": "True" if active else "False",
                    "reason": "Ready" if active else "FlavorNotFound",
                    "message": "Can admit new workloads"
                    if active
                    else "Can't admit new workloads: references missing ResourceFlavor(s): h100",
                    "lastTransitionTime": "2026-11-30T10:00:00Z",
                }
            ],
        },
    }


def local_queue(
    name: str, cluster_queue_name: str, *, pending: int = 0, namespace: str = NAMESPACE
) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
        "status": {"pendingWorkloads": pending, "reservingWorkloads": 0, "admittedWorkloads": 0},
    }


def cohort(
    name: str, *, parent: str | None = None, quotas: dict[tuple[str, str], Quota] | None = None
) -> dict[str, Any]:
    cq = cluster_queue(name, cohort=None, quotas=quotas or {})
    spec: dict[str, Any] = {"resourceGroups": cq["spec"]["resourceGroups"]}
    if parent:
        spec["parentName"] = parent
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": spec,
    }


def team_a_notebooks(**usage_and_more: Any) -> dict[str, Any]:
    """team-a's notebook queue of the sample organisation: 2 H100, 7+2 MIG, 16 shared slots."""
    quotas: dict[tuple[str, str], Quota] = {
        ("h100", GPU): (2, 0, None),
        ("a100-mig", MIG1): (7, 0, None),
        ("a100-mig", MIG3): (2, 0, None),
        ("l4-shared", SHARED): (16, 0, None),
    }
    quotas.update(usage_and_more.pop("quotas", {}))
    return cluster_queue("team-a-notebooks", quotas=quotas, **usage_and_more)


def state(
    cqs: list[dict[str, Any]],
    lqs: list[dict[str, Any]] | None = None,
    cohorts: list[dict[str, Any]] | None = None,
    *,
    synced: bool = True,
) -> QueueState:
    infos: dict[str, ClusterQueueInfo] = {}
    for obj in cqs:
        info = read_cluster_queue(obj)
        infos[info.name] = info
    if lqs is None:
        lqs = [local_queue("team-a", "team-a-notebooks"), local_queue("team-b", "team-b-notebooks")]
    local = {(lq.namespace, lq.name): lq for lq in map(read_local_queue, lqs)}
    return QueueState(
        cluster_queues=infos,
        cohorts={c.name: c for c in map(read_cohort, cohorts or [])},
        local_queues=local,
        synced=synced,
    )


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


class FakeUser:
    """Just what GPUaaSSpawner reads of JupyterHub's User."""

    def __init__(self, name: str, groups: list[str]) -> None:
        self.name = name
        self.id = 1
        self.url = f"/user/{name}/"
        self.groups = [_Named(g) for g in groups]
        self.spawners: dict[str, Any] = {}


def make_spawner(user: FakeUser, view: Any, **config: Any) -> Any:
    """A GPUaaSSpawner on the sample catalog with an injected Kueue view (no cluster)."""
    from gpuaas_spawner.spawner import GPUaaSSpawner

    data = catalog_data()
    spawner = GPUaaSSpawner(
        _mock=True,
        user=user,
        namespace=NAMESPACE,
        offerings=data["offerings"],
        tenants=data["tenants"],
        images=data["images"],
        sizes=data["sizes"],
        kueue_view=view,
        **config,
    )
    user.spawners[""] = spawner
    return spawner


KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: unit
clusters:
- name: unit
  cluster: {server: "https://127.0.0.1:9", insecure-skip-tls-verify: true}
users:
- name: unit
  user: {token: unit-test-not-a-cluster}
contexts:
- name: unit
  context: {cluster: unit, user: unit}
"""
"""KubeSpawner loads a kube config when constructed; this one names a closed loopback port.
The unit tests never call the API (the Kueue view is injected)."""


class FakePodReflector:
    """Stands in for KubeSpawner's pod reflector (our collaborator's cache, not a cluster)."""

    def __init__(self) -> None:
        self.pods: dict[str, Any] = {}


def install_pod_reflector(spawner: Any) -> FakePodReflector:
    reflector = FakePodReflector()
    spawner.__class__.reflectors[spawner._get_reflector_key("pods")] = reflector
    return reflector


@pytest.fixture(name="kubeconfig")
def kubeconfig_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kube config for KubeSpawner's constructor (see KUBECONFIG)."""
    from kubernetes_asyncio.config import kube_config

    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(path))
    monkeypatch.setattr(kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))  # read at import

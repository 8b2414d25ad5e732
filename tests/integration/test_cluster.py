"""The dev cluster comes up whole, twice is harmless, and its GPU nodes show their resources."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from devcluster import cluster as devcluster
from devcluster.cluster import STOP_ORDER
from devcluster.config import read_versions
from devcluster.kube import kubectl
from devcluster.nodes import load_nodes
from devcluster.testing import Cluster, core

pytestmark = pytest.mark.integration


def test_all_components_run(cluster: Cluster) -> None:
    st = devcluster.status(cluster.info.settings)
    assert st["running"], devcluster.format_status(st)
    assert {c["name"] for c in st["components"]} == set(STOP_ORDER)
    assert all(c["alive"] for c in st["components"])


def test_up_twice_is_harmless_and_brings_the_manifests_up_to_date(cluster: Cluster) -> None:
    label = ["get", "clusterqueue", "team-a-notebooks", "-o", "jsonpath={.metadata.labels}"]
    drift = ["label", "--overwrite", "clusterqueue", "team-a-notebooks", "gpuaas.dev/kind=drifted"]
    res = kubectl(cluster.info.kubectl, cluster.info.kubeconfig, drift)
    assert res.returncode == 0, res.stderr
    again = devcluster.up(cluster.info.settings)
    assert not again.started
    assert [p.pid for p in again.processes] == [p.pid for p in cluster.info.processes]
    res = kubectl(cluster.info.kubectl, cluster.info.kubeconfig, label)
    assert '"gpuaas.dev/kind":"notebooks"' in res.stdout, res.stdout


def test_kubectl_works_with_the_written_kubeconfig(cluster: Cluster) -> None:
    res = kubectl(cluster.info.kubectl, cluster.info.kubeconfig, ["get", "nodes", "-o", "name"])
    assert res.returncode == 0, res.stderr
    assert "node/h100-0" in res.stdout.split()
    version = kubectl(cluster.info.kubectl, cluster.info.kubeconfig, ["version", "-o", "json"])
    pinned = read_versions()["KUBERNETES_VERSION"]
    assert f'"gitVersion": "{pinned}"' in version.stdout, version.stdout


async def test_gpu_nodes_show_their_resources(cluster: Cluster) -> None:
    expected = {n.name: n for n in load_nodes()}
    async with cluster.api("jupyterhub", "gpuaas") as api:
        nodes = (await core(api).list_node()).items
    by_name = {n.metadata.name: n for n in nodes}
    assert set(by_name) == set(expected)
    for name, spec in expected.items():
        node = by_name[name]
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "True", f"{name}: {ready}"
        for resource, qty in spec.capacity.items():
            assert node.status.allocatable.get(resource) == qty, (name, resource)
        for key, value in spec.labels.items():
            assert node.metadata.labels.get(key) == value, (name, key)
    assert by_name["h100-0"].status.allocatable["nvidia.com/gpu"] == "8"
    assert by_name["a100-mig-0"].status.allocatable["nvidia.com/mig-1g.5gb"] == "28"
    assert by_name["a100-mig-0"].status.allocatable["nvidia.com/mig-3g.20gb"] == "8"
    assert by_name["a100-mig-0"].metadata.labels["nvidia.com/mig.strategy"] == "mixed"
    shared = by_name["l4-shared-0"]
    assert shared.status.allocatable["nvidia.com/gpu.shared"] == "16"
    assert shared.metadata.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert shared.metadata.labels["nvidia.com/gpu.replicas"] == "4"
    local = by_name["local-0"]
    assert local.status.node_info.kubelet_version == "devcluster-nodeagent"
    assert any(t.key == "gpuaas.dev/local-node" for t in local.spec.taints)


async def test_service_accounts_are_least_privilege(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "gpuaas") as api:
        with pytest.raises(client.ApiException) as err:
            await core(api).delete_namespaced_pod("anything", "jupyter-users")
        assert err.value.status == 403
    async with cluster.api("jupyterhub", "hub") as api:
        with pytest.raises(client.ApiException) as err:
            await core(api).list_namespaced_secret("kube-system")
        assert err.value.status == 403


def test_running_leaves_a_cluster_it_did_not_start_running(cluster: Cluster) -> None:
    # `running` is what the fixtures and benchmarks use; `down` only for a cluster it started.
    with devcluster.running(cluster.info.settings, log=lambda _m: None) as info:
        assert not info.started
    assert devcluster.status(cluster.info.settings)["running"]

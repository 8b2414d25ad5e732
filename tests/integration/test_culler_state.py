"""The culler's hand-off records in their ConfigMap, as the gpuaas ServiceAccount, on the real
API server: created on first write, replaced after, and that one ConfigMap is all it may touch."""

from __future__ import annotations

import contextlib

import pytest
from kubernetes_asyncio import client

from devcluster.kube import KubeError
from devcluster.testing import Cluster
from gpuaas_service.clients.kubernetes import KubeClient
from gpuaas_service.reclaim.handoffs import HANDOFFS_CONFIGMAP

pytestmark = pytest.mark.integration

NS = "jupyter-users"


async def test_the_handoff_records_live_in_one_configmap_it_alone_may_update(
    cluster: Cluster,
) -> None:
    admin = cluster.info.admin()
    path = f"/api/v1/namespaces/{NS}/configmaps/{HANDOFFS_CONFIGMAP}"

    def remove() -> None:
        with contextlib.suppress(KubeError):  # 404: not there
            admin.request("DELETE", path)

    remove()
    try:
        async with cluster.api("jupyterhub", "gpuaas") as api:
            kube = KubeClient(api)
            assert await kube.read_state(NS, HANDOFFS_CONFIGMAP) is None
            await kube.write_state(NS, HANDOFFS_CONFIGMAP, '{"version": 1, "handoffs": []}')
            assert await kube.read_state(NS, HANDOFFS_CONFIGMAP) == (
                '{"version": 1, "handoffs": []}'
            )
            await kube.write_state(NS, HANDOFFS_CONFIGMAP, "second")
            assert await kube.read_state(NS, HANDOFFS_CONFIGMAP) == "second"

            core = client.CoreV1Api(api)
            for call in (
                core.read_namespaced_config_map("kube-root-ca.crt", NS),
                core.list_namespaced_config_map(NS),
                core.delete_namespaced_config_map(HANDOFFS_CONFIGMAP, NS),
            ):
                with pytest.raises(client.ApiException) as err:
                    await call
                assert err.value.status == 403
    finally:
        remove()

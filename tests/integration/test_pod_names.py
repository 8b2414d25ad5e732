"""A pod name freed by the cluster's kubelets is free for a new pod: nothing of the old pod's end
lands on the new one. Pods here are not Kueue's (no queue label): what is tested is
the kubelets' last step alone, kwok's (kwok-finisher) and the node agent's."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.testing import Cluster, core, still_running, wait_for

pytestmark = pytest.mark.integration

NS = "jupyter-users"
HOLD = "gpuaas.dev/test-hold"
# kwok: about 1 round in 60 hit the stale name-only delete before the fix; the node agent's
# rounds start real processes, so fewer.
ROUNDS = {"h100": 100, "local": 15}
JSON_PATCH = "application/json-patch+json"


def held_pod(name: str, pool: str) -> dict[str, Any]:
    """A pod that a finalizer of ours holds (as Kueue's would) on a node of ``pool``."""
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "nodeSelector": {"gpuaas.dev/pool": pool},
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "command": ["sleep", "3600"],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
    }
    if pool == "local":
        spec["tolerations"] = [{"key": "gpuaas.dev/local-node", "operator": "Exists"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "finalizers": [HOLD]},
        "spec": spec,
    }


async def release(v1: Any, name: str, uid: str) -> None:
    """Drop our finalizer from pod ``uid`` (the patch tests the uid), then touch it once more,
    as a controller that also updates a status or label would: two events for the end."""
    test_uid = {"op": "test", "path": "/metadata/uid", "value": uid}
    await v1.patch_namespaced_pod(
        name,
        NS,
        [test_uid, {"op": "remove", "path": "/metadata/finalizers"}],
        _content_type=JSON_PATCH,
    )
    try:
        await v1.patch_namespaced_pod(
            name,
            NS,
            [test_uid, {"op": "add", "path": "/metadata/labels", "value": {"released": "yes"}}],
            _content_type=JSON_PATCH,
        )
    except ApiException as e:
        if e.status not in (404, 422):  # already removed, or the name holds a new pod
            raise


@pytest.mark.parametrize("pool", ["h100", "local"])
async def test_a_name_freed_by_the_kubelet_is_free_for_a_new_pod(
    cluster: Cluster, pool: str
) -> None:
    name = f"names-{pool}"
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        pod = await v1.create_namespaced_pod(NS, held_pod(name, pool))
        uid = pod.metadata.uid
        rounds = ROUNDS[pool]
        try:
            for i in range(rounds + 1):
                try:
                    await wait_for(
                        f"{name} Running", partial(still_running, v1, NS, name, uid), 60, 0.05
                    )
                except AssertionError as e:
                    raise AssertionError(f"round {i} of {rounds}: {e}") from None
                if i == rounds:
                    break
                await v1.delete_namespaced_pod(name, NS, grace_period_seconds=1)

                async def terminal() -> bool:
                    p = await v1.read_namespaced_pod(name, NS)
                    return bool(p.status.phase in ("Succeeded", "Failed"))

                await wait_for(f"{name} stopped by its kubelet", terminal, 30, 0.02)
                await release(v1, name, uid)
                while True:  # create the moment the name is free, as a quick restart does
                    try:
                        uid = (
                            await v1.create_namespaced_pod(NS, held_pod(name, pool))
                        ).metadata.uid
                        break
                    except ApiException as e:
                        if e.status != 409:
                            raise
                    await asyncio.sleep(0.005)
        finally:
            await _clear(v1, name)


async def _clear(v1: Any, name: str) -> None:
    try:
        pod = await v1.read_namespaced_pod(name, NS)
        await release(v1, name, pod.metadata.uid)
        await v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)
    except ApiException as e:
        if e.status not in (404, 422):
            raise

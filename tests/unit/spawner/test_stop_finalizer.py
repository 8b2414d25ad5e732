"""A stopped pod that Kueue's finalizer holds: KubeSpawner's wait for it to go ends
in JupyterHub's ``exponential_backoff`` timeout, an ``asyncio.TimeoutError`` (not the builtin
``TimeoutError`` before Python 3.11). The spawner then removes the finalizer and waits again;
caught as the builtin only, on 3.10 the stop failed with the pod left in place."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import (
    NAMESPACE,
    FakePodReflector,
    FakeUser,
    install_pod_reflector,
    make_spawner,
)

POD_KEY = f"{NAMESPACE}/jupyter-alice"
KUEUE_FINALIZER = "kueue.x-k8s.io/managed"


def deleted_pod() -> dict[str, Any]:
    """Deleted, but held by Kueue's finalizer."""
    return {
        "metadata": {
            "name": "jupyter-alice",
            "namespace": NAMESPACE,
            "uid": "pod-uid-1",
            "finalizers": [KUEUE_FINALIZER],
            "deletionTimestamp": "2026-11-30T10:05:00Z",
        },
        "spec": {"containers": [{"name": "notebook"}]},
        "status": {"phase": "Running"},
    }


class PodAPI:
    """Deletes are accepted; the pod goes once its finalizer is patched away, as it would."""

    def __init__(self, reflector: FakePodReflector) -> None:
        self.reflector = reflector
        self.deletes: list[str] = []
        self.patches: list[Any] = []

    async def delete_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        self.deletes.append(name)
        return {}

    async def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        self.patches.append(body)
        self.reflector.pods.pop(f"{namespace}/{name}", None)
        return {}


@pytest.fixture
async def spawner(kubeconfig: None) -> AsyncIterator[Any]:
    sp = make_spawner(FakeUser("alice", ["team-a"]), StaticKueueView())

    async def no_watch(replace: bool = False) -> None:
        return None

    sp._start_watching_pods = no_watch
    yield sp
    from gpuaas_spawner.spawner import GPUaaSSpawner

    GPUaaSSpawner.reflectors.clear()


async def test_a_pod_held_by_kueues_finalizer_is_released_after_the_wait(spawner: Any) -> None:
    reflector = install_pod_reflector(spawner)
    reflector.pods[POD_KEY] = deleted_pod()
    api = PodAPI(reflector)
    spawner.api = api
    spawner.start_timeout = 0  # KubeSpawner's wait for the pod to go: over at its first look
    spawner.stop_timeout = 5.0
    await spawner._stop_pod(True)
    assert api.deletes == ["jupyter-alice"]
    assert [op["op"] for op in api.patches[0]] == ["test", "remove"]
    assert api.patches[0][1]["path"] == "/metadata/finalizers/0"
    assert POD_KEY not in reflector.pods

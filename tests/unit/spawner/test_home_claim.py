"""A home claim deleted behind the hub's back (or a new cluster under a kept hub): the spawner
makes it again instead of waiting for it, and says so."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import FakeUser, make_spawner


class ClaimAPI:
    """The hub's CoreV1Api as far as reading one claim goes: found, or a status."""

    def __init__(self, status: int = 0) -> None:
        self.status = status
        self.reads: list[tuple[str, str]] = []

    async def read_namespaced_persistent_volume_claim(self, name: str, namespace: str) -> Any:
        from kubernetes_asyncio.client import V1PersistentVolumeClaim
        from kubernetes_asyncio.client.rest import ApiException

        self.reads.append((name, namespace))
        if self.status:
            raise ApiException(status=self.status, reason="Not Found")
        return V1PersistentVolumeClaim()


def _spawner(api: ClaimAPI, *, ensure: bool = True, saved: bool = True) -> Any:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), StaticKueueView())
    spawner.storage_pvc_ensure = ensure
    state = {"kubespawner_version": "7.0.0", "pod_name": "jupyter-alice"}
    spawner.load_state({**state, "pvc_name": "claim-alice"} if saved else state)
    spawner.api = api
    return spawner


async def test_a_saved_claim_that_is_gone_is_made_again(
    kubeconfig: None, caplog: pytest.LogCaptureFixture
) -> None:
    api = ClaimAPI(status=404)
    spawner = _spawner(api)
    assert spawner._pvc_exists  # KubeSpawner's word from the saved state: it would not create it
    await spawner._recreate_a_missing_home_claim()
    assert api.reads == [("claim-alice", spawner.namespace)]
    assert not spawner._pvc_exists  # so KubeSpawner's _start creates it, under the same name
    assert spawner.pvc_name == "claim-alice"
    assert spawner._gpuaas_home_recreated
    assert "event=home-claim-missing user=alice server= claim=claim-alice" in caplog.text


@pytest.mark.parametrize(
    ("status", "ensure", "saved", "reads"),
    [
        (0, True, True, 1),  # it is there: nothing to do
        (403, True, True, 1),  # cannot tell: left to KubeSpawner, as before
        (404, False, True, 0),  # the hub manages no claims
        (404, True, False, 0),  # nothing saved: KubeSpawner creates it anyway
    ],
)
async def test_a_claim_that_is_there_or_cannot_be_read_is_left_alone(
    kubeconfig: None, status: int, ensure: bool, saved: bool, reads: int
) -> None:
    api = ClaimAPI(status=status)
    spawner = _spawner(api, ensure=ensure, saved=saved)
    before = spawner._pvc_exists
    await spawner._recreate_a_missing_home_claim()
    assert len(api.reads) == reads
    assert spawner._pvc_exists == before
    assert not spawner._gpuaas_home_recreated

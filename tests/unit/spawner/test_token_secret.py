"""A stop whose delete of the server's token Secret gets no answer (the API server hangs) goes
on trying in the background, until the Secret is gone or the server starts again: a create sent
while the API server hung may land after the stop, and would leave the token in a Secret that no
pod owns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gpuaas_spawner import spawner as spawner_module
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import FakeUser, make_spawner


class SecretAPI:
    """Deletes that time out (``hangs`` times), then find the Secret (or not)."""

    def __init__(self, hangs: int, there: bool = True) -> None:
        self.hangs = hangs
        self.there = there
        self.deletes = 0

    async def delete_namespaced_secret(self, name: str, namespace: str) -> Any:
        from kubernetes_asyncio.client.rest import ApiException

        self.deletes += 1
        if self.deletes <= self.hangs:
            # what asyncio.wait_for raises for a call that hangs: before Python 3.11 it is not
            # the builtin TimeoutError
            raise asyncio.TimeoutError
        if not self.there:
            raise ApiException(status=404, reason="Not Found")
        self.there = False
        return {}


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spawner_module, "TOKEN_SECRET_RETRY_SECONDS", (0.01,) * 5)


def _spawner(api: SecretAPI) -> Any:
    spawner = make_spawner(FakeUser("alice", ["team-a"]), StaticKueueView())
    spawner.api = api
    return spawner


async def test_a_delete_that_hangs_is_tried_again_until_the_secret_is_gone(
    kubeconfig: None, quick: None
) -> None:
    api = SecretAPI(hangs=2)
    spawner = _spawner(api)
    await spawner._delete_token_secret()
    assert api.there  # the stop's own try got no answer
    await asyncio.wait_for(spawner._gpuaas_secret_retry, 5)
    assert not api.there
    assert api.deletes == 3


async def test_a_new_start_ends_the_tries(kubeconfig: None, quick: None) -> None:
    api = SecretAPI(hangs=1)
    spawner = _spawner(api)
    await spawner._delete_token_secret()
    spawner._gpuaas_starts += 1  # the server starts again: the name is its new Secret's
    await asyncio.wait_for(spawner._gpuaas_secret_retry, 5)
    assert api.there
    assert api.deletes == 1


async def test_a_secret_already_gone_needs_no_second_try(kubeconfig: None, quick: None) -> None:
    api = SecretAPI(hangs=0, there=False)
    spawner = _spawner(api)
    await spawner._delete_token_secret()
    assert spawner._gpuaas_secret_retry is None
    assert api.deletes == 1

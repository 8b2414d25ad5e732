"""Failures a hub restart would not mend end a spawn cleanly, not as hub errors."""

from __future__ import annotations

import asyncio
import json
import socket
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client.rest import ApiException

from gpuaas_spawner import hubcompat
from gpuaas_spawner.failures import (
    CLUSTER_DOWN,
    KUEUE_DOWN,
    Failure,
    classify_start_error,
    cluster_not_answering,
)
from gpuaas_spawner.hubcompat import SpawnException
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import (
    FakeUser,
    install_pod_reflector,
    local_queue,
    make_spawner,
    team_a_notebooks,
)

# What kube-apiserver answers when Kueue's pod webhook (failurePolicy: Fail) does not answer.
WEBHOOK_DOWN_BODY = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": 'Internal error occurred: failed calling webhook "mpod.kb.io": failed to '
        'call webhook: Post "https://kueue-webhook-service.kueue-system.svc:443/mutate--v1-pod'
        '?timeout=10s": dial tcp 127.0.0.1:9443: connect: connection refused',
        "reason": "InternalError",
        "code": 500,
    }
)


def _api_error(status: int, body: str = "", reason: str = "") -> ApiException:
    e = ApiException(status=status, reason=reason)
    e.body = body.encode()  # as kubernetes_asyncio gives it
    return e


async def _refused_connection() -> BaseException:
    """A real connection to a closed loopback port, as aiohttp reports it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends
    async with aiohttp.ClientSession() as session:
        try:
            await session.get(f"http://127.0.0.1:{port}/")
        except aiohttp.ClientError as e:
            return e
    raise AssertionError("a closed port answered")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (_api_error(500, WEBHOOK_DOWN_BODY), Failure("kueue_unavailable", KUEUE_DOWN)),
        (
            _api_error(503, reason="Service Unavailable"),
            Failure("cluster_unavailable", CLUSTER_DOWN),
        ),
        (_api_error(504), Failure("cluster_unavailable", CLUSTER_DOWN)),
        (
            ConnectionRefusedError(111, "Connection refused"),
            Failure("cluster_unavailable", CLUSTER_DOWN),
        ),
        (
            TimeoutError("Could not create pod jupyter-users/jupyter-alice"),  # KubeSpawner's
            Failure("cluster_unavailable", CLUSTER_DOWN),
        ),
        # asyncio.wait_for around a request to a paused API server: a bare TimeoutError, which
        # JupyterHub would take for its own start timeout if it left start()
        (TimeoutError(), Failure("cluster_unavailable", CLUSTER_DOWN)),
        # the same on Python 3.10, where wait_for's is asyncio's own TimeoutError
        (asyncio.TimeoutError(), Failure("cluster_unavailable", CLUSTER_DOWN)),
        (
            aiohttp.ServerDisconnectedError(),  # a dropped connection, not an OSError
            Failure("cluster_unavailable", CLUSTER_DOWN),
        ),
        # errors stay errors: the hub's own fault or an admin's, which they must see
        (_api_error(403, '{"message": "pods is forbidden"}'), None),
        (_api_error(422, '{"message": "Pod is invalid"}'), None),
        (_api_error(500, '{"message": "etcdserver: request timed out"}'), None),
        (RuntimeError("a bug"), None),
        (ValueError("a bad manifest"), None),
    ],
)
def test_classify_start_error(error: BaseException, expected: Failure | None) -> None:
    assert classify_start_error(error) == expected


async def test_a_refused_connection_is_the_cluster_being_down() -> None:
    error = await _refused_connection()
    assert classify_start_error(error) == Failure("cluster_unavailable", CLUSTER_DOWN)


@pytest.fixture
async def spawner(kubeconfig: None) -> Any:
    """A spawner whose Kubernetes API is a closed loopback port (the unit kubeconfig)."""
    view = StaticKueueView(
        cluster_queues=[team_a_notebooks()],
        local_queues=[local_queue("team-a", "team-a-notebooks")],
    )
    sp = make_spawner(FakeUser("alice", ["team-a"]), view, queue_poll_interval=0.01)
    sp.api_token = "tok-0123456789abcdef"
    install_pod_reflector(sp)

    async def no_watch(replace: bool = False) -> None:
        return None

    async def kubespawner_start() -> str:
        # KubeSpawner's _start creates the pod through our override, which writes the token
        # Secret first: the first call that reaches the API server
        await sp._ensure_token_secret(5)
        return "http://pod:8888"

    sp._start_watching_pods = no_watch
    sp._start = kubespawner_start
    yield sp
    type(sp).reflectors.pop(sp._get_reflector_key("pods"), None)


@pytest.mark.parametrize("hub55", [False, True])
async def test_an_unreachable_api_server_ends_the_spawn_cleanly(
    spawner: Any, monkeypatch: pytest.MonkeyPatch, hub55: bool
) -> None:
    monkeypatch.setattr(hubcompat, "COUNTS_EVERY_FAILURE", hub55)
    handler = SimpleNamespace(settings={"failure_count": 0})
    spawner.handler = handler
    spawner._spawn_future = asyncio.get_running_loop().create_future()  # spawn_single_user's
    await spawner._run_apply_user_options({"offering": "h100"})
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(spawner.start(), 30)
    assert (info.value.status_code, info.value.reason) == (503, "cluster_unavailable")
    assert info.value.jupyterhub_message == CLUSTER_DOWN
    # JupyterHub 5.5 adds one for the failed spawn next: it is taken off first
    assert handler.settings["failure_count"] == (-1 if hub55 else 0)


@pytest.mark.parametrize(
    ("error", "answering"),
    [
        (TimeoutError(), False),
        (asyncio.TimeoutError(), False),  # not the builtin before Python 3.11
        (ConnectionResetError(104, "reset"), False),
        (_api_error(503), False),
        (_api_error(409, '{"reason": "AlreadyExists"}'), True),
        (_api_error(403), True),
        (RuntimeError("a bug"), True),
    ],
)
def test_cluster_not_answering(error: BaseException, answering: bool) -> None:
    assert cluster_not_answering(error) is not answering


class PausedThenBack:
    """A CoreV1Api whose first ``hung`` requests never answer (a paused API server: the kernel
    accepts the connection, nobody reads it), then answers as usual."""

    def __init__(self, hung: int) -> None:
        self.hung = hung
        self.calls: list[str] = []

    async def _answer(self, what: str) -> dict[str, Any]:
        self.calls.append(what)
        if len(self.calls) <= self.hung:
            await asyncio.Event().wait()  # never set: the request hangs until its timeout
        return {"kind": what}

    async def create_namespaced_secret(self, namespace: str, body: Any) -> dict[str, Any]:
        return await self._answer("secret")

    async def create_namespaced_pod(self, namespace: str, body: Any) -> dict[str, Any]:
        return await self._answer("pod")


async def test_a_paused_api_server_is_retried_not_raised(spawner: Any) -> None:
    """Each unanswered step is "not yet" for KubeSpawner's backoff (which retries within
    k8s_api_request_retry_timeout), not a TimeoutError out of start()."""
    from kubernetes_asyncio.client import V1ObjectMeta, V1Pod

    api = PausedThenBack(hung=2)
    spawner.api = api
    pod = V1Pod(metadata=V1ObjectMeta(name=spawner.pod_name, namespace=spawner.namespace))
    first = await spawner._make_create_pod_request(pod, 0.05)  # the Secret's request hangs
    second = await spawner._make_create_pod_request(pod, 0.05)  # Secret again: still hangs
    third = await spawner._make_create_pod_request(pod, 0.05)  # back: Secret, then the pod
    assert (first, second, third) == (False, False, True)
    assert api.calls == ["secret", "secret", "secret", "pod"]


async def test_an_answer_that_refuses_is_not_retried(spawner: Any) -> None:
    class Refusing:
        async def create_namespaced_secret(self, namespace: str, body: Any) -> None:
            raise _api_error(403, '{"message": "secrets is forbidden"}')

    from kubernetes_asyncio.client import V1ObjectMeta, V1Pod

    spawner.api = Refusing()
    pod = V1Pod(metadata=V1ObjectMeta(name=spawner.pod_name, namespace=spawner.namespace))
    with pytest.raises(ApiException) as info:
        await spawner._make_create_pod_request(pod, 0.05)
    assert info.value.status == 403

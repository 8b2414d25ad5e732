"""Issue 13 (hardening), the service's side, at the level where each failure happens: the
trusted GPU signal and the policy field for it (13.2), a real tornado app with the service's
handlers for the web limits and answers (13.2-13.4, 13.10), real sockets for a webhook that
never answers (13.5), the policy file as it changes on disk (13.9), the bounded store (13.11)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.web import Application, RequestHandler

from gpuaas_service.clients.hub import HubClient
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.idleness import State, judge
from gpuaas_service.reclaim.loop import _Seen
from gpuaas_service.reclaim.notify import Notifier
from gpuaas_service.reclaim.policy import (
    MAX_NOTIFY_TIMEOUT,
    Notify,
    PolicyError,
    PolicyFile,
    load_policy,
)
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.limits import RateLimit
from tests.unit.service.test_decide import bench
from tests.unit.service.test_loop import POLICY, T0, World, busy, idle

# --------------------------------------------------------------------------- 13.2


def test_busy_signal_gpu_trusts_the_pod_figure_over_the_report() -> None:
    report = World().store.record("alice", "", busy(T0), T0)  # a kernel "busy" forever
    now = T0 + timedelta(hours=2)
    args: dict[str, Any] = dict(
        kind="mig",
        started_at=T0,
        now=now,
        stale_after=timedelta(minutes=5),
        busy_utilization_percent=10,
    )
    assert judge(report, **args, pod_utilization=0.0).state is State.UNKNOWN  # stale: as before
    fresh = World().store.record("alice", "", busy(now), now)
    assert judge(fresh, **args, pod_utilization=0.0).state is State.BUSY  # reports trusted
    verdict = judge(fresh, **args, pod_utilization=0.0, trust_pod_utilization=True)
    assert verdict.state is State.IDLE
    assert verdict.idle_for(now) == timedelta(hours=2)  # GPU unused since the start
    assert "busy_signal: gpu" in verdict.reason
    assert judge(fresh, **args, pod_utilization=55.0, trust_pod_utilization=True).state is (
        State.BUSY
    )


def test_busy_signal_is_a_policy_field_with_a_path() -> None:
    first: dict[str, Any] = json.loads(json.dumps(POLICY["policies"]))[0]
    p = load_policy({**POLICY, "policies": [{**first, "busy_signal": "gpu"}]})
    assert p.policies[0].busy_signal == "gpu"
    with pytest.raises(PolicyError) as e:
        load_policy({**POLICY, "policies": [{**first, "busy_signal": "gpus"}]})
    assert [x.path for x in e.value.errors] == ["policies[0].busy_signal"]
    assert "did you mean 'gpu'" in e.value.errors[0].message


@pytest.mark.parametrize("path", ["culler/examples/policy.yaml", "demo/policy.yaml"])
def test_the_shipped_policies_set_max_age(path: str) -> None:
    from gpuaas_service.reclaim.policy import load_policy_file

    root = Path(__file__).resolve().parents[3]
    ps = load_policy_file(str(root / path))
    assert all(
        p.max_age is not None
        for p in ps.policies
        if "gpu" in p.match.kinds or "mig" in p.match.kinds or not p.match.kinds
    )


# --------------------------------------------------------------------------- the web app


class Served:
    def __init__(self, world: World, app: Application, port: int) -> None:
        self.world, self.app, self.port = world, app, port
        self.client = AsyncHTTPClient(force_instance=True)

    async def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        token: str = "server-alice",
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        req = HTTPRequest(
            f"http://127.0.0.1:{self.port}/services/gpuaas/{path}",
            method=method,
            body=body,
            allow_nonstandard_methods=True,
            headers={"Authorization": f"token {token}", **(headers or {})},
        )
        try:
            resp = await self.client.fetch(req)
        except HTTPClientError as e:
            if e.response is None:
                return e.code, None
            text = e.response.body
            return e.code, json.loads(text) if text.startswith(b"{") else text
        return resp.code, json.loads(resp.body) if resp.body.startswith(b"{") else resp.body


class FakeHubAuth:
    """Identifies callers as HubAuth does (our collaborator's interface): server tokens."""

    def __init__(self) -> None:
        self.models = {
            f"server-{u}": {
                "kind": "user",
                "name": u,
                "groups": [],
                "scopes": [f"access:servers!server={u}/", "access:services!service=gpuaas"],
            }
            for u in ("alice", "bob")
        }

    async def get_user(self, handler: Any, sync: bool = True) -> Any:
        auth = handler.request.headers.get("Authorization", "")
        return self.models.get(auth.partition(" ")[2])


class FakeIndex:
    rebuilds = 0
    polled_queues = ()

    class view:
        @staticmethod
        def queue_state() -> Any:
            return type("S", (), {"synced": True})()

    def answer(self, user: str, groups: Any) -> dict[str, Any]:
        return {"user": user, "items": []}


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    w = World()
    auth = FakeHubAuth()
    app = make_app(
        ServiceContext(
            index=cast(Any, FakeIndex()),
            loop=w.loop,
            hub_auth=auth,
            operator_token="op-secret",
            limits={"activity": RateLimit(6 / 60, 3), "queue": RateLimit(5, 5)},
        )
    )
    from gpuaas_service.web.base import HubJSONHandler

    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    sock, port = _socket()
    server = HTTPServer(app, max_body_size=64 * 1024)
    server.add_sockets([sock])
    yield Served(w, app, port)
    server.stop()


def _socket() -> tuple[socket.socket, int]:
    from tornado.netutil import bind_sockets

    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    return sock, sock.getsockname()[1]


async def test_a_bad_report_is_a_400_with_field_paths(served: Served) -> None:
    served.world.loop.clock = lambda: T0
    body = json.dumps(idle(T0 + timedelta(hours=1))).encode()
    code, answer = await served.call("POST", "api/activity", body)
    assert code == 400
    assert {e["path"] for e in answer["errors"]} == {
        "sampled_at",
        "kernels[0].last_activity",
        "idle_since",
    }
    code, answer = await served.call("POST", "api/activity", b'{"gpu_memory": NaN}')
    assert code == 400
    assert "NaN" in answer["message"]


async def test_bodies_are_limited_before_they_are_read(served: Served) -> None:
    code, _ = await served.call("POST", "api/activity", b"{" + b" " * (100 * 1024) + b"}")
    assert code in (400, 413, 599)  # refused from its Content-Length; the connection closed
    assert served.world.store.rejected == 0  # never parsed


async def test_reports_are_rate_limited_per_server(served: Served) -> None:
    served.world.loop.clock = lambda: T0
    body = json.dumps(idle(T0)).encode()
    codes = [(await served.call("POST", "api/activity", body))[0] for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    code, _ = await served.call("POST", "api/activity", body, token="server-bob")
    assert code == 200  # bob's server has its own share


async def test_a_busy_report_while_the_stop_is_under_way_is_a_409(served: Served) -> None:
    served.world.loop.clock = lambda: T0
    served.world.loop.stopping["alice"] = ("pod-uid-1", "this server is being stopped now (...)")
    code, answer = await served.call("POST", "api/activity", json.dumps(busy(T0)).encode())
    assert code == 409
    assert "being stopped now" in answer["reason"]


async def test_a_stop_under_way_is_bound_to_its_pod_not_to_the_server_name(
    served: Served,
) -> None:
    """The same server started again (a new pod, same user and name) after a reclaim is not
    "being stopped": its reports are taken and its user may keep the GPU."""
    loop = served.world.loop
    loop.clock = lambda: T0
    loop.stopping["alice"] = ("pod-uid-1", "this server is being stopped now (...)")
    loop.seen["alice"] = _Seen(
        bench("alice"), PodRef("jupyter-users", "jupyter-alice", "pod-uid-2")
    )
    assert loop.stop_under_way("alice", "") == ""
    code, answer = await served.call("POST", "api/activity", json.dumps(busy(T0)).encode())
    assert code == 200, answer
    loop.seen["alice"] = _Seen(
        bench("alice"), PodRef("jupyter-users", "jupyter-alice", "pod-uid-1")
    )
    assert "being stopped now" in loop.stop_under_way("alice", "")


async def test_metrics_and_health_need_the_operator_token(served: Served) -> None:
    for path in ("metrics", "api/health"):
        code, _ = await served.call("GET", path)  # any hub user through the proxy
        assert code == 403
        code, _ = await served.call("GET", path, headers={"Authorization": "Bearer op-secret"})
        assert code == 200


# --------------------------------------------------------------------------- 13.5


async def test_a_webhook_that_never_answers_holds_up_neither_cycle_nor_hub() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(200)  # accepts connections (the kernel does), never answers
    hook = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"

    class Users(RequestHandler):
        def get(self, name: str) -> None:
            self.finish({"name": name, "servers": {}})

    hub_sock, hub_port = _socket()
    hub_server = HTTPServer(Application([(r"/hub/api/users/(.*)", Users)]))
    hub_server.add_sockets([hub_sock])
    notifier = Notifier(Notify(hook, timeout=MAX_NOTIFY_TIMEOUT))
    try:
        for i in range(50):  # a full house of posts in flight, each waiting its minute
            notifier.notify({"event": "warn", "user": f"u{i}"})
        await asyncio.sleep(0.2)
        hub = HubClient(f"http://127.0.0.1:{hub_port}/hub/api", "t", timeout=2)
        started = time.monotonic()
        models = await asyncio.gather(*(hub.user(f"u{i}") for i in range(20)))
        assert all(m is not None for m in models)
        assert time.monotonic() - started < 1.5  # not queued behind the webhook's posts
    finally:
        for task in list(notifier.tasks):
            task.cancel()
        hub_server.stop()
        silent.close()


# --------------------------------------------------------------------------- 13.9


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a visible change


def test_the_policy_file_is_reloaded_and_a_bad_one_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "policies: [{name: a, idle_after: 5m}]")
    source = PolicyFile(str(path))
    assert source.check()
    assert source.policies.policies[0].name == "a"
    assert not source.check()  # unchanged: not read again
    _write(path, "policies: [{name: b, idle_after: 99999999999999999999w}]")
    assert not source.check()
    assert "policies[0].idle_after" in source.error
    assert "longest duration" in source.error
    assert source.policies.policies[0].name == "a"  # the last good one stays in force
    _write(path, "policies: [{name: c, idle_after: 1h}]")
    assert source.check()
    assert source.policies.policies[0].name == "c"
    assert not source.error


def test_a_bad_file_at_start_means_reclaim_off_not_no_service(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "policies: [{name: a, idle_after: soon}]")
    source = PolicyFile(str(path))
    assert not source.check()
    assert source.policies.policies == ()
    assert "idle_after" in source.error


async def test_no_policy_in_force_acts_on_nothing() -> None:
    w = World()
    w.loop.set_policies(load_policy({**POLICY}).__class__(policies=()))
    assert await w.cycle() is None
    assert not w.kube.patches
    assert not w.hub.stopped


# --------------------------------------------------------------------------- 13.4 / 13.11


def test_the_store_of_reports_is_bounded_and_pruned_without_a_policy() -> None:
    store = ActivityStore(max_servers=3, forget_after=timedelta(hours=1))
    for i in range(10):
        store.record(f"u{i}", "", idle(T0), T0)
    assert len(store) == 3
    assert store.report("u9") is not None
    assert store.report("u0") is None
    store.record("late", "", idle(T0), T0 + timedelta(hours=2))
    assert len(store) == 1  # the others were silent for longer than forget_after


def test_the_rate_limit_is_per_key_and_remembers_a_bounded_number_of_keys() -> None:
    limit = RateLimit(1.0, 2, max_keys=100)
    assert [limit.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert limit.take("b", 0.0) == 0.0
    assert limit.take("a", 1.0) == 0.0  # refilled
    for i in range(1000):
        limit.take(f"k{i}", 2.0)
    assert len(limit) == 100

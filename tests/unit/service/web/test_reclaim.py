"""The culler's endpoints over a real tornado app with the service's context: activity reports
(400 with field paths, bodies limited before they are read, a rate limit per server, 409 while
the server's stop is under way), and the operator token of ``metrics`` and ``api/health``."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.web import Application

from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.limits import RateLimit
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_tokens import SERVICE_SCOPE, STARTED, TokenHub
from tests.support.service_web import QueueIndexStub
from tests.support.service_world import T0, World, busy, idle

# --------------------------------------------------------------------------- the web app


class Served:
    def __init__(self, world: World, app: Application, port: int, hub: TokenHub) -> None:
        self.world, self.app, self.port, self.hub = world, app, port, hub
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


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    w = World()
    hub = TokenHub()
    for user in ("alice", "bob"):
        hub.start(user, secret=f"server-{user}")
    app = make_app(
        ServiceContext(
            index=cast(Any, QueueIndexStub()),
            loop=w.loop,
            hub_auth=cast(Any, hub),
            servers=ServerTokens(hub),
            operator_token="op-secret",
            limits={"activity": RateLimit(6 / 60, 3), "queue": RateLimit(5, 5)},
        )
    )
    from gpuaas_service.web.base import HubJSONHandler

    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    sock, port = _socket()
    server = HTTPServer(app, max_body_size=64 * 1024)
    server.add_sockets([sock])
    yield Served(w, app, port, hub)
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


async def test_reports_only_from_running_servers_with_the_token_the_hub_issued_them(
    served: Served,
) -> None:
    """A made-up server is refused, and so is a token alice mints with her server's scopes
    and note: neither gets a report kept nor a rate bucket."""
    served.world.loop.clock = lambda: T0
    made_up = served.hub.mint("alice", ["access:servers!server=alice/x", SERVICE_SCOPE])
    copy = served.hub.mint(
        "alice",
        ["access:servers!server=alice/", SERVICE_SCOPE],
        note="Server at /user/alice//",
        at=STARTED + timedelta(seconds=5),
    )
    body = json.dumps(busy(T0)).encode()
    code, answer = await served.call("POST", "api/activity", body, token=made_up)
    assert code == 403
    assert "no running server alice/x" in answer["message"]
    code, answer = await served.call("POST", "api/activity", body, token=copy)
    assert code == 403
    assert "the one the hub issued to the server alice/" in answer["message"]
    assert len(served.world.store) == 0
    assert (await served.call("GET", "api/reclaim", token=copy))[0] == 403
    assert (await served.call("POST", "api/reclaim/snooze", b"", token=copy))[0] == 403
    assert (await served.call("POST", "api/activity", body))[0] == 200  # the server's own


async def test_reports_are_rate_limited_per_server(served: Served) -> None:
    served.world.loop.clock = lambda: T0
    body = json.dumps(idle(T0)).encode()
    codes = [(await served.call("POST", "api/activity", body))[0] for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    code, _ = await served.call("POST", "api/activity", body, token="server-bob")
    assert code == 200  # bob's server has its own share


async def test_a_busy_report_while_the_stop_is_under_way_is_a_409(served: Served) -> None:
    served.world.loop.clock = lambda: T0
    served.world.loop._stopping["alice"] = ("pod-uid-1", "this server is being stopped now (...)")
    code, answer = await served.call("POST", "api/activity", json.dumps(busy(T0)).encode())
    assert code == 409
    assert "being stopped now" in answer["reason"]


async def test_a_stop_under_way_is_bound_to_its_pod_not_to_the_server_name(
    served: Served,
) -> None:
    """The same server started again (a new pod, same user and name) after a reclaim is not
    "being stopped": its reports are taken and its user may keep the GPU."""
    await served.world.cycle()  # the loop has seen alice's pod
    loop = served.world.loop
    loop.clock = lambda: T0
    uid = loop._seen["alice"].pod.uid
    loop._stopping["alice"] = ("uid-of-an-earlier-pod", "this server is being stopped now (...)")
    assert loop.stop_under_way("alice", "") == ""
    code, answer = await served.call("POST", "api/activity", json.dumps(busy(T0)).encode())
    assert code == 200, answer
    loop._stopping["alice"] = (uid, "this server is being stopped now (...)")
    assert "being stopped now" in loop.stop_under_way("alice", "")


async def test_metrics_and_health_need_the_operator_token(served: Served) -> None:
    for path in ("metrics", "api/health"):
        code, _ = await served.call("GET", path)  # any hub user through the proxy
        assert code == 403
        code, _ = await served.call("GET", path, headers={"Authorization": "Bearer op-secret"})
        assert code == 200


DEEP = b"[" * 30_000 + b"]" * 30_000  # json.loads alone: RecursionError; 60 KB < 64 KiB


async def test_a_deep_activity_report_is_a_400_with_its_path(served: Served) -> None:
    """Nested deeper than the recursion limit, or not UTF-8: a 400 with the path down to where
    it is too deep, never a 500 (core/parsing.py)."""
    code, answer = await served.call("POST", "api/activity", DEEP)
    assert code == 400, answer
    (error,) = answer["errors"]
    assert error == {
        "path": "(body)[0][0][0][0]…[0][0][0][0]",
        "message": "nested deeper than 64 levels",
    }
    deep_kernel = b'{"kernels": [{"state": ' + b"[" * 70 + b"]" * 70 + b"}]}"
    code, answer = await served.call("POST", "api/activity", deep_kernel)
    assert code == 400, answer
    assert answer["errors"][0]["path"].startswith("(body).kernels[0].state[0]")
    code, answer = await served.call("POST", "api/activity", b"\xff{}")
    assert code == 400, answer
    assert answer["errors"][0]["message"].startswith("not UTF-8")

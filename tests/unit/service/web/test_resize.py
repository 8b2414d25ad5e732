"""The endpoint of a move (web/resize.py): only the server's own token, the offer and the move
over HTTP, refusals that say why and where (the decisions: tests/unit/service/resize/)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from tests.support.api_schema import schema_errors
from tests.support.hub_moves import TickingHub
from tests.support.hub_tokens import SERVICE_SCOPE
from tests.support.samples import fraction_catalog

CATALOG = fraction_catalog()


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[TickingHub, str]]:
    from gpuaas_service.web.base import HubJSONHandler

    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    hub = TickingHub()
    resizer = Resizer(hub, lambda: CATALOG, poll_interval=0.01)
    context = ServiceContext(
        hub_auth=cast(Any, hub), servers=ServerTokens(hub, refresh_after=0), resize=resizer
    )
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context), max_body_size=64 * 1024)
    server.add_sockets([sock])
    yield hub, f"http://127.0.0.1:{sock.getsockname()[1]}/services/gpuaas/api/resize"
    server.stop()


async def ask(url: str, token: str, body: bytes | None = None) -> tuple[int, Any]:
    response: HTTPResponse = await AsyncHTTPClient(force_instance=True).fetch(
        HTTPRequest(
            url,
            method="GET" if body is None else "POST",
            body=body,
            headers={"Authorization": f"token {token}"},
        ),
        raise_error=False,
    )
    return response.code, json.loads(response.body or b"null")


async def test_the_server_learns_its_next_size_up(served: tuple[TickingHub, str]) -> None:
    hub, url = served
    token = hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    code, answer = await ask(url, token)
    assert code == 200, answer
    assert answer["current"]["slug"] == "l4-quarter"
    assert answer["current"]["memory_text"] == "5.5 GiB"
    assert answer["next"]["slug"] == "l4-half"
    assert answer["next"]["title"] == "l4-half"
    assert answer["next"]["memory_text"] == "11 GiB"
    assert schema_errors("service_resize_offer", answer) == []

    top = hub.run("bob", {"team": "team-a", "offering": "h100", "count": 1})
    code, answer = await ask(url, top)
    assert code == 200
    assert answer["next"] is None
    assert "nothing bigger" in answer["reason"]
    assert schema_errors("service_resize_offer", answer) == []


async def test_a_move_stops_the_server_and_starts_it_on_the_bigger_offering(
    served: tuple[TickingHub, str],
) -> None:
    hub, url = served
    token = hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    code, answer = await ask(url, token, b"{}")
    assert code == 202, answer
    assert answer["to"]["slug"] == "l4-half"
    assert schema_errors("service_resize_move", answer) == []
    for _ in range(200):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert hub.started == [
        (
            "alice",
            "",
            {
                "team": "team-a",
                "offering": "l4-half",
                "count": 1,
                "image": "scipy",
                "size": "small",
            },
        )
    ]
    assert hub.calls.count("stop alice") == 1
    # the server that runs now is the bigger one: its own next size up is the one after
    code, answer = await ask(url, hub.last_token)
    assert code == 200, answer
    assert answer["current"]["slug"] == "l4-half"
    assert answer["next"]["slug"] == "mig-3g"


async def test_a_second_move_while_one_is_under_way_is_409(
    served: tuple[TickingHub, str],
) -> None:
    hub, url = served
    hub.stop_after = 10**6  # the stop never ends
    token = hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    assert (await ask(url, token, b"{}"))[0] == 202
    code, answer = await ask(url, token, b'{"offering": "h100"}')
    assert code == 409
    assert answer["message"] in (
        "your server is already being moved",
        "your server is not running (or is starting or stopping)",
    )
    assert hub.started == []


async def test_refusals_over_http_say_why_and_where(served: tuple[TickingHub, str]) -> None:
    hub, url = served
    token = hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    code, answer = await ask(url, token, b'{"offering": "h100", "count": 8}')
    assert code == 400
    assert answer["errors"] == [{"path": "count", "message": "unknown field (it takes: offering)"}]
    assert answer["message"] == "invalid request body: count: unknown field (it takes: offering)"
    code, answer = await ask(url, token, b'{"offering": ')
    assert code == 400
    assert answer["message"].startswith("invalid request body: not JSON: (body): ")
    code, answer = await ask(url, token, b'{"offering": "mig-1g"}')
    assert code == 400
    assert "is not bigger than your l4-quarter" in answer["message"]
    assert hub.started == []


async def test_only_the_servers_own_token_may_move_it(served: tuple[TickingHub, str]) -> None:
    hub, url = served
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    personal = hub.mint("alice", [SERVICE_SCOPE])
    code, _ = await ask(url, personal, b"{}")
    assert code == 403
    code, _ = await ask(url, "no-such-token", b"{}")
    assert code == 403
    assert hub.started == []

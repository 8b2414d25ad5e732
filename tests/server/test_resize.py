"""A real jupyter server with the extension asks the gpuaas service's real handlers for the way
up to a bigger GPU (only the hub's answers come from an in-process stand-in): the next size up,
a move that stops this server and starts it on the bigger offering, and the service's refusals
passed on as they are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from devcluster.hub import free_port
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.resize import Resizer
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_moves import TickingHub
from tests.support.samples import fraction_catalog

QUARTER = {"team": "team-a", "offering": "l4-quarter", "count": 1}


@pytest.fixture
async def hub(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TickingHub]:
    """The service's app with its resize part; this server runs a quarter L4 with its own
    token, which the extension forwards."""
    from jupyterhub.services.auth import HubAuth

    hub_auth = HubAuth(
        api_token="service-token",
        api_url="http://127.0.0.1:1/hub/api",
        access_scopes={"access:services!service=gpuaas"},
    )
    hub = TickingHub()
    monkeypatch.setattr(hub_auth, "get_user", hub.get_user)
    resizer = Resizer(hub, fraction_catalog, poll_interval=0.01)
    app = make_app(ServiceContext(hub_auth=hub_auth, servers=ServerTokens(hub), resize=resizer))
    port = free_port()
    server = app.listen(port, "127.0.0.1")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", hub.run("alice", dict(QUARTER)))
    monkeypatch.setenv("GPUAAS_SERVICE_URL", f"http://127.0.0.1:{port}/services/gpuaas/")
    yield hub
    server.stop()


async def _json(jp_fetch: Any, method: str = "GET", body: bytes | None = None) -> Any:
    response = await jp_fetch("gpuaas", "api", "resize", method=method, body=body)
    return response.code, json.loads(response.body)


async def test_the_sidebar_learns_the_next_size_up(hub: TickingHub, jp_fetch: Any) -> None:
    code, answer = await _json(jp_fetch)
    assert code == 200
    assert answer["current"]["slug"] == "l4-quarter"
    assert answer["next"]["slug"] == "l4-half"
    assert answer["next"]["memory_text"] == "11 GiB"


async def test_a_move_through_the_extension_restarts_the_server_bigger(
    hub: TickingHub, jp_fetch: Any
) -> None:
    code, answer = await _json(jp_fetch, "POST", b"{}")
    assert code == 202
    assert answer["to"]["slug"] == "l4-half"
    for _ in range(300):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert [(user, options["offering"]) for user, _s, options in hub.started] == [
        ("alice", "l4-half")
    ]


async def test_the_services_refusals_come_back_as_they_are(hub: TickingHub, jp_fetch: Any) -> None:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "gpuaas", "api", "resize", method="POST", body=b'{"offering": "h100", "count": 8}'
        )
    assert err.value.code == 400
    answer = json.loads(err.value.response.body)  # type: ignore[union-attr]
    assert answer["errors"][0]["path"] == "count"
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("gpuaas", "api", "resize", method="POST", body=b'{"offering": "mig-1g"}')
    assert err.value.code == 400
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("gpuaas", "api", "resize", method="POST", body=b"not json")
    assert err.value.code == 400
    assert hub.started == []

"""The console's per-GPU and sizing answers over HTTP (``api/console/gpus``, ``api/console/fit``)
and its page's assets: a team lead gets their team's rows only; an asset path never leaves the
static folder."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.sizing import PeakHistory
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.service_samples import NS
from tests.support.service_world import World

PREFIX = "/services/gpuaas/"


@dataclass
class Served:
    port: int
    tokens: dict[str, str]

    async def get(self, path: str, who: str) -> tuple[int, Any]:
        response = await AsyncHTTPClient(force_instance=True).fetch(
            HTTPRequest(
                f"http://127.0.0.1:{self.port}{PREFIX}{path}",
                headers={"Authorization": f"Bearer {self.tokens[who]}"},
                follow_redirects=False,
            ),
            raise_error=False,
        )
        body = response.body or b""
        is_json = response.headers.get("Content-Type", "").startswith("application/json")
        return response.code, json.loads(body) if is_json else body.decode()


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    world = World()
    await world.cycle()
    console = ConsoleState(
        world.loop,
        world.view,
        notebook_namespace=NS,
        job_namespaces=["team-a"],
        regret_window=timedelta(hours=1),
        pods=lambda: world.pods,
        usage_history=lambda: PeakHistory({"alice": (1000,)}),
    )
    hub = TokenHub()
    context = ServiceContext(
        hub_auth=cast(Any, hub), console_auth=cast(Any, hub), loop=world.loop, console=console
    )
    tokens = {
        "lead of team-a": hub.mint("lead", ["custom:gpuaas:console!group=team-a", SERVICE_SCOPE]),
        "lead of team-b": hub.mint("leadb", ["custom:gpuaas:console!group=team-b", SERVICE_SCOPE]),
        "an operator": hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE]),
        "a user": hub.mint("alice", [SERVICE_SCOPE]),
    }
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context))
    server.add_sockets([sock])
    yield Served(sock.getsockname()[1], tokens)
    server.stop()


async def test_every_gpu_held_and_a_team_leads_view_of_it(served: Served) -> None:
    code, ops = await served.get("api/console/gpus", "an operator")
    assert code == 200
    assert sorted(r["holder"] for r in ops["devices"]) == ["alice", "alice/busy", "bob"]
    assert {r["device"] for r in ops["devices"]} == {"MIG 1g.5gb"}
    assert {r["state"] for r in ops["devices"] if r["holder"] != "alice/busy"} == {"idle"}
    code, lead = await served.get("api/console/gpus", "lead of team-a")
    assert (code, lead["visible_teams"]) == (200, ["team-a"])
    assert len(lead["devices"]) == 3
    code, other = await served.get("api/console/gpus", "lead of team-b")
    assert (code, other["devices"], other["nodes"]) == (200, [], [])
    code, _ = await served.get("api/console/gpus", "a user")
    assert code == 403


async def test_sizing_without_a_catalog_says_so_and_is_scoped(served: Served) -> None:
    code, fit = await served.get("api/console/fit", "an operator")
    assert (code, fit["catalog"], fit["teams"]) == (200, False, [])
    code, _ = await served.get("api/console/fit", "a user")
    assert code == 403


async def test_the_page_assets_and_no_path_out_of_the_static_folder(served: Served) -> None:
    code, css = await served.get("console/static/console.css", "an operator")
    assert code == 200
    assert ".cards" in css
    for path in (
        "console/static/js/../../gpus.py",
        "console/static/js/nothing.js",
        "console/static/console.html",
    ):
        code, _ = await served.get(path, "an operator")
        assert code == 404, path

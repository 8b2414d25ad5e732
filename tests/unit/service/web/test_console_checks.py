"""``GET api/console/checks``: the doctor's checks for operators (every team's console scope);
a team lead and a user get 403; the answer matches the API schema; it is kept a minute and
``fresh=1`` runs the checks again."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.doctor import Check
from gpuaas_service.doctor.cached import CachedChecks
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from tests.support.api_schema import schema_errors
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.service_world import World, world_console

PREFIX = "/services/gpuaas/"
CHECKS = [
    Check("hub", "ok", "JupyterHub 5.4.0 at http://hub:8081/hub/api"),
    Check("localqueue.team-a", "missing", "no LocalQueue jupyter-users/team-a", "create it"),
]


@dataclass
class Served:
    port: int
    tokens: dict[str, str]
    runs: list[int]
    clock: list[float]

    async def get(self, path: str, who: str) -> tuple[int, Any]:
        response = await AsyncHTTPClient(force_instance=True).fetch(
            HTTPRequest(
                f"http://127.0.0.1:{self.port}{PREFIX}{path}",
                headers={"Authorization": f"Bearer {self.tokens[who]}"},
            ),
            raise_error=False,
        )
        return response.code, json.loads(response.body or b"null")


async def _served(with_checks: bool) -> tuple[HTTPServer, Served]:
    world = World()
    await world.cycle()
    runs: list[int] = []
    clock = [0.0]

    async def run() -> list[Check]:
        runs.append(1)
        return CHECKS

    hub = TokenHub()
    checks = CachedChecks(run, ttl=60, clock=lambda: clock[0]) if with_checks else None
    context = ServiceContext(
        hub_auth=cast(Any, hub),
        console_auth=cast(Any, hub),
        loop=world.loop,
        console=world_console(world),
        checks=checks,
    )
    tokens = {
        "an operator": hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE]),
        "lead of team-a": hub.mint("lead", ["custom:gpuaas:console!group=team-a", SERVICE_SCOPE]),
        "a user": hub.mint("alice", [SERVICE_SCOPE]),
    }
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context))
    server.add_sockets([sock])
    return server, Served(sock.getsockname()[1], tokens, runs, clock)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    server, s = await _served(True)
    yield s
    server.stop()


async def test_operators_get_the_checks(served: Served) -> None:
    code, answer = await served.get("api/console/checks", "an operator")
    assert code == 200
    assert schema_errors("service_console_checks", answer) == []
    assert answer["ok"] is False
    assert answer["checks"][1] == {
        "name": "localqueue.team-a",
        "status": "missing",
        "detail": "no LocalQueue jupyter-users/team-a",
        "fix": "create it",
    }


@pytest.mark.parametrize("who", ["lead of team-a", "a user"])
async def test_nobody_else_does(served: Served, who: str) -> None:
    code, answer = await served.get("api/console/checks", who)
    assert code == 403, answer
    assert served.runs == []


async def test_kept_a_minute_unless_fresh(served: Served) -> None:
    await served.get("api/console/checks", "an operator")
    await served.get("api/console/checks", "an operator")
    assert len(served.runs) == 1
    await served.get("api/console/checks?fresh=1", "an operator")
    assert len(served.runs) == 2
    served.clock[0] += 61
    await served.get("api/console/checks", "an operator")
    assert len(served.runs) == 3


async def test_a_service_without_checks_answers_404() -> None:
    server, s = await _served(False)
    try:
        code, _ = await s.get("api/console/checks", "an operator")
        assert code == 404
    finally:
        server.stop()

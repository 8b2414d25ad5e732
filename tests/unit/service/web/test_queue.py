"""The queue's endpoints (gpuaas_service.web.queue) on a loopback server of their own: where they
are mounted, that a user is answered about their own work only (a service's token is refused),
the rate limit per user, and what ``api/health`` counts. Who may call each route at all is
tests/unit/service/web/test_routes.py's table."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.web.base import HubJSONHandler
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.limits import RateLimit
from gpuaas_service.web.queue import HealthHandler, QueueHandler, queue_handlers
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.service_web import PREFIX, QueueIndexStub

Fetch = Callable[..., Awaitable[HTTPResponse]]


class RecordingIndex:
    """The queue index stand-in (synced, nobody has queued work), noting whom it was asked
    about."""

    rebuilds = 3
    polled_queues = ("team-a/gpu", "team-b/gpu")
    view = QueueIndexStub.view

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def answer(self, user: str, groups: Any) -> dict[str, Any]:
        self.asked.append((user, tuple(groups)))
        return QueueIndexStub().answer(user, groups)


def test_the_routes_are_the_queue_and_health_under_the_services_prefix() -> None:
    index = RecordingIndex()
    context = ServiceContext(prefix="services/other", index=cast(Any, index))
    routes = queue_handlers(context, cast(Any, index))
    assert [(path, handler) for path, handler, _ in routes] == [
        ("/services/other/api/queue", QueueHandler),
        ("/services/other/api/health", HealthHandler),
    ]
    assert all(kw == {"context": context, "index": index} for _, _, kw in routes)


@pytest.fixture
def hub() -> TokenHub:
    return TokenHub(groups={"alice": ["team-a", "ml"]})


@pytest.fixture
def index() -> RecordingIndex:
    return RecordingIndex()


@pytest.fixture
def refused() -> list[str]:
    return []


@pytest.fixture
async def fetch(
    hub: TokenHub, index: RecordingIndex, refused: list[str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Fetch]:
    # The hub's own scope check (access:services!service=gpuaas) is the hub's; its answers
    # for the tokens are TokenHub's.
    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    context = ServiceContext(
        hub_auth=cast(Any, hub),
        operator_token="op-secret",
        index=cast(Any, index),
        limits={"queue": RateLimit(0.001, 2)},
        on_refused=refused.append,
        health_policy=lambda: {
            "file": None, "valid": True, "error": "", "policies_in_force": 0, "reclaim": "off"
        },
    )  # fmt: skip
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(web.Application(queue_handlers(context, cast(Any, index))))
    server.add_sockets([sock])
    client = AsyncHTTPClient(force_instance=True)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}{PREFIX}"

    async def get(path: str, token: str = "") -> HTTPResponse:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return await client.fetch(base + path, headers=headers, raise_error=False)

    yield get
    client.close()
    server.stop()


async def test_a_user_is_answered_about_their_own_work_with_their_groups(
    fetch: Fetch, hub: TokenHub, index: RecordingIndex
) -> None:
    response = await fetch("api/queue", hub.mint("alice", [SERVICE_SCOPE]))
    assert response.code == 200
    assert json.loads(response.body)["user"] == "alice"
    assert index.asked == [("alice", ("team-a", "ml"))]
    assert response.headers["Cache-Control"] == "no-store"


async def test_a_services_token_is_refused_with_the_token_it_needs(
    fetch: Fetch, hub: TokenHub, index: RecordingIndex
) -> None:
    token = hub.mint("cron", [SERVICE_SCOPE])
    hub.whoami[token]["kind"] = "service"
    response = await fetch("api/queue", token)
    assert response.code == 403
    assert json.loads(response.body) == {
        "status": 403,
        "message": "a user's token with the scope access:services!service=gpuaas is needed",
    }
    assert index.asked == []


async def test_the_rate_limit_is_per_user_and_counted_when_it_refuses(
    fetch: Fetch, hub: TokenHub, refused: list[str]
) -> None:
    alice, bob = hub.mint("alice", [SERVICE_SCOPE]), hub.mint("bob", [SERVICE_SCOPE])
    codes = [(await fetch("api/queue", alice)).code for _ in range(3)]
    assert codes == [200, 200, 429]
    assert refused == ["queue"]
    assert (await fetch("api/queue", bob)).code == 200  # bob's share is his own


async def test_health_counts_the_questions_answered_and_adds_the_extras(
    fetch: Fetch, hub: TokenHub
) -> None:
    token = hub.mint("alice", [SERVICE_SCOPE])
    await fetch("api/queue", token)
    await fetch("api/queue", token)
    response = await fetch("api/health", "op-secret")
    assert response.code == 200
    assert json.loads(response.body) == {
        "synced": True,
        "polled_queues": ["team-a/gpu", "team-b/gpu"],
        "requests_served": 2,
        "index_rebuilds": 3,
        "policy": {
            "file": None,
            "valid": True,
            "error": "",
            "policies_in_force": 0,
            "reclaim": "off",
        },
    }


async def test_health_wants_the_operator_token_not_a_users(fetch: Fetch, hub: TokenHub) -> None:
    response = await fetch("api/health", hub.mint("alice", [SERVICE_SCOPE]))
    assert response.code == 403
    assert "operator token" in json.loads(response.body)["message"]

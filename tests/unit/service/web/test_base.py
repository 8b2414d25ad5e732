"""The service's handler bases (gpuaas_service.web.base): the error answer's shape, the operator
token, the per-caller limit with its Retry-After, a 405 before any body, and when a body is let
in. Handlers made here for the purpose are served on loopback; the service's own routes and who
may call them are tests/unit/service/web/test_routes.py's."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.web.base import (
    DRAINED_OVER_LIMIT,
    MAX_ERRORS_SHOWN,
    JSONHandler,
    TooManyRequests,
    admit_body,
    check_operator_token,
    error_answer,
    limit,
)
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.limits import RateLimit
from jupyter_gpuaas.core.fields import FieldError

Fetch = Callable[..., Awaitable[HTTPResponse]]

# --------------------------------------------------------------------------- pure parts


def test_an_error_answer_is_the_status_and_why() -> None:
    assert error_answer(404, "no such job") == {"status": 404, "message": "no such job"}
    assert error_answer(409, "over the cap", cap="team", limit=2) == {
        "status": 409,
        "message": "over the cap",
        "cap": "team",
        "limit": 2,
    }


def test_an_error_answer_shows_the_first_errors_and_counts_the_rest() -> None:
    errors = [FieldError(f"items[{i}]", "not a number") for i in range(MAX_ERRORS_SHOWN + 5)]
    answer = error_answer(400, "invalid", errors, more_errors=2)
    assert len(answer["errors"]) == MAX_ERRORS_SHOWN
    assert answer["errors"][0] == {"path": "items[0]", "message": "not a number"}
    assert answer["more_errors"] == 5 + 2
    assert error_answer(400, "invalid", [])["more_errors"] == 0


@pytest.mark.parametrize(("wait", "seconds"), [(0.2, 1), (1.4, 1), (2.6, 3), (30.0, 30)])
def test_too_many_requests_says_when_in_whole_seconds_at_least_one(
    wait: float, seconds: int
) -> None:
    refused = TooManyRequests(wait)
    assert (refused.status_code, refused.retry_after) == (429, seconds)


def test_a_limit_not_configured_lets_everyone_in() -> None:
    limit(ServiceContext(), "queue", "alice")  # no limits at all
    limit(ServiceContext(limits={"activity": RateLimit(0.001, 1)}), "queue", "alice")


def test_a_limit_refuses_once_the_share_is_used_and_says_so() -> None:
    told: list[str] = []
    context = ServiceContext(limits={"queue": RateLimit(0.5, 1)}, on_refused=told.append)
    limit(context, "queue", "alice")
    with pytest.raises(TooManyRequests) as refused:
        limit(context, "queue", "alice")
    assert refused.value.retry_after == 2  # one token at 0.5 per second
    assert told == ["queue"]
    limit(context, "queue", "bob")  # a share per caller


# --------------------------------------------------------------------------- served


class OperatorOnly(JSONHandler):
    def initialize(self, expected: str) -> None:
        self.bind(ServiceContext(operator_token=expected))

    def get(self) -> None:
        check_operator_token(self, self.context.operator_token)
        self.finish(json.dumps({"ok": True}))


class Limited(JSONHandler):
    def initialize(self, context: ServiceContext) -> None:
        self.bind(context)

    def get(self) -> None:
        limit(self.context, "queue", "everyone")
        self.finish(json.dumps({"ok": True}))


class Upload(JSONHandler):
    """Lets a body of up to 10 bytes in, as the jobs' handlers do once the caller is known."""

    def prepare(self) -> None:
        super().prepare()
        self.too_large = admit_body(self, 10, "at most 10 bytes", timeout=5.0)

    def post(self) -> None:
        if self.too_large is not None:
            raise self.too_large
        self.finish(json.dumps({"length": len(self.request.body)}))


@pytest.fixture
async def fetch() -> AsyncIterator[Fetch]:
    app = web.Application(
        [
            ("/open", OperatorOnly, {"expected": "op-secret"}),
            ("/closed", OperatorOnly, {"expected": ""}),
            ("/limited", Limited, {"context": ServiceContext(limits={"queue": RateLimit(0.1, 1)})}),
            ("/upload", Upload),
        ]
    )
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app, max_body_size=4)  # the server's own bound, below the upload's
    server.add_sockets([sock])
    client = AsyncHTTPClient(force_instance=True)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def get(path: str, **kw: Any) -> HTTPResponse:
        return await client.fetch(base + path, raise_error=False, **kw)

    yield get
    client.close()
    server.stop()


@pytest.mark.parametrize(
    ("authorization", "code"),
    [
        ("Bearer op-secret", 200),
        ("token op-secret", 200),
        ("Bearer  op-secret ", 200),
        ("Basic op-secret", 403),
        ("Bearer op-secre", 403),
        ("", 403),
    ],
)
async def test_the_operator_token_is_a_bearer_or_token_header(
    fetch: Fetch, authorization: str, code: int
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = await fetch("/open", headers=headers)
    assert response.code == code
    assert response.headers["Content-Type"] == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    if code == 403:
        assert json.loads(response.body) == {
            "status": 403,
            "message": "the operator token is needed (Authorization: Bearer TOKEN)",
        }


async def test_no_operator_token_configured_refuses_all_and_says_how_to_set_one(
    fetch: Fetch,
) -> None:
    response = await fetch("/closed", headers={"Authorization": "Bearer "})
    assert response.code == 403
    assert json.loads(response.body)["message"].startswith(
        "set c.GPUaaSService.operator_token (or $GPUAAS_OPERATOR_TOKEN)"
    )


async def test_a_refusal_by_the_limit_keeps_its_retry_after(fetch: Fetch) -> None:
    assert (await fetch("/limited")).code == 200
    refused = await fetch("/limited")
    assert refused.code == 429
    assert refused.headers["Retry-After"] == "10"
    assert json.loads(refused.body) == {
        "status": 429,
        "message": "too many requests: try again in 10s",
    }


async def test_a_method_not_answered_is_a_405_before_its_body(fetch: Fetch) -> None:
    response = await fetch("/open", method="POST", body=b"x" * 100)
    assert response.code == 405
    assert json.loads(response.body)["status"] == 405


async def test_a_body_let_in_may_pass_the_servers_bound_up_to_its_own(fetch: Fetch) -> None:
    response = await fetch("/upload", method="POST", body=b"x" * 10)
    assert (response.code, json.loads(response.body)) == (200, {"length": 10})


async def test_a_body_over_its_bound_is_read_and_answered_413(fetch: Fetch) -> None:
    response = await fetch("/upload", method="POST", body=b"x" * 11)
    assert response.code == 413
    assert json.loads(response.body) == {"status": 413, "message": "at most 10 bytes"}


async def test_a_body_far_over_its_bound_is_answered_at_once(fetch: Fetch) -> None:
    response = await fetch("/upload", method="POST", body=b"x" * (DRAINED_OVER_LIMIT * 10 + 1))
    assert response.code == 413
    assert json.loads(response.body)["message"] == "at most 10 bytes"

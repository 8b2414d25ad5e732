"""One authorisation table for every route of the service (docs/security.md, "Who may call
each route"): every route and method that :func:`make_app` registers has a row, every row names a
registered route, and each route answers an anonymous caller as its row says. A route added
without a row fails here. Every answer of every caller conforms to the service's OpenAPI
document (openapi-core: the operation, the status, the body's schema)."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.openapi import response_errors
from tests.support.route_table import (
    SERVICE_TABLE,
    assert_table_matches,
    concrete,
    first_status,
    table,
)
from tests.support.service_web import PREFIX, full_context, registered


def test_every_route_the_service_registers_has_a_row_and_every_row_a_route() -> None:
    assert_table_matches(table(SERVICE_TABLE), registered(make_app(full_context())), PREFIX)


@pytest.fixture
async def port() -> AsyncIterator[int]:
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(full_context()), max_body_size=64 * 1024)
    server.add_sockets([sock])
    yield sock.getsockname()[1]
    server.stop()


async def test_each_route_answers_an_anonymous_caller_as_its_row_says(port: int) -> None:
    client = AsyncHTTPClient(force_instance=True)
    for (method, path), answers in table(SERVICE_TABLE).items():
        expected = first_status(answers[0])
        response = await client.fetch(
            HTTPRequest(
                f"http://127.0.0.1:{port}{PREFIX}{concrete(path)}",
                method=method,
                body=b"{}" if method == "POST" else None,
                follow_redirects=False,
            ),
            raise_error=False,
        )
        assert response.code == expected, (method, path, response.code, response.body[:200])
        assert response_errors("service", response) == [], (method, path)


async def test_each_route_refuses_and_admits_the_callers_its_row_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """For every caller with a token: a row's ``403`` is a 403, and a row's ``2xx`` is never a
    refusal (the body here may well be a 400: what matters is that the caller was let in).
    The hub's answers for the tokens are faked (HubAuth's interface; its own scope check, of
    ``access:services!service=gpuaas``, is the hub's)."""
    from gpuaas_service.web.base import HubJSONHandler

    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    hub = TokenHub(groups={"alice": ["team-a"], "bob": ["team-a"]})
    context = full_context()
    hub_auth = cast(Any, hub)
    hub_auth.base_url = PREFIX  # where the page's XSRF cookie goes (HubOAuth's base_url)
    context = ServiceContext(
        **{
            **{f: getattr(context, f) for f in ("operator_token", "index", "loop", "console")},
            "jobs": context.jobs,
            "resize": context.resize,
            "hub_auth": hub_auth,
            "console_auth": hub_auth,
            "servers": ServerTokens(hub),
        }
    )
    own = hub.start("alice")
    hub.start("bob")
    tokens = {
        "another user": hub.mint("bob", [SERVICE_SCOPE]),
        "the owner": hub.mint("alice", [SERVICE_SCOPE]),
        "the server's own token": own,
        "a team lead": hub.mint("lead", ["custom:gpuaas:console!group=team-a", SERVICE_SCOPE]),
        "an operator": hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE]),
    }
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context), max_body_size=64 * 1024)
    server.add_sockets([sock])
    client = AsyncHTTPClient(force_instance=True)
    checked = 0
    try:
        rows = table(SERVICE_TABLE)
        for (method, path), answers in rows.items():
            for caller, answer in zip(list(tokens)[:5], answers[1:], strict=True):
                code = re.match(r"(\d)\d\d", answer)
                if code is None or code[1] not in "24":
                    continue
                token = tokens[caller]
                if caller == "an operator" and "operator token" in answer:
                    token = "op-secret"
                response = await client.fetch(
                    HTTPRequest(
                        f"http://127.0.0.1:{sock.getsockname()[1]}{PREFIX}{concrete(path)}",
                        method=method,
                        body=b"{}" if method == "POST" else None,
                        headers={"Authorization": f"Bearer {token}"},
                        follow_redirects=False,
                    ),
                    raise_error=False,
                )
                got = (method, path, caller, response.code, response.body[:160])
                assert response_errors("service", response) == [], got
                if code[1] == "4":
                    assert response.code == int(code[0]), got
                else:
                    assert response.code not in (401, 403), got
                checked += 1
    finally:
        server.stop()
    assert checked > 100


async def test_an_answer_its_operation_does_not_list_is_caught(
    port: int, answers_conform_to_the_document: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check every test here runs on every answer (conftest.py): with the 403 of
    ``GET api/health`` left out of the document, the service's real 403 is reported."""
    from openapi_core import OpenAPI

    from tests.support import openapi

    changed = openapi.document("service")
    del changed["paths"]["/api/health"]["get"]["responses"]["403"]
    monkeypatch.setattr(openapi, "_openapi", lambda server: OpenAPI.from_dict(changed))
    client = AsyncHTTPClient(force_instance=True)
    response = await client.fetch(f"http://127.0.0.1:{port}{PREFIX}api/health", raise_error=False)
    assert response.code == 403
    assert len(answers_conform_to_the_document) == 1
    assert "403" in answers_conform_to_the_document[0]
    answers_conform_to_the_document.clear()  # caught: the test's own teardown check passes

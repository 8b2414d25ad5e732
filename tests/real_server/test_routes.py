"""The server extension's routes against their authorisation table (docs/security.md, "Who may
call each route"): every route the extension registers has a row, every row a route, and a
real Jupyter server refuses each route to an anonymous caller and to a wrong token as the rows
say, each refusal as the extension's OpenAPI document describes it. A route added without a row
fails here."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpuaas.server.handlers import handlers
from tests.support.jupyter_fetch import Fetch
from tests.support.openapi import response_errors
from tests.support.route_table import (
    EXTENSION_TABLE,
    answered_methods,
    assert_table_matches,
    concrete,
    first_status,
    table,
)

BASE = "/gpuaas/api/"


def test_every_route_the_extension_registers_has_a_row_and_every_row_a_route() -> None:
    registered = []
    for pattern, handler, _kw in handlers(cast(Any, None)):
        registered.append((re.compile(pattern + "$"), handler, answered_methods(handler)))
    assert_table_matches(table(EXTENSION_TABLE), registered, BASE)


@pytest.mark.parametrize(("column", "authorization"), [(0, ""), (1, "token not-theirs")])
async def test_each_route_refuses_anonymous_and_other_callers_as_its_row_says(
    jp_fetch: Fetch, column: int, authorization: str
) -> None:
    """``""``: no token at all; a token the server does not know: anyone but its owner."""
    for (method, path), answers in table(EXTENSION_TABLE).items():
        expected = first_status(answers[column])
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch(
                "gpuaas",
                "api",
                *concrete(path).split("/"),
                method=method,
                body="{}" if method == "POST" else None,
                headers={"Authorization": authorization},
            )
        assert refused.value.code == expected, (method, path)
        assert refused.value.response is not None
        assert response_errors("extension", refused.value.response) == [], (method, path)

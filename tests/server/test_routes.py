"""The server extension's routes against their authorisation table (docs/security.md, "Who may
call each route"): every route the extension registers has a row, every row a route, and a
real Jupyter server refuses each route to an anonymous caller and to a wrong token as the rows
say. A route added without a row fails here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import pytest
from tornado import web
from tornado.httpclient import HTTPClientError

from jupyter_gpuaas.server.handlers import handlers

from .helpers import Fetch

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"
HEADING = "### The server extension (`/user/<name>/<server>/gpuaas/api/`)"
SAMPLES = {"team": "team-a", "name": "nb-x"}
METHODS = ("get", "post", "put", "patch", "delete")


def rows() -> dict[tuple[str, str], list[str]]:
    """(method, path under gpuaas/api/) → the row's answers."""
    lines = SECURITY.read_text().splitlines()
    out: dict[tuple[str, str], list[str]] = {}
    for line in lines[lines.index(HEADING) + 1 :]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.fullmatch(r"`([A-Z]+) ([^`]+)`", cells[0]) if line.startswith("|") else None
        if found is not None:
            assert (found[1], found[2]) not in out, f"{found[0]} has two rows"
            out[(found[1], found[2])] = cells[1:]
    assert out, f"no table under {HEADING!r}"
    return out


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m[1]], path)


def test_every_route_the_extension_registers_has_a_row_and_every_row_a_route() -> None:
    registered = []
    for pattern, handler, _kw in handlers(cast(Any, None)):
        methods = [
            m.upper() for m in METHODS if getattr(handler, m) is not getattr(web.RequestHandler, m)
        ]
        registered.append((re.compile(pattern + "$"), handler, methods))
    table = rows()
    for regex, handler, methods in registered:
        for method in methods:
            assert any(
                m == method and regex.fullmatch("/gpuaas/api/" + concrete(p)) for m, p in table
            ), f"{method} {regex.pattern} ({handler.__name__}) has no row in {SECURITY.name}"
    for method, path in table:
        assert any(
            method in methods and regex.fullmatch("/gpuaas/api/" + concrete(path))
            for regex, _, methods in registered
        ), f"the row `{method} {path}` names no registered route"


@pytest.mark.parametrize(("column", "authorization"), [(0, ""), (1, "token not-theirs")])
async def test_each_route_refuses_anonymous_and_other_callers_as_its_row_says(
    jp_fetch: Fetch, column: int, authorization: str
) -> None:
    """``""``: no token at all; a token the server does not know: anyone but its owner."""
    for (method, path), answers in rows().items():
        expected = int(re.match(r"\d{3}", answers[column])[0])  # type: ignore[index]
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

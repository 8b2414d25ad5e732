"""The authorisation tables, as the route tests read them: each operation of the two OpenAPI
documents with its answer for each caller (its ``x-gpuaas-access`` ``callers``), and how a
row is matched to the routes a server registers. The tables themselves and docs/security.md's
"Who may call each route", written from the same, are :mod:`tests.support.openapi`'s
(``python -m tests.support.openapi`` checks they are current; ``--write`` rewrites them)."""

from __future__ import annotations

import re

from tornado import web

from tests.support.openapi import SECURITY, Server, security_page, table

__all__ = [
    "EXTENSION_TABLE",
    "SECURITY",
    "SERVICE_TABLE",
    "answered_methods",
    "assert_table_matches",
    "concrete",
    "first_status",
    "security_page",
    "table",
]

SERVICE_TABLE: Server = "service"
EXTENSION_TABLE: Server = "extension"
SAMPLES = {"team": "team-a", "name": "nb-x", "file": "console.css"}
"""What each ``{placeholder}`` of a row's path stands for in a request."""
METHODS = ("get", "post", "put", "patch", "delete")


def concrete(path: str) -> str:
    """A row's path with its placeholders filled in (:data:`SAMPLES`)."""
    return re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m[1]], path)


def answered_methods(handler: type) -> list[str]:
    """The HTTP methods a handler class answers (those it defines)."""
    return [m.upper() for m in METHODS if getattr(handler, m) is not getattr(web.RequestHandler, m)]


def first_status(answer: str) -> int | None:
    """The status a table cell starts with (``None``: words, e.g. "as another user")."""
    found = re.match(r"\d{3}", answer)
    return int(found[0]) if found else None


def assert_table_matches(
    rows: dict[tuple[str, str], list[str]],
    routes: list[tuple[re.Pattern[str], type, list[str]]],
    prefix: str,
) -> None:
    """Every method of every registered route (pattern, handler, methods) has a row, and
    every row's method and path (under ``prefix``) is a registered route's."""
    for regex, handler, methods in routes:
        for method in methods:
            assert any(m == method and regex.fullmatch(prefix + concrete(p)) for m, p in rows), (
                f"{method} {regex.pattern} ({handler.__name__}) has no operation in its document"
            )
    for method, path in rows:
        assert any(
            method in methods and regex.fullmatch(prefix + concrete(path))
            for regex, _, methods in routes
        ), f"the operation `{method} {path}` is no registered route"

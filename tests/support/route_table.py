"""The authorisation tables, as the route tests read them: each operation of the two OpenAPI
documents with its answer for each caller (its ``x-gpuaas-access`` ``callers``); and
docs/security.md's "Who may call each route" tables, written from the same
(``python -m tests.support.openapi`` checks they are current; ``--write`` rewrites them)."""

from __future__ import annotations

import re
from pathlib import Path

from tornado import web

from tests.support.openapi import CALLERS, Server, operations

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SERVICE_TABLE: Server = "service"
EXTENSION_TABLE: Server = "extension"
HEADINGS: dict[Server, str] = {
    "service": "### The gpuaas service (`/services/gpuaas/`)",
    "extension": "### The server extension (`/user/<name>/<server>/gpuaas/api/`)",
}
SAMPLES = {"team": "team-a", "name": "nb-x", "file": "console.css"}
"""What each ``{placeholder}`` of a row's path stands for in a request."""
METHODS = ("get", "post", "put", "patch", "delete")


def table(server: Server) -> dict[tuple[str, str], list[str]]:
    """(method, path) → the answers by caller (:data:`CALLERS`' order), of the server's
    document."""
    rows: dict[tuple[str, str], list[str]] = {}
    for method, path, operation in operations(server):
        callers = operation["x-gpuaas-access"]["callers"]
        assert list(callers) == list(CALLERS), f"{method} {path}: callers {list(callers)}"
        rows[(method, path)] = list(callers.values())
    assert rows, f"no operations in the {server}'s document"
    return rows


def markdown(server: Server) -> list[str]:
    """The server's table as docs/security.md shows it."""
    lines = ["| route | " + " | ".join(CALLERS) + " |", "| --- |" + " --- |" * len(CALLERS)]
    for (method, path), answers in table(server).items():
        lines.append(f"| `{method} {path}` | " + " | ".join(answers) + " |")
    return lines


def security_page(text: str) -> str:
    """docs/security.md's ``text`` with each server's table written from its document."""
    lines = text.splitlines()
    for server, heading in HEADINGS.items():
        start = lines.index(heading) + 1
        while not lines[start].startswith("| route |"):
            start += 1
        end = start
        while end < len(lines) and lines[end].startswith("|"):
            end += 1
        lines[start:end] = markdown(server)
    return "\n".join(lines) + "\n"


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

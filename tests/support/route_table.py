"""The authorisation tables of docs/security.md ("Who may call each route"), as the route
tests read them: each row's method and path, and its answers by caller."""

from __future__ import annotations

import re
from pathlib import Path

from tornado import web

SECURITY = Path(__file__).resolve().parents[2] / "docs" / "security.md"
SERVICE_TABLE = "### The gpuaas service (`/services/gpuaas/`)"
EXTENSION_TABLE = "### The server extension (`/user/<name>/<server>/gpuaas/api/`)"
SAMPLES = {"team": "team-a", "name": "nb-x", "file": "console.css"}
"""What each ``{placeholder}`` of a row's path stands for in a request."""
METHODS = ("get", "post", "put", "patch", "delete")


def table(heading: str) -> dict[tuple[str, str], list[str]]:
    """(method, path) → the row's answers (anonymous first), of the table under ``heading``."""
    lines = SECURITY.read_text().splitlines()
    rows: dict[tuple[str, str], list[str]] = {}
    for line in lines[lines.index(heading) + 1 :]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        found = re.fullmatch(r"`([A-Z]+) ?([^`]*)`", cells[0]) if line.startswith("|") else None
        if found is None:
            continue
        key = (found[1], found[2])
        assert key not in rows, f"{key} has two rows"
        rows[key] = cells[1:]
    assert rows, f"no table under {heading!r} in {SECURITY}"
    return rows


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
                f"{method} {regex.pattern} ({handler.__name__}) has no row in {SECURITY.name}"
            )
    for method, path in rows:
        assert any(
            method in methods and regex.fullmatch(prefix + concrete(path))
            for regex, _, methods in routes
        ), f"the row `{method} {path}` names no registered route"

"""Request bodies each OpenAPI document forbids, made from the document itself, for the tests
that send them to the servers and expect a 400 naming the field (both servers check every body
against their document: :mod:`jupyter_gpuaas.core.api_documents`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from jupyter_gpuaas.core.api_documents import Server, document

WRONG = {
    "string": 5,
    "integer": "5",
    "number": "5",
    "boolean": "yes",
    "object": [],
    "array": {},
}
"""A value of the wrong type for each JSON Schema type (none of them ``null``)."""


@dataclass(frozen=True)
class Forbidden:
    """A body ``operation`` (``METHOD path`` of the document, ``{placeholders}`` kept) does not
    take, and the field paths a refusal must name."""

    operation: str
    method: str
    path: str
    body: bytes
    paths: tuple[str, ...]
    why: str

    def __str__(self) -> str:
        return f"{self.operation}: {self.why}"


def _resolved(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _one_type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    return kind if isinstance(kind, str) and kind in WRONG else None


def _bodies(
    schema: dict[str, Any], components: dict[str, Any]
) -> Iterator[tuple[Any, tuple[str, ...], str]]:
    """(body, the paths its refusal names, why) of each body ``schema`` forbids (none empty)."""
    yield [], ("(body)",), "a list"
    required = tuple(schema.get("required", ()))
    if required:
        yield {}, required, "{}"
    for name, field in schema.get("properties", {}).items():
        field = _resolved(field, components)
        kind = _one_type(field)
        if kind is not None:
            yield {name: WRONG[kind]}, (name,), f"{name}: not of type {kind}"
        if "enum" in field:
            yield {name: "no-such-value"}, (name,), f"{name}: not in its enum"
    if schema.get("additionalProperties") is False:
        yield {"no_such_field": 1}, ("no_such_field",), "an unknown field"


def forbidden_bodies(server: Server) -> Iterator[Forbidden]:
    """For each operation with a JSON body: no body where one is required, not an object, each
    required field missing, each typed field of the wrong type, each enum's field a value not in
    it, an unknown field where the schema allows none."""
    doc = document(server)
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody") or {}
            media = body.get("content", {}).get("application/json")
            if media is None:
                continue
            op = operation["operationId"]
            if body.get("required"):
                yield Forbidden(op, method.upper(), path, b"", ("(body)",), "no body")
            schema = _resolved(media["schema"], doc["components"])
            for value, paths, why in _bodies(schema, doc["components"]):
                data = json.dumps(value).encode()
                yield Forbidden(op, method.upper(), path, data, paths, why)

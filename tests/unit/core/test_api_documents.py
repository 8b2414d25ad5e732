"""The OpenAPI documents as the servers load them (core/api_documents.py): the service's is
self-contained once its references to the extension's shared schemas are copied in, and each
request body is checked against its operation with every problem at a field path, in the
words of core/fields.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jupyter_gpuaas.core.api_documents import (
    MAX_BODY_ERRORS,
    SHARED_URI,
    BodyRefused,
    RequestBodies,
    bundled,
    document,
    field_path,
    references,
    request_bodies,
)
from jupyter_gpuaas.core.fields import FieldError


def test_the_services_document_holds_every_schema_it_names() -> None:
    doc = document("service")
    assert not [r for r in references(doc) if r.startswith(SHARED_URI)]
    names = set(doc["components"]["schemas"])
    assert {r.rsplit("/", 1)[1] for r in references(doc)} <= names
    assert "activity" in names  # the body of POST api/activity, shared with the servers


def test_a_shared_name_that_the_extension_does_not_hold_is_refused() -> None:
    own = {
        "components": {"schemas": {}},
        "paths": {"/x": {"get": {"$ref": SHARED_URI + "#/components/schemas/nope"}}},
    }
    with pytest.raises(KeyError, match="'nope', which is not shared"):
        bundled(own, {"components": {"schemas": {}}})


def test_the_validators_are_compiled_once_per_server() -> None:
    assert request_bodies("service") is request_bodies("service")
    assert set(request_bodies("extension").operations) == {
        "postResize",
        "postJob",
        "postKernelStateSnapshot",
        "postKernelStateRestore",
    }


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        ([], "(body)"),
        (["kernels", 0, "last_activity"], "kernels[0].last_activity"),
        (["parameters", "a b"], 'parameters["a b"]'),
    ],
)
def test_a_json_path_is_written_as_the_projects_field_paths(
    parts: list[str | int], path: str
) -> None:
    assert field_path(parts) == path


BODY = {
    "openapi": "3.1.0",
    "paths": {
        "/things": {
            "post": {
                "operationId": "postThing",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/t"}}},
                },
            },
            "put": {
                "operationId": "putThing",
                "requestBody": {
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
            },
        },
        "/text": {
            "post": {
                "operationId": "postText",
                "requestBody": {"content": {"application/yaml": {"schema": {"type": "string"}}}},
            }
        },
    },
    "components": {
        "schemas": {
            "t": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 3},
                    "count": {"type": "integer", "minimum": 1},
                    "kind": {"enum": ["gpu", "cpu"]},
                    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                    "note": {"type": ["string", "null"]},
                },
                "required": ["name", "count"],
                "additionalProperties": False,
            }
        }
    },
}


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({}, [("name", "is required"), ("count", "is required")]),
        ([], [("(body)", "must be an object, not a list")]),
        (
            {"name": "", "count": 0},
            [("name", "must not be empty"), ("count", "must be at least 1, not 0")],
        ),
        ({"name": "abcd", "count": 1}, [("name", "must be at most 3 characters, not 4")]),
        ({"name": "a", "count": 1.0}, [("count", "must be a whole number, not 1.0")]),
        ({"name": "a", "count": True}, [("count", "must be a whole number, not True")]),
        (
            {"name": "a", "count": 1, "kind": "gpus"},
            [("kind", "'gpus' is not one of gpu, cpu (did you mean 'gpu'?)")],
        ),
        (
            {"name": "a", "count": 1, "tags": ["x", 2]},
            [("tags", "must list at most 1 items, not 2"), ("tags[1]", "must be a string, not 2")],
        ),
        ({"name": "a", "count": 1, "note": 5}, [("note", "must be a string or null, not 5")]),
        ({"name": "a", "count": 1, "nam": 2}, [("nam", "unknown field (did you mean 'name'?)")]),
        (
            {"name": "a", "count": 1, "x": 2},
            [("x", "unknown field (it takes: name, count, kind, tags, note)")],
        ),
        ({"name": "x" * 1000, "count": 1}, [("name", "must be at most 3 characters, not 1000")]),
        (
            {"name": 10**100, "count": 1},
            [("name", "must be a string, not 1000000000000000000000000000000000000000…")],
        ),
    ],
)
def test_a_body_is_checked_against_its_operation_every_problem_at_its_path(
    body: Any, errors: list[tuple[str, str]]
) -> None:
    """Values are quoted cut short: an answer never echoes a long input."""
    bodies = RequestBodies(BODY)
    with pytest.raises(BodyRefused) as refused:
        bodies.read("postThing", json.dumps(body))
    assert [(e.path, e.message) for e in refused.value.errors] == errors
    assert str(refused.value) == "; ".join(f"{p}: {m}" for p, m in errors)


def test_what_a_body_may_be_passes() -> None:
    bodies = RequestBodies(BODY)
    good = {"name": "a", "count": 2, "kind": "cpu", "tags": ["x"], "note": None}
    assert bodies.read("postThing", json.dumps(good)) == good
    assert bodies.read("putThing", b"") is None  # not required: none at all is fine
    assert bodies.read("putThing", b"{}") == {}
    assert "postText" not in bodies  # another media type: its handler reads it


def test_no_body_where_one_is_required_and_not_json_are_refused_at_the_body() -> None:
    bodies = RequestBodies(BODY)
    with pytest.raises(BodyRefused) as refused:
        bodies.read("postThing", b"  ")
    assert refused.value.errors == (FieldError("(body)", "is required: send a JSON object"),)
    with pytest.raises(BodyRefused) as refused:
        bodies.read("postThing", b'{"name": NaN}')
    assert refused.value.not_json
    assert str(refused.value).startswith("not JSON: (body): ")
    with pytest.raises(BodyRefused) as refused:
        bodies.read("postThing", b"[" * 100 + b"]" * 100, max_depth=10)
    assert refused.value.errors[0].message == "nested deeper than 10 levels"


def test_a_refusal_lists_at_most_its_share_and_counts_the_rest() -> None:
    bodies = RequestBodies(BODY)
    body = {"name": "a", "count": 1, **{f"x{i}": i for i in range(MAX_BODY_ERRORS + 7)}}
    with pytest.raises(BodyRefused) as refused:
        bodies.read("postThing", json.dumps(body))
    assert len(refused.value.errors) == MAX_BODY_ERRORS
    assert refused.value.more == 7
    assert str(refused.value).endswith("; and 22 more problem(s)")  # the message names five

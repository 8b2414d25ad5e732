"""The OpenAPI documents as the servers load them (core/api_documents.py): the service's is
self-contained once its references to the extension's shared schemas are copied in, and each
request body is checked against its operation with every problem at a field path, in the
words of core/fields.py."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpuaas.core.api_documents import (
    MAX_BODY_ERRORS,
    SHARED_URI,
    BodyRefused,
    RequestBodies,
    Server,
    bundled,
    document,
    field_path,
    references,
    request_bodies,
)
from jupyter_gpuaas.core.fields import FieldError
from tests.support.request_bodies import forbidden_bodies


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


# --------------------------------------------------------------------------- the fast check


def _validators(server: Server) -> Iterator[tuple[str, Any, Any]]:
    """(operationId, the compiled check, the jsonschema validator) of each body."""
    bodies = request_bodies(server)
    for operation in bodies.operations:
        spec = bodies._bodies[operation]
        assert spec.valid is not None, f"{operation}: a keyword the fast check leaves out"
        yield operation, spec.valid, spec.validator


def test_every_body_of_both_documents_is_compiled() -> None:
    assert len(list(_validators("extension"))) + len(list(_validators("service"))) == 10


REPORT = {
    "sampled_at": "2026-12-01T00:00:00Z",
    "source": "nvml",
    "error": None,
    "kernels": [
        {
            "kernel_id": "k1",
            "execution_state": "idle",
            "last_activity": None,
            "connections": 1,
            "gpu_memory": 1024,
        }
    ],
    "terminals": [{"name": "1", "last_activity": None}],
    "gpu_memory": 1024,
    "gpu_utilization": [{"uuid": "GPU-1", "utilization": 40.5}],
    "idle_since": None,
    "keeps_kernel_state": True,
    "kernel_state": {
        "requested_at": "2026-12-01T00:00:00Z",
        "outcomes": [
            {
                "kernel_id": "k1",
                "notebook": "a.ipynb",
                "outcome": "kept_with_losses",
                "lost": [{"name": "gen", "reason": "a generator"}],
                "error": "",
                "bytes": 10,
                "seconds": 0.5,
                "saved_at": None,
            }
        ],
        "error": "",
    },
}

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.sampled_from([0, 1, -1, 1.0, 0.0, 100, 100.5, 101, 2**50, 2**50 + 1, 100_001]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=5),
    st.sampled_from(["", "busy", "kept", "failed", "x" * 257, "x" * 2001, "succeeded"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield here
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*here, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*here, i))


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with a few of its values replaced, removed or given a sibling."""
    body = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(body))))
        if not path:
            return draw(VALUES)
        parent = body
        for step in path[:-1]:
            parent = parent[step]
        how = draw(st.sampled_from(["replace", "remove", "add"]))
        if how == "replace" or isinstance(parent, list):
            parent[path[-1]] = draw(VALUES)
        elif how == "remove":
            del parent[path[-1]]
        else:
            parent[draw(st.text(max_size=8))] = draw(VALUES)
    return body


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.one_of(mutated(REPORT), st.just(REPORT), VALUES))
def test_the_fast_check_and_the_validator_agree_on_activity_reports(body: Any) -> None:
    """The fast check only says whether a body passes (the validator words the refusal): it
    must agree with the validator on every report, near the valid one or not."""
    bodies = request_bodies("service")
    spec = bodies._bodies["postActivity"]
    assert spec.valid is not None
    assert spec.valid(body) == spec.validator.is_valid(body)


def test_the_fast_check_and_the_validator_agree_on_every_body_of_both_documents() -> None:
    assert request_bodies("service").errors("postActivity", REPORT) == ([], 0)
    for server in ("extension", "service"):
        by_operation = {op: (valid, validator) for op, valid, validator in _validators(server)}
        cases = list(forbidden_bodies(server))
        for case in cases:
            if not case.body:
                continue
            body = json.loads(case.body)
            valid, validator = by_operation[case.operation]
            assert valid(body) is False is validator.is_valid(body), case
        for valid, validator in by_operation.values():
            for body in ({}, {"path": "a.ipynb", "notebook": {"cells": []}}, REPORT, []):
                assert valid(body) == validator.is_valid(body)

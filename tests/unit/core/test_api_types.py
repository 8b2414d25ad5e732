"""The Python types of the API's answers are the documents': the committed files are what
tests/support/api_types.py writes from them now, so a field changed in a document and not in
the code that builds it is a mypy error there."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import api_types


def test_the_committed_types_are_what_the_documents_write() -> None:
    assert api_types.problems() == []


def test_a_field_changed_in_a_document_makes_the_committed_types_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    changed = api_types.raw("extension")
    changed["components"]["schemas"]["queue"]["properties"]["synced"] = {"type": "string"}
    raw = api_types.raw
    monkeypatch.setattr(api_types, "raw", lambda s: changed if s == "extension" else raw(s))
    assert api_types.problems() == [
        "jupyter_gpuaas/core/api_types.py is not what the extension document generates:"
        " make api-types"
    ]
    assert "    synced: str\n" in api_types.render("extension")


@pytest.mark.parametrize(
    ("schema", "written"),
    [
        ({"type": ["integer", "null"]}, "int | None"),
        ({"enum": ["a", "b", None]}, "Literal['a', 'b'] | None"),
        ({"const": True}, "Literal[True]"),
        (
            {"type": "array", "items": {"$ref": "#/components/schemas/queue_item"}},
            "list[QueueItem]",
        ),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "dict[str, float]"),
        ({"oneOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({}, "Any"),
    ],
)
def test_each_schema_is_written_as_the_python_type_it_allows(
    schema: dict[str, Any], written: str
) -> None:
    assert api_types.annotation(schema) == written


def test_an_inline_object_is_a_class_of_its_own_named_after_where_it_is() -> None:
    """So that its fields are checked too (a ``dict[str, Any]`` would take any)."""
    nested: api_types.Nested = []
    cause_for = {
        "oneOf": [
            {"type": "object", "properties": {"team": {"const": "own"}}},
            {"type": "object", "properties": {"team": {"const": "other"}}},
            {"type": "null"},
        ]
    }
    assert api_types.annotation(cause_for, "CauseFor", nested) == (
        "CauseForOwn | CauseForOther | None"
    )
    rows = {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}
    assert api_types.annotation(rows, "Rows", nested) == "list[RowsItem]"
    assert [name for name, _ in nested] == ["CauseForOwn", "CauseForOther", "RowsItem"]
    assert api_types.annotation(rows) == "list[dict[str, Any]]"  # no name: as before
    written = api_types.render("extension")
    assert 'class ServiceReclaimCauseForOwn(TypedDict):\n    team: Literal["own"]\n' in written
    assert '"for": "ServiceReclaimCauseForOwn | ServiceReclaimCauseForOther | None"' in written

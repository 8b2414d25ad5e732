"""The server extension's HTTP API schema (``jupyter_gpuaas/server/api-schema.json``), for tests
that check a payload against it."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

import jupyter_gpuaas.server

SCHEMA_PATH = Path(jupyter_gpuaas.server.__file__).parent / "api-schema.json"


@cache
def api_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def schema_errors(definition: str, payload: Any) -> list[str]:
    """What is wrong with ``payload`` as the schema's ``$defs/<definition>``, each with its
    path in the payload (none when it matches)."""
    schema = api_schema()
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]}
    )
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(payload)'}: {e.message}"
        for e in validator.iter_errors(payload)
    ]

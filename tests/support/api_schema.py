"""The payload schemas of the HTTP API, for tests that check a payload against one: they live
in the two OpenAPI documents (:mod:`tests.support.openapi`)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.openapi import document, schema_errors

__all__ = ["api_schema", "schema_errors"]


def api_schema() -> dict[str, Any]:
    """Every schema of both documents as one JSON Schema's ``$defs``."""
    schemas = {
        **document("extension")["components"]["schemas"],
        **document("service")["components"]["schemas"],
    }
    text = json.dumps({"$defs": schemas}).replace("#/components/schemas/", "#/$defs/")
    merged: dict[str, Any] = json.loads(text)
    return merged

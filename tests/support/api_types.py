"""The Python types of the HTTP API's answers, written from the same OpenAPI documents as the
TypeScript types (:mod:`tests.support.openapi`, ``make api-types``), so that a drifted field is
a type error on both sides: mypy checks the Python answer builders against them.

Each object schema of ``components/schemas`` becomes a :class:`typing.TypedDict` (its required
properties in a base class, the others in the class itself, ``total=False``: the standard
library's way before ``NotRequired``, which Python 3.10 lacks); any other schema (an enum, a
``oneOf``) a type alias. ``jupyter_gpuaas/core/api_types.py`` holds the extension's document's
schemas, among them those both servers share; ``culler/gpuaas_service/api_types.py`` the
service's own, importing the shared ones. A property's type is what its schema says as far as
Python's types can say it (``enum`` and ``const`` as ``Literal``, ``oneOf`` and a list of types
as a union, a map as ``dict[str, ...]``). An inline object with properties is a TypedDict of its
own, written after the class that holds it and named after the path to it: its class's name,
the property's (``ServiceConsoleTeamQueued``), ``Item`` for an array's items, and where a
``oneOf`` has several objects, the value of each one's ``const`` property
(``ServiceReclaimCauseForOwn``) or its place (``...0``); an object without properties is a
``dict[str, Any]``.

    python -m tests.support.api_types          # rewrite both files
    python -m tests.support.api_types --check  # exit 1 if either is not what this writes
"""

from __future__ import annotations

import keyword
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jupyter_gpuaas.core.api_documents import Server, raw_document

ROOT = Path(__file__).resolve().parents[2]
raw = raw_document
"""Where the documents are read from (a test puts a changed one in its place)."""

OUTPUT: dict[Server, Path] = {
    "extension": ROOT / "jupyter_gpuaas/core/api_types.py",
    "service": ROOT / "culler/gpuaas_service/api_types.py",
}
SOURCE: dict[Server, str] = {
    "extension": "jupyter_gpuaas/server/openapi.json",
    "service": "culler/gpuaas_service/openapi.json",
}
PRIMITIVES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}
LOCAL = "#/components/schemas/"


def class_name(schema_name: str) -> str:
    """``service_job_offering`` -> ``ServiceJobOffering``."""
    return "".join(part[:1].upper() + part[1:] for part in schema_name.split("_"))


def _union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    if "Any" in unique:
        return "Any"
    # None last, as a reader expects
    unique.sort(key=lambda p: p == "None")
    return " | ".join(unique)


Nested = list[tuple[str, Mapping[str, Any]]]
"""The inline objects an annotation names, as (class name, schema), to be written too."""


def _variant(name: str | None, schema: Mapping[str, Any], index: int, alone: bool) -> str | None:
    """The class name of a ``oneOf``'s object: ``name`` where it is the only object, else
    after its ``const`` property's value, or its place."""
    if name is None or alone:
        return name
    for prop in (schema.get("properties") or {}).values():
        if isinstance(prop, Mapping) and isinstance(prop.get("const"), str):
            return name + class_name(prop["const"])
    return f"{name}{index}"


def annotation(  # noqa: C901 - a branch per keyword
    schema: Mapping[str, Any], name: str | None = None, nested: Nested | None = None
) -> str:
    """The Python type of a schema, written as an annotation. An inline object with
    properties is the class ``name`` (added to ``nested``), where both are given."""
    if "$ref" in schema:
        return class_name(str(schema["$ref"]).rsplit("/", 1)[-1])
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    if "enum" in schema:
        values = [v for v in schema["enum"] if v is not None]
        literal = f"Literal[{', '.join(repr(v) for v in values)}]"
        return _union([literal, "None"]) if None in schema["enum"] else literal
    for key in ("oneOf", "anyOf"):
        if key in schema:
            objects = [s for s in schema[key] if s.get("type") == "object"]
            return _union(
                [
                    annotation(s, _variant(name, s, i, len(objects) == 1), nested)
                    for i, s in enumerate(schema[key])
                ]
            )
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([annotation({**schema, "type": k}, name, nested) for k in kind])
    if kind == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return "list[Any]"
        return f"list[{annotation(items, name and name + 'Item', nested)}]"
    if kind == "object":
        if schema.get("properties") and name is not None and nested is not None:
            nested.append((name, schema))
            return name
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and not schema.get("properties"):
            return f"dict[str, {annotation(extra)}]"
        return "dict[str, Any]"
    if isinstance(kind, str) and kind in PRIMITIVES:
        return PRIMITIVES[kind]
    return "Any"


def _docstring(text: str, indent: str) -> list[str]:
    first = " ".join(text.split())
    if len(first) > 80:
        first = first[:77].rsplit(" ", 1)[0] + " ..."
    first = first.replace("\\", "\\\\").replace('"""', "'''")
    return [f'{indent}"""{first}"""']


def _typed_dicts(cls: str, schema: Mapping[str, Any]) -> list[str]:
    """The class ``cls`` of an object schema, and after it those of its inline objects."""
    nested: Nested = []
    lines = _typed_dict(cls, schema, nested)
    for name, inner in nested:
        lines += ["", "", *_typed_dicts(name, inner)]
    return lines


def _typed_dict(cls: str, schema: Mapping[str, Any], nested: Nested) -> list[str]:
    props: Mapping[str, Any] = schema.get("properties", {})
    required = [p for p in props if p in schema.get("required", ())]
    optional = [p for p in props if p not in required]
    types = {p: annotation(props[p], cls + class_name(p), nested) for p in props}
    bad = [p for p in props if not p.isidentifier() or keyword.iskeyword(p)]
    if bad:  # not a class body: the functional form takes any key (its types as strings)

        def fields(keys: list[str]) -> str:
            return ", ".join(f"{p!r}: {types[p]!r}" for p in keys)

        if not optional:
            return [f'{cls} = TypedDict("{cls}", {{{fields(required)}}})']
        if not required:
            return [f'{cls} = TypedDict("{cls}", {{{fields(optional)}}}, total=False)']
        return [
            f'_{cls}Required = TypedDict("_{cls}Required", {{{fields(required)}}})',
            f'_{cls}Optional = TypedDict("_{cls}Optional", {{{fields(optional)}}}, total=False)',
            "",
            "",
            f"class {cls}(_{cls}Required, _{cls}Optional):",
            "    pass",
        ]
    lines: list[str] = []
    base = "TypedDict"
    if required and optional:
        base = f"_{cls}Required"
        lines += [f"class {base}(TypedDict):"]
        lines += [f"    {p}: {types[p]}" for p in required]
        lines += ["", ""]
        required = []
    total = ", total=False" if optional else ""
    lines.append(f"class {cls}({base}{total}):")
    if schema.get("description"):
        lines += _docstring(str(schema["description"]), "    ")
        lines.append("")
    body = [f"    {p}: {types[p]}" for p in required + optional]
    lines += body or ["    pass"]
    return lines


def render(server: Server) -> str:
    """The Python source of the server's answer types."""
    schemas: dict[str, Any] = raw(server)["components"]["schemas"]
    shared: set[str] = set()
    if server == "service":
        theirs = raw("extension")["components"]["schemas"]
        shared = {n for n in schemas if n in theirs}
    own = {n: s for n, s in schemas.items() if n not in shared}
    return _assemble(server, own, shared)


def _assemble(server: Server, own: Mapping[str, Any], shared: set[str]) -> str:
    head = [
        f'"""The schemas of {SOURCE[server]} as Python types, for the code that builds its',
        "answers: a field that drifts from the document is a mypy error there. Written by",
        'tests/support/api_types.py (make api-types); never edited by hand."""',
        "",
        "# ruff: noqa",  # written: its lines are as long as its types
        "from __future__ import annotations",
        "",
        "from typing import Any, Literal, TypeAlias, TypedDict",
        "",
    ]
    used_shared = sorted(
        {
            class_name(ref.rsplit("/", 1)[-1])
            for schema in own.values()
            for ref in _refs(schema)
            if ref.rsplit("/", 1)[-1] in shared
        }
    )
    if used_shared:
        head += ["from jupyter_gpuaas.core.api_types import ("]
        head += [f"    {n}," for n in used_shared]
        head += [")", ""]
    body: list[str] = []
    for name, schema in own.items():
        body += ["", ""]
        if schema.get("type") == "object" and "properties" in schema:
            body += _typed_dicts(class_name(name), schema)
        else:
            # a string: it may name a class defined further down
            body.append(f'{class_name(name)}: TypeAlias = "{annotation(schema)}"')
    names = sorted(_defined(body))
    head += ["__all__ = ["] + [f'    "{n}",' for n in names] + ["]", ""]
    return _formatted(server, "\n".join(head + body) + "\n")


def _defined(lines: list[str]) -> list[str]:
    """The public names the written lines define (not the ``_...Required`` bases)."""
    found = []
    for line in lines:
        if line.startswith("class "):
            found.append(line[len("class ") :].split("(", 1)[0])
        elif line[:1].isupper() and (" = " in line or ": TypeAlias" in line):
            found.append(line.split(" ", 1)[0].rstrip(":"))
    return [n for n in found if not n.startswith("_")]


def _formatted(server: Server, text: str) -> str:
    """``text`` as ruff formats it (the repository's style), as the TypeScript types are
    prettier's."""
    import subprocess

    done = subprocess.run(
        [str(ROOT / ".venv/bin/ruff"), "format", "--stdin-filename", str(OUTPUT[server]), "-"],
        input=text,
        text=True,
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    return done.stdout


def _refs(node: Any) -> list[str]:
    if isinstance(node, Mapping):
        found = [str(node["$ref"])] if "$ref" in node else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def problems() -> list[str]:
    """Generated files that are not what the documents generate now."""
    return [
        f"{path.relative_to(ROOT)} is not what the {server} document generates: make api-types"
        for server, path in OUTPUT.items()
        if not path.exists() or path.read_text(encoding="utf-8") != render(server)
    ]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        found = problems()
        for problem in found:
            print(problem, file=sys.stderr)
        return 1 if found else 0
    for server, path in OUTPUT.items():
        path.write_text(render(server), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

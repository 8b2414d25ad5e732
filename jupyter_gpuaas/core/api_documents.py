"""The two OpenAPI documents of the HTTP API, and the request bodies they allow, checked at run
time by both servers (docs/api.md).

``jupyter_gpuaas/server/openapi.json`` is the server extension's; it also holds the payloads the
gpuaas service shares with the servers (what it takes from them and what they pass on to the
sidebar). ``gpuaas_service/openapi.json`` is the service's; as stored, it holds a copy of each
shared payload it names (``make api-types`` writes them with :func:`bundled`), so that a stock
tool loads it alone. A reference to the extension's document by its URI (:data:`SHARED_URI`:
the two packages are siblings in a wheel but not in the repository, so no relative path
reaches from one to the other) is resolved by :func:`document` all the same, which gives the
self-contained document: what the servers check bodies against, what the tests check answers
against.

:class:`RequestBodies` holds a compiled validator for each JSON request body of one document,
built once when a server starts (a server reports its activity every few seconds: a request
pays for a validation, never for a compilation). :meth:`RequestBodies.read` parses a body and
checks it against its operation; :class:`BodyRefused` lists every problem at its field path, in
the words of :mod:`jupyter_gpuaas.core.fields` (``kernels[0].connections: must be at least 0,
not -1``), so that the document and the handlers cannot disagree: what the document forbids is
a 400 naming the field, before a handler reads the body. Checks the document cannot state (a
time ahead of the service's clock, a team the caller is not in) stay with the handlers.

Who may call each operation is its ``x-gpuaas-access`` ``check`` (:data:`ACCESS_CHECKS`);
:func:`declare_operations` is the handlers' declaration of the operations they answer, which
refuses a handler whose check is another, as its class is defined.

Two readings differ from a stock JSON Schema validator's, both stricter: an ``integer`` is a
whole number written without a fraction (``1``, not ``1.0``, which Python reads as a float),
and ``format`` is not checked here (the handlers read times themselves).

Pure apart from reading the documents, which are package data, once per process.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from jupyter_gpuaas.core.fields import (
    FieldError,
    did_you_mean,
    key_path,
    quote,
    type_name,
)
from jupyter_gpuaas.core.parsing import MAX_DEPTH, ParseError, load_json

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError

__all__ = [
    "ACCESS_CHECKS",
    "LOCAL",
    "MAX_BODY_ERRORS",
    "SHARED_URI",
    "AccessMismatch",
    "BodyRefused",
    "RequestBodies",
    "Server",
    "access_checks",
    "bundled",
    "declare_operations",
    "document",
    "document_text",
    "field_path",
    "raw_document",
    "references",
    "request_bodies",
]

Server = Literal["extension", "service"]

LOCATIONS: Mapping[Server, tuple[str, str]] = {
    "extension": ("jupyter_gpuaas", "server/openapi.json"),
    "service": ("gpuaas_service", "openapi.json"),
}
"""Where each document is, as (package, path in it): package data, read through
:mod:`importlib.resources` (the service's package is named, not imported, here)."""
SHARED_URI = "urn:jupyter-gpuaas:server-extension-api"
"""How the service's document names the extension's (``$ref: "<this>#/components/schemas/X"``)."""
LOCAL = "#/components/schemas/"
MAX_BODY_ERRORS = 20
"""Problems a refusal lists (the rest are counted): an answer never grows with the input."""
_MESSAGE_ERRORS = 5
"""Problems a refusal's one-line message names (the sidebar shows the message)."""


def raw_document(server: Server) -> dict[str, Any]:
    """The document as it is stored (a new copy each call)."""
    package, path = LOCATIONS[server]
    resource = resources.files(package)
    for part in path.split("/"):
        resource = resource / part
    loaded: dict[str, Any] = json.loads(resource.read_text(encoding="utf-8"))
    return loaded


def references(node: Any) -> Iterator[str]:
    """Every ``$ref`` in ``node``, depth first."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from references(value)
    elif isinstance(node, list):
        for value in node:
            yield from references(value)


def _made_local(node: Any) -> Any:
    """``node`` with references to the shared document made local."""
    if isinstance(node, dict):
        return {
            k: (v.replace(SHARED_URI, "") if k == "$ref" and isinstance(v, str) else _made_local(v))
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_made_local(v) for v in node]
    return node


def bundled(own: Mapping[str, Any], shared: Mapping[str, Any]) -> dict[str, Any]:
    """``own`` with each schema it names of ``shared`` (by :data:`SHARED_URI`), and those they
    name in turn, copied into its ``components/schemas``, and its references made local.
    A name it gives that ``shared`` does not hold is a :class:`KeyError`."""
    doc = copy.deepcopy(dict(own))
    theirs = shared["components"]["schemas"]
    schemas = doc["components"]["schemas"]
    todo = [r for r in references(doc) if r.startswith(SHARED_URI + LOCAL)]
    while todo:
        name = todo.pop().removeprefix(SHARED_URI + LOCAL)
        if name in schemas:
            continue
        if name not in theirs:
            raise KeyError(f"the service's document names {name!r}, which is not shared")
        schemas[name] = copy.deepcopy(theirs[name])
        todo += [SHARED_URI + r for r in references(theirs[name]) if r.startswith(LOCAL)]
    made: dict[str, Any] = _made_local(doc)
    return made


@cache
def _document(server: Server) -> dict[str, Any]:
    own = raw_document(server)
    return bundled(own, raw_document("extension")) if server == "service" else own


def document(server: Server) -> dict[str, Any]:
    """The server's document, self-contained (a copy: callers may change it)."""
    return copy.deepcopy(_document(server))


@cache
def document_text(server: Server) -> str:
    """:func:`document` as the JSON text each server serves at ``.../openapi.json``."""
    return json.dumps(_document(server), ensure_ascii=False)


# --------------------------------------------------------------------------- who may call

ACCESS_CHECKS: Mapping[Server, frozenset[str]] = {
    "service": frozenset(
        {
            "none",
            "console",
            "console-all-teams",
            "hub-user",
            "operator-token",
            "server-token",
            "job-token",
        }
    ),
    "extension": frozenset(
        {
            "jupyter-server:api",
            "jupyter-server:kernels",
            "jupyter-server:contents",
            "jupyter-server:server",
        }
    ),
}
"""What an operation's ``x-gpuaas-access`` ``check`` may name: the checks each server makes
(docs/security.md says what each admits)."""

_T = TypeVar("_T", bound=type)


class AccessMismatch(TypeError):
    """A handler declared for an operation whose ``x-gpuaas-access`` ``check`` is not the one
    the handler makes: raised as its class is defined, so that such a server never starts."""


@cache
def access_checks(server: Server) -> Mapping[str, str]:
    """Each operation's (by ``operationId``) ``x-gpuaas-access`` ``check``."""
    return {
        operation["operationId"]: operation["x-gpuaas-access"]["check"]
        for item in raw_document(server)["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }


def declare_operations(
    server: Server, made_by: Callable[[Any], str], **operations: str | tuple[str, ...]
) -> Callable[[_T], _T]:
    """A class decorator: the handler answers each HTTP method (``get=``, ``post=``, ...) as
    these operations of the server's document (several where the path picks one), which it
    records as ``api_operations`` (method in upper case: its operationIds). The check the
    handler makes (``made_by(cls)``: the attribute its base sets where it makes that check)
    must be each operation's ``x-gpuaas-access`` ``check``; :class:`AccessMismatch` if not,
    or if the document has no such operation."""
    checks = access_checks(server)

    def declared(cls: _T) -> _T:
        made = made_by(cls)
        declared_ops: dict[str, tuple[str, ...]] = {}
        for method, named in operations.items():
            ids = (named,) if isinstance(named, str) else named
            for operation_id in ids:
                if operation_id not in checks:
                    raise AccessMismatch(
                        f"{cls.__name__}: the {server}'s document has no operation {operation_id!r}"
                    )
                if checks[operation_id] != made:
                    raise AccessMismatch(
                        f"{cls.__name__} answers {operation_id}, whose x-gpuaas-access check is"
                        f" {checks[operation_id]!r} in the {server}'s document, but it makes"
                        f" {made!r}"
                    )
            declared_ops[method.upper()] = ids
        setattr(cls, "api_operations", declared_ops)  # noqa: B010 - any handler class
        return cls

    return declared


# --------------------------------------------------------------------------- request bodies


def _whole_number(_checker: object, value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@cache
def _validator_class() -> Any:
    """JSON Schema 2020-12 (OpenAPI 3.1's dialect) with whole numbers as Python reads JSON.
    jsonschema is imported here, when a server builds its validators, not with this module:
    its import takes a second or more (its format checkers), which the admin's command line
    need not pay."""
    import jsonschema

    draft = jsonschema.Draft202012Validator
    checker = draft.TYPE_CHECKER.redefine("integer", _whole_number)
    return jsonschema.validators.extend(draft, type_checker=checker)


class BodyRefused(ValueError):
    """A request body that is not JSON or not what its operation's document allows: every
    problem at its field path (at most :data:`MAX_BODY_ERRORS`; ``more`` counts the rest)."""

    def __init__(self, errors: Iterable[FieldError], more: int = 0, *, not_json: bool = False):
        self.errors = tuple(errors)
        self.more = more
        self.not_json = not_json
        named = self.errors[:_MESSAGE_ERRORS]
        rest = more + len(self.errors) - len(named)
        tail = f"; and {rest} more problem(s)" if rest else ""
        words = "; ".join(str(e) for e in named) + tail
        super().__init__(f"not JSON: {words}" if not_json else words)


@dataclass(frozen=True)
class _Body:
    required: bool
    validator: Any  # a jsonschema validator (jsonschema ships no type hints)
    valid: Check | None
    """The same schema as one Python predicate (:func:`compiled`; ``None``: a keyword it does
    not compile): whether a body passes, an order of magnitude faster than the validator."""


class RequestBodies:
    """The JSON request bodies of one document, each operation's (by ``operationId``) with its
    validator compiled. Build it once per process (:func:`request_bodies`)."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        components = doc.get("components", {})
        self._bodies: dict[str, _Body] = {}
        for item in doc.get("paths", {}).values():
            for operation in item.values():
                body = operation.get("requestBody") if isinstance(operation, dict) else None
                media = body.get("content", {}).get("application/json") if body else None
                if body is None or media is None:
                    continue  # no body, or another media type its handler reads itself
                schema = {**media.get("schema", {}), "components": components}
                validator = _validator_class()
                validator.check_schema(schema)
                self._bodies[operation["operationId"]] = _Body(
                    bool(body.get("required")), validator(schema), compiled(schema, components)
                )

    def __contains__(self, operation: str) -> bool:
        return operation in self._bodies

    @property
    def operations(self) -> list[str]:
        """The ``operationId`` of each operation that takes a JSON body."""
        return list(self._bodies)

    def errors(self, operation: str, body: Any) -> tuple[list[FieldError], int]:
        """What is wrong with ``body`` (parsed JSON; ``None``: none sent) for ``operation``:
        the first :data:`MAX_BODY_ERRORS` problems and how many more there are."""
        spec = self._bodies[operation]
        if body is None:
            if spec.required:
                return [FieldError("(body)", "is required: send a JSON object")], 0
            return [], 0
        if spec.valid is not None and spec.valid(body):
            return [], 0  # the usual case, cheaply; the validator words what is wrong
        found: list[FieldError] = []
        seen: set[FieldError] = set()
        for error in spec.validator.iter_errors(body):
            for problem in _field_errors(error):
                if problem not in seen:  # "required": one error per missing field, each read
                    seen.add(problem)  # as all of them
                    found.append(problem)
        return found[:MAX_BODY_ERRORS], max(len(found) - MAX_BODY_ERRORS, 0)

    def read(
        self,
        operation: str,
        data: bytes | str,
        *,
        max_bytes: int | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> Any:
        """The body ``data`` of a request to ``operation`` as JSON (``None`` when empty and
        the operation allows that), bounded as :func:`~jupyter_gpuaas.core.parsing.load_json`
        bounds it (``max_bytes``: by default its own length, which the server bounded);
        :class:`BodyRefused` when it is not JSON or not what the document allows."""
        try:
            body = load_json(
                data, max_bytes=len(data) if max_bytes is None else max_bytes, max_depth=max_depth
            )
        except ParseError as e:
            raise BodyRefused([FieldError(e.path, e.message)], not_json=True) from None
        found, more = self.errors(operation, body)
        if found:
            raise BodyRefused(found, more)
        return body


@cache
def request_bodies(server: Server) -> RequestBodies:
    """The server's :class:`RequestBodies`, compiled on the first call (each server's app calls
    this as it starts)."""
    return RequestBodies(_document(server))


# --------------------------------------------------------------------------- the fast check

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {"description", "format", "title", "example", "examples", "default", "deprecated"}
    | {"readOnly", "writeOnly", "components", "$schema", "$comment"}
)
"""Keywords that never make a body invalid (``format`` is an annotation in 2020-12 and not
asserted here either; ``components``: the definitions the references point into)."""

_TYPES: Mapping[str, Check] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1`` (as JSON Schema's ``enum`` and ``const`` compare)."""
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def compiled(schema: Mapping[str, Any], components: Mapping[str, Any]) -> Check | None:
    """``schema`` (its ``#/components/schemas/...`` references into ``components``) as one
    predicate with the validator's verdict, or ``None`` where it uses a keyword this does not
    compile (then the validator alone decides). Only the verdict comes from here: what is
    wrong with a body is always the validator's (tests/unit/core/test_api_documents.py checks
    the two agree)."""
    named: dict[str, Check] = {}

    def reference(ref: str) -> Check:
        name = ref.removeprefix(LOCAL)
        if name not in named:
            named[name] = lambda v: named[name](v)  # a cycle: resolved once compiled
            named[name] = build(components["schemas"][name])
        return named[name]

    def build(node: Mapping[str, Any]) -> Check:
        present: list[Check] = []
        for key, value in node.items():
            check = _keyword(key, value, node, build, reference)
            if check is None:
                raise _NotCompiled
            if check is not _ANY:
                present.append(check)
        return _all_of(present)

    if not all(r.startswith(LOCAL) for r in references(dict(schema))):
        return None
    try:
        return build(schema)
    except _NotCompiled:
        return None


def _all_of(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def check(value: Any) -> bool:
        for c in checks:  # noqa: SIM110 - a loop: all() of a generator costs more than the checks
            if not c(value):
                return False
        return True

    return check


class _NotCompiled(Exception):
    """A keyword :func:`compiled` leaves to the validator."""


def _ANY(_value: Any) -> bool:
    return True


def _keyword(  # noqa: C901 - one branch per keyword, each a line
    key: str,
    value: Any,
    node: Mapping[str, Any],
    build: Callable[[Mapping[str, Any]], Check],
    reference: Callable[[str], Check],
) -> Check | None:
    """One keyword of a schema as a predicate (``_ANY`` for an annotation; ``None``: not
    compiled). Each applies to the kind of value it is about, as in JSON Schema."""
    if key in _ANNOTATIONS or key.startswith("x-"):
        return _ANY
    if key == "$ref":
        return reference(value)
    if key == "type":
        kinds = [_TYPES[k] for k in ([value] if isinstance(value, str) else value)]
        return kinds[0] if len(kinds) == 1 else lambda v: any(k(v) for k in kinds)
    if key == "properties":
        return _properties({name: build(sub) for name, sub in value.items()})
    if key == "required":
        return lambda v: not isinstance(v, dict) or all(name in v for name in value)
    if key == "additionalProperties":
        if set(node) & {"patternProperties"}:
            return None
        known = frozenset(node.get("properties", {}))
        extra = build(value) if isinstance(value, dict) else (lambda _v: bool(value))
        return lambda v: (
            not isinstance(v, dict)
            or all(extra(item) for name, item in v.items() if name not in known)
        )
    if key == "items" and isinstance(value, dict):
        return _items(build(value))
    if key == "enum":
        return lambda v: any(_same(v, choice) for choice in value)
    if key == "const":
        return lambda v: _same(v, value)
    bounds: dict[str, Callable[[Any], bool]] = {
        "minimum": lambda v: v >= value,
        "maximum": lambda v: v <= value,
        "exclusiveMinimum": lambda v: v > value,
        "exclusiveMaximum": lambda v: v < value,
    }
    if key in bounds:
        bound = bounds[key]
        return lambda v: not _number(v) or bound(v)
    if key in ("minLength", "maxLength"):
        short = key == "minLength"
        return lambda v: not isinstance(v, str) or (len(v) >= value if short else len(v) <= value)
    if key in ("minItems", "maxItems"):
        few = key == "minItems"
        return lambda v: not isinstance(v, list) or (len(v) >= value if few else len(v) <= value)
    if key == "pattern":
        pattern = re.compile(value)
        return lambda v: not isinstance(v, str) or pattern.search(v) is not None
    return None


def _properties(subs: Mapping[str, Check]) -> Check:
    def check(value: Any) -> bool:
        if isinstance(value, dict):
            for name, item in value.items():
                sub = subs.get(name)
                if sub is not None and not sub(item):
                    return False
        return True

    return check


def _items(each: Check) -> Check:
    def check(value: Any) -> bool:
        if isinstance(value, list):
            for item in value:
                if not each(item):
                    return False
        return True

    return check


# --------------------------------------------------------------------------- the words


def field_path(parts: Iterable[str | int]) -> str:
    """A JSON path as the project writes field paths: ``kernels[0].last_activity``,
    ``parameters["a b"]``; the whole body: ``(body)``."""
    path = ""
    for part in parts:
        path = f"{path}[{part}]" if isinstance(part, int) else key_path(path, part)
    return path or "(body)"


_TYPE_WORDS = {
    "string": "a string",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
    "array": "a list",
    "null": "null",
}


def _kind(value: Any) -> str:
    """A value as "not ..." names it: a scalar itself (quoted, cut short), else its kind."""
    if value is None or isinstance(value, bool | int | float | str):
        return "null" if value is None else quote(value)
    return type_name(value)


def _field_errors(error: ValidationError) -> list[FieldError]:
    """One jsonschema error as field errors (several for ``additionalProperties``)."""
    path = field_path(error.absolute_path)
    keyword, limit, value = error.validator, error.validator_value, error.instance
    if keyword == "required":
        return [
            FieldError(key_path("" if path == "(body)" else path, name), "is required")
            for name in limit
            if isinstance(value, dict) and name not in value
        ]
    if keyword == "additionalProperties" and isinstance(value, dict):
        known = list(error.schema.get("properties", {}))
        base = "" if path == "(body)" else path
        return [
            FieldError(key_path(base, str(name)), f"unknown field{_known(str(name), known)}")
            for name in value
            if name not in known
        ]
    return [FieldError(path, _message(str(keyword), limit, value, error))]


def _type_words(limit: Any, value: Any) -> str:
    kinds = [limit] if isinstance(limit, str) else list(limit)
    wanted = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
    return f"must be {wanted}, not {_kind(value)}"


def _enum_words(limit: Any, value: Any) -> str:
    choices = [str(c) for c in limit]
    more = did_you_mean(value, choices) if isinstance(value, str) else ""
    return f"{quote(value)} is not one of {', '.join(choices)}{more}"


def _length_words(limit: Any, value: Any) -> str:
    if limit == 1:
        return "must not be empty"
    return f"must be at least {limit} characters, not {len(value)}"


_WORDS: Mapping[str, Callable[[Any, Any], str]] = {
    "type": _type_words,
    "enum": _enum_words,
    "const": lambda limit, value: f"must be {quote(limit)}, not {quote(value)}",
    "minimum": lambda limit, value: f"must be at least {limit}, not {quote(value)}",
    "maximum": lambda limit, value: f"must be at most {limit}, not {quote(value)}",
    "exclusiveMinimum": lambda limit, value: f"must be more than {limit}, not {quote(value)}",
    "exclusiveMaximum": lambda limit, value: f"must be less than {limit}, not {quote(value)}",
    "minLength": _length_words,
    "maxLength": lambda limit, value: f"must be at most {limit} characters, not {len(value)}",
    "minItems": lambda limit, value: f"must list at least {limit} items, not {len(value)}",
    "maxItems": lambda limit, value: f"must list at most {limit} items, not {len(value)}",
    "pattern": lambda limit, value: f"{quote(value)} does not match {limit}",
}
"""What is wrong, by the keyword that failed, in the words of core/fields.py (values quoted,
cut short): each takes the keyword's value in the schema and the value in the body."""


def _known(name: str, known: list[str]) -> str:
    """After "unknown field": the closest known one, else the known ones (a few)."""
    hint = did_you_mean(name, known)
    if hint or not known or len(known) > _KNOWN_LISTED:
        return hint
    return f" (it takes: {', '.join(known)})"


_KNOWN_LISTED = 10
"""The most known fields an "unknown field" lists when none is close."""


def _message(keyword: str, limit: Any, value: Any, error: ValidationError) -> str:
    words = _WORDS.get(keyword)
    # a keyword the documents' bodies do not use today: jsonschema's words, cut short
    return words(limit, value) if words else error.message[:200]

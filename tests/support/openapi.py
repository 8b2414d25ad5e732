"""The two OpenAPI documents of the HTTP API, for the tests and ``make lint``.

What they are and how the service's names the extension's shared payloads is
:mod:`jupyter_gpuaas.core.api_documents`, which loads them (the servers check request bodies
against them at run time); :func:`document` is its self-contained document, kept once here.

:func:`answer_errors` checks a real answer against its operation with openapi-core;
:func:`schema_errors` checks a payload against one schema of ``components``.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import jsonschema
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse

import gpuaas_service
import jupyter_gpuaas.server
from jupyter_gpuaas.core import api_documents
from jupyter_gpuaas.core.api_documents import LOCAL
from jupyter_gpuaas.core.api_documents import Server as Server

PATHS: dict[Server, Path] = {
    "extension": Path(jupyter_gpuaas.server.__file__).parent / "openapi.json",
    "service": Path(gpuaas_service.__file__).parent / "openapi.json",
}
PREFIXES: dict[Server, str] = {"extension": "/gpuaas/api", "service": "/services/gpuaas"}
"""Each document's server URL as the tests' requests see it (the extension's base URL: ``/``)."""
METHODS = ("get", "put", "post", "delete", "patch")
CALLERS = (
    "anonymous",
    "another user",
    "the owner",
    "the server's own token",
    "a team lead",
    "an operator",
)
"""Who asks, in each operation's ``x-gpuaas-access`` ``callers`` (docs/security.md says who
each is): the columns of the authorisation tables."""


def raw(server: Server) -> dict[str, Any]:
    """The document as it is stored."""
    return api_documents.raw_document(server)


@cache
def _document(server: Server) -> dict[str, Any]:
    return api_documents.document(server)


def document(server: Server) -> dict[str, Any]:
    """The server's document, self-contained (a copy: callers may change it)."""
    return copy.deepcopy(_document(server))


@cache
def _openapi(server: Server) -> OpenAPI:
    return OpenAPI.from_dict(_document(server))


def schema_errors(definition: str, payload: Any) -> list[str]:
    """What is wrong with ``payload`` as ``components/schemas/<definition>`` of the document
    that holds it, each with its path in the payload (none when it matches)."""
    for server in PATHS:
        schemas = raw(server)["components"]["schemas"]
        if definition in schemas:
            break
    else:
        raise KeyError(f"no schema {definition!r} in either OpenAPI document")
    validator = jsonschema.Draft202012Validator(
        {"$ref": LOCAL + definition, "components": _document(server)["components"]}
    )
    return [
        f"{'/'.join(map(str, e.absolute_path)) or '(payload)'}: {e.message}"
        for e in validator.iter_errors(payload)
    ]


def answer_errors(
    server: Server,
    method: str,
    url: str,
    status: int,
    body: bytes | str,
    content_type: str = "application/json",
) -> list[str]:
    """What is wrong with a real answer (``status``, ``body``) to ``method url`` against the
    server's document (its operation, that status's response and its schema); none when it
    conforms. ``url``: the path the request went to, from the server's root (a query too)."""
    parts = urlsplit(url)
    path = parts.path
    prefix = PREFIXES[server]
    assert prefix in path, f"{url} is not under {prefix}"
    path = path[path.index(prefix) :]
    args = dict(parse_qsl(parts.query, keep_blank_values=True))
    template = _template(server, path.removeprefix(prefix))
    pattern = prefix + template if template else None
    request = MockRequest("http://localhost", method.lower(), path, pattern, args=args)
    data = body.encode() if isinstance(body, str) else body
    response = MockResponse(data, status_code=status, content_type=content_type.split(";")[0])
    result = _openapi(server).unmarshal_response(request, response)
    return [_explain(e) for e in result.errors]


def _template(server: Server, path: str) -> str | None:
    """The document's path that ``path`` is, each ``{parameter}`` matching what its schema's
    ``pattern`` allows (without one: a single segment). openapi-core's own matching takes a
    parameter for one segment, and a file of the console page may be ``js/.../main.js``."""
    template: str
    for template, item in raw(server)["paths"].items():
        patterns: dict[str, str] = {
            p["name"]: p.get("schema", {}).get("pattern", "^[^/]+$").strip("^$")
            for op in item.values()
            if isinstance(op, dict)
            for p in op.get("parameters", [])
            if p.get("in") == "path"
        }
        parts = re.split(r"\{(\w+)\}", template)  # text, name, text, name, ..., text
        regex = "".join(
            re.escape(part) if i % 2 == 0 else f"(?:{patterns.get(part, '[^/]+')})"
            for i, part in enumerate(parts)
        )
        if re.fullmatch(regex, path):
            return template
    return None


def _explain(error: Exception) -> str:
    found = getattr(error.__cause__, "schema_errors", None) or []
    details = [f"{'/'.join(map(str, e.absolute_path)) or '(body)'}: {e.message}" for e in found]
    return "; ".join([type(error).__name__ + ": " + str(error).split(": (")[0], *details])


def response_errors(server: Server, response: Any) -> list[str]:
    """:func:`answer_errors` of a tornado ``HTTPResponse`` (its request's method and URL)."""
    return answer_errors(
        server,
        response.request.method,
        response.effective_url,
        response.code,
        response.body or b"",
        response.headers.get("Content-Type", "application/json"),
    )


@contextmanager
def every_answer_checked(server: Server, package: str) -> Iterator[list[str]]:
    """Within: each answer a handler of ``package`` sends (tornado's ``finish``) is checked
    against the server's document, and what does not conform is added to the list yielded
    (empty when all did). A 405, a method the route does not answer, has no operation."""
    from tornado import web

    found: list[str] = []
    finish = web.RequestHandler.finish
    # openapi-core builds its validators on first use (about a second): not inside a timed test
    answer_errors(server, "GET", PREFIXES[server] + "/nothing", 404, b"")

    def checked_finish(self: web.RequestHandler, chunk: Any = None) -> Any:
        if chunk is not None:
            self.write(chunk)
        status, uri = self.get_status(), self.request.uri or ""
        if (
            type(self).__module__.startswith(package + ".")
            and not self._headers_written
            and status != 405
            and PREFIXES[server] in uri
        ):
            body = b"".join(self._write_buffer)
            if self._headers.get("Content-Encoding") == "gzip":  # an answer kept compressed
                body = gzip.decompress(body)
            content_type = str(self._headers.get("Content-Type", "application/json"))
            method = self.request.method or "GET"
            for problem in answer_errors(server, method, uri, status, body, content_type):
                found.append(f"{method} {uri} {status}: {problem}")
        return finish(self)

    web.RequestHandler.finish = checked_finish  # type: ignore[method-assign]
    try:
        yield found
    finally:
        web.RequestHandler.finish = finish  # type: ignore[method-assign]


def operations(server: Server) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Each operation of the document: method (upper case), path (with its ``{placeholders}``,
    without the leading ``/``) and the operation."""
    for path, item in raw(server)["paths"].items():
        for method in METHODS:
            if method in item:
                yield method.upper(), path.removeprefix("/"), item[method]


# --------------------------------------------------------------------------- make lint

ROOT = Path(__file__).resolve().parents[2]
TYPESCRIPT: dict[Server, Path] = {
    "extension": ROOT / "labextension/src/extensionApi.ts",
    "service": ROOT / "culler/gpuaas_service/console/src/serviceApi.ts",
}
"""Where each document's TypeScript types are written: the sidebar's, the console page's."""
HEADER = "// From {source} (make api-types).\n"


def typescript(server: Server) -> str:
    """The TypeScript types of the server's document, as openapi-typescript writes them and
    prettier formats them."""
    import subprocess
    import tempfile

    source = {"extension": "jupyter_gpuaas/server/openapi.json"}.get(
        server, "culler/gpuaas_service/openapi.json"
    )
    with tempfile.TemporaryDirectory() as tmp:
        bundled = Path(tmp) / f"{server}.json"
        out = Path(tmp) / f"{server}.ts"
        bundled.write_text(json.dumps(_document(server)), encoding="utf-8")
        subprocess.run(
            [str(ROOT / "node_modules/.bin/openapi-typescript"), str(bundled), "-o", str(out)],
            check=True,
            capture_output=True,
        )
        text = HEADER.format(source=source) + out.read_text(encoding="utf-8")
        formatted = subprocess.run(
            [str(ROOT / "node_modules/.bin/prettier"), "--stdin-filepath", str(TYPESCRIPT[server])],
            input=text,
            text=True,
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
    return formatted.stdout


def _named_by_uri(node: Any, names: set[str]) -> Any:
    """``node`` with its local references to ``names`` written as references to the extension's
    document (:data:`~jupyter_gpuaas.core.api_documents.SHARED_URI`)."""
    if isinstance(node, dict):
        return {
            k: (
                api_documents.SHARED_URI + v
                if k == "$ref"
                and isinstance(v, str)
                and v.startswith(LOCAL)
                and v.removeprefix(LOCAL) in names
                else _named_by_uri(v, names)
            )
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_named_by_uri(v, names) for v in node]
    return node


def stored_service_document() -> dict[str, Any]:
    """The service's document as it is stored: its own routes and schemas, and a copy of each
    schema of the extension's document that it names (and of those these name), so that it
    stands alone for any OpenAPI tool. The two documents' schema names are one namespace: a
    schema of the service's that the extension's also holds is a copy, and is copied again
    (``make api-types``); a reference to the extension's document by its URI is made local."""
    own = raw("service")
    shared = raw("extension")
    theirs = set(shared["components"]["schemas"])
    schemas = own["components"]["schemas"]
    for name in [n for n in schemas if n in theirs]:
        del schemas[name]
    return api_documents.bundled(_named_by_uri(own, theirs), shared)


def json_text(doc: dict[str, Any]) -> str:
    """A document as the repository stores it."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def bundle_problems() -> list[str]:
    """The service's stored document differs from what :func:`stored_service_document` writes:
    a shared schema not copied, or not as the extension's document has it now."""
    try:
        text = json_text(stored_service_document())
    except KeyError as e:
        return [f"{PATHS['service']}: {e.args[0]}"]
    if PATHS["service"].read_text(encoding="utf-8") == text:
        return []
    return [
        f"{PATHS['service'].relative_to(ROOT)}: the schemas it shares with the extension's"
        " document are not copied in as that document has them: make api-types"
    ]


def document_problems() -> list[str]:
    """What openapi-spec-validator finds wrong with either document as it is stored, alone
    (none when both are valid), and what is wrong with an operation's ``x-gpuaas-access``."""
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    problems = []
    for server in PATHS:
        try:
            validate(raw(server))
        except (OpenAPIValidationError, AssertionError) as e:
            problems.append(f"{PATHS[server]}: {e}")
        for method, path, operation in operations(server):
            problems += [
                f"{server}: {method} {path}: {p}" for p in _access_problems(server, operation)
            ]
    return problems


def _access_problems(server: Server, operation: dict[str, Any]) -> list[str]:
    """What is wrong with an operation's ``x-gpuaas-access``: it must name a check the server
    makes, say what the route needs and answer for every caller, in :data:`CALLERS`' order,
    only with statuses it lists."""
    access = operation.get("x-gpuaas-access")
    if not isinstance(access, dict) or not access.get("needs"):
        return ["no x-gpuaas-access with what it needs"]
    checks = api_documents.ACCESS_CHECKS[server]
    if access.get("check") not in checks:
        return [f"x-gpuaas-access check {access.get('check')!r} is none of {sorted(checks)}"]
    callers = access.get("callers") or {}
    if list(callers) != list(CALLERS):
        return [f"x-gpuaas-access callers {list(callers)}, not {list(CALLERS)}"]
    return [
        f"x-gpuaas-access says {caller!r} gets {code}, which its responses do not list"
        for caller, cell in callers.items()
        for code in re.findall(r"\b[1-5]\d\d\b", cell)
        if code not in operation["responses"]
    ]


def typescript_problems(servers: Iterable[Server] = ("extension", "service")) -> list[str]:
    """Generated TypeScript files that differ from what the documents generate now."""
    return [
        f"{TYPESCRIPT[s].relative_to(ROOT)} is not what the {s} document generates: make api-types"
        for s in servers
        if not TYPESCRIPT[s].exists() or TYPESCRIPT[s].read_text(encoding="utf-8") != typescript(s)
    ]


API_PAGE = ROOT / "docs" / "api.md"
PAGE_PREFIXES: dict[Server, str] = {"extension": "gpuaas/api/", "service": ""}
"""How docs/api.md writes each server's paths."""


def api_page_problems() -> list[str]:
    """What docs/api.md, the API's reference for people, misses of the documents: an operation
    it never names (`METHOD path`; the extension's under ``gpuaas/api/``), or a schema its
    answers' table names that neither document has."""
    text = API_PAGE.read_text(encoding="utf-8")
    named = {(m[1], m[2].strip()) for m in re.finditer(r"`([A-Z]+) ([^`\[?]*)", text)}
    problems = [
        f"docs/api.md names no `{method} {prefix}{path}` ({op['operationId']}, the {server})"
        for server, prefix in PAGE_PREFIXES.items()
        for method, path, op in operations(server)
        if (method, prefix + path) not in named
    ]
    schemas = {n for server in PATHS for n in raw(server)["components"]["schemas"]}
    start = text.index("| answer | schema")
    table = text[start : text.index("\n\n", start)]
    for row in table.splitlines()[2:]:
        for name in re.findall(r"`(\w+)`", row.rsplit("|", 2)[1]):
            if name not in schemas:
                problems.append(f"docs/api.md names a schema {name!r} that no document has")
    return problems


SECURITY = ROOT / "docs" / "security.md"
HEADINGS: dict[Server, str] = {
    "service": "### The gpuaas service (`/services/gpuaas/`)",
    "extension": "### The server extension (`/user/<name>/<server>/gpuaas/api/`)",
}


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


def main(argv: list[str] | None = None) -> int:
    import argparse

    from tests.support import api_types  # it reads the documents through this module

    parser = argparse.ArgumentParser(
        prog="python -m tests.support.openapi",
        description="Check the HTTP API's OpenAPI documents and what is generated from them: "
        "the shared schemas' copies in the service's document, the TypeScript and Python types, "
        "docs/security.md's route tables (make lint); --write rewrites those (make api-types).",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="copy the shared schemas, rewrite the TypeScript and Python types and security.md's"
        " tables",
    )
    args = parser.parse_args(argv)

    if args.write and bundle_problems():
        with suppress(KeyError):  # a name the extension's does not hold: said below
            PATHS["service"].write_text(json_text(stored_service_document()), encoding="utf-8")
            print(f"wrote the shared schemas into {PATHS['service'].relative_to(ROOT)}")
    problems = bundle_problems() + document_problems()
    if not problems and args.write:
        for server, path in TYPESCRIPT.items():
            path.write_text(typescript(server), encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
        SECURITY.write_text(security_page(SECURITY.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the tables of {SECURITY.relative_to(ROOT)}")
        api_types.main([])
    problems += typescript_problems() + api_types.problems() + api_page_problems()
    text = SECURITY.read_text(encoding="utf-8")
    if security_page(text) != text:
        problems.append(
            f"{SECURITY.relative_to(ROOT)}: the tables of 'Who may call each route' are not "
            "the documents' x-gpuaas-access: make api-types"
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print("the OpenAPI documents are valid and what they generate is current")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

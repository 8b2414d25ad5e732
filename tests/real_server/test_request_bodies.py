"""A real Jupyter server with the extension checks every request body against the extension's
OpenAPI document before a handler acts on it (jupyter_gpuaas/server/handlers.py ``json_body``,
core/api_documents.py): each body the document forbids, made from the document itself, is a
400 naming its field, on every route that takes one, answered as jupyter-server answers an
error plus every problem at its path. The bodies the document allows pass: the other tests
here send them."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpuaas.core.api_documents import request_bodies
from tests.support.jupyter_fetch import Fetch
from tests.support.request_bodies import Forbidden, forbidden_bodies
from tests.support.route_table import concrete

FORBIDDEN = list(forbidden_bodies("extension"))


def test_every_operation_that_takes_a_json_body_is_in_the_table() -> None:
    assert {case.operation for case in FORBIDDEN} == set(request_bodies("extension").operations)
    assert len(FORBIDDEN) > 20


async def test_each_body_the_document_forbids_is_a_400_naming_its_fields(
    jp_fetch: Fetch,
) -> None:
    """One server for the whole table (a server per case would start 25)."""
    for case in FORBIDDEN:
        await _refused(jp_fetch, case)


async def _refused(jp_fetch: Fetch, case: Forbidden) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(
            "gpuaas",
            "api",
            *concrete(case.path.removeprefix("/")).split("/"),
            method=case.method,
            body=case.body,
            allow_nonstandard_methods=True,  # an empty POST body
        )
    assert refused.value.code == 400, case
    assert refused.value.response is not None
    answer = json.loads(refused.value.response.body)
    named = [e["path"] for e in answer["errors"]]
    assert set(case.paths) <= set(named), (case, answer)
    assert answer["message"].startswith("invalid request body: "), (case, answer)
    assert named[0] in answer["message"], (case, answer)


async def test_a_refusal_is_jupyter_servers_error_with_every_problem(jp_fetch: Fetch) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch(
            "gpuaas", "api", "kernel-state", "restore", method="POST", body='{"path": "a.ipynb"}'
        )
    assert refused.value.code == 400
    assert refused.value.response is not None
    assert json.loads(refused.value.response.body) == {
        "message": "invalid request body: kernel_id: is required",
        "reason": None,
        "errors": [{"path": "kernel_id", "message": "is required"}],
        "more_errors": 0,
    }

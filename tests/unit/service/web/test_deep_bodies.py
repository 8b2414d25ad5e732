"""Bodies nested deeper than the recursion limit, or not JSON, to the service's JSON endpoints:
a 400 with the path down to where it is too deep, never a 500 (core/parsing.py)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import HubJSONHandler
from gpuaas_service.web.context import ServiceContext
from tests.support.jobs_samples import NOTEBOOK, FakeKube, service
from tests.unit.service.web.test_jobs import FakeHubAuth as JobsHubAuth
from tests.unit.service.web.test_reclaim import Served, served  # noqa: F401

DEEP = b"[" * 30_000 + b"]" * 30_000  # json.loads alone: RecursionError; 60 KB < 64 KiB


async def post(port: int, path: str, token: str, body: bytes) -> tuple[int, Any]:
    req = HTTPRequest(
        f"http://127.0.0.1:{port}/services/gpuaas/{path}",
        method="POST",
        body=body,
        headers={"Authorization": f"token {token}"},
    )
    try:
        resp = await AsyncHTTPClient().fetch(req)
    except HTTPClientError as e:
        return e.code, json.loads(e.response.body) if e.response is not None else None
    return resp.code, json.loads(resp.body)


async def test_a_deep_activity_report_is_a_400_with_its_path(served: Served) -> None:  # noqa: F811
    code, answer = await post(served.port, "api/activity", "server-alice", DEEP)
    assert code == 400, answer
    (error,) = answer["errors"]
    assert error == {
        "path": "(body)[0][0][0][0]…[0][0][0][0]",
        "message": "nested deeper than 64 levels",
    }
    deep_kernel = b'{"kernels": [{"state": ' + b"[" * 70 + b"]" * 70 + b"}]}"
    code, answer = await post(served.port, "api/activity", "server-alice", deep_kernel)
    assert code == 400, answer
    assert answer["errors"][0]["path"].startswith("(body).kernels[0].state[0]")
    code, answer = await post(served.port, "api/activity", "server-alice", b"\xff{}")
    assert code == 400, answer
    assert answer["errors"][0]["message"].startswith("not UTF-8")


@asynccontextmanager
async def jobs_app(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[FakeKube, int]]:
    kube = FakeKube()
    app = make_app(ServiceContext(jobs=service(kube), hub_auth=JobsHubAuth()))
    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app)
    server.add_sockets([sock])
    try:
        yield kube, sock.getsockname()[1]
    finally:
        server.stop()


async def test_a_deep_job_submission_is_a_400_with_its_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with jobs_app(monkeypatch) as (kube, port):
        code, answer = await post(port, "api/jobs", "server-alice", DEEP)
        assert code == 400, answer
        assert answer["errors"][0]["path"].startswith("(body)[0][0]")
        # a notebook whose output nests too deep: the path names the cell and the output
        output = {"output_type": "display_data", "metadata": {}, "data": {}}
        notebook = {**NOTEBOOK, "cells": [{**NOTEBOOK["cells"][0], "outputs": [output]}]}
        body = json.dumps({"path": "work/t.ipynb", "notebook": notebook, "offering": "mig-1g"})
        nested = "[" * 120 + "]" * 120
        body = body.replace('"data": {}', f'"data": {{"application/json": {nested}}}')
        code, answer = await post(port, "api/jobs", "server-alice", body.encode())
        assert code == 400, answer
        (error,) = answer["errors"]
        assert error["path"].startswith("(body).notebook.cells[0].outputs…"), error
        assert error["message"] == "nested deeper than 100 levels"
        code, answer = await post(port, "api/jobs/team-a/x/collected", "server-alice", DEEP)
        assert code == 400, answer
        assert not kube.objects  # nothing was created

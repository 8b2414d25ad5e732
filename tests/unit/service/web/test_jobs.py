"""The jobs endpoints take only a single-user server's own token (web/jobs.py), as api/activity
and api/reclaim do (web/servers.py): a user's personal token, though it holds the
service's scope, submits and reads nothing. Over tornado with HubAuth's answers faked (our
collaborator's interface) and the in-memory Kubernetes of tests/support/jobs_samples.py."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import HubJSONHandler
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_tokens import SERVICE_SCOPE, STARTED, TokenHub
from tests.support.jobs_samples import NOTEBOOK, FakeKube, service


def token_hub() -> TokenHub:
    """alice's servers and the tokens she could try (the hub's answers for each)."""
    hub = TokenHub(groups={"alice": ["team-a"]})
    hub.start("alice", secret="server-alice")
    hub.start("alice", "gpu", secret="named-server-alice")
    minted = {
        "personal-alice": [SERVICE_SCOPE],  # /hub/token with the service's scope
        "personal-alice-all": ["access:servers!user=alice", SERVICE_SCOPE],
        "two-servers-alice": [
            "access:servers!server=alice/",
            "access:servers!server=alice/b",
            SERVICE_SCOPE,
        ],
        "bobs-server-for-alice": ["access:servers!server=bob/", SERVICE_SCOPE],
        # the scopes and the note of her server's own, minted after it started
        "minted-server-alice": ["access:servers!server=alice/", SERVICE_SCOPE],
    }
    for secret, scopes in minted.items():
        later = STARTED + timedelta(minutes=1)
        hub.mint("alice", scopes, note="Server at /user/alice//", at=later, secret=secret)
    return hub


class Served:
    def __init__(self, kube: FakeKube, port: int) -> None:
        self.kube = kube
        self.port = port

    async def call(self, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        req = HTTPRequest(
            f"http://127.0.0.1:{self.port}/services/gpuaas/{path}",
            method=method,
            body=None if body is None else body if isinstance(body, bytes) else json.dumps(body),
            headers={"Authorization": f"token {token}"},
        )
        try:
            resp = await AsyncHTTPClient().fetch(req)
        except HTTPClientError as e:
            return e.code, json.loads(e.response.body) if e.response is not None else None
        return resp.code, json.loads(resp.body)


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    kube = FakeKube()
    hub = token_hub()
    context = ServiceContext(
        jobs=service(kube),
        hub_auth=hub,
        servers=ServerTokens(hub),
        job_max_body=200_000,
        body_timeout=0.5,
    )
    app = make_app(context)
    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app, max_body_size=64 * 1024)  # the service's max_request_bytes
    server.add_sockets([sock])
    yield Served(kube, sock.getsockname()[1])
    server.stop()


BODY = {"path": "work/train.ipynb", "notebook": NOTEBOOK, "offering": "mig-1g"}


async def test_a_servers_own_token_submits(served: Served) -> None:
    for token in ("server-alice", "named-server-alice"):
        code, job = await served.call("POST", "api/jobs", token, BODY)
        assert code == 201, job
        assert job["team"] == "team-a"
    code, listing = await served.call("GET", "api/jobs", "server-alice")
    assert code == 200
    assert len(listing["jobs"]) == 2


@pytest.mark.parametrize(
    "token",
    [
        "personal-alice",
        "personal-alice-all",
        "two-servers-alice",
        "bobs-server-for-alice",
        "minted-server-alice",
    ],
)
async def test_any_other_token_of_the_user_is_refused_and_creates_nothing(
    served: Served, token: str
) -> None:
    code, answer = await served.call("POST", "api/jobs", token, BODY)
    assert code == 403, answer
    assert answer["message"].startswith("only a single-user server's own token may do this")
    for method, path in (
        ("GET", "api/jobs"),
        ("GET", "api/jobs/options"),
        ("DELETE", "api/jobs/team-a/nb-train-abcde"),
        ("GET", "api/jobs/team-a/nb-train-abcde/log"),
    ):
        assert (await served.call(method, path, token))[0] == 403, (method, path)
    assert served.kube.calls == []
    assert (await served.call("GET", "api/jobs", "no-such-token"))[0] == 403


async def test_a_deep_job_submission_is_a_400_with_its_path(served: Served) -> None:
    """Nested deeper than the recursion limit: a 400 with the path down to where it is too
    deep, never a 500, and nothing created (core/parsing.py)."""
    deep = b"[" * 30_000 + b"]" * 30_000  # json.loads alone: RecursionError
    code, answer = await served.call("POST", "api/jobs", "server-alice", deep)
    assert code == 400, answer
    assert answer["errors"][0]["path"].startswith("(body)[0][0]")
    # a notebook whose output nests too deep: the path names the cell and the output
    output = {"output_type": "display_data", "metadata": {}, "data": {}}
    notebook = {**NOTEBOOK, "cells": [{**NOTEBOOK["cells"][0], "outputs": [output]}]}
    body = json.dumps({"path": "work/t.ipynb", "notebook": notebook, "offering": "mig-1g"})
    nested = "[" * 120 + "]" * 120
    body = body.replace('"data": {}', f'"data": {{"application/json": {nested}}}')
    code, answer = await served.call("POST", "api/jobs", "server-alice", body.encode())
    assert code == 400, answer
    (error,) = answer["errors"]
    assert error["path"].startswith("(body).notebook.cells[0].outputs…"), error
    assert error["message"] == "nested deeper than 100 levels"
    code, answer = await served.call("POST", "api/jobs/team-a/x/collected", "server-alice", deep)
    assert code == 400, answer
    assert not served.kube.objects  # nothing was created


async def raw_post(port: int, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """What the service answers to a POST whose headers promise more body than is sent: the
    answer (or ``b""`` when it closed the connection), read within 3 seconds."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"POST /services/gpuaas/{path} HTTP/1.1", "Host: localhost"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(65536), 3)
    except asyncio.TimeoutError:
        return b"(no answer in 3 s)"
    finally:
        writer.close()


@pytest.mark.parametrize("path", ["api/jobs", "api/job-runner/result"])
async def test_a_big_body_with_a_wrong_token_is_refused_before_it_is_read(
    served: Served, path: str
) -> None:
    """The caller is checked on the headers: no byte of a megabyte's body is waited for."""
    for token in ("personal-alice", "no-such-token"):
        headers = {"Authorization": f"token {token}", "Content-Length": "1000000"}
        if path.startswith("api/job-runner"):
            headers = {"Authorization": "Bearer wrong", "X-GPUaaS-Job": "team-a/x", **headers}
        answer = await raw_post(served.port, path, headers)
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]


async def test_a_notebook_over_the_limit_is_a_413_that_says_clear_its_outputs(
    served: Served,
) -> None:
    headers = {"Authorization": "token server-alice", "Content-Length": "1000000"}
    answer = await raw_post(served.port, "api/jobs", headers)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    message = json.loads(answer.partition(b"\r\n\r\n")[2])["message"]
    assert "clear the notebook's outputs" in message
    assert served.kube.calls == []


async def test_a_body_that_stops_arriving_is_given_up_after_the_body_timeout(
    served: Served,
) -> None:
    """A server's own token, a body within the limit that stalls: the connection is closed
    after ``body_timeout`` (0.5 s here), not held open."""
    headers = {"Authorization": "token server-alice", "Content-Length": "150000"}
    answer = await raw_post(served.port, "api/jobs", headers, body=b'{"path": ')
    assert answer != b"(no answer in 3 s)"
    assert served.kube.calls == []


async def test_a_notebook_a_little_over_the_limit_is_read_and_answered_413_alone(
    served: Served,
) -> None:
    """Through the hub's proxy the body is still being sent when the 413 is written: a body of
    up to four times the limit is read and dropped, so the answer is the 413 and nothing else
    (not a cut connection, which the proxy turns into its own 503 page)."""
    body = b"x" * 300_000  # the limit here is 200,000
    headers = {
        "Authorization": "token server-alice",
        "Content-Length": str(len(body)),
        "Connection": "close",
    }
    reader, writer = await asyncio.open_connection("127.0.0.1", served.port)
    head = ["POST /services/gpuaas/api/jobs HTTP/1.1", "Host: localhost"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    await writer.drain()  # the whole body is taken, not refused halfway
    answer = await asyncio.wait_for(reader.read(), 5)  # to the connection's end
    writer.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert answer.count(b"HTTP/1.1") == 1, answer
    assert b"clear the notebook's outputs" in answer

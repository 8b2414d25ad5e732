"""The extension's HTTP layer (jupyter_gpuaas.server.handlers), where it decides something on its
own: its route table, that polling is never user activity, how a service's answer or problem
becomes a status, and the request checks (a JSON body, a notebook path). Each route served by a
real Jupyter server is tests/real_server/test_routes.py's."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPResponse
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from jupyter_gpuaas.core.api_documents import request_bodies
from jupyter_gpuaas.server import handlers as server_handlers
from jupyter_gpuaas.server.handlers import BodyError, GPUaaSHandler, handlers
from jupyter_gpuaas.server.service_client import ServiceAnswer, ServiceProblem

STATE = cast(Any, object())
ROUTES = handlers(STATE)
JOB = next(path for path, _, _ in ROUTES if path.endswith("/log")).removesuffix("/log")

Fetch = Callable[..., Awaitable[HTTPResponse]]


def test_every_route_is_under_the_extensions_api_and_given_the_state() -> None:
    paths = [path for path, _, _ in ROUTES]
    assert len(paths) == len(set(paths)) == 17
    assert all(path.startswith("/gpuaas/api/") for path in paths)
    assert all(kw == {"state": STATE} for _, _, kw in ROUTES)
    assert {"/gpuaas/api/usage", "/gpuaas/api/activity", "/gpuaas/api/queue"} <= set(paths)


def test_every_handler_is_ours_and_no_activity() -> None:
    for _, handler, _ in ROUTES:
        assert issubclass(handler, GPUaaSHandler), handler
        assert handler._track_activity is False
        assert handler.update_api_activity is GPUaaSHandler.update_api_activity


def test_each_route_needs_the_permission_of_what_it_touches() -> None:
    """The kernels' figures take the kernels permission; a job submission reads the notebook
    (contents), a move ends the server (server); the API's document is jupyter-server's ``api``."""
    needs = {
        path.removeprefix("/gpuaas/api/"): cast(type[GPUaaSHandler], h).auth_resource
        for path, h, _ in ROUTES
    }
    assert needs.pop("jobs") == "contents"
    assert needs.pop("resize") == "server"
    assert needs.pop("openapi.json") == "api"  # as jupyter-server's own api/spec.yaml
    assert set(needs.values()) == {"kernels"}


@pytest.mark.parametrize(
    ("path", "matches"),
    [
        ("/gpuaas/api/jobs/team-a/train-1", True),
        ("/gpuaas/api/jobs/team-a/run.2", True),
        ("/gpuaas/api/jobs/Team-A/train", False),
        ("/gpuaas/api/jobs/team-a/-train", False),
        ("/gpuaas/api/jobs/team-a/../etc", False),
        ("/gpuaas/api/jobs/team-a/" + "x" * 254, False),
        ("/gpuaas/api/jobs/team-a", False),
    ],
)
def test_a_jobs_team_and_name_are_kubernetes_names(path: str, matches: bool) -> None:
    assert (re.fullmatch(JOB, path) is not None) is matches


class Plain(web.RequestHandler):
    """Errors as jupyter-server's APIHandler sends them: the HTTPError's message in JSON (a
    refused body's as GPUaaSHandler sends it)."""

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs["exc_info"][1]
        if isinstance(error, BodyError):
            self.finish(dict(error.as_json()))
            return
        self.finish({"message": getattr(error, "log_message", "")})


class AnswerHandler(Plain):
    """Hands the answer the test put in the application's settings to ``_answer``."""

    def get(self) -> None:
        server_handlers._answer(self, self.settings["answer"])


class BodyHandler(Plain):
    """A body as ``POST gpuaas/api/kernel-state/snapshot`` takes it: ``{}``, ``{"kernel_id"}``
    or none."""

    def post(self) -> None:
        bodies = request_bodies("extension")
        body = server_handlers._json_body(self, bodies, "postKernelStateSnapshot")
        self.finish({"body": body})


class NotebookHandler(Plain):
    def get(self) -> None:
        self.finish({"path": server_handlers._notebook(self.get_argument("path", ""))})


@pytest.fixture
async def served() -> AsyncIterator[tuple[web.Application, Fetch]]:
    app = web.Application(
        [("/answer", AnswerHandler), ("/body", BodyHandler), ("/notebook", NotebookHandler)]
    )
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app)
    server.add_sockets([sock])
    client = AsyncHTTPClient(force_instance=True)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def fetch(path: str, **kw: Any) -> HTTPResponse:
        return await client.fetch(base + path, raise_error=False, **kw)

    yield app, fetch
    client.close()
    server.stop()


PROBLEM = ServiceProblem("service_unavailable", "The gpuaas service is not answering.", "Later.")


@pytest.mark.parametrize(
    ("answer", "code", "body"),
    [
        (ServiceAnswer(200, {"items": []}), 200, {"items": []}),
        (ServiceAnswer(409, {"message": "taken"}), 409, {"message": "taken"}),
        (
            ServiceAnswer(0, problem=PROBLEM),
            200,
            {
                "error": "The gpuaas service is not answering. Later.",
                "error_kind": "service_unavailable",
                "status": 0,
            },
        ),
        (
            ServiceAnswer(403, problem=ServiceProblem("forbidden", "No scope.", "Ask.")),
            502,
            {"error": "No scope. Ask.", "error_kind": "forbidden", "status": 403},
        ),
        # a refusal with the service's own words is passed on as it is
        (ServiceAnswer(403, {"message": "not yours"}, PROBLEM), 403, {"message": "not yours"}),
        (ServiceAnswer(0, {}), 502, {}),
    ],
)
async def test_a_services_answer_becomes_a_status_the_sidebar_reads(
    served: tuple[web.Application, Fetch], answer: ServiceAnswer, code: int, body: Any
) -> None:
    app, fetch = served
    app.settings["answer"] = answer
    response = await fetch("/answer")
    assert (response.code, json.loads(response.body)) == (code, body)


@pytest.mark.parametrize(
    ("sent", "code", "said"),
    [
        (b"", 200, {"body": None}),
        (b"{}", 200, {"body": {}}),
        (b'{"kernel_id": "k-1"}', 200, {"body": {"kernel_id": "k-1"}}),
        (b"{nope", 400, "invalid request body: not JSON: (body): "),
        (b"[" * 5000 + b"]" * 5000, 400, "invalid request body: not JSON: (body)[0][0]"),
        (b"[]", 400, "invalid request body: (body): must be an object, not a list"),
        (b'{"kernel_id": ""}', 400, "invalid request body: kernel_id: must not be empty"),
        (
            b'{"kernel": "k-1"}',
            400,
            "invalid request body: kernel: unknown field (did you mean 'kernel_id'?)",
        ),
        (b'{"kernel_id": "50%"}', 200, {"body": {"kernel_id": "50%"}}),
        (b'{"kernel_id": 5, "%s": 1}', 400, "invalid request body: kernel_id: must be a str"),
    ],
)
async def test_a_body_is_json_or_a_400_saying_where(
    served: tuple[web.Application, Fetch], sent: bytes, code: int, said: Any
) -> None:
    _, fetch = served
    response = await fetch("/body", method="POST", body=sent)
    assert response.code == code
    answer = json.loads(response.body)
    if code == 200:
        assert answer == said
    else:
        assert answer["message"].startswith(said)
        assert answer["errors"][0]["path"] in answer["message"]


async def test_a_notebook_must_be_named(served: tuple[web.Application, Fetch]) -> None:
    _, fetch = served
    assert json.loads((await fetch("/notebook?path=/work/a.ipynb/")).body) == {
        "path": "work/a.ipynb"
    }
    missing = await fetch("/notebook?path=/")
    assert missing.code == 400
    assert json.loads(missing.body) == {"message": "name the notebook: path=<notebook>.ipynb"}

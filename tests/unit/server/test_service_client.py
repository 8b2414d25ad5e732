"""The one client of the gpuaas service: every kind of trouble comes back as one shape."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from jupyter_gpuaas.server.queue import fetch_queue
from jupyter_gpuaas.server.service_client import (
    SERVICE_URL_ENV,
    TOKEN_ENV,
    ServiceClient,
    ServiceProblem,
)

DOWN = "http://127.0.0.1:9/services/gpuaas/"  # the discard port: nothing listens on loopback


def test_the_app_setting_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVICE_URL_ENV, "http://from-env/")
    monkeypatch.setenv(TOKEN_ENV, "t0ken")
    app = SimpleNamespace(queue_service_url="http://from-config/", queue_timeout=2.5)
    assert ServiceClient.for_app(app) == ServiceClient("http://from-config/", "t0ken", 2.5)
    app.queue_service_url = ""
    assert ServiceClient.for_app(app).url == "http://from-env/"


@pytest.mark.parametrize(
    ("client", "kind", "words"),
    [
        (ServiceClient("", "t0ken"), "not_configured", "c.GPUaaS.queue_service_url"),
        (ServiceClient(DOWN, ""), "not_configured", "not running under JupyterHub"),
        (ServiceClient(DOWN, "t0ken", timeout=2), "service_unavailable", "cannot be reached"),
    ],
)
async def test_trouble_is_a_problem_not_an_exception(
    client: ServiceClient, kind: str, words: str
) -> None:
    answer = await client.request("api/reclaim")
    assert answer.status == 0
    assert answer.problem is not None
    assert answer.problem.kind == kind
    assert words in answer.problem.as_json()["error"]


async def test_a_service_that_never_answers_is_a_problem_not_an_exception() -> None:
    # tornado raises its timeout even with raise_error=False (an HTTPClientError, 599)
    done = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await done.wait()  # reads nothing, answers nothing
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = ServiceClient(f"http://127.0.0.1:{port}/services/gpuaas/", "t0ken", timeout=0.02)
    try:
        answer = await asyncio.wait_for(client.request("api/reclaim"), 5)
    finally:
        done.set()
        server.close()
        await server.wait_closed()
    assert answer.status == 0
    assert answer.problem is not None
    assert answer.problem.kind == "service_unavailable"
    assert "cannot be reached" in answer.problem.as_json()["error"]


async def test_the_queue_answer_keeps_its_shape_without_the_service() -> None:
    answer = await fetch_queue(ServiceClient(DOWN, "t0ken", timeout=2))
    assert (answer["items"], answer["teams"], answer["synced"]) == ([], [], False)
    assert answer["error_kind"] == "service_unavailable"
    assert (answer["error"] or "").endswith("Retrying.")


def test_what_the_sidebar_reads() -> None:
    problem = ServiceProblem("forbidden", "It refused the token.", "Add the scope.")
    assert problem.as_json() == {
        "error": "It refused the token. Add the scope.",
        "error_kind": "forbidden",
    }

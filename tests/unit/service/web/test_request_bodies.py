"""Every request body the service takes is checked against its OpenAPI document before a
handler reads it (web/base.py ``json_body``, core/api_documents.py): each body the document
forbids, made from the document itself, is a 400 naming its field, for every route that takes
one, from a caller that is let in (the server's own token; a Job's pod its own token). The
bodies the document allows pass: every other test here sends them."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.jobs.build import JOB_KIND, token_sha256
from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import HubJSONHandler
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from jupyter_gpuaas.core.api_documents import request_bodies
from jupyter_gpuaas.core.labels import JOB_LABEL, JOB_TOKEN_ANNOTATION
from tests.support.hub_tokens import TokenHub
from tests.support.jobs_samples import FakeKube, service
from tests.support.request_bodies import Forbidden, forbidden_bodies
from tests.support.route_table import concrete
from tests.support.service_web import PREFIX, QueueIndexStub
from tests.support.service_world import World

RUNNER = {"Authorization": "Bearer runner-secret", "X-GPUaaS-Job": "team-a/nb-train-abcde"}
"""The headers of the Job ``nb-train-abcde``'s own pod."""


class Served:
    def __init__(self, port: int, token: str) -> None:
        self.port, self.token = port, token
        self.client = AsyncHTTPClient(force_instance=True)

    async def post(self, path: str, body: bytes) -> tuple[int, Any]:
        runner = path.startswith("api/job-runner/")
        response = await self.client.fetch(
            HTTPRequest(
                f"http://127.0.0.1:{self.port}{PREFIX}{concrete(path)}",
                method="POST",
                body=body,
                headers=RUNNER if runner else {"Authorization": f"token {self.token}"},
            ),
            raise_error=False,
        )
        return response.code, json.loads(response.body or b"null")


@pytest.fixture
async def served(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Served]:
    monkeypatch.setattr(HubJSONHandler, "check_hub_user", lambda self, model: model)
    hub = TokenHub(groups={"alice": ["team-a"]})
    own = hub.start("alice")
    kube = FakeKube()
    meta = {
        "name": "nb-train-abcde",
        "namespace": "team-a",
        "labels": {JOB_LABEL: JOB_KIND},
        "annotations": {JOB_TOKEN_ANNOTATION: token_sha256("runner-secret")},
    }
    kube.objects[("job", "team-a", "nb-train-abcde")] = {"metadata": meta}
    context = ServiceContext(
        hub_auth=cast(Any, hub),
        servers=ServerTokens(hub),
        index=cast(Any, QueueIndexStub()),
        loop=World().loop,
        jobs=service(kube),
        resize=Resizer(cast(Any, hub), lambda: None),
    )
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context), max_body_size=64 * 1024)
    server.add_sockets([sock])
    yield Served(sock.getsockname()[1], own)
    server.stop()


FORBIDDEN = list(forbidden_bodies("service"))


def test_every_operation_that_takes_a_json_body_is_in_the_table() -> None:
    assert {case.operation for case in FORBIDDEN} == set(request_bodies("service").operations)
    assert len(FORBIDDEN) > 30


@pytest.mark.parametrize("case", FORBIDDEN, ids=str)
async def test_a_body_the_document_forbids_is_a_400_naming_its_fields(
    served: Served, case: Forbidden
) -> None:
    code, answer = await served.post(case.path.removeprefix("/"), case.body)
    assert code == 400, answer
    named = [e["path"] for e in answer["errors"]]
    assert set(case.paths) <= set(named), answer
    assert answer["message"].startswith("invalid "), answer
    assert named[0] in answer["message"]  # the sidebar and the logs show the message


async def test_an_empty_activity_report_is_a_400_naming_each_missing_field(
    served: Served,
) -> None:
    """``{}`` was taken, and read as a busy server (no ``idle_since``)."""
    code, answer = await served.post("api/activity", b"{}")
    assert code == 400
    assert answer["errors"] == [
        {"path": name, "message": "is required"}
        for name in (
            "sampled_at",
            "source",
            "error",
            "kernels",
            "terminals",
            "gpu_memory",
            "gpu_utilization",
            "idle_since",
        )
    ]
    assert answer["more_errors"] == 0
    assert answer["message"] == (
        "invalid activity report: sampled_at: is required; source: is required; error: is"
        " required; kernels: is required; terminals: is required; and 3 more problem(s)"
    )


KERNEL_FIELDS = "kernel_id, execution_state, last_activity, connections, gpu_memory"


async def test_a_report_names_each_problem_deep_in_it_and_counts_those_it_leaves_out(
    served: Served,
) -> None:
    kernel = {
        "kernel_id": "k1",
        "execution_state": "idle",
        "last_activity": None,
        "connections": -1,
        "gpu_memory": 1.0,
        "colour": "red",
    }
    report = {
        "sampled_at": None,
        "source": "nvml",
        "error": None,
        "kernels": [kernel] * 10,
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [{"uuid": "GPU-1", "utilization": 101}],
        "idle_since": None,
    }
    code, answer = await served.post("api/activity", json.dumps(report).encode())
    assert code == 400
    assert answer["errors"][:4] == [
        {"path": "kernels[0].connections", "message": "must be at least 0, not -1"},
        {"path": "kernels[0].gpu_memory", "message": "must be a whole number or null, not 1.0"},
        {"path": "kernels[0].colour", "message": f"unknown field (it takes: {KERNEL_FIELDS})"},
        {"path": "kernels[1].connections", "message": "must be at least 0, not -1"},
    ]
    assert len(answer["errors"]) == 20
    assert answer["more_errors"] == 11  # 3 for each of 10 kernels, and the utilisation

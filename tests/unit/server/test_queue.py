"""The sidebar's queue answer from the gpuaas service (``jupyter_gpuaas.server.queue``)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpuaas.server.queue import fetch_queue
from jupyter_gpuaas.server.service_client import ServiceAnswer, ServiceClient, ServiceProblem


@dataclass(frozen=True)
class Answering(ServiceClient):
    """The real client's interface, answering from a given ``ServiceAnswer``."""

    answer: ServiceAnswer = field(default_factory=lambda: ServiceAnswer(0))
    asked: list[tuple[str, str]] = field(default_factory=list)

    async def request(
        self,
        path: str,
        *,
        method: str = "GET",
        body: Any = None,
        accept: Collection[int] = (200,),
    ) -> ServiceAnswer:
        self.asked.append((method, path))
        return self.answer


def answering(answer: ServiceAnswer) -> Answering:
    return Answering(url="http://service.test/services/gpuaas/", token="t0ken", answer=answer)


async def test_the_services_answer_is_passed_on_as_it_came() -> None:
    queue = {"user": "alice", "synced": True, "items": [{"kind": "server"}], "teams": []}
    client = answering(ServiceAnswer(200, data=queue))
    assert await fetch_queue(client) == queue
    assert client.asked == [("GET", "api/queue")]


async def test_a_service_that_cannot_be_asked_gives_the_same_shape_with_its_reason() -> None:
    problem = ServiceProblem(
        "service_unavailable", "The gpuaas service is not reachable.", "Retrying."
    )
    answer = await fetch_queue(answering(ServiceAnswer(0, problem=problem)))
    assert (answer["user"], answer["synced"], answer["items"], answer["teams"]) == (
        None,
        False,
        [],
        [],
    )
    assert answer["error_kind"] == "service_unavailable"
    assert answer["error"] == "The gpuaas service is not reachable. Retrying."
    assert answer["generated_at"].endswith("Z")


async def test_outside_jupyterhub_the_real_client_says_it_is_not_configured() -> None:
    answer = await fetch_queue(ServiceClient(url="", token=""))
    assert answer["error_kind"] == "not_configured"
    assert answer["items"] == []

"""The jobs part's Kubernetes client (gpuaas_service.jobs.kube JobsKubeClient) where it decides
something: which API and method each kind and verb is, that an error status of a raw answer is
an ApiException (the client never checks one), a 404 that is an answer (``None``, ``False``),
a merge patch, and deletes that take the dependents along. The client's own seam (``_client``)
is a recording stand-in; the calls against a real API server are tests/integration's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio.client.rest import ApiException

from gpuaas_service.jobs.kube import MERGE, JobsKubeClient


class Raw:
    """A raw (``_preload_content=False``) answer: its status and body."""

    def __init__(self, status: int, data: Any) -> None:
        self.status = status
        self.data = data

    async def read(self) -> bytes:
        return self.data if isinstance(self.data, bytes) else json.dumps(self.data).encode()


class Api:
    """BatchV1Api or CoreV1Api as the client calls them: each call recorded, answered
    ``answer``."""

    def __init__(self, group: str, answer: Raw, calls: list[Any]) -> None:
        self.group, self.answer, self.calls = group, answer, calls

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Raw:
            self.calls.append((self.group, method, args, kwargs))
            return self.answer

        return call


def client(answer: Raw, calls: list[Any], timeout: float = 20.0) -> JobsKubeClient:
    kube = JobsKubeClient(object(), timeout=timeout)

    def api(kind: str) -> Api:
        return Api("BatchV1Api" if kind == "job" else "CoreV1Api", answer, calls)

    kube._client = api  # type: ignore[method-assign]
    return kube


@pytest.mark.parametrize(
    ("kind", "verb", "method"),
    [
        ("job", "create", "create_namespaced_job"),
        ("configmap", "read", "read_namespaced_config_map"),
        ("secret", "delete", "delete_namespaced_secret"),
        ("job", "patch", "patch_namespaced_job"),
    ],
)
def test_each_kind_and_verb_is_its_namespaced_method(kind: str, verb: str, method: str) -> None:
    assert JobsKubeClient._method(kind, verb) == method


def test_jobs_are_batchs_and_the_rest_core() -> None:
    kube = JobsKubeClient(object())  # an ApiClient stand-in: nothing is called on it here
    groups = [type(kube._client(kind)).__name__ for kind in ("job", "configmap", "secret")]
    assert groups == ["BatchV1Api", "CoreV1Api", "CoreV1Api"]


async def test_a_create_sends_the_body_raw_within_the_timeout() -> None:
    calls: list[Any] = []
    made = await client(Raw(201, {"metadata": {"name": "j"}}), calls, timeout=3.0).create(
        "job", "team-a", {"metadata": {"name": "j"}}
    )
    assert made == {"metadata": {"name": "j"}}
    [(group, method, args, kwargs)] = calls
    assert (group, method, args) == (
        "BatchV1Api",
        "create_namespaced_job",
        ("team-a", {"metadata": {"name": "j"}}),
    )
    assert kwargs == {"_preload_content": False, "_request_timeout": 3.0}


async def test_an_error_status_is_an_api_exception_with_the_body_cut() -> None:
    calls: list[Any] = []
    with pytest.raises(ApiException) as failed:
        await client(Raw(422, b"x" * 800), calls).create("configmap", "team-a", {})
    assert failed.value.status == 422
    assert failed.value.reason == "x" * 500


async def test_a_body_that_is_not_utf8_is_still_said() -> None:
    with pytest.raises(ApiException) as failed:
        await client(Raw(500, b"bad \xff byte"), []).create("secret", "team-a", {})
    assert failed.value.reason == "bad \ufffd byte"


async def test_get_of_nothing_is_none_and_other_errors_are_raised() -> None:
    calls: list[Any] = []
    assert await client(Raw(404, {"reason": "NotFound"}), calls).get("job", "team-a", "j") is None
    assert calls[0][1:3] == ("read_namespaced_job", ("j", "team-a"))
    assert await client(Raw(200, {"kind": "Job"}), []).get("job", "team-a", "j") == {"kind": "Job"}
    with pytest.raises(ApiException):
        await client(Raw(403, {}), []).get("job", "team-a", "j")


async def test_a_patch_is_a_merge_patch() -> None:
    calls: list[Any] = []
    await client(Raw(200, {}), calls).patch("configmap", "team-a", "cm", {"data": {"a": "1"}})
    [(_, method, args, kwargs)] = calls
    assert (method, args) == ("patch_namespaced_config_map", ("cm", "team-a", {"data": {"a": "1"}}))
    assert kwargs["_content_type"] == MERGE == "application/merge-patch+json"


async def test_a_delete_takes_the_dependents_in_the_background_and_says_if_it_was_there() -> None:
    calls: list[Any] = []
    assert await client(Raw(200, {}), calls).delete("job", "team-a", "j") is True
    [(_, method, args, kwargs)] = calls
    assert (method, args) == ("delete_namespaced_job", ("j", "team-a"))
    assert kwargs["body"] == {"propagationPolicy": "Background"}
    assert await client(Raw(404, {}), []).delete("job", "team-a", "j") is False
    with pytest.raises(ApiException):
        await client(Raw(409, {}), []).delete("job", "team-a", "j")


async def test_jobs_are_listed_by_their_selector() -> None:
    calls: list[Any] = []
    items = await client(Raw(200, {"items": [{"n": 1}]}), calls).list_jobs("team-a", "a=b")
    assert items == [{"n": 1}]
    [(_, method, args, kwargs)] = calls
    assert (method, args, kwargs["label_selector"]) == ("list_namespaced_job", ("team-a",), "a=b")

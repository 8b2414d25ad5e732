"""The culler's Kubernetes client (gpuaas_service.clients.kubernetes KubeClient) where it decides
something: the pods it lists, the Event it posts on a pod, the state ConfigMap it reads and
writes (a missing one is made), what it reads of the ResourceFlavors, and the watch durations of
the notebook pods' cache. The client's own seam (``_core``, the CoreV1Api) is a recording
stand-in; the calls against a real API server are tests/integration's."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
from kubernetes_asyncio.client.rest import ApiException

from gpuaas_service.clients.kubernetes import EVENT_SOURCE, KubeClient, notebook_pod_reflector
from gpuaas_service.model.pods import PodRef
from jupyter_gpuaas.core.labels import STATE_KEY

POD = PodRef(namespace="jupyter-users", name="jupyter-alice", uid="u-1")
AT = datetime(2026, 12, 1, 12, 30, 5, 123000, tzinfo=timezone.utc)


class Raw:
    """A raw (``_preload_content=False``) answer."""

    def __init__(self, data: Any) -> None:
        self.data = data

    async def read(self) -> bytes:
        return json.dumps(self.data).encode()


class ConfigMap:
    def __init__(self, data: dict[str, str] | None) -> None:
        self.data = data


class Core:
    """CoreV1Api as the client calls it: each call recorded; ``errors``: a method's failure."""

    def __init__(self, **answers: Any) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.answers = answers
        self.errors: dict[str, list[Exception]] = {}

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((method, args, kwargs))
            failures = self.errors.get(method)
            if failures:
                raise failures.pop(0)
            return self.answers.get(method)

        return call


def client(core: Core, **kw: Any) -> KubeClient:
    kube = KubeClient(object(), **kw)
    kube._core = lambda: core  # type: ignore[method-assign]
    return kube


async def test_only_single_user_server_pods_are_listed_within_the_timeout() -> None:
    core = Core(list_namespaced_pod=Raw({"items": [{"metadata": {"name": "jupyter-alice"}}]}))
    pods = await client(core, timeout=7.0).list_pods("jupyter-users")
    assert pods == [{"metadata": {"name": "jupyter-alice"}}]
    [(method, args, kwargs)] = core.calls
    assert (method, args) == ("list_namespaced_pod", ("jupyter-users",))
    assert kwargs["label_selector"] == "component=singleuser-server"
    assert kwargs["_request_timeout"] == 7.0


async def test_the_jobs_pods_are_every_pod_of_each_namespace() -> None:
    core = Core(list_namespaced_pod=Raw({"items": [{"n": 1}]}))
    pods = await client(core).list_job_pods(["team-a", "team-b"])
    assert pods == [{"n": 1}, {"n": 1}]
    assert [(args, "label_selector" in kw) for _, args, kw in core.calls] == [
        (("team-a",), False),
        (("team-b",), False),
    ]


async def test_annotations_are_a_patch_of_the_pod_and_none_removes_one() -> None:
    core = Core()
    await client(core).annotate(POD, {"gpuaas/warned": "1", "gpuaas/old": None})
    [(method, args, _)] = core.calls
    assert method == "patch_namespaced_pod"
    assert args == (
        "jupyter-alice",
        "jupyter-users",
        {"metadata": {"annotations": {"gpuaas/warned": "1", "gpuaas/old": None}}},
    )


async def test_an_event_is_on_the_pod_at_the_cycles_time_from_the_culler() -> None:
    core = Core()
    kube = client(core)
    await kube.event(POD, "GPUReclaimWarning", "x" * 1500, "Warning", at=AT)
    await kube.event(POD, "GPUReclaimWarning", "again", "Warning", at=AT)
    (_, (namespace, body), _), (_, (_, second), _) = core.calls
    assert namespace == "jupyter-users"
    assert body["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "jupyter-alice",
        "namespace": "jupyter-users",
        "uid": "u-1",
    }
    assert body["metadata"]["name"].startswith("jupyter-alice.")
    assert body["metadata"]["name"] != second["metadata"]["name"]  # two Events, not one
    assert len(body["message"]) == 1000
    assert (body["firstTimestamp"], body["lastTimestamp"]) == ("2026-12-01T12:30:05Z",) * 2
    assert body["source"] == {"component": EVENT_SOURCE}
    assert body["reportingComponent"] == EVENT_SOURCE
    assert (body["reason"], body["type"], body["count"]) == ("GPUReclaimWarning", "Warning", 1)


async def test_the_state_is_the_config_maps_key_and_none_when_there_is_none() -> None:
    core = Core(read_namespaced_config_map=ConfigMap({STATE_KEY: '{"a": 1}', "other": "x"}))
    assert await client(core).read_state("ns", "gpuaas-state") == '{"a": 1}'
    assert (
        await client(Core(read_namespaced_config_map=ConfigMap(None))).read_state("ns", "s") is None
    )
    missing = Core()
    missing.errors["read_namespaced_config_map"] = [ApiException(status=404, reason="Not Found")]
    assert await client(missing).read_state("ns", "s") is None


async def test_a_state_read_that_fails_otherwise_is_raised() -> None:
    core = Core()
    core.errors["read_namespaced_config_map"] = [ApiException(status=403, reason="Forbidden")]
    with pytest.raises(ApiException) as failed:
        await client(core).read_state("ns", "s")
    assert failed.value.status == 403


async def test_the_state_replaces_the_config_map_labelled_as_the_cullers() -> None:
    core = Core()
    await client(core).write_state("ns", "gpuaas-state", "{}")
    [(method, args, _)] = core.calls
    assert method == "replace_namespaced_config_map"
    assert args == (
        "gpuaas-state",
        "ns",
        {
            "metadata": {
                "name": "gpuaas-state",
                "labels": {"app.kubernetes.io/managed-by": EVENT_SOURCE},
            },
            "data": {STATE_KEY: "{}"},
        },
    )


async def test_a_missing_state_config_map_is_made() -> None:
    core = Core()
    core.errors["replace_namespaced_config_map"] = [ApiException(status=404, reason="Not Found")]
    await client(core).write_state("ns", "gpuaas-state", "{}")
    assert [method for method, _, _ in core.calls] == [
        "replace_namespaced_config_map",
        "create_namespaced_config_map",
    ]
    assert core.calls[1][1][0] == "ns"


async def test_a_state_write_refused_is_raised_and_nothing_made() -> None:
    core = Core()
    core.errors["replace_namespaced_config_map"] = [ApiException(status=403, reason="Forbidden")]
    with pytest.raises(ApiException):
        await client(core).write_state("ns", "gpuaas-state", "{}")
    assert [method for method, _, _ in core.calls] == ["replace_namespaced_config_map"]


FLAVORS: list[dict[str, Any]] = [
    {"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"pool": "h100", "n": 1}}},
    {
        "metadata": {"name": "hami"},
        "spec": {"nodeTaints": [{"key": "hami", "effect": "NoSchedule"}, "junk"]},
    },
    {"metadata": {"name": "bare"}},
]


async def test_the_flavors_labels_and_taints_as_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = KubeClient(object())

    async def flavors() -> list[dict[str, Any]]:
        return FLAVORS

    monkeypatch.setattr(kube, "_flavors", flavors)
    assert await kube.flavor_labels() == {
        "h100": {"pool": "h100", "n": "1"},
        "hami": {},
        "bare": {},
    }
    assert await kube.flavor_taints() == {
        "h100": [],
        "hami": [{"key": "hami", "effect": "NoSchedule"}],
        "bare": [],
    }


async def test_the_pods_cache_watches_for_the_resync_not_kubespawners_10_s() -> None:
    reflector: Any = notebook_pod_reflector("jupyter-users", resync_seconds=120.4)
    assert reflector.namespace == "jupyter-users"
    assert reflector.label_selector == "component=singleuser-server"
    assert (reflector.timeout_seconds, reflector.restart_seconds) == (120, 120)
    assert reflector.request_timeout == 150
    assert notebook_pod_reflector("ns", resync_seconds=0.2).timeout_seconds == 1  # type: ignore[attr-defined]

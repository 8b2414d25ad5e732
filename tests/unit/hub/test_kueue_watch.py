"""The hub side's Kueue watch cache: it notices a dead connection and a visibility pager that
ignores ``offset``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from jupyter_gpuaas.hub.kueue_watch import WatchedKueueView


class FakeCustomObjects:
    """Our own collaborator's interface: lists once, then watches that never send anything."""

    def __init__(self, pages: list[dict[str, Any]] | None = None) -> None:
        self.pages = pages
        self.visibility_calls = 0
        self.api_client = self

    async def list_cluster_custom_object(self, *a: Any, **kw: Any) -> dict[str, Any]:
        if kw.get("watch"):
            await asyncio.Event().wait()  # a watch that stays silent until cancelled
        return {"items": [], "metadata": {"resourceVersion": "1"}}

    async def list_namespaced_custom_object(self, *a: Any, **kw: Any) -> dict[str, Any]:
        return await self.list_cluster_custom_object(*a, **kw)

    async def call_api(self, *a: Any, **kw: Any) -> dict[str, Any]:
        self.visibility_calls += 1
        assert self.pages is not None
        return self.pages[0]  # whatever the offset: a server that ignores it


async def test_a_cache_that_hears_nothing_for_too_long_reports_itself_unsynced() -> None:
    now = [0.0]
    view = WatchedKueueView(namespaces=["ns"], custom_objects_api=FakeCustomObjects)
    view.clock = lambda: now[0]
    view.resync_period = 10
    view.request_timeout = 1
    await view.start(timeout=5)
    assert view.queue_state().synced
    now[0] = 20.0  # within 2 x resync + timeout
    assert view.queue_state().synced
    now[0] = 22.0  # the watch went silent: no event, no bookmark, no relist
    assert not view.queue_state().synced
    await view.stop()


class NoWorkloads(FakeCustomObjects):
    """Lists everything but the Workloads, whose list times out."""

    async def list_namespaced_custom_object(self, *a: Any, **kw: Any) -> dict[str, Any]:
        if a[3] == "workloads":
            raise TimeoutError("the API server did not answer")
        return await self.list_cluster_custom_object(*a, **kw)


async def test_a_view_whose_workloads_are_not_listed_is_not_synced() -> None:
    """The Workloads carry the demand that a reclaim is for: without them (or with a silent
    watch of them) the view says unsynced, and the culler acts on nothing."""
    view = WatchedKueueView(namespaces=["ns"], custom_objects_api=NoWorkloads)
    await view.start(timeout=0.5)
    assert not view.queue_state().synced
    await view.stop()


class SlowWorkloads(FakeCustomObjects):
    """The Workloads' list runs past its ``_request_timeout`` in the client: asyncio's
    TimeoutError, which before Python 3.11 is not the builtin one."""

    async def list_namespaced_custom_object(self, *a: Any, **kw: Any) -> dict[str, Any]:
        if a[3] == "workloads":
            raise asyncio.TimeoutError
        return await self.list_cluster_custom_object(*a, **kw)


async def test_a_list_that_times_out_is_retried_and_the_start_ends_unsynced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # On Python 3.10 both timeouts escaped, the start's and the list's (which ended
    # that store's watch for good)
    caplog.set_level(logging.WARNING, logger="jupyter_gpuaas.hub.kueue_watch")
    view = WatchedKueueView(namespaces=["ns"], custom_objects_api=SlowWorkloads)
    await view.start(timeout=0.01)
    assert not view.queue_state().synced
    assert "Kueue caches not synced after 0.01s" in caplog.text
    assert "watch of workloads/ns failed" in caplog.text
    assert view._tasks
    assert not any(task.done() for task in view._tasks)  # waiting to list again
    await view.stop()


async def test_the_visibility_pager_stops_when_the_server_ignores_offset() -> None:
    item = {
        "metadata": {"name": "w1", "namespace": "ns"},
        "localQueueName": "lq",
        "positionInLocalQueue": 0,
        "positionInClusterQueue": 0,
        "priority": 0,
    }
    api = FakeCustomObjects(pages=[{"items": [item]}])
    view = WatchedKueueView(namespaces=["ns"], custom_objects_api=lambda: api)
    view.visibility_page_size = 1  # every page is "full"
    await view.start(timeout=5)
    release = view.track_local_queue("ns", "lq")
    for _ in range(100):  # let the poller run: its requests answer at once, no time passes
        await asyncio.sleep(0)
        if view.pending_items("ns", "lq") is not None:
            break
    items = view.pending_items("ns", "lq")
    assert items is not None
    assert [i.name for i in items] == ["w1"]
    assert api.visibility_calls == 2  # the first page, the same again: stop
    release()
    await view.stop()


def workload_of_pod(pod_uid: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"pod-jupyter-alice-{pod_uid}",
            "namespace": "ns",
            "uid": f"wl-{pod_uid}",
            "ownerReferences": [{"kind": "Pod", "name": "jupyter-alice", "uid": pod_uid}],
        },
        "spec": {"queueName": "team-a", "podSets": []},
    }


def test_a_deleted_workload_is_remembered_but_not_held() -> None:
    """A server restarted after its pod's Workload was deleted must not wait for that Workload:
    the view remembers it (the reason a preempted server stopped), but Kueue no longer holds
    it. The watch applies events to its store and parsed forms exactly as below."""
    view = WatchedKueueView(namespaces=["ns"], custom_objects_api=FakeCustomObjects)
    name = "workloads/ns"
    wl = workload_of_pod("pod-1")
    view._stores[name] = {("ns", wl["metadata"]["name"]): wl}
    view._changed(name, wl)  # ADDED
    assert view.has_workload_for_pod("ns", "pod-1", "jupyter-alice")
    view._stores[name].pop(("ns", wl["metadata"]["name"]))
    view._changed(name, wl, deleted=True)  # DELETED
    remembered = view.workload_for_pod("ns", "pod-1", "jupyter-alice")
    assert remembered is not None
    assert remembered.uid == "wl-pod-1"
    assert not view.has_workload_for_pod("ns", "pod-1", "jupyter-alice")

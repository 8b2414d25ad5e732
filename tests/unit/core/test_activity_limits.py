"""Issue 13 (hardening), the shared pure parts: the activity payload refuses what it used to
clamp or echo (13.2, 13.4), durations and times that overflow are field errors (13.9), and the
Kueue watch cache notices a dead connection and a pager that ignores ``offset`` (13.6, 13.11)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import pytest

from jupyter_gpuaas.core.activity import MAX_KERNELS, ReportError, parse_activity
from jupyter_gpuaas.core.durations import parse_duration
from jupyter_gpuaas.core.kueue import parse_time
from jupyter_gpuaas.core.watch import WatchedKueueView

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def payload(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sampled_at": "2026-11-30T11:59:50Z",
        "source": "nvml",
        "kernels": [
            {"kernel_id": "k", "execution_state": "idle", "last_activity": "2026-11-30T11:00:00Z"}
        ],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": "2026-11-30T11:00:00Z",
    }
    base.update(over)
    return base


def paths(bad: dict[str, Any]) -> list[str]:
    with pytest.raises(ReportError) as info:
        parse_activity(bad, now=NOW)
    return [e.path for e in info.value.errors]


def test_times_in_the_future_are_refused_not_clamped() -> None:
    assert parse_activity(payload(sampled_at="2026-11-30T12:01:00Z"), now=NOW)  # within skew
    later = "2026-11-30T13:00:00Z"
    kernel = {"kernel_id": "k", "execution_state": "idle", "last_activity": later}
    assert paths(payload(idle_since=later, kernels=[kernel])) == [
        "kernels[0].last_activity",
        "idle_since",
    ]
    assert paths(payload(idle_since="9999-12-31T23:59:59-01:00")) == ["idle_since"]


@pytest.mark.parametrize(
    ("over", "path"),
    [
        ({"gpu_memory": -1}, "gpu_memory"),
        ({"gpu_memory": 1 << 60}, "gpu_memory"),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": float("nan")}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": float("inf")}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": 101}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": -3}]},
            "gpu_utilization[0].utilization",
        ),
        ({"kernels": [{"kernel_id": "k", "connections": -1}]}, "kernels[0].connections"),
        ({"kernels": [{"kernel_id": "k"}] * (MAX_KERNELS + 1)}, "kernels"),
        ({"error": "x" * 5000}, "error"),
    ],
)
def test_out_of_range_values_and_counts_are_refused(over: dict[str, Any], path: str) -> None:
    assert paths(payload(**over)) == [path]


def test_errors_do_not_echo_unbounded_input() -> None:
    huge = "y" * 100_000
    bad = payload(idle_since=huge, gpu_utilization=[{"uuid": "u", "utilization": huge}] * 60)
    with pytest.raises(ReportError) as info:
        parse_activity(bad, now=NOW)
    assert len(str(info.value)) < 4000
    assert info.value.more > 0  # counted, not listed


def test_overflowing_durations_and_times_are_plain_errors() -> None:
    with pytest.raises(ValueError, match="longest duration"):
        parse_duration("999999999999999w")
    assert parse_time("9999-12-31T23:59:59-01:00") is None
    assert parse_time("0001-01-01T00:00:00+01:00") is None


class FakeCustomObjects:
    """Our own collaborator's interface: lists once, then watches that never send anything."""

    def __init__(self, pages: list[dict[str, Any]] | None = None) -> None:
        self.pages = pages
        self.visibility_calls = 0
        self.api_client = self

    async def list_cluster_custom_object(self, *a: Any, **kw: Any) -> dict[str, Any]:
        if kw.get("watch"):
            await asyncio.sleep(3600)
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
    for _ in range(50):
        await asyncio.sleep(0.01)
        if view.pending_items("ns", "lq") is not None:
            break
    items = view.pending_items("ns", "lq")
    assert items is not None
    assert [i.name for i in items] == ["w1"]
    assert api.visibility_calls == 2  # the first page, the same again: stop
    release()
    await view.stop()

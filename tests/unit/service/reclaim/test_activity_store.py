"""Activity store and server identity from hub tokens (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from gpuaas_service.reclaim.activity_store import ActivityStore, Notice, server_key, server_of_token
from jupyter_gpuaas.core.activity import ReportError
from tests.support.service_world import idle

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # a server's own token (the `server` role, plus the service access)
        (
            {
                "name": "alice",
                "scopes": [
                    "access:servers!server=alice/",
                    "users:activity!user=alice",
                    "access:services!service=gpuaas",
                ],
            },
            "",
        ),
        ({"name": "alice", "scopes": ["access:servers!server=alice/gpu2"]}, "gpu2"),
        # a personal token: may reach all of alice's servers -> not a server's token
        ({"name": "alice", "scopes": ["access:servers!user=alice"]}, None),
        ({"name": "alice", "scopes": ["access:servers!server=alice/", "access:servers"]}, None),
        # another user's server in the scopes: refused
        ({"name": "alice", "scopes": ["access:servers!server=bob/"]}, None),
        # two servers: ambiguous
        (
            {
                "name": "alice",
                "scopes": ["access:servers!server=alice/", "access:servers!server=alice/x"],
            },
            None,
        ),
        ({"name": "alice", "scopes": ["access:services!service=gpuaas"]}, None),
        ({"kind": "service", "name": "tester", "scopes": ["access:servers!server=tester/"]}, None),
        ({"name": "alice"}, None),
    ],
)
def test_server_of_token(model: dict[str, Any], expected: str | None) -> None:
    assert server_of_token(model) == expected


def idle_payload(at: datetime) -> dict[str, Any]:
    return {
        "sampled_at": at.isoformat(),
        "source": "simulated",
        "error": None,
        "kernels": [],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": at.isoformat(),
    }


def test_store_keeps_latest_with_arrival_time_and_forgets_stopped_servers() -> None:
    store = ActivityStore()
    store.record("alice", "", idle_payload(T0), T0)
    report = store.record("alice", "", idle_payload(T0), T0 + timedelta(seconds=30))
    store.record("bob", "gpu", idle_payload(T0), T0)
    assert store.report("alice") is report
    assert report.received_at == T0 + timedelta(seconds=30)
    assert store.report(server_key("bob", "gpu")) is not None
    store.set_notice("alice", Notice(T0, T0 + timedelta(minutes=1), "idle", 1))
    store.keep_only(["alice"])
    assert store.report("bob/gpu") is None
    assert store.notice("alice") is not None
    assert len(store) == 1
    assert store.accepted == 3


def test_store_refuses_malformed_report() -> None:
    store = ActivityStore()
    with pytest.raises(ReportError) as err:
        store.record("alice", "", {"kernels": "nope", "idle_since": "yesterday"}, T0)
    assert "kernels" in str(err.value)
    assert "idle_since" in str(err.value)
    assert store.report("alice") is None
    assert store.rejected == 1


def test_notice_payload_counts_down_and_says_saving_at_the_deadline() -> None:
    notice = Notice(T0, T0 + timedelta(seconds=60), "queued work needs it", 1)
    early = notice.payload(T0 + timedelta(seconds=10), timedelta(seconds=15))
    assert early["seconds_left"] == 50
    assert early["saving"] is False
    assert early["snoozes_left"] == 1
    assert early["reclaim_at"].startswith("2026-11-30T12:01:00")
    late = notice.payload(T0 + timedelta(seconds=46), timedelta(seconds=15))
    assert late["saving"] is True
    assert late["seconds_left"] == 14
    after = notice.payload(T0 + timedelta(seconds=90), timedelta(seconds=15))
    assert after["seconds_left"] == 0
    dry = Notice(T0, T0 + timedelta(seconds=60), "x", 0, dry_run=True)
    assert dry.payload(T0 + timedelta(seconds=59), timedelta(seconds=15))["saving"] is False


def test_the_store_of_reports_is_bounded_and_pruned_without_a_policy() -> None:
    store = ActivityStore(max_servers=3, forget_after=timedelta(hours=1))
    for i in range(10):
        store.record(f"u{i}", "", idle(T0), T0)
    assert len(store) == 3
    assert store.report("u9") is not None
    assert store.report("u0") is None
    store.record("late", "", idle(T0), T0 + timedelta(hours=2))
    assert len(store) == 1  # the others were silent for longer than forget_after

"""Activity store and server identity from hub tokens (pure)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, cast

import pytest

from gpuaas_service.reclaim.activity_store import ActivityStore, Notice, server_key, server_of_token
from gpuaas_service.reclaim.decide import Action
from gpuaas_service.reclaim.idleness import State
from jupyter_gpuaas.core.activity import ReportError
from tests.support.service_world import POLICY, World, busy, idle

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


def test_no_user_pushes_another_users_report_out_of_the_store() -> None:
    """A flood of reports for made-up servers costs its sender their own entries, never
    another user's: at most ``max_per_user`` each, and over the total bound the user holding
    the most loses their longest silent first."""
    store = ActivityStore(max_servers=50, max_per_user=10)
    store.record("alice", "", idle(T0), T0)
    for i in range(10_000):
        store.record("mallory", f"made-up-{i}", idle(T0), T0 + timedelta(seconds=1))
    assert store.report("alice") is not None
    assert len(store) == 11  # alice's one and mallory's last ten
    assert store.report("mallory/made-up-9999") is not None
    many = ActivityStore(max_servers=6, max_per_user=5)
    many.record("alice", "", idle(T0), T0)
    for user in ("u1", "u2"):
        for i in range(5):
            many.record(user, f"s{i}", idle(T0), T0 + timedelta(seconds=1))
    assert many.report("alice") is not None  # the total bound took from u1 and u2
    assert len(many) == 6


async def test_a_busy_server_whose_report_was_forgotten_is_not_presumed_idle_since_its_start() -> (
    None
):
    """Its verdict outlives the report: unknown from when it was last known busy, so within
    the policy's grace it is left alone, and its max_idle counts from then, not from its start."""
    team_a = cast(list[dict[str, Any]], POLICY["policies"])[0]
    policy = {**POLICY, "policies": [{**team_a, "max_idle": "1h"}]}
    w = World(policy=policy)
    w.store.max_per_user = 2
    w.now = T0 + timedelta(hours=2)  # the servers started at T0: two hours ago
    w.store.record("alice", "busy", busy(w.now), w.now)
    w.store.record("bob", "", busy(w.now), w.now)
    w.store.record("alice", "", busy(w.now), w.now)
    await w.loop.cycle()
    assert w.store.verdict("alice/busy").state is State.BUSY  # type: ignore[union-attr]
    w.now += timedelta(minutes=1)
    w.store.record("alice", "other", idle(w.now), w.now)  # over her bound: her longest silent
    assert w.store.report("alice/busy") is None
    plan = await w.loop.cycle()
    assert plan is not None
    decision = next(d for d in plan.decisions if d.workbench.key == "alice/busy")
    assert decision.action is Action.SKIP, decision.reason
    verdict = w.store.verdict("alice/busy")
    assert verdict is not None
    assert verdict.state is State.UNKNOWN
    assert verdict.unknown_since == w.now - timedelta(minutes=1)
    assert "forgotten" in verdict.reason
    w.now += timedelta(minutes=61)  # an hour after it was last known busy: max_idle
    plan = await w.loop.cycle()
    assert plan is not None
    decision = next(d for d in plan.decisions if d.workbench.key == "alice/busy")
    assert decision.action is Action.WARN
    assert "presumed idle 1h" in decision.reason


async def test_after_a_service_restart_a_server_is_unknown_since_then_not_since_its_start() -> None:
    """The reports a server sent before the service restarted are gone with its memory: with
    none yet, the server is unknown from the restart on, within the policy's grace, and never
    presumed idle since it started."""
    team_a = cast(list[dict[str, Any]], POLICY["policies"])[0]
    w = World(policy={**POLICY, "policies": [{**team_a, "max_idle": "1h"}]})
    w.now = T0 + timedelta(hours=2)  # the servers started at T0
    w.store = w.loop.store = ActivityStore(opened_at=w.now)
    plan = await w.loop.cycle()
    assert plan is not None
    assert {d.action for d in plan.decisions} == {Action.SKIP}
    verdict = w.store.verdict("alice")
    assert verdict is not None
    assert verdict.unknown_since == w.now
    assert "since the service started" in verdict.reason

"""The pure parts of "reclaim keeps state": the policy's ``idle_after_when_kept``
and ``snapshot_timeout``, decide's use of them, the store's snapshot ask with its bound, and
what a reclaim records of its kernels (reclaim/kept_state.py)."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.console.standing import standing
from gpuaas_service.reclaim.activity_store import (
    REPORT_NEAR_STOP,
    ActivityStore,
    Notice,
    report_again_in,
)
from gpuaas_service.reclaim.decide import Action, Need, PendingWorkload, Workbench, decide
from gpuaas_service.reclaim.explain_input import dump_snapshot, load_snapshot
from gpuaas_service.reclaim.idleness import ActivityReport, Idleness, State
from gpuaas_service.reclaim.kept_state import KeptState
from gpuaas_service.reclaim.policy import PolicyError, load_policy
from jupyter_gpuaas.core.activity import (
    KernelStateReport,
    kernel_state_json,
    parse_activity,
    read_kernel_state_mark,
)
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable
from tests.support.console_samples import policy_of
from tests.support.service_samples import idle_report

NOW = datetime(2026, 11, 30, 16, 40, tzinfo=timezone.utc)
MIG = ("a100-mig", "nvidia.com/mig-1g.5gb")


def errors_of(data: Any) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(data)
    return [str(e) for e in info.value.errors]


def one(**fields: Any) -> dict[str, Any]:
    return {"policies": [{"name": "p", "idle_after": "30m", **fields}]}


# --------------------------------------------------------------------------- the policy


def test_idle_after_when_kept_and_snapshot_timeout_default_to_off_and_a_minute() -> None:
    ps = load_policy(one())
    (p,) = ps.policies
    assert p.idle_after_when_kept is None
    assert p.idle_threshold(keeps_state=True) == timedelta(minutes=30)
    assert ps.snapshot_timeout == timedelta(seconds=60)


def test_idle_after_when_kept_applies_only_where_state_is_kept() -> None:
    ps = load_policy(
        {"snapshot_timeout": "2m", "defaults": {"idle_after_when_kept": "15m"}, **one()}
    )
    (p,) = ps.policies
    assert p.idle_threshold(keeps_state=True) == timedelta(minutes=15)
    assert p.idle_threshold(keeps_state=False) == timedelta(minutes=30)
    assert ps.snapshot_timeout == timedelta(minutes=2)
    assert "15m where kernel state is kept" in p.describe()
    assert load_policy({"snapshot_timeout": 0, **one()}).snapshot_timeout == timedelta(0)


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (
            one(idle_after_when_kept="45m"),
            "policies[0].idle_after_when_kept: 45m is longer than idle_after 30m",
        ),
        (
            {"defaults": {"idle_after_when_kept": "1h"}, **one()},
            "1h (from defaults.idle_after_when_kept) is longer than idle_after 30m",
        ),
        (one(idle_after_when_kept="0"), "policies[0].idle_after_when_kept: must be longer than 0"),
        (one(idle_after_when_kept="soon"), "policies[0].idle_after_when_kept:"),
        ({"snapshot_timeout": "1h", **one()}, "snapshot_timeout: 1h is longer than 10m"),
        ({"snapshot_timeout": "-5s", **one()}, "snapshot_timeout:"),
        ({"snapshot_timeout": "a minute", **one()}, "snapshot_timeout:"),
    ],
)
def test_bad_values_are_refused_with_their_paths(data: dict[str, Any], error: str) -> None:
    assert any(error in e for e in errors_of(data)), errors_of(data)


def test_a_typo_is_caught() -> None:
    (error,) = errors_of(one(idle_after_when_kep="15m"))
    assert "idle_after_when_kept" in error


# --------------------------------------------------------------------------- decide


def bench(user: str, *, idle: timedelta, keeps_state: bool) -> Workbench:
    return Workbench(
        user=user,
        groups=("team-a",),
        team="team-a",
        kind="mig",
        offering="mig-1g",
        holds={MIG: Fraction(1)},
        gpu_equivalents=Fraction(1, 7),
        cluster_queue="team-a-notebooks",
        cohorts=("gpuaas",),
        started_at=NOW - timedelta(hours=8),
        idleness=Idleness(State.IDLE, NOW - idle, "quiet"),
        keeps_state=keeps_state,
    )


def job() -> PendingWorkload:
    flavor, resource = MIG
    return PendingWorkload(
        name="train",
        namespace="team-a",
        cluster_queue="team-a-training",
        cohorts=("gpuaas",),
        priority=100,
        position=0,
        needs=(
            Need(
                resource=resource, amount=Fraction(1), flavors=(flavor,), free={flavor: Fraction(0)}
            ),
        ),
    )


def test_a_workbench_that_keeps_state_is_idle_enough_sooner() -> None:
    ps = load_policy(one(idle_after_when_kept="15m", warn_before="5m"))
    keeps = bench("alice", idle=timedelta(minutes=20), keeps_state=True)
    loses = bench("bob", idle=timedelta(minutes=20), keeps_state=False)
    plan = decide([keeps, loses], [job()], ps, now=NOW)
    by_user = {d.workbench.user: d for d in plan.decisions}
    assert by_user["alice"].action is Action.WARN
    assert by_user["bob"].action is Action.SKIP
    assert by_user["bob"].code == "not-idle-yet"
    assert "idle after 30m" in by_user["bob"].reason
    # without the field, keeping state changes nothing
    plan = decide([keeps], [job()], load_policy(one(warn_before="5m")), now=NOW)
    assert plan.decisions[0].code == "not-idle-yet"
    assert "(kernel state kept)" not in plan.decisions[0].reason


def test_reclaim_always_uses_the_kept_threshold_too() -> None:
    ps = load_policy(one(idle_after_when_kept="15m", reclaim="always"))
    plan = decide([bench("alice", idle=timedelta(minutes=20), keeps_state=True)], [], ps, now=NOW)
    (d,) = plan.decisions
    assert (d.action, d.code) == (Action.WARN, "always")
    assert "idle_after 15m (kernel state kept)" in d.reason
    plan = decide([bench("bob", idle=timedelta(minutes=20), keeps_state=False)], [], ps, now=NOW)
    assert plan.decisions[0].code == "not-idle-yet"


# --------------------------------------------------------------------------- the store


def report(at: datetime, *, keeps: bool = True, answer: KernelStateReport | None = None) -> Any:
    payload: dict[str, Any] = idle_report(at)
    payload["keeps_kernel_state"] = keeps
    if answer is not None:
        payload["kernel_state"] = kernel_state_json(answer)
    return payload


def outcome(kind: str = "kept", **kw: Any) -> KernelStateOutcome:
    return KernelStateOutcome("k1", kw.pop("notebook", "train.ipynb"), kind, **kw)  # type: ignore[arg-type]


async def test_an_answer_to_the_pending_ask_wakes_the_wait() -> None:
    store = ActivityStore()
    ask = store.ask_snapshot("alice", NOW, timedelta(seconds=30))
    assert ask.request(NOW).deadline_seconds == 28.0  # 2 s kept for the answer's way back
    assert ask.request(NOW + timedelta(seconds=40)).deadline_seconds == 0.0
    answer = KernelStateReport(NOW, (outcome(),))

    async def server() -> None:
        await asyncio.sleep(0.01)
        store.record("alice", "", report(NOW, answer=answer), NOW)

    task = asyncio.ensure_future(server())
    got = await store.wait_snapshot("alice", 5)
    await task
    assert got == answer


async def test_the_wait_ends_at_its_bound_without_an_answer() -> None:
    store = ActivityStore()
    store.ask_snapshot("alice", NOW, timedelta(seconds=30))
    # an answer to another (older) request, and a plain report, do not answer it
    old = KernelStateReport(NOW - timedelta(minutes=5), (outcome(),))
    store.record("alice", "", report(NOW, answer=old), NOW)
    store.record("alice", "", report(NOW), NOW)
    started = time.monotonic()
    assert await store.wait_snapshot("alice", 0.2) is None
    assert 0.15 <= time.monotonic() - started < 2
    assert await store.wait_snapshot("bob", 5) is None  # never asked: no wait at all


async def test_a_stopped_server_forgets_its_ask() -> None:
    store = ActivityStore()
    store.ask_snapshot("alice", NOW, timedelta(seconds=30))
    store.keep_only(["bob"])
    assert store.snapshot_ask("alice") is None


def test_a_warned_server_that_keeps_state_reports_at_its_saving_then_often() -> None:
    lead = timedelta(seconds=15)
    notice = Notice(NOW, NOW + timedelta(minutes=10), "queued work", 1)
    assert report_again_in(notice, keeps_state=True, now=NOW, save_lead=lead) == 585.0
    near = NOW + timedelta(minutes=9, seconds=50)
    assert report_again_in(notice, keeps_state=True, now=near, save_lead=lead) == REPORT_NEAR_STOP
    assert report_again_in(notice, keeps_state=False, now=near, save_lead=lead) is None
    assert report_again_in(None, keeps_state=True, now=near, save_lead=lead) is None
    dry = Notice(NOW, NOW + timedelta(minutes=10), "queued work", 1, dry_run=True)
    assert report_again_in(dry, keeps_state=True, now=near, save_lead=lead) is None


# --------------------------------------------------------------------------- what is recorded


LOSSES = outcome(
    "kept_with_losses", lost=(LostVariable("batches", "a generator"),), bytes=10, seconds=0.5
)


@pytest.mark.parametrize(
    ("kept", "result", "words"),
    [
        (KeptState(NOW, KernelStateReport(NOW, (outcome(),))), "kept", "its variables were saved"),
        (
            KeptState(NOW, KernelStateReport(NOW, (LOSSES,))),
            "kept_with_losses",
            "its variables were saved, except “batches” (a generator)",
        ),
        (
            KeptState(NOW, KernelStateReport(NOW, (LOSSES, outcome("failed", error="disk full")))),
            "interrupted",
            "could not be saved (disk full)",
        ),
        (
            KeptState(NOW, KernelStateReport(NOW, (outcome("skipped_busy"),))),
            "interrupted",
            "a cell was running",
        ),
        (
            KeptState(NOW, None, timeout=timedelta(seconds=60)),
            "interrupted",
            "kernel state not kept: no answer within snapshot_timeout (1m)",
        ),
        (
            KeptState(NOW, KernelStateReport(NOW, (), "the snapshot could not run: boom")),
            "interrupted",
            "kernel state not kept: the snapshot could not run: boom",
        ),
        (KeptState(NOW, KernelStateReport(NOW, ())), "kept", "no kernels running"),
        (
            KeptState(None),
            "interrupted",
            "kernel state not kept: the server does not keep kernel state",
        ),
    ],
)
def test_what_a_reclaim_kept(kept: KeptState, result: str, words: str) -> None:
    assert kept.result == result
    assert words in kept.words()


def test_the_audit_names_each_kernels_losses_and_never_a_value() -> None:
    kept = KeptState(
        NOW, KernelStateReport(NOW, (LOSSES,)), timedelta(seconds=60), timedelta(seconds=3)
    )
    record = kept.record(user="alice", server="", at=NOW)
    assert record["event"] == "culler.kernel-state"
    assert (record["result"], record["answered"], record["waited_seconds"]) == (
        "kept_with_losses",
        True,
        3.0,
    )
    (kernel,) = record["kernels"]
    assert kernel["notebook"] == "train.ipynb"
    assert kernel["lost"] == [{"name": "batches", "reason": "a generator"}]
    json.dumps(record)


def test_the_pods_mark_carries_the_outcomes_or_why_none() -> None:
    kept = KeptState(NOW, KernelStateReport(NOW, (LOSSES,)))
    mark = kept.mark()
    assert mark is not None
    assert read_kernel_state_mark(mark) == KernelStateReport(NOW, (LOSSES,))
    late = KeptState(NOW, None, timeout=timedelta(seconds=60)).mark()
    read = read_kernel_state_mark(late)
    assert read is not None
    assert read.outcomes == ()
    assert read.error == "no answer within snapshot_timeout (1m)"
    assert isoformat_z(read.requested_at) == isoformat_z(NOW)
    assert KeptState(None).mark() is None


def test_explain_and_the_policy_preview_see_who_keeps_state() -> None:
    # the console's snapshot of a cycle's inputs, read back, holds kept sessions to the same
    # threshold as the loop did
    ps = load_policy(one(idle_after_when_kept="15m", warn_before="5m"))
    keeps = bench("alice", idle=timedelta(minutes=20), keeps_state=True)
    received = NOW - timedelta(seconds=5)
    reports = {
        "alice": ActivityReport(
            received,
            parse_activity(report(NOW - timedelta(minutes=20)), now=NOW),
        )
    }
    dumped = dump_snapshot(NOW, [keeps], [job()], (), reports=reports, pod_utilization={})
    snap = load_snapshot(json.loads(json.dumps(dumped)), ps)
    (read,) = snap.workbenches
    assert read.keeps_state is True
    plan = decide(snap.workbenches, snap.pending, ps, now=snap.now)
    assert plan.decisions[0].action is Action.WARN


def test_the_sidebars_standing_names_the_threshold_its_server_is_held_to() -> None:
    ps = load_policy(one(idle_after_when_kept="15m"))
    benches = [
        bench("alice", idle=timedelta(minutes=5), keeps_state=True),
        bench("bob", idle=timedelta(minutes=5), keeps_state=False),
    ]
    plan = decide(benches, [], ps, now=NOW)
    alice = standing(plan, ps, "alice", now=NOW)
    bob = standing(plan, ps, "bob", now=NOW)
    assert policy_of(alice)["idle_after_seconds"] == 900
    assert policy_of(bob)["idle_after_seconds"] == 1800

"""The culler's decisions: table-driven with an injected clock, plus property tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas_service.reclaim.decide import (
    WORKBENCH_RULES,
    Action,
    Decision,
    HandOffRecord,
    HandOffStatus,
    Need,
    PendingWorkload,
    Plan,
    Workbench,
    assess_handoff,
    decide,
    idle_enough_for_demand,
    in_use_or_unsure,
    never_touched,
    past_max_age,
    reasons_of_its_own,
    serve_demand,
    snooze,
)
from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import PolicyError, PolicySet, load_policy

NOW = datetime(2026, 11, 30, 16, 40, tzinfo=timezone.utc)
MIG = ("a100-mig", "nvidia.com/mig-1g.5gb")
MIG_B = ("h100-mig", "nvidia.com/mig-1g.5gb")
GPU = ("h100", "nvidia.com/gpu")


def ago(**kw: float) -> datetime:
    return NOW - timedelta(**kw)


def policies(**fields: Any) -> PolicySet:
    top: dict[str, Any] = {
        k: fields.pop(k) for k in ("dry_run_all", "exempt", "handoff_timeout") if k in fields
    }
    data: dict[str, Any] = {
        "policies": [{"name": "p", "idle_after": "30m", "warn_before": "15m", **fields}]
    }
    if "dry_run_all" in top:
        data["dry_run"] = top.pop("dry_run_all")
    data.update(top)
    return load_policy(data)


def bench(
    user: str = "alice",
    *,
    idle: timedelta | None = timedelta(hours=2),
    state: State = State.IDLE,
    unknown_for: timedelta = timedelta(0),
    holds: dict[tuple[str, str], int] | None = None,
    cq: str = "team-a-notebooks",
    cohorts: tuple[str, ...] = ("gpuaas",),
    age: timedelta = timedelta(hours=8),
    phase: str = "running",
    warned: timedelta | None = None,
    snoozed_until: datetime | None = None,
    snoozes_used: int = 0,
    kind: str = "mig",
    team: str = "team-a",
    groups: tuple[str, ...] = ("team-a",),
    server: str = "",
) -> Workbench:
    last = NOW - (idle or timedelta(0)) if state is not State.BUSY else NOW
    return Workbench(
        user=user,
        server=server,
        groups=groups,
        team=team,
        kind=kind,
        offering="mig-1g" if kind == "mig" else kind,
        holds={k: Fraction(v) for k, v in (holds if holds is not None else {MIG: 1}).items()},
        gpu_equivalents=Fraction(1, 7),
        cluster_queue=cq,
        cohorts=cohorts,
        started_at=NOW - age,
        phase=phase,
        idleness=Idleness(
            state,
            last,
            {State.IDLE: "quiet", State.BUSY: "kernel k is busy", State.UNKNOWN: "no report"}[
                state
            ],
            unknown_since=NOW - unknown_for if state is State.UNKNOWN else None,
        ),
        snoozes_used=snoozes_used,
        snoozed_until=snoozed_until,
        warned_at=NOW - warned if warned is not None else None,
    )


def job(
    name: str = "train",
    *,
    amount: int = 1,
    free: int = 0,
    resource: tuple[str, str] = MIG,
    flavors: tuple[str, ...] | None = None,
    cq: str = "team-a-training",
    cohorts: tuple[str, ...] = ("gpuaas",),
    priority: int = 100,
    position: int = 0,
    needs: tuple[Need, ...] | None = None,
) -> PendingWorkload:
    flavor, res = resource
    return PendingWorkload(
        name=name,
        namespace="team-a",
        cluster_queue=cq,
        cohorts=cohorts,
        priority=priority,
        position=position,
        needs=needs
        if needs is not None
        else (
            Need(
                resource=res,
                amount=Fraction(amount),
                flavors=flavors if flavors is not None else (flavor,),
                free={flavor: Fraction(free)},
            ),
        ),
    )


def run(
    benches: Sequence[Workbench],
    pending: Sequence[PendingWorkload] = (),
    ps: PolicySet | None = None,
    **kw: Any,
) -> Plan:
    return decide(benches, pending, ps or policies(), now=NOW, **kw)


def only(plan: Plan) -> Decision:
    (d,) = plan.decisions
    return d


def actions(plan: Plan) -> dict[str, tuple[str, str]]:
    return {d.workbench.key: (d.action.value, d.code) for d in plan.decisions}


H = timedelta(hours=1)
M = timedelta(minutes=1)

Rule = Callable[..., Any]
"""A rule of :mod:`gpuaas_service.reclaim.decide`, named in the table by its function."""

# id, policy fields, workbench args, pending, expected (action, code)
TABLE: list[
    tuple[str, dict[str, Any], dict[str, Any], list[PendingWorkload], tuple[str, str, Rule]]
] = [
    (
        "no policy matches",
        {"match": {"kinds": ["gpu"]}},
        {},
        [job()],
        ("skip", "no-policy", never_touched),
    ),
    ("starting", {}, {"phase": "starting"}, [job()], ("skip", "starting", never_touched)),
    ("stopping", {}, {"phase": "stopping"}, [job()], ("skip", "stopping", never_touched)),
    (
        "exempt user (file)",
        {"exempt": {"users": ["alice"]}},
        {},
        [job()],
        ("skip", "exempt", never_touched),
    ),
    (
        "exempt group (policy)",
        {"exempt_p": True},
        {"groups": ("vip",)},
        [job()],
        ("skip", "exempt", never_touched),
    ),
    ("snoozed", {}, {"snoozed_until": NOW + M}, [job()], ("skip", "snoozed", never_touched)),
    ("snooze over", {}, {"snoozed_until": NOW - M}, [job()], ("warn", "demand", serve_demand)),
    ("busy, with demand", {}, {"state": State.BUSY}, [job()], ("skip", "busy", in_use_or_unsure)),
    # max_age is a hard cap: busy or unknown, it is warned and then reclaimed.
    (
        "busy, past max_age",
        {"max_age": "1h"},
        {"state": State.BUSY},
        [],
        ("warn", "max-age", past_max_age),
    ),
    (
        "unknown within grace, past max_age",
        {"max_age": "1h"},
        {"state": State.UNKNOWN, "unknown_for": M},
        [],
        ("warn", "max-age", past_max_age),
    ),
    (
        "busy, past max_age, snoozed",
        {"max_age": "1h"},
        {"state": State.BUSY, "snoozed_until": NOW + M},
        [],
        ("skip", "snoozed", never_touched),
    ),
    (
        "busy, reclaim always",
        {"reclaim": "always"},
        {"state": State.BUSY},
        [],
        ("skip", "busy", in_use_or_unsure),
    ),
    (
        "unknown within grace, max_idle reached",
        {"max_idle": "1h", "unknown_grace": "1h"},
        {"state": State.UNKNOWN, "unknown_for": 30 * M},
        [job()],
        ("skip", "unknown", in_use_or_unsure),
    ),
    (
        "unknown past grace, max_idle reached",
        {"max_idle": "1h", "unknown_grace": "1h"},
        {"state": State.UNKNOWN, "unknown_for": 90 * M},
        [],
        ("warn", "max-idle", reasons_of_its_own),
    ),
    (
        "unknown past grace, max_age reached",
        {"max_age": "4h", "unknown_grace": "1h"},
        {"state": State.UNKNOWN, "unknown_for": 90 * M, "idle": 90 * M},
        [],
        ("warn", "max-age", past_max_age),
    ),
    (
        "unknown past grace: never for demand",
        {"unknown_grace": "1h"},
        {"state": State.UNKNOWN, "unknown_for": 2 * H},
        [job()],
        ("skip", "unknown", reasons_of_its_own),
    ),
    (
        "idle, not long enough",
        {},
        {"idle": 29 * M},
        [job()],
        ("skip", "not-idle-yet", idle_enough_for_demand),
    ),
    ("idle long enough, demand", {}, {"idle": 30 * M}, [job()], ("warn", "demand", serve_demand)),
    ("idle, no demand", {}, {}, [], ("skip", "no-demand", serve_demand)),
    ("reclaim always", {"reclaim": "always"}, {}, [], ("warn", "always", reasons_of_its_own)),
    (
        "reclaim always, not idle enough",
        {"reclaim": "always"},
        {"idle": 10 * M},
        [],
        ("skip", "not-idle-yet", idle_enough_for_demand),
    ),
    (
        "max_idle reached",
        {"max_idle": "2h"},
        {"idle": 2 * H},
        [],
        ("warn", "max-idle", reasons_of_its_own),
    ),
    (
        "max_idle not reached",
        {"max_idle": "3h"},
        {"idle": 2 * H},
        [],
        ("skip", "no-demand", serve_demand),
    ),
    (
        "max_age reached, idle a minute",
        {"max_age": "8h"},
        {"idle": M},
        [],
        ("warn", "max-age", past_max_age),
    ),
    (
        "max_age not reached",
        {"max_age": "9h"},
        {"idle": M},
        [],
        ("skip", "not-idle-yet", idle_enough_for_demand),
    ),
    ("warned, countdown running", {}, {"warned": 5 * M}, [job()], ("wait", "demand", serve_demand)),
    (
        "warned, countdown over",
        {},
        {"warned": 15 * M},
        [job()],
        ("reclaim", "demand", serve_demand),
    ),
    (
        "warned, demand gone",
        {},
        {"warned": 5 * M},
        [],
        ("clear-warning", "no-demand", serve_demand),
    ),
    (
        "warned, now busy",
        {},
        {"warned": 5 * M, "state": State.BUSY},
        [job()],
        ("clear-warning", "busy", in_use_or_unsure),
    ),
    (
        "warned, now snoozed",
        {},
        {"warned": 5 * M, "snoozed_until": NOW + H},
        [job()],
        ("clear-warning", "snoozed", never_touched),
    ),
    (
        "a warning before a snooze starts over",
        {},
        {"warned": 30 * M, "snoozed_until": NOW - M},
        [job()],
        ("warn", "demand", serve_demand),
    ),
    (
        "warned, stopping: left alone",
        {},
        {"warned": 20 * M, "phase": "stopping"},
        [job()],
        ("skip", "stopping", never_touched),
    ),
    (
        "warned for max_idle, over",
        {"max_idle": "1h"},
        {"warned": 16 * M},
        [],
        ("reclaim", "max-idle", reasons_of_its_own),
    ),
    (
        "warn_before 0 reclaims at once",
        {"warn_before": "0"},
        {},
        [job()],
        ("reclaim", "demand", serve_demand),
    ),
    (
        "warn_before 0, max_idle",
        {"warn_before": "0", "max_idle": "1h"},
        {},
        [],
        ("reclaim", "max-idle", reasons_of_its_own),
    ),
    (
        "demand from another cohort",
        {},
        {"cohorts": ("other",)},
        [job()],
        ("skip", "no-demand", serve_demand),
    ),
    (
        "demand from its own queue",
        {},
        {"cohorts": ()},
        [job(cq="team-a-notebooks")],
        ("warn", "demand", serve_demand),
    ),
    (
        "demand for another resource",
        {},
        {},
        [job(resource=GPU)],
        ("skip", "no-demand", serve_demand),
    ),
    (
        "demand in another flavor",
        {},
        {"holds": {MIG_B: 1}},
        [job()],
        ("skip", "no-demand", serve_demand),
    ),
    (
        "demand, any flavor",
        {},
        {"holds": {MIG_B: 1}},
        [job(flavors=())],
        ("warn", "demand", serve_demand),
    ),
    (
        "demand already met by free quota",
        {},
        {},
        [job(free=1)],
        ("skip", "no-demand", serve_demand),
    ),
    ("demand too large", {}, {}, [job(amount=2)], ("skip", "no-demand", serve_demand)),
]


@pytest.mark.parametrize(
    ("fields", "args", "pending", "expected"),
    [row[1:] for row in TABLE],
    ids=[row[0] for row in TABLE],
)
def test_single_workbench(
    fields: dict[str, Any],
    args: dict[str, Any],
    pending: list[PendingWorkload],
    expected: tuple[str, str, Rule],
) -> None:
    fields = dict(fields)
    if fields.pop("exempt_p", False):
        fields["exempt"] = {"groups": ["vip"]}
        ps = load_policy({"policies": [{"name": "p", "idle_after": "30m", **fields}]})
    else:
        ps = policies(**fields)
    d = only(run([bench(**args)], pending, ps))
    action, code, rule = expected
    assert (d.action.value, d.code, d.rule) == (action, code, rule.__name__), d.reason
    assert d.reason
    assert d.policy == (None if code == "no-policy" else "p")


def test_the_table_has_a_row_for_every_rule_but_placement() -> None:
    """Placement (rule 6) has its own table, in test_decide_placement.py."""
    named = {row[-1][2] for row in TABLE}
    assert named == {*WORKBENCH_RULES, serve_demand}


def test_warning_says_when_and_how_many_snoozes() -> None:
    d = only(run([bench(snoozes_used=1)], [job()], policies(max_snoozes=3)))
    assert d.action is Action.WARN
    assert d.reclaim_at == NOW + timedelta(minutes=15)
    assert d.snoozes_left == 2
    assert d.handoff == "team-a/train"
    assert d.reason == (
        "queued team-a/train needs what it holds (1 nvidia.com/mig-1g.5gb in a100-mig);"
        " reclaim at 2026-11-30T16:55:00.000Z unless it is used or kept"
    )


def test_reasons_name_the_cause() -> None:
    assert only(run([bench(idle=20 * M)], [job()])).reason == "idle 20m, idle after 30m"
    assert only(run([bench()], [], policies(max_idle="90m"))).reason.startswith(
        "idle 2h, max_idle is 1h30m"
    )
    exempt = only(run([bench()], [job()], policies(exempt={"users": ["alice"]})))
    assert exempt.reason == "user alice is exempt (exempt.users)"
    busy = only(run([bench(state=State.BUSY)], [job()]))
    assert busy.reason == "in use: kernel k is busy"
    gone = only(run([bench(warned=5 * M)], []))
    assert gone.reason.startswith("warning withdrawn: idle 2h, but no queued work can use")


# --------------------------------------------------------------------------- dry run


@pytest.mark.parametrize("where", ["policy", "file", "call"])
def test_dry_run_marks_decisions(where: str) -> None:
    ps = policies(dry_run=True) if where == "policy" else policies(dry_run_all=where == "file")
    plan = run(
        [bench(), bench("bob", idle=3 * H, warned=20 * M)],
        [job(amount=2)],
        ps,
        dry_run=where == "call",
    )
    assert all(d.dry_run for d in plan.decisions)
    assert plan.to_act_on() == []
    assert {d.action for d in plan.decisions} == {Action.WARN, Action.WAIT}


def test_a_batch_with_one_dry_run_member_is_dry_run() -> None:
    ps = load_policy(
        {
            "policies": [
                {
                    "name": "trial",
                    "match": {"users": ["bob"]},
                    "idle_after": "30m",
                    "dry_run": True,
                },
                {"name": "live", "idle_after": "30m"},
            ]
        }
    )
    plan = run([bench(), bench("bob")], [job(amount=2)], ps)
    assert [(d.action, d.dry_run) for d in plan.decisions] == [(Action.WARN, True)] * 2
    assert plan.targets[0].dry_run
    alone = run([bench()], [job()], ps)
    assert not only(alone).dry_run


# --------------------------------------------------------------------------- hand-off


def test_just_enough_longest_idle_first_and_busy_untouched() -> None:
    plan = run(
        [
            bench("alice", idle=2 * H),
            bench("bob", idle=5 * H),
            bench("carol", state=State.BUSY),
            bench("dave", idle=3 * H),
        ],
        [job(amount=2)],
    )
    assert actions(plan) == {
        "alice": ("skip", "no-demand"),
        "bob": ("warn", "demand"),
        "carol": ("skip", "busy"),
        "dave": ("warn", "demand"),
    }
    (target,) = plan.targets
    assert target.status == "warn"
    assert target.workbenches == ("bob", "dave")
    assert target.frees == {MIG: 2}
    assert target.reclaim_at == NOW + timedelta(minutes=15)
    alice = plan.decisions[0]
    assert alice.reason.startswith("not needed: bob, dave cover what team-a/train lacks")


def test_free_quota_reduces_what_is_reclaimed() -> None:
    plan = run([bench("alice"), bench("bob", idle=3 * H)], [job(amount=2, free=1)])
    assert actions(plan) == {"alice": ("skip", "no-demand"), "bob": ("warn", "demand")}


def test_not_enough_idle_reclaims_nothing() -> None:
    plan = run([bench("alice"), bench("bob"), bench("carol", state=State.BUSY)], [job(amount=3)])
    assert [d.action for d in plan.decisions] == [Action.SKIP] * 3
    (target,) = plan.targets
    assert target.status == "not-enough"
    assert target.reason == (
        "team-a/train lacks 3 nvidia.com/mig-1g.5gb in a100-mig; the idle workbenches it could"
        " use hold only 2: reclaiming fewer would admit nothing"
    )
    assert plan.decisions[0].reason == target.reason


def test_batch_is_reclaimed_together() -> None:
    early, late = bench("alice", warned=20 * M), bench("bob", warned=5 * M, idle=H)
    plan = run([early, late], [job(amount=2)])
    assert actions(plan) == {"alice": ("wait", "demand"), "bob": ("wait", "demand")}
    assert plan.decisions[0].reclaim_at == NOW + timedelta(minutes=10)
    assert "with the rest of its batch" in plan.decisions[0].reason
    later = decide([early, late], [job(amount=2)], policies(), now=NOW + timedelta(minutes=10))
    assert {d.action for d in later.decisions} == {Action.RECLAIM}
    assert later.targets[0].status == "reclaim"
    assert all(d.handoff == "team-a/train" for d in later.decisions)


def test_a_warned_one_that_became_busy_is_replaced() -> None:
    plan = run(
        [
            bench("alice", warned=10 * M, state=State.BUSY),
            bench("bob", warned=10 * M),
            bench("carol", idle=H),
        ],
        [job(amount=2)],
    )
    assert actions(plan) == {
        "alice": ("clear-warning", "busy"),
        "bob": ("wait", "demand"),
        "carol": ("warn", "demand"),
    }
    assert plan.targets[0].reclaim_at == NOW + timedelta(minutes=15)


def test_warnings_are_kept_while_a_warned_batch_member_has_not_reported_yet() -> None:
    # A restarted culler: bob has reported (idle), alice not yet (unknown).
    alice = bench("alice", warned=10 * M, state=State.UNKNOWN, unknown_for=timedelta(seconds=2))
    bob = bench("bob", warned=10 * M)
    plan = run([alice, bob], [job(amount=2)])
    assert actions(plan) == {"alice": ("skip", "unknown"), "bob": ("skip", "no-demand")}
    assert "warning kept while a warned workbench's activity is unknown" in plan.decisions[1].reason
    assert not plan.to_act_on()  # no warning withdrawn, nothing stopped
    # Without a warned unknown one, bob alone is too few: his warning is withdrawn.
    plan = run([bench("alice", state=State.UNKNOWN), bob], [job(amount=2)])
    assert actions(plan)["bob"] == ("clear-warning", "no-demand")


def test_already_warned_ones_come_before_longer_idle_ones() -> None:
    plan = run([bench("alice", idle=9 * H), bench("bob", idle=H, warned=M)], [job()])
    assert actions(plan) == {"alice": ("skip", "no-demand"), "bob": ("wait", "demand")}


def test_own_queue_before_cohort() -> None:
    plan = run(
        [bench("alice", idle=9 * H), bench("bob", idle=H, cq="team-a-training")],
        [job()],
    )
    assert actions(plan)["bob"] == ("warn", "demand")
    assert actions(plan)["alice"] == ("skip", "no-demand")


def test_nearest_cohort_first() -> None:
    far = bench("alice", idle=9 * H, cohorts=("team-b", "root"))
    near = bench("bob", idle=H, cohorts=("team-a", "root"))
    plan = run([far, near], [job(cohorts=("team-a", "root"))])
    assert actions(plan) == {"alice": ("skip", "no-demand"), "bob": ("warn", "demand")}
    only_far = run([far], [job(cohorts=("team-a", "root"))])
    assert actions(only_far) == {"alice": ("warn", "demand")}


def test_own_reasons_count_for_demand_first() -> None:
    ps = policies(max_idle="3h")
    plan = run([bench("alice", idle=9 * H), bench("bob", idle=4 * H)], [job()], ps)
    d = {x.workbench.user: x for x in plan.decisions}
    assert (d["alice"].action, d["alice"].code) == (Action.WARN, "max-idle")
    assert (d["bob"].action, d["bob"].code) == (Action.WARN, "max-idle")
    assert plan.targets[0].workbenches == ("alice",)
    assert d["alice"].handoff == "team-a/train"
    assert d["bob"].handoff is None


def test_fewest_workbenches_across_flavor_options() -> None:
    one_big = bench("alice", idle=H, holds={MIG_B: 2})
    two_small = [bench("bob", idle=5 * H), bench("carol", idle=5 * H)]
    wl = job(amount=2, flavors=("a100-mig", "h100-mig"))
    plan = run([one_big, *two_small], [wl])
    assert plan.targets[0].workbenches == ("alice",)
    assert plan.targets[0].frees == {MIG_B: 2}


def test_several_needs_are_covered_together() -> None:
    both = bench("alice", idle=H, holds={MIG: 1, GPU: 1})
    gpu = bench("bob", idle=5 * H, holds={GPU: 1}, kind="gpu")
    mig = bench("carol", idle=5 * H)
    needs = (
        Need(resource=MIG[1], amount=Fraction(1), flavors=(MIG[0],)),
        Need(resource=GPU[1], amount=Fraction(1), flavors=(GPU[0],)),
    )
    plan = run([both, gpu, mig], [job(needs=needs)])
    # carol (MIG) and bob (GPU) are idle longest; alice alone would do, but order wins and the
    # selection stays minimal: neither of the two can be left out.
    assert set(plan.targets[0].workbenches) == {"bob", "carol"}
    no_gpu_free = run([both, mig], [job(needs=needs)])
    assert no_gpu_free.targets[0].workbenches == ("alice",)


def test_two_queues_never_share_a_workbench() -> None:
    plan = run(
        [bench("alice"), bench("bob", idle=3 * H)],
        [
            job("low", cq="team-b-training", priority=10),
            job("high", cq="team-a-training", priority=100),
            job("second", cq="team-a-training", priority=100, position=1),
        ],
    )
    by_name = {t.workload.name: t for t in plan.targets}
    assert set(by_name) == {"high", "low"}  # only the head of each queue
    assert by_name["high"].workbenches == ("bob",)
    assert by_name["low"].workbenches == ("alice",)
    assert [t.workload.name for t in plan.targets] == ["high", "low"]


def test_a_queue_waiting_for_its_hand_off_gets_nothing_more() -> None:
    record = HandOffRecord(
        workload="team-a/train-0", cluster_queue="team-a-training", reclaimed_at=NOW - 4 * M
    )
    plan = run([bench()], [job()], handoffs=[record])
    assert only(plan).code == "no-demand"
    (target,) = plan.targets
    assert target.status == "handoff-waiting"
    assert target.reason.startswith("waiting for team-a/train-0 to be admitted (reclaimed 4m ago")


def test_a_failed_hand_off_blocks_its_queue_while_that_workload_waits() -> None:
    record = HandOffRecord(
        workload="team-a/train", cluster_queue="team-a-training", reclaimed_at=NOW - 30 * M
    )
    plan = run([bench()], [job()], handoffs=[record])
    (target,) = plan.targets
    assert target.status == "blocked"
    assert "was not admitted within 10m" in target.reason
    assert only(plan).code == "no-demand"
    assert "not reclaiming for ClusterQueue team-a-training" in only(plan).reason
    # The workload is gone (admitted late, deleted): the queue is served again.
    again = run([bench()], [job("next")], handoffs=[record])
    assert only(again).action is Action.WARN


def test_assess_handoff() -> None:
    timeout = timedelta(minutes=10)
    base = HandOffRecord(workload="ns/w", cluster_queue="q", reclaimed_at=NOW - 20 * M)
    ok = assess_handoff(
        HandOffRecord(
            workload="ns/w", cluster_queue="q", reclaimed_at=NOW - 20 * M, admitted_at=NOW - 17 * M
        ),
        now=NOW,
        timeout=timeout,
    )
    assert (ok.status, ok.latency) == (HandOffStatus.SUCCEEDED, 3 * M)
    late = assess_handoff(
        HandOffRecord(
            workload="ns/w", cluster_queue="q", reclaimed_at=NOW - 20 * M, admitted_at=NOW - M
        ),
        now=NOW,
        timeout=timeout,
    )
    assert (late.status, late.latency) == (HandOffStatus.FAILED, 19 * M)
    assert assess_handoff(base, now=NOW - 11 * M, timeout=timeout).status is HandOffStatus.WAITING
    assert assess_handoff(base, now=NOW, timeout=timeout).status is HandOffStatus.FAILED


def test_handoff_timeout_comes_from_the_policy_file() -> None:
    record = HandOffRecord(
        workload="team-a/train", cluster_queue="team-a-training", reclaimed_at=NOW - 30 * M
    )
    plan = run([bench()], [job()], policies(handoff_timeout="1h"), handoffs=[record])
    assert plan.targets[0].status == "handoff-waiting"


# --------------------------------------------------------------------------- snooze


def test_snooze() -> None:
    p = policies(max_snoozes=2, snooze_for="45m").policies[0]
    first = snooze(bench(), p, now=NOW)
    assert (first.allowed, first.until, first.snoozes_left) == (True, NOW + 45 * M, 1)
    assert snooze(bench(snoozes_used=1), p, now=NOW).snoozes_left == 0
    refused = snooze(bench(snoozes_used=2), p, now=NOW)
    assert not refused.allowed
    assert refused.reason == "no snoozes left (policy p allows 2 per server)"
    none = policies(max_snoozes=0).policies[0]
    assert not snooze(bench(), none, now=NOW).allowed
    longer = snooze(bench(snoozed_until=NOW + 2 * H), p, now=NOW)
    assert longer.until == NOW + 2 * H


# --------------------------------------------------------------------------- records


def test_log_record_is_json() -> None:
    plan = run([bench(), bench("bob", state=State.BUSY)], [job()])
    records = [d.log_record(NOW) for d in plan.decisions]
    text = json.dumps(records)
    assert json.loads(text)[0] == {
        "event": "culler.decision",
        "at": "2026-11-30T16:40:00.000Z",
        "action": "warn",
        "code": "demand",
        "rule": "serve_demand",
        "reason": plan.decisions[0].reason,
        "user": "alice",
        "server": "",
        "team": "team-a",
        "kind": "mig",
        "offering": "mig-1g",
        "gpu_equivalents": "0.14",
        "policy": "p",
        "dry_run": False,
        "activity": "idle",
        "idle_seconds": 7200,
        "reclaim_at": "2026-11-30T16:55:00.000Z",
        "handoff": "team-a/train",
        "snoozes_left": 1,
    }
    assert records[1]["action"] == "skip"


def test_to_act_on() -> None:
    plan = run(
        [bench("alice", warned=20 * M), bench("bob", state=State.BUSY, warned=M), bench("carol")],
        [job()],
    )
    assert [(d.workbench.user, d.action) for d in plan.to_act_on()] == [
        ("alice", Action.RECLAIM),
        ("bob", Action.CLEAR_WARNING),
    ]
    assert plan.with_action(Action.SKIP)[0].workbench.user == "carol"


def test_named_servers_are_separate() -> None:
    plan = run([bench(server="gpu"), bench()], [job()])
    assert [d.workbench.key for d in plan.decisions] == ["alice/gpu", "alice"]


# --------------------------------------------------------------------------- properties

USERS = [f"u{i}" for i in range(8)]
FLAVORS = ["f1", "f2"]
RESOURCES = ["r1", "r2"]


@st.composite
def workbenches(draw: st.DrawFn) -> list[Workbench]:
    out = []
    n = draw(st.integers(min_value=0, max_value=7))
    for user in USERS[:n]:
        state = draw(st.sampled_from(list(State)))
        holds = draw(
            st.dictionaries(
                st.tuples(st.sampled_from(FLAVORS), st.sampled_from(RESOURCES)),
                st.integers(min_value=1, max_value=3).map(Fraction),
                max_size=2,
            )
        )
        out.append(
            bench(
                user,
                state=state,
                idle=timedelta(minutes=draw(st.integers(min_value=0, max_value=600))),
                unknown_for=timedelta(minutes=draw(st.integers(min_value=0, max_value=180))),
                holds={k: int(v) for k, v in holds.items()},
                cq=draw(st.sampled_from(["nb-a", "nb-b", "train-a"])),
                cohorts=draw(st.sampled_from([(), ("a",), ("b",), ("a", "root")])),
                age=timedelta(hours=draw(st.integers(min_value=0, max_value=48))),
                phase=draw(st.sampled_from(["running", "running", "starting", "stopping"])),
                warned=draw(
                    st.none()
                    | st.integers(min_value=0, max_value=40).map(lambda m: timedelta(minutes=m))
                ),
                snoozed_until=draw(st.none() | st.sampled_from([NOW - M, NOW + H])),
                groups=draw(st.sampled_from([(), ("ops",), ("ml",)])),
            )
        )
    return out


@st.composite
def pending(draw: st.DrawFn) -> list[PendingWorkload]:
    out = []
    for i in range(draw(st.integers(min_value=0, max_value=3))):
        flavor = draw(st.sampled_from(FLAVORS))
        resource = draw(st.sampled_from(RESOURCES))
        out.append(
            job(
                f"w{i}",
                amount=draw(st.integers(min_value=1, max_value=6)),
                free=draw(st.integers(min_value=0, max_value=2)),
                resource=(flavor, resource),
                cq=draw(st.sampled_from(["train-a", "train-b", "nb-a"])),
                cohorts=draw(st.sampled_from([(), ("a",), ("b", "root")])),
                priority=draw(st.integers(min_value=0, max_value=2)),
                position=i,
            )
        )
    return out


policy_sets = st.builds(
    lambda reclaim, max_idle, max_age, warn, grace, exempt: policies(
        reclaim=reclaim,
        max_idle=max_idle,
        max_age=max_age,
        warn_before=warn,
        unknown_grace=grace,
        exempt={"groups": ["ops"]} if exempt else None,
    ),
    st.sampled_from(["when-queued", "always"]),
    st.sampled_from([None, "1h", "5h"]),
    st.sampled_from([None, "12h"]),
    st.sampled_from(["0", "15m"]),
    st.sampled_from(["0", "1h"]),
    st.booleans(),
)


def _protected(wb: Workbench, ps: PolicySet, code: str = "") -> bool:
    """Never warned or reclaimed; busy and unknown only up to ``max_age``, the hard cap."""
    p = ps.policies[0]
    capped = code == "max-age" and p.max_age is not None and NOW - wb.started_at >= p.max_age
    if capped:
        return (
            wb.phase != "running"
            or (wb.snoozed_until is not None and wb.snoozed_until > NOW)
            or ("ops" in wb.groups and "ops" in ps.exempt_groups)
        )
    return (
        wb.idleness.state is State.BUSY
        or wb.phase != "running"
        or (wb.snoozed_until is not None and wb.snoozed_until > NOW)
        or ("ops" in wb.groups and "ops" in ps.exempt_groups)
        or (wb.idleness.state is State.UNKNOWN and wb.idleness.unknown_for(NOW) < p.unknown_grace)
    )


@settings(max_examples=60, deadline=None)
@given(workbenches(), pending(), policy_sets)
def test_no_active_or_protected_workbench_is_ever_selected(
    benches: list[Workbench], wls: list[PendingWorkload], ps: PolicySet
) -> None:
    plan = decide(benches, wls, ps, now=NOW)
    assert [d.workbench for d in plan.decisions] == benches
    chosen = {k for t in plan.targets for k in t.workbenches}
    assert len(chosen) == sum(len(t.workbenches) for t in plan.targets)  # no sharing
    for d in plan.decisions:
        wb = d.workbench
        if d.action in (Action.WARN, Action.WAIT, Action.RECLAIM) or wb.key in chosen:
            assert not _protected(wb, ps, d.code), (d.action, d.reason)
        if wb.key in chosen:
            assert wb.idleness.state is State.IDLE
            assert wb.idleness.idle_for(NOW) >= ps.policies[0].idle_after
        if d.action is Action.RECLAIM:
            warn = ps.policies[0].warn_before
            assert warn == timedelta(0) or (wb.warned_at is not None and wb.warned_at + warn <= NOW)
        if d.action is Action.CLEAR_WARNING:
            assert wb.warned_at is not None


@settings(max_examples=60, deadline=None)
@given(workbenches(), pending(), policy_sets)
def test_selection_covers_the_demand_and_is_minimal(
    benches: list[Workbench], wls: list[PendingWorkload], ps: PolicySet
) -> None:
    plan = decide(benches, wls, ps, now=NOW)
    by_key = {wb.key: wb for wb in benches}
    for t in plan.targets:
        if t.status not in ("warn", "reclaim"):
            assert not t.workbenches
            continue
        (need,) = t.workload.needs
        (flavor,) = need.flavors
        key = (flavor, need.resource)
        short = need.amount - need.free.get(flavor, Fraction(0))
        held = [by_key[k].holds.get(key, Fraction(0)) for k in t.workbenches]
        assert all(h > 0 for h in held)
        assert sum(held) >= short  # enough
        assert all(sum(held) - h < short for h in held)  # none could be left out


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=31, max_value=600), min_size=0, max_size=8),
    st.integers(min_value=1, max_value=8),
    st.integers(min_value=0, max_value=3),
)
def test_uniform_slices_take_exactly_the_shortfall_longest_idle_first(
    idle_minutes: list[int], amount: int, free: int
) -> None:
    benches = [bench(f"u{i}", idle=timedelta(minutes=m)) for i, m in enumerate(idle_minutes)]
    plan = run(benches, [job(amount=amount, free=free)])
    (t,) = plan.targets
    short = amount - free
    if short <= 0:
        assert t.status == "enough-free"
    elif short > len(benches):
        assert t.status == "not-enough"
        assert all(d.action is Action.SKIP for d in plan.decisions)
    else:
        assert len(t.workbenches) == short
        longest = sorted(benches, key=lambda b: (b.idleness.last_active, b.user))[:short]
        assert set(t.workbenches) == {b.key for b in longest}


# --------------------------------------------------------------------------- fair hand-overs


def _team_b(user: str, **kw: Any) -> Workbench:
    kw.setdefault("cq", "team-b-notebooks")
    return bench(user, team="team-b", groups=("team-b",), **kw)


def _team_job(amount: int = 1) -> PendingWorkload:
    return replace(job(amount=amount), team="team-a")


# id, prefer_own_team, workbenches, slices asked, chosen in order
OWN_TEAM_FIRST: list[tuple[str, bool, list[Workbench], int, tuple[str, ...]]] = [
    (
        "off: the longest idle of the cohort, a lender's",
        False,
        [bench("alice", idle=H), _team_b("carol", idle=3 * H)],
        1,
        ("carol",),
    ),
    (
        "on: the team's own idle server before a lender's longer idle one",
        True,
        [bench("alice", idle=H), _team_b("carol", idle=3 * H)],
        1,
        ("alice",),
    ),
    (
        "on: a lender's server only for what the team's own cannot cover",
        True,
        [bench("alice", idle=H), _team_b("carol", idle=3 * H), _team_b("dave", idle=2 * H)],
        2,
        ("alice", "carol"),
    ),
    (
        "on: the same ClusterQueue still comes first",
        True,
        [bench("alice", idle=H), _team_b("carol", idle=3 * H, cq="team-a-training")],
        1,
        ("carol",),
    ),
    (
        "on: a lender's server when the team has no idle one",
        True,
        [bench("alice", state=State.BUSY), _team_b("carol", idle=3 * H)],
        1,
        ("carol",),
    ),
    (
        # Carol was warned while alice was not idle enough; 30 s later alice was,
        # carol's warning was withdrawn and she had seen a countdown for nothing.
        "on: a lender's server already warned keeps its place before the team's newly idle one",
        True,
        [bench("alice", idle=H), _team_b("carol", idle=3 * H, warned=timedelta(seconds=30))],
        1,
        ("carol",),
    ),
]


@pytest.mark.parametrize(
    ("own_first", "benches", "amount", "chosen"),
    [row[1:] for row in OWN_TEAM_FIRST],
    ids=[row[0] for row in OWN_TEAM_FIRST],
)
def test_prefer_own_team(
    own_first: bool, benches: list[Workbench], amount: int, chosen: tuple[str, ...]
) -> None:
    ps = load_policy(
        {
            "prefer_own_team": own_first,
            "policies": [{"name": "p", "idle_after": "30m", "warn_before": "15m"}],
        }
    )
    assert ps.prefer_own_team is own_first
    plan = run(benches, [_team_job(amount)], ps)
    assert plan.targets[0].workbenches == chosen
    # warned now or counting down already; nobody else is warned
    counting = (Action.WARN, Action.WAIT)
    warned = tuple(d.workbench.user for d in plan.decisions if d.action in counting)
    assert warned == tuple(sorted(chosen, key=[b.user for b in benches].index))


def test_prefer_own_team_is_checked_as_a_boolean() -> None:
    with pytest.raises(PolicyError) as err:
        load_policy(
            {"prefer_own_team": "yes please", "policies": [{"name": "p", "idle_after": "1h"}]}
        )
    assert "prefer_own_team" in str(err.value)


# id, the kept one's warning (ago), when it was kept (ago), the others, slices asked,
# expected {user: (action, reclaim_at - NOW)}
S = timedelta(seconds=1)
IN_PLACE: list[
    tuple[str, timedelta, timedelta, list[Workbench], int, dict[str, tuple[str, timedelta | None]]]
] = [
    (
        "kept 1 s before its deadline: the one warned in its place gets all 15 min",
        15 * M - S,
        S,
        [_team_b("carol", idle=H)],
        1,
        {"alice": ("skip", None), "carol": ("warn", 15 * M)},
    ),
    (
        "kept at once: the same",
        S,
        S,
        [_team_b("carol", idle=H)],
        1,
        {"alice": ("skip", None), "carol": ("warn", 15 * M)},
    ),
    (
        "a batch: the member warned earlier waits for the newcomer's whole warning",
        14 * M,
        S,
        [bench("bob", idle=H, warned=14 * M), _team_b("carol", idle=H)],
        2,
        {"alice": ("skip", None), "bob": ("wait", 15 * M), "carol": ("warn", 15 * M)},
    ),
    (
        "nobody left to warn: the others' warnings are withdrawn, nothing is stopped",
        14 * M,
        S,
        [bench("bob", idle=H, warned=14 * M)],
        2,
        {"alice": ("skip", None), "bob": ("clear-warning", None)},
    ),
]


@pytest.mark.parametrize(
    ("warned", "kept", "others", "amount", "expected"),
    [row[1:] for row in IN_PLACE],
    ids=[row[0] for row in IN_PLACE],
)
def test_whoever_is_warned_in_place_of_a_kept_one_gets_the_full_warning(
    warned: timedelta,
    kept: timedelta,
    others: list[Workbench],
    amount: int,
    expected: dict[str, tuple[str, timedelta | None]],
) -> None:
    ps = policies(max_snoozes=1, snooze_for="1h")
    alice = bench("alice", idle=2 * H, warned=warned)
    before = run([alice, *others], [_team_job(amount)], ps)
    assert actions(before)["alice"][0] == "wait"
    pressed = snooze(alice, ps.policies[0], now=NOW - kept)
    assert pressed.allowed
    # As the loop keeps it: the press withdraws the warning and snoozes the server.
    alice = replace(alice, warned_at=None, snoozed_until=pressed.until, snoozes_used=1)
    plan = run([alice, *others], [_team_job(amount)], ps)
    got = {
        d.workbench.user: (
            d.action.value,
            d.reclaim_at - NOW if d.reclaim_at is not None else None,
        )
        for d in plan.decisions
    }
    assert got == expected
    assert not plan.with_action(Action.RECLAIM)

"""The ``--explain`` and ``--check-policy`` texts (gpuaas_service.reclaim.explain), rendered
from hand-built plans and policy sets: each line says what the culler does and why."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.reclaim.decide import (
    Action,
    Decision,
    PendingWorkload,
    PlacementTarget,
    PlacementWait,
    Plan,
    Target,
    Workbench,
)
from gpuaas_service.reclaim.explain import explain, explain_policies
from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import Notify, Policy, PolicySet

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)
GIB = 1 << 30


def workbench(
    user: str,
    *,
    state: State = State.IDLE,
    idle: timedelta = timedelta(hours=2),
    gpu_memory: int | None = 0,
    **fields: Any,
) -> Workbench:
    idleness = Idleness(
        state,
        last_active=NOW - idle,
        reason=state.value,
        unknown_since=NOW - idle if state is State.UNKNOWN else None,
        gpu_memory=gpu_memory,
    )
    return Workbench(user=user, started_at=NOW - timedelta(days=1), idleness=idleness, **fields)


def decision(wb: Workbench, action: Action, **fields: Any) -> Decision:
    return Decision(workbench=wb, action=action, code="max-idle", reason="idle too long", **fields)


def detail_of(text: str, key: str) -> tuple[str, str]:
    """The two lines of the workbench ``key``: its verdict and its cause."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  ") and f" {key} " in line:
            return line, lines[i + 1]
    raise AssertionError(f"no line for {key} in:\n{text}")


def test_an_empty_plan_says_there_is_nothing_to_do() -> None:
    text = explain(Plan(now=NOW, decisions=()))
    assert text.splitlines() == [
        "gpuaas-admin --explain at 2026-12-01T12:00:00.000Z",
        "",
        "Queued work: nothing pending that workbenches could make room for.",
        "",
        "Workbenches: none.",
        "",
        "Summary: reclaim 0 (0 GPU-equivalents), warn 0, waiting 0, warnings withdrawn 0,"
        " left alone 0.",
    ]
    assert text.endswith("\n")


def test_the_source_of_the_inputs_is_named_in_the_heading() -> None:
    text = explain(Plan(now=NOW, decisions=()), source="snap.json")
    assert (
        text.splitlines()[0]
        == "gpuaas-admin --explain at 2026-12-01T12:00:00.000Z (inputs: snap.json)"
    )


def test_a_reclaim_line_names_the_verb_the_workbench_its_size_team_and_policy() -> None:
    wb = workbench("alice", offering="a100-half", gpu_equivalents=Fraction(1, 2), team="ml")
    text = explain(
        Plan(now=NOW, decisions=(decision(wb, Action.RECLAIM, policy="teams", rule="max_idle"),))
    )
    first, detail = detail_of(text, "alice")
    assert first.split() == [
        "RECLAIM", "alice", "a100-half", "(0.5", "GPU),", "team", "ml,", "idle", "2h,", "policy",
        "teams",
    ]  # fmt: skip
    assert detail == "      max-idle [max_idle]: idle too long"
    assert "Summary: reclaim 1 (0.5 GPU-equivalents)" in text


@pytest.mark.parametrize(
    ("action", "verb"),
    [
        (Action.WARN, "WARN"),
        (Action.WAIT, "WAIT"),
        (Action.RECLAIM, "RECLAIM"),
        (Action.CLEAR_WARNING, "UNWARN"),
        (Action.SKIP, "skip"),
    ],
)
def test_each_action_has_its_verb(action: Action, verb: str) -> None:
    text = explain(Plan(now=NOW, decisions=(decision(workbench("alice"), action),)))
    first, _ = detail_of(text, "alice")
    assert first.split()[0] == verb


def test_a_workbench_without_offering_team_or_policy_says_so() -> None:
    text = explain(Plan(now=NOW, decisions=(decision(workbench("bob", kind="cpu"), Action.SKIP),)))
    first, _ = detail_of(text, "bob")
    assert first.endswith("cpu, team -, idle 2h, no policy")


@pytest.mark.parametrize(
    ("state", "activity"),
    [(State.BUSY, "busy"), (State.IDLE, "idle 2h"), (State.UNKNOWN, "unknown 2h")],
)
def test_the_activity_column_follows_the_verdict(state: State, activity: str) -> None:
    text = explain(Plan(now=NOW, decisions=(decision(workbench("a", state=state), Action.SKIP),)))
    first, _ = detail_of(text, "a")
    assert f", {activity}, no policy" in first


def test_dry_run_is_marked_on_acting_decisions_only_and_counted() -> None:
    plan = Plan(
        now=NOW,
        decisions=(
            decision(workbench("alice"), Action.RECLAIM, dry_run=True),
            decision(workbench("bob"), Action.SKIP, dry_run=True),
        ),
    )
    text = explain(plan)
    assert detail_of(text, "alice")[0].lstrip().startswith("RECLAIM (dry run) ")
    assert "(dry run)" not in detail_of(text, "bob")[0]
    assert text.rstrip().endswith(" 1 of these are dry-run decisions: recorded, not carried out.")


def test_snoozes_left_are_told_for_warnings_and_waits_not_for_reclaims() -> None:
    plan = Plan(
        now=NOW,
        decisions=(
            decision(workbench("alice"), Action.WARN, snoozes_left=2),
            decision(workbench("bob"), Action.WAIT, snoozes_left=0),
            decision(workbench("carol"), Action.RECLAIM, snoozes_left=1),
        ),
    )
    text = explain(plan)
    assert detail_of(text, "alice")[1].endswith("(2 snooze(s) left)")
    assert detail_of(text, "bob")[1].endswith("(0 snooze(s) left)")
    assert "snooze" not in detail_of(text, "carol")[1]


@pytest.mark.parametrize(
    ("held", "keeps_state", "said"),
    [
        (3 * GIB, False, "; its kernels hold 3.0 GiB of GPU memory, lost with the kernel state"),
        (512, True, "; its kernels hold 512 B of GPU memory, saved before the stop"),
        (1536 * 1024, False, "; its kernels hold 1.5 MiB of GPU memory, lost with"),
        (None, False, "; its kernels hold GPU memory of unknown size, lost with"),
        (2048 * GIB, False, "; its kernels hold 2.0 TiB of GPU memory"),
    ],
)
def test_the_gpu_memory_at_stake_is_told_in_units_and_whether_it_is_kept(
    held: int | None, keeps_state: bool, said: str
) -> None:
    wb = workbench("alice", gpu_memory=held, keeps_state=keeps_state)
    _, detail = detail_of(
        explain(Plan(now=NOW, decisions=(decision(wb, Action.RECLAIM),))), "alice"
    )
    assert said in detail


def test_no_gpu_memory_or_a_skip_says_nothing_of_memory() -> None:
    plan = Plan(
        now=NOW,
        decisions=(
            decision(workbench("alice", gpu_memory=0), Action.RECLAIM),
            decision(workbench("bob", gpu_memory=GIB), Action.SKIP),
        ),
    )
    text = explain(plan)
    assert "GPU memory" not in text


def test_the_key_column_is_as_wide_as_the_longest_key() -> None:
    plan = Plan(
        now=NOW,
        decisions=(
            decision(workbench("al"), Action.SKIP),
            decision(workbench("bob", server="training"), Action.SKIP),
        ),
    )
    text = explain(plan)
    first_al, _ = detail_of(text, "al")
    first_bob, _ = detail_of(text, "bob/training")
    assert first_al.index(" gpu,") == first_bob.index(" gpu,")


def test_queue_heads_are_listed_with_their_position_from_one_and_status() -> None:
    head = PendingWorkload(
        name="train", namespace="team-a", cluster_queue="cq-a", priority=5, position=0
    )
    plan = Plan(
        now=NOW,
        decisions=(),
        targets=(Target(workload=head, status="reclaim", reason="frees 1 GPU", dry_run=True),),
    )
    lines = explain(plan).splitlines()
    at = lines.index("Queued work (1 queue head(s)):")
    assert lines[at + 1] == "  team-a/train  (ClusterQueue cq-a, position 1, priority 5)"
    assert lines[at + 2] == "      reclaim [dry run]: frees 1 GPU"


@pytest.mark.parametrize(
    ("cards", "node", "queue", "head"),
    [
        (1, "", "", "  team-a/job-0  (1 whole H100 in local-h100, ClusterQueue -, priority 0)"),
        (
            2,
            "node-1",
            "cq-a",
            "  team-a/job-0  (2 whole H100s in local-h100 on node-1, ClusterQueue cq-a,"
            " priority 0)",
        ),
    ],
)
def test_placement_waits_say_how_many_cards_where_and_for_whom(
    cards: int, node: str, queue: str, head: str
) -> None:
    wait = PlacementWait(
        name="job-0",
        namespace="team-a",
        flavor="local-h100",
        gpu_type="H100",
        cards=cards,
        node=node,
        cluster_queue=queue,
    )
    plan = Plan(
        now=NOW,
        decisions=(),
        placements=(PlacementTarget(wait=wait, status="unplaceable", reason="no card"),),
    )
    lines = explain(plan).splitlines()
    at = lines.index("Admitted work waiting for whole cards (1):")
    assert lines[at + 1 : at + 3] == [head, "      unplaceable: no card"]


def test_the_summary_counts_each_action_and_adds_up_what_reclaims_free() -> None:
    plan = Plan(
        now=NOW,
        decisions=(
            decision(workbench("a", gpu_equivalents=Fraction(1)), Action.RECLAIM),
            decision(workbench("b", gpu_equivalents=Fraction(1, 2)), Action.RECLAIM),
            decision(workbench("c", gpu_equivalents=Fraction(4)), Action.WARN),
            decision(workbench("d"), Action.WAIT),
            decision(workbench("e"), Action.CLEAR_WARNING),
            decision(workbench("f"), Action.SKIP),
            decision(workbench("g"), Action.SKIP),
        ),
    )
    assert explain(plan).splitlines()[-1] == (
        "Summary: reclaim 2 (1.5 GPU-equivalents), warn 1, waiting 1, warnings withdrawn 1,"
        " left alone 2."
    )


def test_check_policy_lists_each_policy_and_the_file_wide_settings() -> None:
    policies = PolicySet(
        policies=(Policy(name="short", idle_after=timedelta(minutes=30)),),
        exempt_users=frozenset({"zed", "amy"}),
        exempt_groups=frozenset({"staff"}),
        report_stale_after=timedelta(minutes=5),
        handoff_timeout=timedelta(minutes=10),
        dry_run=True,
        notify=Notify(webhook="http://127.0.0.1:9/hook", timeout=timedelta(seconds=3)),
    )
    lines = explain_policies(policies).splitlines()
    assert lines[0] == "policy OK: 1 policy"
    assert lines[1].startswith("  policies[0] short: match ")
    assert "idle after 30m" in lines[1]
    assert lines[2] == (
        "  exempt: amy, zed, group staff; unknown after 5m without a report;"
        " hand-off must be admitted within 10m; dry run: nothing is carried out;"
        " warnings and reclaims posted to http://127.0.0.1:9/hook (timeout 3s)"
    )


def test_check_policy_of_a_plain_file_says_only_what_is_set() -> None:
    policies = PolicySet(
        policies=(
            Policy(name="a", idle_after=timedelta(hours=1)),
            Policy(name="b", idle_after=timedelta(hours=2)),
        ),
        report_stale_after=timedelta(minutes=5),
        handoff_timeout=timedelta(minutes=10),
    )
    lines = explain_policies(policies).splitlines()
    assert lines[0] == "policy OK: 2 policies"
    assert [line.split(":")[0] for line in lines[1:3]] == ["  policies[0] a", "  policies[1] b"]
    assert lines[3] == ("  unknown after 5m without a report; hand-off must be admitted within 10m")

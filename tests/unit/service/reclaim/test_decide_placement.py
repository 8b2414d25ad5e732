"""Rule 6 of decide.py: whole cards freed for admitted workloads that wait for them.

Quota is not placement: a whole-card Job admitted on the pool's quota waits while its card exists
only as scraps of shares on several cards. The plan frees the card whose idle shares cost least
(fewest sessions, then the idlest), through the same warn-then-stop path, and says so when no
card can be freed.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.reclaim.decide import (
    Action,
    Need,
    PendingWorkload,
    PlacementWait,
    Plan,
    Workbench,
    decide,
    serve_placement,
)
from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import PolicySet, load_policy

NOW = datetime(2026, 11, 30, 16, 40, tzinfo=timezone.utc)
H = timedelta(hours=1)
POOL = ("local-h100", "nvidia.com/total-gpucores")
CARD_A = "local-0/GPU-aaaaaaaa-1111"
CARD_B = "local-0/GPU-bbbbbbbb-2222"
CARD_C = "local-0/GPU-cccccccc-3333"


def share(
    user: str,
    card: str,
    *,
    idle: timedelta = 2 * H,
    state: State = State.IDLE,
    phase: str = "running",
    warned: timedelta | None = None,
    snoozed_until: datetime | None = None,
) -> Workbench:
    """Team A's idle quarter of an H100 of the pool, on ``card``."""
    return Workbench(
        user=user,
        team="team-a",
        groups=("team-a",),
        kind="fraction",
        offering="local-h100-quarter",
        holds={POOL: Fraction(25)},
        gpu_equivalents=Fraction(1, 4),
        cluster_queue="team-a-notebooks",
        cohorts=("gpuaas",),
        started_at=NOW - 8 * H,
        phase=phase,
        idleness=Idleness(state, NOW if state is State.BUSY else NOW - idle, "quiet"),
        snoozed_until=snoozed_until,
        warned_at=NOW - warned if warned is not None else None,
        cards=(card,),
    )


def policies(**fields: Any) -> PolicySet:
    return load_policy(
        {"policies": [{"name": "p", "idle_after": "30m", "warn_before": "15m", **fields}]}
    )


def wait(**kw: Any) -> PlacementWait:
    fields: dict[str, Any] = {
        "name": "train-x7k2p",
        "namespace": "team-a",
        "team": "team-a",
        "cluster_queue": "team-a-training",
        "flavor": "local-h100",
        "node": "local-0",
        "gpu_type": "H100",
        **kw,
    }
    return PlacementWait(**fields)


def plan_for(
    benches: list[Workbench],
    waits: list[PlacementWait],
    pending: list[PendingWorkload] | None = None,
    **policy: Any,
) -> Plan:
    return decide(benches, pending or [], policies(**policy), now=NOW, waits=waits)


def acts(plan: Plan) -> dict[str, tuple[str, str]]:
    return {d.workbench.key: (d.action.value, d.code) for d in plan.decisions}


WARN = ("warn", "placement")
LEFT = ("skip", "no-demand")

# id, shares (user, card, bench args), waits' args, expected per user, the target's status
TABLE: list[
    tuple[str, list[tuple[str, str, dict[str, Any]]], list[dict[str, Any]], dict[str, Any], str]
] = [
    (
        "the card with fewer sessions is freed",
        [("a1", CARD_A, {}), ("a2", CARD_A, {}), ("b1", CARD_B, {})],
        [{}],
        {"a1": LEFT, "a2": LEFT, "b1": WARN},
        "warn",
    ),
    (
        "equal cost: the idlest card",
        [("a1", CARD_A, {"idle": 2 * H}), ("b1", CARD_B, {"idle": 5 * H})],
        [{}],
        {"a1": LEFT, "b1": WARN},
        "warn",
    ),
    (
        "a card's idlest share does not make it idle: its latest activity counts",
        [
            ("a1", CARD_A, {"idle": 9 * H}),
            ("a2", CARD_A, {"idle": 1 * H}),
            ("b1", CARD_B, {"idle": 3 * H}),
            ("b2", CARD_B, {"idle": 2 * H}),
        ],
        [{}],
        {"a1": LEFT, "a2": LEFT, "b1": WARN, "b2": WARN},
        "warn",
    ),
    (
        "never a busy one: its card is not freed, the other card is",
        [("a1", CARD_A, {"state": State.BUSY}), ("b1", CARD_B, {}), ("b2", CARD_B, {})],
        [{}],
        {"a1": ("skip", "busy"), "b1": WARN, "b2": WARN},
        "warn",
    ),
    (
        "never a kept (snoozed) one",
        [("a1", CARD_A, {"snoozed_until": NOW + H}), ("b1", CARD_B, {})],
        [{}],
        {"a1": ("skip", "snoozed"), "b1": WARN},
        "warn",
    ),
    (
        "no card can be freed: nothing is touched, the plan says why",
        [("a1", CARD_A, {"state": State.BUSY}), ("b1", CARD_B, {"idle": timedelta(minutes=5)})],
        [{}],
        {"a1": ("skip", "busy"), "b1": ("skip", "not-idle-yet")},
        "unplaceable",
    ),
    (
        "a card other work holds is never freed",
        [("a1", CARD_A, {}), ("b1", CARD_B, {"state": State.BUSY})],
        [{"blocked": {CARD_A: "a share of team-b's Job"}}],
        {"a1": LEFT, "b1": ("skip", "busy")},
        "unplaceable",
    ),
    (
        "a whole card already free: nothing to reclaim",
        [("a1", CARD_A, {}), ("b1", CARD_B, {})],
        [{"free_cards": 1}],
        {"a1": LEFT, "b1": LEFT},
        "freeing",
    ),
    (
        "a card whose shares are stopping is being freed: nothing more is taken",
        [("a1", CARD_A, {"phase": "stopping"}), ("b1", CARD_B, {})],
        [{}],
        {"a1": ("skip", "stopping"), "b1": LEFT},
        "freeing",
    ),
    (
        "two cards: both freed",
        [("a1", CARD_A, {}), ("b1", CARD_B, {}), ("c1", CARD_C, {}), ("c2", CARD_C, {})],
        [{"cards": 2}],
        {"a1": WARN, "b1": WARN, "c1": LEFT, "c2": LEFT},
        "warn",
    ),
    (
        "two cards, one free: one freed",
        [("a1", CARD_A, {}), ("b1", CARD_B, {"idle": 5 * H})],
        [{"cards": 2, "free_cards": 1}],
        {"a1": LEFT, "b1": WARN},
        "warn",
    ),
    (
        "two cards, only one can be freed: none is",
        [("a1", CARD_A, {}), ("b1", CARD_B, {"state": State.BUSY})],
        [{"cards": 2}],
        {"a1": LEFT, "b1": ("skip", "busy")},
        "unplaceable",
    ),
    (
        "another node's cards are not its",
        [("a1", "local-1/GPU-dddd", {}), ("b1", CARD_B, {"state": State.BUSY})],
        [{}],
        {"a1": LEFT, "b1": ("skip", "busy")},
        "unplaceable",
    ),
    (
        "another flavor's shares are not its",
        [("a1", CARD_A, {}), ("b1", CARD_B, {})],
        [{"flavor": "local-hami"}],
        {"a1": LEFT, "b1": LEFT},
        "unplaceable",
    ),
]


@pytest.mark.parametrize(
    ("shares", "waits", "expected", "status"),
    [pytest.param(*row[1:], id=row[0]) for row in TABLE],
)
def test_placement_table(
    shares: list[tuple[str, str, dict[str, Any]]],
    waits: list[dict[str, Any]],
    expected: dict[str, Any],
    status: str,
) -> None:
    plan = plan_for([share(u, card, **kw) for u, card, kw in shares], [wait(**w) for w in waits])
    assert acts(plan) == expected
    (target,) = plan.placements
    assert target.status == status, target.reason
    warned = {k for k, v in expected.items() if v == WARN}
    assert set(target.workbenches) == warned
    # each share warned for the waiting pod names the rule that chose it (Decision.rule)
    named = {d.workbench.key: d.rule for d in plan.decisions if d.action is Action.WARN}
    assert named == dict.fromkeys(warned, serve_placement.__name__)


def test_the_user_is_told_in_a_persons_words_and_the_reason_names_the_card() -> None:
    plan = plan_for([share("alice", CARD_A)], [wait()])
    (d,) = plan.decisions
    assert d.action is Action.WARN
    assert d.handoff == "team-a/train-x7k2p"
    assert d.told.startswith(
        "a training Job needs a whole H100; your idle share is on the card it can use; reclaim at"
    )
    assert "GPU-aaaaaaaa" in d.reason
    assert "local-0" in d.reason
    (target,) = plan.placements
    assert target.cards == (CARD_A,)
    assert "waits for 1 whole H100; freeing GPU-aaaaaaaa on local-0" in target.reason


def test_a_batch_is_reclaimed_together_once_every_countdown_is_over() -> None:
    warned = [
        share("a1", CARD_A, warned=timedelta(minutes=20)),
        share("a2", CARD_A, warned=timedelta(minutes=5)),
    ]
    plan = plan_for(warned, [wait()])
    assert acts(plan) == {"a1": ("wait", "placement"), "a2": ("wait", "placement")}
    over = [replace(wb, warned_at=NOW - timedelta(minutes=16)) for wb in warned]
    plan = plan_for(over, [wait()])
    assert acts(plan) == {"a1": ("reclaim", "placement"), "a2": ("reclaim", "placement")}
    assert plan.placements[0].status == "reclaim"


def test_warn_before_zero_reclaims_at_once() -> None:
    plan = plan_for([share("a1", CARD_A)], [wait()], warn_before="0s")
    assert acts(plan) == {"a1": ("reclaim", "placement")}


def test_unplaceable_says_which_card_holds_what() -> None:
    plan = plan_for(
        [share("a1", CARD_A, state=State.BUSY), share("b1", CARD_B, snoozed_until=NOW + H)],
        [wait()],
    )
    (target,) = plan.placements
    assert target.status == "unplaceable"
    assert "no card it could use can be freed" in target.reason
    assert "GPU-aaaaaaaa on local-0: a1 in use" in target.reason
    assert "GPU-bbbbbbbb on local-0: b1 kept by its user" in target.reason


def test_the_skipped_shares_say_what_waits_for_their_card() -> None:
    plan = plan_for([share("a1", CARD_A), share("b1", CARD_B, state=State.BUSY)], [wait(cards=2)])
    a1 = next(d for d in plan.decisions if d.workbench.key == "a1")
    assert a1.code == "no-demand"
    assert "waits for 2 whole H100s" in a1.reason


def test_placement_comes_before_queued_work_and_they_never_share_a_workbench() -> None:
    shares = [share("a1", CARD_A), share("b1", CARD_B, idle=5 * H)]
    queued = PendingWorkload(
        name="queued",
        namespace="team-a",
        cluster_queue="team-a-notebooks",
        cohorts=("gpuaas",),
        needs=(Need(resource=POOL[1], amount=Fraction(25), flavors=(POOL[0],)),),
    )
    plan = plan_for(shares, [wait()], [queued])
    assert acts(plan)["b1"] == WARN
    (t,) = plan.targets
    assert t.status == "warn"
    assert t.workbenches == ("a1",)
    assert acts(plan)["a1"] == ("warn", "demand")


def test_two_waits_never_take_the_same_card() -> None:
    shares = [share("a1", CARD_A), share("b1", CARD_B)]
    plan = plan_for(shares, [wait(name="first", priority=10), wait(name="second")])
    first, second = plan.placements
    assert first.wait.name == "first"
    assert second.wait.name == "second"
    assert set(first.cards) | set(second.cards) == {CARD_A, CARD_B}
    assert not set(first.cards) & set(second.cards)


def test_a_share_with_a_reason_of_its_own_keeps_its_code() -> None:
    plan = plan_for([share("a1", CARD_A, idle=10 * H)], [wait()], max_idle="8h")
    (d,) = plan.decisions
    assert (d.action, d.code, d.handoff) == (Action.WARN, "max-idle", "team-a/train-x7k2p")


def test_dry_run_marks_the_batch() -> None:
    plan = plan_for([share("a1", CARD_A), share("a2", CARD_A)], [wait()], dry_run=True)
    assert all(d.dry_run for d in plan.decisions)
    assert plan.placements[0].dry_run
    assert not plan.to_act_on()

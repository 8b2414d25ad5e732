"""Need-sized shares as the product ships them: advised by the product's own sizing code, packed
onto the fullest card that holds them of the fullest node that has one, and whole-GPU Jobs
placed only on wholly free cards (quota is not placement)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.replay import ladder
from benchmarks.replay.organisations import load
from benchmarks.replay.placement import Cards, Placement
from benchmarks.replay.sim import Simulation
from benchmarks.replay.trace import Interval, Session, Trace, TrainingJob
from jupyter_gpuaas.core.sizing import advise

SPEC = load("dgx-4")
HOUR = 3600.0


def _cards(free: list[int]) -> Cards:
    """Cards of 10 steps with ``free`` steps left on each."""
    cards = Cards.empty(len(free), 10)
    cards.free[:] = free
    return cards


@pytest.mark.parametrize(
    ("need", "card"),
    [(3, 3), (4, 1), (5, 2), (8, 0)],  # the fullest that holds it; an empty card last
)
def test_a_share_goes_on_the_fullest_card_that_holds_it(need: int, card: int) -> None:
    cards = _cards([10, 4, 7, 3])
    assert cards.place("nb", share_steps=need)
    assert cards.holders["nb"] == [(card, need)]


def test_no_share_or_job_is_placed_on_scraps() -> None:
    assert not _cards([2, 4, 3]).place("nb", share_steps=5)  # 9 steps free, no card holds 5
    cards = _cards([10, 9, 10, 10])
    assert cards.place("job", whole=2)
    assert [i for i, _n in cards.holders["job"]] == [0, 2]  # whole cards only
    assert not _cards([10, 9, 9, 9]).place("job", whole=2)  # 3.7 cards free, one whole


def test_cards_hold_what_they_place_and_give_it_back() -> None:
    cards = Cards.empty(3, 10)
    assert cards.place("nb-1", share_steps=4)
    assert cards.place("nb-2", share_steps=4)
    assert cards.free == [2, 10, 10]  # packed on one card
    assert cards.place("job", whole=2)
    assert cards.free == [2, 0, 0]
    assert not cards.place("job-2", whole=1)
    assert "job-2" not in cards.holders
    assert cards.release("job")
    assert cards.free == [2, 10, 10]
    assert not cards.release("job")
    pools = Placement.for_capacity({("h100", "nvidia.com/total-gpucores"): 300}, 10)
    assert pools is not None
    assert pools.pools["h100"].free == [10, 10, 10]
    assert Placement.for_capacity({("h100", "nvidia.com/gpu"): 3}, 10) is None  # no shares


def _session(
    name: str, user: str, team: str, start_h: float, length_h: float, gib: float
) -> Session:
    return Session(
        name=name,
        user=user,
        team=team,
        start_s=start_h * HOUR,
        length_s=length_h * HOUR,
        gpu_memory_gib=gib,
        intervals=(Interval(60.0, 120.0, "gpu", 0.2),),
    )


def _simulation(trace: Trace, *, advice: bool = False) -> Simulation:
    world = ladder.world(SPEC, "L2", 4, 0.5)
    return Simulation(
        trace,
        world.org,
        world.catalog,
        ladder.policy(ladder.RUNGS["L2"], ""),
        fractions=world.fractions,
        share_steps=ladder.SHARE_STEPS,
        advice=advice,
        check_invariants=True,
    )


def test_a_job_admitted_on_quota_waits_for_a_whole_card() -> None:
    """4 cards (per team 1 for notebooks, 1 for training). Each team: a 4-tenth and a 6-tenth
    share, packed on one card each; a 2-GPU Job takes the 2 whole cards. The 6-tenth shares
    end: 2 × 0.6 GPU free in scraps, 1.2 GPU of quota. A 1-GPU Job is admitted on that quota
    but no card is whole: it runs only when the 2-GPU Job gives its cards back."""
    sessions = (
        _session("s-0", "team-a-user00", "team-a", 0.0, 8.0, 30.0),  # 4 tenths (32 GiB)
        _session("s-1", "team-a-user01", "team-a", 0.1, 2.0, 45.0),  # 6 tenths (48 GiB)
        _session("s-2", "team-b-user00", "team-b", 0.2, 8.0, 30.0),
        _session("s-3", "team-b-user01", "team-b", 0.3, 2.0, 45.0),
    )
    jobs = (
        TrainingJob("big", "team-a", 0.5 * HOUR, 2, 5 * HOUR, False, 0.9),
        TrainingJob("small", "team-b", 3 * HOUR, 1, 1 * HOUR, False, 0.9),
    )
    trace = Trace(1, 1, 0.5, 0.0, ("team-a", "team-b"), jobs, sessions)
    sim = _simulation(trace)
    sim.run()
    assert sim.placement is not None
    assert sim.counters["unplaceable_jobs"] == 1
    small = sim.jobs["team-b/small"]
    big = sim.jobs["team-a/big"]
    assert big.first_admitted == pytest.approx(0.5 * HOUR, abs=1.0)  # two whole cards
    assert big.finished is not None
    assert small.first_admitted is not None
    # Its wait ends when it runs, on the card the big Job gave back, not at its admission.
    assert small.first_admitted == pytest.approx(big.finished + sim.latencies.release_s)
    assert sim.counters["unplaced_job_gpu_s"] == pytest.approx(
        small.first_admitted - 3 * HOUR, abs=1.0
    )


def test_shares_follow_the_products_advice_and_a_kernel_beyond_its_cap_goes_up() -> None:
    """One user, three sessions: the first gets the team's default (half a card); the second
    the product's advice from the first's peak (20 GiB × 1.25 → 32 GiB share); the third needs
    more than that: its first burst hits the cap and it takes the way up."""
    user = "team-a-user00"
    sessions = (
        _session("s-0", user, "team-a", 0.0, 1.0, 20.0),
        _session("s-1", user, "team-a", 2.0, 1.0, 10.0),
        _session("s-2", user, "team-a", 4.0, 1.0, 60.0),
    )
    trace = Trace(1, 1, 0.5, 0.0, ("team-a", "team-b"), (), sessions)
    sim = _simulation(trace, advice=True)
    sim.keep_activity = True
    sim.run()
    offerings = [sim.catalog.offerings[f"h100-share-{k}"] for k in range(1, 11)]
    second = advise(offerings, [20 * 1024], default="h100-share-5")
    assert second is not None
    assert second.offering == "h100-share-4"
    third = advise(offerings, [10 * 1024, 20 * 1024], default="h100-share-5")
    assert third is not None
    assert third.offering == "h100-share-4"
    picked = [sim.sessions[s.name].offering.slug for s in sessions]
    assert picked[:2] == ["h100-share-5", second.offering]
    assert picked[2] == "h100-share-8"  # after the way up: 64 GiB holds 60
    assert sim.counters["ways_up"] == 1
    assert sim.history.of(user)[0] == 60 * 1024
    # The burst ran once, on the bigger share, after the server came back.
    (burst,) = [r for r in sim.sessions["s-2"].realised if r[2] == "gpu"]
    assert burst[0] > 4 * HOUR + 60.0 + 30.0


def test_a_multi_gpu_job_is_never_split_across_nodes() -> None:
    """8 GPUs free on two nodes of 8 are not an 8-GPU Job's: the scheduler places a pod's GPUs
    on one node; a 4-GPU Job takes the node with the fewest whole cards that holds it."""
    cards = Cards.empty(16, 1, per_node=8)
    for i in range(16):
        assert cards.place(f"nb-{i}", whole=1)
    for i in (0, 1, 2, 3, 8, 9, 10, 11):
        cards.release(f"nb-{i}")
    assert not cards.place("job-8", whole=8)
    assert "job-8" not in cards.holders
    cards.release("nb-12")  # node 1 now has 5 whole cards free, node 0 has 4
    assert cards.place("job-4", whole=4)
    assert [i for i, _n in cards.holders["job-4"]] == [0, 1, 2, 3]


def test_a_share_goes_on_the_fullest_node_and_keeps_off_an_emptied_one() -> None:
    """HAMi's default node policy (binpack) puts a share on the fullest node with a card that
    holds it, then on that node's fullest card: a node a large Job has left stays whole, where
    the fullest card of the whole pool (the lowest empty card at a tie) would break it."""
    cards = Cards.empty(8, 10, per_node=4)
    assert cards.place("job-8", whole=4)
    assert cards.place("job-3", whole=3)
    assert [i for i, _n in cards.holders["job-3"]] == [4, 5, 6]
    cards.release("job-8")  # node 0 is empty again; node 1 has one card left
    assert cards.place("nb", share_steps=3)
    assert cards.holders["nb"] == [(7, 3)]
    assert cards.place("job-4", whole=4)  # node 0 still whole
    assert [i for i, _n in cards.holders["job-4"]] == [0, 1, 2, 3]
    # A share that the fullest node cannot hold goes to the next fullest that can.
    cards.release("job-4")
    assert cards.place("nb-2", share_steps=8)
    assert [i // 4 for i, _n in cards.holders["nb-2"]] == [0]
    # Among nodes equally full, the first; on the node, the fullest card that holds it.
    even = Cards.empty(4, 10, per_node=2)
    assert even.place("x", share_steps=6)
    assert even.holders["x"] == [(0, 6)]
    assert even.place("y", share_steps=2)
    assert even.holders["y"] == [(0, 2)]
    assert even.place("z", share_steps=5)
    assert even.holders["z"] == [(1, 5)]


def test_every_replayed_job_is_on_one_node(monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-GPU rungs and the shares rungs alike place each Job's GPUs on one node (the
    last node of a size that is not whole nodes holds the cards left over)."""
    placed: list[tuple[int, list[int]]] = []
    original = Cards.place

    def record(self: Cards, key: str, *, share_steps: int = 0, whole: int = 0, **tas: Any) -> bool:
        ok = original(self, key, share_steps=share_steps, whole=whole, **tas)
        if ok and whole > 1:
            placed.append((self.per_node, [i for i, _n in self.holders[key]]))
        return ok

    monkeypatch.setattr(Cards, "place", record)
    from benchmarks.replay import capacity

    for rung in ("L1", "L2"):
        run = capacity.RunSpec(org="dgx-4", rung=rung, gpus=20, seed=5, days=0.5, burn_in_h=12.0)
        figures = capacity.run_one(run)
        assert figures["jobs"] > 0
    assert any(len(cards) >= 4 for _per, cards in placed)
    for per_node, cards in placed:
        assert per_node == 8
        assert len({i // per_node for i in cards}) == 1, cards


def test_l2o_places_jobs_on_nodes_and_shares_on_cards(monkeypatch: pytest.MonkeyPatch) -> None:
    """L2o (each session on its own need's share) is placed as L2 is: a Job's GPUs on one
    node, shares on cards. Taking quota as placement, it needed fewer GPUs than the
    training-alone floor (F0), which places its Jobs on nodes."""
    jobs: list[list[int]] = []
    shares: list[int] = []
    original = Cards.place

    def record(self: Cards, key: str, *, share_steps: int = 0, whole: int = 0, **tas: Any) -> bool:
        ok = original(self, key, share_steps=share_steps, whole=whole, **tas)
        if ok and whole > 1:
            jobs.append([i for i, _n in self.holders[key]])
        if ok and share_steps:
            shares.append(share_steps)
        return ok

    monkeypatch.setattr(Cards, "place", record)
    from benchmarks.replay import capacity

    run = capacity.RunSpec(org="dgx-4", rung="L2o", gpus=20, seed=5, days=0.5, burn_in_h=12.0)
    assert capacity.run_one(run)["jobs"] > 0
    assert shares, "no share placed on a card"
    assert any(len(cards) >= 4 for cards in jobs)
    for cards in jobs:
        assert len({i // 8 for i in cards}) == 1, cards

"""Kueue's Topology Aware Scheduling as the replay models it (v0.19.2's
``pkg/cache/scheduler/tas_flavor_snapshot.go`` and ``pkg/scheduler/preemption``): a Job is
admitted only where one node holds its pods under a required topology, a preferred one falls
back to the block, a pending TAS workload holds nothing, and the large-Job setting lets an
8-GPU Job evict small ones for a node. And the large-Job level: a rung that meets the
count-weighted p90 by starving its large Jobs does not meet the levels."""

from __future__ import annotations

import pytest

from benchmarks.replay import capacity, ladder
from benchmarks.replay.capacity import Levels
from benchmarks.replay.organisations import load
from benchmarks.replay.placement import Cards, tas_assign
from benchmarks.replay.sim import Simulation
from benchmarks.replay.trace import Trace, TrainingJob
from benchmarks.replay.world import Kueue, Organisation, Workload

SPEC = load("training-bound")
HOUR = 3600.0


@pytest.mark.parametrize(
    ("free", "pods", "per_pod", "mode", "expected"),
    [
        # One pod of 8 on nodes with 8, 8, 4, 0 free: the first of the fewest pods' room.
        ([8, 8, 4, 0], 1, 8, "required", {0: 1}),
        # Room is counted in pods, not GPUs: 5 and 4 free both hold one 4-GPU pod; the first.
        ([8, 5, 4], 1, 4, "required", {1: 1}),
        # Required: no node holds 8 pods of 1, though the block holds 8 GPUs.
        ([4, 4], 8, 1, "required", None),
        # Preferred falls back to the block: spread, largest room first.
        ([4, 4], 8, 1, "preferred", {0: 4, 1: 4}),
        # ... the last node the best fit of those left (2 holds 1 better than 3).
        ([5, 3, 2], 6, 1, "preferred", {0: 5, 2: 1}),
        # Preferred on one node when one holds them all (the tightest that does).
        ([6, 8, 7], 6, 1, "preferred", {0: 6}),
        # Unconstrained (LeastFreeCapacity, TASProfileMixed): the least free that holds them...
        ([3, 1, 2], 1, 1, "unconstrained", {1: 1}),
        # ... else spread from the least free.
        ([5, 3, 2], 6, 1, "unconstrained", {2: 2, 1: 3, 0: 1}),
        # Nothing fits when the block cannot hold them, whatever the request.
        ([2, 2], 5, 1, "preferred", None),
        ([2, 2], 5, 1, "unconstrained", None),
    ],
)
def test_tas_assigns_as_kueue_does(
    free: list[int], pods: int, per_pod: int, mode: str, expected: dict[int, int] | None
) -> None:
    assert tas_assign(free, pods, per_pod, mode) == expected


def test_tas_places_whole_cards_of_the_nodes_it_chose() -> None:
    """Cards of two nodes of 8: with 5 and 6 whole cards free, a 4-GPU Job goes where TAS
    puts it (the first of equal room: node 0), on that node's lowest free cards; a required
    8-GPU Job finds no node; 7 pods of 1 find none required, and spread over both preferred."""
    cards = Cards.empty(16, 1, per_node=8)
    for i in (0, 1, 2, 8, 9):
        cards.free[i] = 0  # held: 5 whole cards free on node 0, 6 on node 1
    assert cards.place("job-4", whole=4, tas="required")
    assert [i for i, _n in cards.holders["job-4"]] == [3, 4, 5, 6]
    assert not cards.place("job-8", whole=8, tas="required")
    assert "job-8" not in cards.holders
    assert not cards.place("pods-7", whole=7, tas="required", pods=7)
    assert cards.place("pods-7", whole=7, tas="preferred", pods=7)
    held = [i for i, _n in cards.holders["pods-7"]]
    assert held == [7, 10, 11, 12, 13, 14, 15]  # node 0's last card and node 1's six


def _job(name: str, team: str, at_h: float, gpus: int, hours: float) -> TrainingJob:
    return TrainingJob(name, team, at_h * HOUR, gpus, hours * HOUR, False, 0.9)


def _simulation(rung: str, jobs: tuple[TrainingJob, ...], gpus: int = 16) -> Simulation:
    world = ladder.world(SPEC, rung, gpus, 0.5)
    trace = Trace(1, 1, 1.0, 0.0, ("team-a", "team-b"), jobs, ())
    r = ladder.RUNGS[rung]
    return Simulation(
        trace,
        world.org,
        world.catalog,
        ladder.policy(r, ""),
        cards_per_node=capacity.cards_per_node(SPEC),
        tas=r.tas_modes,
        check_invariants=True,
        checkpoint_s=None,
    )


# Two nodes of 8. A 6-GPU Job takes node 0 for 0.2 h; small Jobs of 4 (team-a) and 2
# (team-b) take node 1 and the rest of node 0 for 10 h. When the 6-GPU Job ends, 10 GPUs of
# quota are free, 6 and 4 on the two nodes: an 8-GPU Job (0.5 h) fits on quota, on no node.
FRAGMENTED = (
    _job("first", "team-b", 0.0, 6, 0.2),
    _job("small-1", "team-a", 0.01, 4, 10.0),
    _job("small-2", "team-b", 0.02, 2, 10.0),
    _job("large", "team-a", 0.5, 8, 2.0),
    _job("late-small", "team-b", 0.6, 4, 0.5),
)


@pytest.mark.parametrize(
    ("rung", "large_waits_h", "quota_held_while_waiting"),
    [
        # Without TAS Kueue admits on quota: the Job holds 8 GPUs of quota spread over two
        # nodes (an unplaceable Job) until one node frees.
        ("L1", 10.01 - 0.5, True),
        # With TAS it is not admitted until one node holds it, and holds nothing meanwhile.
        ("L1t", 10.01 - 0.5, False),
    ],
)
def test_a_tas_job_is_admitted_only_where_one_node_holds_it(
    rung: str, large_waits_h: float, quota_held_while_waiting: bool
) -> None:
    sim = _simulation(rung, FRAGMENTED)
    sim.run()
    large = sim.jobs["team-a/large"]
    assert large.first_admitted is not None
    assert large.first_admitted >= 10.0 * HOUR
    assert large.evictions == 0
    assert large.first_admitted - 0.5 * HOUR == pytest.approx(large_waits_h * HOUR, abs=120)
    assert (sim.counters["unplaceable_jobs"] > 0) == quota_held_while_waiting
    # Under TAS the 4-GPU Job that came later runs at once on node 0: the pending large Job
    # holds no quota; without TAS the large Job's quota keeps it waiting.
    late = sim.jobs["team-b/late-small"]
    assert late.first_admitted is not None
    ran_at_once = late.first_admitted == pytest.approx(0.6 * HOUR, abs=60)
    assert ran_at_once != quota_held_while_waiting


def test_large_jobs_first_evicts_small_jobs_for_a_node() -> None:
    """L1p: the 8-GPU Job's priority class is above the small Jobs'; finding no node, it
    evicts the lower-priority Jobs of its own queue (fewest needed, fill-back) and runs."""
    sim = _simulation("L1p", FRAGMENTED)
    sim.run()
    large = sim.jobs["team-a/large"]
    assert large.first_admitted is not None
    assert large.first_admitted < 1.0 * HOUR
    small = sim.jobs["team-a/small-1"]
    assert small.evictions == 1  # its own queue's small Job, not team-b's (not borrowing)
    assert sim.jobs["team-b/small-2"].evictions == 0


def test_the_large_job_level_is_a_level() -> None:
    """A size whose count-weighted p90 meets its limit while the GPU-hour-weighted mean
    (the large Jobs' waits) does not, fails the levels."""
    limits = Levels().limits()
    assert limits["wait_gpu_hour_weighted_mean_min"] == 30.0
    starving = {"wait_p90_min": 10.0, "wait_gpu_hour_weighted_mean_min": 90.0}
    assert capacity.ratio({0.5: [starving]}, limits) == pytest.approx(3.0)
    fair = {"wait_p90_min": 10.0, "wait_gpu_hour_weighted_mean_min": 20.0}
    assert capacity.ratio({0.5: [fair]}, limits) <= 1.0


def _large(n: int, team: str, org: Organisation) -> Workload:
    return Workload(
        key=f"{team}/large-{n}",
        namespace=team,
        local_queue="training",
        cluster_queue=org.local_queues[(team, "training")],
        priority=org.priorities["training-large"],
        priority_class="training-large",
        created=float(n),
        resource="nvidia.com/gpu",
        amount=8,
        kind="training",
        owner=f"large-{n}",
    )


def test_a_preemptor_that_fits_nowhere_any_more_stops_being_the_head() -> None:
    """Its victims gone, a preemptor whose quota or nodes were taken meanwhile (with TAS,
    nodes are not reserved) fits nowhere: it is parked and its queue goes on, rather than
    being tried again for ever within one scheduling pass."""
    org = ladder.world(SPEC, "L1p", 16, 0.5).org
    kueue = Kueue(org)
    for n, team in enumerate(("team-a", "team-b")):
        kueue.submit(_large(n, team, org))
    admitted, _evicted = kueue.schedule(0.0)
    assert len(admitted) == 2  # the cohort's 16 GPUs
    late = _large(9, "team-a", org)
    kueue.submit(late)
    kueue.sticky[late.cluster_queue] = late.key  # as if it had preempted, its victims gone
    admitted, evicted = kueue.schedule(1.0)
    assert (admitted, evicted) == ([], [])
    assert late.cluster_queue not in kueue.sticky
    assert late.key in kueue.inadmissible[late.cluster_queue]

"""The ladder's rungs: each is the queue structure it names, all replay the same paired trace,
training resumes from its last checkpoint, and a burst on a share runs max(1, u/g) times
longer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import yaml

from benchmarks.replay import ladder
from benchmarks.replay.metrics import summarize
from benchmarks.replay.organisations import load
from benchmarks.replay.sim import Simulation
from benchmarks.replay.trace import Interval, Session, Trace
from benchmarks.replay.world import quota_beyond_pools
from gpuaas_service.reclaim.policy import load_policy

SPEC = load("dgx-4")
SHORT: dict[str, Any] = {"days": 0.25, "burn_in_h": 12.0}


def _nominal(org: Any, suffix: str, resource: str = "nvidia.com/gpu") -> int:
    return sum(
        q.nominal
        for cq in org.cluster_queues.values()
        if cq.name.endswith(suffix)
        for (_f, r), q in cq.quotas.items()
        if r == resource
    )


@pytest.mark.parametrize("rung", list(ladder.RUNGS))
@pytest.mark.parametrize("gpus", [13, 32, 77])
def test_every_rung_keeps_its_quotas_within_its_pools(rung: str, gpus: int) -> None:
    org = ladder.world(SPEC, rung, gpus, 0.375).org
    assert quota_beyond_pools(org.capacity, org.cluster_queues) == []
    assert org.physical_gpus == gpus
    assert float(org.gpu_equivalents) == gpus


def test_the_rungs_queue_structures() -> None:
    cohorts = {
        name: {cq.cohort for cq in ladder.world(SPEC, name, 32, 0.375).org.cluster_queues.values()}
        for name in ("B0", "B1", "B2", "L1", "L2")
    }
    assert cohorts["B0"] == cohorts["B1"] == {None}  # partitions: nothing is lent
    assert cohorts["B2"] == {"team-a", "team-b"}  # a cohort per team
    assert cohorts["L1"] == cohorts["L2"] == {"org"}  # one org-wide cohort
    b0 = ladder.world(SPEC, "B0", 32, 0.375).org
    assert _nominal(b0, "-notebooks") == min(32, sum(SPEC.users().values()))  # a GPU per user
    b1 = ladder.world(SPEC, "B1", 32, 0.375).org
    assert _nominal(b1, "-notebooks") == 2 * 6  # 37.5% of each team's 16, rounded down
    l2 = ladder.world(SPEC, "L2", 32, 0.375).org
    assert _nominal(l2, "-notebooks", "nvidia.com/total-gpucores") == 100 * 2 * 6
    assert _nominal(l2, "", "nvidia.com/total-gpucores") == 100 * 32
    assert l2.training_requests["nvidia.com/total-gpucores"] == 100


def test_the_org_wide_partition_is_one_notebook_queue_and_one_training_queue() -> None:
    """B1o: every team's local queues point at one notebook and one training ClusterQueue of
    the whole organisation, no cohort; the split is of all the pool's GPUs."""
    org = ladder.world(SPEC, "B1o", 32, 0.375).org
    assert sorted(org.cluster_queues) == ["org-notebooks", "org-training"]
    assert {cq.cohort for cq in org.cluster_queues.values()} == {None}
    assert set(org.local_queues.values()) == {"org-notebooks", "org-training"}
    assert len(org.local_queues) == 2 * len(SPEC.teams)
    assert _nominal(org, "-notebooks") == 12  # 37.5% of 32
    assert _nominal(org, "-training") == 20


def test_the_splits_reach_three_quarters_of_the_gpus_for_notebooks() -> None:
    assert max(ladder.DEFAULT_SPLITS) == 0.75
    org = ladder.world(SPEC, "L1", 32, 0.75).org
    assert _nominal(org, "-notebooks") == 2 * 12
    assert _nominal(org, "-training") == 2 * 4


@pytest.mark.parametrize("rung", ["B1", "B2", "L1", "L1g", "L2", "L3"])
def test_every_rung_but_b0_splits_each_teams_gpus_as_it_is_told(rung: str) -> None:
    """The cohorts' notebook quota is the split the search gives them, not a fixed half:
    what notebooks do not hold is the training queue's nominal quota."""
    resource = "nvidia.com/total-gpucores" if ladder.RUNGS[rung].shares else "nvidia.com/gpu"
    per_gpu = 100 if ladder.RUNGS[rung].shares else 1
    for split, held in ((0.25, 4), (0.375, 6), (0.5, 8)):
        org = ladder.world(SPEC, rung, 32, split).org
        assert _nominal(org, "-notebooks", resource) == per_gpu * 2 * held
        assert _nominal(org, "-training", resource) == per_gpu * 2 * (16 - held)
    assert ladder.RUNGS[rung].split_chosen
    assert not ladder.RUNGS["B0"].split_chosen  # per-user reservations: no split


def test_every_rung_replays_the_same_trace_within_capacity_and_quota() -> None:
    trace = ladder.trace(SPEC, 2, **SHORT)
    assert trace == ladder.trace(SPEC, 2, **SHORT)  # paired: the same for every rung
    for name, rung in ladder.RUNGS.items():
        if rung.culler == "gpuaas":
            continue  # the product's loop: covered by test_replay_policies
        world = ladder.world(SPEC, name, 24, 0.375)
        sim = Simulation(
            trace,
            world.org,
            world.catalog,
            ladder.policy(rung, ""),
            fractions=world.fractions,
            check_invariants=True,
        )
        figures = summarize(sim.run())
        assert 0 <= figures["busy_share"] <= figures["allocation_share"] <= 1 + 1e-9, name


def test_need_sized_shares_fit_the_memory_need() -> None:
    world = ladder.world(SPEC, "L2", 32, 0.5)
    trace = ladder.trace(SPEC, 1, **SHORT)
    sim = Simulation(trace, world.org, world.catalog, ladder.policy(ladder.RUNGS["L2"], ""))
    sim.fractions = world.fractions
    for session in trace.sessions[:200]:
        offering = sim.choose_offering(session)
        cap = float(offering.memory_cap.removesuffix("Mi")) / 1024  # type: ignore[union-attr]
        assert cap >= min(session.gpu_memory_gib, 80.0)
        assert cap - 8.0 < max(session.gpu_memory_gib, 8.0) or cap == 80.0  # the smallest


def _one_session_trace(utilization: float, memory_gib: float) -> Trace:
    session = Session(
        name="s-00000",
        user="team-a-user00",
        team="team-a",
        start_s=600.0,
        length_s=4 * 3600.0,
        gpu_memory_gib=memory_gib,
        intervals=(Interval(60.0, 660.0, "gpu", utilization), Interval(3000.0, 3060.0, "cpu")),
    )
    return Trace(1, 1, 0.25, 0.0, ("team-a", "team-b"), (), (session,))


@pytest.mark.parametrize(
    ("utilization", "memory_gib", "stretch"),
    [(0.5, 5.0, 5.0), (0.5, 30.0, 0.5 / 0.4), (0.2, 30.0, 1.0), (0.9, 79.0, 1.0)],
)
def test_a_burst_on_a_share_takes_max_1_u_over_g_longer(
    utilization: float, memory_gib: float, stretch: float
) -> None:
    world = ladder.world(SPEC, "L2", 32, 0.5)
    trace = _one_session_trace(utilization, memory_gib)
    sim = Simulation(
        trace, world.org, world.catalog, ladder.policy(ladder.RUNGS["L2"], ""), throttle="always"
    )
    sim.fractions = 1.0
    sim.keep_activity = True
    result = sim.run()
    (state,) = sim.sessions.values()
    burst = next(r for r in state.realised if r[2] == "gpu")
    assert burst[1] - burst[0] == pytest.approx(600.0 * stretch)
    (compute,) = [c for c in result.computes if c.kind == "notebook"]
    # The same GPU work as on a whole GPU: utilisation × share × time = u × 600 s.
    work = compute.utilization * compute.gpu_equivalents * (compute.end - compute.start)
    assert work == pytest.approx(utilization * 600.0)
    cpu = next(r for r in state.realised if r[2] == "cpu")
    assert cpu[0] == pytest.approx(burst[0] - 60.0 + 3000.0 + 600.0 * (stretch - 1))
    assert result.counters["share_slowdown_s"] == pytest.approx(600.0 * (stretch - 1))


@pytest.mark.parametrize(
    ("throttle", "neighbour", "stretch"),
    [("contended", False, 1.0), ("contended", True, 5.0), ("always", False, 5.0)],
)
def test_hami_holds_a_share_to_its_compute_only_while_its_card_is_busy_with_another(
    throttle: str, neighbour: bool, stretch: float
) -> None:
    """HAMi's default: a share's ``gpucores`` limit holds while another container on its card
    is busy; alone on the card it runs at the card's pace. ``always`` is the sensitivity."""
    world = ladder.world(SPEC, "L2", 32, 0.5)
    trace = _one_session_trace(0.5, 5.0)
    policy = ladder.policy(ladder.RUNGS["L2"], "")
    sim = Simulation(
        trace, world.org, world.catalog, policy, throttle=throttle, share_steps=ladder.SHARE_STEPS
    )
    sim.fractions = 1.0
    sim.keep_activity = True
    if neighbour:  # a busy Job on half a card: the session's share goes on that card
        assert sim.placement is not None
        sim.placement.place("team-a/job", "h100", {"nvidia.com/total-gpucores": 50}, "notebook")
    sim.run()
    (state,) = sim.sessions.values()
    burst = next(r for r in state.realised if r[2] == "gpu")
    assert burst[1] - burst[0] == pytest.approx(600.0 * stretch)


def test_a_preempted_job_resumes_from_its_last_checkpoint() -> None:
    trace = ladder.trace(SPEC, 1, days=0.5, burn_in_h=12.0)
    lost = {}
    for checkpoint in (15 * 60.0, None):
        world = ladder.world(SPEC, "L1", 20, 0.5)
        sim = Simulation(
            trace,
            world.org,
            world.catalog,
            ladder.policy(ladder.RUNGS["L1"], ""),
            checkpoint_s=checkpoint,
        )
        jobs = [j for j in sim.run().jobs if j.evictions]
        assert jobs, "no training Job was preempted"
        if checkpoint:
            for j in jobs:  # at most one checkpoint interval (and the start) per preemption
                assert j.lost_gpu_s <= j.evictions * (checkpoint + 1) * j.job.gpus
        lost[checkpoint] = sum(j.lost_gpu_s for j in jobs)
    assert lost[15 * 60.0] < lost[None]


def test_a_session_that_never_got_its_gpu_counts_its_wait_to_the_end() -> None:
    world = ladder.world(SPEC, "B0", 2, 0.5)  # two users' reservations for 32 users
    trace = ladder.trace(SPEC, 1, days=0.6, burn_in_h=12.0)  # to 14:24 of the measured day
    result = Simulation(
        trace, world.org, world.catalog, ladder.policy(ladder.RUNGS["B0"], "")
    ).run()
    assert result.unserved_spawns
    assert all(r + w == pytest.approx(trace.end_s) for r, w, _a in result.unserved_spawns)
    figures = summarize(result)
    assert figures["spawns_unserved"] > 0
    assert figures["spawn_wait_p90_min"] > 60


def test_l4_keeps_the_shipped_files_own_kept_threshold_and_adds_it_where_missing() -> None:
    text = (
        "policies:\n"
        "  - name: a\n"
        "    match: {kinds: [gpu]}\n"
        "    idle_after: 30m\n"
        "    idle_after_when_kept: 20m\n"
        "  - name: b\n"
        "    idle_after: 1h\n"
    )
    kept = ladder.kept_policy_text(text)
    by_name = {p.name: p for p in load_policy(yaml.safe_load(kept)).policies}
    assert by_name["a"].idle_after_when_kept == timedelta(minutes=20)
    assert by_name["b"].idle_after_when_kept == timedelta(minutes=15)
    assert kept.count("idle_after_when_kept") == 2
    assert kept.startswith("snapshot_timeout: 0s\n")

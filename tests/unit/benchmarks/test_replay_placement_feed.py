"""The replay's placement, as the culler sees it: HAMi's record of each holder's cards on its
pod, and the training Jobs' pods, placed or waiting for whole cards (``Unschedulable`` with
HAMi's reasons), read by the product's own gather code; on the L3 rung the product's reclaim
loop frees a card of idle shares for an admitted Job that waits (quota is not placement)."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.replay import ladder
from benchmarks.replay.organisations import load
from benchmarks.replay.placement import Placement
from benchmarks.replay.run import DEFAULT_POLICY
from benchmarks.replay.sim import Simulation
from benchmarks.replay.trace import Interval, Session, Trace, TrainingJob
from benchmarks.replay.world import Workload
from gpuaas_service.reclaim.inputs import placement_waits, pod_cards, waits_for_room
from jupyter_gpuaas.core.headroom import QueueState

CORES = "nvidia.com/total-gpucores"
SPEC = load("dgx-4")
HOUR = 3600.0


def _workload(key: str, kind: str, cores: int) -> Workload:
    ns, _name = key.split("/", 1)
    return Workload(
        key=key,
        namespace=ns,
        local_queue="training",
        cluster_queue=f"{ns}-training",
        priority=0,
        priority_class="",
        created=0.0,
        resource="nvidia.com/gpu",
        amount=1,
        kind=kind,
        owner="",
        flavor="h100",
        uid=f"uid-{key}",
        also={CORES: cores},
    )


def test_each_holder_s_cards_are_recorded_as_hami_records_them() -> None:
    placement = Placement.for_capacity({("h100", CORES): 200}, 10)
    assert placement is not None
    assert placement.place("nb", "h100", {CORES: 40}, "notebook")
    pod: dict[str, Any] = {"metadata": {"annotations": placement.annotations("nb")}, "spec": {}}
    assert pod_cards(pod) == ("/h100-card-0",)
    assert placement.annotations("nobody") == {}


def test_jobs_pods_show_their_cards_and_the_wait_for_a_whole_one() -> None:
    placement = Placement.for_capacity({("h100", CORES): 200}, 10)
    assert placement is not None
    placed = _workload("team-a/big", "training", 100)
    waiting = _workload("team-b/small", "training", 100)
    assert placement.place(placed.key, "h100", placed.requests, "training")
    assert placement.place("nb", "h100", {CORES: 40}, "notebook")
    pods = placement.job_pods([placed], [waiting])
    assert [(p["metadata"]["name"], p["status"]["phase"]) for p in pods] == [
        ("big", "Running"),
        ("small", "Pending"),
    ]
    assert waits_for_room(pods[1])
    assert pod_cards(pods[0]) == ("/h100-card-0",)

    def workload_for_pod(namespace: str, uid: str, name: str) -> Any:
        from benchmarks.replay.brain import read_workload

        return read_workload(
            {
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"queueName": "training"},
                "status": {
                    "conditions": [{"type": "Admitted", "status": "True"}],
                    "admission": {
                        "clusterQueue": f"{namespace}-training",
                        "podSetAssignments": [{"name": "main", "flavors": {CORES: "h100"}}],
                    },
                },
            }
        )

    (wait,) = placement_waits(pods, [], QueueState(), workload_for_pod=workload_for_pod)
    assert (wait.key, wait.flavor, wait.cards, wait.what) == (
        "team-b/small",
        "h100",
        1,
        "a training Job",
    )
    assert dict(wait.blocked) == {"/h100-card-0": "pod team-a/big"}


def _simulation(trace: Trace, rung: str) -> Simulation:
    world = ladder.world(SPEC, rung, 4, 0.5)
    return Simulation(
        trace,
        world.org,
        world.catalog,
        ladder.policy(ladder.RUNGS[rung], str(DEFAULT_POLICY)),
        fractions=world.fractions,
        share_steps=ladder.SHARE_STEPS,
        check_invariants=True,
    )


@pytest.mark.parametrize("rung", ["L2", "L3"])
def test_on_l3_an_idle_share_is_reclaimed_so_a_waiting_job_gets_its_card(rung: str) -> None:
    """As in test_replay_placement's scenario: the 1-GPU Job is admitted on quota with no whole
    card. Without the culler (L2) it waits for the 2-GPU Job's cards; on L3 the product's loop
    reclaims an idle share and the Job runs on its card hours earlier."""
    # name, user, team, start (h), length (h), GPU memory (GiB); at work for their first minutes
    table = [
        ("s-0", "team-a-user00", "team-a", 0.0, 8.0, 30.0),
        ("s-1", "team-a-user01", "team-a", 0.1, 2.0, 45.0),
        ("s-2", "team-b-user00", "team-b", 0.2, 8.0, 30.0),
        ("s-3", "team-b-user01", "team-b", 0.3, 2.0, 45.0),
    ]
    sessions = tuple(
        Session(n, u, t, s * HOUR, h * HOUR, g, (Interval(60.0, 120.0, "gpu", 0.2),))
        for n, u, t, s, h, g in table
    )
    jobs = (
        TrainingJob("big", "team-a", 0.5 * HOUR, 2, 5 * HOUR, False, 0.9),
        TrainingJob("small", "team-b", 3 * HOUR, 1, 1 * HOUR, False, 0.9),
    )
    sim = _simulation(Trace(1, 1, 0.5, 0.0, ("team-a", "team-b"), jobs, sessions), rung)
    sim.run()
    small, big = sim.jobs["team-b/small"], sim.jobs["team-a/big"]
    assert small.first_admitted is not None
    assert big.finished is not None
    assert sim.counters["unplaceable_jobs"] == 1
    if rung == "L2":
        assert small.first_admitted >= big.finished
        return
    assert small.first_admitted < 3.5 * HOUR < big.finished
    assert sim.counters["unplaced_job_gpu_s"] < 0.5 * HOUR
    codes = [r.get("code") for r in sim.reclaims]
    assert "placement" in codes

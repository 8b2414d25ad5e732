"""Quota is not placement, from the pods to the plan: which card each share is on (HAMi's record
on its pod), an admitted Job's pod waiting for a whole card (HAMi's scheduler left it
``Unschedulable`` for lack of room on the cards), the plan that frees a card of idle shares for
it, its words in ``--explain`` and in a snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import PlacementWait, decide
from gpuaas_service.reclaim.explain import explain
from gpuaas_service.reclaim.explain_input import SnapshotError, dump_snapshot, load_snapshot
from gpuaas_service.reclaim.inputs import (
    placement_waits,
    pod_cards,
    waits_for_room,
    workbenches,
)
from gpuaas_service.reclaim.loop import Feeds, ReclaimLoop, Settings
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from tests.support import service_samples as world
from tests.support.service_samples import iso
from tests.support.service_world import FakeHub, FakeKube, FakeView, cause_of, warning_of

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(hours=2)
FLAVOR = "local-h100"
CORES = "nvidia.com/total-gpucores"
CARD_A, CARD_B = "GPU-aaaa-0001", "GPU-bbbb-0002"
QUARTER = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20480", "nvidia.com/gpucores": "25"}
WHOLE = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "81920", "nvidia.com/gpucores": "100"}
POLICY = load_policy(
    {"policies": [{"name": "shares", "match": {"kinds": ["fraction"]}, "idle_after": "30m"}]}
)


def queue_state() -> QueueState:
    """Two H100s: each team's notebook queue 100 % of one, training none (it borrows)."""
    quota = {(FLAVOR, CORES): 100}
    return world.team_a_queues(
        world.cluster_queue("team-a-notebooks", quota, {(FLAVOR, CORES): 50}),
        world.cluster_queue("team-b-notebooks", quota, {}),
    )


def share(user: str, card: str, node: str = "local-0") -> dict[str, Any]:
    pod = world.workbench_pod(
        user,
        offering="local-h100-quarter",
        kind="fraction",
        requests=QUARTER,
        limits=QUARTER,
        created=T0,
        annotations={"hami.io/vgpu-devices-allocated": f"{card},NVIDIA,20480,25:;"},
    )
    pod["spec"]["nodeName"] = node
    return pod


# kube-scheduler's words for a pod HAMi's extender found no room for (HAMi v2.10 reasons).
NO_ROOM = (
    "0/7 nodes are available: 1 1/3 CardTypeMismatch, 2/3 CardInsufficientMemory, 6 node(s) "
    "didn't match Pod's node affinity/selector. preemption: 0/7 nodes are available: 1 1/3 "
    "CardTypeMismatch, 2/3 CardInsufficientMemory, 6 Preemption is not helpful for scheduling."
)
NO_SUCH_CARD = "0/7 nodes are available: 1 3/3 CardTypeMismatch, 6 node(s) didn't match ..."


def train_pod(
    name: str = "train-x7k2p",
    *,
    reason: str = "Unschedulable",
    message: str = NO_ROOM,
    card: str = "",
) -> dict[str, Any]:
    """A training Job's pod: placed on ``card`` (``reason=""``), or not scheduled, with
    kube-scheduler's ``PodScheduled`` condition."""
    status: dict[str, Any] = {"phase": "Pending" if reason else "Running"}
    if reason:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        ]
    annotations = {"nvidia.com/use-gputype": "H100"}
    if card:
        annotations["hami.io/vgpu-devices-allocated"] = f"{card},NVIDIA,81920,100:;"
    spec: dict[str, Any] = {
        "containers": [{"name": "train", "resources": {"requests": WHOLE, "limits": WHOLE}}],
    }
    if not reason:
        spec["nodeName"] = "local-0"
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": iso(T0),
            "annotations": annotations,
            "ownerReferences": [
                {"kind": "Job", "name": "train", "uid": f"uid-job-{name}", "controller": True}
            ],
        },
        "spec": spec,
        "status": status,
    }


def admitted_workload(job_uid: str) -> WorkloadInfo:
    return read_workload(_job_workload_object(job_uid))


def _job_workload_object(job_uid: str) -> dict[str, Any]:
    obj = world.job_workload_object(
        "job-train",
        requests=WHOLE,
        created=T0,
        status={
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(T0)},
                {"type": "Admitted", "status": "True", "lastTransitionTime": iso(T0)},
            ],
            "admission": {
                "clusterQueue": "team-a-training",
                "podSetAssignments": [
                    {"name": "main", "flavors": {CORES: FLAVOR, "nvidia.com/gpu": FLAVOR}}
                ],
            },
        },
    )
    obj["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": job_uid}
    obj["metadata"]["ownerReferences"] = [
        {"kind": "Job", "name": "train", "uid": job_uid, "controller": True}
    ]
    return obj


def _notebook_workload(namespace: str, name: str) -> WorkloadInfo:
    return read_workload(
        {
            "metadata": {"name": f"wl-{name}", "namespace": namespace},
            "spec": {"queueName": "team-a"},
            "status": {
                "conditions": [{"type": "Admitted", "status": "True"}],
                "admission": {
                    "clusterQueue": "team-a-notebooks",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "flavors": {CORES: FLAVOR},
                            "resourceUsage": {CORES: "25"},
                        }
                    ],
                },
            },
        }
    )


def lookup(*pods: dict[str, Any]) -> Any:
    by_job = {
        ref["uid"]: admitted_workload(ref["uid"])
        for p in pods
        for ref in p["metadata"].get("ownerReferences", [])
    }

    def workload_for_pod(namespace: str, uid: str, name: str) -> WorkloadInfo | None:
        if uid in by_job:
            return by_job[uid]
        return None

    return workload_for_pod


def the_shares(*pods: dict[str, Any], store: ActivityStore | None = None) -> list[Any]:
    store = store if store is not None else ActivityStore()
    for p in pods:
        store.record(p["metadata"]["annotations"]["hub.jupyter.org/username"], "", idle(), NOW)

    def notebook_workload(namespace: str, uid: str, name: str) -> WorkloadInfo | None:
        return _notebook_workload(namespace, name)

    wbs, _refs = workbenches(
        pods, queue_state(), store, POLICY, now=NOW, workload_for_pod=notebook_workload
    )
    return wbs


def waits_of(
    shares: list[dict[str, Any]], wbs: list[Any], waiting: dict[str, Any]
) -> list[PlacementWait]:
    return placement_waits([*shares, waiting], wbs, queue_state(), workload_for_pod=lookup(waiting))


def idle() -> dict[str, Any]:
    return world.idle_report(NOW, idle_since=T0)


def test_a_shares_card_is_read_from_hamis_record_with_its_node() -> None:
    assert pod_cards(share("alice", CARD_A)) == (f"local-0/{CARD_A}",)
    two = share("alice", CARD_A)
    two["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"] = (
        f"{CARD_A},NVIDIA,20480,25:{CARD_B},NVIDIA,20480,25:;;"
    )
    assert pod_cards(two) == (f"local-0/{CARD_A}", f"local-0/{CARD_B}")
    no_record = share("alice", CARD_A)
    del no_record["metadata"]["annotations"]["hami.io/vgpu-devices-allocated"]
    assert pod_cards(no_record) == ()
    (wb,) = the_shares(share("alice", CARD_A))
    assert wb.cards == (f"local-0/{CARD_A}",)
    # Between HAMi's choice and the binding: the node HAMi's scheduler assigned.
    binding = share("alice", CARD_A)
    del binding["spec"]["nodeName"]
    binding["metadata"]["annotations"]["hami.io/vgpu-node"] = "local-1"
    assert pod_cards(binding) == (f"local-1/{CARD_A}",)


def test_an_admitted_pod_kept_pending_for_scraps_is_a_wait_for_one_whole_card() -> None:
    shares = [share("alice", CARD_A), share("bob", CARD_B)]
    waiting = train_pod()
    (wait,) = placement_waits(
        [*shares, waiting], the_shares(*shares), queue_state(), workload_for_pod=lookup(waiting)
    )
    assert (wait.key, wait.workload, wait.team) == ("team-a/train-x7k2p", "job-train", "team-a")
    # Not bound to a node yet: any node of the flavor may take it.
    assert (wait.flavor, wait.node, wait.gpu_type, wait.what) == (
        FLAVOR,
        "",
        "H100",
        "a training Job",
    )
    assert (wait.cards, wait.free_cards, dict(wait.blocked)) == (1, 0, {})
    assert wait.cluster_queue == "team-a-training"


def test_cards_other_work_holds_are_blocked_and_not_free() -> None:
    shares = [share("alice", CARD_A)]
    waiting, placed = train_pod(), train_pod("train-other", reason="", card=CARD_B)
    (wait,) = placement_waits(
        [*shares, waiting, placed],
        the_shares(*shares),
        queue_state(),
        workload_for_pod=lookup(waiting, placed),
    )
    assert dict(wait.blocked) == {f"local-0/{CARD_B}": "pod team-a/train-other"}
    assert wait.free_cards == 0


def test_a_card_no_pod_is_on_counts_as_free() -> None:
    shares = [share("alice", CARD_A)]
    waiting = train_pod()
    (wait,) = placement_waits(
        [*shares, waiting], the_shares(*shares), queue_state(), workload_for_pod=lookup(waiting)
    )
    assert wait.free_cards == 1  # two cards of quota, one holds alice's share


def test_only_admitted_pods_hami_found_no_room_for_and_whole_cards_wait() -> None:
    running = train_pod("running", reason="")
    gated = train_pod("gated", reason="SchedulingGated", message="Scheduling is blocked")
    # No card of its type: freeing a share would not place it.
    no_such_card = train_pod("no-h100", message=NO_SUCH_CARD)
    # kube-scheduler's own reasons only (not HAMi's): a taint, a selector, node resources.
    not_hamis = train_pod("taint", message="0/7 nodes are available: 7 Insufficient cpu.")
    not_admitted = train_pod("queued")
    share_waiting = train_pod("share")
    share_waiting["spec"]["containers"][0]["resources"]["limits"] = QUARTER
    share_waiting["spec"]["containers"][0]["resources"]["requests"] = QUARTER
    pods = [running, gated, no_such_card, not_hamis, not_admitted, share_waiting]
    found = lookup(running, gated, no_such_card, not_hamis, share_waiting)
    assert placement_waits(pods, [], queue_state(), workload_for_pod=found) == []
    # The same pod with HAMi's reasons of room waits.
    (wait,) = placement_waits(
        [*pods, train_pod("room")], [], queue_state(), workload_for_pod=lookup(train_pod("room"))
    )
    assert wait.name == "room"


@pytest.mark.parametrize(
    ("message", "waits"),
    [
        ("0/1 nodes are available: 1 2/3 CardInsufficientCore, 1/3 CardTypeMismatch.", True),
        ("0/1 nodes are available: 1 2/3 ExclusiveDeviceAllocateConflict, 1/3 X.", True),
        ("0/1 nodes are available: 1 3/3 CardTimeSlicingExhausted.", True),
        ("0/1 nodes are available: 1 NodeInsufficientDevice.", False),
        ("0/1 nodes are available: 1 node unregistered.", False),
    ],
)
def test_which_of_hamis_reasons_mean_the_cards_lack_room(message: str, waits: bool) -> None:
    assert waits_for_room(train_pod(message=message)) is waits


def test_the_plan_frees_the_card_and_explain_shows_the_job_and_what_frees_it() -> None:
    shares = [share("alice", CARD_A), share("bob", CARD_A), share("carol", CARD_B)]
    waiting = train_pod()
    wbs = the_shares(*shares)
    waits = placement_waits(
        [*shares, waiting], wbs, queue_state(), workload_for_pod=lookup(waiting)
    )
    plan = decide(wbs, [], POLICY, now=NOW, waits=waits)
    assert {d.workbench.key: (d.action.value, d.code) for d in plan.decisions} == {
        "alice": ("skip", "no-demand"),
        "bob": ("skip", "no-demand"),
        "carol": ("warn", "placement"),
    }
    text = explain(plan)
    assert "Admitted work waiting for whole cards (1):" in text
    assert "team-a/train-x7k2p  (1 whole H100 in local-h100" in text
    assert "warn: admitted team-a/train-x7k2p waits for 1 whole H100; freeing GPU-bbbb-000" in text
    assert "WARN" in text
    assert "placement [serve_placement]: admitted team-a/train-x7k2p needs a whole H100" in text


def test_explain_says_why_no_card_can_be_freed() -> None:
    shares = [share("alice", CARD_A), share("bob", CARD_B)]
    waiting = train_pod()
    wbs = the_shares(*shares)
    wbs = [replace(wb, snoozed_until=NOW + timedelta(hours=1)) for wb in wbs]
    waits = placement_waits(
        [*shares, waiting], wbs, queue_state(), workload_for_pod=lookup(waiting)
    )
    text = explain(decide(wbs, [], POLICY, now=NOW, waits=waits))
    assert "unplaceable: admitted team-a/train-x7k2p waits for 1 whole H100 (0 free)" in text
    assert "alice kept by its user" in text


def test_a_snapshot_keeps_the_waits_and_the_cards() -> None:
    shares = [share("alice", CARD_A), share("bob", CARD_B)]
    waiting = train_pod()
    store = ActivityStore()
    wbs = the_shares(*shares, store=store)
    waits = placement_waits(
        [*shares, waiting], wbs, queue_state(), workload_for_pod=lookup(waiting)
    )
    waits = [replace(waits[0], blocked={"local-0/GPU-cccc": "pod team-b/x"})]
    reports = {wb.key: store.report(wb.key) for wb in wbs}
    dumped = dump_snapshot(NOW, wbs, [], [], reports=reports, pod_utilization={}, waits=waits)
    snap = load_snapshot(dumped, POLICY)
    assert snap.waits == tuple(waits)
    assert [wb.cards for wb in snap.workbenches] == [wb.cards for wb in wbs]
    again = decide(snap.workbenches, [], POLICY, now=snap.now, waits=snap.waits)
    assert (
        again.placements[0].cards
        == decide(wbs, [], POLICY, now=NOW, waits=waits).placements[0].cards
    )


def test_a_wait_in_a_snapshot_is_checked_with_its_path() -> None:
    data = {"now": iso(NOW), "waits": [{"name": "x", "blocked": []}]}
    with pytest.raises(SnapshotError) as err:
        load_snapshot(data, POLICY)
    text = " ".join(f"{e.path}: {e.message}" for e in err.value.errors)
    assert "waits[0].namespace" in text
    assert "waits[0].flavor" in text
    assert "waits[0].blocked" in text


def test_a_wait_is_a_plain_value() -> None:
    # decide's input is plain data: two equal waits are equal (the snapshot round trip
    # relies on it).
    a = PlacementWait(name="p", namespace="n", flavor=FLAVOR)
    assert a == PlacementWait(name="p", namespace="n", flavor=FLAVOR)


class _View(FakeView):
    """The Kueue caches: the shares' Workloads and the Job's, admitted on the pool."""

    def __init__(self, shares: list[dict[str, Any]], job: dict[str, Any]) -> None:
        super().__init__(queue_state(), [], [])
        owner = job["metadata"]["ownerReferences"][0]
        self.job_object = _job_workload_object(owner["uid"])
        self.by_uid = {owner["uid"]: read_workload(self.job_object)}
        self.shares = {p["metadata"]["uid"] for p in shares}

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        return [self.job_object] if namespace == "team-a" else []

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        if pod_uid in self.shares:
            return _notebook_workload(namespace, pod_name)
        return self.by_uid.get(pod_uid)


async def test_the_loop_reads_the_jobs_pods_warns_then_stops_and_names_the_job() -> None:
    shares = [share("alice", CARD_A), share("bob", CARD_A), share("carol", CARD_B)]
    waiting = train_pod()
    hub = FakeHub([("alice", ""), ("bob", ""), ("carol", "")])
    kube = FakeKube(shares)
    clock = [NOW]
    store = ActivityStore()
    policy = load_policy(
        {
            "policies": [
                {"name": "shares", "match": {"kinds": ["fraction"]}, "idle_after": "30m"}
                | {"warn_before": "30s"}
            ]
        }
    )

    async def job_pods() -> list[dict[str, Any]]:
        return [waiting]

    loop = ReclaimLoop(
        hub=hub,
        kube=kube,
        view=_View(shares, waiting),
        policies=policy,
        store=store,
        settings=Settings(job_namespaces=("team-a",), save_lead=0),
        clock=lambda: clock[0],
        feeds=Feeds(job_pods=job_pods),
    )
    for user in ("alice", "bob", "carol"):
        store.record(user, "", idle(), NOW)
    plan = await loop.cycle()
    assert plan is not None
    (placement,) = plan.placements
    assert placement.status == "warn"
    assert placement.workbenches == ("carol",)
    assert [p for p, _ in kube.patches] == ["jupyter-carol"]
    warning = warning_of(loop, "carol")
    assert cause_of(warning)["code"] == "placement"
    assert cause_of(warning)["for"] == {"team": "own", "name": "train", "object": "Job"}
    assert warning["reason"].startswith("a training Job needs a whole H100")

    clock[0] = NOW + timedelta(seconds=31)
    for user in ("alice", "bob", "carol"):
        store.record(user, "", idle(), clock[0])
    plan = await loop.cycle()
    assert plan is not None
    assert hub.stopped == [("carol", "")]
    assert loop.state.handoffs == {}  # the Job is admitted already: no hand-off to verify
    assert ("jupyter-carol", "GPUReclaimed", "Normal") in kube.events

"""The reclaim loop's inputs (pure): workbenches from the notebook pods, their Workloads and
activity reports; the hub's word on them; queued work and what it lacks.

With HAMi fractions, what an idle fraction holds and what a queued Job lacks are Kueue's
transformed amounts (``nvidia.com/total-gpumem``), so idle fractions are reclaimed for a queued
fractional Job, and never for a whole-GPU Job, which Kueue cannot admit on the tainted vGPU
flavor (docs/fractions.md)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action, decide
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.inputs import as_the_hub_sees_them, pending_workloads, workbenches
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from tests.support import service_samples as world
from tests.support import service_world as loop_world
from tests.support.service_samples import NS, iso

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(minutes=30)
GPU, GPUMEM, GPUCORES = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"
TOTAL_MEM, TOTAL_CORES = "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"
TAINT = {"key": "gpuaas.dev/hami-vgpu", "value": "true", "effect": "NoSchedule"}
TOLERATION = {**TAINT, "operator": "Equal"}
QUARTER = {GPU: "1", GPUMEM: "5632", GPUCORES: "25"}
QUARTER_COUNTED = {GPU: "1", TOTAL_MEM: "5632", TOTAL_CORES: "25"}


def queue_state() -> QueueState:
    """team-a: its notebooks hold all 4 quarters of l4-hami; h100 is full; training owns
    nothing and borrows what the cohort lends."""
    hami = {("l4-hami", GPU): 4, ("l4-hami", TOTAL_MEM): 22528, ("l4-hami", TOTAL_CORES): 100}
    h100 = {("h100", GPU): 2, ("h100", TOTAL_MEM): 0, ("h100", TOTAL_CORES): 0}
    return world.team_a_queues(
        world.cluster_queue("team-a-notebooks", {**h100, **hami}, {**h100, **hami}),
        world.cluster_queue("team-a-training", {k: 0 for k in {**h100, **hami}}, {}),
    )


def fraction_pod(user: str) -> dict[str, Any]:
    return world.workbench_pod(
        user,
        uid=f"uid-{user}",
        offering="l4-quarter",
        kind="fraction",
        requests=QUARTER,
        limits=QUARTER,
        created=T0,
        tolerations=[TOLERATION],
        annotations={"gpuaas.jupyter.org/gpu-equivalents": "1/4"},
    )


def pod_workload(user: str) -> WorkloadInfo:
    """The pod's Workload as Kueue admitted it: resourceUsage after the transformations."""
    return read_workload(
        {
            "metadata": {
                "name": f"pod-jupyter-{user}",
                "namespace": NS,
                "uid": f"wl-{user}",
                "ownerReferences": [
                    {"kind": "Pod", "name": f"jupyter-{user}", "uid": f"uid-{user}"}
                ],
            },
            "spec": {"queueName": "team-a", "podSets": []},
            "status": {
                "admission": {
                    "clusterQueue": "team-a-notebooks",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "flavors": {r: "l4-hami" for r in QUARTER_COUNTED},
                            "resourceUsage": dict(QUARTER_COUNTED),
                        }
                    ],
                },
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(T0)},
                    {"type": "Admitted", "status": "True", "lastTransitionTime": iso(T0)},
                ],
            },
        }
    )


def job(name: str, requests: dict[str, str], counted: dict[str, str], *, tolerate: bool) -> Any:
    """A pending training Job's Workload, with what Kueue recorded when it tried it."""
    return world.job_workload_object(
        name,
        requests=requests,
        created=T0,
        tolerations=[TOLERATION] if tolerate else (),
        status={
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "x"}
            ],
            "resourceRequests": [{"name": "main", "resources": counted}],
        },
    )


POLICY = load_policy(
    {
        "policies": [
            {
                "name": "fractions",
                "match": {"kinds": ["fraction"]},
                "idle_after": "10m",
                "warn_before": "0s",
            }
        ]
    }
)
FLAVORS = {"h100": {"gpuaas.dev/pool": "h100"}, "l4-hami": {"gpuaas.dev/pool": "l4-hami"}}
TAINTS = {"l4-hami": [TAINT]}


def _idle_report() -> dict[str, Any]:
    return world.idle_report(NOW, idle_since=T0)


def _plan(
    workload: dict[str, Any],
    users: tuple[str, ...] = ("ann", "ben", "cid", "dot"),
    taints: dict[str, list[dict[str, str]]] | None = TAINTS,
) -> Any:
    """Idle quarters of ``users`` and the pending ``workload``: the workbenches, what the
    workload lacks, and the culler's decisions (``taints``: the flavors' as the culler reads
    them; None leaves the taint check out)."""
    store = ActivityStore()
    for user in users:
        store.record(user, "", _idle_report(), NOW)
    state = queue_state()
    by_uid = {f"uid-{u}": pod_workload(u) for u in users}
    wbs, _ = workbenches(
        [fraction_pod(u) for u in users],
        state,
        store,
        POLICY,
        now=NOW,
        workload_for_pod=lambda ns, uid, name: by_uid.get(uid),
    )
    pending = pending_workloads(
        [workload], state, flavor_labels=FLAVORS, flavor_taints=taints, notebook_namespace=NS
    )
    return wbs, pending, decide(wbs, pending, POLICY, now=NOW)


def test_an_idle_fraction_holds_what_kueue_counts_for_it() -> None:
    wbs, _, _ = _plan(job("none", {}, {}, tolerate=True))
    assert wbs[0].kind == "fraction"
    assert wbs[0].holds == {
        ("l4-hami", GPU): Fraction(1),
        ("l4-hami", TOTAL_MEM): Fraction(5632),
        ("l4-hami", TOTAL_CORES): Fraction(25),
    }


def test_idle_fractions_are_reclaimed_for_a_queued_fractional_job() -> None:
    half = {GPU: "1", GPUMEM: "11264", GPUCORES: "50"}
    counted = {GPU: "1", TOTAL_MEM: "11264", TOTAL_CORES: "50"}
    _, pending, plan = _plan(job("half", half, counted, tolerate=True))
    (need,) = pending
    assert {n.resource: n.amount for n in need.needs} == {
        GPU: 1,
        TOTAL_MEM: 11264,
        TOTAL_CORES: 50,
    }
    assert all("l4-hami" in n.flavors for n in need.needs)
    acted = plan.with_action(Action.WARN) + plan.with_action(Action.RECLAIM)
    # Two quarters free the half's memory and cores; one would not be enough.
    assert len(acted) == 2, [(d.workbench.user, d.action, d.reason) for d in plan.decisions]
    assert {d.handoff for d in acted} == {"team-a/half"}


def test_a_whole_gpu_job_never_takes_fractions() -> None:
    """Its pods tolerate no vGPU taint: of l4-hami's free vGPU slots it could use none, and
    Kueue would not admit it there; so no fraction is reclaimed for it."""
    _, pending, plan = _plan(job("whole", {GPU: "1"}, {GPU: "1"}, tolerate=False))
    (need,) = pending
    assert [n.flavors for n in need.needs] == [("h100",)]
    assert plan.with_action(Action.WARN) == []
    assert plan.with_action(Action.RECLAIM) == []
    assert {d.code for d in plan.decisions} == {"no-demand"}


def test_without_the_taint_check_the_whole_gpu_job_would_take_a_fraction() -> None:
    """What the taint check guards: the same Job with the vGPU flavor left in is handed one."""
    whole = job("whole", {GPU: "1"}, {GPU: "1"}, tolerate=False)
    _, _, plan = _plan(whole, users=("ann",), taints=None)
    assert plan.with_action(Action.WARN) + plan.with_action(Action.RECLAIM)


# ----------------------------------------------------------------- workbenches and queued work


def test_workbenches_join_pods_workloads_and_reports() -> None:
    w = loop_world.World()
    w.report()
    starting = loop_world.pod("bob")
    starting["status"] = {"phase": "Pending"}
    no_user = loop_world.pod("nobody")
    del no_user["metadata"]["annotations"]["hub.jupyter.org/username"]
    wbs, refs = workbenches(
        [w.pods[0], starting, w.pods[2], no_user],
        w.view.state,
        w.store,
        w.policy,
        now=w.now,
        workload_for_pod=w.view.workload_for_pod,
        groups={"alice": ["team-a", "on-call"]},
    )
    by = {wb.key: wb for wb in wbs}
    assert set(by) == {"alice", "alice/busy", "bob"}
    alice = by["alice"]
    assert alice.holds == {("local", loop_world.MIG): Fraction(1)}
    assert alice.kind == "mig"
    assert alice.team == "team-a"
    assert alice.offering == "local-mig-1g"
    assert alice.cluster_queue == "team-a-notebooks"
    assert alice.cohorts == ("gpuaas",)
    assert alice.gpu_equivalents == Fraction(1, 7)
    assert alice.groups == ("team-a", "on-call")
    assert alice.phase == "running"
    assert alice.idleness.state is State.IDLE
    assert by["alice/busy"].idleness.state is State.BUSY
    assert by["bob"].phase == "starting"
    assert by["bob"].groups == ()
    assert refs["alice/busy"] == PodRef(NS, "jupyter-alice-busy", "uid-jupyter-alice-busy")


def test_the_hub_has_the_last_word_on_phase_groups_and_whether_a_server_is_active() -> None:
    w = loop_world.World()
    w.report()
    wbs, _ = workbenches(
        w.pods,
        w.view.state,
        w.store,
        w.policy,
        now=w.now,
        workload_for_pod=w.view.workload_for_pod,
    )
    started = loop_world.T0 + timedelta(seconds=5)
    users: dict[str, dict[str, Any] | None] = {
        "alice": {
            "name": "alice",
            "groups": ["ops"],
            "servers": {"": {"ready": False, "pending": "spawn", "started": iso(started)}},
        },
        "bob": None,  # no such user any more: his pod is not a workbench
    }
    by = {wb.key: wb for wb in as_the_hub_sees_them(wbs, users)}
    assert set(by) == {"alice"}  # bob is gone; alice's "busy" is not active in the hub
    assert by["alice"].phase == "starting"
    assert by["alice"].groups == ("ops",)
    assert by["alice"].started_at == started
    users["alice"] = {"name": "alice", "servers": {"": {"ready": True, "pending": "stop"}}}
    (alice,) = [wb for wb in as_the_hub_sees_them(wbs, users) if wb.key == "alice"]
    assert alice.phase == "stopping"
    assert alice.groups == ()  # the hub did not say: what the cycle knew stays
    users["alice"] = {"name": "alice", "servers": {"": {"ready": True, "pending": None}}}
    (alice,) = [wb for wb in as_the_hub_sees_them(wbs, users) if wb.key == "alice"]
    assert alice.phase == "running"


def test_pending_workloads_lack_what_the_cohort_cannot_lend() -> None:
    state = loop_world.queue_state(notebooks_used=3)
    (wl,) = pending_workloads(
        [loop_world.job_workload(), loop_world.job_workload("done", admitted=loop_world.T0)], state
    )
    assert wl.key == "team-a/train"
    assert wl.cluster_queue == "team-a-training"
    assert wl.cohorts == ("gpuaas",)
    assert wl.priority == 100
    assert wl.position == 0
    (need,) = wl.needs
    assert need.resource == loop_world.MIG
    assert need.amount == 2
    assert need.flavors == ("local",)
    assert need.free == {"local": 0}
    # a flavor whose node labels contradict the pods' nodeSelector is not one it can get
    job = loop_world.job_workload()
    job["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"gpuaas.dev/pool": "other"}
    local = {"local": {"gpuaas.dev/pool": "local"}}
    assert pending_workloads([job], state, flavor_labels=local) == []
    assert len(pending_workloads([loop_world.job_workload()], state, flavor_labels=local)) == 1
    (freer,) = pending_workloads(
        [loop_world.job_workload()], loop_world.queue_state(notebooks_used=2)
    )
    assert freer.needs[0].free == {"local": 1}

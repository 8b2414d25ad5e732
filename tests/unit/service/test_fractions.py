"""The culler and HAMi fractions, with the real gather and decision code: what an idle fraction
holds and what a queued Job lacks are Kueue's transformed amounts (``nvidia.com/total-gpumem``),
so idle fractions are reclaimed for a queued fractional Job, and never for a whole-GPU Job,
which Kueue cannot admit on the tainted vGPU flavor (docs/fractions.md)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action, decide
from gpuaas_service.reclaim.gather import pending_workloads, workbenches
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from tests.unit.service import world_samples as world
from tests.unit.service.world_samples import NS, iso

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

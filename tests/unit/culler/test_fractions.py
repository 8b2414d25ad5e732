"""The culler and HAMi fractions, with the real gather and decision code: what an idle fraction
holds and what a queued Job lacks are Kueue's transformed amounts (``nvidia.com/total-gpumem``),
so idle fractions are reclaimed for a queued fractional Job, and never for a whole-GPU Job,
which Kueue cannot admit on the tainted vGPU flavor (docs/fractions.md)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

from gpuaas_culler.reclaim.activity_store import ActivityStore
from gpuaas_culler.reclaim.decide import Action, decide
from gpuaas_culler.reclaim.gather import pending_workloads, workbenches
from gpuaas_culler.reclaim.policy import load_policy
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    WorkloadInfo,
    read_cluster_queue,
    read_local_queue,
    read_workload,
)

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(minutes=30)
NS = "jupyter-users"
GPU, GPUMEM, GPUCORES = "nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores"
TOTAL_MEM, TOTAL_CORES = "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"
TAINT = {"key": "gpuaas.dev/hami-vgpu", "value": "true", "effect": "NoSchedule"}
TOLERATION = {**TAINT, "operator": "Equal"}
QUARTER = {GPU: "1", GPUMEM: "5632", GPUCORES: "25"}
QUARTER_COUNTED = {GPU: "1", TOTAL_MEM: "5632", TOTAL_CORES: "25"}


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cq(name: str, quotas: dict[tuple[str, str], int], used: dict[tuple[str, str], int]) -> Any:
    flavors: dict[str, list[dict[str, Any]]] = {}
    for (flavor, res), q in quotas.items():
        flavors.setdefault(flavor, []).append({"name": res, "nominalQuota": str(q)})
    usage: dict[str, list[dict[str, Any]]] = {}
    for (flavor, res), u in used.items():
        usage.setdefault(flavor, []).append({"name": res, "total": str(u)})
    resources = sorted({r for _, r in quotas})
    return read_cluster_queue(
        {
            "metadata": {"name": name},
            "spec": {
                "cohortName": "gpuaas",
                "resourceGroups": [
                    {
                        "coveredResources": resources,
                        "flavors": [{"name": f, "resources": r} for f, r in flavors.items()],
                    }
                ],
            },
            "status": {
                "flavorsReservation": [{"name": f, "resources": r} for f, r in usage.items()]
            },
        }
    )


def queue_state() -> QueueState:
    """team-a: its notebooks hold all 4 quarters of l4-hami; h100 is full; training owns
    nothing and borrows what the cohort lends."""
    hami = {("l4-hami", GPU): 4, ("l4-hami", TOTAL_MEM): 22528, ("l4-hami", TOTAL_CORES): 100}
    h100 = {("h100", GPU): 2, ("h100", TOTAL_MEM): 0, ("h100", TOTAL_CORES): 0}
    notebooks = _cq("team-a-notebooks", {**h100, **hami}, {**h100, **hami})
    training = _cq("team-a-training", {k: 0 for k in {**h100, **hami}}, {})
    lqs = [
        read_local_queue(
            {
                "metadata": {"name": "team-a", "namespace": NS},
                "spec": {"clusterQueue": notebooks.name},
            }
        ),
        read_local_queue(
            {
                "metadata": {"name": "training", "namespace": "team-a"},
                "spec": {"clusterQueue": training.name},
            }
        ),
    ]
    return QueueState(
        cluster_queues={notebooks.name: notebooks, training.name: training},
        local_queues={(q.namespace, q.name): q for q in lqs},
    )


def fraction_pod(user: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"jupyter-{user}",
            "namespace": NS,
            "uid": f"uid-{user}",
            "labels": {
                "kueue.x-k8s.io/queue-name": "team-a",
                "gpuaas.jupyter.org/team": "team-a",
                "gpuaas.jupyter.org/offering": "l4-quarter",
            },
            "annotations": {
                "hub.jupyter.org/username": user,
                "hub.jupyter.org/servername": "",
                "gpuaas.jupyter.org/gpu-equivalents": "1/4",
            },
            "creationTimestamp": iso(T0),
        },
        "spec": {
            "tolerations": [TOLERATION],
            "containers": [
                {
                    "name": "notebook",
                    "resources": {"requests": dict(QUARTER), "limits": dict(QUARTER)},
                    "env": [{"name": "GPUAAS_OFFERING_KIND", "value": "fraction"}],
                }
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": iso(T0),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


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
    spec: dict[str, Any] = {"containers": [{"name": "t", "resources": {"requests": requests}}]}
    if tolerate:
        spec["tolerations"] = [TOLERATION]
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": iso(T0),
        },
        "spec": {
            "queueName": "training",
            "priority": 100,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": spec}}],
        },
        "status": {
            "conditions": [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "x"}
            ],
            "resourceRequests": [{"name": "main", "resources": counted}],
        },
    }


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
    return {
        "sampled_at": iso(NOW),
        "source": "simulated",
        "kernels": [{"kernel_id": "k", "execution_state": "idle", "last_activity": iso(T0)}],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": iso(T0),
    }


def _plan(workload: dict[str, Any]) -> Any:
    users = ["ann", "ben", "cid", "dot"]
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
        [workload], state, flavor_labels=FLAVORS, flavor_taints=TAINTS, notebook_namespace=NS
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
    users = ["ann"]
    store = ActivityStore()
    store.record("ann", "", _idle_report(), NOW)
    state = queue_state()
    wbs, _ = workbenches(
        [fraction_pod(u) for u in users],
        state,
        store,
        POLICY,
        now=NOW,
        workload_for_pod=lambda ns, uid, name: pod_workload("ann"),
    )
    pending = pending_workloads(
        [job("whole", {GPU: "1"}, {GPU: "1"}, tolerate=False)],
        state,
        flavor_labels=FLAVORS,
        notebook_namespace=NS,
    )
    plan = decide(wbs, pending, POLICY, now=NOW)
    assert plan.with_action(Action.WARN) + plan.with_action(Action.RECLAIM)

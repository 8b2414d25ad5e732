"""The reclaim loop's inputs, built from what it read (pure: plain data and a clock in).

- :func:`workbenches`: the notebook pods (labels, annotations, GPU requests, phase; each names
  its hub user and server) joined with the pods' Kueue Workloads (assigned flavors,
  ClusterQueue), the users' groups, the activity store (latest report, last verdict) and the
  culler's own state kept on each pod (:data:`WARNED_AT` ...).
- :func:`as_the_hub_sees_them`: the same workbenches corrected by what the hub says of their
  users (``GET /hub/api/users/{name}``): the loop asks only about servers it is about to act on.
- :func:`pending_workloads`: Kueue's pending Workloads with what they lack, per resource and
  flavor, against the quota free to their ClusterQueue now.
- :func:`placement_waits`: admitted pods waiting for whole cards that exist only as scraps, as a
  real cluster says so: HAMi's scheduler left the pod ``Pending`` with ``PodScheduled=False``,
  reason ``Unschedulable``, and its card reasons in the message (``CardInsufficientMemory``,
  ``CardInsufficientCore``, ...: :func:`jupyter_gpuaas.core.hami.unschedulable_reasons`); with
  what holds each card: each share's cards come from HAMi's record on its pod
  (``hami.io/vgpu-devices-allocated``) and its node (``spec.nodeName``, else HAMi's
  ``hami.io/vgpu-node``).

Only ``nvidia.com/*`` resources are weighed: CPU and memory are not what a GPU reclaim frees.
Amounts are Kueue's own, after its resource transformations (a HAMi fraction holds
``nvidia.com/total-gpumem``, not its per-vGPU ``nvidia.com/gpumem``): a Workload's admission
``resourceUsage``, or for a pending one the ``status.resourceRequests`` Kueue records when it
tries it, so the demand arithmetic counts what Kueue counts (docs/fractions.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from fractions import Fraction
from typing import Any

from gpuaas_service.model.pods import PodRef, hub_server
from gpuaas_service.reclaim.activity_store import ActivityStore, server_key
from gpuaas_service.reclaim.decide import Need, PendingWorkload, PlacementWait, Workbench
from gpuaas_service.reclaim.idleness import judge
from gpuaas_service.reclaim.policy import DEFAULT_BUSY_UTILIZATION, PolicySet
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.gpu_equivalents import parse_gpu_equivalents, resource_gpu_equivalents
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    QUEUE_NAME_LABEL,
    ClusterQueueInfo,
    PendingWorkloadInfo,
    QuantityError,
    WorkloadInfo,
    as_list,
    as_mapping,
    parse_quantity,
    parse_time,
    pod_requests,
    read_conditions,
    read_workload,
)
from jupyter_gpuaas.core.labels import (
    GPU_EQUIVALENTS_ANNOTATION,
    OFFERING_LABEL,
    RECLAIM_DEADLINE,
    RECLAIM_REASON,
    RECLAIMED_AT,
    SNOOZED_UNTIL,
    SNOOZES_USED,
    TEAM_LABEL,
    WARNED_AT,
)

__all__ = [
    "as_the_hub_sees_them",
    "cohort_chain",
    "flavor_tolerated",
    "pending_workloads",
    "placement_waits",
    "pod_cards",
    "pod_node",
    "pod_state",
    "waits_for_room",
    "workbenches",
]

GPU_PREFIX = "nvidia.com/"
HAMI_ALLOCATED = hami.ALLOCATED
"""HAMi's record of the vGPUs a pod got, written by HAMi's scheduler when it picks the cards: per
container ``UUID,NVIDIA,MiB,cores:`` for each vGPU, then ``;`` (jupyter_gpuaas/core/hami.py)."""
USE_GPUTYPE = "nvidia.com/use-gputype"
POOL_RESOURCE = "nvidia.com/total-gpucores"
"""What Kueue counts of a shared pool: 100 per whole card."""
CORES_PER_CARD = 100


def pod_node(pod: Mapping[str, Any]) -> str:
    """The node a pod is on, or the one HAMi's scheduler assigned it while it is being bound."""
    node = as_mapping(pod.get("spec")).get("nodeName")
    if not node:
        node = as_mapping(as_mapping(pod.get("metadata")).get("annotations")).get(
            hami.ASSIGNED_NODE
        )
    return str(node or "")


def pod_cards(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The cards a pod's vGPUs are on, as ``node/UUID`` (from :data:`HAMI_ALLOCATED`)."""
    node = pod_node(pod)
    return tuple(dict.fromkeys(f"{node}/{d.uuid}" for d in hami.pod_devices(pod)))


def waits_for_room(pod: Mapping[str, Any]) -> bool:
    """Whether HAMi's scheduler left the pod unscheduled because the cards it may use lack room
    (memory, cores, slots, or sole use: :data:`jupyter_gpuaas.core.hami.ROOM_REASONS`), not
    because no card of its type is there: freeing a card can place it."""
    if as_mapping(pod.get("spec")).get("nodeName"):
        return False
    return bool(set(hami.unschedulable_reasons(pod)) & hami.ROOM_REASONS)


def pod_state(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The culler's state kept in a pod's annotations."""
    ann = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    used = ann.get(SNOOZES_USED, "0")
    return {
        "warned_at": parse_time(ann.get(WARNED_AT)),
        "snoozes_used": int(used) if isinstance(used, str) and used.isdigit() else 0,
        "snoozed_until": parse_time(ann.get(SNOOZED_UNTIL)),
        "reclaimed_at": parse_time(ann.get(RECLAIMED_AT)),
        "deadline": parse_time(ann.get(RECLAIM_DEADLINE)),
        "reason": str(ann.get(RECLAIM_REASON) or ""),
    }


def _gpu_requests(requests: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {r: q for r, q in requests.items() if r.startswith(GPU_PREFIX)}


def _gpu_equivalents(pod: Mapping[str, Any], requests: Mapping[str, Fraction]) -> Fraction:
    """:func:`pod_gpu_equivalents` from requests already read (the annotation first)."""
    ann = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    written = parse_gpu_equivalents(ann.get(GPU_EQUIVALENTS_ANNOTATION))
    return written if written is not None else resource_gpu_equivalents(requests)


def _kind(pod: Mapping[str, Any], requests: Mapping[str, Fraction]) -> str:
    for raw in as_list(as_mapping(pod.get("spec")).get("containers")):
        for env in as_list(as_mapping(raw).get("env")):
            if as_mapping(env).get("name") == "GPUAAS_OFFERING_KIND" and as_mapping(env).get(
                "value"
            ):
                return str(as_mapping(env)["value"])
    if not requests:
        return "cpu"
    if any(r.startswith("nvidia.com/mig-") for r in requests):
        return "mig"
    if "nvidia.com/gpu.shared" in requests:
        return "shared"
    if "nvidia.com/gpumem" in requests or "nvidia.com/total-gpumem" in requests:
        return "fraction"
    return "gpu"


def cohort_chain(state: QueueState, cluster_queue: str) -> tuple[str, ...]:
    """The cohort of ``cluster_queue``, then that cohort's parents (nearest first)."""
    cq = state.cluster_queues.get(cluster_queue)
    out: list[str] = []
    name = cq.cohort if cq else None
    while name and name not in out:
        out.append(name)
        co = state.cohorts.get(name)
        name = co.parent if co else None
    return tuple(out)


def _cluster_queue(
    state: QueueState, namespace: str, labels: Mapping[str, Any], wl: WorkloadInfo | None
) -> str:
    if wl is not None and wl.admitted_cluster_queue:
        return wl.admitted_cluster_queue
    lq = state.local_queues.get((namespace, str(labels.get(QUEUE_NAME_LABEL, ""))))
    return lq.cluster_queue if lq else ""


def _pod_phase(pod: Mapping[str, Any], kept: Mapping[str, Any] | None = None) -> str:
    """``starting`` / ``running`` / ``stopping`` as far as the pod tells (the hub may know more).
    ``kept``: its :func:`pod_state`, where already read."""
    meta = as_mapping(pod.get("metadata"))
    status = as_mapping(pod.get("status"))
    kept = kept if kept is not None else pod_state(pod)
    if meta.get("deletionTimestamp") or kept["reclaimed_at"]:
        return "stopping"
    if status.get("phase") in ("Succeeded", "Failed"):
        return "stopping"  # exited: the hub's poll is about to notice
    ready = read_conditions(status).get("Ready")
    running = status.get("phase") == "Running" and ready is not None and ready.status is True
    return "running" if running else "starting"


def workbenches(
    pods: Iterable[Mapping[str, Any]],
    state: QueueState,
    store: ActivityStore,
    policies: PolicySet,
    *,
    now: datetime,
    workload_for_pod: Callable[[str, str, str], WorkloadInfo | None],
    groups: Mapping[str, Sequence[str]] | None = None,
    pod_utilization: Mapping[tuple[str, str], float] | None = None,
    pod_last_kernel: Mapping[tuple[str, str], float] | None = None,
) -> tuple[list[Workbench], dict[str, PodRef]]:
    """The notebook pods that name a hub server, as :class:`Workbench` es.

    ``groups``: user → their hub groups (needed only when a policy names groups).
    ``pod_utilization``: ``(namespace, pod)`` → GPU utilisation in percent (DCGM through
    Prometheus, where configured); ``pod_last_kernel``: seconds since each HAMi fraction's last
    kernel (HAMi's vGPU monitor through Prometheus). The phase is
    the pod's; :func:`as_the_hub_sees_them` corrects it for the servers about to be acted on.
    Judges each server's activity (and records the verdict in ``store`` for the next cycle).
    """
    groups = groups or {}
    pod_utilization = pod_utilization or {}
    pod_last_kernel = pod_last_kernel or {}
    out: list[Workbench] = []
    refs: dict[str, PodRef] = {}
    for pod in pods:
        meta = as_mapping(pod.get("metadata"))
        server = hub_server(pod)
        if server is None:
            continue
        name, server_name = server
        key = server_key(name, server_name)
        if key in refs:  # pod names are per user and server: only across namespaces
            continue
        user_groups = tuple(str(g) for g in groups.get(name, ()))
        labels = as_mapping(meta.get("labels"))
        namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
        # Read the pod's requests once (they were parsed three times per pod per cycle).
        all_requests = pod_requests(pod)
        requests = _gpu_requests(all_requests)
        wl = workload_for_pod(namespace, uid, str(meta.get("name", "")))
        flavors = wl.assigned_flavors if wl is not None else {}
        counted = _gpu_requests(wl.counted) if wl is not None and wl.counted else requests
        holds = {(flavors[r], r): amount for r, amount in counted.items() if r in flavors}
        kind = _kind(pod, requests)
        team = str(labels.get(TEAM_LABEL, ""))
        offering = str(labels.get(OFFERING_LABEL, ""))
        cq = _cluster_queue(state, namespace, labels, wl)
        status = as_mapping(pod.get("status"))
        started = parse_time(status.get("startTime")) or parse_time(meta.get("creationTimestamp"))
        started = started or now
        kept = pod_state(pod)
        policy = policies.policy_for(
            team=team, kind=kind, offering=offering, user=name, groups=user_groups
        )
        report = store.report(key)
        idleness = judge(
            report,
            kind=kind,
            started_at=started,
            now=now,
            stale_after=policies.report_stale_after,
            busy_utilization_percent=(
                policy.busy_utilization_percent if policy else DEFAULT_BUSY_UTILIZATION
            ),
            previous=store.verdict(key),
            pod_utilization=pod_utilization.get((namespace, str(meta.get("name", "")))),
            trust_pod_utilization=bool(policy and policy.busy_signal == "gpu"),
            pod_last_kernel=pod_last_kernel.get((namespace, str(meta.get("name", "")))),
            listening_since=store.opened_at,
        )
        store.set_verdict(key, idleness)
        out.append(
            Workbench(
                user=name,
                server=server_name,
                groups=user_groups,
                team=team,
                kind=kind,
                offering=offering,
                holds=holds,
                gpu_equivalents=_gpu_equivalents(pod, all_requests),
                cluster_queue=cq,
                cohorts=cohort_chain(state, cq),
                started_at=started,
                phase=_pod_phase(pod, kept),
                idleness=idleness,
                snoozes_used=kept["snoozes_used"],
                snoozed_until=kept["snoozed_until"],
                warned_at=kept["warned_at"],
                warned_deadline=kept["deadline"],
                warned_reason=kept["reason"],
                cards=pod_cards(pod),
                keeps_state=report is not None and report.activity.keeps_kernel_state,
            )
        )
        refs[key] = PodRef(namespace, str(meta.get("name", "")), uid)
    return out, refs


def as_the_hub_sees_them(
    wbs: Iterable[Workbench], users: Mapping[str, Mapping[str, Any] | None]
) -> list[Workbench]:
    """``wbs`` with the hub's word for the users in ``users`` (their ``GET /users/{name}``
    models; ``None``: no such user): phase from the server's ``pending`` and ``ready``, its
    ``started``, the user's groups. A workbench whose server the hub does not have active is
    left out (a pod outliving its server is not the culler's to stop)."""
    out: list[Workbench] = []
    for wb in wbs:
        if wb.user not in users:
            out.append(wb)
            continue
        user = as_mapping(users[wb.user])
        server = user and as_mapping(user.get("servers")).get(wb.server)
        if not server:
            continue
        model = as_mapping(server)
        pending = model.get("pending")
        if wb.phase == "stopping" or pending == "stop":
            phase = "stopping"
        elif pending or not model.get("ready", True):
            phase = "starting"
        else:
            phase = "running"
        hub_groups = user.get("groups")
        out.append(
            replace(
                wb,
                phase=phase,
                started_at=parse_time(model.get("started")) or wb.started_at,
                groups=(
                    tuple(str(g) for g in as_list(hub_groups))
                    if hub_groups is not None
                    else wb.groups
                ),
            )
        )
    return out


def _node_selector(obj: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in as_list(as_mapping(obj.get("spec")).get("podSets")):
        spec = as_mapping(as_mapping(as_mapping(raw).get("template")).get("spec"))
        out.update({str(k): str(v) for k, v in as_mapping(spec.get("nodeSelector")).items()})
    return out


def _compatible(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether a flavor's node labels agree with a pod's nodeSelector (as Kueue assigns)."""
    return all(selector[k] == v for k, v in labels.items() if k in selector)


def _tolerations(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for raw in as_list(as_mapping(obj.get("spec")).get("podSets")):
        spec = as_mapping(as_mapping(as_mapping(raw).get("template")).get("spec"))
        out += [as_mapping(t) for t in as_list(spec.get("tolerations"))]
    return out


def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    """Kubernetes' toleration rule for one taint (empty key + Exists tolerates everything)."""
    for tol in tolerations:
        effect = str(tol.get("effect") or "")
        if effect and effect != taint.get("effect", ""):
            continue
        key = str(tol.get("key") or "")
        if str(tol.get("operator") or "Equal") == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and str(tol.get("value") or "") == taint.get("value", ""):
            return True
    return False


def flavor_tolerated(
    taints: Sequence[Mapping[str, str]], tolerations: Sequence[Mapping[str, Any]]
) -> bool:
    """Whether Kueue may give the flavor: every NoSchedule/NoExecute taint of it tolerated.
    Public for the utilisation replay (benchmarks/replay), which places workloads by it too."""
    return all(
        _tolerates(tolerations, t) for t in taints if t.get("effect") in ("NoSchedule", "NoExecute")
    )


def _needs(
    obj: Mapping[str, Any],
    asked: Mapping[str, Fraction],
    cq: ClusterQueueInfo,
    state: QueueState,
    flavor_labels: Mapping[str, Mapping[str, str]] | None,
    flavor_taints: Mapping[str, Sequence[Mapping[str, str]]] | None,
) -> tuple[Need, ...] | None:
    """What a pending Workload (``obj``) lacks of each GPU resource it asks for, in the
    flavors it could get; ``None`` when some resource has no such flavor (nothing a reclaim
    could do for it)."""
    selector = _node_selector(obj)
    tolerations = _tolerations(obj)
    needs = []
    for resource, amount in sorted(asked.items()):
        flavors = tuple(
            f
            for f in cq.flavors_for(resource)
            if (flavor_labels is None or _compatible(flavor_labels.get(f, {}), selector))
            and flavor_tolerated((flavor_taints or {}).get(f, ()), tolerations)
        )
        if not flavors:
            return None
        tree = state.tree()
        free = {
            f: Fraction(max(0, tree.available(("cq", cq.name), (f, resource)))) for f in flavors
        }
        needs.append(Need(resource=resource, amount=amount, flavors=flavors, free=free))
    return tuple(needs)


def pending_workloads(
    workloads: Sequence[Mapping[str, Any]],
    state: QueueState,
    *,
    positions: Callable[[str, str], Sequence[PendingWorkloadInfo] | None] = lambda ns, lq: None,
    flavor_labels: Mapping[str, Mapping[str, str]] | None = None,
    flavor_taints: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
    notebook_namespace: str = "",
) -> list[PendingWorkload]:
    """Kueue's pending Workloads that ask for GPUs, with what each lacks now.

    ``free`` per flavor is what Kueue would still admit to the ClusterQueue (own quota plus
    what its cohort lends), from the same arithmetic as the spawn form's headroom. Positions come
    from the visibility API where a LocalQueue is polled (``positions``), else creation order.
    ``flavor_labels`` (ResourceFlavor name → its ``nodeLabels``) drops the flavors that Kueue
    skips for a workload because they contradict its pods' ``nodeSelector``;
    ``flavor_taints`` (name → its ``nodeTaints``) those whose taints its pods do not tolerate
    (a whole-GPU Job is never offered HAMi's tainted vGPU flavor, so never handed fractions).

    Its team: the namespace of a team's Jobs; in ``notebook_namespace``, where every team's
    servers are, its LocalQueue (one per team, named after it).
    """
    found: list[tuple[datetime | None, PendingWorkload]] = []
    for obj in workloads:
        workload = read_workload(obj)
        if not workload.pending:
            continue
        asked = workload.counted or workload.resources
        needs_raw = {r: a for r, a in asked.items() if r.startswith(GPU_PREFIX)}
        lq = state.local_queues.get((workload.namespace, workload.queue_name))
        cq = state.cluster_queues.get(lq.cluster_queue) if lq else None
        if not needs_raw or cq is None:
            continue
        needs = _needs(obj, needs_raw, cq, state, flavor_labels, flavor_taints)
        if needs is None:
            continue
        items = positions(workload.namespace, workload.queue_name) or ()
        position = next(
            (i.position_in_cluster_queue for i in reversed(items) if i.name == workload.name), 0
        )
        found.append(
            (
                workload.created,
                PendingWorkload(
                    name=workload.name,
                    namespace=workload.namespace,
                    cluster_queue=cq.name,
                    cohorts=cohort_chain(state, cq.name),
                    priority=workload.priority or 0,
                    position=position,
                    needs=needs,
                    local_queue=workload.queue_name,
                    team=workload.queue_name
                    if workload.namespace == notebook_namespace
                    else workload.namespace,
                ),
            )
        )
    if all(p.position == 0 for _, p in found):  # no visibility answers: creation order
        order: dict[str, int] = {}
        out = []
        for _created, p in sorted(
            found, key=lambda x: (x[0].timestamp() if x[0] else float("inf"), x[1].key)
        ):
            n = order.get(p.cluster_queue, 0)
            order[p.cluster_queue] = n + 1
            out.append(replace(p, position=n))
        return out
    return [p for _, p in found]


def _whole_cards(pod: Mapping[str, Any]) -> int:
    """Whole cards a pod's containers ask for (HAMi vGPUs with all of a card's compute).
    Quantities are read as Kubernetes reads them (``100``, ``0.1k``, ``1e2``); a container
    whose are not quantities asks for no whole card."""
    n = 0
    for raw in as_list(as_mapping(pod.get("spec")).get("containers")):
        resources = as_mapping(as_mapping(raw).get("resources"))
        asked = {**as_mapping(resources.get("requests")), **as_mapping(resources.get("limits"))}
        try:
            cores = parse_quantity(asked.get("nvidia.com/gpucores", 0))
            cards = parse_quantity(asked.get("nvidia.com/gpu") or 1)
        except QuantityError:
            continue
        if cores == CORES_PER_CARD and cards > 0:
            n += math.ceil(cards)
    return n


def _pool_cards(state: QueueState, flavor: str) -> int:
    """The pool's cards: its ClusterQueues' nominal quota in GPU-equivalents (100 a card)."""
    total = sum(
        q.nominal
        for cq in state.cluster_queues.values()
        for (f, r), q in cq.quotas.items()
        if f == flavor and r == POOL_RESOURCE
    )
    return int(total) // CORES_PER_CARD


def _workload_of(
    pod: Mapping[str, Any], workload_for_pod: Callable[[str, str, str], WorkloadInfo | None]
) -> WorkloadInfo | None:
    """A pod's Workload: a plain pod's own, else its Job's (Kueue labels it with the Job's uid)."""
    meta = as_mapping(pod.get("metadata"))
    namespace = str(meta.get("namespace", ""))
    found = workload_for_pod(namespace, str(meta.get("uid", "")), str(meta.get("name", "")))
    if found is not None:
        return found
    for ref in as_list(meta.get("ownerReferences")):
        owner = as_mapping(ref)
        if owner.get("controller") and owner.get("uid"):
            return workload_for_pod(namespace, str(owner["uid"]), "")
    return None


def _flavor(wl: WorkloadInfo | None) -> str:
    if wl is None:
        return ""
    return wl.assigned_flavors.get(POOL_RESOURCE) or next(iter(wl.assigned_flavors.values()), "")


def placement_waits(
    pods: Iterable[Mapping[str, Any]],
    wbs: Sequence[Workbench],
    state: QueueState,
    *,
    workload_for_pod: Callable[[str, str, str], WorkloadInfo | None],
    notebook_namespace: str = "",
) -> list[PlacementWait]:
    """The admitted pods that wait for whole cards of a shared pool (:func:`waits_for_room`: HAMi's
    scheduler found no card with room), each with the cards other work holds on its pool.

    ``pods``: every pod that may hold or wait for the pool's cards (the notebook namespace's and
    the Jobs' namespaces'); ``wbs``: the workbenches among them. A card held by a pod that is no
    workbench is never freed; the pool's free whole cards are its cards (from the quota: 100 of
    ``nvidia.com/total-gpucores`` each) less those any pod is on."""
    others: dict[str, dict[str, str]] = {}  # flavor → card → what holds it
    waiting: list[tuple[Mapping[str, Any], WorkloadInfo]] = []
    for pod in pods:
        meta = as_mapping(pod.get("metadata"))
        status = as_mapping(pod.get("status"))
        if status.get("phase") in ("Succeeded", "Failed"):
            continue
        wl = _workload_of(pod, workload_for_pod)
        if waits_for_room(pod):
            if wl is not None and wl.admitted and _whole_cards(pod):
                waiting.append((pod, wl))
            continue
        if hub_server(pod) is not None:
            continue  # a workbench: its cards are in ``wbs``
        what = f"pod {meta.get('namespace', '')}/{meta.get('name', '')}"
        for card in pod_cards(pod):
            others.setdefault(_flavor(wl), {})[card] = what
    out = []
    for pod, wl in waiting:
        meta = as_mapping(pod.get("metadata"))
        ann = as_mapping(meta.get("annotations"))
        flavor = _flavor(wl)
        node = pod_node(pod)
        blocked = {**others.get(flavor, {}), **others.get("", {})}
        held = {c for wb in wbs for c in wb.cards if any(f == flavor for f, _r in wb.holds)}
        held |= set(blocked)
        free = max(_pool_cards(state, flavor) - len(held), 0)
        owners = [as_mapping(r) for r in as_list(meta.get("ownerReferences"))]
        namespace = str(meta.get("namespace", ""))
        out.append(
            PlacementWait(
                name=str(meta.get("name", "")),
                namespace=namespace,
                workload=wl.name,
                team=wl.queue_name if namespace == notebook_namespace else namespace,
                cluster_queue=wl.admitted_cluster_queue,
                priority=wl.priority or 0,
                flavor=flavor,
                node=node,
                gpu_type=str(ann.get(USE_GPUTYPE) or "GPU").split(",")[0].strip() or "GPU",
                what="a training Job" if any(o.get("kind") == "Job" for o in owners) else "work",
                cards=_whole_cards(pod),
                free_cards=free,
                blocked=blocked,
                since=parse_time(meta.get("creationTimestamp")),
            )
        )
    return out

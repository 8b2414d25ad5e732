"""The reclaim loop's inputs, built from what it read (pure: plain data and a clock in).

- :func:`workbenches`: hub users (``GET /hub/api/users?state=active``, with servers) joined with
  their notebook pods (labels, annotations, GPU requests), the pods' Kueue Workloads (assigned
  flavors, ClusterQueue), the activity store (latest report, last verdict) and the culler's own
  state kept on each pod (:data:`WARNED_AT` ...).
- :func:`pending_workloads`: Kueue's pending Workloads with what they lack, per resource and
  flavor, against the quota free to their ClusterQueue now.

Only ``nvidia.com/*`` resources are weighed: CPU and memory are not what a GPU reclaim frees.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction
from typing import Any

from jupyter_gpuaas.headroom import QueueState
from jupyter_gpuaas.kueue import (
    QUEUE_NAME_LABEL,
    PendingWorkloadInfo,
    WorkloadInfo,
    as_list,
    as_mapping,
    parse_quantity,
    parse_time,
    read_workload,
)

from .activity_store import ActivityStore, server_key
from .decide import Need, PendingWorkload, Workbench
from .idleness import judge
from .policy import DEFAULT_BUSY_UTILIZATION, PolicySet
from .queue import (
    HUB_SERVERNAME_ANNOTATION,
    HUB_USERNAME_ANNOTATION,
    OFFERING_LABEL,
    TEAM_LABEL,
    gpu_equivalents,
    summarize_workload,
)

__all__ = [
    "RECLAIMED_AT",
    "RECLAIMED_FOR",
    "SNOOZED_UNTIL",
    "SNOOZES_USED",
    "WARNED_AT",
    "PodRef",
    "pending_workloads",
    "pod_state",
    "workbenches",
]

_PREFIX = "gpuaas.jupyter.org/reclaim-"
WARNED_AT = _PREFIX + "warned-at"
"""Pod annotation: when the culler warned this server (a restart does not warn again)."""
SNOOZES_USED = _PREFIX + "snoozes-used"
SNOOZED_UNTIL = _PREFIX + "snoozed-until"
RECLAIMED_AT = _PREFIX + "stopped-at"
"""Pod annotation: the culler asked the hub to stop it (a restart does not stop it twice)."""
RECLAIMED_FOR = _PREFIX + "for"
GPU_PREFIX = "nvidia.com/"


@dataclass(frozen=True)
class PodRef:
    """Where a workbench's pod is (for annotations and Events)."""

    namespace: str
    name: str
    uid: str


def pod_state(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The culler's state kept in a pod's annotations."""
    ann = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    used = ann.get(SNOOZES_USED, "0")
    return {
        "warned_at": parse_time(ann.get(WARNED_AT)),
        "snoozes_used": int(used) if isinstance(used, str) and used.isdigit() else 0,
        "snoozed_until": parse_time(ann.get(SNOOZED_UNTIL)),
        "reclaimed_at": parse_time(ann.get(RECLAIMED_AT)),
    }


def _gpu_requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for raw in as_list(as_mapping(pod.get("spec")).get("containers")):
        res = as_mapping(as_mapping(raw).get("resources"))
        merged = {**as_mapping(res.get("limits")), **as_mapping(res.get("requests"))}
        for name, qty in merged.items():
            if str(name).startswith(GPU_PREFIX):
                try:
                    total[str(name)] = total.get(str(name), Fraction(0)) + parse_quantity(qty)
                except ValueError:
                    continue
    return total


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
    return "gpu"


def _cohorts(state: QueueState, cluster_queue: str) -> tuple[str, ...]:
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


def workbenches(
    users: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    state: QueueState,
    store: ActivityStore,
    policies: PolicySet,
    *,
    now: datetime,
    workload_for_pod: Callable[[str, str, str], WorkloadInfo | None],
) -> tuple[list[Workbench], dict[str, PodRef]]:
    """The hub's running servers that have a notebook pod, as :class:`Workbench` es.

    Judges each server's activity (and records the verdict in ``store`` for the next cycle).
    Servers without a pod (not a Kubernetes spawn, or already gone) are left out.
    """
    by_server: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        meta = as_mapping(pod.get("metadata"))
        ann = as_mapping(meta.get("annotations"))
        user = ann.get(HUB_USERNAME_ANNOTATION)
        if isinstance(user, str) and user:
            by_server[server_key(user, str(ann.get(HUB_SERVERNAME_ANNOTATION) or ""))] = pod

    out: list[Workbench] = []
    refs: dict[str, PodRef] = {}
    for user in users:
        name = str(user.get("name", ""))
        groups = tuple(str(g) for g in as_list(user.get("groups")))
        for server_name, server in as_mapping(user.get("servers")).items():
            key = server_key(name, str(server_name))
            found = by_server.get(key)
            if found is None:
                continue
            pod = found
            model = as_mapping(server)
            meta = as_mapping(pod.get("metadata"))
            labels = as_mapping(meta.get("labels"))
            namespace, uid = str(meta.get("namespace", "")), str(meta.get("uid", ""))
            requests = _gpu_requests(pod)
            wl = workload_for_pod(namespace, uid, str(meta.get("name", "")))
            flavors = wl.assigned_flavors if wl is not None else {}
            holds = {(flavors[r], r): amount for r, amount in requests.items() if r in flavors}
            kind = _kind(pod, requests)
            team = str(labels.get(TEAM_LABEL, ""))
            offering = str(labels.get(OFFERING_LABEL, ""))
            cq = _cluster_queue(state, namespace, labels, wl)
            started = (
                parse_time(model.get("started")) or parse_time(meta.get("creationTimestamp")) or now
            )
            pending = model.get("pending")
            kept = pod_state(pod)
            if pending == "stop" or meta.get("deletionTimestamp") or kept["reclaimed_at"]:
                phase = "stopping"
            elif pending or not model.get("ready", True):
                phase = "starting"
            else:
                phase = "running"
            policy = policies.policy_for(
                team=team, kind=kind, offering=offering, user=name, groups=groups
            )
            idleness = judge(
                store.report(key),
                kind=kind,
                started_at=started,
                now=now,
                stale_after=policies.report_stale_after,
                busy_utilization_percent=(
                    policy.busy_utilization_percent if policy else DEFAULT_BUSY_UTILIZATION
                ),
                previous=store.verdict(key),
            )
            store.set_verdict(key, idleness)
            out.append(
                Workbench(
                    user=name,
                    server=str(server_name),
                    groups=groups,
                    team=team,
                    kind=kind,
                    offering=offering,
                    holds=holds,
                    gpu_equivalents=gpu_equivalents(requests),
                    cluster_queue=cq,
                    cohorts=_cohorts(state, cq),
                    started_at=started,
                    phase=phase,
                    idleness=idleness,
                    snoozes_used=kept["snoozes_used"],
                    snoozed_until=kept["snoozed_until"],
                    warned_at=kept["warned_at"],
                )
            )
            refs[key] = PodRef(namespace, str(meta.get("name", "")), uid)
    return out, refs


def _node_selector(obj: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in as_list(as_mapping(obj.get("spec")).get("podSets")):
        spec = as_mapping(as_mapping(as_mapping(raw).get("template")).get("spec"))
        out.update({str(k): str(v) for k, v in as_mapping(spec.get("nodeSelector")).items()})
    return out


def _compatible(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    """Whether a flavor's node labels agree with a pod's nodeSelector (as Kueue assigns)."""
    return all(selector[k] == v for k, v in labels.items() if k in selector)


def pending_workloads(
    workloads: Sequence[Mapping[str, Any]],
    state: QueueState,
    *,
    positions: Callable[[str, str], Sequence[PendingWorkloadInfo] | None] = lambda ns, lq: None,
    flavor_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> list[PendingWorkload]:
    """Kueue's pending Workloads that ask for GPUs, with what each lacks now.

    ``free`` per flavor is what Kueue would still admit to the ClusterQueue (own quota plus
    what its cohort lends), from the same arithmetic as the spawn form's headroom. Positions come
    from the visibility API where a LocalQueue is polled (``positions``), else creation order.
    ``flavor_labels`` (ResourceFlavor name → its ``nodeLabels``) drops the flavors that Kueue
    skips for a workload because they contradict its pods' ``nodeSelector``.
    """
    tree = state.tree()
    found: list[tuple[datetime | None, PendingWorkload]] = []
    for obj in workloads:
        summary = summarize_workload(obj)
        if not summary.pending:
            continue
        needs_raw = {r: a for r, a in summary.resources.items() if r.startswith(GPU_PREFIX)}
        lq = state.local_queues.get((summary.namespace, summary.queue_name))
        cq = state.cluster_queues.get(lq.cluster_queue) if lq else None
        if not needs_raw or cq is None:
            continue
        selector = _node_selector(obj)
        needs = []
        for resource, amount in sorted(needs_raw.items()):
            flavors = tuple(
                f
                for f in cq.flavors_for(resource)
                if flavor_labels is None or _compatible(flavor_labels.get(f, {}), selector)
            )
            if not flavors:
                break  # no flavor it could get: nothing a reclaim could do for it
            free = {
                f: Fraction(max(0, tree.available(("cq", cq.name), (f, resource)))) for f in flavors
            }
            needs.append(Need(resource=resource, amount=amount, flavors=flavors, free=free))
        if len(needs) < len(needs_raw):
            continue
        info = read_workload(obj)
        position = 0
        items = positions(summary.namespace, summary.queue_name)
        for item in items or ():
            if item.name == summary.name:
                position = item.position_in_cluster_queue
        found.append(
            (
                summary.created,
                PendingWorkload(
                    name=summary.name,
                    namespace=summary.namespace,
                    cluster_queue=cq.name,
                    cohorts=_cohorts(state, cq.name),
                    priority=info.priority or 0,
                    position=position,
                    needs=tuple(needs),
                    local_queue=summary.queue_name,
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

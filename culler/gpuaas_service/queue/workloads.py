"""A user's pending GPU work and where it stands in Kueue's queues: pure functions.

The gpuaas service (:mod:`.service`) feeds these from its watch caches and visibility pollers;
the tests feed them literal API dicts. What comes out is positions and summaries only — never a
pod template, an environment or a command (see docs/queue.md for the JSON).

Whose work is it:

- a notebook server's pod (in the hub's namespace) belongs to the hub user KubeSpawner names in
  its ``hub.jupyter.org/username`` annotation (only the hub creates pods there);
- any other Workload belongs to the user named by its ``gpuaas.jupyter.org/user`` label, copied
  by Kueue from the Job (``labelKeysToCopy``) and vouched for by the admission policy
  ``devcluster/manifests/60-user-label-policy.yaml``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from gpuaas_service.reclaim.loop import team_display_names
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Catalog
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import (
    RESOURCE_GPU_EQUIVALENTS,
    exact_gpu_equivalents,
    parse_gpu_equivalents,
    resource_gpu_equivalents,
)
from jupyter_gpuaas.core.kueue import (
    ClusterQueueInfo,
    LocalQueueInfo,
    PendingWorkloadInfo,
    TopologyWait,
    WorkloadInfo,
    as_mapping,
    as_str,
    format_quantity,
    topology_wait,
)
from jupyter_gpuaas.core.labels import (
    GPU_EQUIVALENTS_ANNOTATION,
    HUB_SERVERNAME_ANNOTATION,
    HUB_USERNAME_ANNOTATION,
    OFFERING_LABEL,
    TEAM_LABEL,
)

__all__ = [
    "NO_NAMES",
    "DisplayNames",
    "NotebookPod",
    "display_names",
    "queue_payload",
    "read_notebook_pod",
    "topology_words",
    "user_of",
]


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class NotebookPod:
    """What the service keeps of a notebook server's pod: labels and annotations only."""

    uid: str
    name: str
    namespace: str
    user: str
    server_name: str = ""
    team: str = ""
    offering: str = ""
    gpu_equivalents: Fraction | None = None


def read_notebook_pod(obj: Mapping[str, Any]) -> NotebookPod:
    meta = as_mapping(obj.get("metadata"))
    labels, annotations = as_mapping(meta.get("labels")), as_mapping(meta.get("annotations"))
    return NotebookPod(
        uid=as_str(meta.get("uid")),
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        user=as_str(annotations.get(HUB_USERNAME_ANNOTATION)),
        server_name=as_str(annotations.get(HUB_SERVERNAME_ANNOTATION)),
        team=as_str(labels.get(TEAM_LABEL)),
        offering=as_str(labels.get(OFFERING_LABEL)),
        gpu_equivalents=parse_gpu_equivalents(annotations.get(GPU_EQUIVALENTS_ANNOTATION)),
    )


def user_of(wl: WorkloadInfo, notebook_pods: Mapping[str, NotebookPod]) -> str:
    """The hub user a Workload belongs to ('' when nobody can be named).

    A notebook server's pod (known by its uid) names its user; otherwise the vouched-for user
    label. A pod known to be a notebook server never takes the label's word.
    """
    if wl.owner_kind == "Pod" and wl.owner_uid in notebook_pods:
        return notebook_pods[wl.owner_uid].user
    return wl.user_label


@dataclass(frozen=True)
class DisplayNames:
    """The catalog's words for what the answer names by slug: teams (by each name their work
    goes by) and offerings. Empty without a catalog: the sidebar then says "your team" and what
    the work asked for, never the slug."""

    teams: Mapping[str, str] = field(default_factory=dict)
    offerings: Mapping[str, str] = field(default_factory=dict)


NO_NAMES = DisplayNames()
"""No catalog: no display names."""


def display_names(catalog: Catalog | None) -> DisplayNames:
    """The display names of ``catalog``'s teams and offerings. Teams: as the reclaim warnings
    name them (:func:`.reclaim.loop.team_display_names`: tenant name, LocalQueue, Jobs'
    namespace), and by a hub group of exactly one team (the per-team rows of a caller's
    groups)."""
    if catalog is None:
        return NO_NAMES
    tenants = list(catalog.tenants.values())
    teams = team_display_names(tenants)
    by_group: dict[str, set[str]] = {}
    for t in tenants:
        for group in t.groups:
            by_group.setdefault(group, set()).add(t.display_name)
    for group, names in by_group.items():
        if group not in teams and len(names) == 1:
            teams[group] = next(iter(names))
    offerings = {slug: o.display_name for slug, o in catalog.offerings.items()}
    return DisplayNames(teams=teams, offerings=offerings)


# --------------------------------------------------------------------------- topology


def topology_words(wait: TopologyWait | None) -> str | None:
    """What a Workload that Kueue's Topology Aware Scheduling holds back waits for, in a
    person's words (``None``: it waits for quota, or not at all). Its quota is there; the GPUs
    it needs are free in total, but not within one domain of the level it requires."""
    if wait is None:
        return None
    if wait.one_node:
        return "waiting for a whole node"
    if wait.level:
        # a node label (cloud.provider.com/topology-rack, gpuaas.dev/rack): its last word
        word = wait.level.rsplit("/", 1)[-1].rsplit("-", 1)[-1] or wait.level
        return f"waiting for room in one {word}"
    return "waiting for free GPUs on the nodes"


# --------------------------------------------------------------------------- the answer


def _team_cluster_queues(
    team: str, local_queues: Mapping[tuple[str, str], LocalQueueInfo]
) -> set[str]:
    """ClusterQueues a team's work goes to: its LocalQueues are named after it (notebooks) or
    live in its namespace (training), as in the sample organisation."""
    return {
        lq.cluster_queue
        for (ns, name), lq in local_queues.items()
        if lq.cluster_queue and (ns == team or name == team)
    }


def queue_payload(
    user: str,
    *,
    workloads: Iterable[WorkloadInfo],
    notebook_pods: Mapping[str, NotebookPod],
    pending: Mapping[tuple[str, str], list[PendingWorkloadInfo] | None],
    local_queues: Mapping[tuple[str, str], LocalQueueInfo],
    cluster_queues: Mapping[str, ClusterQueueInfo],
    now: datetime,
    teams: Iterable[str] = (),
    synced: bool = True,
    weights: Mapping[str, Fraction] = RESOURCE_GPU_EQUIVALENTS,
    names: DisplayNames = NO_NAMES,
) -> api.Queue:
    """The ``GET /services/gpuaas/api/queue`` answer for ``user`` (docs/queue.md).

    Only the user's own pending Workloads are listed, ordered by ClusterQueue position (1-based;
    ``null`` while Kueue's visibility API has not placed them, e.g. inadmissible ones); ``teams``
    (the caller's hub groups) adds teams to the per-team counts besides those of the items.
    Teams and offerings carry their catalog display names from ``names`` (``null``: unknown).
    """
    items = [
        _item(
            wl,
            notebook_pods.get(wl.owner_uid) if wl.owner_kind == "Pod" else None,
            local_queues.get((wl.namespace, wl.queue_name)),
            pending.get((wl.namespace, wl.queue_name)),
            now=now,
            weights=weights,
            names=names,
        )
        for wl in workloads
        if wl.pending and user and user_of(wl, notebook_pods) == user
    ]
    items.sort(key=_item_order)
    item_teams = {i["team"] for i in items}
    return {
        "user": user,
        "generated_at": isoformat_z(now),
        "synced": synced,
        "items": items,
        "teams": _team_rows(
            item_teams | set(teams), items, local_queues, cluster_queues, names.teams
        ),
        "error": None,
        "error_kind": None,
    }


def _item(
    wl: WorkloadInfo,
    pod: NotebookPod | None,
    lq: LocalQueueInfo | None,
    answer: list[PendingWorkloadInfo] | None,
    *,
    now: datetime,
    weights: Mapping[str, Fraction],
    names: DisplayNames,
) -> api.QueueItem:
    """One pending Workload of the caller, with its positions from the visibility ``answer``
    of its LocalQueue (``None``: not polled yet)."""
    entry = None
    for candidate in answer or ():
        if candidate.name == wl.name or (wl.owner_uid and candidate.owner_uid == wl.owner_uid):
            entry = candidate
            break
    # A notebook server's size is the catalog's, written on its pod; other work's a guess.
    geq = pod.gpu_equivalents if pod else None
    if geq is None:
        geq = resource_gpu_equivalents(wl.counted or wl.resources, weights)
    waited = (now - wl.created).total_seconds() if wl.created else None
    offering = (pod.offering or None) if pod else wl.labels.get(OFFERING_LABEL)
    team = (pod.team if pod else "") or wl.namespace
    return {
        "kind": "notebook" if pod else "job" if wl.owner_kind == "Job" else "workload",
        "name": (pod.server_name or "default") if pod else wl.owner_name or wl.name,
        "workload": wl.name,
        "namespace": wl.namespace,
        "local_queue": wl.queue_name,
        "cluster_queue": lq.cluster_queue if lq else None,
        "position_in_local_queue": (
            entry.position_in_local_queue + 1 if entry is not None else None
        ),
        "position_in_cluster_queue": (
            entry.position_in_cluster_queue + 1 if entry is not None else None
        ),
        "positions_known": answer is not None,
        "offering": offering,
        "offering_display_name": names.offerings.get(offering) if offering else None,
        "resources": {k: format_quantity(v) for k, v in sorted(wl.resources.items())},
        "pods": wl.pods,
        "gpu_equivalents": exact_gpu_equivalents(geq),
        "team": team,
        "team_display_name": names.teams.get(team),
        "priority_class": wl.priority_class or None,
        "waiting_since": isoformat_z(wl.created) if wl.created else None,
        "waited_seconds": max(0, int(waited)) if waited is not None else None,
        "reason": wl.pending_message or None,
        "waiting_for": topology_words(topology_wait(wl)),
    }


def _item_order(item: api.QueueItem) -> tuple[Any, ...]:
    """By ClusterQueue, then position (unknown last), then how long it has waited."""
    pos = item["position_in_cluster_queue"]
    return (
        item["cluster_queue"] or "",
        pos is None,
        pos or 0,
        item["waiting_since"] or "",
        item["workload"],
    )


def _team_rows(
    teams: Iterable[str],
    items: Sequence[api.QueueItem],
    local_queues: Mapping[tuple[str, str], LocalQueueInfo],
    cluster_queues: Mapping[str, ClusterQueueInfo],
    team_names: Mapping[str, str],
) -> list[api.QueueTeam]:
    """Admitted and pending counts of each team's ClusterQueues (teams without one: none),
    with the team's display name (``team_names``; ``None``: unknown)."""
    rows: list[api.QueueTeam] = []
    for team in sorted(teams):
        names = _team_cluster_queues(team, local_queues) | {
            i["cluster_queue"] for i in items if i["team"] == team and i["cluster_queue"]
        }
        cqs = [cluster_queues[n] for n in sorted(names) if n in cluster_queues]
        if not cqs:
            continue
        rows.append(
            {
                "team": team,
                "display_name": team_names.get(team),
                "admitted": sum(c.admitted_workloads for c in cqs),
                "pending": sum(c.pending_workloads for c in cqs),
                "cluster_queues": [
                    {
                        "name": c.name,
                        "admitted": c.admitted_workloads,
                        "pending": c.pending_workloads,
                    }
                    for c in cqs
                ],
            }
        )
    return rows

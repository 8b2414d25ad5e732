"""What a queued server waits for, told to the spawner through the waiting pod itself.

A server waiting in Kueue's queue has a spawn progress page in the hub; the hub has no view of
activity or of the reclaim plan. After each cycle of the reclaim loop, :class:`OutlookWriter`
writes :data:`~jupyter_gpuaas.core.labels.RECLAIM_OUTLOOK` on each waiting notebook pod: what
holds the quota it needs (the servers, with how long each has been idle, and the training Jobs
of its ClusterQueue and cohort) and, when the plan is freeing some for it, when. The spawner
reads the annotation from its pod watch and puts it in words. No new credential anywhere: the
service already annotates notebook pods (its ``reclaim-*`` annotations, all its admission
policy lets it change), the hub already watches them, the user's pod gets nothing.

:func:`outlook` is pure; the annotation is written only when its text changes (an idle server
is told by when it became idle, not by how long, so a quiet queue writes nothing).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.decide import Action, PendingWorkload, Plan
from gpuaas_service.reclaim.events import CycleResult, LoopEvent
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.inputs import GPU_PREFIX, cohort_chain
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import ADMISSION_GATE, FlavorResource, WorkloadInfo, read_workload
from jupyter_gpuaas.core.labels import HUB_USERNAME_ANNOTATION, RECLAIM_OUTLOOK

__all__ = ["MAX_HOLDERS", "OutlookWriter", "RunningJob", "job_holds", "outlook"]

log = logging.getLogger("gpuaas.queue.outlook")

MAX_HOLDERS = 5
"""Holders named in one outlook (servers being freed first, then the longest idle); the rest
are counted."""


@dataclass(frozen=True, kw_only=True)
class RunningJob:
    """An admitted training Workload (not a notebook server) and what it holds."""

    team: str
    cluster_queue: str
    cohorts: tuple[str, ...] = ()
    holds: Mapping[FlavorResource, Fraction] = field(default_factory=dict)


def _related(cluster_queue: str, cohorts: Sequence[str], waiting: PendingWorkload) -> bool:
    """Whether quota held in ``cluster_queue`` could come to ``waiting`` (same ClusterQueue, or
    a cohort they share)."""
    if cluster_queue and cluster_queue == waiting.cluster_queue:
        return True
    return any(c in cohorts for c in waiting.cohorts)


def _holds_what_it_needs(
    holds: Mapping[FlavorResource, Fraction], waiting: PendingWorkload
) -> bool:
    for need in waiting.needs:
        for (flavor, resource), amount in holds.items():
            if (
                amount > 0
                and resource == need.resource
                and (not need.flavors or flavor in need.flavors)
            ):
                return True
    return False


def outlook(
    waiting: PendingWorkload, *, user: str, plan: Plan, jobs: Sequence[RunningJob] = ()
) -> dict[str, Any]:
    """What holds the quota ``waiting`` (``user``'s queued server) needs, and when the plan
    frees some of it for it.

    ``holders``: servers (``team``, ``yours``: the waiting user's own other server, ``state``
    ``idle``/``busy``/``unknown``, ``idle_since``, ``freed_at`` when a warning runs on it) and
    training Jobs (``team``), at most :data:`MAX_HOLDERS`, ``more`` counting the rest;
    ``freed_at``: when the plan's reclaim for this very workload is due (``None``: none is)."""
    servers: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    for d in plan.decisions:
        wb = d.workbench
        if wb.phase == "stopping" or not _related(wb.cluster_queue, wb.cohorts, waiting):
            continue
        if not _holds_what_it_needs(wb.holds, waiting):
            continue
        freed = (
            d.reclaim_at
            if d.action in (Action.WARN, Action.WAIT, Action.RECLAIM) and not d.dry_run
            else None
        )
        idle = wb.idleness.state is State.IDLE
        entry = {
            "kind": "server",
            "team": wb.team,
            "yours": wb.user == user,
            "state": wb.idleness.state.value,
            "idle_since": isoformat_z(wb.idleness.last_active) if idle else None,
            "freed_at": isoformat_z(freed) if freed is not None else None,
        }
        order = (
            freed is None,
            freed or wb.idleness.last_active,
            not idle,
            wb.idleness.last_active,
            wb.team,
        )
        servers.append((order, entry))
    servers.sort(key=lambda x: x[0])
    holders = [entry for _, entry in servers]
    holders += [
        {"kind": "job", "team": job.team}
        for job in sorted(jobs, key=lambda j: j.team)
        if _related(job.cluster_queue, job.cohorts, waiting)
        and _holds_what_it_needs(job.holds, waiting)
    ]
    target = next((t for t in plan.targets if t.workload.key == waiting.key), None)
    due = (
        target.reclaim_at
        if target is not None and target.status in ("warn", "reclaim") and not target.dry_run
        else None
    )
    return {
        "holders": holders[:MAX_HOLDERS],
        "more": max(len(holders) - MAX_HOLDERS, 0),
        "freed_at": isoformat_z(due) if due is not None else None,
    }


def job_holds(workload: WorkloadInfo) -> dict[FlavorResource, Fraction]:
    """The GPU quota an admitted Workload holds, by (flavor, resource)."""
    used = workload.counted or workload.resources
    return {
        (workload.assigned_flavors.get(resource, ""), resource): amount
        for resource, amount in used.items()
        if resource.startswith(GPU_PREFIX) and resource in workload.assigned_flavors
    }


class _Annotator(Protocol):
    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None: ...


class _Workloads(Protocol):
    def queue_state(self) -> QueueState: ...

    def workloads(self, namespace: str) -> Sequence[Mapping[str, Any]]: ...

    def workload_for_pod(
        self, namespace: str, pod_uid: str, pod_name: str
    ) -> WorkloadInfo | None: ...


def _gated(pod: Mapping[str, Any]) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)


class OutlookWriter:
    """A listener of the reclaim loop: after each cycle, the outlook of every waiting notebook
    pod, written on it when it changed (a failure is logged and tried at the next cycle)."""

    def __init__(
        self,
        kube: _Annotator,
        view: _Workloads,
        pods: Callable[[], Iterable[Mapping[str, Any]] | None],
        *,
        notebook_namespace: str,
        job_namespaces: Sequence[str] = (),
    ) -> None:
        self.kube = kube
        self.view = view
        self.pods = pods
        self.notebook_namespace = notebook_namespace
        self.job_namespaces = [ns for ns in job_namespaces if ns != notebook_namespace]
        self._written: dict[str, str] = {}
        """The text last written, by pod UID (the watch may not show it yet)."""

    def happened(self, event: LoopEvent) -> None:
        """Actions between cycles change nothing here until the next cycle."""

    def _running_jobs(self, state: QueueState) -> list[RunningJob]:
        jobs = []
        for ns in self.job_namespaces:
            for obj in self.view.workloads(ns):
                wl = read_workload(obj)
                if not (wl.admitted or wl.quota_reserved) or wl.finished or not wl.active:
                    continue
                cq = wl.admitted_cluster_queue
                holds = job_holds(wl)
                if cq and holds:
                    jobs.append(
                        RunningJob(
                            team=ns, cluster_queue=cq, cohorts=cohort_chain(state, cq), holds=holds
                        )
                    )
        return jobs

    async def cycle_completed(self, result: CycleResult) -> None:
        pending = {
            p.key: p for p in result.inputs.pending if p.namespace == self.notebook_namespace
        }
        listed = self.pods()
        if listed is None:
            return
        jobs: list[RunningJob] | None = None
        seen: set[str] = set()
        for pod in listed:
            meta = pod.get("metadata") or {}
            uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
            if not uid or meta.get("deletionTimestamp") or not _gated(pod):
                continue
            seen.add(uid)
            workload = self.view.workload_for_pod(self.notebook_namespace, uid, name)
            waiting = pending.get(f"{workload.namespace}/{workload.name}") if workload else None
            if waiting is None:
                continue
            if jobs is None:
                jobs = self._running_jobs(self.view.queue_state())
            user = str((meta.get("annotations") or {}).get(HUB_USERNAME_ANNOTATION, ""))
            text = json.dumps(
                outlook(waiting, user=user, plan=result.plan, jobs=jobs),
                sort_keys=True,
                separators=(",", ":"),
            )
            current = (meta.get("annotations") or {}).get(RECLAIM_OUTLOOK)
            if text in (current, self._written.get(uid)):
                continue
            try:
                await self.kube.annotate(
                    PodRef(self.notebook_namespace, name, uid), {RECLAIM_OUTLOOK: text}
                )
            except Exception as e:  # noqa: BLE001 - a courtesy to the waiting user; next cycle
                log.warning("outlook: annotating %s failed: %s", name, e)
                continue
            self._written[uid] = text
        self._written = {k: v for k, v in self._written.items() if k in seen}

"""What the sidebar shows of a notebook Job: its state from the Job and its Workload (pure).

States: ``queued`` (Kueue has not admitted it: suspended), ``starting`` (admitted, no pod
running yet), ``running``, ``succeeded``, ``failed`` (the Job's own conditions), ``stopped``
(Kueue deactivated its Workload: over its time limit, or by an admin).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Catalog, Tenant
from jupyter_gpuaas.core.kueue import MAX_EXEC_TIME_LABEL
from jupyter_gpuaas.core.labels import (
    GPU_EQUIVALENTS_ANNOTATION,
    JOB_COLLECTED_ANNOTATION,
    JOB_NOTEBOOK_ANNOTATION,
    JOB_NOTIFIED_ANNOTATION,
    JOB_RESULT_ANNOTATION,
    OFFERING_LABEL,
)

__all__ = ["FINISHED", "job_state", "job_summary"]

FINISHED = frozenset({"succeeded", "failed", "stopped"})


def _condition(obj: Mapping[str, Any] | None, ctype: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == "True":
            return dict(cond)
    return None


def job_state(
    job: Mapping[str, Any], workload: Mapping[str, Any] | None
) -> tuple[api.ServiceJobState, str]:
    """``(state, message)`` of a notebook Job (the message: why, in Kubernetes' words)."""
    status = job.get("status") or {}
    done = _condition(job, "Complete")
    if done is not None:
        return "succeeded", ""
    failed = _condition(job, "Failed")
    if failed is not None:
        return "failed", str(failed.get("message") or failed.get("reason") or "")
    if workload is not None and (workload.get("spec") or {}).get("active") is False:
        why = _condition(workload, "Evicted") or _condition(workload, "Deactivated") or {}
        return "stopped", str(why.get("message") or why.get("reason") or "stopped by Kueue")
    if (job.get("spec") or {}).get("suspend"):
        pending = _condition(workload, "QuotaReserved")
        wl_status = (workload or {}).get("status") or {}
        message = ""
        for cond in wl_status.get("conditions") or []:
            if cond.get("type") == "QuotaReserved" and cond.get("status") == "False":
                message = str(cond.get("message") or "")
        return ("starting" if pending else "queued"), message
    if int(status.get("active") or 0) > 0 and int(status.get("ready") or 0) > 0:
        return "running", ""
    if int(status.get("active") or 0) > 0:
        return "starting", ""
    return "starting", ""


def _flavors(workload: Mapping[str, Any] | None) -> list[str]:
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    out: list[str] = []
    for ps in admission.get("podSetAssignments") or []:
        for flavor in (ps.get("flavors") or {}).values():
            if flavor not in out:
                out.append(str(flavor))
    return out


def job_summary(
    tenant: Tenant,
    job: Mapping[str, Any],
    *,
    workload: Mapping[str, Any] | None = None,
    position: Mapping[str, Any] | None = None,
    catalog: Catalog | None = None,
) -> api.ServiceJob:
    """One entry of ``GET api/jobs`` (docs/jobs.md)."""
    meta = job["metadata"]
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    status = job.get("status") or {}
    state, message = job_state(job, workload)
    slug = labels.get(OFFERING_LABEL, "")
    offering = catalog.offerings.get(slug) if catalog is not None else None
    limit = labels.get(MAX_EXEC_TIME_LABEL)
    finished_at = None
    for ctype in ("Complete", "Failed"):
        cond = _condition(job, ctype)
        if cond is not None:
            finished_at = cond.get("lastTransitionTime")
    return {
        "team": tenant.name,
        "namespace": meta["namespace"],
        "name": meta["name"],
        "notebook": annotations.get(JOB_NOTEBOOK_ANNOTATION, ""),
        "state": state,
        "finished": state in FINISHED,
        "message": message,
        "offering": slug,
        "offering_name": offering.display_name if offering else slug,
        "gpu_equivalents": annotations.get(GPU_EQUIVALENTS_ANNOTATION, "0"),
        "flavors": _flavors(workload),
        "time_limit": int(limit) if limit and limit.isdigit() else None,
        "created_at": meta.get("creationTimestamp"),
        "started_at": status.get("startTime"),
        "finished_at": finished_at,
        "position_in_local_queue": (position or {}).get("position_in_local_queue"),
        "position_in_cluster_queue": (position or {}).get("position_in_cluster_queue"),
        "result": annotations.get(JOB_RESULT_ANNOTATION),
        "collected": annotations.get(JOB_COLLECTED_ANNOTATION),
        "notified": annotations.get(JOB_NOTIFIED_ANNOTATION),
    }

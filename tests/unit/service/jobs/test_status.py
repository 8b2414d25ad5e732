"""A notebook Job's state and summary as the sidebar shows them (``gpuaas_service.jobs.status``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.jobs.status import job_state, job_summary
from jupyter_gpuaas.core.catalog import Tenant
from jupyter_gpuaas.core.kueue import MAX_EXEC_TIME_LABEL
from jupyter_gpuaas.core.labels import (
    GPU_EQUIVALENTS_ANNOTATION,
    JOB_NOTEBOOK_ANNOTATION,
    JOB_RESULT_ANNOTATION,
    OFFERING_LABEL,
)

TEAM = Tenant(
    name="team-a",
    display_name="Team A",
    groups=("team-a",),
    local_queue="training",
    offerings=("h100",),
    default_offering="h100",
)


def cond(ctype: str, status: str = "True", **more: str) -> dict[str, str]:
    return {"type": ctype, "status": status, **more}


def job(
    *,
    suspend: bool = False,
    active: int = 0,
    ready: int = 0,
    conditions: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "nb-1",
            "namespace": "team-a",
            "labels": labels or {},
            "annotations": annotations or {},
            "creationTimestamp": "2026-12-06T10:00:00Z",
        },
        "spec": {"suspend": suspend},
        "status": {"active": active, "ready": ready, "conditions": conditions or []},
    }


def workload(
    *, active: bool = True, conditions: list[dict[str, str]] | None = None, **status: Any
) -> dict[str, Any]:
    return {"spec": {"active": active}, "status": {"conditions": conditions or [], **status}}


@pytest.mark.parametrize(
    ("the_job", "the_workload", "expected"),
    [
        # the Job's own conditions come first, whatever the Workload says
        (job(conditions=[cond("Complete")]), workload(active=False), ("succeeded", "")),
        (
            job(conditions=[cond("Failed", message="BackoffLimitExceeded: 1 failed pod")]),
            None,
            ("failed", "BackoffLimitExceeded: 1 failed pod"),
        ),
        (
            job(conditions=[cond("Failed", reason="DeadlineExceeded")]),
            None,
            ("failed", "DeadlineExceeded"),
        ),
        # a condition that is not True does not count
        (job(conditions=[cond("Complete", "False")], active=1, ready=1), None, ("running", "")),
        # Kueue deactivated the Workload: stopped, with Kueue's words, or a default
        (
            job(active=1),
            workload(
                active=False,
                conditions=[cond("Evicted", message="exceeded the maximum execution time")],
            ),
            ("stopped", "exceeded the maximum execution time"),
        ),
        (
            job(suspend=True),
            workload(active=False, conditions=[cond("Deactivated", reason="AdminStopped")]),
            ("stopped", "AdminStopped"),
        ),
        (job(suspend=True), workload(active=False), ("stopped", "stopped by Kueue")),
        # suspended: queued until quota is reserved, with Kueue's reason while it is not
        (
            job(suspend=True),
            workload(
                conditions=[cond("QuotaReserved", "False", message="couldn't assign flavors")]
            ),
            ("queued", "couldn't assign flavors"),
        ),
        (job(suspend=True), None, ("queued", "")),
        (job(suspend=True), workload(conditions=[cond("QuotaReserved")]), ("starting", "")),
        # unsuspended: running once a pod is ready, starting before
        (job(active=1, ready=1), workload(), ("running", "")),
        (job(active=1, ready=0), workload(), ("starting", "")),
        (job(), None, ("starting", "")),
    ],
)
def test_job_state_table(
    the_job: dict[str, Any], the_workload: dict[str, Any] | None, expected: tuple[str, str]
) -> None:
    assert job_state(the_job, the_workload) == expected
    # the summary says finished exactly for the end states
    the_job["metadata"] = {"name": "nb-1", "namespace": "team-a"}
    summary = job_summary(TEAM, the_job, workload=the_workload)
    assert summary["finished"] is (expected[0] in {"succeeded", "failed", "stopped"})


def test_summary_of_a_queued_job_with_its_place_and_time_limit() -> None:
    queued = job(
        suspend=True,
        labels={OFFERING_LABEL: "h100", MAX_EXEC_TIME_LABEL: "3600"},
        annotations={JOB_NOTEBOOK_ANNOTATION: "train.ipynb", GPU_EQUIVALENTS_ANNOTATION: "1"},
    )
    position = {"position_in_local_queue": 2, "position_in_cluster_queue": 5}
    summary = job_summary(TEAM, queued, workload=None, position=position)
    assert summary["team"] == "team-a"
    assert (summary["namespace"], summary["name"], summary["notebook"]) == (
        "team-a",
        "nb-1",
        "train.ipynb",
    )
    assert (summary["state"], summary["finished"]) == ("queued", False)
    # without a catalog the offering is named by its slug
    assert (summary["offering"], summary["offering_name"]) == ("h100", "h100")
    assert (summary["gpu_equivalents"], summary["time_limit"]) == ("1", 3600)
    assert (summary["position_in_local_queue"], summary["position_in_cluster_queue"]) == (2, 5)
    assert summary["flavors"] == []
    assert summary["finished_at"] is None
    assert summary["created_at"] == "2026-12-06T10:00:00Z"


def test_summary_of_a_finished_job_names_its_flavors_once_and_when_it_ended() -> None:
    done = job(
        conditions=[cond("Complete", lastTransitionTime="2026-12-06T11:00:00Z")],
        labels={MAX_EXEC_TIME_LABEL: "not-a-number"},
        annotations={JOB_RESULT_ANNOTATION: "succeeded"},
    )
    admitted = workload(
        admission={
            "podSetAssignments": [
                {"flavors": {"nvidia.com/gpu": "h100", "cpu": "default"}},
                {"flavors": {"nvidia.com/gpu": "h100"}},
            ]
        }
    )
    summary = job_summary(TEAM, done, workload=admitted)
    assert (summary["state"], summary["finished"]) == ("succeeded", True)
    assert summary["finished_at"] == "2026-12-06T11:00:00Z"
    assert summary["flavors"] == ["h100", "default"]
    assert summary["time_limit"] is None  # a label that is not a whole number is no limit
    assert summary["gpu_equivalents"] == "0"
    assert summary["result"] == "succeeded"
    assert summary["position_in_local_queue"] is None

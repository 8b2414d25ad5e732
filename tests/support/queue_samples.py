"""Kueue Workloads, notebook pods, queues and visibility answers for the queue's unit tests."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from jupyter_gpuaas.core.kueue import (
    PendingWorkloadInfo,
    read_cluster_queue,
    read_local_queue,
    read_pending_workloads,
)

NOW = datetime(2026, 11, 30, 16, 40, tzinfo=timezone.utc)


T0 = "2026-11-30T16:30:00Z"


def job_workload(
    name: str,
    user: str | None,
    *,
    ns: str = "team-a",
    queue: str = "training",
    gpus: str = "1",
    count: int = 1,
    created: str = T0,
    conditions: list[dict[str, Any]] | None = None,
    active: bool = True,
) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/job-uid": f"uid-{name}"}
    if user is not None:
        labels["gpuaas.jupyter.org/user"] = user
    return {
        "metadata": {
            "name": f"job-{name}-x1",
            "namespace": ns,
            "uid": f"wl-{name}",
            "creationTimestamp": created,
            "labels": labels,
            "ownerReferences": [
                {"kind": "Job", "name": name, "uid": f"uid-{name}", "controller": True}
            ],
        },
        "spec": {
            "queueName": queue,
            "active": active,
            "priorityClassRef": {"name": "training"},
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "command": ["python", "train.py"],
                                    "env": [{"name": "SECRET", "value": "hunter2"}],
                                    "resources": {
                                        "requests": {"cpu": "1", "nvidia.com/gpu": gpus},
                                        "limits": {"nvidia.com/gpu": gpus},
                                    },
                                }
                            ]
                        }
                    },
                }
            ],
        },
        "status": {"conditions": conditions or []},
    }


def pod_workload(name: str, pod_uid: str, *, label_user: str | None = None) -> dict[str, Any]:
    wl = job_workload(name, label_user, ns="jupyter-users", queue="team-a")
    wl["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "name": name, "uid": pod_uid, "controller": True}
    ]
    return wl


def notebook_pod(uid: str, user: str, server: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "uid": uid,
            "name": f"jupyter-{user}",
            "namespace": "jupyter-users",
            "labels": {
                "gpuaas.jupyter.org/team": "team-a",
                "gpuaas.jupyter.org/offering": "local-mig-1g",
            },
            "annotations": {
                "hub.jupyter.org/username": user,
                "hub.jupyter.org/servername": server,
                "gpuaas.jupyter.org/gpu-equivalents": "1/7",
            },
        }
    }


ADMITTED = [
    {"type": "QuotaReserved", "status": "True"},
    {"type": "Admitted", "status": "True"},
]


WAITING = [
    {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Pending",
        "message": "insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed",
    }
]


LQS = {
    ("team-a", "training"): read_local_queue(
        {
            "metadata": {"name": "training", "namespace": "team-a"},
            "spec": {"clusterQueue": "team-a-training"},
        }
    ),
    ("jupyter-users", "team-a"): read_local_queue(
        {
            "metadata": {"name": "team-a", "namespace": "jupyter-users"},
            "spec": {"clusterQueue": "team-a-notebooks"},
        }
    ),
    ("team-b", "training"): read_local_queue(
        {
            "metadata": {"name": "training", "namespace": "team-b"},
            "spec": {"clusterQueue": "team-b-training"},
        }
    ),
}


CQS = {
    name: read_cluster_queue(
        {
            "metadata": {"name": name},
            "spec": {"cohortName": "gpuaas"},
            "status": {"admittedWorkloads": adm, "pendingWorkloads": pend},
        }
    )
    for name, adm, pend in [
        ("team-a-training", 3, 4),
        ("team-a-notebooks", 1, 1),
        ("team-b-training", 0, 0),
    ]
}


def visibility(*names_positions: tuple[str, str, int, int]) -> list[PendingWorkloadInfo]:
    return read_pending_workloads(
        {
            "items": [
                {
                    "metadata": {"name": name, "namespace": "team-a"},
                    "localQueueName": lq,
                    "positionInLocalQueue": lpos,
                    "positionInClusterQueue": cpos,
                    "priority": 500,
                }
                for name, lq, lpos, cpos in names_positions
            ]
        }
    )


THREE_AND_BOB = [
    job_workload("a3", "alice", created="2026-11-30T16:33:00Z", conditions=WAITING),
    job_workload("a1", "alice", created="2026-11-30T16:31:00Z", conditions=WAITING),
    job_workload("b1", "bob", created="2026-11-30T16:34:00Z", conditions=WAITING),
    job_workload("a2", "alice", created="2026-11-30T16:32:00Z", conditions=WAITING),
    job_workload("filler", "alice", conditions=ADMITTED),
]


QUEUE = visibility(
    ("job-a1-x1", "training", 0, 0),
    ("job-a2-x1", "training", 1, 1),
    ("job-a3-x1", "training", 2, 2),
    ("job-b1-x1", "training", 3, 3),
)

"""The Kubernetes and Kueue objects the culler's unit tests build their worlds from: a team's
ClusterQueues and LocalQueues, a workbench's pod, a training Job's Workload, a server's activity
report. Each test module says what differs (resources, flavors, times)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_local_queue

NS = "jupyter-users"


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def cluster_queue(
    name: str,
    quotas: Mapping[tuple[str, str], int],
    used: Mapping[tuple[str, str], int],
) -> dict[str, Any]:
    """A ClusterQueue of the cohort ``gpuaas``: nominal quotas and reserved amounts per
    (flavor, resource), in one resource group."""
    flavors: dict[str, list[dict[str, Any]]] = {}
    for (flavor, res), q in quotas.items():
        flavors.setdefault(flavor, []).append({"name": res, "nominalQuota": q})
    usage: dict[str, list[dict[str, Any]]] = {}
    for (flavor, res), u in used.items():
        usage.setdefault(flavor, []).append({"name": res, "total": u})
    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "gpuaas",
            "resourceGroups": [
                {
                    "coveredResources": sorted({r for _, r in quotas}),
                    "flavors": [{"name": f, "resources": r} for f, r in flavors.items()],
                }
            ],
        },
        "status": {"flavorsReservation": [{"name": f, "resources": r} for f, r in usage.items()]},
    }


def team_a_queues(notebooks: dict[str, Any], training: dict[str, Any]) -> QueueState:
    """Team A's two ClusterQueues with their LocalQueues: ``jupyter-users/team-a`` for its
    notebooks, ``team-a/training`` for its Jobs."""
    cqs = [read_cluster_queue(notebooks), read_cluster_queue(training)]
    lqs = [
        read_local_queue(
            {
                "metadata": {"name": "team-a", "namespace": NS},
                "spec": {"clusterQueue": cqs[0].name},
            }
        ),
        read_local_queue(
            {
                "metadata": {"name": "training", "namespace": "team-a"},
                "spec": {"clusterQueue": cqs[1].name},
            }
        ),
    ]
    return QueueState(
        cluster_queues={c.name: c for c in cqs},
        local_queues={(q.namespace, q.name): q for q in lqs},
    )


def workbench_pod(
    user: str,
    *,
    offering: str,
    kind: str,
    requests: Mapping[str, str],
    limits: Mapping[str, str],
    created: datetime,
    server: str = "",
    uid: str = "",
    tolerations: Sequence[Mapping[str, str]] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A team-a user's running, ready server pod as GPUaaSSpawner makes it."""
    name = f"jupyter-{user}" + (f"-{server}" if server else "")
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "notebook",
                "resources": {"requests": dict(requests), "limits": dict(limits)},
                "env": [{"name": "GPUAAS_OFFERING_KIND", "value": kind}],
            }
        ]
    }
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid or f"uid-{name}",
            "labels": {
                "component": "singleuser-server",
                "kueue.x-k8s.io/queue-name": "team-a",
                "gpuaas.jupyter.org/team": "team-a",
                "gpuaas.jupyter.org/offering": offering,
            },
            "annotations": {
                "hub.jupyter.org/username": user,
                "hub.jupyter.org/servername": server,
                **(annotations or {}),
            },
            "creationTimestamp": iso(created),
        },
        "spec": spec,
        "status": {
            "phase": "Running",
            "startTime": iso(created),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def job_workload_object(
    name: str,
    *,
    requests: Mapping[str, str],
    created: datetime,
    count: int = 1,
    tolerations: Sequence[Mapping[str, str]] = (),
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Workload of a team-a training Job (LocalQueue ``training``), one pod set."""
    spec: dict[str, Any] = {"containers": [{"name": "t", "resources": {"requests": requests}}]}
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "creationTimestamp": iso(created),
        },
        "spec": {
            "queueName": "training",
            "priority": 100,
            "podSets": [{"name": "main", "count": count, "template": {"spec": spec}}],
        },
        "status": dict(status or {}),
    }


def idle_report(at: datetime, idle_since: datetime | None = None) -> dict[str, Any]:
    """A server's activity report sampled at ``at``: one idle kernel, idle since ``idle_since``
    (default ``at``)."""
    since = (idle_since or at).isoformat()
    kernel = {
        "kernel_id": "k1",
        "execution_state": "idle",
        "last_activity": since,
        "connections": 0,
        "gpu_memory": 0,
    }
    return {
        "sampled_at": at.isoformat(),
        "source": "simulated",
        "error": None,
        "kernels": [kernel],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": since,
    }

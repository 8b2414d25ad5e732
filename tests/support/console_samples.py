"""Workbenches, a two-team Kueue organisation and the example snapshot, for the console's
unit tests."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

from gpuaas_service.reclaim.decide import Workbench
from gpuaas_service.reclaim.idleness import Idleness, State
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_local_queue, read_workload

EXAMPLES = Path(__file__).resolve().parents[2] / "culler" / "examples"


MIG = "nvidia.com/mig-1g.5gb"


NS = "jupyter-users"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def wb(user: str, team: str, state: State, ge: Fraction, *, kind: str = "mig") -> Workbench:
    return Workbench(
        user=user,
        team=team,
        kind=kind,
        offering=f"off-{kind}",
        gpu_equivalents=ge,
        started_at=T0 - timedelta(hours=1),
        idleness=Idleness(state, T0 - timedelta(minutes=30), "test"),
    )


def cq(name: str, cohort: str, nominal: int, used: int) -> Any:
    return read_cluster_queue(
        {
            "metadata": {"name": name},
            "spec": {
                "cohortName": cohort,
                "resourceGroups": [
                    {
                        "coveredResources": [MIG],
                        "flavors": [
                            {"name": "local", "resources": [{"name": MIG, "nominalQuota": nominal}]}
                        ],
                    }
                ],
            },
            "status": {
                "flavorsReservation": [
                    {"name": "local", "resources": [{"name": MIG, "total": used}]}
                ]
            },
        }
    )


def lq(name: str, namespace: str, cluster_queue: str) -> Any:
    return read_local_queue(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def org() -> QueueState:
    """team-a: notebooks 4 (3 used) + training 0 (using 2: 1 from its notebooks, 1 borrowed);
    team-b: notebooks 2 (none used), lending; one cohort tree 'gpuaas'."""
    cqs = [
        cq("team-a-notebooks", "gpuaas", 4, 3),
        cq("team-a-training", "gpuaas", 0, 2),
        cq("team-b-notebooks", "gpuaas", 2, 0),
    ]
    lqs = [
        lq("team-a", NS, "team-a-notebooks"),
        lq("training", "team-a", "team-a-training"),
        lq("team-b", NS, "team-b-notebooks"),
    ]
    return QueueState(
        cluster_queues={c.name: c for c in cqs},
        local_queues={(q.namespace, q.name): q for q in lqs},
    )


def workload(name: str, ns: str, queue: str, created: datetime, mig: int, admitted: bool) -> Any:
    conditions = (
        [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
        if admitted
        else [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]
    )
    return read_workload(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": f"uid-{name}",
                "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "labels": {"kueue.x-k8s.io/queue-name": queue},
            },
            "spec": {
                "queueName": queue,
                "active": True,
                "podSets": [
                    {
                        "name": "main",
                        "count": mig,
                        "template": {
                            "spec": {
                                "containers": [{"name": "c", "resources": {"requests": {MIG: "1"}}}]
                            }
                        },
                    }
                ],
            },
            "status": {"conditions": conditions},
        }
    )


def a100_mig_node(name: str = "local-0", config: str = "all-1g.5gb") -> dict[str, Any]:
    """A Node of one A100 in NVIDIA's mixed MIG strategy, as GPU feature discovery labels it."""
    return {
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
                "nvidia.com/mig.strategy": "mixed",
                "nvidia.com/mig.config": config,
            },
        },
        "status": {"allocatable": {"nvidia.com/mig-1g.5gb": "7"}},
    }


def pod_holding(resource: str, node: str, count: int = 1) -> dict[str, Any]:
    """A running pod on ``node`` whose container holds ``count`` of ``resource``."""
    limits = {resource: str(count)}
    return {
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running"},
    }


def known(answer: api.ServiceStanding) -> api.ServiceStandingKnown:
    """A standing the test expects a cycle to have judged."""
    assert answer["known"], answer
    return answer


def policy_of(answer: api.ServiceStanding) -> api.ServicePolicyFields:
    """The policy a judged standing names, which the test expects it to have."""
    policy = known(answer)["policy"]
    assert policy is not None, answer
    return policy

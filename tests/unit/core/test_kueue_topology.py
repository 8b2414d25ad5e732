"""Kueue's Topology Aware Scheduling as the readers see it: a Workload's required level and
whether it waits for topology rather than for quota (Kueue v0.19.2's own words)."""

from __future__ import annotations

from typing import Any

import pytest

from jupyter_gpuaas.core.kueue import (
    TOPOLOGY_PLACEMENT_FAILED,
    TopologyWait,
    read_workload,
    topology_wait,
)

HOST = "kubernetes.io/hostname"
# What Kueue v0.19.2 writes (pkg/scheduler/scheduler.go: the assignment's Message() as the
# QuotaReserved=False message, reason "Pending" without UnadmittedWorkloadsObservability;
# pkg/cache/scheduler/tas_flavor_snapshot.go notFitMessage for the TAS part).
NONE_FIT = (
    "couldn't assign flavors to pod set main: topology \"gpu-racks\" doesn't allow to fit any"
    ' of 1 pod(s). Total nodes: 3; excluded: resource "nvidia.com/gpu": 3'
)
SOME_FIT = (
    'couldn\'t assign flavors to pod set main: topology "gpu-racks" allows to fit only 2 out'
    " of 4 pod(s)"
)
QUOTA = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in"
    " flavor h200, 4 more needed"
)


def workload(
    *,
    reason: str = "Pending",
    message: str = NONE_FIT,
    status: str = "False",
    required: str | None = HOST,
    admitted: bool = False,
    active: bool = True,
) -> dict[str, Any]:
    pod_set: dict[str, Any] = {"name": "main", "count": 1, "template": {"spec": {}}}
    if required is not None:
        pod_set["topologyRequest"] = {"required": required}
    conditions = [{"type": "QuotaReserved", "status": status, "reason": reason, "message": message}]
    if admitted:
        conditions.append({"type": "Admitted", "status": "True", "reason": "Admitted"})
    return {
        "metadata": {"name": "job-train-1", "namespace": "team-a"},
        "spec": {"queueName": "training", "podSets": [pod_set], "active": active},
        "status": {"conditions": conditions},
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(workload(), TopologyWait(HOST, NONE_FIT), id="no-node-fits-required-host"),
        pytest.param(
            workload(message=SOME_FIT, required="gpuaas.dev/rack"),
            TopologyWait("gpuaas.dev/rack", SOME_FIT),
            id="some-pods-fit-one-rack",
        ),
        pytest.param(
            workload(reason=TOPOLOGY_PLACEMENT_FAILED, message="anything", required=None),
            TopologyWait("", "anything"),
            id="granular-reason-without-a-level",
        ),
        pytest.param(
            workload(message=NONE_FIT + ". Pending the preemption of 1 workload(s)"),
            TopologyWait(HOST, NONE_FIT + ". Pending the preemption of 1 workload(s)"),
            id="while-preempting",
        ),
        pytest.param(workload(message=QUOTA), None, id="short-of-quota"),
        pytest.param(workload(reason="Inadmissible", message=QUOTA), None, id="inadmissible"),
        pytest.param(workload(status="True", admitted=True), None, id="admitted"),
        pytest.param(workload(active=False), None, id="deactivated"),
        pytest.param(workload(message=""), None, id="no-message-yet"),
    ],
)
def test_a_workload_waits_for_topology_only_in_kueues_tas_words(
    obj: dict[str, Any], expected: TopologyWait | None
) -> None:
    assert topology_wait(read_workload(obj)) == expected


def test_one_node_is_the_hostname_level() -> None:
    assert TopologyWait(HOST, "").one_node
    assert not TopologyWait("gpuaas.dev/rack", "").one_node
    assert not TopologyWait("", "").one_node


def test_the_first_pod_set_with_a_required_level_names_it() -> None:
    obj = workload(required=None)
    obj["spec"]["podSets"].append(
        {"name": "workers", "count": 2, "topologyRequest": {"required": "gpuaas.dev/rack"}}
    )
    assert read_workload(obj).required_topology == "gpuaas.dev/rack"
    obj["spec"]["podSets"][1]["topologyRequest"] = {"required": 7}
    assert read_workload(obj).required_topology == ""

"""A Workload that Kueue's Topology Aware Scheduling holds back, as the queue answer words it
(queue/workloads.py ``topology_words``, the item's ``waiting_for``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.queue.workloads import queue_payload, topology_words
from jupyter_gpuaas.core.kueue import TopologyWait, read_workload
from tests.support.queue_samples import CQS, LQS, NOW, QUEUE, job_workload

NO_ROOM = (
    "couldn't assign flavors to pod set main: topology \"gpu-racks\" doesn't allow to fit any"
    " of 1 pod(s)"
)


@pytest.mark.parametrize(
    ("wait", "words"),
    [
        pytest.param(None, None, id="not-waiting-for-topology"),
        pytest.param(
            TopologyWait("kubernetes.io/hostname", NO_ROOM),
            "waiting for a whole node",
            id="one-node",
        ),
        pytest.param(
            TopologyWait("cloud.provider.com/topology-rack", NO_ROOM),
            "waiting for room in one rack",
            id="cloud-rack-label",
        ),
        pytest.param(
            TopologyWait("gpuaas.dev/rack", NO_ROOM), "waiting for room in one rack", id="our-rack"
        ),
        pytest.param(TopologyWait("", NO_ROOM), "waiting for free GPUs on the nodes", id="any"),
    ],
)
def test_topology_words(wait: TopologyWait | None, words: str | None) -> None:
    assert topology_words(wait) == words


def _whole_node_job(message: str) -> dict[str, Any]:
    wl = job_workload(
        "big",
        "alice",
        gpus="8",
        conditions=[
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message}
        ],
    )
    wl["spec"]["podSets"][0]["topologyRequest"] = {"required": "kubernetes.io/hostname"}
    return wl


@pytest.mark.parametrize(
    ("message", "waiting_for"),
    [
        pytest.param(NO_ROOM, "waiting for a whole node", id="no-node-has-room"),
        pytest.param(
            "couldn't assign flavors to pod set main: insufficient unused quota for"
            " nvidia.com/gpu in flavor h200, 4 more needed",
            None,
            id="short-of-quota",
        ),
    ],
)
def test_the_queue_item_says_what_it_waits_for(message: str, waiting_for: str | None) -> None:
    out = queue_payload(
        "alice",
        workloads=[read_workload(_whole_node_job(message))],
        notebook_pods={},
        pending={("team-a", "training"): QUEUE},
        local_queues=LQS,
        cluster_queues=CQS,
        now=NOW,
    )
    (item,) = out["items"]
    assert item["waiting_for"] == waiting_for
    assert item["reason"] == message  # Kueue's own words stay for operators

"""The per-user queue index: rebuilt from the watch caches only when they change; one
visibility poller per LocalQueue with pending work."""

from __future__ import annotations

from typing import Any

from gpuaas_service.queue.index import QueueIndex
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    PendingWorkloadInfo,
)
from tests.support.queue_samples import (
    ADMITTED,
    CQS,
    LQS,
    NOW,
    QUEUE,
    THREE_AND_BOB,
    job_workload,
)


class FakeView:
    """Our own KueueView collaborator, in memory."""

    def __init__(self, workloads: dict[str, list[dict[str, Any]]]) -> None:
        self._workloads = workloads
        self.generation = 0
        self.pending: dict[tuple[str, str], list[PendingWorkloadInfo]] = {}
        self.tracked: list[tuple[str, str]] = []
        self.released: list[tuple[str, str]] = []

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return self._workloads.get(namespace, [])

    def pending_items(self, ns: str, lq: str) -> list[PendingWorkloadInfo] | None:
        return self.pending.get((ns, lq))

    def queue_state(self) -> QueueState:
        return QueueState(cluster_queues=CQS, cohorts={}, local_queues=LQS, synced=True)

    def track_local_queue(self, ns: str, lq: str) -> Any:
        self.tracked.append((ns, lq))
        return lambda: self.released.append((ns, lq))


def test_index_rebuilds_on_change_only_and_tracks_queues() -> None:
    view = FakeView({"team-a": THREE_AND_BOB})
    view.pending[("team-a", "training")] = QUEUE
    index = QueueIndex(
        view, notebook_namespace="jupyter-users", namespaces=["team-a"], clock=lambda: NOW
    )
    for _ in range(50):
        out = index.answer("alice")
    assert [i["position_in_local_queue"] for i in out["items"]] == [1, 2, 3]
    assert index.rebuilds == 1
    assert view.tracked == [("team-a", "training")]  # one poller, however many callers
    view._workloads["team-a"] = [job_workload("a1", "alice", conditions=ADMITTED)]
    view.generation += 1
    assert index.answer("alice")["items"] == []
    assert index.rebuilds == 2
    assert view.released == [("team-a", "training")]

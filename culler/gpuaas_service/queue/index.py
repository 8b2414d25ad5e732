"""The per-user answers of ``GET api/queue``: who waits for what, from the watch caches.

:class:`QueueIndex` derives each user's pending Workloads from the Kueue caches
(:class:`jupyter_gpuaas.hub.kueue_watch.WatchedKueueView`) and the notebook pods' watch, and
rebuilds only when either changed, so a request costs no Kubernetes round trip and no rebuild. It
also keeps one visibility poller per LocalQueue with pending work (shared by every caller).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Protocol

from gpuaas_service.queue.workloads import (
    NO_NAMES,
    DisplayNames,
    NotebookPod,
    queue_payload,
    read_notebook_pod,
    user_of,
)
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.gpu_equivalents import RESOURCE_GPU_EQUIVALENTS
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import PendingWorkloadInfo, WorkloadInfo, read_workload

__all__ = ["QueueIndex", "QueueView"]


class QueueView(Protocol):
    """Kueue as the queue answers read it (a watch cache: ``jupyter_gpuaas.hub.kueue_watch``)."""

    @property
    def generation(self) -> int:
        """Bumped on every change the caches see."""

    def queue_state(self) -> QueueState: ...

    def workloads(self, namespace: str) -> Sequence[Mapping[str, Any]]: ...

    def pending_items(self, namespace: str, local_queue: str) -> list[PendingWorkloadInfo] | None:
        """The visibility API's last answer for that LocalQueue (``None``: not polled yet)."""

    def track_local_queue(self, namespace: str, local_queue: str) -> Callable[[], None]:
        """Poll this LocalQueue's positions; call the result to stop."""


class QueueIndex:
    """Per-user view of the pending work, rebuilt from the caches only when they change."""

    def __init__(
        self,
        view: QueueView,
        *,
        notebook_namespace: str,
        namespaces: Sequence[str],
        pods: Callable[[], Mapping[str, Mapping[str, Any]]] = dict,
        weights: Mapping[str, Fraction] = RESOURCE_GPU_EQUIVALENTS,
        pods_ttl: float = 1.0,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        names: DisplayNames = NO_NAMES,
    ) -> None:
        self.view = view
        self.names = names
        self.notebook_namespace = notebook_namespace
        self.namespaces = list(dict.fromkeys([notebook_namespace, *namespaces]))
        self._pods_source = pods
        self.weights = weights
        self.pods_ttl = pods_ttl
        self.clock = clock
        self._generation = -1
        self._pods: dict[str, NotebookPod] = {}
        self._pods_at = float("-inf")
        self._pod_keys: frozenset[str] = frozenset()
        self._summaries: list[WorkloadInfo] = []
        self._by_user: dict[str, list[WorkloadInfo]] = {}
        self._tracked: dict[tuple[str, str], Callable[[], None]] = {}
        self.rebuilds = 0

    def _refresh(self) -> None:
        now = time.monotonic()
        pods_changed = False
        if now - self._pods_at >= self.pods_ttl:
            self._pods_at = now
            raw = self._pods_source()
            keys = frozenset(raw)
            if keys != self._pod_keys:
                self._pod_keys = keys
                self._pods = {p.uid: p for p in map(read_notebook_pod, raw.values()) if p.uid}
                pods_changed = True
        generation = self.view.generation
        if generation != self._generation:
            self._generation = generation
            self._summaries = [
                read_workload(o) for ns in self.namespaces for o in self.view.workloads(ns)
            ]
        elif not pods_changed:
            return
        by_user: dict[str, list[WorkloadInfo]] = {}
        for wl in self._summaries:
            if wl.pending:
                user = user_of(wl, self._pods)
                if user:
                    by_user.setdefault(user, []).append(wl)
        self._by_user = by_user
        self.rebuilds += 1
        self._track_pending_queues()

    def _track_pending_queues(self) -> None:
        """One visibility poller per LocalQueue with pending work (shared by all callers)."""
        state = self.view.queue_state()
        wanted = {(w.namespace, w.queue_name) for w in self._summaries if w.pending}
        wanted |= {k for k, lq in state.local_queues.items() if lq.pending_workloads > 0}
        for key in wanted - set(self._tracked):
            self._tracked[key] = self.view.track_local_queue(*key)
        for key in set(self._tracked) - wanted:
            self._tracked.pop(key)()

    def tick(self) -> None:
        """Keep pollers in step with the caches even when nobody asks."""
        self._refresh()

    @property
    def polled_queues(self) -> list[str]:
        return sorted(f"{ns}/{name}" for ns, name in self._tracked)

    def answer(self, user: str, groups: Sequence[str] = ()) -> api.Queue:
        self._refresh()
        state = self.view.queue_state()
        mine = self._by_user.get(user, [])
        pending: dict[tuple[str, str], list[PendingWorkloadInfo] | None] = {
            (w.namespace, w.queue_name): self.view.pending_items(w.namespace, w.queue_name)
            for w in mine
        }
        payload = queue_payload(
            user,
            workloads=mine,
            notebook_pods=self._pods,
            pending=pending,
            local_queues=state.local_queues,
            cluster_queues=state.cluster_queues,
            now=self.clock(),
            teams=groups,
            synced=state.synced,
            weights=self.weights,
            names=self.names,
        )
        if not state.synced:
            payload["error"] = (
                "Kueue cannot be read right now (the gpuaas service has not synced its caches); "
                "retrying."
            )
            payload["error_kind"] = "kueue_unreachable"
        return payload

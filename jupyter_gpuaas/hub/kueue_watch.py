"""Reads of Kueue objects for the hub side, served from memory: the list+watch cache shared by
the spawner (in the hub process) and the gpuaas service, which do Kubernetes I/O; the pure
readers it parses objects with live in :mod:`jupyter_gpuaas.core.kueue`.

:class:`KueueView` is what the spawner needs; every method but :meth:`KueueView.start` answers
from memory, so rendering the form or a progress step never waits on the API server.
:class:`WatchedKueueView` keeps that memory current with list+watch of ClusterQueues, Cohorts,
LocalQueues and Workloads (``kubernetes_asyncio``, as KubeSpawner's reflectors), and polls Kueue's
visibility API only for the LocalQueues that have a spawn waiting in them (that API cannot be
watched). :class:`StaticKueueView` serves fixed objects (tests, benchmarks, demos).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, Protocol

from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    PendingWorkloadInfo,
    WorkloadInfo,
    pending_item_for_workload,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
    read_pending_workloads,
    read_workload,
    workload_for_pod,
)

__all__ = ["KueueReader", "KueueView", "StaticKueueView", "WatchedKueueView"]

GROUP = "kueue.x-k8s.io"
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


class KueueView(Protocol):
    """Kueue as the spawner sees it. Nothing here blocks but :meth:`start`."""

    async def start(self, timeout: float = 10.0) -> None:
        """Begin watching (idempotent); returns once the first lists are in, or after timeout."""

    def queue_state(self) -> QueueState:
        """ClusterQueues, Cohorts, LocalQueues now (``synced`` False until all listed once)."""

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        """The Workload Kueue made for a plain pod, if seen yet (also once deleted: the reason
        a preempted server stopped is still owed to its user)."""

    def has_workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> bool:
        """Whether Kueue holds a Workload for this pod now (not one remembered after its
        deletion)."""

    def pending_workload(
        self, namespace: str, local_queue: str, *, workload_name: str, pod_uid: str
    ) -> PendingWorkloadInfo | None:
        """Its entry in the visibility API's last answer for that LocalQueue, if any."""

    def track_local_queue(self, namespace: str, local_queue: str) -> Callable[[], None]:
        """Keep positions of this LocalQueue fresh while a spawn waits; call the result to stop."""


class KueueReader(Protocol):
    """Kueue as the gpuaas service's reclaim loop reads it (a :class:`WatchedKueueView`): the
    queue state and the Workloads themselves, all from memory."""

    def queue_state(self) -> QueueState: ...

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]: ...

    def workload_for_pod(
        self, namespace: str, pod_uid: str, pod_name: str
    ) -> WorkloadInfo | None: ...

    def pending_items(
        self, namespace: str, local_queue: str
    ) -> list[PendingWorkloadInfo] | None: ...


class StaticKueueView:
    """A :class:`KueueView` over fixed objects (plain API dicts)."""

    def __init__(
        self,
        *,
        cluster_queues: Iterable[Mapping[str, Any]] = (),
        cohorts: Iterable[Mapping[str, Any]] = (),
        local_queues: Iterable[Mapping[str, Any]] = (),
        workloads: Iterable[Mapping[str, Any]] = (),
        pending: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
        synced: bool = True,
    ) -> None:
        cqs = [read_cluster_queue(o) for o in cluster_queues]
        lqs = [read_local_queue(o) for o in local_queues]
        self._state = QueueState(
            cluster_queues={c.name: c for c in cqs},
            cohorts={c.name: c for c in map(read_cohort, cohorts)},
            local_queues={(q.namespace, q.name): q for q in lqs},
            synced=synced,
        )
        self._workloads = [read_workload(o) for o in workloads]
        self._pending = {k: read_pending_workloads(v) for k, v in (pending or {}).items()}
        self.tracked: dict[tuple[str, str], int] = {}

    async def start(self, timeout: float = 10.0) -> None:
        return None

    def queue_state(self) -> QueueState:
        return self._state

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        mine = [w for w in self._workloads if w.namespace == namespace]
        return workload_for_pod(mine, pod_uid=pod_uid, pod_name=pod_name)

    def has_workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> bool:
        return self.workload_for_pod(namespace, pod_uid, pod_name) is not None

    def pending_workload(
        self, namespace: str, local_queue: str, *, workload_name: str, pod_uid: str
    ) -> PendingWorkloadInfo | None:
        items = self._pending.get((namespace, local_queue), [])
        return pending_item_for_workload(items, workload_name=workload_name, pod_uid=pod_uid)

    def track_local_queue(self, namespace: str, local_queue: str) -> Callable[[], None]:
        key = (namespace, local_queue)
        self.tracked[key] = self.tracked.get(key, 0) + 1

        def release() -> None:
            self.tracked[key] -= 1

        return release


def _retryable() -> tuple[type[BaseException], ...]:
    from aiohttp import ClientError
    from kubernetes_asyncio.client.rest import ApiException

    # asyncio.TimeoutError: a request past its _request_timeout; before Python 3.11 it is not
    # the builtin TimeoutError (an OSError, as a socket's timeout is)
    return (
        ApiException,
        ClientError,
        OSError,
        asyncio.TimeoutError,
        ValueError,
        KeyError,
        TypeError,
    )


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class WatchedKueueView:
    """List+watch caches of Kueue objects (one per hub process; see :meth:`shared`)."""

    _instances: ClassVar[dict[tuple[Any, ...], WatchedKueueView]] = {}

    def __init__(
        self,
        *,
        namespaces: Iterable[str],
        custom_objects_api: Callable[[], Any],
        api_version: str = "v1beta2",
        visibility_version: str = "v1beta2",
        poll_interval: float = 3.0,
        request_timeout: float = 10.0,
        log: logging.Logger | None = None,
        remember_workloads: int = 10000,
    ) -> None:
        self.remember_workloads = remember_workloads
        # Called at start: the caller's kubernetes_asyncio CustomObjectsApi (the hub side passes
        # KubeSpawner's shared client), so that this module loads no configuration of its own.
        self._make_api = custom_objects_api
        self.namespaces = sorted(set(namespaces))
        self.api_version = api_version
        self.visibility_version = visibility_version
        self.poll_interval = poll_interval
        self.request_timeout = request_timeout
        self.log = log or logging.getLogger(__name__)
        self._stores: dict[str, dict[tuple[str, str], Mapping[str, Any]]] = {}
        self._synced: set[str] = set()
        self._expected = {
            "clusterqueues",
            "cohorts",
            *(f"localqueues/{n}" for n in self.namespaces),
            # the Workloads carry the demand a reclaim is for: stale ones are no demand
            *(f"workloads/{n}" for n in self.namespaces),
        }
        self._state: QueueState | None = None
        self._parsed: dict[str, dict[tuple[str, str], Any]] = {"clusterqueues": {}, "cohorts": {}}
        self._workloads_by_owner: dict[str, WorkloadInfo] = {}
        self._pending: dict[tuple[str, str], list[PendingWorkloadInfo]] = {}
        self._tracked: dict[tuple[str, str], int] = {}
        self._pollers: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._first_sync = asyncio.Event()
        self._started = False
        self._api: Any = None
        self.visibility_page_size = 500
        self.resync_period = 300.0
        """Seconds a watch runs before the API server ends it and it lists again; a watch with
        no event, bookmark or list for 2x this (plus the request timeout) is presumed dead,
        and the view reports itself unsynced until it lists again."""
        self._heard: dict[str, float] = {}
        self.clock: Callable[[], float] = time.monotonic
        self.generation = 0
        """Bumped on every change seen (a watched object, a visibility answer): readers that
        derive something from the view (the gpuaas service's per-user index) rebuild on change."""

    @classmethod
    def shared(cls, **kwargs: Any) -> WatchedKueueView:
        """One view per configuration and event loop, shared by all spawners of the hub."""
        loop = asyncio.get_running_loop()
        key = (
            id(loop),
            tuple(
                sorted(
                    (k, str(v)) for k, v in kwargs.items() if k not in ("log", "custom_objects_api")
                )
            ),
        )
        view = cls._instances.get(key)
        if view is None:
            view = cls._instances[key] = cls(**kwargs)
        return view

    # ------------------------------------------------------------------ reads (memory only)

    def queue_state(self) -> QueueState:
        """A snapshot, rebuilt only after a change; objects are parsed once per change."""
        if self._state is None:
            self._state = QueueState(
                cluster_queues={k[1]: v for k, v in self._parsed["clusterqueues"].items()},
                cohorts={k[1]: v for k, v in self._parsed["cohorts"].items()},
                local_queues={
                    k: q
                    for ns in self.namespaces
                    for k, q in self._parsed.get(f"localqueues/{ns}", {}).items()
                },
                synced=self._expected <= self._synced,
            )
        if self._state.synced and self._stale():
            # A dead connection sends nothing: act on nothing rather than on old demand.
            return dataclasses.replace(self._state, synced=False)
        return self._state

    def _stale(self) -> bool:
        limit = 2 * self.resync_period + self.request_timeout
        now = self.clock()
        return any(now - self._heard.get(name, now) > limit for name in self._expected)

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        found = self._workloads_by_owner.get(pod_uid)
        if found is not None:
            return found
        return self._live_workload_for_pod(namespace, pod_uid, pod_name)

    def has_workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> bool:
        return self._live_workload_for_pod(namespace, pod_uid, pod_name) is not None

    def _live_workload_for_pod(
        self, namespace: str, pod_uid: str, pod_name: str
    ) -> WorkloadInfo | None:
        store = self._stores.get(f"workloads/{namespace}", {})
        return workload_for_pod(
            (read_workload(o) for o in store.values()), pod_uid=pod_uid, pod_name=pod_name
        )

    def pending_workload(
        self, namespace: str, local_queue: str, *, workload_name: str, pod_uid: str
    ) -> PendingWorkloadInfo | None:
        items = self._pending.get((namespace, local_queue), [])
        return pending_item_for_workload(items, workload_name=workload_name, pod_uid=pod_uid)

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        """The Workloads of a watched namespace as last seen (API dicts; do not modify)."""
        return list(self._stores.get(f"workloads/{namespace}", {}).values())

    def pending_items(self, namespace: str, local_queue: str) -> list[PendingWorkloadInfo] | None:
        """The last visibility answer for a tracked LocalQueue (``None`` before the first)."""
        return self._pending.get((namespace, local_queue))

    def track_local_queue(self, namespace: str, local_queue: str) -> Callable[[], None]:
        key = (namespace, local_queue)
        self._tracked[key] = self._tracked.get(key, 0) + 1
        if key not in self._pollers or self._pollers[key].done():
            self._pollers[key] = asyncio.ensure_future(self._poll_visibility(*key))
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self._tracked[key] -= 1
            if self._tracked[key] <= 0:
                self._tracked.pop(key, None)
                task = self._pollers.pop(key, None)
                if task is not None:
                    task.cancel()
                self._pending.pop(key, None)

        return release

    # ------------------------------------------------------------------ I/O

    async def start(self, timeout: float = 10.0) -> None:
        if not self._started:
            self._started = True
            from kubernetes_asyncio import client

            self._api = self._make_api()
            self._client = client
            watches: list[tuple[str, str | None]] = [("clusterqueues", None), ("cohorts", None)]
            for ns in self.namespaces:
                watches += [("localqueues", ns), ("workloads", ns)]
            for plural, where in watches:
                self._tasks.append(asyncio.ensure_future(self._watch(plural, where)))
        try:
            await asyncio.wait_for(asyncio.shield(self._first_sync.wait()), timeout)
        except asyncio.TimeoutError:
            self.log.warning("gpuaas: Kueue caches not synced after %ss; headroom unknown", timeout)

    def _store_name(self, plural: str, namespace: str | None) -> str:
        return f"{plural}/{namespace}" if namespace else plural

    def _changed(
        self, name: str, obj: Mapping[str, Any] | None = None, deleted: bool = False
    ) -> None:
        """Keep the parsed form of one changed object; ``obj`` None: the store was relisted."""
        self.generation += 1
        if name.startswith("workloads/"):
            if obj is not None:
                info = read_workload(obj)
                if info.owner_uid:
                    # Deleted workloads are remembered (bounded): a preempted server's pod and
                    # Workload vanish quickly, and the user is still owed the reason.
                    self._workloads_by_owner.pop(info.owner_uid, None)
                    self._workloads_by_owner[info.owner_uid] = info
                    while len(self._workloads_by_owner) > self.remember_workloads:
                        del self._workloads_by_owner[next(iter(self._workloads_by_owner))]
            return
        reader: Callable[[Mapping[str, Any]], Any]
        if name == "clusterqueues":
            reader = read_cluster_queue
        elif name == "cohorts":
            reader = read_cohort
        else:
            reader = read_local_queue
        parsed = self._parsed.setdefault(name, {})
        if obj is None:
            parsed.clear()
            parsed.update({k: reader(o) for k, o in self._stores.get(name, {}).items()})
        elif deleted:
            parsed.pop(_key(obj), None)
        else:
            parsed[_key(obj)] = reader(obj)
        self._state = None

    async def _watch(self, plural: str, namespace: str | None) -> None:
        """List, then follow the changes, for as long as the watcher runs; list again after
        an error or a watch that ends (a 410 Gone), backing off after a failure."""
        name = self._store_name(plural, namespace)
        retryable = _retryable()
        backoff = 1.0
        while True:
            try:
                version = await self._list(name, plural, namespace)
                await self._follow(name, plural, namespace, version)
                backoff = 1.0
            except asyncio.CancelledError:
                raise
            except retryable as e:  # the watch must survive API hiccups; logged, retried
                self.log.warning(
                    "gpuaas: watch of %s failed (%s); retrying in %.0fs", name, e, backoff
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)

    def _lister(self, plural: str, namespace: str | None) -> tuple[Any, tuple[Any, ...]]:
        """The client's list function for ``plural`` (in ``namespace``, else cluster-wide) and
        its positional arguments."""
        if namespace:
            return (
                self._api.list_namespaced_custom_object,
                (GROUP, self.api_version, namespace, plural),
            )
        return self._api.list_cluster_custom_object, (GROUP, self.api_version, plural)

    async def _list(self, name: str, plural: str, namespace: str | None) -> str | None:
        """Fill the store ``name`` from a list; its resourceVersion, to watch from."""
        func, args = self._lister(plural, namespace)
        listing = await func(*args, _request_timeout=self.request_timeout)
        items = {_key(o): o for o in listing.get("items") or []}
        self._stores[name] = items
        if plural == "workloads":
            for obj in items.values():
                self._changed(name, obj)
        self._synced.add(name)
        self._heard[name] = self.clock()
        self._changed(name)
        if self._expected <= self._synced:
            self._first_sync.set()
        version: str | None = (listing.get("metadata") or {}).get("resourceVersion")
        return version

    async def _follow(
        self, name: str, plural: str, namespace: str | None, version: str | None
    ) -> None:
        """Apply the watch's events to the store ``name`` until the watch ends."""
        from kubernetes_asyncio import watch

        func, args = self._lister(plural, namespace)
        async with watch.Watch().stream(
            func,
            *args,
            resource_version=version,
            timeout_seconds=int(self.resync_period),
            allow_watch_bookmarks=True,
            # client side too: a connection that went silent is given up, not awaited
            _request_timeout=self.resync_period + self.request_timeout,
        ) as stream:
            async for event in stream:
                self._heard[name] = self.clock()
                kind, obj = event.get("type"), event.get("raw_object") or {}
                if kind in ("ADDED", "MODIFIED"):
                    self._stores[name][_key(obj)] = obj
                    self._changed(name, obj)
                elif kind == "DELETED":
                    self._stores[name].pop(_key(obj), None)
                    self._changed(name, obj, deleted=True)
                elif kind == "ERROR":
                    return  # e.g. 410 Gone: list again

    async def _poll_visibility(self, namespace: str, local_queue: str) -> None:
        retryable = _retryable()
        path = (
            f"/apis/{VISIBILITY_GROUP}/{self.visibility_version}/namespaces/{{namespace}}"
            "/localqueues/{name}/pendingworkloads"
        )
        while True:
            try:
                # Paged (limit/offset): a long queue costs a few requests per interval, shared
                # by every reader of this LocalQueue.
                items: list[PendingWorkloadInfo] = []
                while True:
                    data = await self._api.api_client.call_api(
                        path,
                        "GET",
                        path_params={"namespace": namespace, "name": local_queue},
                        query_params=[
                            ("limit", self.visibility_page_size),
                            ("offset", len(items)),
                        ],
                        response_types_map={200: "object"},
                        auth_settings=["BearerToken"],
                        _return_http_data_only=True,
                        _request_timeout=self.request_timeout,
                    )
                    page = read_pending_workloads(data or {})
                    if items and page[: len(items)] == items[: len(page)]:
                        break  # the server ignores offset: the first page again, not the next
                    items += page
                    if len(page) < self.visibility_page_size:
                        break
                if items != self._pending.get((namespace, local_queue)):
                    self.generation += 1
                self._pending[(namespace, local_queue)] = items
            except asyncio.CancelledError:
                raise
            except retryable as e:  # positions are a nicety; keep the last answer and retry
                self.log.debug(
                    "gpuaas: visibility poll of %s/%s failed: %s", namespace, local_queue, e
                )
            await asyncio.sleep(self.poll_interval)

    async def stop(self) -> None:
        tasks = self._tasks + list(self._pollers.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks, self._pollers, self._started = [], {}, False

"""The gpuaas hub service: the hub side's one door for single-user servers (docs/queue.md).

Run by JupyterHub as the managed service ``gpuaas`` (``gpuaas-service``). It answers

- ``GET {prefix}api/queue`` — the calling user's pending GPU work with Kueue queue positions and
  per-team counts, for the sidebar (through the server extension, with the server's own token,
  scope ``access:services!service=gpuaas``);
- ``GET {prefix}api/health`` — whether its caches are synced, and how many Kubernetes requests
  it has made (they grow with time and queues, never with requests).

Everything is served from memory: Kueue objects through :class:`jupyter_gpuaas.core.watch.
WatchedKueueView` (list+watch, plus one shared, paged visibility poller per LocalQueue that has
pending work), notebook pods through KubeSpawner's reflector. A request costs no Kubernetes round
trip; callers are identified by the hub (``HubAuth``, cached for ``cache_max_age``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any
from urllib.parse import urlparse

from tornado import web

from gpuaas_culler.queue.workloads import NotebookPod, queue_payload, read_notebook_pod, user_of
from gpuaas_culler.web.base import HubJSONHandler, JSONHandler
from gpuaas_culler.web.reclaim import add_culler_arguments, start_culler
from jupyter_gpuaas.core.gpu_equivalents import RESOURCE_GPU_EQUIVALENTS
from jupyter_gpuaas.core.kueue import PendingWorkloadInfo, WorkloadInfo, read_workload

__all__ = ["QueueIndex", "main", "make_app"]

log = logging.getLogger("gpuaas.service")


class QueueIndex:
    """Per-user view of the pending work, rebuilt from the caches only when they change."""

    def __init__(
        self,
        view: Any,
        *,
        notebook_namespace: str,
        namespaces: Sequence[str],
        pods: Callable[[], Mapping[str, Mapping[str, Any]]] = dict,
        weights: Mapping[str, Fraction] = RESOURCE_GPU_EQUIVALENTS,
        pods_ttl: float = 1.0,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.view = view
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

    def answer(self, user: str, groups: Sequence[str] = ()) -> dict[str, Any]:
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
        )
        if not state.synced:
            payload["error"] = (
                "Kueue cannot be read right now (the gpuaas service has not synced its caches); "
                "retrying."
            )
            payload["error_kind"] = "kueue_unreachable"
        return payload


class QueueHandler(HubJSONHandler):
    """``GET api/queue``: the caller's own pending GPU work (never anybody else's)."""

    def get(self) -> None:
        user = self.current_user
        if not user or user.get("kind", "user") != "user":
            raise web.HTTPError(
                403, "a user's token with the scope access:services!service=gpuaas is needed"
            )
        index: QueueIndex = self.settings["queue_index"]
        self.settings["stats"]["requests"] += 1
        self.finish(json.dumps(index.answer(user["name"], user.get("groups") or ())))


class HealthHandler(JSONHandler):
    def get(self) -> None:
        index: QueueIndex = self.settings["queue_index"]
        stats = self.settings["stats"]
        self.finish(
            json.dumps(
                {
                    "synced": index.view.queue_state().synced,
                    "polled_queues": index.polled_queues,
                    "requests_served": stats["requests"],
                    "kubernetes_requests": stats["kubernetes_requests"](),
                    "index_rebuilds": index.rebuilds,
                }
            )
        )


def make_app(
    index: QueueIndex,
    *,
    prefix: str = "/services/gpuaas/",
    hub_auth: Any = None,
    kubernetes_requests: Callable[[], int] = lambda: 0,
) -> web.Application:
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    settings: dict[str, Any] = {
        "queue_index": index,
        "stats": {"requests": 0, "kubernetes_requests": kubernetes_requests},
    }
    if hub_auth is not None:
        settings["hub_auth"] = hub_auth
    app = web.Application(
        [
            (prefix + "api/queue", QueueHandler),
            (prefix + "api/health", HealthHandler),
        ],
        **settings,
    )
    if hub_auth is not None:
        QueueHandler.hub_auth = hub_auth
    return app


def _count_kubernetes_requests() -> Callable[[], int]:
    """Count every request this process makes to the Kubernetes API (for ``api/health``)."""
    from kubernetes_asyncio.client import rest

    counter = {"n": 0}
    original = rest.RESTClientObject.request
    if getattr(original, "_gpuaas_counted", False):
        return lambda: int(getattr(original, "_gpuaas_count", lambda: 0)())

    async def request(self: Any, *args: Any, **kwargs: Any) -> Any:
        counter["n"] += 1
        return await original(self, *args, **kwargs)

    request._gpuaas_counted = True  # type: ignore[attr-defined]
    request._gpuaas_count = lambda: counter["n"]  # type: ignore[attr-defined]
    rest.RESTClientObject.request = request  # type: ignore[method-assign]
    return lambda: counter["n"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpuaas-service",
        description=(
            "The gpuaas JupyterHub service: each user's pending GPU work and its Kueue queue "
            "positions, from watch caches. Run by the hub as the managed service 'gpuaas' "
            "(docs/queue.md); Kubernetes credentials from KUBECONFIG or the pod's account."
        ),
    )
    env = os.environ.get
    p.add_argument(
        "--url",
        default=env("JUPYTERHUB_SERVICE_URL", "http://127.0.0.1:10101"),
        help="where to listen (default: $JUPYTERHUB_SERVICE_URL, set by the hub)",
    )
    p.add_argument(
        "--prefix",
        default=env("JUPYTERHUB_SERVICE_PREFIX", "/services/gpuaas/"),
        help="URL prefix (default: $JUPYTERHUB_SERVICE_PREFIX)",
    )
    p.add_argument(
        "--notebook-namespace",
        default=env("GPUAAS_NOTEBOOK_NAMESPACE", "jupyter-users"),
        help="namespace of the users' servers (KubeSpawner's namespace); default jupyter-users",
    )
    p.add_argument(
        "--job-namespaces",
        default=env("GPUAAS_JOB_NAMESPACES", "team-a,team-b"),
        help="comma-separated namespaces whose labelled Jobs are shown; default team-a,team-b",
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        default=float(env("GPUAAS_QUEUE_POLL_INTERVAL", "2")),
        help="seconds between visibility API polls of a LocalQueue with pending work; default 2",
    )
    p.add_argument("--log-level", default="INFO")
    add_culler_arguments(p)
    return p


def notebook_pod_reflector(namespace: str) -> Any:
    """A list+watch cache of the single-user server pods in ``namespace`` (kubespawner's
    reflector; start it with ``await reflector.start()``): the queue index and the culler read
    it instead of listing pods."""
    from kubespawner.reflector import NamespacedResourceReflector

    class NotebookPodReflector(NamespacedResourceReflector):  # type: ignore[misc]
        kind = "pods"
        labels = {"component": "singleuser-server"}  # noqa: RUF012 (a traitlet default)

    return NotebookPodReflector(namespace=namespace)


async def serve(args: argparse.Namespace) -> None:
    from jupyterhub.services.auth import HubAuth
    from kubespawner.clients import load_config, shared_client

    from jupyter_gpuaas.core.watch import WatchedKueueView

    counted = _count_kubernetes_requests()
    load_config()
    job_namespaces = [n.strip() for n in args.job_namespaces.split(",") if n.strip()]
    view = WatchedKueueView(
        namespaces=[args.notebook_namespace, *job_namespaces],
        custom_objects_api=lambda: shared_client("CustomObjectsApi"),
        poll_interval=args.poll_interval,
        log=log,
    )

    pods = notebook_pod_reflector(args.notebook_namespace)
    await view.start(timeout=30)
    await pods.start()
    index = QueueIndex(
        view,
        notebook_namespace=args.notebook_namespace,
        namespaces=job_namespaces,
        pods=lambda: pods.resources,
    )
    hub_auth = HubAuth()
    app = make_app(index, prefix=args.prefix, hub_auth=hub_auth, kubernetes_requests=counted)
    start_culler(app, args, view, hub_auth, pods)
    url = urlparse(args.url)
    app.listen(url.port or 80, url.hostname or "127.0.0.1")
    log.info("gpuaas service listening on %s%s", args.url.rstrip("/"), args.prefix)
    while True:
        index.tick()
        await asyncio.sleep(max(0.5, args.poll_interval / 2))


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:  # the hub stops its managed services with SIGINT
        log.info("gpuaas service stopped")


if __name__ == "__main__":
    main()

"""Kubernetes as the gpuaas service's culler uses it: notebook pods, their annotations and
Events, the ResourceFlavors, one ConfigMap of state (``kubernetes_asyncio``, the service's own
ServiceAccount); and the watch of the notebook pods that the queue answers and the culler read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from gpuaas_service.model.pods import PodRef
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.labels import STATE_KEY

__all__ = [
    "EVENT_SOURCE",
    "Kube",
    "KubeClient",
    "NodeWatch",
    "PodWatch",
    "node_reflector",
    "notebook_pod_reflector",
]

log = logging.getLogger(__name__)

EVENT_SOURCE = "gpuaas-culler"
"""The ``source`` of the culler's Events and the manager of its ConfigMap."""


class Kube(Protocol):
    async def list_pods(self, namespace: str) -> list[dict[str, Any]]: ...

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None: ...

    async def event(
        self, pod: PodRef, reason: str, message: str, type_: str, *, at: datetime
    ) -> None:
        """An Event on the pod, stamped ``at`` (the cycle's clock, not the wall clock)."""

    async def flavor_labels(self) -> dict[str, dict[str, str]]: ...

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]: ...

    async def read_state(self, namespace: str, name: str) -> str | None: ...

    async def write_state(self, namespace: str, name: str, text: str) -> None: ...


class PodWatch(Protocol):
    """The list+watch cache of the notebook pods (:func:`notebook_pod_reflector`)."""

    resources: dict[str, dict[str, Any]]
    """Pod name → the pod, as last seen."""
    first_load_future: asyncio.Future[Any]
    """Done once the pods have been listed."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class KubeClient:
    """Notebook pods, their annotations and Events (kubernetes_asyncio; the culler's account)."""

    def __init__(
        self, api: Any = None, *, timeout: float = 20.0, kueue_version: str = "v1beta2"
    ) -> None:
        self._api = api
        self.timeout = timeout
        self.kueue_version = kueue_version

    def _core(self) -> Any:
        from kubernetes_asyncio import client

        if self._api is None:
            from kubespawner.clients import shared_client

            return shared_client("CoreV1Api")
        return client.CoreV1Api(self._api)

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        resp = await self._core().list_namespaced_pod(
            namespace,
            label_selector="component=singleuser-server",
            _preload_content=False,
            _request_timeout=self.timeout,
        )
        items: list[dict[str, Any]] = json.loads(await resp.read())["items"]
        return items

    async def list_job_pods(self, namespaces: Sequence[str]) -> list[dict[str, Any]]:
        """Every pod of the Jobs' namespaces (one list call each): those on a shared pool's
        cards and those waiting for whole ones."""
        out: list[dict[str, Any]] = []
        for namespace in namespaces:
            resp = await self._core().list_namespaced_pod(
                namespace, _preload_content=False, _request_timeout=self.timeout
            )
            out += json.loads(await resp.read())["items"]
        return out

    async def _flavors(self) -> list[dict[str, Any]]:
        from kubernetes_asyncio import client

        if self._api is None:
            from kubespawner.clients import shared_client

            api = shared_client("CustomObjectsApi")
        else:
            api = client.CustomObjectsApi(self._api)
        listing = await api.list_cluster_custom_object(
            "kueue.x-k8s.io",
            self.kueue_version,
            "resourceflavors",
            _request_timeout=self.timeout,
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        """ResourceFlavor name → its ``nodeLabels`` (one list call)."""
        return {
            str(f["metadata"]["name"]): {
                str(k): str(v) for k, v in ((f.get("spec") or {}).get("nodeLabels") or {}).items()
            }
            for f in await self._flavors()
        }

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]:
        """ResourceFlavor name → its ``nodeTaints``: Kueue gives a flavor only to workloads
        whose pods tolerate them (HAMi's fractional pool, docs/fractions.md)."""
        return {
            str(f["metadata"]["name"]): [
                {str(k): str(v) for k, v in t.items()}
                for t in ((f.get("spec") or {}).get("nodeTaints") or [])
                if isinstance(t, dict)
            ]
            for f in await self._flavors()
        }

    async def flavor_topologies(self) -> dict[str, str]:
        """ResourceFlavor name → its ``topologyName`` ('' none): the flavors that Kueue's
        Topology Aware Scheduling places (one list call)."""
        return {
            str(f["metadata"]["name"]): str((f.get("spec") or {}).get("topologyName") or "")
            for f in await self._flavors()
        }

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        body = {"metadata": {"annotations": dict(annotations)}}
        await self._core().patch_namespaced_pod(
            pod.name, pod.namespace, body, _request_timeout=self.timeout
        )

    async def event(
        self, pod: PodRef, reason: str, message: str, type_: str, *, at: datetime
    ) -> None:
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {"name": f"{pod.name}.{uuid.uuid4().hex[:12]}", "namespace": pod.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "namespace": pod.namespace,
                "uid": pod.uid,
            },
            "reason": reason,
            "message": message[:1000],
            "type": type_,
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        await self._core().create_namespaced_event(
            pod.namespace, body, _request_timeout=self.timeout
        )

    async def read_state(self, namespace: str, name: str) -> str | None:
        """The text kept in ConfigMap ``name`` (key ``state.json``); ``None``: none yet."""
        from kubernetes_asyncio.client.rest import ApiException

        try:
            cm = await self._core().read_namespaced_config_map(
                name, namespace, _request_timeout=self.timeout
            )
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        text = (cm.data or {}).get(STATE_KEY)
        return str(text) if text is not None else None

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        from kubernetes_asyncio.client.rest import ApiException

        body = {
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": EVENT_SOURCE}},
            "data": {STATE_KEY: text},
        }
        try:
            await self._core().replace_namespaced_config_map(
                name, namespace, body, _request_timeout=self.timeout
            )
        except ApiException as e:
            if e.status != 404:
                raise
            await self._core().create_namespaced_config_map(
                namespace, body, _request_timeout=self.timeout
            )


def _slim_node(node: Mapping[str, Any]) -> dict[str, Any]:
    """What the console reads of a Node (its name, labels, HAMi's register of its cards,
    whether it is cordoned and what it can allocate): a Node object is mostly images and
    conditions, kept for nothing."""
    meta, spec, status = (node.get(k) or {} for k in ("metadata", "spec", "status"))
    notes = meta.get("annotations") or {}
    return {
        "metadata": {
            "name": meta.get("name"),
            "labels": meta.get("labels") or {},
            "annotations": {k: notes[k] for k in (hami.REGISTER,) if k in notes},
        },
        "spec": {"unschedulable": bool(spec.get("unschedulable"))},
        "status": {"allocatable": status.get("allocatable") or {}},
    }


class NodeWatch:
    """A list+watch cache of the Node objects, slimmed (:func:`_slim_node`), keyed by name:
    the console's free GPUs (``get, list, watch`` on nodes, cluster-wide). kubespawner's
    reflector keys by namespace, which a Node has not. A watch runs ``resync_seconds``, then the
    nodes are listed again; an error is retried with a growing pause (at most a minute)."""

    def __init__(self, *, resync_seconds: float = 300.0, request_timeout: float = 30.0) -> None:
        self.resources: dict[str, dict[str, Any]] = {}
        self.first_load_future: asyncio.Future[Any] = asyncio.get_event_loop().create_future()
        self.resync_seconds = max(1, round(resync_seconds))
        self.request_timeout = request_timeout
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def _core() -> Any:
        from kubespawner.clients import shared_client

        return shared_client("CoreV1Api")

    async def _list(self) -> str:
        resp = await self._core().list_node(
            _preload_content=False, _request_timeout=self.request_timeout
        )
        listing = json.loads(await resp.read())
        self.resources = {n["metadata"]["name"]: _slim_node(n) for n in listing["items"]}
        if not self.first_load_future.done():
            self.first_load_future.set_result(None)
        return str(listing["metadata"]["resourceVersion"])

    async def start(self) -> None:
        """List the nodes (an error, e.g. 403, is raised), then watch them in the background."""
        version = await self._list()
        self._task = asyncio.ensure_future(self._watch(version))

    async def _watch(self, version: str) -> None:
        from functools import partial

        from kubernetes_asyncio import watch

        pause = 1.0
        while True:
            try:
                method = partial(self._core().list_node, _preload_content=False)
                w = watch.Watch()
                async with w.stream(
                    method,
                    resource_version=version,
                    timeout_seconds=self.resync_seconds,
                    _request_timeout=self.resync_seconds + 30,
                ) as stream:
                    async for event in stream:
                        node = event["raw_object"]
                        name = node["metadata"]["name"]
                        if event["type"] == "DELETED":
                            self.resources.pop(name, None)
                        elif event["type"] in ("ADDED", "MODIFIED"):
                            self.resources[name] = _slim_node(node)
                version = await self._list()
                pause = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - a watch that fails is listed again later
                log.warning("node watch failed (%s); listing again in %.0f s", e, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 60.0)
                try:
                    version = await self._list()
                except Exception as again:  # noqa: BLE001
                    log.warning("node list failed: %s", again)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()


def node_reflector(*, resync_seconds: float = 300.0) -> NodeWatch:
    """The Node objects' watch (:class:`NodeWatch`); start it with ``await watch.start()``."""
    return NodeWatch(resync_seconds=resync_seconds)


def notebook_pod_reflector(namespace: str, *, resync_seconds: float = 300.0) -> PodWatch:
    """A list+watch cache of the single-user server pods in ``namespace`` (kubespawner's
    reflector; start it with ``await reflector.start()``): the queue index and the culler read
    it instead of listing pods.

    kubespawner's defaults suit a hub (a watch of 10 s, then a new list and watch): here they
    would list every notebook pod (5,000 in ``benchmarks/bench_console.py``: megabytes parsed
    on the service's loop) every 10 s. A watch runs ``resync_seconds`` instead, the network
    limit a little longer, and changes still arrive as they happen; a new list follows each
    watch's end and each error, as before."""
    from kubespawner.reflector import NamespacedResourceReflector

    class NotebookPodReflector(NamespacedResourceReflector):  # type: ignore[misc]
        kind = "pods"
        labels = {"component": "singleuser-server"}  # noqa: RUF012 (a traitlet default)

    watch = max(1, round(resync_seconds))
    reflector: PodWatch = NotebookPodReflector(
        namespace=namespace,
        timeout_seconds=watch,
        restart_seconds=watch,
        request_timeout=watch + 30,
    )
    return reflector

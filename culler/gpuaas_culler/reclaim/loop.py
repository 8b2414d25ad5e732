"""The reclaim loop: read the Hub, Kubernetes and the activity reports; decide; act; audit.

Each cycle (``interval`` seconds; longer, doubling up to ``max_backoff``, while the hub or
Kubernetes cannot be read — a cycle that cannot read everything acts on nothing):

1. reads the notebook pods (the service's watch of them, or one list call), the ResourceFlavors
   (one list call: it also proves the API server answers now), Kueue's objects from the watch
   caches (:class:`jupyter_gpuaas.core.watch.WatchedKueueView`), the activity store, the hub's
   groups (``GET /hub/api/groups``, paged; only when the policy names groups) and, where
   configured, each pod's GPU utilisation from Prometheus (:mod:`.prometheus`);
2. builds the inputs (:mod:`.gather`) and calls :func:`.decide.decide`; before acting it asks the
   hub about each server it would warn or stop (``GET /hub/api/users/{name}``: is it still
   active, starting or stopping, which groups), corrects those workbenches and decides again,
   until every server acted on is one the hub has confirmed. So a cycle costs hub calls for the
   servers it acts on, not for every running server; scopes ``read:servers``,
   ``read:users:groups`` (and ``list:groups``, ``read:groups`` for group policies);
3. acts, unless dry-run: **warn** — the pod is annotated ``gpuaas.jupyter.org/reclaim-warned-at``
   (so a restarted culler neither warns twice nor restarts the countdown) and gets an Event;
   **reclaim** — the server is stopped through the Hub API (``DELETE
   /hub/api/users/{u}/servers/{s}``, scope ``delete:servers``; the pod is never deleted by the
   culler), the pod is annotated ``...reclaim-stopped-at`` and gets an Event; **clear-warning**
   — the annotation is removed;
4. verifies hand-offs: the workload the GPUs were freed for must be admitted within
   ``handoff_timeout``; the latency is recorded; otherwise decide.py stops reclaiming for that
   ClusterQueue while the workload is pending, and the log says why.

Audit: one JSON line per decision on the logger ``gpuaas.culler.audit`` (skips only when they
change), Kubernetes Events for warnings and reclaims, Prometheus metrics (:class:`Metrics`).
With the policy's ``notify.webhook``, warnings and reclaims carried out are also posted there in
the background (:mod:`.notify`; never awaited by the cycle).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from gpuaas_culler.clients.prometheus import PrometheusError
from gpuaas_culler.reclaim.activity_store import ActivityStore, Notice, server_key
from gpuaas_culler.reclaim.decide import (
    Action,
    Decision,
    HandOffRecord,
    HandOffStatus,
    Plan,
    SnoozeResult,
    Workbench,
    assess_handoff,
    decide,
    snooze,
)
from gpuaas_culler.reclaim.gather import (
    PodRef,
    as_the_hub_sees_them,
    pending_workloads,
    workbenches,
)
from gpuaas_culler.reclaim.idleness import State
from gpuaas_culler.reclaim.notify import Notifier
from gpuaas_culler.reclaim.policy import PolicySet
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import PendingWorkloadInfo, WorkloadInfo, parse_time, read_workload
from jupyter_gpuaas.core.labels import (
    RECLAIMED_AT,
    RECLAIMED_FOR,
    SNOOZED_UNTIL,
    SNOOZES_USED,
    WARNED_AT,
)

__all__ = [
    "HubClient",
    "HubError",
    "KubeClient",
    "Metrics",
    "ReclaimLoop",
    "Settings",
]

log = logging.getLogger("gpuaas.culler")
audit = logging.getLogger("gpuaas.culler.audit")

EVENT_SOURCE = "gpuaas-culler"
HANDOFFS_CONFIGMAP = "gpuaas-culler-handoffs"
"""ConfigMap in the notebook namespace that keeps the hand-off records across restarts."""
STATE_KEY = "state.json"


def handoffs_to_text(
    handoffs: Mapping[str, HandOffRecord], reported: Iterable[tuple[str, str]]
) -> str:
    """The hand-off records and which of their results were already recorded, as JSON."""
    done = sorted(reported)
    return json.dumps(
        {
            "version": 1,
            "handoffs": [
                {
                    "cluster_queue": cq,
                    "workload": r.workload,
                    "reclaimed_at": isoformat_z(r.reclaimed_at),
                    "admitted_at": isoformat_z(r.admitted_at) if r.admitted_at else None,
                    "reported": [m for w, m in done if w == r.workload],
                }
                for cq, r in sorted(handoffs.items())
            ],
        },
        sort_keys=True,
    )


def handoffs_from_text(text: str) -> tuple[dict[str, HandOffRecord], set[tuple[str, str]]]:
    """The inverse of :func:`handoffs_to_text`; ``ValueError`` says what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError("not a version 1 hand-off record")
    handoffs: dict[str, HandOffRecord] = {}
    reported: set[tuple[str, str]] = set()
    for raw in data.get("handoffs") or []:
        reclaimed = parse_time(raw.get("reclaimed_at"))
        if reclaimed is None or not raw.get("cluster_queue") or not raw.get("workload"):
            raise ValueError(f"incomplete hand-off record: {raw!r}")
        record = HandOffRecord(
            workload=str(raw["workload"]),
            cluster_queue=str(raw["cluster_queue"]),
            reclaimed_at=reclaimed,
            admitted_at=parse_time(raw.get("admitted_at")),
        )
        handoffs[record.cluster_queue] = record
        reported |= {(record.workload, str(m)) for m in raw.get("reported") or []}
    return handoffs, reported


class HubError(RuntimeError):
    """The hub could not be read or refused (the cycle acts on nothing)."""


# --------------------------------------------------------------------------- collaborators


class Hub(Protocol):
    async def user(self, name: str) -> dict[str, Any] | None: ...

    async def group_members(self) -> dict[str, list[str]]: ...

    async def stop_server(self, user: str, server: str) -> int: ...


class Kube(Protocol):
    async def list_pods(self, namespace: str) -> list[dict[str, Any]]: ...

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None: ...

    async def event(self, pod: PodRef, reason: str, message: str, type_: str) -> None: ...

    async def flavor_labels(self) -> dict[str, dict[str, str]]: ...

    async def read_state(self, namespace: str, name: str) -> str | None: ...

    async def write_state(self, namespace: str, name: str, text: str) -> None: ...


class KueueView(Protocol):
    def queue_state(self) -> QueueState: ...

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]: ...

    def workload_for_pod(
        self, namespace: str, pod_uid: str, pod_name: str
    ) -> WorkloadInfo | None: ...

    def pending_items(
        self, namespace: str, local_queue: str
    ) -> list[PendingWorkloadInfo] | None: ...


class HubClient:
    """The Hub REST API with the culler's token (tornado's async client; timeouts, pages)."""

    PAGE = 200

    def __init__(self, api_url: str, token: str, *, timeout: float = 20.0) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.requests = 0

    async def _fetch(
        self, method: str, path: str, accept: str = "application/json", *, missing: Any = ...
    ) -> Any:
        """The answer's JSON (``DELETE``: its status); ``missing`` is returned for a 404."""
        from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

        self.requests += 1
        req = HTTPRequest(
            self.api_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}", "Accept": accept},
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            allow_nonstandard_methods=True,
        )
        try:
            resp = await AsyncHTTPClient().fetch(req)
        except HTTPClientError as e:
            if method == "DELETE" and e.code in (400, 404):
                return e.code  # not running (any more): nothing to stop
            if e.code == 404 and missing is not ...:
                return missing
            raise HubError(f"{method} {path}: HTTP {e.code} {e.message}") from e
        except OSError as e:
            raise HubError(f"{method} {path}: {e}") from e
        if method == "DELETE":
            return resp.code
        return json.loads(resp.body or b"null")

    async def user(self, name: str) -> dict[str, Any] | None:
        """The user's model with their active servers and groups; ``None``: no such user."""
        model: dict[str, Any] | None = await self._fetch(
            "GET", f"/users/{quote(name)}", missing=None
        )
        return model

    async def group_members(self) -> dict[str, list[str]]:
        """User → the names of their groups, from every page of ``GET /groups``."""
        members: dict[str, list[str]] = {}
        offset = 0
        while True:
            query = urlencode({"offset": offset, "limit": self.PAGE})
            page = await self._fetch(
                "GET", f"/groups?{query}", accept="application/jupyterhub-pagination+json"
            )
            items = page if isinstance(page, list) else page.get("items") or []
            for group in items:
                for user in group.get("users") or []:
                    members.setdefault(str(user), []).append(str(group.get("name")))
            nxt = None if isinstance(page, list) else (page.get("_pagination") or {}).get("next")
            if not nxt or not items:
                return members
            offset = int(nxt.get("offset", offset + len(items)))

    async def stop_server(self, user: str, server: str) -> int:
        path = (
            f"/users/{quote(user)}/servers/{quote(server)}"
            if server
            else (f"/users/{quote(user)}/server")
        )
        code: int = await self._fetch("DELETE", path)
        return code


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

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        """ResourceFlavor name → its ``nodeLabels`` (one list call)."""
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
        return {
            str(f["metadata"]["name"]): {
                str(k): str(v) for k, v in ((f.get("spec") or {}).get("nodeLabels") or {}).items()
            }
            for f in listing.get("items", [])
        }

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        body = {"metadata": {"annotations": dict(annotations)}}
        await self._core().patch_namespaced_pod(
            pod.name, pod.namespace, body, _request_timeout=self.timeout
        )

    async def event(self, pod: PodRef, reason: str, message: str, type_: str) -> None:
        now = datetime.now(timezone.utc)
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
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


# --------------------------------------------------------------------------- metrics


class Metrics:
    """Prometheus metrics of the culler (no user names as labels)."""

    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.reclaimed = Counter(
            "gpuaas_culler_reclaimed_gpu_equivalents",
            "GPU-equivalents freed by stopping idle workbenches, by team",
            ["team"],
            registry=r,
        )
        self.reclaims = Counter(
            "gpuaas_culler_reclaims",
            "Workbenches stopped by the culler, by team and cause",
            ["team", "code"],
            registry=r,
        )
        self.warnings = Counter(
            "gpuaas_culler_warnings", "Reclaim warnings given, by team", ["team"], registry=r
        )
        self.decisions = Counter(
            "gpuaas_culler_decisions",
            "Decisions made, by action and code",
            ["action", "code"],
            registry=r,
        )
        self.idle_gpu_hours = Counter(
            "gpuaas_culler_idle_gpu_hours",
            "GPU-equivalent hours held by idle workbenches, by team",
            ["team"],
            registry=r,
        )
        self.handoff_latency = Histogram(
            "gpuaas_culler_handoff_latency_seconds",
            "From the reclaim to the admission of the queued workload it was for",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
            registry=r,
        )
        self.handoffs = Counter(
            "gpuaas_culler_handoffs", "Hand-offs by result", ["result"], registry=r
        )
        self.cycle_errors = Counter(
            "gpuaas_culler_cycle_errors",
            "Cycles that read nothing usable and acted on nothing",
            ["source"],
            registry=r,
        )
        self.cycle_seconds = Gauge(
            "gpuaas_culler_cycle_seconds", "Duration of the last complete cycle", registry=r
        )

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


# --------------------------------------------------------------------------- the loop


@dataclass
class Settings:
    notebook_namespace: str = "jupyter-users"
    job_namespaces: Sequence[str] = ("team-a", "team-b")
    interval: float = 30.0
    """Seconds between cycles."""
    max_backoff: float = 300.0
    """Longest wait between cycles while the hub or Kubernetes cannot be read."""
    save_lead: float = 15.0
    """Seconds before a reclaim from which the server is told "saving"."""
    dry_run: bool = False
    """Decide and record only (on top of the policy file's dry_run)."""
    hub_concurrency: int = 8
    """Hub requests at a time when confirming the servers a cycle is about to act on."""


@dataclass
class _Seen:
    workbench: Workbench
    pod: PodRef
    last: tuple[str, str] = ("", "")
    extra: dict[str, Any] = field(default_factory=dict)


class ReclaimLoop:
    """One culler: call :meth:`cycle` (tests) or :meth:`run` (the service)."""

    def __init__(
        self,
        *,
        hub: Hub,
        kube: Kube,
        view: KueueView,
        policies: PolicySet,
        store: ActivityStore | None = None,
        settings: Settings | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        notifier: Notifier | None = None,
        pods: Callable[[], Iterable[Mapping[str, Any]] | None] | None = None,
        utilization: Callable[[], Awaitable[Mapping[tuple[str, str], float]]] | None = None,
    ) -> None:
        self.hub = hub
        self.kube = kube
        self.pods = pods
        """The notebook pods as a watch last saw them (``None`` until it has listed them);
        without it each cycle lists them."""
        self.utilization = utilization
        """Per-pod GPU utilisation, ``(namespace, pod)`` → percent (:mod:`.prometheus`)."""
        self.view = view
        self.policies = policies
        self.store = store if store is not None else ActivityStore()
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.sleep = sleep
        self.notifier = notifier
        """Posts warnings and reclaims to the policy's ``notify.webhook`` (background tasks)."""
        if notifier is None and policies.notify is not None:
            self.notifier = Notifier(policies.notify)
        self.seen: dict[str, _Seen] = {}
        self.handoffs: dict[str, HandOffRecord] = {}
        """By ClusterQueue: the last reclaim carried out for a workload of that queue."""
        self._reported: set[tuple[str, str]] = set()
        self._saved_handoffs: str | None = None
        """The hand-off records as last read from or written to their ConfigMap (``None``:
        not read yet)."""
        self._last_cycle: datetime | None = None
        self._dry_warned: dict[str, datetime] = {}
        self.failures = 0
        self.last_plan: Plan | None = None
        self.last_error = ""
        self.task: asyncio.Future[None] | None = None

    # ------------------------------------------------------------------ one cycle

    async def cycle(self) -> Plan | None:
        """Read, decide, act. ``None`` (and nothing done) when an input cannot be read."""
        started = self.clock()
        state = self.view.queue_state()
        if not state.synced:
            return self._failed("kueue", "Kueue caches are not synced")
        try:
            flavors = await self.kube.flavor_labels()
            cached = self.pods() if self.pods is not None else None
            if self.pods is not None and cached is None:
                return self._failed("kubernetes", "the notebook pods are not listed yet")
            pods = (
                list(cached)
                if cached is not None
                else await self.kube.list_pods(self.settings.notebook_namespace)
            )
        except Exception as e:  # noqa: BLE001 - any API failure: act on nothing this cycle
            return self._failed("kubernetes", f"listing pods and flavors: {e}")
        try:
            groups = await self.hub.group_members() if self.policies.names_groups else {}
        except HubError as e:
            return self._failed("hub", str(e))
        try:
            utilization = await self.utilization() if self.utilization is not None else {}
        except PrometheusError as e:
            return self._failed("prometheus", str(e))
        now = self.clock()
        wbs, refs = workbenches(
            pods,
            state,
            self.store,
            self.policies,
            now=now,
            workload_for_pod=self.view.workload_for_pod,
            groups=groups,
            pod_utilization=utilization,
        )
        self.store.keep_only(refs)
        # Dry-run warnings are kept in memory only, so that a dry run shows the reclaims to come.
        self._dry_warned = {k: t for k, t in self._dry_warned.items() if k in refs}
        wbs = [
            replace(wb, warned_at=self._dry_warned[wb.key])
            if wb.warned_at is None and wb.key in self._dry_warned
            else wb
            for wb in wbs
        ]
        namespaces = [*self.settings.job_namespaces, self.settings.notebook_namespace]
        workloads = [o for ns in dict.fromkeys(namespaces) for o in self.view.workloads(ns)]
        pending = pending_workloads(
            workloads, state, positions=self.view.pending_items, flavor_labels=flavors
        )
        if self._saved_handoffs is None and not await self._load_handoffs():
            return self._failed("kubernetes", "reading the hand-off records")
        self._update_handoffs(workloads, now)
        self._account_idle(wbs, now)
        asked: dict[str, dict[str, Any] | None] = {}
        while True:
            plan = decide(
                wbs,
                pending,
                self.policies,
                now=now,
                handoffs=list(self.handoffs.values()),
                dry_run=self.settings.dry_run,
            )
            # Only servers the hub has confirmed are warned or stopped (see the module doc).
            unasked = sorted(
                {
                    d.workbench.user
                    for d in plan.decisions
                    if d.action in (Action.WARN, Action.RECLAIM) and d.workbench.user not in asked
                }
            )
            if not unasked:
                break
            try:
                models = await self._ask_hub(unasked)
            except HubError as e:
                return self._failed("hub", str(e))
            asked.update(zip(unasked, models, strict=True))
            wbs = as_the_hub_sees_them(wbs, asked)
            confirmed = {wb.key for wb in wbs}
            refs = {k: r for k, r in refs.items() if k in confirmed}
        targets = {t.workload.key: t for t in plan.targets}
        for decision in plan.decisions:
            key = decision.workbench.key
            seen = self.seen.get(key)
            self.seen[key] = _Seen(decision.workbench, refs[key], seen.last if seen else ("", ""))
            await self._act(decision, refs[key], now, targets)
        for key in [k for k in self.seen if k not in refs]:
            del self.seen[key]
        for target in plan.targets:
            if target.status in ("blocked", "not-enough", "handoff-waiting"):
                self._audit_target(target.workload.key, target.status, target.reason, now)
        await self._save_handoffs()
        self.failures = 0
        self.last_error = ""
        self.last_plan = plan
        self.metrics.cycle_seconds.set((self.clock() - started).total_seconds())
        return plan

    async def _load_handoffs(self) -> bool:
        """Read the hand-off records a previous run kept (once per process)."""
        ns = self.settings.notebook_namespace
        try:
            text = await self.kube.read_state(ns, HANDOFFS_CONFIGMAP)
        except Exception as e:  # noqa: BLE001 - like any unreadable input: act on nothing
            log.warning("culler: cannot read ConfigMap %s/%s: %s", ns, HANDOFFS_CONFIGMAP, e)
            return False
        if text:
            try:
                self.handoffs, reported = handoffs_from_text(text)
                self._reported |= reported
            except (ValueError, TypeError, AttributeError) as e:
                log.warning(
                    "culler: ConfigMap %s/%s holds no usable hand-off records (%s); starting"
                    " without them (it is rewritten at the next hand-off)",
                    ns,
                    HANDOFFS_CONFIGMAP,
                    e,
                )
        self._saved_handoffs = text or handoffs_to_text({}, ())
        return True

    async def _save_handoffs(self) -> None:
        """Write the hand-off records when they changed; a failure is retried next cycle."""
        marks = {m for m in self._reported if m[1].startswith("handoff-")}
        text = handoffs_to_text(self.handoffs, marks)
        if text == self._saved_handoffs:
            return
        ns = self.settings.notebook_namespace
        try:
            await self.kube.write_state(ns, HANDOFFS_CONFIGMAP, text)
        except Exception as e:  # noqa: BLE001 - kept in memory; written at the next cycle
            log.warning("culler: cannot write ConfigMap %s/%s: %s", ns, HANDOFFS_CONFIGMAP, e)
            return
        self._saved_handoffs = text

    async def _ask_hub(self, users: Sequence[str]) -> list[dict[str, Any] | None]:
        """The hub's models of ``users``, a few requests at a time."""
        gate = asyncio.Semaphore(self.settings.hub_concurrency)

        async def one(name: str) -> dict[str, Any] | None:
            async with gate:
                return await self.hub.user(name)

        return list(await asyncio.gather(*(one(u) for u in users)))

    def _failed(self, source: str, message: str) -> Plan | None:
        self.failures += 1
        self.last_error = f"{source}: {message}"
        self.metrics.cycle_errors.labels(source).inc()
        log.warning("culler cycle skipped (nothing acted on): %s: %s", source, message)
        return None  # the cycle's answer: nothing decided

    def next_delay(self) -> float:
        """``interval``, doubled per failed cycle in a row, at most ``max_backoff``."""
        s = self.settings
        if not self.failures:
            return s.interval
        return float(min(s.max_backoff, s.interval * (2 ** min(self.failures, 16))))

    async def run(self) -> None:
        while True:
            try:
                await self.cycle()
            except Exception:  # keep the service alive; the next cycle retries
                self.failures += 1
                log.exception("culler cycle failed")
            await self.sleep(self.next_delay())

    # ------------------------------------------------------------------ acting

    async def _act(
        self, d: Decision, pod: PodRef, now: datetime, targets: Mapping[str, Any]
    ) -> None:
        wb = d.workbench
        key = wb.key
        self.metrics.decisions.labels(d.action.value, d.code).inc()
        self._audit(d, now)
        notice = None
        if d.action in (Action.WARN, Action.WAIT) and d.reclaim_at is not None:
            notice = Notice(
                warned_at=wb.warned_at or now,
                reclaim_at=d.reclaim_at,
                reason=d.reason,
                snoozes_left=d.snoozes_left or 0,
                dry_run=d.dry_run,
            )
        if d.dry_run:
            if d.action is Action.WARN:
                self._dry_warned[key] = now
            elif d.action in (Action.SKIP, Action.CLEAR_WARNING, Action.RECLAIM):
                self._dry_warned.pop(key, None)
            self.store.set_notice(key, None)
            return
        try:
            if d.action is Action.WARN:
                await self.kube.annotate(pod, {WARNED_AT: isoformat_z(now)})
                self.metrics.warnings.labels(wb.team or "-").inc()
                await self._event(pod, "GPUReclaimWarning", d.reason, "Warning")
                self._notify("warn", d, now, d.reclaim_at)
            elif d.action is Action.CLEAR_WARNING:
                await self.kube.annotate(pod, {WARNED_AT: None})
            elif d.action is Action.RECLAIM:
                notice = None
                await self.hub.stop_server(wb.user, wb.server)
                self.metrics.reclaimed.labels(wb.team or "-").inc(float(wb.gpu_equivalents))
                self.metrics.reclaims.labels(wb.team or "-", d.code).inc()
                marks = {RECLAIMED_AT: isoformat_z(now)}
                if d.handoff:
                    marks[RECLAIMED_FOR] = d.handoff
                    target = targets.get(d.handoff)
                    if target is not None:
                        cq = target.workload.cluster_queue
                        if self.handoffs.get(cq, None) is None or (
                            self.handoffs[cq].workload != d.handoff
                            or self.handoffs[cq].admitted_at is not None
                        ):
                            self.handoffs[cq] = HandOffRecord(
                                workload=d.handoff, cluster_queue=cq, reclaimed_at=now
                            )
                try:
                    await self.kube.annotate(pod, marks)
                except Exception as e:  # noqa: BLE001 - the pod may be gone already
                    log.debug("annotating %s after the stop: %s", pod.name, e)
                await self._event(pod, "GPUReclaimed", d.reason, "Normal")
                self._notify("reclaim", d, now, now)
        except HubError as e:
            log.warning("culler: %s of %s failed: %s", d.action.value, key, e)
            return
        except Exception as e:  # noqa: BLE001 - one pod's API error must not stop the cycle
            log.warning("culler: %s of %s failed: %s", d.action.value, key, e)
            return
        self.store.set_notice(key, notice)

    def _notify(self, kind: str, d: Decision, now: datetime, at: datetime | None) -> None:
        """Hand the notice to the webhook's background poster (returns at once)."""
        if self.notifier is None:
            return
        wb = d.workbench
        try:
            self.notifier.notify(
                {
                    "event": kind,
                    "user": wb.user,
                    "server": wb.server,
                    "team": wb.team,
                    "kind": wb.kind,
                    "offering": wb.offering,
                    "reason": d.reason,
                    "reclaim_at": isoformat_z(at) if at is not None else None,
                    "at": isoformat_z(now),
                    "handoff": d.handoff,
                    "dry_run": d.dry_run,
                }
            )
        except Exception as e:  # noqa: BLE001 - a notice is a courtesy; never the cycle's end
            log.warning("culler: notifying %s of %s failed: %s", kind, wb.key, e)

    async def _event(self, pod: PodRef, reason: str, message: str, type_: str) -> None:
        try:
            await self.kube.event(pod, reason, message, type_)
        except Exception as e:  # noqa: BLE001 - Events are a courtesy; the log is the record
            log.warning("culler: Event %s on %s/%s failed: %s", reason, pod.namespace, pod.name, e)

    def _audit(self, d: Decision, now: datetime) -> None:
        seen = self.seen.get(d.workbench.key)
        mark = (d.action.value, d.code)
        if d.action is Action.SKIP and seen is not None and seen.last == mark:
            return  # an unchanged skip is said once
        if seen is not None:
            seen.last = mark
        audit.info(json.dumps(d.log_record(now), sort_keys=True))

    def _audit_target(self, workload: str, status: str, reason: str, now: datetime) -> None:
        mark = (workload, status + reason.split(":")[0])
        if mark in self._reported:
            return
        self._reported.add(mark)
        audit.info(
            json.dumps(
                {
                    "event": "culler.target",
                    "at": isoformat_z(now),
                    "workload": workload,
                    "status": status,
                    "reason": reason,
                },
                sort_keys=True,
            )
        )

    def _account_idle(self, wbs: Sequence[Workbench], now: datetime) -> None:
        last, self._last_cycle = self._last_cycle, now
        if last is None:
            return
        hours = max((now - last).total_seconds(), 0.0) / 3600
        for wb in wbs:
            if wb.idleness.state is State.IDLE and wb.gpu_equivalents:
                self.metrics.idle_gpu_hours.labels(wb.team or "-").inc(
                    float(wb.gpu_equivalents) * hours
                )

    # ------------------------------------------------------------------ hand-offs

    def _update_handoffs(self, workloads: Sequence[Mapping[str, Any]], now: datetime) -> None:
        by_key: dict[str, WorkloadInfo] = {}
        for obj in workloads:
            info = read_workload(obj)
            by_key[f"{info.namespace}/{info.name}"] = info
        for cq, record in list(self.handoffs.items()):
            if record.admitted_at is None and record.workload not in by_key:
                # Deleted (or finished and removed) before it was seen admitted: nothing left
                # to hand off to, and nothing to block the queue for.
                del self.handoffs[cq]
                audit.info(
                    json.dumps(
                        {
                            "event": "culler.handoff",
                            "at": isoformat_z(now),
                            "workload": record.workload,
                            "cluster_queue": cq,
                            "result": "gone",
                            "reason": f"{record.workload} no longer exists",
                            "latency_seconds": None,
                        },
                        sort_keys=True,
                    )
                )
                continue
            if record.admitted_at is None:
                found = by_key.get(record.workload)
                if found is not None and (found.admitted or found.quota_reserved):
                    cond = found.conditions.get("Admitted") or found.conditions.get("QuotaReserved")
                    when = (cond.last_transition_time if cond else None) or now
                    record = HandOffRecord(
                        workload=record.workload,
                        cluster_queue=cq,
                        reclaimed_at=record.reclaimed_at,
                        admitted_at=max(when, record.reclaimed_at),
                    )
                    self.handoffs[cq] = record
            result = assess_handoff(record, now=now, timeout=self.policies.handoff_timeout)
            if result.status is HandOffStatus.WAITING:
                continue
            mark = (record.workload, "handoff-" + result.status.value)
            if mark not in self._reported:
                self._reported.add(mark)
                self.metrics.handoffs.labels(result.status.value).inc()
                if result.latency is not None:
                    self.metrics.handoff_latency.observe(result.latency.total_seconds())
                audit.info(
                    json.dumps(
                        {
                            "event": "culler.handoff",
                            "at": isoformat_z(now),
                            "workload": record.workload,
                            "cluster_queue": cq,
                            "result": result.status.value,
                            "reason": result.reason,
                            "latency_seconds": result.latency.total_seconds()
                            if result.latency is not None
                            else None,
                        },
                        sort_keys=True,
                    )
                )

    # ------------------------------------------------------------------ asked by servers

    def warning_for(self, user: str, server: str, now: datetime | None = None) -> dict[str, Any]:
        """The ``api/reclaim`` answer for one server."""
        now = now or self.clock()
        notice = self.store.notice(server_key(user, server))
        return {
            "server": server,
            "now": isoformat_z(now),
            "warning": notice.payload(now, timedelta(seconds=self.settings.save_lead))
            if notice
            else None,
        }

    async def snooze(self, user: str, server: str) -> SnoozeResult:
        """ "Keep my GPU": allowed up to the policy's ``max_snoozes``; kept on the pod."""
        key = server_key(user, server)
        seen = self.seen.get(key)
        if seen is None:
            return SnoozeResult(False, "this server is not known to the culler (yet)")
        wb = seen.workbench
        policy = self.policies.policy_for(
            team=wb.team, kind=wb.kind, offering=wb.offering, user=wb.user, groups=wb.groups
        )
        now = self.clock()
        result = snooze(wb, policy, now=now)
        if not result.allowed or result.until is None:
            return result
        used = wb.snoozes_used + 1
        await self.kube.annotate(
            seen.pod,
            {SNOOZES_USED: str(used), SNOOZED_UNTIL: isoformat_z(result.until), WARNED_AT: None},
        )
        self.seen[key] = _Seen(
            replace(wb, snoozes_used=used, snoozed_until=result.until, warned_at=None),
            seen.pod,
            seen.last,
        )
        self.store.set_notice(key, None)
        audit.info(
            json.dumps(
                {
                    "event": "culler.snooze",
                    "at": isoformat_z(now),
                    "user": user,
                    "server": server,
                    "until": isoformat_z(result.until),
                    "snoozes_left": result.snoozes_left,
                },
                sort_keys=True,
            )
        )
        return result

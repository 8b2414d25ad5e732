"""The reclaim loop: read the Hub, Kubernetes and the activity reports; decide; act; audit.

Each cycle (``interval`` seconds; longer, doubling up to ``max_backoff``, while the hub or
Kubernetes cannot be read — a cycle that cannot read everything acts on nothing):

1. reads the notebook pods (the service's watch of them, or one list call), the ResourceFlavors
   (one list call: it also proves the API server answers now), Kueue's objects from the watch
   caches (:class:`jupyter_gpuaas.hub.kueue_watch.WatchedKueueView`), the activity store, the hub's
   groups (``GET /hub/api/groups``, paged; only when the policy names groups) and, where
   configured, each pod's GPU utilisation from Prometheus
   (:mod:`gpuaas_service.clients.prometheus`);
2. builds the inputs (:mod:`.gather`) and calls :func:`.decide.decide`; before acting it asks the
   hub about each server it would warn or stop (``GET /hub/api/users/{name}``: is it still
   active, starting or stopping, which groups), corrects those workbenches and decides again,
   until every server acted on is one the hub has confirmed. So a cycle costs hub calls for the
   servers it acts on, not for every running server; scopes ``read:servers``,
   ``read:users:groups`` (and ``list:groups``, ``read:groups`` for group policies);
3. acts, unless dry-run: **warn** — the pod is annotated ``gpuaas.jupyter.org/reclaim-warned-at``
   (so a restarted culler neither warns twice nor restarts the countdown) and gets an Event;
   **reclaim** — a server that keeps its kernels' state is first asked to save it (the answer to
   its next activity report carries the request) and waited for at most the policy file's
   ``snapshot_timeout`` (all of a cycle's stops wait together); then, unless its user pressed
   "Keep my GPU" or a busy report came meanwhile, the server is stopped through the Hub API
   (``DELETE /hub/api/users/{u}/servers/{s}``, scope ``delete:servers``; the pod is never
   deleted by the culler), the pod is annotated ``...reclaim-stopped-at`` (and with what was
   kept, ``...reclaim-kernel-state``) and gets an Event; **clear-warning** — the annotation is
   removed;
   With ``job_pods`` it also reads the pods of the Jobs' namespaces: an admitted pod waiting for
   whole cards that exist only as scraps (``Unschedulable`` with HAMi's no-room reasons) is
   served by freeing a card of idle shares (:func:`.gather.placement_waits`, rule 6 of
   :mod:`.decide`), and the plan says why when none can be (scope: ``list`` pods in those
   namespaces);
4. verifies hand-offs: the workload the GPUs were freed for must be admitted within
   ``handoff_timeout``; the latency is recorded; otherwise decide.py stops reclaiming for that
   ClusterQueue while the workload is pending, and the log says why.

Audit: one JSON line per decision on the logger ``gpuaas.culler.audit`` (skips only when they
change), Kubernetes Events for warnings and reclaims, Prometheus metrics
(:class:`gpuaas_service.metrics.Metrics`).
With the policy's ``notify.webhook``, warnings and reclaims carried out are also posted there in
the background (:mod:`.notify`; never awaited by the cycle).

Readers (the web handlers, the console, the app) see the loop through :attr:`ReclaimLoop.state`:
one frozen :class:`LoopState` (the policies in force, the last complete cycle's plan and inputs,
the failures since, the hand-off records), replaced whole when a cycle completes or fails, the
policy changes or a hand-off record does, so a reader never sees half of a cycle. What a cycle
reads besides the clients' own calls comes as :class:`Feeds`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Literal, NamedTuple, TypedDict, TypeVar, cast

from gpuaas_service.clients.hub import Hub, HubError
from gpuaas_service.clients.kubernetes import Kube
from gpuaas_service.clients.persisted import PersistedState, StateUnreadable
from gpuaas_service.clients.prometheus import PrometheusError
from gpuaas_service.metrics import Metrics
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import (
    ActivityStore,
    Notice,
    report_again_in,
    server_key,
)
from gpuaas_service.reclaim.decide import (
    Action,
    Decision,
    HandOffRecord,
    HandOffStatus,
    PendingWorkload,
    PlacementTarget,
    PlacementWait,
    Plan,
    SnoozeResult,
    Target,
    Workbench,
    assess_handoff,
    decide,
    snooze,
)
from gpuaas_service.reclaim.events import CycleInputs, CycleResult, LoopEvent, LoopListener
from gpuaas_service.reclaim.handoffs import (
    HANDOFFS_CONFIGMAP,
    handoffs_from_text,
    handoffs_to_text,
)
from gpuaas_service.reclaim.idleness import ActivityReport, State
from gpuaas_service.reclaim.inputs import (
    as_the_hub_sees_them,
    pending_workloads,
    placement_waits,
    workbenches,
)
from gpuaas_service.reclaim.kept_state import KeptState
from gpuaas_service.reclaim.notify import Notifier
from gpuaas_service.reclaim.policy import PolicySet, snapshot_wait
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Tenant
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from jupyter_gpuaas.core.labels import (
    RECLAIM_DEADLINE,
    RECLAIM_REASON,
    RECLAIMED_AT,
    RECLAIMED_FOR,
    RECLAIMED_FOR_TEAM,
    RECLAIMED_KERNEL_STATE,
    SNOOZED_UNTIL,
    SNOOZES_USED,
    WARNED_AT,
)
from jupyter_gpuaas.hub.kueue_watch import KueueReader

__all__ = ["Feeds", "LoopState", "ReclaimLoop", "ReportAsks", "Settings", "team_display_names"]

log = logging.getLogger("gpuaas.culler")
audit = logging.getLogger("gpuaas.culler.audit")

MAX_REASON = 1000
"""Characters of a warning's reason kept on the pod (annotations are small)."""
WITHDRAWAL_SHOWN = timedelta(minutes=10)
"""How long ``api/reclaim`` names a server's withdrawn warning (``withdrawn``)."""
STOPPING = "the service is stopping: the next one decides again"
"""Why a stop not yet begun when the service is asked to stop is put off: a snapshot wait
(``snapshot_timeout``, 60 s) outlasts the service's ``shutdown_grace`` (20 s), and a stop cut
short at the grace's end would leave the pod half-reclaimed."""
CLEAN_UP_SECONDS = 5.0
"""Beyond the grace: the time a stop cut short has to take its marks off the pod."""

T = TypeVar("T")


class ReportAsks(TypedDict, total=False):
    """What an activity report's answer asks of its server besides the warning: its
    ``snapshot`` and ``report_again_in`` (the document's ``service_report_answer``)."""

    snapshot: api.ServiceReportAnswerSnapshot
    report_again_in: float


@dataclass(frozen=True)
class Settings:
    """What the loop is told, as plain data (the service builds it from its
    ``GPUaaSService`` options, whose help texts say more; tests build it directly)."""

    notebook_namespace: str = "jupyter-users"
    """Where the single-user servers' pods are (KubeSpawner's namespace)."""
    job_namespaces: Sequence[str] = ()
    """Namespaces of the training Jobs whose queued Workloads a reclaim may be for (besides the
    notebook namespace's)."""
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
    team_names: Mapping[str, str] = field(default_factory=dict)
    """The teams' display names by team (:func:`team_display_names`): a warning names
    another team's queued work by it ("queued work of Team B"), never by the slug; a team
    without one is "another team"."""


@dataclass(frozen=True)
class Feeds:
    """What the service's watches and Prometheus hand each cycle besides the clients' own
    calls; each ``None`` where there is no such feed."""

    pods: Callable[[], Iterable[Mapping[str, Any]] | None] | None = None
    """The notebook pods as a watch last saw them (``None`` until it has listed them);
    without it each cycle lists them."""
    utilization: Callable[[], Awaitable[Mapping[tuple[str, str], float]]] | None = None
    """Per-pod GPU utilisation, ``(namespace, pod)`` → percent
    (:mod:`gpuaas_service.clients.prometheus`)."""
    last_kernel: Callable[[], Awaitable[Mapping[tuple[str, str], float]]] | None = None
    """Per-pod seconds since its last GPU kernel, ``(namespace, pod)`` → seconds (HAMi's vGPU
    monitor through :mod:`gpuaas_service.clients.prometheus`)."""
    job_pods: Callable[[], Awaitable[Sequence[Mapping[str, Any]]]] | None = None
    """The pods of the Jobs' namespaces (``Settings.job_namespaces``): the ones that hold a
    shared pool's cards or wait for whole ones (``None``: placement is not served)."""


@dataclass(frozen=True)
class LoopState:
    """The loop as its readers (the web handlers, the console, the app) see it: one snapshot,
    replaced whole (:attr:`ReclaimLoop.state`), so a reader never sees half of a cycle."""

    policies: PolicySet
    """The policies in force (:meth:`ReclaimLoop.set_policies`)."""
    last_plan: Plan | None = None
    """The last complete cycle's plan (``None`` before one)."""
    last_inputs: CycleInputs | None = None
    """What that cycle decided on."""
    last_completed: datetime | None = None
    """When that cycle decided."""
    failures: int = 0
    """Cycles in a row that could not read everything (each doubles the interval)."""
    last_error: str = ""
    """Why the last of those failed (``source: message``; ``""`` after a complete cycle)."""
    handoffs: Mapping[str, HandOffRecord] = field(default_factory=lambda: MappingProxyType({}))
    """By ClusterQueue: the last reclaim carried out for a workload of that queue."""


@dataclass(frozen=True)
class _Readings:
    """What a cycle read: Kueue (from the watch caches), the ResourceFlavors, the notebook pods,
    the hub's groups and Prometheus's per-pod figures."""

    state: QueueState
    flavors: Mapping[str, Mapping[str, str]]
    taints: Mapping[str, Sequence[Mapping[str, str]]]
    pods: Sequence[Mapping[str, Any]]
    groups: Mapping[str, Sequence[str]]
    utilization: Mapping[tuple[str, str], float]
    last_kernel: Mapping[tuple[str, str], float]
    job_pods: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class _Gathered:
    """A cycle's inputs to :func:`.decide.decide`, before the hub confirmed them."""

    workbenches: list[Workbench]
    refs: dict[str, PodRef]
    reports: Mapping[str, ActivityReport | None]
    workloads: list[Mapping[str, Any]]
    pending: list[PendingWorkload]
    utilization: Mapping[tuple[str, str], float]
    waits: list[PlacementWait] = field(default_factory=list)
    readings: _Readings | None = None
    """What the cycle read (its listeners see the same moment)."""


@dataclass
class _Seen:
    workbench: Workbench
    pod: PodRef
    last: tuple[str, str] = ("", "")
    extra: dict[str, Any] = field(default_factory=dict)


class HandedTo(NamedTuple):
    """The queued or waiting work a reclaim frees a GPU for."""

    team: str
    namespace: str
    workload: str


class ReclaimLoop:
    """One culler: call :meth:`cycle` (tests) or :meth:`run` (the service)."""

    def __init__(
        self,
        *,
        hub: Hub,
        kube: Kube,
        view: KueueReader,
        policies: PolicySet,
        store: ActivityStore | None = None,
        settings: Settings | None = None,
        feeds: Feeds | None = None,
        metrics: Metrics | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.hub = hub
        self.kube = kube
        self.view = view
        self.store = store if store is not None else ActivityStore()
        self.settings = settings or Settings()
        self.feeds = feeds or Feeds()
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.sleep = sleep
        self.listeners: list[LoopListener] = []
        """Told of each action carried out and of each complete cycle (the console)."""
        self.notifier = Notifier(policies.notify) if policies.notify is not None else None
        """Posts warnings and reclaims to the policy's ``notify.webhook`` (background tasks)."""
        self.task: asyncio.Future[None] | None = None
        """The running :meth:`run` (the service's)."""
        self._stop_asked = asyncio.Event()
        self._state = LoopState(policies)
        # What follows is the loop's own working state between and within cycles; readers
        # see :attr:`state`, and the methods below (stop_under_way, warning_for, ...).
        self._policies = policies
        self._handoffs: dict[str, HandOffRecord] = {}
        """By ClusterQueue: the last reclaim carried out for a workload of that queue (as
        :attr:`LoopState.handoffs`, while this cycle changes it)."""
        self._seen: dict[str, _Seen] = {}
        self._placements: dict[str, PlacementTarget] = {}
        """By the waiting pod (``namespace/name``): the last plan's cards freed for admitted work
        waiting for whole ones (a warning's cause names it)."""
        self._reported: set[tuple[str, str]] = set()
        self._handoff_state = PersistedState(
            kube,
            self.settings.notebook_namespace,
            HANDOFFS_CONFIGMAP,
            owner="culler",
            what="hand-off records",
            empty=handoffs_to_text({}, ()),
        )
        """The hand-off records kept across restarts (read once, before the first decision)."""
        self._last_cycle: datetime | None = None
        self._dry_warned: dict[str, datetime] = {}
        self._stopping: dict[str, tuple[str, str]] = {}
        """Servers whose stop is under way (key → the pod's uid, why): a snooze or a busy report
        that arrives now is answered 409 with this, never accepted and then ignored. Bound to
        the pod: the same server started again (a new pod, same key) is not being stopped."""
        self._kept: dict[str, Workbench] = {}
        """Servers snoozed while a cycle ran (key → the workbench with the snooze): the cycle's
        decision, made before the press, is not carried out, and its older view of the pod does
        not undo the snooze."""
        self._noticed: dict[str, datetime] = {}
        """When this process first had a warning for a server (so, after a restart, a server is
        told "saving" for ``save_lead`` before it is stopped)."""
        self._withdrawn: dict[str, tuple[datetime, api.ServiceWithdrawal]] = {}
        """The last warning withdrawn per server (key → when, and its answer), until a new
        warning or ``WITHDRAWAL_SHOWN`` after: the sidebar tells a withdrawn warning from the stop
        beginning by it, even near the deadline. Memory only: after a restart the sidebar falls
        back to the deadline."""

    @property
    def state(self) -> LoopState:
        """The loop as of now, one snapshot: the policies in force, the last complete cycle,
        the failures since, the hand-off records. Replaced whole, never changed in place."""
        return self._state

    def _set_state(self, **changes: Any) -> None:
        self._state = replace(self._state, **changes)

    def _publish_handoffs(self) -> None:
        """Readers see the hand-off records as they are now (a copy: the cycle goes on)."""
        self._set_state(handoffs=MappingProxyType(dict(self._handoffs)))

    # ------------------------------------------------------------------ one cycle

    def set_policies(self, policies: PolicySet) -> None:
        """Put a new policy in force from the next cycle (a reloaded file)."""
        if policies.notify != self._policies.notify:
            self.notifier = Notifier(policies.notify) if policies.notify is not None else None
        self._policies = policies
        self._set_state(policies=policies)

    async def cycle(self) -> Plan | None:
        """Read, confirm, act, record. ``None`` (and nothing done) when an input cannot be read,
        or while no policy is in force (reclaim is off: no warning is cleared either)."""
        if not self._policies.policies:
            return None
        started = self.clock()
        readings = await self._read()
        if readings is None:
            return None
        now = self.clock()
        gathered = self._gather(readings, now)
        if not self._handoff_state.loaded and not await self._load_handoffs():
            self._failed("kubernetes", "reading the hand-off records")
            return None
        self._update_handoffs(gathered.workloads, now)
        self._account_idle(gathered.workbenches, now)
        decided_handoffs = tuple(self._handoffs.values())
        confirmed = await self._confirm(gathered, decided_handoffs, now)
        if confirmed is None:
            return None
        plan, refs = confirmed
        await self._act_on(plan, refs, now)
        await self._record(plan, refs, gathered, decided_handoffs, now)
        self.metrics.cycle_seconds.set((self.clock() - started).total_seconds())
        return plan

    async def _read(self) -> _Readings | None:
        """Everything a cycle reads, or ``None`` (the failure recorded) if anything is
        unreadable: a cycle that cannot read everything acts on nothing."""
        feeds = self.feeds
        state = self.view.queue_state()
        if not state.synced:
            self._failed("kueue", "Kueue caches are not synced")
            return None
        try:
            flavors = await self.kube.flavor_labels()
            taints = await self.kube.flavor_taints()
            cached = feeds.pods() if feeds.pods is not None else None
            if feeds.pods is not None and cached is None:
                self._failed("kubernetes", "the notebook pods are not listed yet")
                return None
            pods = (
                list(cached)
                if cached is not None
                else await self.kube.list_pods(self.settings.notebook_namespace)
            )
            job_pods = list(await feeds.job_pods()) if feeds.job_pods is not None else []
        except Exception as e:  # noqa: BLE001 - any API failure: act on nothing this cycle
            self._failed("kubernetes", f"listing pods and flavors: {e}")
            return None
        try:
            groups = await self.hub.group_members() if self._policies.names_groups else {}
        except HubError as e:
            self._failed("hub", str(e))
            return None
        try:
            utilization = await feeds.utilization() if feeds.utilization is not None else {}
            last_kernel = await feeds.last_kernel() if feeds.last_kernel is not None else {}
        except PrometheusError as e:
            self._failed("prometheus", str(e))
            return None
        return _Readings(state, flavors, taints, pods, groups, utilization, last_kernel, job_pods)

    def _gather(self, readings: _Readings, now: datetime) -> _Gathered:
        """The cycle's workbenches (judged, the verdicts kept in the store) and queued work."""
        wbs, refs = workbenches(
            readings.pods,
            readings.state,
            self.store,
            self._policies,
            now=now,
            workload_for_pod=self.view.workload_for_pod,
            groups=readings.groups,
            pod_utilization=readings.utilization,
            pod_last_kernel=readings.last_kernel,
        )
        self.store.keep_only(refs)
        reports = {key: self.store.report(key) for key in refs}
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
            workloads,
            readings.state,
            positions=self.view.pending_items,
            flavor_labels=readings.flavors,
            flavor_taints=readings.taints,
            notebook_namespace=self.settings.notebook_namespace,
        )
        waits = placement_waits(
            [*readings.pods, *readings.job_pods],
            wbs,
            readings.state,
            workload_for_pod=self.view.workload_for_pod,
            notebook_namespace=self.settings.notebook_namespace,
        )
        return _Gathered(
            wbs, refs, reports, workloads, pending, readings.utilization, waits, readings
        )

    async def _confirm(
        self, gathered: _Gathered, handoffs: tuple[HandOffRecord, ...], now: datetime
    ) -> tuple[Plan, dict[str, PodRef]] | None:
        """Decide, asking the hub about each server to be warned or stopped and deciding again
        on what it says, until every server acted on is one the hub has confirmed (see the
        module doc); ``None`` when the hub cannot be asked."""
        wbs, refs = gathered.workbenches, gathered.refs
        asked: dict[str, dict[str, Any] | None] = {}
        while True:
            plan = decide(
                wbs,
                gathered.pending,
                self._policies,
                now=now,
                handoffs=handoffs,
                dry_run=self.settings.dry_run,
                waits=gathered.waits,
                team_names=self.settings.team_names,
            )
            unasked = sorted(
                {
                    d.workbench.user
                    for d in plan.decisions
                    if d.action in (Action.WARN, Action.RECLAIM) and d.workbench.user not in asked
                }
            )
            if not unasked:
                return plan, refs
            try:
                models = await self._ask_hub(unasked)
            except HubError as e:
                self._failed("hub", str(e))
                return None
            asked.update(zip(unasked, models, strict=True))
            wbs = as_the_hub_sees_them(wbs, asked)
            confirmed = {wb.key for wb in wbs}
            refs = {k: r for k, r in refs.items() if k in confirmed}

    async def _act_on(self, plan: Plan, refs: Mapping[str, PodRef], now: datetime) -> None:
        """Carry out the plan's decisions; forget the servers that are gone."""
        targets = {t.workload.key: t for t in plan.targets}
        self._placements = {p.wait.key: p for p in plan.placements}
        self._kept = {
            k: wb
            for k, wb in self._kept.items()
            if k in refs
            and wb.snoozes_used
            > next((d.workbench.snoozes_used for d in plan.decisions if d.workbench.key == k), 0)
        }
        self._ask_snapshots(plan, now, targets)
        for decision in plan.decisions:
            key = decision.workbench.key
            seen = self._seen.get(key)
            kept = self._kept.get(key)
            self._seen[key] = _Seen(
                kept or decision.workbench, refs[key], seen.last if seen else ("", "")
            )
            await self._act(decision, refs[key], now, targets)
        for table in (self._seen, self._stopping, self._noticed, self._withdrawn):
            for key in [k for k in table if k not in refs]:
                del table[key]
        for key in [k for k, (uid, _) in self._stopping.items() if refs[k].uid != uid]:
            del self._stopping[key]  # a new pod of the same server: its stop is not under way
        for target in plan.targets:
            if target.status in ("blocked", "not-enough", "handoff-waiting"):
                self._audit_target(target.workload.key, target.status, target.reason, now)
        for placement in plan.placements:
            self._audit_target(placement.wait.key, placement.status, placement.reason, now)

    async def _record(
        self,
        plan: Plan,
        refs: Mapping[str, PodRef],
        gathered: _Gathered,
        handoffs: tuple[HandOffRecord, ...],
        now: datetime,
    ) -> None:
        """Keep the hand-off records, remember the cycle and publish it to the listeners."""
        await self._save_handoffs()
        utilization = gathered.utilization
        inputs = CycleInputs(
            pending=tuple(gathered.pending),
            handoffs=handoffs,
            reports={
                d.workbench.key: gathered.reports.get(d.workbench.key) for d in plan.decisions
            },
            pod_utilization={
                key: utilization[(ref.namespace, ref.name)]
                for key, ref in refs.items()
                if (ref.namespace, ref.name) in utilization
            },
            dry_run=self.settings.dry_run,
            waits=tuple(gathered.waits),
            queue_state=read.state if (read := gathered.readings) else None,
            workloads=tuple(gathered.workloads),
            pods=tuple(read.pods) if read else (),
            job_pods=tuple(read.job_pods) if read else (),
        )
        self._set_state(
            last_plan=plan,
            last_inputs=inputs,
            last_completed=now,
            failures=0,
            last_error="",
            handoffs=MappingProxyType(dict(self._handoffs)),
        )
        result = CycleResult(now, plan, inputs)
        for listener in self.listeners:
            try:
                await listener.cycle_completed(result)
            except Exception:  # a listener's fault is not the cycle's
                # the cycle was decided and acted on: a failing view of it (the console,
                # the usage history) must not double the interval, nor starve the others
                log.exception("culler: listener %s failed on a cycle", type(listener).__name__)

    async def _load_handoffs(self) -> bool:
        """Read the hand-off records a previous run kept (once per process)."""
        try:
            text = await self._handoff_state.read()
        except StateUnreadable:
            return False  # like any unreadable input: act on nothing
        if text:
            try:
                self._handoffs, reported = handoffs_from_text(text)
                self._reported |= reported
            except (ValueError, TypeError, AttributeError) as e:
                self._handoff_state.unusable(e)
            self._publish_handoffs()
        return True

    async def _save_handoffs(self) -> None:
        """Write the hand-off records when they changed; a failure is retried next cycle."""
        marks = {m for m in self._reported if m[1].startswith("handoff-")}
        await self._handoff_state.write(handoffs_to_text(self._handoffs, marks))

    async def _ask_hub(self, users: Sequence[str]) -> list[dict[str, Any] | None]:
        """The hub's models of ``users``, a few requests at a time."""
        gate = asyncio.Semaphore(self.settings.hub_concurrency)

        async def one(name: str) -> dict[str, Any] | None:
            async with gate:
                return await self.hub.user(name)

        return list(await asyncio.gather(*(one(u) for u in users)))

    def _failed(self, source: str, message: str) -> None:
        self._set_state(failures=self._state.failures + 1, last_error=f"{source}: {message}")
        self.metrics.cycle_errors.labels(source).inc()
        log.warning("culler cycle skipped (nothing acted on): %s: %s", source, message)

    def next_delay(self) -> float:
        """``interval``, doubled per failed cycle in a row, at most ``max_backoff``."""
        s = self.settings
        failures = self._state.failures
        if not failures:
            return s.interval
        return float(min(s.max_backoff, s.interval * (2 ** min(failures, 16))))

    async def run(self) -> None:
        """Cycle until :meth:`stop` is asked for; a stop waits for the cycle under way."""
        while not self._stop_asked.is_set():
            try:
                await self.cycle()
            except Exception:  # keep the service alive; the next cycle retries
                self._set_state(failures=self._state.failures + 1)
                log.exception("culler cycle failed")
            await self._pause(self.next_delay())

    async def _pause(self, seconds: float) -> None:
        """Sleep between cycles; a stop ends the sleep at once."""
        await self._unless_stopping(self.sleep(seconds))

    async def _unless_stopping(self, waiting: Awaitable[T]) -> T | None:
        """``waiting``'s result, or ``None`` as soon as a stop is asked for (it is cancelled)."""
        task = asyncio.ensure_future(waiting)
        asked = asyncio.ensure_future(self._stop_asked.wait())
        try:
            await asyncio.wait({task, asked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            asked.cancel()
            if not task.done():
                task.cancel()
        return task.result() if task.done() and not task.cancelled() else None

    async def stop(self, grace: float) -> bool:
        """Let the cycle under way finish and the webhook posts go out, within ``grace``
        seconds in all; then cancel what is left. A warning is an annotation, an Event and a
        webhook post in turn: stopping between them would leave a user warned in one place
        only. Once a stop is asked for, the cycle begins no stop of a server: a snapshot it
        waits for is given up and the stop put off (:data:`STOPPING`), so the grace is not
        spent waiting; a stop the grace cuts short takes its marks off the pod, given at most
        :data:`CLEAN_UP_SECONDS` more. Returns whether everything finished in time."""
        self._stop_asked.set()
        deadline = time.monotonic() + grace
        cycle = self.task if self.task is not None and not self.task.done() else None
        if not await _finished_by(cycle, deadline):
            log.warning("culler: the cycle under way did not end within %gs: cancelled", grace)
            assert cycle is not None
            await asyncio.wait({cycle}, timeout=CLEAN_UP_SECONDS)
            return False
        posts = None
        if self.notifier is not None and self.notifier.tasks:
            posts = asyncio.ensure_future(self.notifier.drain())
        if not await _finished_by(posts, deadline):
            log.warning("culler: webhook posts still in flight after %gs: dropped", grace)
            for task in list(self.notifier.tasks if self.notifier else ()):
                task.cancel()
            return False
        return True

    # ------------------------------------------------------------------ acting

    async def _act(
        self, d: Decision, pod: PodRef, now: datetime, targets: Mapping[str, Target]
    ) -> None:
        """Carry out one decision, unless it is a dry run, was put off since it was made, or
        its server's user has not been told "saving" for long enough."""
        key = d.workbench.key
        self.metrics.decisions.labels(d.action.value, d.code).inc()
        self._audit(d, now)
        if d.dry_run:
            self._act_dry(d, now)
            return
        why = self._put_off(d, now, targets)
        if why:
            self.store.drop_snapshot(key)
            self._audit_put_off(d, why, now)
            return
        if d.action is Action.RECLAIM and not self._saved_long_enough(d, now):
            self._tell_saving(d, now, targets)
            return
        kept = None
        if d.action is Action.RECLAIM:
            kept = await self._keep_state(d)
            # again: its user may be back meanwhile, or the service is stopping
            why = STOPPING if self._stop_asked.is_set() else self._put_off(d, now, targets)
            if why:
                self.store.drop_snapshot(key)
                self._audit_put_off(d, why, now)
                return
        notice = self._notice(d, now, targets)
        if notice is not None:
            self._noticed.setdefault(key, now)
        try:
            await self._carry_out(d, pod, now, targets, kept)
        except Exception as e:  # noqa: BLE001 - one server's hub or API error must not stop the cycle
            log.warning("culler: %s of %s failed: %s", d.action.value, key, e)
            return
        finally:
            if kept is not None:
                self.store.drop_snapshot(key)
        self.store.set_notice(key, None if d.action is Action.RECLAIM else notice)

    def _notice(self, d: Decision, now: datetime, targets: Mapping[str, Target]) -> Notice | None:
        """The warning its server is shown (for a warning or a countdown), or ``None``."""
        if d.action not in (Action.WARN, Action.WAIT) or d.reclaim_at is None:
            return None
        wb = d.workbench
        return Notice(
            warned_at=wb.warned_at or now,
            reclaim_at=d.reclaim_at,
            reason=wb.warned_reason if wb.warned_at and wb.warned_reason else d.told,
            snoozes_left=d.snoozes_left or 0,
            dry_run=d.dry_run,
            cause=self.cause(d, targets),
        )

    def _act_dry(self, d: Decision, now: datetime) -> None:
        """A dry run's warnings are remembered in memory only; nothing is shown to servers."""
        key = d.workbench.key
        if d.action is Action.WARN:
            self._dry_warned[key] = now
        elif d.action in (Action.SKIP, Action.CLEAR_WARNING, Action.RECLAIM):
            self._dry_warned.pop(key, None)
        self.store.set_notice(key, None)

    def _audit_put_off(self, d: Decision, why: str, now: datetime) -> None:
        record = {
            "event": "culler.put-off",
            "at": isoformat_z(now),
            "action": d.action.value,
            "user": d.workbench.user,
            "server": d.workbench.server,
            "reason": why,
        }
        audit.info(json.dumps(record, sort_keys=True))

    def _tell_saving(self, d: Decision, now: datetime, targets: Mapping[str, Target]) -> None:
        """Its user has not been told "saving" for save_lead (a restarted service has not shown
        the warning yet): tell them now; the stop comes at a later cycle."""
        wb, key = d.workbench, d.workbench.key
        lead = timedelta(seconds=self.settings.save_lead)
        told = self.store.notice(key)
        first = self._noticed.setdefault(key, now)
        self.store.set_notice(
            key,
            Notice(
                warned_at=wb.warned_at or now,
                reclaim_at=max((told.reclaim_at if told else now) - lead, first) + lead,
                reason=wb.warned_reason or d.told,
                snoozes_left=0,
                cause=self.cause(d, targets),
            ),
        )

    async def _carry_out(
        self,
        d: Decision,
        pod: PodRef,
        now: datetime,
        targets: Mapping[str, Target],
        kept: KeptState | None = None,
    ) -> None:
        if d.action is Action.WARN:
            await self._warn(d, pod, now)
        elif d.action is Action.CLEAR_WARNING:
            await self.kube.annotate(
                pod, {WARNED_AT: None, RECLAIM_DEADLINE: None, RECLAIM_REASON: None}
            )
            self._carried_out("withdraw", d, now)  # the warned user's countdown is off
            if d.workbench.warned_at is not None:
                self._withdrawn[d.workbench.key] = (
                    now,
                    {
                        "warned_at": isoformat_z(d.workbench.warned_at),
                        "withdrawn_at": isoformat_z(now),
                    },
                )
        elif d.action is Action.RECLAIM:
            await self._stop(d, pod, now, targets, kept or KeptState(None))

    async def _warn(self, d: Decision, pod: PodRef, now: datetime) -> None:
        """The warning kept on the pod, counted, published, an Event and the webhook."""
        self._withdrawn.pop(d.workbench.key, None)  # a new warning: the last withdrawal is old
        await self.kube.annotate(
            pod,
            {
                WARNED_AT: isoformat_z(now),
                RECLAIM_DEADLINE: isoformat_z(d.reclaim_at or now),
                RECLAIM_REASON: d.told[:MAX_REASON],
            },
        )
        self.metrics.warnings.labels(d.workbench.team or "-").inc()
        self._carried_out("warn", d, now)
        await self._event(pod, "GPUReclaimWarning", d.reason, "Warning", now)
        self._notify("warn", d, now, d.reclaim_at)

    async def _stop(
        self,
        d: Decision,
        pod: PodRef,
        now: datetime,
        targets: Mapping[str, Target],
        kept: KeptState,
    ) -> None:
        """Stop the server through the hub (the pod is never deleted here); while the stop is
        under way a snooze or a busy report is refused with why (``_stopping``).

        The pod is marked as reclaimed (when, for which queued work, what its kernels' snapshot
        kept) before the hub is asked: the hub's spawner reads the marks from the pod it stops
        and tells the user on their next visit. A stop that fails takes the marks off again (a
        marked pod counts as stopping)."""
        wb, key = d.workbench, d.workbench.key
        self._stopping[key] = (
            pod.uid,
            f"this server is being stopped now ({d.told}); decided at"
            f" {isoformat_z(now)}, before this arrived",
        )
        marks = {RECLAIMED_AT: isoformat_z(now)}
        if d.handoff:
            marks[RECLAIMED_FOR] = d.handoff
            work = self._handed_to(d, targets)
            if work is not None and work.team:
                marks[RECLAIMED_FOR_TEAM] = work.team
        kept_mark = kept.mark()
        if kept_mark is not None:
            marks[RECLAIMED_KERNEL_STATE] = kept_mark
        try:
            try:
                await self.kube.annotate(pod, marks)
            except Exception as e:  # noqa: BLE001 - the stop goes on; its user is told less
                log.warning(
                    "culler: could not mark %s as reclaimed before the stop: %s", pod.name, e
                )
            await self.hub.stop_server(wb.user, wb.server)
        except BaseException:  # failed, or cut short by the service's own stop (cancelled)
            # A marked pod counts as stopping: marks on a pod that goes on running would
            # hold its server out of every later decision. Without an answer from the hub the
            # stop may not have happened: take them off (at worst its user is told less).
            del self._stopping[key]
            with contextlib.suppress(Exception):
                await self.kube.annotate(pod, dict.fromkeys(marks))
            raise
        self.metrics.reclaimed.labels(wb.team or "-").inc(float(wb.gpu_equivalents))
        self.metrics.reclaims.labels(wb.team or "-", d.code).inc()
        self._kept_state(d, kept, now)
        if d.handoff:
            self._follow_handoff(d.handoff, targets.get(d.handoff), now)
            self._lent(d, targets.get(d.handoff), now)
        await self._event(pod, "GPUReclaimed", d.reason, "Normal", now)
        self._notify("reclaim", d, now, now)

    def _ask_snapshots(self, plan: Plan, now: datetime, targets: Mapping[str, Target]) -> None:
        """Ask every server this cycle is about to stop, and that keeps kernel state, for a
        snapshot, all at once: the stops then wait for their answers together, so a cycle's
        stops take at most the longest wait more, not one each. Each server's wait grows with
        the state its kernels hold (:func:`~.policy.snapshot_wait`)."""
        if self._policies.snapshot_timeout <= timedelta(0):
            return
        at, started = self.clock(), time.monotonic()
        for d in plan.decisions:
            if (
                d.action is Action.RECLAIM
                and not d.dry_run
                and d.workbench.keeps_state
                and not self._put_off(d, now, targets)
                and self._saved_long_enough(d, now)
            ):
                report = self.store.report(d.workbench.key)
                size = report.activity.kernel_state_bytes if report is not None else None
                wait = snapshot_wait(self._policies, size)
                until = started + wait.total_seconds()
                self.store.ask_snapshot(d.workbench.key, at, wait, wait_until=until)

    async def _keep_state(self, d: Decision) -> KeptState:
        """The server's answer to this cycle's snapshot request, waited for until the
        request's deadline and no longer (not asked: nothing to wait for), nor once the
        service is asked to stop (the stop is then put off: :meth:`stop`)."""
        ask = self.store.snapshot_ask(d.workbench.key)
        if ask is None:
            return KeptState(None)
        started = time.monotonic()
        report = await self._unless_stopping(
            self.store.wait_snapshot(d.workbench.key, ask.wait_until - started)
        )
        return KeptState(
            ask.requested_at,
            report,
            timeout=ask.deadline - ask.requested_at,
            waited=timedelta(seconds=time.monotonic() - started),
        )

    def _kept_state(self, d: Decision, kept: KeptState, now: datetime) -> None:
        """Record a reclaim with what it kept of its kernels: counted per kernel and per
        session, one audit line, and the console's journal (its row says "state kept", "state
        kept with losses" or "state lost", the words name each notebook's losses)."""
        wb = d.workbench
        for outcome in kept.outcomes:
            self.metrics.kernel_states.labels(outcome.outcome).inc()
        self.metrics.reclaim_states.labels(kept.result).inc()
        if kept.asked:
            audit.info(
                json.dumps(kept.record(user=wb.user, server=wb.server, at=now), sort_keys=True)
            )
            result = {
                "kept": "state kept",
                "kept_with_losses": "state kept with losses",
                "interrupted": "state lost",
            }[kept.result]
            self._carried_out("reclaim", d, now, result=result, words=kept.words())
        else:
            self._carried_out("reclaim", d, now)

    def _follow_handoff(self, workload: str, target: Target | None, now: datetime) -> None:
        """Record the reclaim for ``workload``: its admission is verified from the next cycle
        (one record per ClusterQueue; a batch's later stops keep the first one's time)."""
        if target is None:
            return
        cq = target.workload.cluster_queue
        record = self._handoffs.get(cq)
        if record is None or record.workload != workload or record.admitted_at is not None:
            self._handoffs[cq] = HandOffRecord(
                workload=workload, cluster_queue=cq, reclaimed_at=now, team=target.workload.team
            )
            self._publish_handoffs()

    def _put_off(self, d: Decision, now: datetime, targets: Mapping[str, Target]) -> str:
        """Why a warning, a running countdown or a stop decided this cycle is not carried out:
        its user (or, for a demand batch, a member's user) pressed "Keep my GPU" since, or a
        busy report came in since (not for ``max-age``, a hard cap). ``""``: carry it out.

        A countdown (``wait``) counts too: carried out, it would put back the warning that the
        press has just withdrawn, and the banner would show it again."""
        if d.action not in (Action.WARN, Action.WAIT, Action.RECLAIM):
            return ""
        target = targets.get(d.handoff) if d.handoff else None
        keys = [d.workbench.key]
        if d.action is Action.RECLAIM and target is not None:
            keys += [k for k in target.workbenches if k != d.workbench.key]
        for key in keys:
            if key in self._kept:
                who = "its user" if key == d.workbench.key else f"the user of {key} (same batch)"
                return f"kept by {who} after this cycle's decision"
        policy = self._policies.policy_for(
            team=d.workbench.team,
            kind=d.workbench.kind,
            offering=d.workbench.offering,
            user=d.workbench.user,
            groups=d.workbench.groups,
        )
        if d.code == "max-age" or (policy is not None and policy.busy_signal == "gpu"):
            return ""
        report = self.store.report(d.workbench.key)
        if report is not None and report.received_at > now:
            activity = report.activity
            if activity.idle_since is None or any(k.busy for k in activity.kernels):
                return "a busy activity report arrived after this cycle's decision"
        return ""

    def _saved_long_enough(self, d: Decision, now: datetime) -> bool:
        """Whether a warned server's user has been told "saving" for ``save_lead`` (by this
        process: a restarted service tells them again before it stops anything)."""
        if d.workbench.warned_at is None or d.dry_run:
            return True  # never warned (warn_before: 0): nothing to save for
        notice, first = self.store.notice(d.workbench.key), self._noticed.get(d.workbench.key)
        if notice is None or first is None:
            return False
        lead = timedelta(seconds=self.settings.save_lead)
        return now >= max(notice.reclaim_at - lead, first) + lead

    def cause(self, d: Decision, targets: Mapping[str, Target]) -> api.ServiceReclaimCause:
        """A warning's cause in plain fields, for the banner's words: the queued work of the
        user's own team by its name (a Job's, where Kueue names its owner), another team's by
        its team's display name only, ``""`` where it has none (as
        :attr:`Decision.user_reason`)."""
        wb = d.workbench
        policy = self._policies.policy_for(
            team=wb.team, kind=wb.kind, offering=wb.offering, user=wb.user, groups=wb.groups
        )
        limits: dict[str, timedelta | None] = (
            {
                "max-idle": policy.max_idle,
                "max-age": policy.max_age,
                "always": policy.idle_threshold(wb.keeps_state),
            }
            if policy is not None
            else {}
        )
        cap = limits.get(d.code)
        cause: api.ServiceReclaimCause = {
            # a warning's codes (Decision.code is a str: the document lists what it may be)
            "code": cast("Literal['demand', 'always', 'max-idle', 'max-age', 'placement']", d.code),
            "kind": wb.kind,
            "offering": wb.offering,
            "idle_seconds": int(wb.idleness.idle_for(self.clock()).total_seconds())
            if wb.idleness.state is State.IDLE
            else None,
            "limit_seconds": int(cap.total_seconds()) if cap is not None else None,
            "for": None,
        }
        work = self._handed_to(d, targets)
        if work is not None:
            cause["for"] = self._work_for(wb.team, work)
        return cause

    def _handed_to(self, d: Decision, targets: Mapping[str, Target]) -> HandedTo | None:
        """The work a decision frees its GPU for: the queued workload it is a target of, or
        the admitted Job waiting for the card this share is on; None without a hand-off."""
        if not d.handoff:
            return None
        target = targets.get(d.handoff)
        if target is not None:
            wl = target.workload
            return HandedTo(wl.team, wl.namespace, wl.name)
        placement = self._placements.get(d.handoff)
        if placement is not None:
            wait = placement.wait
            return HandedTo(wait.team, wait.namespace, wait.workload)
        return None

    def _work_for(
        self, own: str, work: HandedTo
    ) -> api.ServiceReclaimCauseForOwn | api.ServiceReclaimCauseForOther:
        """Whose work a cause names: the user's own team's by the object a Workload is for (a
        Job's name, where Kueue names its owner), another team's by its display name only."""
        team, namespace, workload = work
        if not team or team != own:
            return {"team": "other", "name": self.settings.team_names.get(team, "")}
        for obj in self.view.workloads(namespace):
            info = read_workload(obj)
            if info.name == workload:
                name, kind = info.owner_name or workload, info.owner_kind or "Workload"
                return {"team": "own", "name": name, "object": kind}
        return {"team": "own", "name": workload, "object": "Workload"}

    def _publish(self, event: LoopEvent) -> None:
        for listener in self.listeners:
            listener.happened(event)

    def _carried_out(
        self,
        kind: Literal["warn", "withdraw", "reclaim"],
        d: Decision,
        now: datetime,
        *,
        result: str = "",
        words: str = "",
    ) -> None:
        self._publish(
            LoopEvent(
                kind=kind,
                at=now,
                workbench=d.workbench,
                reason=f"{d.reason}; {words}" if words else d.reason,
                workload=d.handoff or "",
                result=result,
                dry_run=d.dry_run,
            )
        )

    def _lent(self, d: Decision, target: Target | None, now: datetime) -> None:
        """A reclaim for another team's queued work: the console's journal notes whose quota
        went to whom (a team lead sees their lent quota taken back for a borrower)."""
        wb = d.workbench
        borrower = target.workload.team if target is not None else ""
        if not borrower or not wb.team or borrower == wb.team:
            return
        self._publish(
            LoopEvent(
                kind="lent",
                at=now,
                workbench=wb,
                reason=f"{wb.team}'s quota held by {wb.key}'s idle server went to queued work of"
                f" {borrower} ({d.handoff})",
                workload=d.handoff or "",
                team=borrower,
                dry_run=d.dry_run,
            )
        )

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
                    "reason": d.told,
                    "reclaim_at": isoformat_z(at) if at is not None else None,
                    "at": isoformat_z(now),
                    "handoff": d.handoff,
                    "dry_run": d.dry_run,
                }
            )
        except Exception as e:  # noqa: BLE001 - a notice is a courtesy; never the cycle's end
            log.warning("culler: notifying %s of %s failed: %s", kind, wb.key, e)

    async def _event(
        self, pod: PodRef, reason: str, message: str, type_: str, now: datetime
    ) -> None:
        try:
            await self.kube.event(pod, reason, message, type_, at=now)
        except Exception as e:  # noqa: BLE001 - Events are a courtesy; the log is the record
            log.warning("culler: Event %s on %s/%s failed: %s", reason, pod.namespace, pod.name, e)

    def _audit(self, d: Decision, now: datetime) -> None:
        seen = self._seen.get(d.workbench.key)
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
        for cq, record in list(self._handoffs.items()):
            if record.admitted_at is None and record.workload not in by_key:
                # Deleted (or finished and removed) before it was seen admitted: nothing left
                # to hand off to, and nothing to block the queue for.
                del self._handoffs[cq]
                _audit_handoff(
                    record.workload, cq, "gone", f"{record.workload} no longer exists", None, now
                )
                continue
            if record.admitted_at is None:
                found = by_key.get(record.workload)
                if found is not None and (found.admitted or found.quota_reserved):
                    cond = found.conditions.get("Admitted") or found.conditions.get("QuotaReserved")
                    when = (cond.last_transition_time if cond else None) or now
                    record = replace(
                        record, cluster_queue=cq, admitted_at=max(when, record.reclaimed_at)
                    )
                    self._handoffs[cq] = record
            result = assess_handoff(record, now=now, timeout=self._policies.handoff_timeout)
            if result.status is HandOffStatus.WAITING:
                continue
            mark = (record.workload, "handoff-" + result.status.value)
            if mark not in self._reported:
                self._reported.add(mark)
                self.metrics.handoffs.labels(result.status.value).inc()
                if result.latency is not None:
                    self.metrics.handoff_latency.observe(result.latency.total_seconds())
                latency = result.latency.total_seconds() if result.latency is not None else None
                _audit_handoff(
                    record.workload, cq, result.status.value, result.reason, latency, now
                )
                self._publish(
                    LoopEvent(
                        kind="handoff",
                        at=now,
                        team=record.team,
                        reason=result.reason,
                        workload=record.workload,
                        result=result.status.value,
                        latency_seconds=latency,
                    )
                )
        self._publish_handoffs()

    # ------------------------------------------------------------------ asked by servers

    def stop_under_way(self, user: str, server: str) -> str:
        """Why this server's current pod is being stopped now, or ``""``."""
        key = server_key(user, server)
        entry, seen = self._stopping.get(key), self._seen.get(key)
        if entry is None or (seen is not None and seen.pod.uid != entry[0]):
            return ""
        return entry[1]

    def report_asks(self, user: str, server: str, now: datetime) -> ReportAsks:
        """What the answer to a server's activity report asks of it besides the warning:
        ``snapshot`` (save every kernel's variables now, within ``deadline_seconds``, and report
        at once) while the stop step waits for it, and ``report_again_in`` (seconds) for a warned
        server that keeps kernel state, so that it hears the request in time."""
        if self._policies.snapshot_timeout <= timedelta(0):
            return {}
        key = server_key(user, server)
        asks: ReportAsks = {}
        ask = self.store.snapshot_ask(key)
        if ask is not None and ask.answer is None:
            asks["snapshot"] = ask.request(now).to_json()
        report = self.store.report(key)
        again = report_again_in(
            self.store.notice(key),
            keeps_state=report is not None and report.activity.keeps_kernel_state,
            now=now,
            save_lead=timedelta(seconds=self.settings.save_lead),
        )
        if again is not None:
            asks["report_again_in"] = round(again, 1)
        return asks

    def warning_for(
        self, user: str, server: str, now: datetime | None = None
    ) -> api.ServiceReclaim:
        """The ``api/reclaim`` answer for one server; its warning says whether the stop will
        save the kernels' variables first (``keeps_kernel_state``), so that the sidebar words
        what is lost as it will be."""
        now = now or self.clock()
        key = server_key(user, server)
        notice = self.store.notice(key)
        if notice is None:
            answer: api.ServiceReclaim = {
                "server": server,
                "now": isoformat_z(now),
                "warning": None,
            }
            withdrawn_at, withdrawn = self._withdrawn.get(key, (None, None))
            if withdrawn_at is not None and now - withdrawn_at < WITHDRAWAL_SHOWN:
                answer["withdrawn"] = withdrawn
            return answer
        return {
            "server": server,
            "now": isoformat_z(now),
            "warning": {
                **notice.payload(now, timedelta(seconds=self.settings.save_lead)),
                "keeps_kernel_state": self.keeps_kernel_state(key),
            },
        }

    def keeps_kernel_state(self, key: str) -> bool:
        """Whether the stop of server ``key`` asks it to save its kernels' variables first: its
        reports say it keeps kernel state, and the policies give a snapshot time."""
        report = self.store.report(key)
        return (
            self._policies.snapshot_timeout > timedelta(0)
            and report is not None
            and report.activity.keeps_kernel_state
        )

    async def snooze(self, user: str, server: str) -> SnoozeResult:
        """ "Keep my GPU": allowed up to the policy's ``max_snoozes``; kept on the pod. A press
        that arrives while a cycle runs wins over its decision; one that arrives while the stop
        is under way is refused with why (``_stopping``)."""
        key = server_key(user, server)
        under_way = self.stop_under_way(user, server)
        if under_way:
            return SnoozeResult(False, under_way)
        seen = self._seen.get(key)
        if seen is None:
            return SnoozeResult(False, "this server is not known to the culler (yet)")
        wb = self._kept.get(key, seen.workbench)
        policy = self._policies.policy_for(
            team=wb.team, kind=wb.kind, offering=wb.offering, user=wb.user, groups=wb.groups
        )
        now = self.clock()
        result = snooze(wb, policy, now=now)
        if not result.allowed or result.until is None:
            return result
        used = wb.snoozes_used + 1
        kept = replace(
            wb, snoozes_used=used, snoozed_until=result.until, warned_at=None, warned_deadline=None
        )
        # Before any await: a cycle between its decision and its stop sees this press (a stop
        # waiting for the server's snapshot stops waiting).
        before = self._kept.get(key)
        self._kept[key] = kept
        self.store.drop_snapshot(key)
        try:
            await self.kube.annotate(
                seen.pod,
                {
                    SNOOZES_USED: str(used),
                    SNOOZED_UNTIL: isoformat_z(result.until),
                    WARNED_AT: None,
                    RECLAIM_DEADLINE: None,
                    RECLAIM_REASON: None,
                },
            )
        except Exception:
            if before is None:
                self._kept.pop(key, None)
            else:
                self._kept[key] = before
            raise
        self._seen[key] = _Seen(kept, seen.pod, seen.last)
        self.store.set_notice(key, None)
        self._publish(LoopEvent(kind="snooze", at=now, workbench=wb, reason=result.reason))
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


def team_display_names(tenants: Iterable[Tenant]) -> dict[str, str]:
    """The catalog's display name of a team by each name its work goes by in a cycle: the
    tenant's name (its servers' team label), its LocalQueue (queued work in the notebook
    namespace) and its Jobs' namespace (:func:`.gather.pending_workloads`). A tenant's name is
    its own; a LocalQueue or namespace that two teams share names neither (the words fall
    back to "another team")."""
    tenants = list(tenants)
    names = {t.name: t.display_name for t in tenants}
    aliases: dict[str, set[str]] = {}
    for t in tenants:
        for alias in (t.local_queue, t.jobs.namespace if t.jobs is not None else ""):
            if alias and alias not in names:
                aliases.setdefault(alias, set()).add(t.display_name)
    return names | {a: next(iter(d)) for a, d in aliases.items() if len(d) == 1}


def _audit_handoff(
    workload: str,
    cluster_queue: str,
    result: str,
    reason: str,
    latency: float | None,
    now: datetime,
) -> None:
    """One audit line per hand-off outcome (``gone``, ``succeeded``, ``failed``)."""
    record = {
        "event": "culler.handoff",
        "at": isoformat_z(now),
        "workload": workload,
        "cluster_queue": cluster_queue,
        "result": result,
        "reason": reason,
        "latency_seconds": latency,
    }
    audit.info(json.dumps(record, sort_keys=True))


async def _finished_by(task: asyncio.Future[Any] | None, deadline: float) -> bool:
    """Whether ``task`` (none: nothing to wait for) ends by the ``time.monotonic`` deadline;
    cancelled when it does not."""
    if task is None:
        return True
    done, _ = await asyncio.wait({task}, timeout=max(0.0, deadline - time.monotonic()))
    if not done:
        task.cancel()
    return bool(done)

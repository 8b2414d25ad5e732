"""The policies replayed on the same trace.

- :class:`Static` (a): a notebook keeps its GPU until its session ends.
- :class:`IdleCuller` (b): jupyterhub-idle-culler's semantics: every ``every`` seconds, stop a
  server whose hub ``last_activity`` (kernel and terminal activity, pushed by the server every
  300 s) is older than ``timeout``; no warning, no look at the queue.
- :class:`Gpuaas` (c, d): the project's own reclaim loop
  (:class:`gpuaas_service.reclaim.loop.ReclaimLoop`)
  with its policy file, driven by the simulated clock: each cycle it reads simulated pods, Kueue
  objects and activity reports through the same interfaces it reads the real ones, and the
  hub's DELETE is the simulated server stop. (d) is (c) with users taking fractional offerings.
- :class:`Oracle` (e): a GPU only while a burst computes, no restore cost: the upper bound.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from . import brain
from .sim import NOTEBOOK_NAMESPACE, SNOOZE_PROBABILITY, Policy, SessionState, Simulation
from .world import Workload

BASE = datetime(2026, 1, 5, tzinfo=timezone.utc)
"""Midnight of the first measured day (a Monday); trace time 0 is ``burn_in`` before it."""
ACTIVITY_POST_S = 300.0
"""jupyterhub-singleuser posts its last activity to the hub every 300 s
(``JUPYTERHUB_ACTIVITY_INTERVAL``); the idle-culler sees the hub's figure."""
REPORT_INTERVAL_S = 60.0
"""``GPUaaS.activity_report_interval`` default: the server reports its activity this often."""


class Static(Policy):
    name = "static"


class IdleCuller(Policy):
    def __init__(self, timeout_s: float, every_s: float, name: str) -> None:
        self.timeout_s = timeout_s
        self.every_s = every_s
        self.name = name

    def start(self) -> None:
        self.sim.at(self.every_s, self.cycle)

    def cycle(self) -> None:
        sim = self.sim
        now = sim.now
        sim.cycles += 1
        for state in list(sim.running_sessions()):
            if state.phase != "running":
                continue
            posted = now - (now - state.ready_at) % ACTIVITY_POST_S
            last = max(state.ready_at, state.last_activity(posted) or state.ready_at)
            if now - last > self.timeout_s:
                sim.stop_server(state, code="idle-culler", handoff=None)
        sim.at(now + self.every_s, self.cycle)


class Oracle(Policy):
    name = "oracle"
    oracle = True


def iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _World:
    """The simulated hub, Kubernetes and Kueue, as the reclaim loop's collaborators."""

    def __init__(self, policy: Gpuaas) -> None:
        self.policy = policy
        self.saved: dict[tuple[str, str], str] = {}
        self._wl_cache: dict[tuple[str, float | None, str], dict[str, Any]] = {}
        self._state_cache: tuple[int, brain.QueueState] | None = None
        self._groups: dict[str, list[str]] | None = None
        self._info_cache: dict[tuple[str, float | None, str], Any] = {}

    @property
    def sim(self) -> Simulation:
        return self.policy.sim

    def _state(self, user: str, server: str) -> SessionState | None:
        state = self.sim.sessions.get(server)
        return state if state is not None and state.session.user == user else None

    # -- Hub

    async def user(self, name: str) -> dict[str, Any] | None:
        servers = {}
        team = ""
        for state in self.sim.running_sessions():
            if state.session.user != name:
                continue
            team = state.session.team
            servers[state.session.name] = {
                "name": state.session.name,
                "ready": state.phase == "running",
                "pending": None if state.phase == "running" else "spawn",
                "started": iso(self.policy.clock_at(state.requested_at)),
            }
        return {"name": name, "groups": [team] if team else [], "servers": servers}

    async def group_members(self) -> dict[str, list[str]]:
        # Users never change teams in a trace: built once, not from every session per cycle.
        if self._groups is None:
            self._groups = {s.session.user: [s.session.team] for s in self.sim.sessions.values()}
        return self._groups

    async def stop_server(self, user: str, server: str) -> int:
        state = self._state(user, server)
        if state is None or state.phase != "running":
            return 404
        # The decision's code and hand-off come with the cycle's plan (see Gpuaas._follow).
        self.sim.stop_server(state, code="", handoff=None, emit=False)
        return 202

    # -- Kubernetes

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        return self.pods()

    async def annotate(self, pod: brain.PodRef, annotations: Mapping[str, str | None]) -> None:
        state = self.policy.by_pod.get(pod.name)
        if state is None:
            return
        for k, v in annotations.items():
            if v is None:
                state.annotations.pop(k, None)
            else:
                state.annotations[k] = v

    async def event(
        self, pod: brain.PodRef, reason: str, message: str, type_: str, *, at: datetime
    ) -> None:
        return None

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]:
        return {f: [dict(t) for t in taints] for f, taints in self.sim.org.flavor_taints.items()}

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        return {f: dict(labels) for f, labels in self.sim.org.flavor_labels.items()}

    async def read_state(self, namespace: str, name: str) -> str | None:
        return self.saved.get((namespace, name))

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        self.saved[(namespace, name)] = text

    def pods(self) -> list[dict[str, Any]]:
        out = []
        by_pod = self.policy.by_pod
        by_pod.clear()
        placement = self.sim.placement
        for state in self.sim.running_sessions():
            wl = state.workload
            if wl is None:
                continue
            name = wl.name
            by_pod[name] = state
            started = iso(self.policy.clock_at(state.requested_at))
            offering = state.offering
            gpu = {r: str(n) for r, n in offering.requests(1).items()}
            out.append(
                {
                    "metadata": {
                        "name": name,
                        "namespace": NOTEBOOK_NAMESPACE,
                        "uid": wl.uid,
                        "creationTimestamp": started,
                        "labels": {
                            "component": "singleuser-server",
                            brain.TEAM_LABEL: state.session.team,
                            brain.OFFERING_LABEL: offering.slug,
                            brain.QUEUE_NAME_LABEL: wl.local_queue,
                        },
                        "annotations": {
                            brain.HUB_USERNAME_ANNOTATION: state.session.user,
                            brain.HUB_SERVERNAME_ANNOTATION: state.session.name,
                            **state.annotations,
                            **(placement.annotations(wl.key) if placement else {}),
                        },
                    },
                    "spec": {
                        "nodeSelector": dict(offering.node_selector),
                        "tolerations": [dict(t) for t in offering.tolerations],
                        "containers": [
                            {
                                "name": "notebook",
                                "resources": {"requests": gpu, "limits": dict(gpu)},
                                "env": [{"name": "GPUAAS_OFFERING_KIND", "value": offering.kind}],
                            }
                        ],
                    },
                    "status": {
                        "phase": "Running",
                        "startTime": started,
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True" if state.phase == "running" else "False",
                            }
                        ],
                    },
                }
            )
        return out

    async def job_pods(self) -> list[dict[str, Any]]:
        """The training Jobs' pods on the pools' cards, and those waiting for whole cards."""
        sim = self.sim
        if sim.placement is None:
            return []
        waiting = [wl for wl, _since in sim.unplaced.values()]
        return sim.placement.job_pods(sim.kueue.admitted.values(), waiting)

    # -- Kueue (the watch caches' view)

    def queue_state(self) -> brain.QueueState:
        # The watch caches' objects change only when Kueue's usage does.
        version = self.sim.kueue.version
        if self._state_cache is not None and self._state_cache[0] == version:
            return self._state_cache[1]
        org = self.sim.org
        state = brain.QueueState(
            cluster_queues={
                str(o["metadata"]["name"]): brain.read_cluster_queue(o)
                for o in self.sim.kueue.cluster_queue_objects()
            },
            cohorts={str(o["metadata"]["name"]): brain.read_cohort(o) for o in org.cohort_objects},
            local_queues={
                (str(o["metadata"]["namespace"]), str(o["metadata"]["name"])): (
                    brain.read_local_queue(o)
                )
                for o in org.local_queue_objects
            },
        )
        self._state_cache = (version, state)
        return state

    def workload_object(self, wl: Workload) -> dict[str, Any]:
        cache_key = (wl.key, wl.admitted_at, wl.uid)
        cached = self._wl_cache.get(cache_key)
        if cached is not None:
            return cached
        created = iso(self.policy.clock_at(wl.created))
        counted = {r: str(n) for r, n in wl.requests.items()}
        requests = {r: str(n) for r, n in (wl.pod_requests or wl.requests).items()}
        if wl.admitted_at is None:
            conditions = [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": ""}
            ]
            # What Kueue writes once it has tried the Workload (after its transformations).
            status: dict[str, Any] = {
                "conditions": conditions,
                "resourceRequests": [{"name": "main", "resources": counted}],
            }
        else:
            at = iso(self.policy.clock_at(wl.admitted_at))
            status = {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True", "lastTransitionTime": at},
                    {"type": "Admitted", "status": "True", "lastTransitionTime": at},
                ],
                "admission": {
                    "clusterQueue": wl.cluster_queue,
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "flavors": {r: wl.flavor for r in counted},
                            "resourceUsage": counted,
                        }
                    ],
                },
            }
        obj = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {
                "name": wl.name,
                "namespace": wl.namespace,
                "uid": wl.uid,
                "creationTimestamp": created,
                "labels": {},
            },
            "spec": {
                "queueName": wl.local_queue,
                "priority": wl.priority,
                "priorityClassRef": {"name": wl.priority_class},
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {
                                "nodeSelector": dict(wl.node_selector),
                                "tolerations": [dict(t) for t in wl.tolerations],
                                "containers": [
                                    {"name": "main", "resources": {"requests": requests}}
                                ],
                            }
                        },
                    }
                ],
            },
            "status": status,
        }
        if len(self._wl_cache) > 50_000:
            self._wl_cache.clear()
        self._wl_cache[cache_key] = obj
        return obj

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        """The pending Workloads and those the loop follows a hand-off for: the loop looks at
        no other admitted one, so listing all of them would change nothing but the cost."""
        kueue = self.sim.kueue
        followed = {r.workload for r in self.policy.loop.state.handoffs.values()}
        out: list[Mapping[str, Any]] = [
            self.workload_object(kueue.admitted[k])
            for k in followed
            if k in kueue.admitted and kueue.admitted[k].namespace == namespace
        ]
        for queue in kueue.pending.values():
            out += [self.workload_object(w) for w in queue if w.namespace == namespace]
        return out

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> Any:
        wl = self.sim.kueue.admitted.get(f"{namespace}/{pod_name}")
        if wl is None:
            return None
        # Read once per admission, as a watch cache would keep it (was re-read every cycle).
        key = (wl.key, wl.admitted_at, wl.uid)
        info = self._info_cache.get(key)
        if info is None:
            if len(self._info_cache) > 50_000:
                self._info_cache.clear()
            info = self._info_cache[key] = brain.read_workload(self.workload_object(wl))
        return info

    def pending_items(self, namespace: str, local_queue: str) -> None:
        return None  # no visibility API: the loop takes creation order, as when it is off


def activity_payload(
    state: SessionState, sent: float, clock_at: Callable[[float], datetime]
) -> dict[str, Any]:
    """The activity payload a server sends at ``sent`` (trace seconds) from the session's
    realised activity, as the server extension builds it (docs/api.md); ``clock_at`` maps
    trace seconds to the culler's clock (the simulated one, or the wall clock of the
    dev-cluster check)."""
    busy, utilization = state.busy_at(sent)
    kernel_last = state.last_activity(sent, ("gpu", "cpu", "restore"))
    terminal_last = state.last_activity(sent, ("terminal",))
    gpu_util = []
    if state.offering.kind == "gpu":
        gpu_util = [{"uuid": "GPU-sim", "utilization": 100 * utilization if busy else 0}]
    # as build_activity judges it: none while busy, else the latest activity (or the start)
    latest = max((t for t in (kernel_last, terminal_last) if t is not None), default=None)
    idle_since = None if busy else iso(clock_at(state.ready_at if latest is None else latest))
    return {
        "source": "nvml",
        "error": None,
        "sampled_at": iso(clock_at(sent)),
        "kernels": [
            {
                "kernel_id": "k-" + state.session.name,
                "execution_state": "busy" if busy else "idle",
                "last_activity": iso(clock_at(kernel_last or state.ready_at)),
                "connections": 1,
                "gpu_memory": 1 << 30,
            }
        ],
        "terminals": (
            [{"name": "1", "last_activity": iso(clock_at(terminal_last))}]
            if terminal_last is not None
            else []
        ),
        "gpu_memory": 1 << 30,
        "gpu_utilization": gpu_util,
        "idle_since": idle_since,
        **({"keeps_kernel_state": True} if state.keeps_state else {}),
    }


class Gpuaas(Policy):
    """The project's reclaim loop as the culler; ``policies`` is the policy file, loaded."""

    def __init__(
        self,
        policies: brain.PolicySet,
        *,
        name: str = "gpuaas",
        interval: float = 30.0,
        skip_quiet: bool = True,
    ):
        self.policies = policies
        self.name = name
        self.interval = interval
        self.skip_quiet = skip_quiet
        self._last_cycle = 0.0
        self._last_acted = True
        self._last_signature: tuple[int, int] = (-1, -1)
        """Skip a cycle in which the loop can have nothing to do (see :meth:`_quiet`): the cost
        then grows with events, not with simulated seconds; the tests check it changes nothing."""
        self.by_pod: dict[str, SessionState] = {}
        self._sent: dict[str, tuple[float, float]] = {}
        """Per server, the report last handed to the store (its send time, the server's start):
        a report is recorded once, as the server sends it once."""
        self.handed_off: set[tuple[str, str]] = set()

    def attach(self, sim: Simulation) -> None:
        super().attach(sim)
        self.base = BASE - timedelta(seconds=sim.trace.burn_in_s)
        self.world = _World(self)
        teams = sorted({ns for ns, _lq in sim.org.local_queues if ns != NOTEBOOK_NAMESPACE})
        self.loop = brain.ReclaimLoop(
            hub=self.world,
            kube=self.world,
            view=self.world,
            policies=self.policies,
            store=brain.ActivityStore(),
            settings=brain.Settings(
                notebook_namespace=NOTEBOOK_NAMESPACE,
                job_namespaces=tuple(teams),
                interval=self.interval,
            ),
            metrics=brain.Metrics(),
            clock=lambda: self.clock_at(self.sim.now),
            feeds=brain.Feeds(pods=self.world.pods, job_pods=self.world.job_pods),
        )
        self.aio = asyncio.new_event_loop()
        self.rng = random.Random(f"snooze/{sim.trace.seed}")

    def clock_at(self, t: float) -> datetime:
        return self.base + timedelta(seconds=t)

    def start(self) -> None:
        self.sim.at(self.interval, self.cycle)

    def _report(self, state: SessionState, now: float) -> tuple[dict[str, Any], float]:
        """The activity payload the server last sent (every 60 s since it started)."""
        sent = now - (now - state.ready_at) % REPORT_INTERVAL_S
        return activity_payload(state, sent, self.clock_at), sent

    def _signature(self) -> tuple[int, int]:
        # Usage and the pending queues each carry a counter bumped at every change.
        kueue = self.sim.kueue
        return kueue.version, kueue.pending_version

    def _quiet(self, now: float) -> bool:
        """The loop can have nothing new to act on, so this cycle is skipped: no warning under
        way; no hand-off that may end now (each waits with the queues and quota as at the
        last cycle, which acted on nothing, and its timeout not due); either no queued GPU
        work or the same queue and quota as at the last cycle, which acted on nothing; and no
        server crosses a threshold of its policy (``idle_after``, ``max_idle``, ``max_age``;
        read from the policy file) since then. Activity in between only makes servers less
        idle."""
        sim = self.sim
        pending = any(queue for queue in sim.kueue.pending.values())
        if pending and (self._last_acted or self._signature() != self._last_signature):
            return False
        waiting = [r for r in self.loop.state.handoffs.values() if r.admitted_at is None]
        if waiting and (
            self._last_acted
            or self._signature() != self._last_signature
            or any(self._handoff_due(r.reclaimed_at, now) for r in waiting)
        ):
            return False  # a hand-off may be admitted, or fail by its timeout, in this cycle
        if any(wl.kind == "training" for wl, _since in sim.unplaced.values()):
            return False  # a Job waits for whole cards: idle shares may free one
        return not any(self._may_act_on(state, now, pending) for state in sim.running_sessions())

    def _handoff_due(self, reclaimed_at: datetime, now: float) -> bool:
        """Whether a hand-off not admitted times out between the last cycle run and the next
        (it then fails, and its queue is blocked or served again); one the last cycle saw
        fail stays failed whatever the time."""
        deadline = (reclaimed_at + self.policies.handoff_timeout - self.base).total_seconds()
        return self._last_cycle <= deadline < now + self.interval

    def _may_act_on(self, state: SessionState, now: float, pending: bool) -> bool:
        """Whether the loop may act on this session now: it is warned or annotated, or one of
        its policy's thresholds falls due about now, or fell due while it was active since
        the last cycle."""
        if state.warned_reclaim_at is not None or state.annotations:
            return True
        if state.phase != "running":
            return False
        o = state.offering
        policy = self.policies.policy_for(
            team=state.session.team,
            kind=o.kind,
            offering=o.slug,
            user=state.session.user,
            groups=(state.session.team,),
        )
        if policy is None:
            return False
        since = self._last_cycle
        last = max(state.ready_at, state.last_activity(now) or state.ready_at)
        thresholds = [policy.max_idle]
        if pending or policy.reclaim == "always":
            thresholds.append(policy.idle_after)
        due = [last + p.total_seconds() for p in thresholds if p is not None]
        if policy.max_age is not None:
            due.append(state.requested_at + policy.max_age.total_seconds())
        if any(since - self.interval <= d <= now + self.interval for d in due):
            return True
        return any(d <= now and last > since - self.interval for d in due)

    def cycle(self) -> None:
        sim = self.sim
        now = sim.now
        if self.skip_quiet and self._quiet(now):
            sim.counters["quiet_cycles"] = sim.counters.get("quiet_cycles", 0) + 1
            sim.at(now + self.interval, self.cycle)
            return
        sim.cycles += 1
        store = self.loop.store
        for state in sim.running_sessions():
            if state.phase != "running":
                continue
            sent = now - (now - state.ready_at) % REPORT_INTERVAL_S
            if self._sent.get(state.session.name) == (sent, state.ready_at):
                continue  # the same report as at the last cycle
            self._sent[state.session.name] = (sent, state.ready_at)
            payload, sent = self._report(state, now)
            store.record(state.session.user, state.session.name, payload, self.clock_at(sent))
        before = len(sim.reclaims)
        plan = self.aio.run_until_complete(self.loop.cycle())
        self._last_cycle = now
        self._last_signature = self._signature()
        self._last_acted = plan is None or bool(plan.to_act_on())
        if plan is not None:
            self._follow(plan, before)
        for record in sim.reclaims[before:]:
            sim.emit_reclaim(record)
        sim.at(now + self.interval, self.cycle)

    def _follow(self, plan: brain.Plan, before: int) -> None:
        """Record what the cycle did: warnings given, reclaims' causes, hand-offs completed."""
        sim = self.sim
        stopped = {r["session"]: r for r in sim.reclaims[before:]}
        for d in plan.decisions:
            state = sim.sessions.get(d.workbench.server)
            if state is None or d.dry_run:
                continue
            if d.action is brain.Action.WARN and d.reclaim_at is not None:
                state.warned_reclaim_at = (d.reclaim_at - self.base).total_seconds()
                sim.warnings += 1
                sim.emit(
                    "warning",
                    session=state.session.name,
                    workload=state.workload.key if state.workload else None,
                    reclaim_at=round(state.warned_reclaim_at, 3),
                    code=d.code,
                    handoff=d.handoff,
                )
            elif d.action is brain.Action.CLEAR_WARNING:
                state.warned_reclaim_at = None
                sim.emit("clear_warning", session=state.session.name)
            elif d.action is brain.Action.RECLAIM and state.session.name in stopped:
                stopped[state.session.name]["code"] = d.code
                stopped[state.session.name]["handoff"] = d.handoff
        for record in self.loop.state.handoffs.values():
            mark = (record.workload, str(record.reclaimed_at))
            if record.admitted_at is not None and mark not in self.handed_off:
                self.handed_off.add(mark)
                latency = (record.admitted_at - record.reclaimed_at).total_seconds()
                sim.handoffs.append(latency)
                sim.emit("handoff", workload=record.workload, latency=latency)

    def warned(self, state: SessionState) -> None:
        """The warned user is at work: "Keep my GPU" (snooze) or simply carry on."""
        if self.rng.random() >= SNOOZE_PROBABILITY:
            return
        result = self.aio.run_until_complete(
            self.loop.snooze(state.session.user, state.session.name)
        )
        if result.allowed and result.until is not None:
            state.warned_reclaim_at = None
            self.sim.snoozes += 1
            self.sim.emit("snooze", session=state.session.name, until=iso(result.until))

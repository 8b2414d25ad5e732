"""The discrete-event replay: one trace, one policy, one organisation → a :class:`Result`.

The world (Kueue's admission, servers starting and stopping, users working, training jobs
running) is simulated here; for the gpuaas policies the decisions come from the project's own
reclaim loop (:mod:`.policies`). Cost grows with events: each event is a training submission or
end, a session's next activity, a server's start, a cycle of a culler.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import IO, Any

from . import brain
from .placement import Placement
from .trace import Interval, Session, Trace, TrainingJob
from .world import Kueue, Organisation, Workload

NOTEBOOK_NAMESPACE = "jupyter-users"
SERVER_STARTUP_S = 30.0
"""Admission → server ready (pod start, image cached); an assumption."""
RESTORE_LOG_MEDIAN_S = 5 * 60.0
RESTORE_SIGMA = 0.8
"""Re-running the notebook to get the lost kernel state back after a reclaim: lognormal, median
5 min (an assumption; no published source)."""
SNOOZE_PROBABILITY = 0.5


STATE_GIB = 4.0
"""A session's kernel state (its variables), GiB: an assumption (no source measures it)."""
SAVE_S_PER_GIB = 4.5
RESTORE_S_PER_GIB = 2.2
RESTORE_REQUEST_S = 2.4
"""``python -m benchmarks snapshot`` (docs/benchmarks.md, 2026-12-06, the slow end of two runs
on the shared 2-core machine): 2-4.5 s per GiB saved, 1.3-2.2 s per GiB restored, a restore
request 1.8-2.4 s."""


LARGE_JOB_GPUS = 8
"""A Job this large takes a whole node of 8 GPUs: the large Jobs a platform team favours."""
LARGE_PRIORITY_CLASS = "training-large"
"""The WorkloadPriorityClass of large Jobs, where the stack has one (L1p)."""

HOLDINGS = (
    "training",
    "notebook_burst",
    "notebook_idle",
    "free_whole",
    "free_scraps",
    "free_job_waits",
)
"""What holds a card's time in a diagnosis run: a training Job; a notebook in a GPU burst, or
idle; free: whole cards, scraps of cards (shares' rest), or any free GPU while a training Job
waits for a node (the Job mix's fragmentation)."""


@dataclass(frozen=True)
class KeptState:
    """L4: servers save their kernels' state before a stop (a reclaim, a way up) and the new
    server restores it, instead of the user re-running the notebook. The costs by default:
    the snapshot benchmark's slowest rates for :data:`STATE_GIB` of state."""

    snapshot_s: float = STATE_GIB * SAVE_S_PER_GIB
    """Saving a kernel's state before its server stops: the GPU is freed this much later."""
    restore_s: float = STATE_GIB * RESTORE_S_PER_GIB + RESTORE_REQUEST_S
    """Loading it into the new server's kernel before its first cell: the user waits this
    much after the server is up (instead of re-running the notebook)."""
    unsaveable: float = 0.1
    """The share of sessions whose state cannot be saved (open files, sockets, generators,
    objects over the budget, ...): they lose it, as on L3 (a draw per session and seed)."""
    advice_from_need: bool = True
    """The spawn form advises from the user's typical need (the median of their recent
    peaks, × the headroom) rather than the largest: a share that turns out too small costs a
    way up that keeps the state."""


CHECKPOINT_S = 15 * 60.0
"""A training Job checkpoints this often: a preemption loses the time since its last
checkpoint, not the whole run (an assumption; ``--checkpoint-min``)."""


@dataclass(frozen=True)
class Latencies:
    """The control plane's own delays, in trace seconds (measured on the dev cluster, warm,
    p50; docs/replay.md). They do not compress: the dev-cluster check replays at k× speed, so
    its model takes k × the latencies it measured (see ``check.py``)."""

    start_s: float = 0.3
    """Workload admitted → its pod Running: a training Job's run starts, a server's start-up
    (``SERVER_STARTUP_S``) begins."""
    release_s: float = 1.3
    """A pod ends or is deleted → its quota admits the next workload (Kueue sees the pod go,
    finishes the Workload and runs a scheduling cycle); the quota is held until then."""
    finish_s: float = 0.0
    """A training Job's pods end (it finished, or it was evicted and its pods are deleted) →
    Kueue sees them gone, before ``release_s``: the Job controller syncs a Job 1 s after its
    pods change (``syncJobBatchPeriod``), and only then records it complete or inactive; a
    deleted Job, or a notebook's pod, takes no such step."""
    requeue_s: float = 0.0
    """A quota release → the workloads parked as inadmissible are heads again: Kueue requeues
    them in batches, once a second per ClusterQueue or cohort (kueue#9232, v0.15.5 on); a
    workload created meanwhile, never parked, takes the freed quota at once. 0: at once (the
    replay's default, within ``release_s``)."""
    evict_s: float = 0.0
    """Kueue decides to preempt → the victim's pods are deleted: the preemptor's Workload seen,
    the victim's Job suspended and its pods deleted by the Job controller, the container stopped
    on its node; the victim's quota comes back this much later than ``finish_s`` +
    ``release_s`` say. 0 in the replay (tenths of a second on a day's scale); the dev-cluster
    check measures it per kind of node."""


"""A warned user who is at work presses "Keep my GPU" with this probability, else just goes on
working (an assumption)."""


@dataclass
class Allocation:
    start: float
    end: float | None
    gpu_equivalents: float
    kind: str
    """``training`` or ``notebook``."""
    flavor: str
    resource: str
    amount: int


@dataclass
class Compute:
    start: float
    end: float
    utilization: float
    gpu_equivalents: float
    kind: str


@dataclass
class JobRecord:
    job: TrainingJob
    first_admitted: float | None = None
    finished: float | None = None
    evictions: int = 0
    lost_gpu_s: float = 0.0


@dataclass
class SessionState:
    session: Session
    offering: brain.Offering
    offset: float = 0.0
    """Seconds the session's activity is late against the trace (waits, restores)."""
    next_interval: int = 0
    phase: str = "new"
    """new, waiting (its workload pending), starting, running, gone (reclaimed, user away),
    done."""
    workload: Workload | None = None
    server_epoch: int = 0
    epoch: int = 0
    """Bumped when the schedule moves, to drop events planned on the old one."""
    realised: list[tuple[float, float, str, float]] = field(default_factory=list)
    """(start, end, kind, utilisation) of activity that happened, in start order."""
    requested_at: float = 0.0
    ready_at: float = 0.0
    returned_at: float | None = None
    pod_uid: str = ""
    annotations: dict[str, str] = field(default_factory=dict)
    warned_reclaim_at: float | None = None
    gpu_burst: bool = False
    ended_at: float | None = None
    keeps_state: bool = False
    """Its server saves its kernels' state before a stop (L4): it says so in its activity
    reports, and the reclaim loop holds it to ``idle_after_when_kept``."""
    unsaveable: bool = False
    """(L4) its state cannot be saved: a stop loses it."""
    restoring: bool = False
    """Its state was saved at a stop: the next server restores it."""

    @property
    def key(self) -> str:
        return f"{self.session.user}/{self.session.name}"

    def end_s(self) -> float:
        return self.session.start_s + self.offset + self.session.length_s

    def last_activity(
        self, now: float, kinds: tuple[str, ...] = ("gpu", "cpu", "terminal", "restore")
    ) -> float | None:
        """The latest moment of activity of ``kinds`` up to ``now`` (realised activity does not
        overlap and is kept in start order)."""
        for start, end, kind, _u in reversed(self.realised):
            if kind in kinds and start <= now:
                return min(end, now)
        return None

    def gpu_busy_at(self, now: float) -> bool:
        """Whether a GPU burst that uses the GPU runs at ``now``."""
        for start, end, kind, u in reversed(self.realised):
            if start <= now < end and kind == "gpu" and u > 0:
                return True
            if end <= now:
                break
        return False

    def busy_at(self, now: float) -> tuple[bool, float]:
        """Whether a kernel cell runs at ``now``, and its utilisation."""
        for start, end, kind, u in reversed(self.realised):
            if start <= now < end and kind in ("gpu", "cpu", "restore"):
                return True, u
            if end <= now:
                break
        return False, 0.0


@dataclass
class Result:
    policy: str
    seed: int
    org: Organisation
    trace: Trace
    allocations: list[Allocation]
    computes: list[Compute]
    jobs: list[JobRecord]
    spawn_waits: list[tuple[float, float, bool]]
    """(requested, waited seconds, after a reclaim)."""
    reclaims: list[dict[str, Any]]
    warnings: int
    snoozes: int
    handoffs: list[float]
    session_seconds: float
    lost_user_s: float
    cycles: int
    counters: dict[str, float] = field(default_factory=dict)
    unserved_spawns: list[tuple[float, float, bool]] = field(default_factory=list)
    """Spawns still waiting at the trace's end: (requested, waited so far, after a reclaim)."""
    ways_up: list[float] = field(default_factory=list)
    """When a kernel hit its share's cap and its session moved to a bigger one."""
    restore_waits: list[tuple[float, float]] = field(default_factory=list)
    """(L4) (when the user came back or moved, seconds until their kernel state was back)."""
    ways_up_lost: list[float] = field(default_factory=list)
    """Ways up that lost the kernel's state (every way up but L4's saved ones)."""
    holdings: dict[str, float] = field(default_factory=dict)
    """(a diagnosis run) GPU-seconds of the measured window by what held the cards."""
    unplaced_jobs: list[tuple[float, float, int]] = field(default_factory=list)
    """(admitted on quota with no card for it, placed or evicted or the trace's end, GPUs)
    of every training Job that waited for whole cards: the figures count those of the
    measured window, as every other figure."""


class Policy:
    """What stands in for the culler; the base keeps every server until its session ends."""

    name = "static"
    oracle = False

    def attach(self, sim: Simulation) -> None:
        self.sim = sim

    def start(self) -> None:
        """Schedule its first cycle, if it has cycles."""

    def warned(self, state: SessionState) -> None:
        """A session's user becomes active while warned (gpuaas only)."""


class Simulation:
    def __init__(
        self,
        trace: Trace,
        org: Organisation,
        catalog: brain.Catalog,
        policy: Policy,
        *,
        fractional: bool = False,
        fractions: float = 0.0,
        events: IO[str] | None = None,
        check_invariants: bool = False,
        keep_activity: bool = False,
        latencies: Latencies = Latencies(),
        checkpoint_s: float | None = CHECKPOINT_S,
        run_info: dict[str, Any] | None = None,
        share_steps: int | None = None,
        advice: bool = False,
        history: brain.PeakHistory | None = None,
        throttle: str = "contended",
        cards_per_node: Mapping[str, int] | None = None,
        kept: KeptState | None = None,
        tas: Mapping[str, str] | None = None,
        diagnose: bool = False,
    ) -> None:
        self.trace = trace
        self.org = org
        self.catalog = catalog
        self.policy = policy
        self.fractions = 1.0 if fractional else fractions
        """The share of notebook users who take fractional offerings (time-sliced or HAMi
        memory-capped) where one holds their memory need: 1 for (d), 0 for the others; in
        between for the fractional scenario. Drawn per user, the same for every policy."""
        self.kueue = Kueue(org)
        self.now = 0.0
        self.rng = random.Random(f"users/{trace.seed}")
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._scheduled = False
        self.events = events
        self.check_invariants = check_invariants
        self.keep_activity = keep_activity
        """Keep every session's realised activity (the dev-cluster check replays it); else
        only the latest, which is all the policies read."""
        self.latencies = latencies
        self.checkpoint_s = checkpoint_s
        """A preempted Job keeps its progress up to its last checkpoint (None: it starts
        over)."""
        self.run_info = dict(run_info or {})
        """More fields for the ``run`` event (the ladder's rung, size, organisation)."""
        self.releasing: set[str] = set()
        """Workloads whose pods are gone and whose quota is not free yet (``release_s``)."""
        self.requeues: set[str] = set()
        """Cohorts (or lone ClusterQueues) whose parked workloads are requeued ``requeue_s``
        after a release (one batch at a time)."""
        self.placement = (
            Placement.for_capacity(org.capacity, share_steps or 1, cards_per_node)
            if share_steps or cards_per_node
            else None
        )
        """The cards of the pools where shares and whole GPUs meet (``share_steps``: a card's
        steps, the shares rungs) and, with ``cards_per_node``, of the whole-GPU pools, on
        their nodes: admitted workloads are placed on them (:mod:`.placement`), a Job's GPUs
        on one node."""
        self._tas_and_diagnosis(tas, diagnose)
        self.unplaced: dict[str, tuple[Workload, float]] = {}
        """Admitted workloads that no card holds yet (their quota held): (workload, since)."""

        self.advice = advice
        """Notebook users take the offering the spawn form preselects: the product's advice
        (:func:`jupyter_gpuaas.core.sizing.advise`) from their recent sessions' peaks."""
        self.kept = kept
        """(L4) kernel state kept through stops, at these costs; None: lost (every other rung)."""
        self.throttle = throttle
        """When a share's compute is held to its share (HAMi's ``gpucores``): ``contended``,
        only while another container on its card is busy (HAMi's default: its core limit
        is enforced when the card is shared by active work); ``always`` (a sensitivity).
        Without cards nothing is known to share the card, so ``contended`` never throttles
        there."""
        self.history = history or brain.PeakHistory({})
        """The peaks of every user's recent sessions, as the service keeps them (``history``:
        what it holds when the trace begins)."""
        self._records()
        policy.attach(self)

    def _tas_and_diagnosis(self, tas: Mapping[str, str] | None, diagnose: bool) -> None:
        """Kueue's TAS on the kinds of ``tas`` (with preemption for nodes where a training
        queue preempts within), and the cards' accounting of a diagnosis run."""
        self.tas = dict(tas or {})
        """Kueue's Topology Aware Scheduling: workload kind → its pod set's topology request
        (:data:`.placement.TAS_MODES`); those kinds are admitted only where Kueue finds them
        nodes (:meth:`_topology`), the others placed after admission as without TAS."""
        if self.tas and self.placement is not None:
            self.kueue.topology = self._topology
            if any(
                cq.within_cluster_queue != "Never" for cq in self.org.cluster_queues.values()
            ):  # a stack that lets large Jobs preempt for nodes
                self.kueue.topology_fits = self._topology_fits
        self.topology_waiting: set[str] = set()
        """Training Jobs pending because TAS found them no node (last time they were tried)."""
        self.holdings: dict[str, float] | None = dict.fromkeys(HOLDINGS, 0.0) if diagnose else None
        """(``diagnose``) GPU-seconds of the measured window by what holds the cards
        (:data:`HOLDINGS`), from the cards' state between events."""
        self._held_now: dict[str, float] = {}
        self._held_since = 0.0

    def _records(self) -> None:
        """What the run records, for its :class:`Result`."""
        self.allocations: dict[str, Allocation] = {}
        self.closed: list[Allocation] = []
        self.computes: list[Compute] = []
        self.jobs: dict[str, JobRecord] = {}
        self.job_remaining: dict[str, float] = {}
        self.job_epoch: dict[str, int] = {}
        self.job_started: dict[str, float] = {}
        """When each admitted Job's current run began (on its cards)."""
        self.sessions: dict[str, SessionState] = {}
        self.live: dict[str, SessionState] = {}
        """Sessions started and not ended: what a culler's cycle looks at (so that its cost
        follows the sessions open now, not all the sessions of the week)."""
        self.by_workload: dict[str, SessionState] = {}
        self.spawn_waits: list[tuple[float, float, bool]] = []
        self.reclaims: list[dict[str, Any]] = []
        self.warnings = 0
        self.snoozes = 0
        self.handoffs: list[float] = []
        self.lost_user_s = 0.0
        self.cycles = 0
        self._uid = 0
        self.counters: dict[str, float] = {
            "events": 0,
            "admission_passes": 0,
            "share_burst_s": 0.0,
            "share_slowdown_s": 0.0,
            "unplaceable_jobs": 0,
            "unplaceable_notebooks": 0,
            "unplaced_job_gpu_s": 0.0,
            "advised_sessions": 0,
            "advised_gib": 0.0,
            "need_sized_gib": 0.0,
            "ways_up": 0,
        }
        """Events run, admission passes, and for notebooks on GPU shares the seconds their
        GPU bursts would take on a whole GPU and the seconds the shares added."""
        self.ways_up: list[float] = []
        """When a session's kernel hit its cap and it moved up (its work interrupted)."""
        self.unplaced_jobs: list[tuple[float, float, int]] = []
        """Training Jobs' waits for cards that ended: (since, until, GPUs)."""
        self.restore_waits: list[tuple[float, float]] = []
        """(L4) (the user came back or moved, seconds until their state was back)."""
        self.ways_up_lost: list[float] = []
        """Ways up that lost the kernel's state (all of them but L4's saved ones)."""

    # ------------------------------------------------------------------ plumbing

    def at(self, t: float, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (max(t, self.now), self._seq, action))

    def emit(self, event: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.write(
                json.dumps({"t": round(self.now, 3), "event": event, **fields}) + "\n"
            )

    def uid(self) -> str:
        self._uid += 1
        return f"uid-{self._uid:07d}"

    def _request_scheduling(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.at(self.now, self._schedule)

    def _schedule(self) -> None:
        self._scheduled = False
        self.counters["admission_passes"] += 1
        admitted, evicted = self.kueue.schedule(self.now)
        for wl in evicted:
            self._evicted(wl)
        for wl in admitted:
            self._admitted(wl)
        if self.check_invariants:
            problems = self.kueue.over_capacity()
            assert not problems, problems

    def gpu_equivalents(self, wl: Workload) -> float:
        """What ``wl`` holds in GPU-equivalents, from what Kueue counts for it
        (:func:`~jupyter_gpuaas.core.gpu_equivalents.resource_gpu_equivalents`: a quarter L4's
        ``total-gpucores: 25`` is 0.25)."""
        return float(
            brain.resource_gpu_equivalents({r: Fraction(n) for r, n in wl.requests.items()})
        )

    def _allocate(self, wl: Workload) -> None:
        assert wl.flavor is not None
        self.allocations[wl.key] = Allocation(
            self.now,
            None,
            self.gpu_equivalents(wl),
            wl.kind,
            wl.flavor,
            wl.resource,
            wl.amount,
        )
        self.emit(
            "allocation",
            workload=wl.key,
            kind=wl.kind,
            flavor=wl.flavor,
            resource=wl.resource,
            amount=wl.amount,
            gpu_equivalents=self.allocations[wl.key].gpu_equivalents,
        )

    def _release(self, key: str, after_s: float = 0.0) -> None:
        """The workload's pod ends or is deleted: its quota is back ``after_s + release_s``
        later."""
        delay = after_s + self.latencies.release_s
        if delay <= 0:
            self._free(key)
            return
        if key in self.releasing:
            return
        self.releasing.add(key)
        self.at(self.now + delay, partial(self._free, key))

    def _free(self, key: str) -> None:
        self.releasing.discard(key)
        self._unplace(key)
        requeue = self.latencies.requeue_s <= 0
        wl = self.kueue.release(key, requeue=requeue)
        alloc = self.allocations.pop(key, None)
        if alloc is not None:
            alloc.end = self.now
            self.closed.append(alloc)
        if wl is not None:
            self.emit("release", workload=key, kind=wl.kind)
            if not requeue:
                self._requeue_later(wl.cluster_queue)
        self._request_scheduling()

    def _requeue_later(self, cq: str) -> None:
        """Kueue's batched requeue: ``cq``'s cohort's parked workloads are heads again
        ``requeue_s`` from the first release of the batch."""
        batch = self.org.cluster_queues[cq].cohort or cq
        if batch in self.requeues:
            return
        self.requeues.add(batch)

        def requeue() -> None:
            self.requeues.discard(batch)
            self.kueue.requeue_inadmissible(cq)
            self._request_scheduling()

        self.at(self.now + self.latencies.requeue_s, requeue)

    def compute(
        self,
        start: float,
        end: float,
        utilization: float,
        eq: float,
        kind: str,
        **share: float,
    ) -> None:
        """GPU work done: ``eq`` GPU-equivalents at ``utilization`` from ``start`` to ``end``;
        ``share``: a burst on a share, its ``burst_s`` (on a whole GPU) and ``slowdown_s``."""
        if end > start and utilization > 0:
            self.computes.append(Compute(start, end, utilization, eq, kind))
            self.emit(
                "compute",
                start=round(start, 3),
                end=round(end, 3),
                utilization=round(utilization, 6),
                gpu_equivalents=eq,
                kind=kind,
                **{k: round(v, 3) for k, v in share.items()},
            )

    # ------------------------------------------------------------------ training

    def _submit_job(self, job: TrainingJob) -> None:
        namespace = job.team
        lq = "training"
        cq = self.org.local_queues[(namespace, lq)]
        (resource, per_gpu), *rest = self.org.training_requests.items()
        amount = per_gpu * job.gpus
        # A stack with a priority class for large Jobs (L1p) gives it to the Jobs of a node.
        large = job.gpus >= LARGE_JOB_GPUS and LARGE_PRIORITY_CLASS in self.org.priorities
        priority_class = LARGE_PRIORITY_CLASS if large else "training"
        wl = Workload(
            key=f"{namespace}/{job.name}",
            namespace=namespace,
            local_queue=lq,
            cluster_queue=cq,
            priority=self.org.priorities.get(priority_class, 0),
            priority_class=priority_class,
            created=self.now,
            resource=resource,
            amount=amount,
            kind="training",
            owner=job.name,
            uid=self.uid(),
            also={r: n * job.gpus for r, n in rest},
        )
        self.jobs[wl.key] = JobRecord(job)
        self.job_remaining[wl.key] = job.duration_s
        self.job_epoch[wl.key] = 0
        self.kueue.submit(wl)
        self.emit(
            "submit",
            workload=wl.key,
            kind="training",
            gpus=job.gpus,
            team=job.team,
            duration_s=round(job.duration_s, 3),
        )
        self._request_scheduling()

    def _job_finished(self, key: str, epoch: int) -> None:
        if self.job_epoch[key] != epoch:
            return
        record = self.jobs[key]
        record.finished = self.now
        wl = self.kueue.admitted[key]
        self.compute(
            self.now - self.job_remaining[key],
            self.now,
            record.job.utilization,
            self.gpu_equivalents(wl),
            "training",
        )
        self.emit("finish", workload=key, failed=record.job.fails)
        self._release(key, after_s=self.latencies.finish_s)

    # ------------------------------------------------------------------ admission results

    def _admitted(self, wl: Workload) -> None:
        self.emit(
            "admission",
            workload=wl.key,
            kind=wl.kind,
            cluster_queue=wl.cluster_queue,
            flavor=wl.flavor,
            waited=round(self.now - wl.queued_at, 3),
        )
        self._allocate(wl)
        if (
            self.placement is not None
            and not self.placement.holds(wl.key)  # TAS placed it at its admission
            and not self.placement.place(wl.key, wl.flavor, wl.requests, wl.kind)
        ):
            # Admitted on quota, no card holds it: its pods pend, holding the quota.
            self.unplaced[wl.key] = (wl, self.now)
            self.counters[
                "unplaceable_jobs" if wl.kind == "training" else "unplaceable_notebooks"
            ] += 1
            self.emit("unplaceable", workload=wl.key, kind=wl.kind)
            return
        self._start(wl)

    def _topology(self, wl: Workload, flavor: str) -> bool:
        """Kueue's TAS at ``wl``'s admission in ``flavor``: its pods on the nodes
        :func:`.placement.tas_assign` gives them (a training Job is one pod of its GPUs), or
        not admitted."""
        mode = self.tas.get(wl.kind)
        if not mode or self.placement is None:
            return True
        placed = self.placement.place(wl.key, flavor, wl.requests, wl.kind, tas=mode)
        if wl.kind == "training":
            if placed:
                self.topology_waiting.discard(wl.key)
            else:
                self.topology_waiting.add(wl.key)
        return placed

    def _topology_fits(self, wl: Workload, flavor: str, gone: Sequence[Workload]) -> bool:
        """TAS preemption's simulation: would ``wl`` find nodes with ``gone``'s pods gone."""
        mode = self.tas.get(wl.kind)
        if not mode or self.placement is None:
            return True
        return self.placement.fits_tas_without(
            [w.key for w in gone], flavor, wl.requests, wl.kind, tas=mode
        )

    def _holding(self) -> dict[str, float]:
        """The cards now, in GPUs, by :data:`HOLDINGS`: a Job's, a notebook's in a GPU burst
        or idle; free cards whole or in scraps, or (either) while a training Job waits for a
        node (admitted and not placed, or pending because TAS found it none)."""
        out = dict.fromkeys(HOLDINGS, 0.0)
        if self.placement is None:
            return out
        job_waits = bool(self.topology_waiting) or any(
            wl.kind == "training" for wl, _since in self.unplaced.values()
        )
        for cards in self.placement.pools.values():
            for key, held in cards.holders.items():
                gpus = sum(n for _i, n in held) / cards.steps
                state = self.by_workload.get(key)
                if state is None:
                    out["training"] += gpus
                elif self._in_burst(state):
                    out["notebook_burst"] += gpus
                else:
                    out["notebook_idle"] += gpus
            whole = sum(1 for f in cards.free if f == cards.steps)
            scraps = sum(f for f in cards.free if f < cards.steps) / cards.steps
            if job_waits:
                out["free_job_waits"] += whole + scraps
            else:
                out["free_whole"] += whole
                out["free_scraps"] += scraps
        return out

    def _in_burst(self, state: SessionState) -> bool:
        """Whether a GPU burst (any utilisation) of ``state`` runs now."""
        for start, end, kind, _u in reversed(state.realised):
            if start <= self.now < end and kind == "gpu":
                return True
            if end <= self.now:
                break
        return False

    def _account_holdings(self, until: float) -> None:
        """Add the cards' state since the last event, up to ``until``, within the window."""
        if self.holdings is None:
            return
        lo, hi = self.trace.burn_in_s, self.trace.end_s
        dt = max(0.0, min(until, hi) - max(self._held_since, lo))
        for k, v in self._held_now.items():
            self.holdings[k] += v * dt
        self._held_since = until

    def _place_waiting(self) -> None:
        """Cards were freed: place the admitted workloads that wait for cards, by priority,
        then admission (the scheduler's queue); one that still does not fit keeps waiting."""
        if self.placement is None or not self.unplaced:
            return
        waiting = sorted(
            self.unplaced.values(), key=lambda e: (-e[0].priority, e[0].admitted_at or 0.0)
        )
        for wl, since in waiting:
            if self.placement.place(wl.key, wl.flavor, wl.requests, wl.kind):
                del self.unplaced[wl.key]
                if wl.kind == "training":
                    gpus = self.jobs[wl.key].job.gpus
                    self.counters["unplaced_job_gpu_s"] += (self.now - since) * gpus
                    self.unplaced_jobs.append((since, self.now, gpus))
                self.emit("placed", workload=wl.key, kind=wl.kind, waited=self.now - since)
                self._start(wl)

    def _unplace(self, key: str) -> None:
        """``key``'s pods are gone: its cards are free (or it stops waiting for one)."""
        if self.placement is None:
            return
        self.unplaced.pop(key, None)
        if self.placement.release(key):
            self._place_waiting()

    def _start(self, wl: Workload) -> None:
        """``wl`` is admitted and on its cards: its Job runs, its server starts."""
        if wl.kind == "training":
            record = self.jobs[wl.key]
            if record.first_admitted is None:
                record.first_admitted = self.now  # its wait ends when it runs (on its cards)
            self.job_started[wl.key] = self.now
            epoch = self.job_epoch[wl.key]
            self.at(
                self.now + self.latencies.start_s + self.job_remaining[wl.key],
                lambda: self._job_finished(wl.key, epoch),
            )
            return
        state = self.by_workload[wl.key]
        if self.policy.oracle:
            self._burst_admitted(state)
        else:
            state.phase = "starting"
            epoch = state.epoch
            self.at(
                self.now + self.latencies.start_s + SERVER_STARTUP_S,
                lambda: self._server_ready(state, epoch),
            )

    def _evicted(self, wl: Workload) -> None:
        """Kueue evicted ``wl`` for a reclaim: it stops running now; its quota is free, and it
        is queued again, once its pods are gone (``evict_s`` + ``release_s`` later, and a Job's
        ``finish_s``)."""
        if wl.key in self.releasing:  # its pod is already gone: nothing runs to preempt
            return  # (its quota comes back with the release under way)
        alloc = self.allocations.pop(wl.key, None)
        if alloc is not None:
            alloc.end = self.now
            self.closed.append(alloc)
        self.emit("preemption", workload=wl.key, kind=wl.kind)
        never_ran = wl.key in self.unplaced
        if never_ran:  # evicted while waiting for cards: it stops waiting
            _wl, since = self.unplaced.pop(wl.key)
            if wl.kind == "training":
                self.unplaced_jobs.append((since, self.now, self.jobs[wl.key].job.gpus))
        if wl.kind == "training":
            record = self.jobs[wl.key]
            record.evictions += 1
            started = self.job_started.pop(wl.key, self.now)  # none: it never ran
            ran = 0.0 if never_ran else max(0.0, self.now - started - self.latencies.start_s)
            kept = 0.0
            if self.checkpoint_s:
                kept = min(ran - ran % self.checkpoint_s, self.job_remaining[wl.key])
            record.lost_gpu_s += (ran - kept) * record.job.gpus
            if not never_ran:
                self.compute(
                    started, self.now, record.job.utilization, float(record.job.gpus), "training"
                )
            self.job_epoch[wl.key] += 1
            self.job_remaining[wl.key] -= kept  # it resumes from its last checkpoint
        evicted_at = self.now
        # A Job's pods are gone for Kueue once the Job controller has synced it (finish_s).
        delay = self.latencies.evict_s + self.latencies.release_s
        if wl.kind == "training":
            delay += self.latencies.finish_s
        if delay <= 0:
            self._eviction_done(wl.key, evicted_at)
        else:
            self.at(self.now + delay, partial(self._eviction_done, wl.key, evicted_at))

    def _eviction_done(self, key: str, evicted_at: float) -> None:
        self._unplace(key)
        requeue = self.latencies.requeue_s <= 0
        wl = self.kueue.finish_eviction(key, evicted_at, requeue=requeue)
        if wl is not None:
            self.emit("release", workload=key, kind="evicted")
            if not requeue:
                self._requeue_later(wl.cluster_queue)
        self._request_scheduling()

    # ------------------------------------------------------------------ notebooks

    def takes_fractions(self, session: Session) -> bool:
        """Whether this user takes fractional offerings (a draw per user and seed, so that
        every policy replays the same users' choices)."""
        if self.fractions >= 1.0:
            return True
        if self.fractions <= 0.0:
            return False
        draw = random.Random(f"fractions/{self.trace.seed}/{session.user}").random()
        return draw < self.fractions

    def choose_offering(self, session: Session) -> brain.Offering:
        """The user's pick: the smallest offering of their team that holds their memory need —
        hardware-isolated ones only (whole GPU, MIG) unless the user takes fractions
        (:meth:`takes_fractions`): then time-sliced and HAMi memory-capped ones too."""
        tenant = self.catalog.tenants[session.team]
        offerings = [
            self.catalog.offerings[s]
            for s in tenant.offerings
            if self.catalog.offerings[s].is_gpu
            and self.catalog.offerings[s].flavor in self.org.flavor_labels
        ]

        def memory(o: brain.Offering) -> float:
            return _gib(o.memory_cap or o.gpu_memory)

        fractional = self.takes_fractions(session)
        hardware = [o for o in offerings if o.kind in ("gpu", "mig")]
        pool = offerings if fractional else (hardware or offerings)
        fitting = [o for o in pool if memory(o) >= session.gpu_memory_gib]
        if not fitting and not fractional:
            fitting = [o for o in offerings if memory(o) >= session.gpu_memory_gib]
        if fitting:
            return min(fitting, key=lambda o: (memory(o), o.gpu_equivalents, o.slug))
        return max(offerings, key=lambda o: (memory(o), o.gpu_equivalents, o.slug))

    def _new_workload(self, state: SessionState) -> Workload:
        session, offering = state.session, state.offering
        tenant = self.catalog.tenants[session.team]
        (resource, amount), *rest = offering.quota_requests(1).items()
        state.server_epoch += 1
        name = f"pod-{session.user}-{session.name}-{state.server_epoch}"
        return Workload(
            key=f"{NOTEBOOK_NAMESPACE}/{name}",
            namespace=NOTEBOOK_NAMESPACE,
            local_queue=tenant.local_queue,
            cluster_queue=self.org.local_queues[(NOTEBOOK_NAMESPACE, tenant.local_queue)],
            priority=self.org.priorities.get("interactive", 0),
            priority_class="interactive",
            created=self.now,
            resource=resource,
            amount=amount,
            kind="notebook",
            owner=state.key,
            node_selector=dict(offering.node_selector),
            uid=self.uid(),
            also=dict(rest),
            tolerations=tuple(offering.tolerations),
            pod_requests=offering.requests(1),
        )

    def _spawn(self, state: SessionState) -> None:
        wl = self._new_workload(state)
        state.workload = wl
        state.phase = "waiting"
        state.requested_at = self.now
        state.annotations = {}
        state.warned_reclaim_at = None
        self.by_workload[wl.key] = state
        self.kueue.submit(wl)
        self.emit(
            "spawn",
            workload=wl.key,
            session=state.session.name,
            user=state.session.user,
            offering=state.offering.slug,
            after_reclaim=state.returned_at is not None,
        )
        self._request_scheduling()

    def advised_offering(self, session: Session) -> brain.Offering:
        """What the spawn form preselects for ``session``'s user, and they take: the product's
        advice from the peaks of their recent sessions (their team's default without any)."""
        tenant = self.catalog.tenants[session.team]
        offerings = [
            self.catalog.offerings[s]
            for s in tenant.offerings
            if self.catalog.offerings[s].flavor in self.org.flavor_labels
        ]
        peaks = self.history.of(session.user)
        if self.kept is not None and self.kept.advice_from_need and peaks:
            peaks = (sorted(peaks)[len(peaks) // 2],)  # the typical need: the median peak
        found = brain.advise(offerings, peaks, default=tenant.default_offering)
        return self.catalog.offerings[found.offering] if found else self.choose_offering(session)

    def _session_start(self, state: SessionState) -> None:
        self.live[state.session.name] = state
        if self.kept is not None:
            state.keeps_state = True
            draw = random.Random(f"unsaveable/{self.trace.seed}/{state.session.name}").random()
            state.unsaveable = draw < self.kept.unsaveable
        if self.advice:
            state.offering = self.advised_offering(state.session)
            self.counters["advised_sessions"] += 1
            self.counters["advised_gib"] += _gib(
                state.offering.memory_cap or state.offering.gpu_memory
            )
            needed = self.choose_offering(state.session)
            self.counters["need_sized_gib"] += _gib(needed.memory_cap or needed.gpu_memory)
        self.emit(
            "session_start",
            session=state.session.name,
            user=state.session.user,
            team=state.session.team,
            offering=state.offering.slug,
            gpu_memory_gib=round(state.session.gpu_memory_gib, 3),
        )
        if self.policy.oracle:
            state.phase = "running"
            self._plan_next(state)
            self.at(state.end_s(), lambda: self._session_end(state, state.epoch))
            return
        self._spawn(state)

    def _server_ready(self, state: SessionState, epoch: int) -> None:
        if epoch != state.epoch or state.phase != "starting":
            return
        state.phase = "running"
        state.ready_at = self.now
        after_reclaim = state.returned_at is not None
        self.spawn_waits.append((state.requested_at, self.now - state.requested_at, after_reclaim))
        self.emit("ready", workload=state.workload.key if state.workload else None)
        late = self.now - state.session.start_s - state.offset
        if state.returned_at is not None:
            assert state.returned_at is not None
            rerun = min(
                RESTORE_LOG_MEDIAN_S * 2.718281828 ** self.rng.gauss(0, RESTORE_SIGMA), 3600.0
            )  # drawn on every rung, so that the users' later draws stay paired
            restore = rerun
            if state.restoring and self.kept is not None:
                restore = self.kept.restore_s  # the saved state loads instead
                self.restore_waits.append(
                    (state.returned_at, self.now - state.returned_at + restore)
                )
                state.restoring = False
            # Re-running cells: the kernel is busy (counted as activity), at utilisation 0.
            state.realised.append((self.now, self.now + restore, "restore", 0.0))
            late = (self.now - state.returned_at) + restore
            self.lost_user_s += late
            state.returned_at = None
        state.offset += max(0.0, late)
        state.epoch += 1
        self._plan_next(state)
        epoch = state.epoch
        self.at(state.end_s(), lambda: self._session_end(state, epoch))

    def _plan_next(self, state: SessionState) -> None:
        intervals = state.session.intervals
        if state.next_interval >= len(intervals):
            return
        iv = intervals[state.next_interval]
        epoch = state.epoch
        t = state.session.start_s + state.offset + iv.start_s
        self.at(t, lambda: self._interval(state, iv, epoch))

    def _interval(self, state: SessionState, iv: Interval, epoch: int) -> None:
        if epoch != state.epoch or state.phase in ("done", "waiting", "starting"):
            return
        if state.phase == "gone":
            self._user_returns(state)
            return
        if self.policy.oracle and iv.kind == "gpu" and iv.utilization > 0:
            state.gpu_burst = True
            self._spawn(state)
            return
        self._realise(state, iv)

    def share_of(self, state: SessionState) -> float:
        """The share of a GPU's compute the session's offering gets: a memory-capped fraction
        its ``cores_percent``, anything else the whole of what it holds (1)."""
        o = state.offering
        if o.kind == "fraction" and o.cores_percent:
            return o.cores_percent / 100
        return 1.0

    def _way_up(self, state: SessionState) -> None:
        """The session's kernel hit its share's memory cap: its user takes the sidebar's way up,
        the server stopped and spawned again on the smallest offering that holds the need (the
        burst runs again once it is back, after re-running the notebook)."""
        assert state.workload is not None
        bigger = self.choose_offering(state.session)
        self.counters["ways_up"] += 1
        self.ways_up.append(self.now)
        self.emit(
            "way_up",
            session=state.session.name,
            workload=state.workload.key,
            offering=bigger.slug,
            was=state.offering.slug,
            kept=self._saves(state),
        )
        key = state.workload.key
        saved = self._saves(state)
        if not saved:
            self.ways_up_lost.append(self.now)
        state.offering = bigger
        state.restoring = saved
        state.epoch += 1
        self._stop_pod(key, saved)
        epoch = state.epoch
        self.at(state.end_s(), lambda: self._session_end(state, epoch))
        state.returned_at = self.now
        self._spawn(state)

    def _contended(self, state: SessionState) -> bool:
        """Whether another container on the session's card is busy on the GPU now: a
        training Job (always busy while it runs) or a notebook in a GPU burst."""
        if self.placement is None or state.workload is None:
            return False
        me = state.workload.key
        for cards in self.placement.pools.values():
            mine = {i for i, _n in cards.holders.get(me, ())}
            if not mine:
                continue
            for key, held in cards.holders.items():
                if key == me or not mine & {i for i, _n in held}:
                    continue
                other = self.by_workload.get(key)
                if other is None:  # a training Job on its cards
                    return True
                if other.gpu_busy_at(self.now):
                    return True
        return False

    def _too_small(self, state: SessionState) -> bool:
        """Whether the session's memory need is beyond its share's cap, and a larger offering
        holds more of it."""
        o = state.offering
        if o.kind != "fraction" or _gib(o.memory_cap) >= state.session.gpu_memory_gib:
            return False
        bigger = self.choose_offering(state.session)
        return _gib(bigger.memory_cap or bigger.gpu_memory) > _gib(o.memory_cap)

    def _realise(self, state: SessionState, iv: Interval) -> None:
        if iv.kind == "gpu" and self.advice and self._too_small(state):
            self._way_up(state)
            return
        start = self.now
        length = iv.end_s - iv.start_s
        utilization = iv.utilization
        share = self.share_of(state)
        if share < 1.0 and self.throttle != "always" and not self._contended(state):
            share = 1.0  # alone on its card: HAMi lets it use the whole card
        if iv.kind == "gpu" and share < 1.0 and not self.policy.oracle:
            # On a share g, a burst at utilisation u takes max(1, u/g) times longer: the same
            # GPU work at the share's pace; the user's later activity moves with it.
            stretch = max(1.0, utilization / share)
            if utilization > 0:  # a cell that does not use the GPU is no GPU work
                self.counters["share_burst_s"] += length
                self.counters["share_slowdown_s"] += length * (stretch - 1)
            state.offset += length * (stretch - 1)
            length *= stretch
            utilization = min(1.0, utilization / share)
        end = min(start + length, state.end_s())
        state.realised.append((start, end, iv.kind, utilization))
        if len(state.realised) > 64 and not self.keep_activity:
            del state.realised[:32]
        if iv.kind == "gpu" and state.workload is not None and not self.policy.oracle:
            shared = (
                {"burst_s": iv.end_s - iv.start_s, "slowdown_s": length - (iv.end_s - iv.start_s)}
                if share < 1.0
                else {}
            )
            self.compute(
                start,
                end,
                utilization,
                self.gpu_equivalents(state.workload),
                "notebook",
                **shared,
            )
        if state.warned_reclaim_at is not None and start < state.warned_reclaim_at:
            self.policy.warned(state)
        state.next_interval += 1
        self._plan_next(state)

    def _burst_admitted(self, state: SessionState) -> None:
        """Oracle: the GPU arrives when the burst needs it (the burst waits for it)."""
        assert state.workload is not None
        intervals = state.session.intervals
        iv = intervals[state.next_interval]
        planned = state.session.start_s + state.offset + iv.start_s
        state.offset += max(0.0, self.now - planned)
        self.spawn_waits.append((state.requested_at, self.now - state.requested_at, False))
        state.phase = "running"
        end = min(self.now + (iv.end_s - iv.start_s), state.end_s())
        state.realised.append((self.now, end, iv.kind, iv.utilization))
        self.compute(
            self.now,
            end,
            iv.utilization,
            self.gpu_equivalents(state.workload),
            "notebook",
        )
        key = state.workload.key
        state.next_interval += 1
        state.epoch += 1
        epoch = state.epoch
        self.at(end, lambda: self._release(key))
        self._plan_next(state)
        self.at(state.end_s(), lambda: self._session_end(state, epoch))

    def _session_end(self, state: SessionState, epoch: int) -> None:
        if epoch != state.epoch or state.phase == "done":
            return
        if self.now < state.end_s() - 1e-6:  # a burst on a share moved the end later
            self.at(state.end_s(), lambda: self._session_end(state, epoch))
            return
        if state.phase in ("waiting", "starting") and state.workload is not None:
            if self.kueue.withdraw(state.workload.key) is None:
                self._release(state.workload.key)
        elif state.phase == "running" and state.workload is not None and not self.policy.oracle:
            self._release(state.workload.key)
        self._close_session(state, "ended")

    def _close_session(self, state: SessionState, reason: str) -> None:
        """Every session ends once, with one ``session_end`` event: ``ended`` (its length is
        over, whatever its phase: running, waiting for its GPU, or reclaimed and away) or
        ``trace_end`` (still open when the trace ends). A session that had its server leaves
        its GPU-memory peak (its need) in its user's history, as the service records it."""
        phase = state.phase
        if self.advice and state.ready_at > 0:
            peak = round(state.session.gpu_memory_gib * 2**30)
            self.history = brain.record_peak(self.history, state.session.user, peak)
        state.phase = "done"
        state.ended_at = self.now
        self.live.pop(state.session.name, None)
        self.emit(
            "session_end",
            session=state.session.name,
            user=state.session.user,
            reason=reason,
            phase=phase,
        )

    def stop_server(
        self, state: SessionState, *, code: str, handoff: str | None, emit: bool = True
    ) -> dict[str, Any] | None:
        """A culler stops the server (the hub's DELETE): quota back, the user is away until
        their next activity (then they spawn again), or until the session's end.

        ``emit=False``: the caller learns the decision's code and hand-off only after the stop
        (the reclaim loop acts, then returns its plan); it fills them into the record returned
        and emits the ``reclaim`` event with :meth:`emit_reclaim`."""
        if state.phase != "running" or state.workload is None:
            return None
        key = state.workload.key
        later = state.next_interval < len(state.session.intervals)
        record: dict[str, Any] = {
            "t": self.now,
            "session": state.session.name,
            "workload": key,
            "gpu_equivalents": self.gpu_equivalents(state.workload),
            "code": code,
            "handoff": handoff,
            "interrupted": later,
            "offering": state.offering.slug,
        }
        saved = self._saves(state)
        record["kept"] = saved
        record["interrupted"] = later and not saved  # a session that lost its state
        record["moved"] = later and saved
        self.reclaims.append(record)
        if emit:
            self.emit_reclaim(record)
        state.phase = "gone"
        state.restoring = saved
        state.epoch += 1
        self._stop_pod(key, saved)
        self._plan_next(state)
        epoch = state.epoch
        self.at(state.end_s(), lambda: self._session_end(state, epoch))
        return record

    def emit_reclaim(self, record: dict[str, Any]) -> None:
        self.emit(
            "reclaim",
            workload=record["workload"],
            session=record["session"],
            code=record["code"],
            handoff=record["handoff"],
            active_later=record["interrupted"] or record.get("moved", False),
            gpu_equivalents=record["gpu_equivalents"],
            **({"kept": record["kept"]} if self.kept is not None else {}),
        )

    def _saves(self, state: SessionState) -> bool:
        """Whether a stop now keeps the session's kernel state (L4, a session whose state can
        be saved)."""
        return self.kept is not None and not state.unsaveable

    def _stop_pod(self, key: str, saved: bool) -> None:
        """The server's pod stops; when it first saves its kernels' state, its GPU is freed
        the snapshot's time later."""
        if saved and self.kept is not None and self.kept.snapshot_s > 0:
            self.at(self.now + self.kept.snapshot_s, partial(self._release, key))
        else:
            self._release(key)

    def _user_returns(self, state: SessionState) -> None:
        state.returned_at = self.now
        self.emit("return", session=state.session.name)
        self._spawn(state)

    # ------------------------------------------------------------------ running

    def running_sessions(self) -> Iterator[SessionState]:
        for state in list(self.live.values()):
            if state.phase in ("running", "starting"):
                yield state

    def run(self) -> Result:
        self._emit_run()
        for job in self.trace.jobs:
            self.at(job.submit_s, partial(self._submit_job, job))
        for session in self.trace.sessions:
            state = SessionState(session, self.choose_offering(session))
            self.sessions[session.name] = state
            self.at(session.start_s, partial(self._session_start, state))
        self.policy.start()
        end = self.trace.end_s
        while self._heap and self._heap[0][0] <= end:
            t, _seq, action = heapq.heappop(self._heap)
            self._account_holdings(t)
            self.now = t
            self.counters["events"] += 1
            action()
            if self.holdings is not None:
                held = self._holding()
                if held != self._held_now:  # the cards' state, for recompute.diagnosis
                    self.emit("cards", **{k: round(v, 6) for k, v in held.items()})
                self._held_now = held
        self._account_holdings(end)
        self.now = end
        unserved = self._close_sessions(end)
        self._close_work(end)
        return Result(
            policy=self.policy.name,
            seed=self.trace.seed,
            org=self.org,
            trace=self.trace,
            allocations=self.closed,
            computes=self.computes,
            jobs=list(self.jobs.values()),
            spawn_waits=self.spawn_waits,
            reclaims=self.reclaims,
            warnings=self.warnings,
            snoozes=self.snoozes,
            handoffs=self.handoffs,
            session_seconds=self._session_seconds(end),
            lost_user_s=self.lost_user_s,
            cycles=self.cycles,
            counters=self.counters,
            unserved_spawns=unserved,
            ways_up=self.ways_up,
            unplaced_jobs=self.unplaced_jobs,
            restore_waits=self.restore_waits,
            ways_up_lost=self.ways_up_lost,
            holdings=self.holdings or {},
        )

    def _emit_run(self) -> None:
        self.emit(
            "run",
            policy=self.policy.name,
            seed=self.trace.seed,
            trace_version=self.trace.version,
            days=self.trace.days,
            burn_in_s=self.trace.burn_in_s,
            end_s=self.trace.end_s,
            physical_gpus=self.org.physical_gpus,
            capacity_gpu_equivalents=float(self.org.gpu_equivalents),
            sessions=len(self.trace.sessions),
            jobs=len(self.trace.jobs),
            checkpoint_s=self.checkpoint_s,
            **self.run_info,
        )

    def _close_sessions(self, end: float) -> list[tuple[float, float, bool]]:
        """Every session still open ends with the trace; the spawns still waiting then:
        (requested at, waited so far, after a reclaim)."""
        unserved = []
        for state in self.sessions.values():
            if state.phase in ("waiting", "starting") and not self.policy.oracle:
                waited = end - state.requested_at
                unserved.append((state.requested_at, waited, state.returned_at is not None))
            if state.phase not in ("new", "done"):
                self._close_session(state, "trace_end")
        return unserved

    def _close_work(self, end: float) -> None:
        """The Jobs running at the end computed until it; every allocation ends with it; the
        Jobs still waiting for cards wait until it."""
        for key, record in self.jobs.items():
            if key in self.kueue.admitted and record.finished is None and key not in self.unplaced:
                started = self.job_started.get(key, end)
                self.compute(
                    started, end, record.job.utilization, float(record.job.gpus), "training"
                )
        for alloc in self.allocations.values():
            alloc.end = end
            self.closed.append(alloc)
        for wl, since in self.unplaced.values():
            if wl.kind == "training":  # still waiting for cards at the end
                self.unplaced_jobs.append((since, end, self.jobs[wl.key].job.gpus))

    def _session_seconds(self, end: float) -> float:
        """The session-seconds inside the measured window."""
        lo = self.trace.burn_in_s
        return sum(
            max(0.0, min(s.ended_at, end) - max(s.session.start_s, lo))
            for s in self.sessions.values()
            if s.ended_at is not None
        )


def _gib(text: str | None) -> float:
    if not text:
        return 0.0
    units = {"Ki": 2**-20, "Mi": 2**-10, "Gi": 1.0, "Ti": 2**10}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text) / 2**30

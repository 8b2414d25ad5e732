"""The console's answers, built from the running service's memory (no Kubernetes or Hub call).

:class:`ConsoleState` reads the reclaim loop (its last plan and inputs, ledger, journal, hand-off
records), the Kueue watch caches and the policy in force. The work is done where it belongs:

- per cycle (:meth:`ConsoleState.refresh`, a cycle listener): the plan's workbench rows, one per
  GPU server, and their JSON — the bulk of the answer (5,000 servers: 2.6 MB); the per-GPU
  and sizing answers, serialised (and gzipped) once;
- at most once per ``ttl`` seconds (and after each cycle): the rest (teams from the watch
  caches, recent events, hand-offs), and the whole answer serialised (and gzipped) once;
- per request: the bytes of the last build. A caller limited to some teams gets the same
  answer filtered, built once per build for each set of teams; ``teams=`` narrows an answer
  to the teams asked for (the page of a team lead, a dashboard of one team).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, TypedDict, TypeVar

from gpuaas_service import api_types as service_api
from gpuaas_service.console.aggregates import plan_rows, summary, teams
from gpuaas_service.console.fit import fit_rows
from gpuaas_service.console.gpus import gpu_rows, pod_places, read_node
from gpuaas_service.console.journal import Entry
from gpuaas_service.console.ledger import (
    DayKey,
    Ledger,
    Usage,
    holds_its_gpu,
    servers_on_nodes,
)
from gpuaas_service.console.record import ConsoleRecord
from gpuaas_service.console.starts import StartWatch
from gpuaas_service.reclaim.decide import Plan, assess_handoff
from gpuaas_service.reclaim.events import CycleInputs, CycleResult, LoopEvent
from gpuaas_service.reclaim.explain import explain_policies
from gpuaas_service.reclaim.explain_input import dump_snapshot
from gpuaas_service.reclaim.loop import ReclaimLoop
from jupyter_gpuaas.core.catalog import Catalog
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload
from jupyter_gpuaas.core.sizing import PeakHistory
from jupyter_gpuaas.hub.kueue_watch import KueueReader

__all__ = ["ConsoleState", "export_rows"]

log = logging.getLogger(__name__)

EXPORT_FIELDS = (
    "day",
    "team",
    "user",
    "offering",
    "kind",
    "allocated_hours",
    "busy_hours",
    "idle_hours",
    "unknown_hours",
    "reclaims",
    "failed_starts",
    "waiting_hours",
)

T = TypeVar("T")
Visible = frozenset[str] | None
"""The teams an answer holds (``None``: every team)."""

GZIP_LEVEL = 1
"""Fast: the answer is mostly repeated keys, and level 1 already takes it to about a tenth."""

KEEP_VARIANTS = 16
"""Answers for at most this many sets of teams are kept per build and per cycle (callers with
``teams=`` choose the set: past this many, a set's answer is built for its request only)."""


def _kept(table: dict[Visible, T], visible: Visible, make: Callable[[], T]) -> T:
    if visible in table:
        return table[visible]
    value = make()
    if len(table) < KEEP_VARIANTS or visible is None:
        table[visible] = value
    return value


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


@dataclass
class _Rows:
    """One plan's workbench rows, their JSON and summary per set of teams (once per cycle)."""

    plan: Plan | None
    rows: list[service_api.ServiceWorkbench]
    team_of: Callable[[str], str] = lambda key: ""
    """The team of a queued workload, by its key (``namespace/name``)."""
    encoded: dict[Visible, bytes] = field(default_factory=dict)
    summaries: dict[Visible, service_api.ServiceActionCounts] = field(default_factory=dict)
    views: dict[str, dict[Visible, bytes]] = field(default_factory=dict)
    """The per-GPU and sizing answers' JSON (and gzipped) by view, per set of teams."""

    def of(self, visible: Visible) -> list[service_api.ServiceWorkbench]:
        if visible is None:
            return self.rows
        return [_unnamed_row(r, visible, self.team_of) for r in self.rows if r["team"] in visible]

    def json(self, visible: Visible) -> bytes:
        return _kept(self.encoded, visible, lambda: _encode(self.of(visible)))

    def summary(self, visible: Visible) -> service_api.ServiceActionCounts:
        plan = self.plan
        return _kept(
            self.summaries,
            visible,
            lambda: summary(plan, teams=visible),
        )


def unnamed_as(
    key: str | None, visible: frozenset[str], team_of: Callable[[str], str]
) -> str | None:
    """How a viewer of the ``visible`` teams may see the queued workload ``key`` (a row's
    hand-off, an event's workload): another team's by its team only (``work of team T``), as
    its users are told (a team lead sees their own teams' names, no others'); ``None``: as
    it is."""
    if not key:
        return None
    team = team_of(key)
    return None if team in visible else f"work of team {team or '?'}"


def _unnamed_row(
    row: service_api.ServiceWorkbench, visible: frozenset[str], team_of: Callable[[str], str]
) -> service_api.ServiceWorkbench:
    key = row["handoff"]
    words = unnamed_as(key, visible, team_of)
    if key is None or words is None:
        return row
    return {**row, "handoff": None, "reason": row["reason"].replace(key, words)}


def _unnamed_event(
    event: service_api.ServiceConsoleEvent,
    visible: frozenset[str],
    team_of: Callable[[str], str],
) -> service_api.ServiceConsoleEvent:
    key = event["workload"]
    words = unnamed_as(key, visible, team_of)
    if words is None:
        return event
    return {**event, "workload": words, "reason": event["reason"].replace(key, words)}


class PolicyFile(TypedDict, total=False):
    """The policy file the console names (``api/console``'s ``policy`` but ``in_force``):
    its path and why it was not read, absent where the service was given its policy inline."""

    file: str | None
    error: str


@dataclass
class _Built:
    at: float
    rows: _Rows
    body: service_api.ServiceConsole
    """Everything but the workbenches (empty here), for every team (``visible_teams`` and
    ``summary``: each viewer's, in :meth:`ConsoleState._head`)."""
    heads: dict[Visible, service_api.ServiceConsole] = field(default_factory=dict)
    encoded: dict[Visible, bytes] = field(default_factory=dict)
    gzipped: dict[Visible, bytes] = field(default_factory=dict)


class ConsoleState:
    """The console's answers, and a listener of the loop (:meth:`ReclaimLoop.listeners`): it
    feeds its :class:`~.record.ConsoleRecord` and, after each cycle, updates the metrics and
    builds the new answer."""

    def __init__(
        self,
        loop: ReclaimLoop,
        view: KueueReader,
        *,
        record: ConsoleRecord | None = None,
        notebook_namespace: str,
        job_namespaces: Sequence[str],
        regret_window: timedelta,
        policy_file: Callable[[], PolicyFile] = PolicyFile,
        ttl: float = 2.0,
        clock: Callable[[], datetime] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        pods: Callable[[], Iterable[Mapping[str, Any]] | None] | None = None,
        usage_history: Callable[[], PeakHistory] = lambda: PeakHistory({}),
        catalog: Callable[[], Catalog | None] = lambda: None,
        nodes: Callable[[], Iterable[Mapping[str, Any]] | None] | None = None,
        job_pods: Callable[[], Iterable[Mapping[str, Any]] | None] | None = None,
    ) -> None:
        self.loop = loop
        self.view = view
        self.record = record if record is not None else ConsoleRecord()
        """The journal and the ledger."""
        self.notebook_namespace = notebook_namespace
        self.namespaces = list(dict.fromkeys([*job_namespaces, notebook_namespace]))
        self.regret_window = regret_window
        self.policy_file = policy_file
        self.ttl = ttl
        self.clock = clock or loop.clock
        self.monotonic = monotonic
        self._rows: _Rows | None = None
        self._built: _Built | None = None
        self._workload_cache: tuple[int, list[WorkloadInfo]] | None = None
        self._cycle_workloads: tuple[CycleInputs, list[WorkloadInfo]] | None = None
        self.builds = 0
        """How many times the answer was built (the rows: :attr:`row_builds`)."""
        self.row_builds = 0
        self.pods = pods if pods is not None else loop.feeds.pods
        """The notebook pods as the service's watch holds them (the per-GPU view's nodes)."""
        self.usage_history = usage_history
        """Each user's recent session peaks (the sizing view)."""
        self.catalog = catalog
        """The catalog the sizing view advises from (``None``: no advice)."""
        self.nodes = nodes
        """The Node objects as the service's watch holds them (the per-GPU view's free rows;
        ``None``: not watched)."""
        self.job_pods = job_pods
        """The pods of the teams' training namespaces as a watch holds them (their nodes)."""
        self.flavor_labels: dict[str, dict[str, str]] = {}
        """Each ResourceFlavor's node labels, read once per cycle (a free row's pool)."""
        self.starts = StartWatch()
        """The notebook pods between cycles, to count failed starts (:mod:`.starts`)."""

    def _cycle(self) -> CycleInputs | None:
        """The last cycle's inputs, where they hold what it read (Kueue, Workloads, pods)."""
        inputs = self.loop.state.last_inputs
        return inputs if inputs is not None and inputs.queue_state is not None else None

    def _queue_state(self) -> QueueState:
        """Kueue's queues as the last cycle read them (its plan and its counts are of one
        moment); before a cycle, as the watch caches hold them now."""
        cycle = self._cycle()
        if cycle is not None and cycle.queue_state is not None:
            return cycle.queue_state
        return self.view.queue_state()

    def _workloads(self) -> list[WorkloadInfo]:
        """The Workloads of the watched namespaces as the last cycle read them (before a cycle:
        the watch caches', read again only after the view changed)."""
        cycle = self._cycle()
        if cycle is not None:
            cached_cycle = self._cycle_workloads
            if cached_cycle is None or cached_cycle[0] is not cycle:
                cached_cycle = self._cycle_workloads = (
                    cycle,
                    [read_workload(o) for o in cycle.workloads],
                )
            return cached_cycle[1]
        generation = getattr(self.view, "generation", None)
        cached = self._workload_cache
        if isinstance(generation, int) and cached is not None and cached[0] == generation:
            return cached[1]
        found = [read_workload(o) for ns in self.namespaces for o in self.view.workloads(ns)]
        if isinstance(generation, int):
            self._workload_cache = (generation, found)
        return found

    def _team_of_workload(self) -> Callable[[str], str]:
        """Workload key → its team: a team's namespace, or in the notebook namespace its
        LocalQueue (one per team); ``""`` when unknown (gone since)."""
        queues = {f"{w.namespace}/{w.name}": w.queue_name for w in self._workloads()}
        records = {r.workload: r.team for r in self.loop.state.handoffs.values() if r.team}
        notebooks = self.notebook_namespace

        def team_of(key: str) -> str:
            namespace = key.partition("/")[0]
            if namespace != notebooks:
                return namespace
            return records.get(key) or queues.get(key, "")

        return team_of

    # ------------------------------------------------------------------ building

    def _plan_rows(self) -> _Rows:
        plan = self.loop.state.last_plan
        if self._rows is None or self._rows.plan is not plan:
            self._rows = _Rows(
                plan, plan_rows(plan) if plan is not None else [], self._team_of_workload()
            )
            self.row_builds += 1
        return self._rows

    def _current(self) -> _Built:
        rows = self._plan_rows()
        built = self._built
        if built is None or built.rows is not rows or self.monotonic() - built.at > self.ttl:
            built = self._built = _Built(self.monotonic(), rows, self._build())
            self.builds += 1
        return built

    def happened(self, event: LoopEvent) -> None:
        self.record.happened(event)

    async def cycle_completed(self, result: CycleResult) -> None:
        pods = self.pods() if self.pods is not None else None
        await self.record.cycle_completed(
            result, servers_on_nodes(pods) if pods is not None else None
        )
        if self.nodes is not None:
            await self._read_flavor_labels()
        update_metrics(self)
        self.count_failed_starts(result.now)
        self.refresh()

    async def _read_flavor_labels(self) -> None:
        """The ResourceFlavors' node labels (one list call per cycle); the last read kept
        when this one fails."""
        try:
            self.flavor_labels = await self.loop.kube.flavor_labels()
        except Exception as e:  # noqa: BLE001 - the view shows free rows without their pool
            log.warning("console: could not read the ResourceFlavors: %s", e)

    def count_failed_starts(self, now: datetime) -> None:
        """Look at the notebook pods: count the starts that failed since the last look, in
        the ledger (the export, the teams' today) and the metrics."""
        pods = self.pods() if self.pods is not None else None
        if pods is None:
            return  # not listed yet
        metrics = self.loop.metrics
        for f in self.starts.observe(pods, now):
            self.record.ledger.failed_start(f.team, f.user, f.offering, f.at)
            metrics.know_teams([f.team])
            metrics.failed_starts.labels(f.team).inc()
            log.info(
                "console: failed start team=%s user=%s server=%s pod=%s how=%s",
                f.team,
                f.user,
                f.server,
                f.pod,
                f.how,
            )

    def refresh(self) -> None:
        """After each cycle (a listener): build the new plan's rows, the full answer and the
        per-GPU and sizing answers now, so that no request pays for them."""
        self.answer_gzip(None)
        for view in VIEWS:
            self.view_gzip(view, None)

    def view_json(self, view: str, only: Iterable[str] | None = None) -> bytes:
        """The ``gpus`` (:meth:`gpus`) or ``fit`` (:meth:`fit`) answer as JSON, built once per
        cycle for each set of teams: both follow the plan (at 2,000 servers a build takes
        longer than a request may)."""
        visible = self._visible(only)
        build = VIEWS[view]
        return _kept(
            self._plan_rows().views.setdefault(view, {}),
            visible,
            lambda: _encode(build(self, visible)),
        )

    def view_gzip(self, view: str, only: Iterable[str] | None = None) -> bytes:
        """:meth:`view_json` gzipped, once per cycle for each set of teams."""
        visible = self._visible(only)
        return _kept(
            self._plan_rows().views.setdefault(view + ".gz", {}),
            visible,
            lambda: gzip.compress(self.view_json(view, visible), GZIP_LEVEL, mtime=0),
        )

    @staticmethod
    def _visible(only: Iterable[str] | None) -> Visible:
        return frozenset(only) if only is not None else None

    def _head(self, built: _Built, visible: Visible) -> service_api.ServiceConsole:
        """The answer but its workbenches (empty) for the ``visible`` teams."""
        body = built.body

        def make() -> service_api.ServiceConsole:
            if visible is None:
                return {**body, "visible_teams": None, "summary": built.rows.summary(None)}
            team_of = built.rows.team_of
            return {
                **body,
                "visible_teams": sorted(visible),
                "teams": [t for t in body["teams"] if t["team"] in visible],
                "summary": built.rows.summary(visible),
                "events": [
                    _unnamed_event(e, visible, team_of)
                    for e in body["events"]
                    if e["team"] in visible
                ],
                "handoffs": [h for h in body["handoffs"] if h["team"] in visible],
                "regret": None,
            }

        return _kept(built.heads, visible, make)

    def answer(self, only: Iterable[str] | None = None) -> service_api.ServiceConsole:
        """The ``api/console`` answer (``only``: the teams the caller may see)."""
        built = self._current()
        visible = self._visible(only)
        return {**self._head(built, visible), "workbenches": built.rows.of(visible)}

    def _json(self, built: _Built, visible: Visible) -> bytes:
        def make() -> bytes:
            # the workbenches are last: their JSON is kept per plan and spliced in
            head = {k: v for k, v in self._head(built, visible).items() if k != "workbenches"}
            return _encode(head)[:-1] + b',"workbenches":' + built.rows.json(visible) + b"}"

        return _kept(built.encoded, visible, make)

    def answer_json(self, only: Iterable[str] | None = None) -> bytes:
        """:meth:`answer` as JSON, serialised once per build for each set of teams."""
        return self._json(self._current(), self._visible(only))

    def answer_gzip(self, only: Iterable[str] | None = None) -> bytes:
        """:meth:`answer_json` gzipped, once per build for each set of teams."""
        built, visible = self._current(), self._visible(only)
        return _kept(
            built.gzipped,
            visible,
            lambda: gzip.compress(self._json(built, visible), GZIP_LEVEL, mtime=0),
        )

    def _build(self) -> service_api.ServiceConsole:
        loop_state = self.loop.state  # the plan, the records and the policy of one moment
        now = self.clock()
        plan = loop_state.last_plan
        state = self._queue_state()
        owners_team = {
            cq: (lq.name if ns == self.notebook_namespace else ns)
            for (ns, _n), lq in state.local_queues.items()
            for cq in [lq.cluster_queue]
        }
        handoffs: list[service_api.ServiceConsoleHandoff] = []
        for record in loop_state.handoffs.values():
            result = assess_handoff(record, now=now, timeout=loop_state.policies.handoff_timeout)
            handoffs.append(
                {
                    "workload": record.workload,
                    "cluster_queue": record.cluster_queue,
                    "team": record.team or owners_team.get(record.cluster_queue, ""),
                    "reclaimed_at": isoformat_z(record.reclaimed_at),
                    "admitted_at": isoformat_z(record.admitted_at) if record.admitted_at else None,
                    "latency_seconds": result.latency.total_seconds() if result.latency else None,
                    "status": result.status.value,
                    "reason": result.reason,
                }
            )
        policies = loop_state.policies
        return {
            "now": isoformat_z(now),
            "decided_at": isoformat_z(plan.now) if plan else None,
            "last_completed": isoformat_z(loop_state.last_completed)
            if loop_state.last_completed
            else None,
            "last_error": loop_state.last_error,
            "synced": state.synced,
            "reclaim": "on" if policies.policies else "off",
            "policy": {
                **self.policy_file(),
                "in_force": explain_policies(policies) if policies.policies else "",
            },
            "teams": teams(
                state,
                plan,
                self._workloads(),
                self.record.ledger.by_team(now.date()),
                notebook_namespace=self.notebook_namespace,
                now=now,
                reclaims=self.record.journal.reclaims_by_team(now.date()),
                failed_starts=self.record.ledger.failed_starts_by_team(now.date()),
                on_node=self.record.on_node,
            ),
            "events": self.record.journal.recent(self.regret_window),
            "handoffs": handoffs,
            "regret": self.record.journal.regret(self.regret_window),
            "visible_teams": None,  # each viewer's (_head)
            "summary": {},
            "workbenches": [],  # kept apart (_Rows)
        }

    def gpus(self, only: Iterable[str] | None = None) -> service_api.ServiceConsoleGpus:
        """The ``api/console/gpus`` answer: every GPU, held or free (:mod:`.gpus`)."""
        loop_state = self.loop.state
        plan, inputs = loop_state.last_plan, loop_state.last_inputs
        cycle = self._cycle()
        listed: Iterable[Mapping[str, Any]] | None
        job_listed: Iterable[Mapping[str, Any]] | None
        if cycle is not None:
            # holders, their pods and the Workloads as the cycle read them: one moment
            listed, job_listed = cycle.pods, cycle.job_pods
        else:
            listed = self.pods() if self.pods is not None else None
            job_listed = self.job_pods() if self.job_pods is not None else ()
        pods, job_pods = list(listed or ()), list(job_listed or ())
        # Free is what the nodes have less what the pods hold: not before both are listed.
        known = listed is not None and job_listed is not None
        nodes = self.nodes() if self.nodes is not None and known else None
        training = [w for w in self._workloads() if w.namespace != self.notebook_namespace]
        answer = gpu_rows(
            plan.decisions if plan is not None else (),
            pod_places(pods),
            inputs.reports if inputs is not None else {},
            inputs.pod_utilization if inputs is not None else {},
            training,
            now=self.clock(),
            only=only,
            nodes=[n for n in map(read_node, nodes or ()) if n is not None],
            pods=[*pods, *job_pods],
            flavor_labels=self.flavor_labels,
        )
        answer["as_of"] = isoformat_z(plan.now) if cycle is not None and plan else None
        return answer

    def fit(self, only: Iterable[str] | None = None) -> service_api.ServiceConsoleFit:
        """The ``api/console/fit`` answer: each GPU server against its user's need (:mod:`.fit`)."""
        plan = self.loop.state.last_plan
        # The MIG nodes' advice is the cluster's, for administrators only: a team lead's answer
        # names no node other teams use.
        nodes = self.nodes() if self.nodes is not None and only is None else None
        pods: list[Mapping[str, Any]] = []
        if nodes is not None:
            for listed in (self.pods, self.job_pods):
                pods.extend((listed() if listed is not None else None) or ())
        return fit_rows(
            [d.workbench for d in plan.decisions] if plan is not None else [],
            self.usage_history(),
            self.catalog(),
            only=only,
            mig_nodes=nodes,
            pods=pods,
        )

    def snapshot(self) -> service_api.ServiceConsoleSnapshot | None:
        """The last cycle's inputs as ``--explain --snapshot`` reads them (``None`` before)."""
        loop_state = self.loop.state
        plan, inputs = loop_state.last_plan, loop_state.last_inputs
        if plan is None or inputs is None:
            return None
        return dump_snapshot(
            plan.now,
            [d.workbench for d in plan.decisions],
            inputs.pending,
            inputs.handoffs,
            reports=inputs.reports,
            pod_utilization=inputs.pod_utilization,
            waits=inputs.waits,
        )


VIEWS: dict[
    str,
    Callable[
        [ConsoleState, Visible], service_api.ServiceConsoleGpus | service_api.ServiceConsoleFit
    ],
] = {
    "gpus": ConsoleState.gpus,
    "fit": ConsoleState.fit,
}
"""The answers kept as bytes per cycle beside the console's (:meth:`ConsoleState.view_json`)."""


def export_rows(
    ledger: Ledger,
    day: date,
    only: Iterable[str] | None = None,
    journal: Iterable[Entry] = (),
) -> list[service_api.ServiceExportRow]:
    """One day's GPU-equivalent hours by team, user and offering, the reclaims of that
    user's servers on that offering that day (from ``journal``: as far back as it holds) and
    their failed starts (from the ledger: :mod:`.starts`).

    ``unknown_hours`` is the time held while the activity verdict was unknown (no report, or
    GPU readings that failed): ``allocated = busy + idle + unknown``, to the 4 decimals shown.
    ``waiting_hours``: the GPU-equivalents asked for while waiting for them (in the queue, or
    admitted and waiting for a node) — not billed, not part of ``allocated``.
    A reclaim or failed start whose day has no hours (a failed start held no GPU for long, or
    all in a gap the ledger does not count) gets a row of its own with no hours and no kind."""
    allowed = set(only) if only is not None else None
    reclaims: dict[tuple[str, str, str], int] = {}
    for entry in journal:
        if entry.event == "reclaim" and not entry.dry_run and entry.at.date() == day:
            whose = (entry.team or "-", entry.user, entry.offering)
            reclaims[whose] = reclaims.get(whose, 0) + 1
    failed = dict(ledger.failed_starts.get(day, {}))
    usage = dict(ledger.day(day))
    have = {(k.team, k.user, k.offering) for k in usage}
    for team, user, offering in [*reclaims, *failed]:
        if (team, user, offering) not in have:
            have.add((team, user, offering))
            usage[DayKey(team, user, offering, "")] = Usage()
    rows: list[service_api.ServiceExportRow] = []
    for key, used in sorted(usage.items()):
        if allowed is not None and key.team not in allowed:
            continue
        # in ten-thousandths of an hour, so that the columns add up as shown
        allocated, busy, idle, waiting = (
            round(s / 3600 * 10_000) for s in (used.allocated, used.busy, used.idle, used.waiting)
        )
        rows.append(
            {
                "day": day.isoformat(),
                "team": key.team,
                "user": key.user,
                "offering": key.offering,
                "kind": key.kind,
                "allocated_hours": allocated / 10_000,
                "busy_hours": busy / 10_000,
                "idle_hours": idle / 10_000,
                "unknown_hours": max(allocated - busy - idle, 0) / 10_000,
                "reclaims": reclaims.pop((key.team, key.user, key.offering), 0),
                "failed_starts": failed.pop((key.team, key.user, key.offering), 0),
                "waiting_hours": waiting / 10_000,
            }
        )
    return rows


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection")."""

_LINE_STARTS = re.compile(r"(^|[\r\n])(?=[=+\-@\t\r])")
"""The start of the text and each line break, where a formula character follows."""


def spreadsheet_safe(value: object) -> object:
    """A text cell that a spreadsheet would run as a formula, with a leading apostrophe (user,
    team and offering names are the users' and admins' to choose) — at the start of the cell
    and after every CR or LF in it, since a reader that splits lines there sees a new row;
    numbers as they are."""
    if isinstance(value, str):
        return _LINE_STARTS.sub(r"\1'", value)
    return value


def export_csv(rows: Sequence[Mapping[str, object]]) -> str:
    """``rows`` as CSV (RFC 4180: CRLF between rows, so that a cell holding CR or LF is
    quoted, as the csv module quotes any cell holding a character of the line terminator)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: spreadsheet_safe(v) for k, v in row.items()})
    return out.getvalue()


def update_metrics(console: ConsoleState) -> None:
    """After each cycle: the showback gauges and counters (metrics.py)."""
    from fractions import Fraction

    from gpuaas_service.console.aggregates import queue_owners, queued_work
    from gpuaas_service.reclaim.idleness import State

    m = console.loop.metrics
    plan = console.loop.state.last_plan
    state = console._queue_state()
    m.know_teams(
        {team for team, _ in queue_owners(state, console.notebook_namespace).values()}
        | {d.workbench.team or "-" for d in (plan.decisions if plan is not None else ())}
    )
    if plan is not None:
        m.last_cycle.set(plan.now.timestamp())
        held: dict[tuple[str, str], dict[State, Fraction]] = {}
        for d in plan.decisions:
            wb = d.workbench
            if wb.gpu_equivalents > 0 and holds_its_gpu(wb, console.record.on_node):
                by = held.get((wb.team or "-", wb.kind))
                if by is None:
                    by = held[(wb.team or "-", wb.kind)] = {s: Fraction(0) for s in State}
                by[wb.idleness.state] += wb.gpu_equivalents
        for gauge in (m.gpu_allocated, m.gpu_busy, m.gpu_idle):
            gauge.clear()
        for (team, kind), by in held.items():
            m.gpu_allocated.labels(team, kind).set(float(sum(by.values(), Fraction(0))))
            m.gpu_busy.labels(team, kind).set(float(by[State.BUSY]))
            m.gpu_idle.labels(team, kind).set(float(by[State.IDLE]))
    for key, usage in console.record.ledger.last_added.items():
        m.gpu_allocated_seconds.labels(key.team, key.kind).inc(usage.allocated)
        m.gpu_busy_seconds.labels(key.team, key.kind).inc(usage.busy)
        m.gpu_idle_seconds.labels(key.team, key.kind).inc(usage.idle)
    now = console.clock()
    queued = queued_work(console._workloads(), state, console.notebook_namespace)
    for gauge in (m.queued_gpu, m.queued_workloads, m.oldest_wait):
        gauge.clear()
    for team, q in queued.items():
        m.queued_gpu.labels(team).set(float(q.gpu_equivalents))
        m.queued_workloads.labels(team).set(q.count)
        m.oldest_wait.labels(team).set((now - q.oldest).total_seconds() if q.oldest else 0)

"""What to do with each GPU workbench now: warn, reclaim, wait, clear a warning, or skip (why).

Pure: plain data and an injected clock in, a :class:`Plan` out. The service's loop gathers
the inputs (hub servers, activity reports judged by :mod:`.idleness`, Kueue's pending
workloads, earlier hand-offs) and carries out the plan; ``--explain`` prints it.

Rules, in order, for each workbench (its policy is the first that matches). Each is a function
of this module, named after the rule; every :class:`Decision` names the rule whose cause it
carries (:attr:`Decision.rule`), and ``--explain`` prints it.

1. :func:`never_touched`: no policy matches; starting or stopping; exempt; snoozed until later.
2. :func:`past_max_age` (the server is older than ``max_age``): a hard cap, busy or not, activity
   known or not — the server's age is the one signal here its user cannot forge. Warned and counted
   down like any reclaim; the policy's snoozes (rule 1) are all that can put it off.
3. :func:`in_use_or_unsure`: busy; activity unknown for less than the policy's ``unknown_grace``.
4. :func:`reasons_of_its_own`, no demand needed: ``max_idle`` (idle — or unknown past the grace —
   that long), ``reclaim: always`` (idle ``idle_after``). An unknown workbench past the grace is
   reclaimed only for these (or ``max_age``), never for demand. Wherever ``idle_after`` is named, a
   workbench whose server keeps its kernels' state through a stop (:attr:`Workbench.keeps_state`)
   is held to the policy's ``idle_after_when_kept`` instead, where one is set: its reclaim moves
   the session rather than ending it.
5. :func:`serve_demand` (what it may take: :func:`idle_enough_for_demand`): for each ClusterQueue
   with pending work, its head (highest priority, then lowest position), highest priority first,
   asks for what it lacks: per resource, the amount minus the quota already free to it, in one
   flavor (Kueue assigns one flavor per resource). It is given *just enough* idle workbenches (idle
   at least ``idle_after``) whose quota it can use — same ClusterQueue, else a shared cohort
   (nearest first) — holding that flavor and resource: those with reasons of their own first,
   then those already warned (a warning is carried out, not withdrawn for a workbench that became
   idle enough since), then, with the policy file's ``prefer_own_team``, the queued work's own
   team's before a lending team's, then the longest idle. Any workbench it could do without is
   dropped again, so the selection is minimal. If the idle workbenches cannot cover it, none is
   taken: a partial reclaim admits nothing. A queue with a hand-off still waiting for admission
   gets nothing more; a queue whose hand-off failed (not admitted within ``handoff_timeout``)
   gets nothing while that same workload is still pending.
6. :func:`serve_placement`, applied before rule 5 (quota is not placement): an admitted workload
   whose pod waits for whole cards that exist only as scraps (:class:`PlacementWait`: the node's
   GPUs shared by others' work) is served before queued work. Of the cards it could use, only those
   every holder of which is a workbench idle at least ``idle_after`` (or with a reason of its own)
   can be freed: never a busy, kept, starting, exempt or snoozed one, nor a card that other work
   holds. Cards already being freed (every holder stopping) count as free. It is given the cards it
   still lacks that cost the fewest workbenches, then the idlest (the most recent activity on the
   card the oldest); if too few can be freed, none is taken and the plan says why.
7. :func:`warn_first` and :func:`keep_or_withdraw_warnings`: a selected workbench without a warning
   is warned (reclaim at ``now + warn_before``); one whose countdown runs is left to wait; a demand
   batch is reclaimed together, once every member's countdown is over (``warn_before: 0`` reclaims
   at once). A warning whose reason is gone is cleared.

``dry_run`` (the file's, a policy's, or the caller's) marks decisions not to be carried out; a
demand batch with one dry-run member is dry-run as a whole (half a batch frees quota that admits
nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import Policy, PolicySet
from jupyter_gpuaas.core.durations import format_duration, isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents
from jupyter_gpuaas.core.kueue import FlavorResource, format_quantity

__all__ = [
    "Action",
    "Decision",
    "HandOffRecord",
    "HandOffResult",
    "HandOffStatus",
    "Need",
    "PendingWorkload",
    "PlacementTarget",
    "PlacementWait",
    "Plan",
    "SnoozeResult",
    "Target",
    "Workbench",
    "assess_handoff",
    "decide",
    "snooze",
]

PHASES = ("starting", "running", "stopping")


class Action(str, enum.Enum):
    WARN = "warn"
    WAIT = "wait"
    RECLAIM = "reclaim"
    CLEAR_WARNING = "clear-warning"
    SKIP = "skip"


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, kw_only=True)
class Workbench:
    """A user's server as the culler sees it."""

    user: str
    server: str = ""
    """The server's name; ``""`` is the default server."""
    groups: tuple[str, ...] = ()
    team: str = ""
    kind: str = "gpu"
    offering: str = ""
    holds: Mapping[FlavorResource, Fraction] = field(default_factory=dict)
    """Quota Kueue counts for it, by (flavor, resource) — e.g. ``("a100-mig",
    "nvidia.com/mig-1g.5gb"): 1``."""
    gpu_equivalents: Fraction = Fraction(0)
    cluster_queue: str = ""
    cohorts: tuple[str, ...] = ()
    """Its ClusterQueue's cohort, then that cohort's parents; empty when it lends nothing."""
    started_at: datetime
    phase: str = "running"
    """``starting``, ``running`` or ``stopping``."""
    idleness: Idleness
    snoozes_used: int = 0
    snoozed_until: datetime | None = None
    warned_at: datetime | None = None
    warned_deadline: datetime | None = None
    """The deadline its warning told the user (kept on the pod): never reclaimed before it."""
    warned_reason: str = ""
    """The reason its warning told the user (kept on the pod)."""
    cards: tuple[str, ...] = ()
    """The cards its share is on (``node/GPU-uuid``, as the device plugin recorded them on the
    pod); empty when not known or not a share."""
    keeps_state: bool = False
    """Its server said (its latest activity report's ``keeps_kernel_state``) that it saves its
    kernels' state before a stop: the policy's ``idle_after_when_kept`` applies. Its user's own
    server says so, so it can be forged, but only to be reclaimed sooner."""

    @property
    def key(self) -> str:
        return f"{self.user}/{self.server}" if self.server else self.user


@dataclass(frozen=True, kw_only=True)
class Need:
    """One resource a pending workload asks for, and what is already free to it."""

    resource: str
    amount: Fraction
    flavors: tuple[str, ...] = ()
    """The flavors it may get, in the ClusterQueue's order; empty: any flavor."""
    free: Mapping[str, Fraction] = field(default_factory=dict)
    """Quota of this resource already free to it now, per flavor (from the headroom)."""


@dataclass(frozen=True, kw_only=True)
class PendingWorkload:
    name: str
    namespace: str
    cluster_queue: str
    cohorts: tuple[str, ...] = ()
    priority: int = 0
    position: int = 0
    """Its position in its ClusterQueue (the visibility API's, from 0)."""
    needs: tuple[Need, ...] = ()
    local_queue: str = ""
    team: str = ""
    """The team whose work it is (a user of another team is told only "queued work of Team
    B", by the team's display name, never the work's name)."""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, kw_only=True)
class PlacementWait:
    """An admitted workload whose pod waits for whole cards that no card has free: Kueue
    admitted it on the pool's quota, but the quota exists only as scraps of shares on cards
    that others hold (HAMi's scheduler left its pod ``Unschedulable`` for lack of room)."""

    name: str
    """The waiting pod's name."""
    namespace: str
    workload: str = ""
    """Its Kueue Workload's name, where known."""
    team: str = ""
    cluster_queue: str = ""
    priority: int = 0
    flavor: str
    """The flavor Kueue admitted it in: the shares it may displace hold quota there."""
    node: str = ""
    """The node it is bound to (its cards must be there); ``""``: any node of the flavor."""
    gpu_type: str = "GPU"
    """What its users call the card (``nvidia.com/use-gputype``), for the words."""
    what: str = "a training Job"
    """What a workbench's user is told it is (never its name: it may be another team's)."""
    cards: int = 1
    """Whole cards it needs."""
    free_cards: int = 0
    """Whole cards of the pool already free, as far as the pods show (they wait to be placed)."""
    blocked: Mapping[str, str] = field(default_factory=dict)
    """Cards that work other than workbenches holds (card → what), never freed for it."""
    since: datetime | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class HandOffStatus(str, enum.Enum):
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, kw_only=True)
class HandOffRecord:
    """A reclaim carried out earlier for a queued workload (kept where restarts keep it)."""

    workload: str
    """``namespace/name``."""
    cluster_queue: str
    reclaimed_at: datetime
    admitted_at: datetime | None = None
    team: str = ""
    """The team whose queued work it is (its lead's console shows the hand-off)."""


@dataclass(frozen=True)
class HandOffResult:
    status: HandOffStatus
    reason: str
    latency: timedelta | None = None


def assess_handoff(record: HandOffRecord, *, now: datetime, timeout: timedelta) -> HandOffResult:
    """A hand-off succeeds when its workload is admitted within ``timeout`` of the reclaim."""
    deadline = record.reclaimed_at + timeout
    if record.admitted_at is not None:
        latency = max(record.admitted_at - record.reclaimed_at, timedelta(0))
        if record.admitted_at <= deadline:
            return HandOffResult(
                HandOffStatus.SUCCEEDED,
                f"{record.workload} was admitted {format_duration(latency)} after the reclaim",
                latency,
            )
        return HandOffResult(
            HandOffStatus.FAILED,
            f"{record.workload} was admitted only {format_duration(latency)} after the reclaim"
            f" (more than {format_duration(timeout)})",
            latency,
        )
    if now <= deadline:
        return HandOffResult(
            HandOffStatus.WAITING,
            f"waiting for {record.workload} to be admitted (reclaimed"
            f" {format_duration(now - record.reclaimed_at)} ago, allowed"
            f" {format_duration(timeout)})",
        )
    return HandOffResult(
        HandOffStatus.FAILED,
        f"{record.workload} was not admitted within {format_duration(timeout)} of the reclaim"
        f" at {isoformat_z(record.reclaimed_at)}: something else took the freed quota, or it"
        " needs more than was freed",
    )


# --------------------------------------------------------------------------- snoozing


@dataclass(frozen=True)
class SnoozeResult:
    allowed: bool
    reason: str
    until: datetime | None = None
    snoozes_left: int = 0


def snooze(workbench: Workbench, policy: Policy | None, *, now: datetime) -> SnoozeResult:
    """What pressing "Keep my GPU" does now (the caller records ``until`` and the count)."""
    if policy is None:
        return SnoozeResult(True, "no policy applies: nothing to snooze")
    left = policy.max_snoozes - workbench.snoozes_used
    if left <= 0:
        return SnoozeResult(
            False,
            f"no snoozes left (policy {policy.name} allows {policy.max_snoozes} per server)",
        )
    until = now + policy.snooze_for
    if workbench.snoozed_until is not None and workbench.snoozed_until > until:
        until = workbench.snoozed_until
    return SnoozeResult(
        True,
        f"kept until {isoformat_z(until)} ({left - 1} snooze(s) left)",
        until=until,
        snoozes_left=left - 1,
    )


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True, kw_only=True)
class Decision:
    workbench: Workbench
    action: Action
    code: str
    """Machine-readable cause: ``demand``, ``always``, ``max-idle``, ``max-age`` (warn, wait,
    reclaim; ``placement``: for an admitted workload waiting for a whole card); ``no-policy``,
    ``starting``, ``stopping``, ``exempt``, ``snoozed``, ``busy``,
    ``unknown``, ``not-idle-yet``, ``no-demand`` (skip, clear-warning)."""
    reason: str
    policy: str | None = None
    dry_run: bool = False
    reclaim_at: datetime | None = None
    handoff: str | None = None
    """The queued workload (``namespace/name``) this reclaim is for."""
    snoozes_left: int | None = None
    user_reason: str = ""
    """What the workbench's user is told (banner, webhook), where it differs from ``reason``:
    another team's queued work is named by its team only."""
    rule: str = ""
    """The rule whose cause this is: the name of its function in this module
    (:data:`WORKBENCH_RULES`, :func:`serve_placement`, :func:`serve_demand`)."""

    @property
    def told(self) -> str:
        return self.user_reason or self.reason

    def log_record(self, now: datetime) -> dict[str, Any]:
        """The structured audit record of this decision (one JSON log line)."""
        wb = self.workbench
        return {
            "event": "culler.decision",
            "at": isoformat_z(now),
            "action": self.action.value,
            "code": self.code,
            "rule": self.rule,
            "reason": self.reason,
            "user": wb.user,
            "server": wb.server,
            "team": wb.team,
            "kind": wb.kind,
            "offering": wb.offering,
            "gpu_equivalents": format_gpu_equivalents(wb.gpu_equivalents),
            "policy": self.policy,
            "dry_run": self.dry_run,
            "activity": wb.idleness.state.value,
            "idle_seconds": int(wb.idleness.idle_for(now).total_seconds()),
            "reclaim_at": isoformat_z(self.reclaim_at) if self.reclaim_at else None,
            "handoff": self.handoff,
            "snoozes_left": self.snoozes_left,
        }


@dataclass(frozen=True, kw_only=True)
class Target:
    """One queue head considered for a hand-off, and what the plan does for it."""

    workload: PendingWorkload
    status: str
    """``reclaim`` (the batch goes now), ``warn`` (its batch is being warned), ``enough-free``,
    ``not-enough``, ``handoff-waiting``, ``blocked``; for a :class:`PlacementWait`: ``reclaim``,
    ``warn``, ``freeing`` (its cards are being freed), ``unplaceable`` (no card can be freed)."""
    reason: str
    workbenches: tuple[str, ...] = ()
    frees: Mapping[FlavorResource, Fraction] = field(default_factory=dict)
    reclaim_at: datetime | None = None
    dry_run: bool = False


@dataclass(frozen=True, kw_only=True)
class PlacementTarget:
    """An admitted workload waiting for whole cards, and what the plan does for it."""

    wait: PlacementWait
    status: str
    """``reclaim``, ``warn``, ``freeing`` or ``unplaceable`` (see :attr:`Target.status`)."""
    reason: str
    cards: tuple[str, ...] = ()
    """The cards chosen to be freed."""
    workbenches: tuple[str, ...] = ()
    reclaim_at: datetime | None = None
    dry_run: bool = False


@dataclass(frozen=True)
class Plan:
    now: datetime
    decisions: tuple[Decision, ...]
    """One per workbench, in input order."""
    targets: tuple[Target, ...] = ()
    placements: tuple[PlacementTarget, ...] = ()
    """Admitted workloads waiting for whole cards, and the cards the plan frees for them."""

    def with_action(self, action: Action) -> list[Decision]:
        return [d for d in self.decisions if d.action is action]

    def to_act_on(self) -> list[Decision]:
        """Decisions the loop carries out (warn, reclaim, clear-warning; not dry-run)."""
        return [
            d
            for d in self.decisions
            if not d.dry_run and d.action in (Action.WARN, Action.RECLAIM, Action.CLEAR_WARNING)
        ]


# --------------------------------------------------------------------------- deciding


@dataclass
class _Case:
    wb: Workbench
    policy: Policy | None
    dry_run: bool
    skip: tuple[str, str] | None = None
    own: tuple[str, str] | None = None
    """(code, reason) of a reclaim reason of its own."""
    rule: str = ""
    """The rule that gave ``skip`` or ``own`` (its function's name)."""
    eligible: bool = False
    """Idle at least ``idle_after``: may be reclaimed for demand."""
    decision: Decision | None = None
    demand_note: str = ""
    warned: datetime | None = None
    """Its warning, unless a snooze came after it (then it starts over)."""

    def left_alone(self, rule: WorkbenchRule, code: str, reason: str) -> bool:
        self.skip, self.rule = (code, reason), rule.__name__
        return True

    def reason_of_its_own(self, rule: WorkbenchRule, code: str, reason: str) -> None:
        self.own, self.rule = (code, reason), rule.__name__


WorkbenchRule = Callable[[_Case, PolicySet, datetime], bool]
"""A rule that looks at one workbench alone (rules 1–4): it may leave the workbench alone, give
it a reason of its own or find it idle enough for demand; ``True``: the rules after it do not
apply."""


def never_touched(case: _Case, policies: PolicySet, now: datetime) -> bool:
    """Rule 1: no policy matches; starting or stopping; exempt; snoozed until later."""
    wb, policy = case.wb, case.policy
    if policy is None:
        return case.left_alone(never_touched, "no-policy", "no policy matches this workbench")
    if wb.phase in ("starting", "stopping"):
        return case.left_alone(never_touched, wb.phase, f"the server is {wb.phase}")
    exempt = policies.exemption(policy, wb.user, wb.groups)
    if exempt:
        return case.left_alone(never_touched, "exempt", exempt)
    if wb.snoozed_until is not None and wb.snoozed_until > now:
        return case.left_alone(
            never_touched, "snoozed", f"snoozed by its user until {isoformat_z(wb.snoozed_until)}"
        )
    return False


def past_max_age(case: _Case, policies: PolicySet, now: datetime) -> bool:
    """Rule 2: older than ``max_age``, a hard cap resting on what its user cannot forge (the
    pod's age): busy or not, known or not; only the warning, its countdown and the policy's
    snoozes come first. An idle one may still serve demand (the rules after it)."""
    wb, policy = case.wb, case.policy
    assert policy is not None
    age = max(now - wb.started_at, timedelta(0))
    if policy.max_age is None or age < policy.max_age:
        return False
    case.reason_of_its_own(
        past_max_age,
        "max-age",
        f"running {format_duration(age)}, max_age is {format_duration(policy.max_age)}"
        " (a hard cap: reclaimed even while in use)",
    )
    return wb.idleness.state is not State.IDLE


def in_use_or_unsure(case: _Case, policies: PolicySet, now: datetime) -> bool:
    """Rule 3: busy; activity unknown for less than the policy's ``unknown_grace``."""
    idle, policy = case.wb.idleness, case.policy
    assert policy is not None
    if idle.state is State.BUSY:
        return case.left_alone(in_use_or_unsure, "busy", f"in use: {idle.reason}")
    if idle.state is State.UNKNOWN and idle.unknown_for(now) < policy.unknown_grace:
        return case.left_alone(
            in_use_or_unsure,
            "unknown",
            f"activity unknown for {format_duration(idle.unknown_for(now))}: {idle.reason}; left"
            f" alone for {format_duration(policy.unknown_grace)} (unknown_grace)",
        )
    return False


def _idle_after(case: _Case) -> tuple[timedelta, str]:
    """The idle threshold that holds for this workbench, and the words that say why."""
    assert case.policy is not None
    idle_after = case.policy.idle_threshold(case.wb.keeps_state)
    return idle_after, " (kernel state kept)" if idle_after != case.policy.idle_after else ""


def reasons_of_its_own(case: _Case, policies: PolicySet, now: datetime) -> bool:
    """Rule 4: ``max_idle`` (idle, or unknown past the grace, that long); ``reclaim: always``
    (idle ``idle_after``). An unknown workbench past the grace is reclaimed only for these (or
    ``max_age``), never for demand."""
    idle, policy = case.wb.idleness, case.policy
    assert policy is not None
    idle_for = idle.idle_for(now)
    idle_after, kept = _idle_after(case)
    if case.own is None and policy.max_idle is not None and idle_for >= policy.max_idle:
        case.reason_of_its_own(
            reasons_of_its_own,
            "max-idle",
            f"{'presumed ' if idle.state is State.UNKNOWN else ''}idle"
            f" {format_duration(idle_for)}, max_idle is {format_duration(policy.max_idle)}",
        )
    elif (
        case.own is None
        and policy.reclaim == "always"
        and idle.state is State.IDLE
        and idle_for >= idle_after
    ):
        case.reason_of_its_own(
            reasons_of_its_own,
            "always",
            f"idle {format_duration(idle_for)} (idle_after {format_duration(idle_after)}{kept},"
            " reclaim: always)",
        )
    if idle.state is not State.UNKNOWN:
        return False
    if case.own is None:
        case.left_alone(
            reasons_of_its_own,
            "unknown",
            f"activity unknown for {format_duration(idle.unknown_for(now))}: {idle.reason};"
            " past the grace only max_idle / max_age apply, and neither is reached",
        )
    return True


def idle_enough_for_demand(case: _Case, policies: PolicySet, now: datetime) -> bool:
    """What rule 5 may take: idle at least ``idle_after`` (``idle_after_when_kept`` where its
    server keeps its kernels' state)."""
    idle_for = case.wb.idleness.idle_for(now)
    idle_after, kept = _idle_after(case)
    if idle_for >= idle_after:
        case.eligible = True
    elif case.own is None:
        case.left_alone(
            idle_enough_for_demand,
            "not-idle-yet",
            f"idle {format_duration(idle_for)}, idle after {format_duration(idle_after)}{kept}",
        )
    return True


WORKBENCH_RULES: tuple[WorkbenchRule, ...] = (
    never_touched,
    past_max_age,
    in_use_or_unsure,
    reasons_of_its_own,
    idle_enough_for_demand,
)
"""Rules 1–4 and what rule 5 may take, in order: the first that returns ``True`` ends them."""


def decide(
    workbenches: Sequence[Workbench],
    pending: Sequence[PendingWorkload],
    policies: PolicySet,
    *,
    now: datetime,
    handoffs: Sequence[HandOffRecord] = (),
    dry_run: bool = False,
    waits: Sequence[PlacementWait] = (),
    team_names: Mapping[str, str] | None = None,
) -> Plan:
    """Decide for every workbench at ``now``; see the module's docstring for the rules.
    ``waits``: admitted workloads waiting for whole cards (served first, rule 6);
    ``team_names``: the teams' display names by team (:attr:`PendingWorkload.team`), for the
    words a user of another team is told (a team without one is "another team")."""
    cases = [_assess(wb, policies, now, dry_run) for wb in workbenches]
    placements = serve_placement(cases, waits, now)
    targets = serve_demand(cases, pending, policies, now, handoffs, team_names or {})
    warn_first(cases, now)
    return Plan(
        now=now,
        decisions=tuple(keep_or_withdraw_warnings(cases)),
        targets=tuple(targets),
        placements=tuple(placements),
    )


def warn_first(cases: Sequence[_Case], now: datetime) -> None:
    """Rule 7 for the workbenches rules 5 and 6 left: one with a reason of its own is warned,
    waits or is reclaimed as its countdown stands; the rest are skipped, with why."""
    for case in cases:
        if case.decision is not None:
            continue
        wb, policy = case.wb, case.policy
        if case.own is not None and policy is not None:
            case.decision = _countdown(case, case.own[0], case.own[1], now)
        elif case.skip is not None:
            case.decision = _skip(case, *case.skip)
        else:
            idle = format_duration(wb.idleness.idle_for(now))
            case.rule = serve_demand.__name__
            case.decision = _skip(
                case,
                "no-demand",
                case.demand_note
                or f"idle {idle}, but no queued work can use what it holds ({_holds_text(wb)})",
            )


def keep_or_withdraw_warnings(cases: Sequence[_Case]) -> list[Decision]:
    """Rule 7's end: a warning whose reason is gone is withdrawn; it stays while the server
    stops or its activity is unknown (the countdown resumes, it does not start over)."""
    # A warned workbench whose activity is unknown (a restarted culler has no reports yet) may
    # still be one of its batch: until it reports, "too few idle" is no reason to withdraw the
    # warnings of the others.
    unsure = any(
        c.wb.warned_at is not None and c.decision is not None and c.decision.code == "unknown"
        for c in cases
    )
    decisions = []
    for case in cases:
        d = case.decision
        assert d is not None
        if d.action is Action.SKIP and case.wb.warned_at is not None:
            if d.code in ("stopping", "unknown"):
                pass
            elif d.code == "no-demand" and unsure:
                kept = "warning kept while a warned workbench's activity is unknown"
                d = replace(d, reason=f"{kept}: {d.reason}")
            else:
                d = replace(d, action=Action.CLEAR_WARNING, reason=f"warning withdrawn: {d.reason}")
        decisions.append(d)
    return decisions


def _assess(wb: Workbench, policies: PolicySet, now: datetime, dry_run: bool) -> _Case:
    policy = policies.policy_for(
        team=wb.team, kind=wb.kind, offering=wb.offering, user=wb.user, groups=wb.groups
    )
    case = _Case(wb, policy, dry_run or policies.dry_run or bool(policy and policy.dry_run))
    case.warned = wb.warned_at
    if (
        wb.warned_at is not None
        and wb.snoozed_until is not None
        and wb.warned_at < wb.snoozed_until
    ):
        case.warned = None
    for rule in WORKBENCH_RULES:
        if rule(case, policies, now):
            break
    return case


def _rank(wb: Workbench, wl: PendingWorkload) -> int | None:
    """0: the same ClusterQueue; 1 + depth of the nearest shared cohort; None: unusable."""
    if wb.cluster_queue and wb.cluster_queue == wl.cluster_queue:
        return 0
    for depth, cohort in enumerate(wl.cohorts):
        if cohort in wb.cohorts:
            return 1 + depth
    return None


def _order(case: _Case, wl: PendingWorkload, own_team_first: bool = False) -> tuple[Any, ...]:
    wb = case.wb
    rank = _rank(wb, wl)
    # A warned workbench keeps its place before a workbench that became idle enough since
    # (own team or not): a warning is given only to be carried out, never for nothing.
    return (
        rank if rank is not None else 1 << 30,
        case.own is None,
        case.warned is None,
        own_team_first and bool(wl.team) and wb.team != wl.team,
        case.warned or wb.idleness.last_active,
        wb.idleness.last_active,
        wb.user,
        wb.server,
    )


def _heads(pending: Iterable[PendingWorkload]) -> list[PendingWorkload]:
    heads: dict[str, PendingWorkload] = {}
    for wl in pending:
        best = heads.get(wl.cluster_queue)
        if best is None or (wl.position, -wl.priority, wl.key) < (
            best.position,
            -best.priority,
            best.key,
        ):
            heads[wl.cluster_queue] = wl
    return sorted(heads.values(), key=lambda w: (-w.priority, w.position, w.cluster_queue, w.key))


def serve_demand(
    cases: list[_Case],
    pending: Sequence[PendingWorkload],
    policies: PolicySet,
    now: datetime,
    handoffs: Sequence[HandOffRecord],
    team_names: Mapping[str, str],
) -> list[Target]:
    """Rule 5: each queue head, highest priority first, gets just enough idle workbenches."""
    waiting, failed = _handoffs_by_queue(handoffs, pending, policies, now)
    taken = {c.wb.key for c in cases if c.decision is not None}  # given to a placement
    targets: list[Target] = []
    for wl in _heads(pending):
        usable = [
            c for c in cases if c.eligible and c.wb.key not in taken and _rank(c.wb, wl) is not None
        ]
        usable.sort(key=lambda c: _order(c, wl, policies.prefer_own_team))
        if wl.cluster_queue in waiting:
            target = Target(
                workload=wl, status="handoff-waiting", reason=waiting[wl.cluster_queue].reason
            )
        elif wl.cluster_queue in failed:
            workload, result = failed[wl.cluster_queue]
            target = Target(
                workload=wl,
                status="blocked",
                reason=f"not reclaiming for ClusterQueue {wl.cluster_queue} while {workload}"
                f" is pending: {result.reason}",
            )
        else:
            target = _select(wl, usable, now, own_team_first=policies.prefer_own_team)
        if target.status not in ("reclaim", "warn"):
            targets.append(target)
            for c in usable:
                if any(r == n.resource for n in wl.needs for (_f, r) in c.wb.holds):
                    c.demand_note = c.demand_note or target.reason
            continue
        chosen = [c for c in usable if c.wb.key in target.workbenches]
        taken.update(target.workbenches)
        target = replace(target, dry_run=any(c.dry_run for c in chosen))
        targets.append(target)
        names = ", ".join(target.workbenches)
        for c in usable:
            if c.wb.key not in taken and any(key in target.frees for key in c.wb.holds):
                c.demand_note = c.demand_note or (
                    f"not needed: {names} cover what {wl.key} lacks ({_chosen_first(policies)})"
                )
        _demand_decisions(target, chosen, now, team_names)
    return targets


def _chosen_first(policies: PolicySet) -> str:
    """Rule 5's order of choice, as :func:`_order` applies it under ``policies``."""
    team = ", then the queued work's own team" if policies.prefer_own_team else ""
    return (
        "chosen first: same queue or nearest cohort, then reasons of their own, then already"
        f" warned{team}, then longest idle"
    )


def _handoffs_by_queue(
    handoffs: Sequence[HandOffRecord],
    pending: Sequence[PendingWorkload],
    policies: PolicySet,
    now: datetime,
) -> tuple[dict[str, HandOffResult], dict[str, tuple[str, HandOffResult]]]:
    """By ClusterQueue: its hand-off still waiting for admission; its failed hand-off whose
    workload is still pending (and that workload)."""
    still_pending = {wl.key for wl in pending}
    waiting: dict[str, HandOffResult] = {}
    failed: dict[str, tuple[str, HandOffResult]] = {}
    for record in handoffs:
        result = assess_handoff(record, now=now, timeout=policies.handoff_timeout)
        if result.status is HandOffStatus.WAITING:
            waiting[record.cluster_queue] = result
        elif result.status is HandOffStatus.FAILED and record.workload in still_pending:
            failed[record.cluster_queue] = (record.workload, result)
    return waiting, failed


def _demand_decisions(
    target: Target, chosen: Sequence[_Case], now: datetime, team_names: Mapping[str, str]
) -> None:
    """Warn, wait or reclaim each workbench ``target`` takes (a batch, dry-run as a whole)."""
    wl = target.workload
    for c in chosen:
        c.dry_run = target.dry_run
        if c.own is not None:
            c.decision = replace(_countdown(c, c.own[0], c.own[1], now), handoff=wl.key)
            continue
        c.rule = serve_demand.__name__
        holds = f"needs what it holds ({_holds_text(c.wb)})"
        reason = f"queued {wl.key} {holds}"
        whose = team_names.get(wl.team) or "another team"
        told = "" if wl.team == c.wb.team else f"queued work of {whose} {holds}"
        if target.status == "reclaim":
            now_text = f"; reclaiming the batch of {len(chosen)} now"
            c.decision = _decision(
                c,
                Action.RECLAIM,
                "demand",
                reason + now_text,
                now,
                handoff=wl.key,
                told=told + now_text if told else "",
            )
        else:
            c.decision = replace(
                _countdown(c, "demand", reason, now, batch=target.reclaim_at, told=told),
                handoff=wl.key,
            )


_NOT_FREED = {
    "busy": "in use",
    "snoozed": "kept by its user",
    "exempt": "exempt",
    "starting": "starting",
    "no-policy": "under no policy",
    "unknown": "activity unknown",
    "not-idle-yet": "not idle long enough",
}


def _card_name(card: str) -> str:
    """``node/GPU-uuid`` as a person reads it: the node and the UUID's first part."""
    node, _, uuid = card.rpartition("/")
    short = uuid[:12]
    return f"{short} on {node}" if node else short


def serve_placement(
    cases: list[_Case], waits: Sequence[PlacementWait], now: datetime
) -> list[PlacementTarget]:
    """Rule 6: free whole cards for admitted workloads that wait for them (see the module doc).
    Decides for the workbenches chosen; leaves the others to the rules after it."""
    out: list[PlacementTarget] = []
    used: set[str] = set()
    ordered = sorted(
        waits, key=lambda w: (-w.priority, w.since.timestamp() if w.since else 0.0, w.key)
    )
    for wait in ordered:
        on_card: dict[str, list[_Case]] = {}
        for c in cases:
            if not any(f == wait.flavor for f, _r in c.wb.holds):
                continue
            for card in c.wb.cards:
                if not wait.node or card.startswith(f"{wait.node}/"):
                    on_card.setdefault(card, []).append(c)
        freeing = sorted(
            card
            for card, held in on_card.items()
            if card not in used
            and card not in wait.blocked
            and all(c.wb.phase == "stopping" for c in held)
        )
        need = f"{wait.cards} whole {wait.gpu_type}{'s' if wait.cards > 1 else ''}"
        lacking = wait.cards - wait.free_cards - len(freeing)
        if lacking <= 0:
            used.update(freeing[: max(wait.cards - wait.free_cards, 0)])
            being = f"{len(freeing)} being freed" if freeing else "none being freed"
            out.append(
                PlacementTarget(
                    wait=wait,
                    status="freeing",
                    reason=f"admitted {wait.key} waits for {need}: {wait.free_cards} free,"
                    f" {being}; it is placed when its node next tries",
                    cards=tuple(freeing),
                )
            )
            continue
        candidates, why_not = _freeable(wait, on_card, used | set(freeing))
        candidates.sort(key=lambda x: (x[0], x[1], x[2]))
        if len(candidates) < lacking:
            reason = (
                f"admitted {wait.key} waits for {need} ({wait.free_cards} free): "
                + (
                    f"only {len(candidates)} more card(s) could be freed"
                    if candidates
                    else "no card it could use can be freed"
                )
                + (f" ({'; '.join(why_not)})" if why_not else "")
                + "; it starts when its work's cards free up"
            )
            out.append(PlacementTarget(wait=wait, status="unplaceable", reason=reason))
            for held in on_card.values():
                for c in held:
                    c.demand_note = c.demand_note or reason
            continue
        picked = candidates[:lacking]
        chosen = [c for _n, _l, _card, leaving in picked for c in leaving]
        cards = tuple(card for _n, _l, card, _c in picked)
        used.update(cards)
        batch_dry = any(c.dry_run for c in chosen)
        ready_at = max(_due_at(c, now) for c in chosen)
        status = "reclaim" if ready_at <= now else "warn"
        names = ", ".join(c.wb.key for c in chosen)
        where = ", ".join(_card_name(card) for card in cards)
        out.append(
            PlacementTarget(
                wait=wait,
                status=status,
                reason=(
                    f"admitted {wait.key} waits for {need}; freeing {where}:"
                    + (
                        f" reclaiming {names} now"
                        if status == "reclaim"
                        else f" warning {names}, reclaim at {isoformat_z(ready_at)}"
                    )
                ),
                cards=cards,
                workbenches=tuple(c.wb.key for c in chosen),
                reclaim_at=ready_at,
                dry_run=batch_dry,
            )
        )
        _placement_decisions(wait, picked, len(chosen), status, ready_at, now, batch_dry)
    return out


_Card = tuple[int, datetime, str, list[_Case]]
"""A card that can be freed: (workbenches to reclaim, the latest activity among them, the card,
those workbenches)."""


def _freeable(
    wait: PlacementWait, on_card: Mapping[str, list[_Case]], skip: set[str]
) -> tuple[list[_Card], list[str]]:
    """The cards (not in ``skip``) that reclaiming their idle workbenches frees, and why each
    other one cannot be freed."""
    candidates: list[_Card] = []
    why_not: list[str] = []
    for card, held in sorted(on_card.items()):
        if card in skip:
            continue
        if card in wait.blocked:
            why_not.append(f"{_card_name(card)}: {wait.blocked[card]}")
            continue
        leaving = [c for c in held if c.wb.phase != "stopping"]
        stuck = [c for c in leaving if c.policy is None or c.skip is not None or c.decision]
        if stuck:
            words = ", ".join(
                f"{c.wb.key} {_NOT_FREED.get(c.skip[0], c.skip[0]) if c.skip else 'taken'}"
                for c in stuck
            )
            why_not.append(f"{_card_name(card)}: {words}")
            continue
        last = max(c.wb.idleness.last_active for c in leaving)
        candidates.append((len(leaving), last, card, leaving))
    return candidates, why_not


def _placement_decisions(
    wait: PlacementWait,
    picked: list[_Card],
    batch: int,
    status: str,
    ready_at: datetime,
    now: datetime,
    batch_dry: bool,
) -> None:
    """Warn, wait or reclaim each workbench on the cards ``picked`` for ``wait``."""
    told = f"{wait.what} needs a whole {wait.gpu_type}; your idle share is on the card it can use"
    for _n, _l, card, leaving in picked:
        for c in leaving:
            c.dry_run = batch_dry
            if c.own is not None:
                c.decision = replace(
                    _countdown(c, c.own[0], c.own[1], now, batch=ready_at), handoff=wait.key
                )
                continue
            c.rule = serve_placement.__name__
            reason = (
                f"admitted {wait.key} needs a whole {wait.gpu_type}; this share is on"
                f" {_card_name(card)}, which reclaiming {len(leaving)} idle share(s) frees"
            )
            if status == "reclaim":
                tail = f"; reclaiming the batch of {batch} now"
                c.decision = _decision(
                    c,
                    Action.RECLAIM,
                    "placement",
                    reason + tail,
                    now,
                    handoff=wait.key,
                    told=told + tail,
                )
            else:
                c.decision = replace(
                    _countdown(c, "placement", reason, now, batch=ready_at, told=told),
                    handoff=wait.key,
                )


def _due_at(case: _Case, now: datetime) -> datetime:
    """When its countdown ends: ``warned_at + warn_before`` (or ``now + warn_before``), and
    never before the deadline its user was told."""
    assert case.policy is not None
    warn = case.policy.warn_before
    told = case.wb.warned_deadline if case.warned is not None else None
    if warn <= timedelta(0):
        return max(now, told) if told is not None else now
    start = case.warned if case.warned is not None else now
    due = min(start, now) + warn
    return max(due, told) if told is not None else due


_Best = tuple[int, int, str, Fraction, list[_Case]]
"""A flavor that covers a need: (workbenches added, the flavor's rank among the options, the
flavor, the shortfall, the workbenches added)."""


def _pick_flavor(
    need: Need, options: list[str], usable: list[_Case], chosen: list[_Case]
) -> tuple[_Best | None, Fraction, Fraction]:
    """The flavor that covers ``need`` adding the fewest of ``usable`` to ``chosen`` (``None``:
    none does), the most any flavor's workbenches hold, and the least any flavor lacks."""
    best: _Best | None = None
    most = Fraction(0)
    lacks = need.amount
    for index, flavor in enumerate(options):
        short = need.amount - need.free.get(flavor, Fraction(0))
        if short <= 0:
            return (0, index, flavor, Fraction(0), []), most, lacks
        got = sum(
            (c.wb.holds.get((flavor, need.resource), Fraction(0)) for c in chosen),
            Fraction(0),
        )
        extra: list[_Case] = []
        for c in usable:
            if got >= short:
                break
            held = c.wb.holds.get((flavor, need.resource), Fraction(0))
            if held > 0 and all(c is not x for x in chosen):
                extra.append(c)
                got += held
        most = max(most, got)
        lacks = min(lacks, short)
        if got >= short and (best is None or (len(extra), index) < best[:2]):
            best = (len(extra), index, flavor, short, extra)
    return best, most, lacks


def _select(
    wl: PendingWorkload, usable: list[_Case], now: datetime, *, own_team_first: bool = False
) -> Target:
    """Just enough of ``usable`` (already in preference order) for ``wl``'s shortfall."""
    picks: list[tuple[Need, str, Fraction]] = []  # need, flavor, shortfall
    chosen: list[_Case] = []
    enough_free: list[str] = []
    for need in wl.needs:
        options = list(need.flavors) or sorted(
            {f for c in usable for (f, r) in c.wb.holds if r == need.resource} | set(need.free)
        )
        best, most, lacks = _pick_flavor(need, options, usable, chosen)
        if best is None:
            where = f" in {'/'.join(options)}" if options else ""
            return Target(
                workload=wl,
                status="not-enough",
                reason=f"{wl.key} lacks {_amount(lacks)} {need.resource}{where}; "
                + (
                    f"the idle workbenches it could use hold only {_amount(most)}"
                    if most
                    else "no idle workbench it could use holds any"
                )
                + ": reclaiming fewer would admit nothing",
            )
        _n, _i, flavor, short, extra = best
        if short <= 0:
            enough_free.append(need.resource)
            continue
        picks.append((need, flavor, short))
        chosen.extend(extra)

    if not picks:
        what = ", ".join(enough_free)
        return Target(
            workload=wl,
            status="enough-free",
            reason=f"enough quota is free for {wl.key} ({what}): it waits for something else"
            if wl.needs
            else f"{wl.key} asks for nothing that workbenches hold",
        )
    chosen = _minimal(chosen, picks, key=lambda c: _order(c, wl, own_team_first))
    frees: dict[FlavorResource, Fraction] = {}
    for c in chosen:
        for key, amount in c.wb.holds.items():
            frees[key] = frees.get(key, Fraction(0)) + amount
    ready_at = max(_due_at(c, now) for c in chosen)
    status = "reclaim" if ready_at <= now else "warn"
    needs = ", ".join(f"{_amount(s)} {n.resource} in {f}" for n, f, s in picks)
    names = ", ".join(c.wb.key for c in chosen)
    return Target(
        workload=wl,
        status=status,
        reason=(
            f"lacks {needs}: reclaiming {names} now"
            if status == "reclaim"
            else f"lacks {needs}: warning {names}, reclaim at {isoformat_z(ready_at)}"
        ),
        workbenches=tuple(c.wb.key for c in chosen),
        frees=frees,
        reclaim_at=ready_at,
    )


def _minimal(
    chosen: list[_Case],
    picks: Sequence[tuple[Need, str, Fraction]],
    key: Callable[[_Case], tuple[Any, ...]],
) -> list[_Case]:
    """``chosen`` less every workbench the rest can do without (the least preferred dropped
    first), in preference order: each (need, flavor, shortfall) of ``picks`` stays covered."""

    def covered(selection: list[_Case]) -> bool:
        return all(
            sum((c.wb.holds.get((f, n.resource), Fraction(0)) for c in selection), Fraction(0))
            >= short
            for n, f, short in picks
        )

    for c in sorted(chosen, key=key, reverse=True):
        rest = [x for x in chosen if x is not c]
        if covered(rest):
            chosen = rest
    return sorted(chosen, key=key)


def _countdown(
    case: _Case,
    code: str,
    reason: str,
    now: datetime,
    *,
    batch: datetime | None = None,
    told: str = "",
) -> Decision:
    """Warn, wait or reclaim, depending on where its warning's countdown stands (``told``:
    the user's version of ``reason``, if it differs)."""
    due = _due_at(case, now)
    when = max(due, batch) if batch is not None else due
    if when <= now:
        return _decision(case, Action.RECLAIM, code, reason, now, told=told)
    if case.warned is None:
        tail = f"; reclaim at {isoformat_z(when)} unless it is used or kept"
        action = Action.WARN
    else:
        tail = f"; warned at {isoformat_z(case.warned)}; reclaim at {isoformat_z(when)}"
        if batch is not None and batch > due:
            tail += " (with the rest of its batch)"
        action = Action.WAIT
    return _decision(
        case, action, code, reason + tail, now, reclaim_at=when, told=told + tail if told else ""
    )


def _decision(
    case: _Case,
    action: Action,
    code: str,
    reason: str,
    now: datetime,
    *,
    reclaim_at: datetime | None = None,
    handoff: str | None = None,
    told: str = "",
) -> Decision:
    policy = case.policy
    left = None
    if policy is not None and action in (Action.WARN, Action.WAIT):
        left = max(policy.max_snoozes - case.wb.snoozes_used, 0)
    return Decision(
        workbench=case.wb,
        action=action,
        code=code,
        reason=reason,
        policy=policy.name if policy else None,
        dry_run=case.dry_run,
        reclaim_at=reclaim_at
        if reclaim_at is not None
        else (now if action is Action.RECLAIM else None),
        handoff=handoff,
        snoozes_left=left,
        user_reason=told,
        rule=case.rule,
    )


def _skip(case: _Case, code: str, reason: str) -> Decision:
    return Decision(
        workbench=case.wb,
        action=Action.SKIP,
        code=code,
        reason=reason,
        policy=case.policy.name if case.policy else None,
        dry_run=case.dry_run,
        rule=case.rule,
    )


def _amount(value: Fraction) -> str:
    return format_quantity(value)


def _holds_text(wb: Workbench) -> str:
    if not wb.holds:
        return "no quota"
    return ", ".join(
        f"{_amount(amount)} {resource} in {flavor}"
        for (flavor, resource), amount in sorted(wb.holds.items())
    )

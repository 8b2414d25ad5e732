"""Reclaim policies: the model, and loading them from YAML (or any plain mapping) with every
problem reported at once with its field path.

A policy file::

    dry_run: false              # true: decide and record, never act
    report_stale_after: 10m     # a server whose last activity report is older is "unknown"
    handoff_timeout: 10m        # a reclaim for queued work succeeds if it is admitted this soon
    snapshot_timeout: 60s       # longest wait for a server to save its kernels before its stop
    snapshot_per_gib: 5s        # and this much longer per GiB its kernels hold
    prefer_own_team: true       # queued work takes its own team's idle servers before a lender's
    notify:                     # optional: POST each warning and reclaim to a webhook
      webhook: https://chat.example.org/hooks/gpu-reclaim
      timeout: 5s               # per post (default 5s); never retried, never blocks a cycle
    exempt:                     # never reclaimed, whatever policy matches
      users: [admin]
      groups: [on-call]
    defaults:                   # any policy field; a policy's own value wins
      warn_before: 15m
    policies:                   # the first policy whose `match` fits a workbench applies
      - name: gpu-notebooks
        match: {teams: [team-a], kinds: [gpu, mig]}
        idle_after: 30m
        reclaim: when-queued
        max_idle: 8h
      - name: everyone-else
        idle_after: 2h

Policy fields (``defaults`` takes the same, except ``name`` and ``match``):

``match``
    ``teams``, ``kinds`` (``gpu``, ``mig``, ``shared``, ``fraction``, ``cpu``), ``offerings``,
    ``users``, ``groups``: each a list; a workbench matches when it matches every list given
    (``groups``: any of the user's groups). No ``match``: every workbench.
``idle_after`` (required)
    how long without a busy kernel, terminal activity or (on a whole GPU) utilisation above
    ``busy_utilization_percent`` before a workbench counts as idle.
``idle_after_when_kept``
    ``idle_after`` for a workbench whose server says it keeps its kernels' state through a stop
    (its activity reports' ``keeps_kernel_state``): a reclaim then moves the session rather than
    ending it, so it may come sooner. At most ``idle_after``. Not set (default): ``idle_after``.
``reclaim``
    ``when-queued`` (default): only when queued work needs what it holds; ``always``: once idle.
``max_idle``, ``max_age``
    reclaim without queued demand once idle this long / once the server is this old.
    ``max_age`` is a hard cap: busy or not (activity is reported by the user's own server and
    can be forged; the pod's age cannot), after the warning, its countdown and the snoozes
    allowed. Not set: never.
``busy_signal``
    ``reports`` (default): the server's activity reports (busy kernels, terminals, its own GPU
    readings) say whether it is busy. ``gpu``: where a per-pod GPU utilisation from outside the
    server exists (DCGM through Prometheus, ``prometheus_url``; for HAMi fractions the seconds
    since the pod's last kernel, ``hami_last_kernel_query``), only that does: busy kernels
    with the GPU unused for ``idle_after`` are idle. Pods without such a sample fall back to
    the reports.
``warn_before``
    the warning's countdown: a workbench is reclaimed no sooner than this after its warning.
``max_snoozes``, ``snooze_for``
    how often "Keep my GPU" may be pressed per server, and how long each press keeps it.
``exempt``
    ``users`` and ``groups`` this policy never reclaims.
``dry_run``
    decisions under this policy are recorded, never carried out.
``busy_utilization_percent``
    GPU utilisation above this is activity (only where the figure is the server's own).
``unknown_grace``
    how long a server may stop reporting (or report NVML errors) before ``max_idle`` and
    ``max_age`` apply to it regardless; until then it is left alone.
``way_down_after``
    how long a session must have run, its GPU-memory peak staying under
    ``c.GPUaaSService.way_down_below`` of its share, before the GPU panel offers it a smaller
    share (the way down; ``0``: as soon as a peak is measured). Not set: the service's
    ``c.GPUaaSService.way_down_after`` (default 30m). Not a reclaim: the user decides.

``prefer_own_team`` (top level only; default ``false``)
    for queued work, take the idle servers of the team whose work it is before those of a team
    that lends it quota through the cohort (after the same ClusterQueue's, which are its own
    anyway). Without it the longest idle servers of the cohort go first, whoever's they are.

``snapshot_timeout`` (top level only; default ``60s``; ``0``: never ask)
    before a reclaim stops a server that keeps kernel state, the culler asks it to save every
    idle kernel's variables and waits at most this long for its answer; a late or failed
    answer never delays the stop further (the session counts as interrupted). At most 10m.

``snapshot_per_gib`` (top level only; default ``5s``; ``0``: the wait is ``snapshot_timeout``)
    how much longer the culler waits for that answer per GiB of state the server's kernels
    hold (as its activity report estimates it, ``kernel_state_bytes``): a session of 20 GiB
    waits 60s + 20 x 5s. The whole wait is at most 10m.

``notify`` (top level only) posts ``{"event": "warn"|"reclaim", "user", "server", "team",
"reason", "reclaim_at", "at", ...}`` (no tokens) to ``webhook`` (an ``http`` or ``https`` URL)
for users with no tab open; see :mod:`.notify`.

Durations are written ``45s``, ``30m``, ``2h``, ``1h30m``, ``7d``, ``1w`` (``0`` where zero
makes sense).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal
from urllib.parse import urlsplit

from gpuaas_service.clients.http import split_credentials
from jupyter_gpuaas.core.catalog import KINDS
from jupyter_gpuaas.core.durations import format_duration
from jupyter_gpuaas.core.fields import (
    NAME_RE,
    FieldError,
    FieldErrors,
    did_you_mean,
    key_path,
    read_bool,
    read_duration,
    read_int,
    read_mapping,
    read_number,
    read_objects,
    read_one_of,
    read_str,
    read_str_list,
    type_name,
    unknown_keys,
)
from jupyter_gpuaas.core.parsing import ParseError, excerpt, read_yaml_file

__all__ = [
    "RECLAIM_MODES",
    "Match",
    "Notify",
    "Policy",
    "PolicyError",
    "PolicyFile",
    "PolicySet",
    "load_policy",
    "load_policy_file",
    "snapshot_wait",
]

Reclaim = Literal["when-queued", "always"]
RECLAIM_MODES: tuple[Reclaim, ...] = ("when-queued", "always")
BusySignal = Literal["reports", "gpu"]
BUSY_SIGNALS: tuple[BusySignal, ...] = ("reports", "gpu")

DEFAULT_WARN_BEFORE = timedelta(minutes=15)
DEFAULT_MAX_SNOOZES = 1
DEFAULT_SNOOZE_FOR = timedelta(hours=1)
DEFAULT_BUSY_UTILIZATION = 10.0
DEFAULT_UNKNOWN_GRACE = timedelta(hours=1)
DEFAULT_REPORT_STALE_AFTER = timedelta(minutes=10)
DEFAULT_HANDOFF_TIMEOUT = timedelta(minutes=10)
DEFAULT_SNAPSHOT_TIMEOUT = timedelta(seconds=60)
MAX_SNAPSHOT_TIMEOUT = timedelta(minutes=10)
DEFAULT_SNAPSHOT_PER_GIB = timedelta(seconds=5)
"""About twice what a GiB took to save on the development machine (2-4 s, docs/benchmarks.md)."""
DEFAULT_NOTIFY_TIMEOUT = timedelta(seconds=5)
MAX_NOTIFY_TIMEOUT = timedelta(minutes=1)

_TOP_FIELDS = (
    "dry_run",
    "report_stale_after",
    "handoff_timeout",
    "snapshot_timeout",
    "snapshot_per_gib",
    "prefer_own_team",
    "notify",
    "exempt",
    "defaults",
    "policies",
)
_NOTIFY_FIELDS = ("webhook", "timeout")
_POLICY_FIELDS = (
    "idle_after",
    "idle_after_when_kept",
    "reclaim",
    "max_idle",
    "max_age",
    "warn_before",
    "max_snoozes",
    "snooze_for",
    "exempt",
    "dry_run",
    "busy_utilization_percent",
    "unknown_grace",
    "busy_signal",
    "way_down_after",
)
_MATCH_FIELDS = ("teams", "kinds", "offerings", "users", "groups")
_EXEMPT_FIELDS = ("users", "groups")


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Match:
    """Which workbenches a policy applies to; an empty set means "any"."""

    teams: frozenset[str] = frozenset()
    kinds: frozenset[str] = frozenset()
    offerings: frozenset[str] = frozenset()
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()

    def matches(
        self, *, team: str, kind: str, offering: str, user: str, groups: Iterable[str]
    ) -> bool:
        return (
            (not self.teams or team in self.teams)
            and (not self.kinds or kind in self.kinds)
            and (not self.offerings or offering in self.offerings)
            and (not self.users or user in self.users)
            and (not self.groups or not self.groups.isdisjoint(groups))
        )

    def covers(self, other: Match) -> bool:
        """Whether every workbench ``other`` matches is matched by this one too."""
        pairs = (
            (self.teams, other.teams),
            (self.kinds, other.kinds),
            (self.offerings, other.offerings),
            (self.users, other.users),
            (self.groups, other.groups),
        )
        return all(not mine or (theirs and theirs <= mine) for mine, theirs in pairs)

    def describe(self) -> str:
        parts = [
            f"{label}={','.join(sorted(values))}"
            for label, values in (
                ("teams", self.teams),
                ("kinds", self.kinds),
                ("offerings", self.offerings),
                ("users", self.users),
                ("groups", self.groups),
            )
            if values
        ]
        return " ".join(parts) or "every workbench"


@dataclass(frozen=True)
class Policy:
    name: str
    idle_after: timedelta
    match: Match = field(default_factory=Match)
    reclaim: Reclaim = "when-queued"
    max_idle: timedelta | None = None
    max_age: timedelta | None = None
    warn_before: timedelta = DEFAULT_WARN_BEFORE
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    snooze_for: timedelta = DEFAULT_SNOOZE_FOR
    exempt_users: frozenset[str] = frozenset()
    exempt_groups: frozenset[str] = frozenset()
    dry_run: bool = False
    busy_utilization_percent: float = DEFAULT_BUSY_UTILIZATION
    unknown_grace: timedelta = DEFAULT_UNKNOWN_GRACE
    busy_signal: BusySignal = "reports"
    idle_after_when_kept: timedelta | None = None
    """``idle_after`` for a workbench whose server keeps its kernels' state (``None``: the
    same)."""
    way_down_after: timedelta | None = None
    """How long a session runs, its peak low, before it is offered a smaller share (``None``:
    the service's ``c.GPUaaSService.way_down_after``)."""

    def idle_threshold(self, keeps_state: bool) -> timedelta:
        """How long a workbench must be idle to count as idle: ``idle_after_when_kept`` where
        its server keeps its kernels' state through a stop, else ``idle_after``."""
        if keeps_state and self.idle_after_when_kept is not None:
            return self.idle_after_when_kept
        return self.idle_after

    def describe(self) -> str:
        """One line for ``--check-policy``: what it matches and what it does."""
        parts = [f"match {self.match.describe()}", f"idle after {format_duration(self.idle_after)}"]
        if self.idle_after_when_kept is not None:
            parts.append(f"{format_duration(self.idle_after_when_kept)} where kernel state is kept")
        parts.append(
            "reclaim when queued work needs it"
            if self.reclaim == "when-queued"
            else "reclaim always"
        )
        if self.max_idle is not None:
            parts.append(f"max idle {format_duration(self.max_idle)}")
        if self.max_age is not None:
            parts.append(f"max age {format_duration(self.max_age)}")
        parts.append(f"warn {format_duration(self.warn_before)} before")
        parts.append(f"{self.max_snoozes} snooze(s) of {format_duration(self.snooze_for)}")
        if self.busy_signal == "gpu":
            parts.append("busy by the pod's GPU utilisation (DCGM) where known")
        if self.way_down_after is not None:
            parts.append(f"a smaller share offered after {format_duration(self.way_down_after)}")
        if self.dry_run:
            parts.append("dry run")
        return ", ".join(parts)


@dataclass(frozen=True)
class Notify:
    """Where warnings and reclaims are posted for users with no tab open."""

    webhook: str
    timeout: timedelta = DEFAULT_NOTIFY_TIMEOUT


@dataclass(frozen=True)
class PolicySet:
    """A whole policy file: the policies in order, and the settings that are not per policy."""

    policies: tuple[Policy, ...]
    exempt_users: frozenset[str] = frozenset()
    exempt_groups: frozenset[str] = frozenset()
    dry_run: bool = False
    report_stale_after: timedelta = DEFAULT_REPORT_STALE_AFTER
    handoff_timeout: timedelta = DEFAULT_HANDOFF_TIMEOUT
    snapshot_timeout: timedelta = DEFAULT_SNAPSHOT_TIMEOUT
    """Longest wait for a server's kernel-state snapshot before its stop (0: never asked)."""
    snapshot_per_gib: timedelta = DEFAULT_SNAPSHOT_PER_GIB
    """How much longer that wait is per GiB of the server's kernel state."""
    notify: Notify | None = None
    prefer_own_team: bool = False
    """Queued work takes its own team's idle servers before a lending team's."""

    def policy_for(
        self, *, team: str, kind: str, offering: str, user: str, groups: Iterable[str]
    ) -> Policy | None:
        """The first policy that matches, or ``None``."""
        groups = tuple(groups)
        for policy in self.policies:
            if policy.match.matches(
                team=team, kind=kind, offering=offering, user=user, groups=groups
            ):
                return policy
        return None

    @property
    def names_groups(self) -> bool:
        """Whether any match or exemption names hub groups (the culler then reads them)."""
        return bool(self.exempt_groups) or any(
            p.match.groups or p.exempt_groups for p in self.policies
        )

    def exemption(self, policy: Policy | None, user: str, groups: Iterable[str]) -> str | None:
        """Why ``user`` is exempt (a sentence naming the list), or ``None``."""
        mine = set(groups)
        if user in self.exempt_users:
            return f"user {user} is exempt (exempt.users)"
        hit = sorted(mine & self.exempt_groups)
        if hit:
            return f"group {hit[0]} is exempt (exempt.groups)"
        if policy is not None:
            if user in policy.exempt_users:
                return f"user {user} is exempt by policy {policy.name}"
            hit = sorted(mine & policy.exempt_groups)
            if hit:
                return f"group {hit[0]} is exempt by policy {policy.name}"
        return None


class PolicyError(ValueError):
    """The policy is invalid; ``errors`` holds every problem with its field path."""

    def __init__(self, errors: Sequence[FieldError], origin: str = "") -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.origin = origin
        where = f" in {origin}" if origin else ""
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"invalid culler policy{where} ({len(self.errors)} problem(s)):\n{lines}")


# --------------------------------------------------------------------------- loading


def load_policy_file(path: str, *, known_teams: Collection[str] | None = None) -> PolicySet:
    """Read and check a YAML policy file (plain data only, bounded: core/parsing.py)."""
    try:
        data = read_yaml_file(path, path="(file)")
    except OSError as e:
        raise PolicyError(
            [FieldError("(file)", f"cannot read the policy file: {e.strerror}")], path
        ) from e
    except ParseError as e:
        raise PolicyError([FieldError(e.path, e.message)], path) from None
    return load_policy(data, origin=path, known_teams=known_teams)


class PolicyFile:
    """The policy file as a running service sees it: read again whenever it changes (its
    modification time, size or inode: a Kubernetes ConfigMap volume swaps a symlink), the last
    good policy kept while the file is invalid. It starts with no policy (reclaim off): a bad
    file at start is an error to report, not a reason not to serve."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.policies = PolicySet(policies=())
        self.error = ""
        """Why the file as it is now is not in force (``""``: it is)."""
        self.loaded = 0
        self.invalid = 0
        self._stamp: tuple[int, int, int] | Literal["unread"] | None = "unread"

    def check(self) -> bool:
        """Read the file if it changed; ``True`` when :attr:`policies` changed."""
        import os

        try:
            st = os.stat(self.path)
            stamp: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            policies = load_policy_file(self.path)
        except PolicyError as e:
            self.error = str(e)
            self.invalid += 1
            return False
        except Exception as e:  # noqa: BLE001 - a bug in the checks is this file's error too
            self.error = f"invalid culler policy in {self.path}: cannot be checked: {e!r:.200}"
            self.invalid += 1
            return False
        self.error = ""
        self.loaded += 1
        changed = policies != self.policies
        self.policies = policies
        return changed


def load_policy(
    data: object, *, origin: str = "", known_teams: Collection[str] | None = None
) -> PolicySet:
    """Check a policy given as plain data; raise :class:`PolicyError` listing every problem.

    ``known_teams`` (the catalog's tenant names), when given, is checked against
    ``match.teams``.
    """
    errs = FieldErrors()
    if data is None:
        errs.add("policies", "is required: the file is empty")
        raise PolicyError(errs.items, origin)
    if not isinstance(data, Mapping):
        errs.add("(top level)", f"must be a mapping with 'policies', not {type_name(data)}")
        raise PolicyError(errs.items, origin)
    unknown_keys(errs, "", data, _TOP_FIELDS)

    dry_run = read_bool(errs, "", data, "dry_run", default=False)
    stale = read_duration(errs, "", data, "report_stale_after", positive=True)
    handoff = read_duration(errs, "", data, "handoff_timeout", positive=True)
    snapshot_timeout = _snapshot_timeout(errs, data)
    per_gib = _snapshot_per_gib(errs, data)
    own_team_first = read_bool(errs, "", data, "prefer_own_team", default=False)
    exempt_users, exempt_groups = _exempt(errs, "", data)
    notify = _notify(errs, data)

    defaults, bad_defaults = _read_defaults(errs, data)
    policies = _read_policies(errs, data, defaults, bad_defaults, known_teams)
    if errs.items:
        raise PolicyError(errs.items, origin)
    return PolicySet(
        policies=tuple(policies),
        exempt_users=exempt_users,
        exempt_groups=exempt_groups,
        dry_run=bool(dry_run),
        report_stale_after=stale if stale is not None else DEFAULT_REPORT_STALE_AFTER,
        handoff_timeout=handoff if handoff is not None else DEFAULT_HANDOFF_TIMEOUT,
        snapshot_timeout=(
            snapshot_timeout if snapshot_timeout is not None else DEFAULT_SNAPSHOT_TIMEOUT
        ),
        snapshot_per_gib=per_gib if per_gib is not None else DEFAULT_SNAPSHOT_PER_GIB,
        notify=notify,
        prefer_own_team=bool(own_team_first),
    )


def _read_defaults(errs: FieldErrors, data: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``defaults``: the fields every policy starts from, and those given but invalid."""
    defaults: dict[str, Any] = {}
    bad_defaults: set[str] = set()
    raw_defaults = read_mapping(errs, "", data, "defaults", what="a mapping of policy fields")
    if raw_defaults is None:
        return defaults, bad_defaults
    for key in raw_defaults:
        if key in ("name", "match"):
            errs.add(key_path("defaults", str(key)), "belongs in each policy, not in defaults")
    unknown_keys(errs, "defaults", raw_defaults, (*_POLICY_FIELDS, "name", "match"))
    for key in _POLICY_FIELDS:
        if key not in raw_defaults:
            continue
        n = len(errs.items)
        value = _FIELD_READERS[key](errs, "defaults", raw_defaults)
        if len(errs.items) > n:
            bad_defaults.add(key)
        else:
            defaults[key] = value
    return defaults, bad_defaults


def _read_policies(
    errs: FieldErrors,
    data: Mapping[str, Any],
    defaults: Mapping[str, Any],
    bad_defaults: set[str],
    known_teams: Collection[str] | None,
) -> list[Policy]:
    """``policies``, in order: each read, its name unique, none shadowed by an earlier one."""
    policies: list[Policy] = []
    names: dict[str, str] = {}
    placed: list[tuple[str, Policy]] = []
    for p, raw in read_objects(
        errs,
        "",
        data,
        "policies",
        required=True,
        what="a list of policies",
        item_what="a mapping with 'name', 'idle_after', ...",
    ):
        policy = _read_policy(errs, p, raw, defaults, bad_defaults, known_teams)
        if policy is None:
            continue
        if policy.name in names:
            errs.add(
                key_path(p, "name"),
                f"{excerpt(policy.name)} is already used by {names[policy.name]}",
            )
        else:
            names[policy.name] = p
        for earlier_path, earlier in placed:
            if earlier.match.covers(policy.match):
                errs.add(
                    key_path(p, "match"),
                    f"never applies: {earlier_path} ({earlier.name}) comes first and matches"
                    " every workbench this one matches (the first matching policy applies)",
                )
                break
        placed.append((p, policy))
        policies.append(policy)
    return policies


def _read_policy(
    errs: FieldErrors,
    p: str,
    raw: Mapping[str, Any],
    defaults: Mapping[str, Any],
    bad_defaults: set[str],
    known_teams: Collection[str] | None,
) -> Policy | None:
    unknown_keys(errs, p, raw, ("name", "match", *_POLICY_FIELDS))
    start = len(errs.items)
    name = read_str(
        errs,
        p,
        raw,
        "name",
        required=True,
        required_hint="it names the policy in every decision",
        pattern=NAME_RE,
        what="a name (letters, digits, '-', '_', '.'; at most 63)",
    )
    match = _match(errs, p, raw, known_teams)
    values: dict[str, Any] = {}
    for key in _POLICY_FIELDS:
        if key in raw and raw[key] is not None:
            values[key] = _FIELD_READERS[key](errs, p, raw)
        elif key in defaults:
            values[key] = defaults[key]
    if (
        values.get("idle_after") is None
        and "idle_after" not in bad_defaults
        and raw.get("idle_after") is None
    ):
        errs.add(key_path(p, "idle_after"), "is required (here or in defaults), e.g. 30m")
    if len(errs.items) > start:
        return None

    idle_after: timedelta = values["idle_after"]
    max_idle: timedelta | None = values.get("max_idle")
    if max_idle is not None and max_idle < idle_after:
        where = "" if "max_idle" in raw else " (from defaults.max_idle)"
        errs.add(
            key_path(p, "max_idle"),
            f"{format_duration(max_idle)}{where} is shorter than idle_after"
            f" {format_duration(idle_after)}: it would apply before the workbench counts as idle",
        )
    when_kept: timedelta | None = values.get("idle_after_when_kept")
    if when_kept is not None and when_kept > idle_after:
        where = "" if "idle_after_when_kept" in raw else " (from defaults.idle_after_when_kept)"
        errs.add(
            key_path(p, "idle_after_when_kept"),
            f"{format_duration(when_kept)}{where} is longer than idle_after"
            f" {format_duration(idle_after)}: a session whose state is kept may be reclaimed"
            " sooner, never later (leave it out to use idle_after)",
        )
    exempt_users, exempt_groups = values.get("exempt") or (frozenset(), frozenset())
    assert isinstance(name, str)
    return Policy(
        name=name,
        idle_after=idle_after,
        match=match,
        reclaim=values.get("reclaim") or "when-queued",
        max_idle=max_idle,
        max_age=values.get("max_age"),
        warn_before=_default(values.get("warn_before"), DEFAULT_WARN_BEFORE),
        max_snoozes=_default(values.get("max_snoozes"), DEFAULT_MAX_SNOOZES),
        snooze_for=_default(values.get("snooze_for"), DEFAULT_SNOOZE_FOR),
        exempt_users=exempt_users,
        exempt_groups=exempt_groups,
        dry_run=bool(values.get("dry_run", False)),
        busy_utilization_percent=_default(
            values.get("busy_utilization_percent"), DEFAULT_BUSY_UTILIZATION
        ),
        unknown_grace=_default(values.get("unknown_grace"), DEFAULT_UNKNOWN_GRACE),
        busy_signal=values.get("busy_signal") or "reports",
        idle_after_when_kept=when_kept,
        way_down_after=values.get("way_down_after"),
    )


def _default(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _match(
    errs: FieldErrors, p: str, raw: Mapping[str, Any], known_teams: Collection[str] | None
) -> Match:
    value = read_mapping(
        errs, p, raw, "match", what="a mapping with teams/kinds/offerings/users/groups"
    )
    if value is None:
        return Match()
    mp = key_path(p, "match")
    unknown_keys(errs, mp, value, _MATCH_FIELDS)
    teams = _str_set(errs, mp, value, "teams")
    kinds = _str_set(errs, mp, value, "kinds")
    for i, kind in enumerate(_str_list_items(value, "kinds")):
        if isinstance(kind, str) and kind and kind not in KINDS:
            more = did_you_mean(kind, KINDS)
            errs.add(
                f"{mp}.kinds[{i}]",
                f"{excerpt(kind)} is not a kind: one of {', '.join(KINDS)}{more}",
            )
    if known_teams is not None:
        for i, team in enumerate(_str_list_items(value, "teams")):
            if isinstance(team, str) and team and team not in known_teams:
                more = did_you_mean(team, known_teams)
                errs.add(f"{mp}.teams[{i}]", f"{excerpt(team)} is not a team in the catalog{more}")
    return Match(
        teams=teams,
        kinds=kinds,
        offerings=_str_set(errs, mp, value, "offerings"),
        users=_str_set(errs, mp, value, "users"),
        groups=_str_set(errs, mp, value, "groups"),
    )


# --------------------------------------------------------------------------- field readers


def _str_list_items(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def _str_set(errs: FieldErrors, base: str, data: Mapping[str, Any], key: str) -> frozenset[str]:
    return frozenset(
        read_str_list(
            errs,
            base,
            data,
            key,
            what="a list of names",
            empty_error="must not be empty (leave it out to match any)",
        )
    )


def _exempt(
    errs: FieldErrors, base: str, data: Mapping[str, Any]
) -> tuple[frozenset[str], frozenset[str]]:
    value = read_mapping(errs, base, data, "exempt", what="a mapping with 'users' and/or 'groups'")
    if value is None:
        return frozenset(), frozenset()
    p = key_path(base, "exempt")
    unknown_keys(errs, p, value, _EXEMPT_FIELDS)
    return _str_set(errs, p, value, "users"), _str_set(errs, p, value, "groups")


def _snapshot_timeout(errs: FieldErrors, data: Mapping[str, Any]) -> timedelta | None:
    timeout = read_duration(errs, "", data, "snapshot_timeout", positive=False)
    if timeout is not None and timeout > MAX_SNAPSHOT_TIMEOUT:
        errs.add(
            "snapshot_timeout",
            f"{format_duration(timeout)} is longer than {format_duration(MAX_SNAPSHOT_TIMEOUT)}"
            " (every reclaim of a server that keeps state may wait this long for its answer)",
        )
        return None
    return timeout


def _snapshot_per_gib(errs: FieldErrors, data: Mapping[str, Any]) -> timedelta | None:
    per_gib = read_duration(errs, "", data, "snapshot_per_gib", positive=False)
    if per_gib is not None and per_gib > MAX_SNAPSHOT_TIMEOUT:
        errs.add(
            "snapshot_per_gib",
            f"{format_duration(per_gib)} is longer than the whole wait may be "
            f"({format_duration(MAX_SNAPSHOT_TIMEOUT)})",
        )
        return None
    return per_gib


def snapshot_wait(policies: PolicySet, state_bytes: int | None) -> timedelta:
    """How long a reclaim waits for a server's snapshot: ``snapshot_timeout``, plus
    ``snapshot_per_gib`` for each GiB of the state its report says its kernels hold (none
    said: nothing more), at most :data:`MAX_SNAPSHOT_TIMEOUT`; 0 where snapshots are off."""
    if policies.snapshot_timeout <= timedelta(0):
        return timedelta(0)
    gib = (state_bytes or 0) / (1 << 30)
    wait = policies.snapshot_timeout + policies.snapshot_per_gib * gib
    return min(wait, max(MAX_SNAPSHOT_TIMEOUT, policies.snapshot_timeout))


def _notify(errs: FieldErrors, data: Mapping[str, Any]) -> Notify | None:
    value = read_mapping(errs, "", data, "notify", what="a mapping with 'webhook' (and 'timeout')")
    if value is None:
        return None
    unknown_keys(errs, "notify", value, _NOTIFY_FIELDS)
    start = len(errs.items)
    url = read_str(
        errs,
        "notify",
        value,
        "webhook",
        required=True,
        required_hint="the URL warnings and reclaims are posted to",
    )
    if url is not None:
        parts, split = urlsplit(url.strip()), split_credentials(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errs.add(
                "notify.webhook",
                f"{excerpt(split.url)} is not an http(s) URL (e.g. https://chat.example.org/hook)",
            )
        elif split.has_credentials:
            errs.add(
                "notify.webhook",
                "must not carry credentials (user:password@); use a URL the receiver accepts as is",
            )
    timeout = read_duration(errs, "notify", value, "timeout", positive=True)
    if timeout is not None and timeout > MAX_NOTIFY_TIMEOUT:
        errs.add(
            "notify.timeout",
            f"{format_duration(timeout)} is longer than {format_duration(MAX_NOTIFY_TIMEOUT)}"
            " (a post that slow only holds connections open)",
        )
    if len(errs.items) > start or url is None:
        return None
    return Notify(webhook=url.strip(), timeout=timeout or DEFAULT_NOTIFY_TIMEOUT)


_FieldReader = Callable[[FieldErrors, str, Mapping[str, Any]], Any]


def _duration_reader(key: str, *, positive: bool) -> _FieldReader:
    def read(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
        return read_duration(errs, base, data, key, positive=positive)

    return read


def _choice_reader(key: str, choices: Sequence[str]) -> _FieldReader:
    def read(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
        return read_one_of(errs, base, data, key, choices)

    return read


def _read_max_snoozes(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
    wording = "a whole number, 0 or more"
    return read_int(errs, base, data, "max_snoozes", minimum=0, what=wording, bounds=wording)


def _read_dry_run(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
    return read_bool(errs, base, data, "dry_run", default=False)


def _read_busy(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
    wording = "a percentage from 0 to 100"
    return read_number(
        errs,
        base,
        data,
        "busy_utilization_percent",
        minimum=0,
        maximum=100,
        what=wording,
        bounds=wording,
    )


def _read_exempt(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
    return _exempt(errs, base, data)


MAX_WAY_DOWN_AFTER = timedelta(days=7)
"""The longest ``way_down_after``: a session is seldom older (``max_age`` is hours)."""


def _read_way_down_after(errs: FieldErrors, base: str, data: Mapping[str, Any]) -> Any:
    after = read_duration(errs, base, data, "way_down_after", positive=False)
    if after is not None and after > MAX_WAY_DOWN_AFTER:
        errs.add(
            key_path(base, "way_down_after"),
            f"{format_duration(after)} is longer than {format_duration(MAX_WAY_DOWN_AFTER)}:"
            " no session would be offered a smaller share (leave it out for the service's"
            " c.GPUaaSService.way_down_after; to turn the offer off, set"
            " c.GPUaaSService.way_down_below = 0)",
        )
        return None
    return after


_FIELD_READERS: dict[str, _FieldReader] = {
    "idle_after": _duration_reader("idle_after", positive=True),
    "idle_after_when_kept": _duration_reader("idle_after_when_kept", positive=True),
    "reclaim": _choice_reader("reclaim", RECLAIM_MODES),
    "max_idle": _duration_reader("max_idle", positive=True),
    "max_age": _duration_reader("max_age", positive=True),
    "warn_before": _duration_reader("warn_before", positive=False),
    "max_snoozes": _read_max_snoozes,
    "snooze_for": _duration_reader("snooze_for", positive=True),
    "exempt": _read_exempt,
    "dry_run": _read_dry_run,
    "busy_utilization_percent": _read_busy,
    "unknown_grace": _duration_reader("unknown_grace", positive=False),
    "busy_signal": _choice_reader("busy_signal", BUSY_SIGNALS),
    "way_down_after": _read_way_down_after,
}

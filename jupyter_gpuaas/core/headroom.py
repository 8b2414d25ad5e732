"""Quota headroom of a tenant for an offering, from Kueue's own objects.

For a tenant (its ClusterQueue, through its LocalQueue) and an offering, :func:`compute_headroom`
says whether a new server would start now, start by borrowing from the cohort, queue (about N
ahead), or never fit — and why. It follows Kueue's quota arithmetic (``pkg/cache/scheduler/
resource_node.go``: nominal quota, lending and borrowing limits, cohort trees) over ClusterQueue
and Cohort *spec and status*, in the resource Kueue counts (``nvidia.com/gpu.shared`` replicas,
``nvidia.com/mig-1g.10gb`` slices, ...), with GPU-equivalents alongside for people. A request
is first put through Kueue's resource transformations as the catalog declares them
(:meth:`~jupyter_gpuaas.core.catalog.Offering.quota_requests`: a HAMi fraction's per-vGPU
``nvidia.com/gpumem`` becomes ``nvidia.com/total-gpumem``), so it counts what Kueue counts.

Headroom is a forecast for the form, not a promise: Kueue decides. Pure; no I/O.

What a user reads (:attr:`Headroom.message` and :attr:`Headroom.detail`, on the spawn form and in
the GPU job dialog) comes from one table, :data:`HEADROOM_WORDS`, pinned with the spawner's in
tests/unit/spawner/messages.json; the Kueue objects behind a refusal are named for an admin in
:attr:`Headroom.admin_detail` only.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction

from jupyter_gpuaas.core.catalog import Offering, Tenant
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents
from jupyter_gpuaas.core.kueue import (
    ClusterQueueInfo,
    CohortInfo,
    FlavorResource,
    LocalQueueInfo,
    display_value,
    kueue_value,
)

__all__ = [
    "HEADROOM_WORDS",
    "Fit",
    "Headroom",
    "QueueState",
    "ResourceFit",
    "UserUsage",
    "compute_headroom",
    "headroom_words",
    "queue_message",
    "released_by",
    "resolve_cluster_queue",
]


HEADROOM_WORDS: Mapping[str, str] = {
    # Where the team's queue cannot take anything (an admin's business: see admin_detail).
    "queue.stopped": "{team}'s queue is stopped by an admin",
    "queue.missing": "{team}'s queue is not set up; ask an admin",
    "queue.inactive": "{team}'s queue is not taking new work right now; ask an admin",
    "quota.unknown": "quota state not known yet",
    "quota.unknown.detail": "The hub is still reading the queues; this may start or queue.",
    "quota.none": "your team has no quota for {offering}",
    "quota.none.detail": "{team}'s queue has no quota for this kind of GPU; ask an admin.",
    # Per-user and per-team caps.
    "cap.servers": "limit: {cap} {noun} per user",
    "cap.servers.detail": "You already have {have}; stop one to start this.",
    "cap.gpus": "limit: {cap} {noun} per user",
    "cap.gpus.detail": "Your other servers already use {have} GPU; this one needs {need} GPU.",
    "cap.queued": "limit: {cap} waiting {workload}s per team",
    "cap.queued.detail": (
        "{team} already has {queued} {workload}s waiting in the queue; try again when one has "
        "started."
    ),
    # More than the team could ever get.
    "never.units": "your team's maximum is {n} {units}",
    "never.amount": "your team's maximum {what} is {most}",
    "never.detail": "This asks for {count} {units}.",
    # It fits, by borrowing, or waits.
    "now": "available now",
    "now.free": "available now ({free} of {total}{units} free)",
    "borrow": "available by borrowing",
    "borrow.detail": "Uses quota your team borrows from other teams it shares GPUs with.",
    "borrow.risk": (
        " If a lending team needs its quota back, the queue may stop this {workload} without "
        "warning; save your work often."
    ),
    "queue.detail": "Your {workload} waits in the queue until quota frees up.",
    "queue.first": "will queue: first in line once quota frees up",
    "queue.first.unit": "will queue: first in line once {article} {unit} frees up",
    "queue.ahead": "will queue: about {ahead} ahead of you",
}
"""Every sentence of headroom that a user reads (the form's state and detail, a refused
choice's why), in one table; ``{name}`` fields are filled by :func:`headroom_words`. The
spawner's reviewed list (tests/unit/spawner/messages.json) pins each one and checks its words:
no Kubernetes words, GPU-equivalents or slugs (those are for :attr:`Headroom.admin_detail`)."""

_RESOURCE_WORDS: Mapping[str, str] = {"cpu": "CPU", "memory": "memory"}


def headroom_words(key: str, /, **values: object) -> str:
    """The sentence ``key`` of :data:`HEADROOM_WORDS` with its fields filled."""
    return HEADROOM_WORDS[key].format(**values)


def _resource_words(resource: str) -> str:
    """A quota resource as a user calls it: "CPU", "memory", "GPU memory", "GPU"."""
    if resource in _RESOURCE_WORDS:
        return _RESOURCE_WORDS[resource]
    return "GPU memory" if resource.endswith("gpumem") else "GPU"


class Fit(str, enum.Enum):
    """Ordered from best to worst (see :meth:`worse`)."""

    NOW = "now"
    BORROW = "borrow"
    QUEUE = "queue"
    UNKNOWN = "unknown"
    NOT_ALLOWED = "not-allowed"
    NEVER = "never"

    @property
    def selectable(self) -> bool:
        """Whether a user may pick it (it starts, borrows, queues, or we cannot tell)."""
        return self in (Fit.NOW, Fit.BORROW, Fit.QUEUE, Fit.UNKNOWN)

    def worse(self, other: Fit) -> Fit:
        order = list(Fit)
        return self if order.index(self) >= order.index(other) else other


@dataclass(frozen=True)
class QueueState:
    """A read of the watch caches: the Kueue objects headroom needs, already parsed.

    ``synced`` is False until every cache has listed once; headroom is then ``UNKNOWN``.
    """

    cluster_queues: Mapping[str, ClusterQueueInfo] = field(default_factory=dict)
    cohorts: Mapping[str, CohortInfo] = field(default_factory=dict)
    local_queues: Mapping[tuple[str, str], LocalQueueInfo] = field(default_factory=dict)
    synced: bool = True
    _tree: _Tree | None = field(default=None, init=False, repr=False, compare=False)

    def tree(self) -> _Tree:
        """Kueue's quota tree over this snapshot, built once (cohort sums are memoized)."""
        if self._tree is None:
            object.__setattr__(self, "_tree", _Tree(self))
        assert self._tree is not None
        return self._tree


@dataclass(frozen=True)
class UserUsage:
    """What the user already holds: their other GPU servers, running or waiting."""

    gpu_servers: int = 0
    gpu_equivalents: Fraction = Fraction(0)


@dataclass(frozen=True)
class ResourceFit:
    """Headroom for one (flavor, resource), in the unit Kueue counts."""

    flavor: str
    resource: str
    requested: int
    nominal: int
    used: int
    available: int
    """What Kueue would still admit now, own quota plus what the cohort can lend."""
    potential: int
    """The most this queue could ever get with nothing else running (nominal + borrowing)."""
    fit: Fit

    @property
    def free(self) -> int:
        return max(0, self.nominal - self.used)


@dataclass(frozen=True)
class Headroom:
    tenant: str
    offering: str
    count: int
    fit: Fit
    message: str
    """Short state for the form: "available now (3 of 8 free)", "will queue: about 2 ahead of
    you", "will queue: first in line once a GPU frees up"."""
    detail: str = ""
    """A longer sentence: why, or what borrowing means."""
    admin_detail: str = ""
    """Why, in Kueue's words, for an admin (a log, the console), never for the user: the
    LocalQueue or ClusterQueue that is missing or inactive, the resource it does not cover."""
    cluster_queue: str = ""
    ahead: int | None = None
    free_units: int | None = None
    total_units: int | None = None
    max_units: int | None = None
    gpu_equivalents: Fraction = Fraction(0)
    free_gpu_equivalents: Fraction | None = None
    total_gpu_equivalents: Fraction | None = None
    borrow_risk: bool = False
    resources: tuple[ResourceFit, ...] = ()
    free_memory_mib: int | None = None
    """For a fraction: the team's fractional GPU memory not in use (nominal - used), in MiB."""
    total_memory_mib: int | None = None
    """For a fraction: the team's fractional GPU memory quota (nominal), in MiB."""


# --------------------------------------------------------------------------- Kueue's arithmetic

_Node = tuple[str, str]  # ("cq" | "cohort", name)


class _Tree:
    """Kueue's resource tree over ClusterQueues and Cohorts (implicit cohorts included)."""

    def __init__(self, state: QueueState) -> None:
        self.cqs = state.cluster_queues
        self.cohorts = state.cohorts
        self.cq_children: dict[str, list[str]] = {}
        self.cohort_children: dict[str, list[str]] = {}
        for cq in self.cqs.values():
            if cq.cohort:
                self.cq_children.setdefault(cq.cohort, []).append(cq.name)
        for co in self.cohorts.values():
            if co.parent and co.parent != co.name:
                self.cohort_children.setdefault(co.parent, []).append(co.name)
        self._subtree: dict[tuple[_Node, FlavorResource], int] = {}
        self._usage: dict[tuple[_Node, FlavorResource], int] = {}
        self._available: dict[tuple[_Node, FlavorResource], int] = {}
        self._potential: dict[tuple[_Node, FlavorResource], int] = {}

    def parent(self, node: _Node) -> _Node | None:
        kind, name = node
        if kind == "cq":
            cohort = self.cqs[name].cohort
            return ("cohort", cohort) if cohort else None
        co = self.cohorts.get(name)
        if co and co.parent and not self._cycle(name):
            return ("cohort", co.parent)
        return None

    def _cycle(self, name: str) -> bool:
        seen = {name}
        cur = self.cohorts.get(name)
        while cur is not None and cur.parent:
            if cur.parent in seen:
                return True
            seen.add(cur.parent)
            cur = self.cohorts.get(cur.parent)
        return False

    def _quota(self, node: _Node, fr: FlavorResource) -> tuple[int, int | None, int | None]:
        kind, name = node
        quotas = (
            self.cqs[name].quotas
            if kind == "cq"
            else (self.cohorts[name].quotas if name in self.cohorts else {})
        )
        q = quotas.get(fr)
        if q is None:
            return 0, None, None
        return q.nominal, q.borrowing_limit, q.lending_limit

    def subtree(self, node: _Node, fr: FlavorResource) -> int:
        key = (node, fr)
        if key not in self._subtree:
            total = self._quota(node, fr)[0]
            if node[0] == "cohort" and not self._cycle(node[1]):
                for child in self._children(node):
                    total += self.subtree(child, fr) - self.local(child, fr)
            self._subtree[key] = total
        return self._subtree[key]

    def _children(self, node: _Node) -> list[_Node]:
        name = node[1]
        return [("cq", c) for c in self.cq_children.get(name, [])] + [
            ("cohort", c) for c in self.cohort_children.get(name, [])
        ]

    def local(self, node: _Node, fr: FlavorResource) -> int:
        lending = self._quota(node, fr)[2]
        if lending is None:
            return 0
        return max(0, self.subtree(node, fr) - lending)

    def usage(self, node: _Node, fr: FlavorResource) -> int:
        key = (node, fr)
        if key not in self._usage:
            if node[0] == "cq":
                total = self.cqs[node[1]].usage(fr)
            else:
                total = 0
                if not self._cycle(node[1]):
                    for child in self._children(node):
                        total += max(0, self.usage(child, fr) - self.local(child, fr))
            self._usage[key] = total
        return self._usage[key]

    def available(self, node: _Node, fr: FlavorResource) -> int:
        key = (node, fr)
        if key not in self._available:
            self._available[key] = self._compute_available(node, fr)
        return self._available[key]

    def _compute_available(self, node: _Node, fr: FlavorResource) -> int:
        parent = self.parent(node)
        if parent is None:
            return self.subtree(node, fr) - self.usage(node, fr)
        parent_available = self.available(parent, fr)
        borrowing = self._quota(node, fr)[1]
        if borrowing is not None:
            stored_in_parent = self.subtree(node, fr) - self.local(node, fr)
            used_in_parent = max(0, self.usage(node, fr) - self.local(node, fr))
            parent_available = min(stored_in_parent - used_in_parent + borrowing, parent_available)
        local_available = max(0, self.local(node, fr) - self.usage(node, fr))
        return local_available + parent_available

    def potential(self, node: _Node, fr: FlavorResource) -> int:
        key = (node, fr)
        if key not in self._potential:
            self._potential[key] = self._compute_potential(node, fr)
        return self._potential[key]

    def _compute_potential(self, node: _Node, fr: FlavorResource) -> int:
        parent = self.parent(node)
        if parent is None:
            return self.subtree(node, fr)
        result = self.local(node, fr) + self.potential(parent, fr)
        borrowing = self._quota(node, fr)[1]
        if borrowing is not None:
            result = min(self.subtree(node, fr) + borrowing, result)
        return result

    def borrow_risk(self, cq: ClusterQueueInfo) -> bool:
        """Whether a lender in the cohort may take its quota back by preempting borrowers."""
        if not cq.cohort:
            return False
        return any(
            other.name != cq.name
            and other.cohort == cq.cohort
            and other.reclaim_within_cohort not in ("", "Never")
            for other in self.cqs.values()
        )


# --------------------------------------------------------------------------- the decision


def resolve_cluster_queue(
    tenant: Tenant, state: QueueState, namespace: str
) -> tuple[ClusterQueueInfo | None, str, str]:
    """The tenant's ClusterQueue, or ``None`` and why not: in the user's words, then in Kueue's
    for an admin."""
    ns = tenant.namespace or namespace
    name = tenant.cluster_queue
    team = tenant.display_name
    lq = state.local_queues.get((ns, tenant.local_queue))
    if lq is not None and lq.stopped:
        why = f"LocalQueue {ns}/{tenant.local_queue} is stopped"
        return None, headroom_words("queue.stopped", team=team), why
    if name is None:
        if lq is None:
            why = f"LocalQueue {ns}/{tenant.local_queue} does not exist"
            return None, headroom_words("queue.missing", team=team), why
        name = lq.cluster_queue
    cq = state.cluster_queues.get(name)
    if cq is None:
        why = f"ClusterQueue {name!r} does not exist"
        return None, headroom_words("queue.missing", team=team), why
    if cq.stopped:
        return None, headroom_words("queue.stopped", team=team), f"ClusterQueue {name} is stopped"
    if cq.active is False:
        why = f"ClusterQueue {name} is not active" + (
            f": {cq.inactive_reason}" if cq.inactive_reason else ""
        )
        return None, headroom_words("queue.inactive", team=team), why
    return cq, "", ""


def _units(value: int, per_unit: int) -> int:
    if per_unit <= 0:
        return 0
    return max(0, value // per_unit)


def _plural(n: int, offering: Offering) -> str:
    return offering.unit if n == 1 else offering.units


def _fit_resource(
    tree: _Tree, cq: ClusterQueueInfo, fr: FlavorResource, requested: int
) -> ResourceFit:
    node: _Node = ("cq", cq.name)
    nominal = tree.subtree(node, fr)
    used = tree.usage(node, fr)
    available = tree.available(node, fr)
    potential = tree.potential(node, fr)
    if requested > potential:
        fit = Fit.NEVER
    elif used + requested <= nominal and requested <= available:
        fit = Fit.NOW
    elif requested <= available:
        fit = Fit.BORROW
    else:
        fit = Fit.QUEUE
    return ResourceFit(fr[0], fr[1], requested, nominal, used, available, potential, fit)


def compute_headroom(
    tenant: Tenant,
    offering: Offering,
    state: QueueState,
    *,
    namespace: str,
    count: int | None = None,
    usage: UserUsage | None = None,
    team_queued: int | None = None,
    extra_requests: Mapping[str, Fraction] | None = None,
    workload: str = "server",
    released: Mapping[FlavorResource, int] | None = None,
) -> Headroom:
    """Headroom of ``tenant`` for ``count`` units of ``offering``.

    ``released`` is quota the tenant's ClusterQueue holds now that is freed before this
    request is made (:func:`released_by`: the user's own server that a move stops first), as
    Kueue will see it then: taken off the queue's usage in the same flavor and resource.

    ``extra_requests`` (e.g. ``{"cpu": Fraction(2), "memory": ...}``) are counted too where the
    ClusterQueue covers them. ``team_queued`` overrides the LocalQueue's pending count for the
    ``max_queued`` cap. ``workload`` names what would wait or run, in the details the user reads
    ("server" for the spawn form, "job" for a notebook run as a training Job).

    In order: the per-user caps (policy, decided before any quota is looked at), whether the
    queues are known, the tenant's ClusterQueue, the fit of each requested resource in Kueue's
    arithmetic, and what that fit means for the user.
    """
    count = offering.default_count if count is None else count
    proto = Headroom(
        tenant=tenant.name,
        offering=offering.slug,
        count=count,
        fit=Fit.UNKNOWN,
        message="",
        gpu_equivalents=offering.gpu_equivalents_for(count),
    )
    refused = _user_cap(proto, tenant, offering, usage or UserUsage())
    if refused is not None:
        return refused
    if not state.synced:
        return replace(
            proto,
            fit=Fit.UNKNOWN,
            message=headroom_words("quota.unknown"),
            detail=headroom_words("quota.unknown.detail"),
        )
    cq, why, admin_why = resolve_cluster_queue(tenant, state, namespace)
    if cq is None:
        return replace(proto, fit=Fit.NOT_ALLOWED, message=why, admin_detail=admin_why)
    proto = replace(proto, cluster_queue=cq.name)
    if released:
        state = _without(state, cq, released)
        cq = state.cluster_queues[cq.name]
    tree = state.tree()
    fits = _offering_fits(tree, cq, offering, count)
    if isinstance(fits, str):
        return replace(
            proto,
            fit=Fit.NEVER,
            message=headroom_words("quota.none", offering=offering.display_name),
            detail=headroom_words("quota.none.detail", team=tenant.display_name),
            admin_detail=fits,
        )
    fits += _extra_fits(tree, cq, offering, extra_requests or {})
    proto = _with_sizes(proto, offering, fits)
    if proto.fit is Fit.NEVER:
        return _never(proto, offering, fits)
    if proto.fit is Fit.NOW:
        return _now(proto, offering)
    if proto.fit is Fit.BORROW:
        return _borrowing(proto, tree.borrow_risk(cq), workload)
    lq = state.local_queues.get((tenant.namespace or namespace, tenant.local_queue))
    queued = team_queued if team_queued is not None else (lq.pending_workloads if lq else None)
    return _queued(proto, tenant, offering, cq.pending_workloads, queued, workload)


def released_by(offering: Offering, count: int) -> dict[FlavorResource, int]:
    """The quota a running server of ``count`` units of ``offering`` holds in its team's
    ClusterQueue, as Kueue counts it (its flavor and resources): what a move frees when it
    stops that server before the start. None where the offering names no flavor (Kueue then
    picks one, and which is not known here)."""
    flavor = offering.flavor or ""
    if not flavor:
        return {}
    return {(flavor, resource): qty for resource, qty in offering.quota_requests(count).items()}


def _without(
    state: QueueState, cq: ClusterQueueInfo, released: Mapping[FlavorResource, int]
) -> QueueState:
    """``state`` with ``released`` taken off ``cq``'s usage (never below zero)."""

    def less(usage: Mapping[FlavorResource, int]) -> dict[FlavorResource, int]:
        return {key: max(0, used - released.get(key, 0)) for key, used in usage.items()}

    freed = replace(cq, reserved=less(cq.reserved), in_use=less(cq.in_use))
    return QueueState(
        cluster_queues={**state.cluster_queues, cq.name: freed},
        cohorts=state.cohorts,
        local_queues=state.local_queues,
        synced=state.synced,
    )


def _user_cap(
    proto: Headroom, tenant: Tenant, offering: Offering, usage: UserUsage
) -> Headroom | None:
    """``NOT_ALLOWED`` where one more GPU server would pass a per-user cap, else ``None``."""
    if not offering.is_gpu:
        return None
    cap = tenant.max_gpu_servers_per_user
    if cap is not None and usage.gpu_servers + 1 > cap:
        noun = "GPU server" if cap == 1 else "GPU servers"
        return replace(
            proto,
            fit=Fit.NOT_ALLOWED,
            message=headroom_words("cap.servers", cap=cap, noun=noun),
            detail=headroom_words("cap.servers.detail", have=usage.gpu_servers),
        )
    gcap = tenant.max_gpus_per_user
    gpu_eq = proto.gpu_equivalents
    if gcap is not None and usage.gpu_equivalents + gpu_eq > gcap:
        have = format_gpu_equivalents(usage.gpu_equivalents)
        noun = "GPU" if gcap == 1 else "GPUs"
        return replace(
            proto,
            fit=Fit.NOT_ALLOWED,
            message=headroom_words("cap.gpus", cap=format_gpu_equivalents(gcap), noun=noun),
            detail=headroom_words(
                "cap.gpus.detail", have=have, need=format_gpu_equivalents(gpu_eq)
            ),
            admin_detail=f"max_gpus_per_user {format_gpu_equivalents(gcap)} GPU-equivalents;"
            f" held {have}, asked {format_gpu_equivalents(gpu_eq)}",
        )
    return None


def _offering_fits(
    tree: _Tree, cq: ClusterQueueInfo, offering: Offering, count: int
) -> list[ResourceFit] | str:
    """The fit of each resource the offering requests (as Kueue counts it), or why the
    ClusterQueue has no quota for one of them."""
    fits: list[ResourceFit] = []
    flavor = offering.flavor or ""
    for resource, qty in offering.quota_requests(count).items():
        if not cq.covers(resource):
            return f"ClusterQueue {cq.name} does not cover {resource}."
        if (flavor, resource) not in cq.quotas:
            return f"ClusterQueue {cq.name} has no {resource} in flavor {flavor}."
        fits.append(_fit_resource(tree, cq, (flavor, resource), qty))
    return fits


def _extra_fits(
    tree: _Tree, cq: ClusterQueueInfo, offering: Offering, extra: Mapping[str, Fraction]
) -> list[ResourceFit]:
    """The best fit of each extra request (CPU, memory) the ClusterQueue covers; one it does
    not cover is left out (Kueue is assumed to be configured to ignore it)."""
    fits: list[ResourceFit] = []
    for resource, extra_qty in extra.items():
        flavors = cq.flavors_for(resource)
        amount = kueue_value(resource, extra_qty)
        if not flavors or amount <= 0:
            continue
        candidates = [offering.flavor] if offering.flavor in flavors else list(flavors)
        options = [
            _fit_resource(tree, cq, (f, resource), amount)
            for f in candidates
            if f is not None and (f, resource) in cq.quotas
        ]
        if options:
            fits.append(min(options, key=lambda rf: list(Fit).index(rf.fit)))
    return fits


def _with_sizes(proto: Headroom, offering: Offering, fits: list[ResourceFit]) -> Headroom:
    """The overall fit (the worst of the resources'), and the team's quota in the offering's
    units and GPU-equivalents (and, for a fraction, in MiB of GPU memory)."""
    fit = Fit.NOW
    for rf in fits:
        fit = fit.worse(rf.fit)
    proto = replace(proto, fit=fit, resources=tuple(fits))
    per_unit = offering.quota_requests(1)
    gpu_fits = [rf for rf in fits if rf.resource in per_unit]
    if gpu_fits:
        free_units = min(_units(rf.free, per_unit[rf.resource]) for rf in gpu_fits)
        total_units = min(_units(rf.nominal, per_unit[rf.resource]) for rf in gpu_fits)
        max_units = min(_units(rf.potential, per_unit[rf.resource]) for rf in gpu_fits)
        unit_eq = offering.gpu_equivalents
        proto = replace(
            proto,
            free_units=free_units,
            total_units=total_units,
            max_units=max_units,
            free_gpu_equivalents=unit_eq * free_units,
            total_gpu_equivalents=unit_eq * total_units,
        )
    memory = offering.memory_quota_resource
    memory_fit = next((rf for rf in fits if memory and rf.resource == memory[0]), None)
    if memory is not None and memory_fit is not None:
        proto = replace(
            proto,
            free_memory_mib=int(memory_fit.free / memory[1]),
            total_memory_mib=int(memory_fit.nominal / memory[1]),
        )
    return proto


def _never(proto: Headroom, offering: Offering, fits: list[ResourceFit]) -> Headroom:
    """More than the team could ever get: its maximum, in units where it can be said so."""
    bad = next(rf for rf in fits if rf.fit is Fit.NEVER)
    if proto.max_units is not None and bad.resource in offering.quota_requests(1):
        n = proto.max_units
        eq = format_gpu_equivalents(offering.gpu_equivalents * n)
        msg = headroom_words("never.units", n=n, units=_plural(n, offering))
        admin = f"at most {n} {_plural(n, offering)} ({eq} GPU-equivalents)"
    else:
        most = display_value(bad.resource, bad.potential)
        msg = headroom_words("never.amount", what=_resource_words(bad.resource), most=most)
        admin = f"at most {most} {bad.resource} in flavor {bad.flavor}"
    count = proto.count
    return replace(
        proto,
        message=msg,
        detail=headroom_words("never.detail", count=count, units=_plural(count, offering)),
        admin_detail=admin,
    )


def _now(proto: Headroom, offering: Offering) -> Headroom:
    if proto.free_units is None:
        return replace(proto, message=headroom_words("now"))
    n = proto.total_units or 0
    units = f" {_plural(n, offering)}" if offering.kind == "fraction" else ""
    return replace(
        proto,
        message=headroom_words(
            "now.free", free=proto.free_units, total=proto.total_units, units=units
        ),
    )


def _borrowing(proto: Headroom, risk: bool, workload: str) -> Headroom:
    detail = headroom_words("borrow.detail")
    if risk:
        detail += headroom_words("borrow.risk", workload=workload)
    return replace(proto, message=headroom_words("borrow"), detail=detail, borrow_risk=risk)


def _queued(
    proto: Headroom,
    tenant: Tenant,
    offering: Offering,
    ahead: int,
    queued: int | None,
    workload: str,
) -> Headroom:
    """It would wait: behind about ``ahead`` others, unless the team's ``max_queued`` cap
    (over ``queued``, its waiting workloads) refuses it."""
    if tenant.max_queued is not None and queued is not None and queued >= tenant.max_queued:
        return replace(
            proto,
            fit=Fit.NOT_ALLOWED,
            message=headroom_words("cap.queued", cap=tenant.max_queued, workload=workload),
            detail=headroom_words(
                "cap.queued.detail", team=tenant.display_name, queued=queued, workload=workload
            ),
        )
    return replace(
        proto,
        message=queue_message(ahead, offering),
        ahead=ahead,
        detail=headroom_words("queue.detail", workload=workload),
    )


def queue_message(ahead: int, offering: Offering) -> str:
    """What "will queue" means for the user: first in line, or behind about N others.

    ``ahead`` is the ClusterQueue's pending count (Kueue's own, not a promise of order).
    """
    if ahead <= 0:
        if not offering.is_gpu:
            return headroom_words("queue.first")
        unit = offering.unit
        article = "an" if unit[:1].lower() in "aeiou" else "a"
        return headroom_words("queue.first.unit", article=article, unit=unit)
    return headroom_words("queue.ahead", ahead=ahead)

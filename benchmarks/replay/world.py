"""The simulated world: the sample organisation's pools and quotas, and Kueue admitting into them.

:class:`Organisation` is read from the files the dev cluster applies (devcluster/nodes.yaml for
the pools, devcluster/manifests/*.yaml for ResourceFlavors, ClusterQueues, the Cohort,
LocalQueues and WorkloadPriorityClasses), optionally scaled. :class:`Kueue` is a model of what
Kueue does with them, only as far as the replay needs:

- quota per (flavor, resource), own nominal quota plus what the cohort lends, within each
  queue's ``borrowingLimit`` (one flat cohort, as the sample has); a workload may count in
  several resources of one flavor (a HAMi fraction: vGPU slots, ``total-gpumem`` and
  ``total-gpucores`` after Kueue's resource transformations), and fits where all of them do;
- per ClusterQueue, ``BestEffortFIFO``: pending workloads in (priority, creation) order, the
  first that fits is admitted, one that does not fit does not block the ones behind it;
- Kueue's scheduling cycle (v0.19.2, the dev cluster's pin, as in v0.17:
  ``pkg/scheduler/scheduler.go``, ``schedule``): each cycle takes **one head per
  ClusterQueue** (its first pending workload in queue order that is not parked as
  inadmissible), nominates them all against the usage at the cycle's start, orders
  them (no borrowing first, then priority, then creation: the classical iterator) and admits
  them in that order while each still fits; a head that fits no flavor is parked as
  inadmissible (BestEffortFIFO: the queue's next workload is the head of the next cycle) until
  quota is released in the cohort (``QueueAssociatedInadmissibleWorkloadsAfter`` when a
  workload finishes or is evicted), and one that no longer fits after an earlier admission of
  the cycle is skipped and stays at the head;
- flavors tried in the queue's order for the workload's resource, skipping flavors whose node
  labels contradict its nodeSelector or whose ``nodeTaints`` its pods do not tolerate (the
  ``l4-hami`` flavor: only the fraction offerings tolerate it);
- ``reclaimWithinCohort: Any``: a workload that fits in its own queue's nominal quota evicts
  workloads of queues that borrow (lowest priority, most recently admitted first). As in
  Kueue, the preemptor is not admitted in that cycle: the victims keep their quota until their
  pods are gone (the simulator calls :meth:`Kueue.finish_eviction` ``release_s`` later), and
  the preemptor stays its queue's head meanwhile (the sticky workload of ``cluster_queue.go``);
  an evicted workload is requeued in its old place, by its creation time (Kueue's
  ``workload.Ordering.GetQueueOrderTimestamp`` with ``PrioritySortingWithinCohort`` on, its
  default: the eviction time counts only after a pods-ready timeout or an admission check).
  The preemptor's request is **reserved** from the moment it issues the preemption until it
  is admitted (or withdrawn): as Kueue's scheduler adds a preempting entry's usage to the
  cycle's cohort usage, so that no workload later in the same cycle takes what the
  preemption is for, and kept across cycles so that the quota its victims give back goes to
  it, not to the borrowers queued behind (without it, a preemptor that needs more than one
  victim frees was one GPU short each round and evicted a borrower every ``release_s``).

- ``StrictFIFO`` (a ClusterQueue's ``queueingStrategy``): its head in queue order stays its
  head while it does not fit, and nothing behind it is admitted (a large Job is not overtaken
  by the small ones of its own queue);
- Topology Aware Scheduling (:attr:`Kueue.topology`, set by the simulator on the TAS rungs): a
  workload that fits on quota is admitted only if Kueue finds it a topology assignment on the
  nodes (:func:`.placement.tas_assign`); one that finds none is parked as inadmissible, as one
  that fits no flavor, and holds nothing (Kueue's flavor assigner turns it to ``Preempt``;
  with no candidate whose removal gives it nodes, it stays pending);
- with TAS, the preemption of ``pkg/scheduler/preemption/preemption.go``
  (``classicalPreemptions``) where :attr:`Kueue.topology_fits` is set: the candidates are
  the workloads of its own ClusterQueue of lower priority (``withinClusterQueue:
  LowerPriority``) and those of ClusterQueues of its cohort that borrow
  (``reclaimWithinCohort: Any``), ordered as ``CandidatesOrdering`` (other queues first, then
  lower priority, then the most recently admitted); they are removed one by one until the
  workload fits on quota and on the nodes, then those not needed are put back (in reverse
  order, ``fillBackWorkloads``); the preemptor reserves its quota as above.

Left out (see docs/replay.md): cpu/memory quotas, node-level fit where TAS is off (Kueue then
admits on quota only), the admission latency of a real control plane.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from . import brain

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CATALOG = REPO / "spawner" / "demo-catalog.yaml"
DEFAULT_MANIFESTS = REPO / "devcluster" / "manifests"
DEFAULT_NODES = REPO / "devcluster" / "nodes.yaml"
GPU_PREFIX = "nvidia.com/"
FlavorResource = tuple[str, str]


@dataclass(frozen=True)
class Organisation:
    """Pools, flavors and queues of one (possibly scaled) cluster."""

    capacity: Mapping[FlavorResource, int]
    """GPU resources per (flavor, resource): the pools' allocatable, scaled."""
    flavor_labels: Mapping[str, Mapping[str, str]]
    cluster_queues: Mapping[str, brain.ClusterQueueInfo]
    cq_objects: Mapping[str, Mapping[str, Any]]
    """The ClusterQueue manifests (scaled), to give the culler a ``status`` to read."""
    cohort_objects: Sequence[Mapping[str, Any]]
    local_queues: Mapping[tuple[str, str], str]
    """(namespace, LocalQueue) → ClusterQueue."""
    local_queue_objects: Sequence[Mapping[str, Any]]
    priorities: Mapping[str, int]
    scale: float = 1.0
    physical_gpus: float = 0.0
    """Physical GPUs in the pools (nodes.yaml ``nvidia.com/gpu.count`` × nodes, scaled)."""
    flavor_taints: Mapping[str, tuple[Mapping[str, str], ...]] = field(default_factory=dict)
    """ResourceFlavor name → its ``nodeTaints``."""
    training_requests: Mapping[str, int] = field(default_factory=lambda: {"nvidia.com/gpu": 1})
    """What Kueue counts for one GPU of a training Job, its first resource the one whose
    flavors it is tried in (a pool shared with notebook shares counts it in
    ``nvidia.com/total-gpucores: 100`` and the rest of a whole card)."""

    @property
    def gpu_equivalents(self) -> Fraction:
        """Capacity in GPU-equivalents (MIG N/7, a shared replica 1/4, a HAMi pool its
        ``total-gpucores`` / 100: the project's weights), summed flavor by flavor so that a
        HAMi pool's vGPU slots are not counted as whole GPUs."""
        by_flavor: dict[str, dict[str, Fraction]] = {}
        for (f, r), n in self.capacity.items():
            by_flavor.setdefault(f, {})[r] = Fraction(n)
        return sum(
            (brain.resource_gpu_equivalents(resources) for resources in by_flavor.values()),
            Fraction(0),
        )

    def nominal(self, cq: str, fr: FlavorResource) -> int:
        q = self.cluster_queues[cq].quotas.get(fr)
        return q.nominal if q else 0

    def borrowing_limit(self, cq: str, fr: FlavorResource) -> int | None:
        q = self.cluster_queues[cq].quotas.get(fr)
        return q.borrowing_limit if q else 0

    def cohort_members(self, cq: str) -> list[str]:
        cohort = self.cluster_queues[cq].cohort
        if not cohort:
            return [cq]
        return [n for n, c in self.cluster_queues.items() if c.cohort == cohort]


def _documents(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]


def _scaled(value: object, scale: float) -> int:
    """A quota × ``scale``, rounded down: the quotas of a pool never add up to more than its
    scaled capacity (which is rounded down too) when they did not before scaling."""
    return math.floor(int(str(value)) * scale + 1e-9)


def quota_beyond_pools(
    capacity: Mapping[FlavorResource, int], cluster_queues: Mapping[str, brain.ClusterQueueInfo]
) -> list[str]:
    """Each (flavor, resource) whose nominal quotas add up to more than its pool holds."""
    totals: dict[FlavorResource, int] = {}
    for cq in cluster_queues.values():
        for fr, q in cq.quotas.items():
            if fr[1].startswith(GPU_PREFIX):  # cpu and memory are not modelled
                totals[fr] = totals.get(fr, 0) + q.nominal
    return [
        f"{flavor} {resource}: quota {n} beyond the pool's {capacity.get((flavor, resource), 0)}"
        for (flavor, resource), n in sorted(totals.items())
        if n > capacity.get((flavor, resource), 0)
    ]


def pool_capacity(
    capacity: Mapping[str, object], transformations: Sequence[brain.ResourceTransformation]
) -> dict[str, int]:
    """A node's GPU allocatable in the names Kueue keeps quota in: HAMi's node totals of
    ``nvidia.com/gpumem`` and ``nvidia.com/gpucores`` under the outputs of the catalog's
    resource transformations (``nvidia.com/total-gpumem``, ...); a node's figure is already
    a total over its vGPUs, so ``multiplyBy`` does not apply to it."""
    by_input = {t.input: t for t in transformations}
    out: dict[str, int] = {}
    for resource, value in capacity.items():
        name = str(resource)
        if not name.startswith(GPU_PREFIX):
            continue
        t = by_input.get(name)
        targets = dict(t.outputs) if t is not None else {name: Fraction(1)}
        if t is not None and t.strategy == "Retain":
            targets.setdefault(name, Fraction(1))
        for target, factor in targets.items():
            out[target] = out.get(target, 0) + math.floor(int(str(value)) * factor)
    return out


def load_organisation(
    *,
    manifests: Path = DEFAULT_MANIFESTS,
    nodes: Path = DEFAULT_NODES,
    scale: float = 1.0,
    exclude_flavors: Iterable[str] = ("local", "local-hami", "local-h100", "h200"),
    transformations: Sequence[brain.ResourceTransformation] | None = None,
) -> Organisation:
    """The sample organisation from the dev cluster's files, GPU pools and quotas × ``scale``.

    ``exclude_flavors``: the node agent's real node ("local", its HAMi L4 "local-hami" and its
    shared H100s "local-h100") is the demo's, not a GPU pool of the organisation; ClusterQueues
    left with no quota at all (demo-training) go with it. "h200" is the dev cluster's pool for
    Kueue's Topology Aware Scheduling (its flavor has a topologyName, so Kueue admits on it only
    Workloads that ask for a topology, which the sample's Jobs and notebooks do not).
    ``transformations``: Kueue's resource transformations (the catalog's
    ``resource_transformations``; default the demo catalog's), to count the HAMi pool
    (``l4-hami``) in ``total-gpumem`` and ``total-gpucores`` as its quotas are.
    """
    if transformations is None:
        transformations = brain.load_catalog(str(DEFAULT_CATALOG)).transformations
    docs = [d for p in sorted(manifests.glob("*.yaml")) for d in _documents(p)]
    pools = yaml.safe_load(nodes.read_text(encoding="utf-8"))["pools"]
    return build_organisation(
        docs, pools, scale=scale, exclude_flavors=exclude_flavors, transformations=transformations
    )


def build_organisation(
    docs: Sequence[Mapping[str, Any]],
    pools: Sequence[Mapping[str, Any]],
    *,
    transformations: Sequence[brain.ResourceTransformation],
    scale: float = 1.0,
    exclude_flavors: Iterable[str] = (),
    training_requests: Mapping[str, int] | None = None,
) -> Organisation:
    """An organisation from Kueue's objects (``docs``: ResourceFlavors, ClusterQueues, the
    Cohorts, LocalQueues and WorkloadPriorityClasses) and its node pools (as in
    devcluster/nodes.yaml: ``count``, ``labels``, ``capacity``; a pool's ``gpuaas.dev/pool``
    label names the flavor whose nodeLabels select it), pools and GPU quotas × ``scale``
    (rounded down). ``training_requests``: what Kueue counts for one GPU of a training Job
    (default ``nvidia.com/gpu: 1``)."""
    excluded = set(exclude_flavors)
    flavor_labels = {
        str(d["metadata"]["name"]): {
            str(k): str(v) for k, v in ((d.get("spec") or {}).get("nodeLabels") or {}).items()
        }
        for d in docs
        if d.get("kind") == "ResourceFlavor" and d["metadata"]["name"] not in excluded
    }
    capacity, physical = _pool_capacity(flavor_labels, pools, scale, transformations)
    cq_objects: dict[str, dict[str, Any]] = {}
    for d in docs:
        if d.get("kind") != "ClusterQueue":
            continue
        obj = _scaled_cluster_queue(d, excluded, scale)
        if obj["spec"]["resourceGroups"]:
            cq_objects[str(d["metadata"]["name"])] = obj
    cluster_queues = {n: brain.read_cluster_queue(o) for n, o in cq_objects.items()}
    beyond = quota_beyond_pools(capacity, cluster_queues)
    if beyond:
        raise ValueError(f"quotas beyond the pools at scale {scale:g}: " + "; ".join(beyond))
    lq_objects = [
        d
        for d in docs
        if d.get("kind") == "LocalQueue" and d["spec"]["clusterQueue"] in cluster_queues
    ]
    local_queues = {
        (str(d["metadata"]["namespace"]), str(d["metadata"]["name"])): str(
            d["spec"]["clusterQueue"]
        )
        for d in lq_objects
    }
    priorities = {
        str(d["metadata"]["name"]): int(d["value"])
        for d in docs
        if d.get("kind") == "WorkloadPriorityClass"
    }
    org = Organisation(
        capacity=capacity,
        flavor_labels=flavor_labels,
        cluster_queues=cluster_queues,
        cq_objects=cq_objects,
        cohort_objects=[d for d in docs if d.get("kind") == "Cohort"],
        local_queues=local_queues,
        local_queue_objects=lq_objects,
        priorities=priorities,
        scale=scale,
        physical_gpus=float(physical),
        flavor_taints={
            str(d["metadata"]["name"]): tuple(
                {str(k): str(v) for k, v in t.items()}
                for t in (d.get("spec") or {}).get("nodeTaints") or []
            )
            for d in docs
            if d.get("kind") == "ResourceFlavor" and d["metadata"]["name"] not in excluded
        },
        training_requests=dict(training_requests or {"nvidia.com/gpu": 1}),
    )
    return org


def _pool_capacity(
    flavor_labels: Mapping[str, Mapping[str, str]],
    pools: Sequence[Mapping[str, Any]],
    scale: float,
    transformations: Sequence[brain.ResourceTransformation],
) -> tuple[dict[FlavorResource, int], Fraction]:
    """What Kueue counts in each flavor's pools × ``scale`` (rounded down), and the physical
    GPUs they hold; a pool no flavor selects counts nowhere."""
    pool_flavor = {labels.get("gpuaas.dev/pool"): f for f, labels in flavor_labels.items()}
    capacity: dict[FlavorResource, int] = {}
    physical = Fraction(0)
    for pool in pools:
        flavor = pool_flavor.get(pool["labels"].get("gpuaas.dev/pool"))
        if flavor is None:
            continue
        count = pool["count"] * scale
        for resource, value in pool_capacity(pool["capacity"], transformations).items():
            capacity[(flavor, resource)] = capacity.get((flavor, resource), 0) + (
                math.floor(value * count + 1e-9)
            )
        physical += Fraction(int(pool["labels"].get("nvidia.com/gpu.count", "0"))) * Fraction(
            count
        ).limit_denominator(1000)
    return capacity, physical


def _scaled_cluster_queue(d: Mapping[str, Any], excluded: set[str], scale: float) -> dict[str, Any]:
    """A ClusterQueue without the ``excluded`` flavors (and the groups left with none), its
    GPU quotas and borrowing limits × ``scale``."""
    spec = d["spec"]
    groups = []
    for group in spec.get("resourceGroups") or []:
        flavors = [
            {**fl, "resources": [_scaled_resource(res, scale) for res in fl.get("resources") or []]}
            for fl in group.get("flavors") or []
            if fl["name"] not in excluded
        ]
        if flavors:
            groups.append({**group, "flavors": flavors})
    return {**d, "spec": {**spec, "resourceGroups": groups}}


def _scaled_resource(res: Mapping[str, Any], scale: float) -> dict[str, Any]:
    """A flavor's resource with its GPU quota and borrowing limit × ``scale``."""
    out = dict(res)
    if str(out["name"]).startswith(GPU_PREFIX):
        out["nominalQuota"] = _scaled(out.get("nominalQuota", 0), scale)
        if "borrowingLimit" in out:
            out["borrowingLimit"] = _scaled(out["borrowingLimit"], scale)
    return out


# --------------------------------------------------------------------------- Kueue


@dataclass(eq=False)
class Workload:
    key: str
    """``namespace/name``."""
    namespace: str
    local_queue: str
    cluster_queue: str
    priority: int
    priority_class: str
    created: float
    """Its place in the queue: its creation, kept when it is evicted. Kueue's
    ``GetQueueOrderTimestamp`` takes the eviction time only for a pods-ready timeout (with
    the ``Eviction`` requeuing timestamp) or an admission check, neither of which the replay
    has; a preemption keeps the creation time."""
    resource: str
    """The resource whose flavors it is tried in (``nvidia.com/gpu`` for a HAMi fraction)."""
    amount: int
    kind: str
    """``training`` or ``notebook``."""
    owner: str
    node_selector: Mapping[str, str] = field(default_factory=dict)
    queued_at: float = math.nan
    """When it last entered the pending queue: its creation, or the end of its eviction
    (the admission's ``waited`` counts from here)."""
    flavor: str | None = None
    admitted_at: float | None = None
    uid: str = ""
    also: Mapping[str, int] = field(default_factory=dict)
    """Further resources Kueue counts for it in the same flavor, after its resource
    transformations (a quarter L4: ``nvidia.com/total-gpumem: 5632``,
    ``nvidia.com/total-gpucores: 25``)."""
    tolerations: tuple[Mapping[str, Any], ...] = ()
    pod_requests: Mapping[str, int] | None = None
    """Its pod's GPU requests as written, before the transformations (None: :attr:`requests`)."""

    def __post_init__(self) -> None:
        if math.isnan(self.queued_at):
            self.queued_at = self.created

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]

    @property
    def requests(self) -> dict[str, int]:
        """Everything Kueue counts for it: ``resource`` and ``also``."""
        return {self.resource: self.amount, **self.also}

    def order(self) -> tuple[int, float, str]:
        """Its place in its ClusterQueue's pending queue (priority, then creation)."""
        return (-self.priority, self.created, self.key)


def _shape(wl: Workload) -> tuple[Any, ...]:
    """What, besides its amount, decides whether a workload fits: resource, selector, the rest,
    and its priority (what it may preempt)."""
    return (
        wl.resource,
        tuple(sorted(wl.node_selector.items())),
        tuple(sorted(wl.also.items())),
        wl.priority,
    )


class Kueue:
    """Quota bookkeeping and admission (see the module docstring for the rules modelled)."""

    def __init__(self, org: Organisation) -> None:
        self.org = org
        self.usage: dict[tuple[str, FlavorResource], int] = {}
        self.pending: dict[str, list[Workload]] = {cq: [] for cq in org.cluster_queues}
        """Per ClusterQueue, kept in :meth:`Workload.order` (insertion by bisection, so that an
        admission pass never re-sorts a queue)."""
        self._orders: dict[str, list[tuple[int, float, str]]] = {
            cq: [] for cq in org.cluster_queues
        }
        self._pending_keys: dict[str, Workload] = {}
        self.admitted: dict[str, Workload] = {}
        self.cohort_of = {n: cq.cohort for n, cq in org.cluster_queues.items()}
        self._members = {n: org.cohort_members(n) for n in org.cluster_queues}
        self.version = 0
        """Bumped at every change of usage (readers cache what they derive from it)."""
        self.pending_version = 0
        """Bumped at every change of the pending queues."""
        self.inadmissible: dict[str, set[str]] = {cq: set() for cq in org.cluster_queues}
        """Per ClusterQueue, pending workloads parked after fitting nowhere (BestEffortFIFO's
        inadmissible list): not heads again until quota is released in the cohort."""
        self.sticky: dict[str, str] = {}
        """ClusterQueue → its head that is preempting (kept the head until admitted)."""
        self.waiting: dict[str, set[str]] = {}
        """A preemptor → its victims whose quota is not free yet."""
        self.evicting: set[str] = set()
        """Admitted workloads evicted whose pods are not gone yet: they hold their quota, and
        are no candidates for another preemption."""
        self.reservations: dict[str, tuple[str, str, dict[str, int]]] = {}
        """A preemptor → (its ClusterQueue, flavor, requests): quota held for it from the
        preemption it issued until its admission or withdrawal."""
        self.reserved: dict[tuple[str, FlavorResource], int] = {}
        """The reservations summed per (ClusterQueue, (flavor, resource))."""
        self.strict = {
            n
            for n, obj in org.cq_objects.items()
            if obj.get("spec", {}).get("queueingStrategy") == "StrictFIFO"
        }
        """ClusterQueues whose head blocks the rest of their queue (``StrictFIFO``)."""
        self.topology: Callable[[Workload, str], bool] | None = None
        """TAS: called for a workload about to be admitted in a flavor, it assigns the
        workload its nodes and says whether it found them (False: not admitted)."""
        self.topology_fits: Callable[[Workload, str, Sequence[Workload]], bool] | None = None
        """TAS preemption: whether a workload would find nodes in a flavor with those
        workloads' pods gone (None: no preemption for topology)."""

    # -- arithmetic

    def used(self, cq: str, fr: FlavorResource) -> int:
        return self.usage.get((cq, fr), 0)

    def held(self, cq: str, fr: FlavorResource, mine: str | None = None) -> int:
        """Usage plus the preemptors' reservations (but ``mine``'s own)."""
        n = self.usage.get((cq, fr), 0) + self.reserved.get((cq, fr), 0)
        if mine is not None and mine in self.reservations:
            own_cq, flavor, requests = self.reservations[mine]
            if own_cq == cq and flavor == fr[0]:
                n -= requests.get(fr[1], 0)
        return n

    def available(self, cq: str, fr: FlavorResource, mine: str | None = None) -> int:
        """What Kueue would still admit to ``cq`` in ``fr``: own quota plus what the cohort
        lends, within its borrowing limit, less what is reserved for preemptors (but the
        reservation of the workload ``mine``, when it is the one asking)."""
        org = self.org
        own = org.nominal(cq, fr) - self.held(cq, fr, mine)
        members = self._members[cq]
        if len(members) == 1:
            return own
        cohort_free = sum(org.nominal(m, fr) - self.held(m, fr, mine) for m in members)
        limit = org.borrowing_limit(cq, fr)
        if limit is None:
            return cohort_free
        return min(cohort_free, own + limit)

    def borrows(self, wl: Workload, flavor: str) -> bool:
        """Whether admitting ``wl`` in ``flavor`` takes its queue beyond its nominal quota in
        any of the resources it counts in."""
        cq = wl.cluster_queue
        return any(
            self.used(cq, (flavor, r)) + n > self.org.nominal(cq, (flavor, r))
            for r, n in wl.requests.items()
        )

    def _flavors(self, wl: Workload) -> list[str]:
        cq = self.org.cluster_queues[wl.cluster_queue]
        out = []
        for flavor in cq.flavors_for(wl.resource):
            labels = self.org.flavor_labels.get(flavor, {})
            if not all(
                wl.node_selector[k] == v for k, v in labels.items() if k in wl.node_selector
            ):
                continue
            if not brain.flavor_tolerated(self.org.flavor_taints.get(flavor, ()), wl.tolerations):
                continue
            out.append(flavor)
        return out

    def _fits_in(self, wl: Workload, flavor: str) -> bool:
        return all(
            self.available(wl.cluster_queue, (flavor, r), wl.key) >= n
            for r, n in wl.requests.items()
        )

    def fits(self, wl: Workload) -> str | None:
        """The first flavor (queue order) where it fits now, without preempting."""
        for flavor in self._flavors(wl):
            if self._fits_in(wl, flavor):
                return flavor
        return None

    def _victims(self, wl: Workload) -> tuple[str, list[Workload]] | None:
        """Borrowers to evict so that ``wl`` fits in its own nominal quota (reclaimWithinCohort),
        in every resource it counts in."""
        cq = self.org.cluster_queues[wl.cluster_queue]
        if cq.reclaim_within_cohort == "Never":
            return None
        own = wl.cluster_queue
        for flavor in self._flavors(wl):
            requests = wl.requests
            if any(
                self.used(own, (flavor, r)) + n > self.org.nominal(own, (flavor, r))
                for r, n in requests.items()
            ):
                continue
            need = {
                r: n - self.available(own, (flavor, r), wl.key)
                for r, n in requests.items()
                if n > self.available(own, (flavor, r), wl.key)
            }
            candidates = sorted(
                (
                    w
                    for w in self.admitted.values()
                    if w.flavor == flavor
                    and w.cluster_queue != own
                    and w.key not in self.evicting
                    and w.cluster_queue in self._members[own]
                    and any(r in need for r in w.requests)
                    and self.borrowing(w.cluster_queue, flavor, need)
                ),
                key=lambda w: (w.priority, -(w.admitted_at or 0.0), w.key),
            )
            chosen: list[Workload] = []
            freed: dict[tuple[str, str], int] = {}
            """(ClusterQueue, resource) → what the chosen victims give back."""
            for w in candidates:
                if all(v <= 0 for v in need.values()):
                    break
                borrowed = [
                    r
                    for r, v in need.items()
                    if v > 0
                    and r in w.requests
                    and self.used(w.cluster_queue, (flavor, r)) - freed.get((w.cluster_queue, r), 0)
                    > self.org.nominal(w.cluster_queue, (flavor, r))
                ]
                if not borrowed:
                    continue  # no longer borrowing what is needed: not a reclaim candidate
                chosen.append(w)
                for r, n in w.requests.items():
                    freed[(w.cluster_queue, r)] = freed.get((w.cluster_queue, r), 0) + n
                    if r in need:
                        need[r] -= n
            if all(v <= 0 for v in need.values()):
                return flavor, chosen
        return None

    def borrowing(self, cq: str, flavor: str, resources: Iterable[str]) -> bool:
        return any(
            self.used(cq, (flavor, r)) > self.org.nominal(cq, (flavor, r)) for r in resources
        )

    # -- changes

    def submit(self, wl: Workload) -> None:
        order = wl.order()
        orders = self._orders[wl.cluster_queue]
        i = bisect.bisect_left(orders, order)
        orders.insert(i, order)
        self.pending[wl.cluster_queue].insert(i, wl)
        self._pending_keys[wl.key] = wl
        self.pending_version += 1

    def _unqueue(self, wl: Workload) -> None:
        orders = self._orders[wl.cluster_queue]
        i = bisect.bisect_left(orders, wl.order())
        assert self.pending[wl.cluster_queue][i] is wl
        del orders[i]
        del self.pending[wl.cluster_queue][i]
        del self._pending_keys[wl.key]
        self.inadmissible[wl.cluster_queue].discard(wl.key)
        if self.sticky.get(wl.cluster_queue) == wl.key:
            del self.sticky[wl.cluster_queue]
        self.waiting.pop(wl.key, None)
        self._unreserve(wl.key)
        self.pending_version += 1

    def _reserve(self, wl: Workload, flavor: str) -> None:
        self._unreserve(wl.key)
        self.reservations[wl.key] = (wl.cluster_queue, flavor, dict(wl.requests))
        for r, n in wl.requests.items():
            k = (wl.cluster_queue, (flavor, r))
            self.reserved[k] = self.reserved.get(k, 0) + n
        self.version += 1

    def _unreserve(self, key: str) -> None:
        held = self.reservations.pop(key, None)
        if held is None:
            return
        cq, flavor, requests = held
        for r, n in requests.items():
            self.reserved[(cq, (flavor, r))] -= n
        self.version += 1

    def withdraw(self, key: str) -> Workload | None:
        """A pending workload deleted (its pod or Job gone) before admission."""
        wl = self._pending_keys.get(key)
        if wl is not None:
            self._unqueue(wl)
        return wl

    def release(self, key: str, *, requeue: bool = True) -> Workload | None:
        """Its quota is free (finished, deleted, or evicted and gone); with ``requeue``, the
        inadmissible workloads of its cohort are queued again at once (else the caller does it
        later with :meth:`requeue_inadmissible`, as Kueue does after its batch period)."""
        wl = self.admitted.pop(key, None)
        self.evicting.discard(key)
        for preemptor in [p for p, keys in self.waiting.items() if key in keys]:
            self.waiting[preemptor].discard(key)
        if wl is not None and wl.flavor is not None:
            for r, n in wl.requests.items():
                self.usage[(wl.cluster_queue, (wl.flavor, r))] -= n
            self.version += 1
            if requeue:
                self.requeue_inadmissible(wl.cluster_queue)
        return wl

    def requeue_inadmissible(self, cq: str) -> None:
        """The workloads parked as inadmissible in ``cq``'s cohort are heads again (Kueue's
        ``QueueAssociatedInadmissibleWorkloadsAfter``)."""
        for member in self._members[cq]:
            self.inadmissible[member].clear()

    def _admit(self, wl: Workload, flavor: str, now: float) -> None:
        self._unqueue(wl)
        wl.flavor = flavor
        wl.admitted_at = now
        for r, n in wl.requests.items():
            k = (wl.cluster_queue, (flavor, r))
            self.usage[k] = self.usage.get(k, 0) + n
        self.admitted[wl.key] = wl
        self.version += 1

    def schedule(self, now: float) -> tuple[list[Workload], list[Workload]]:
        """Kueue's scheduling cycles at ``now``, until no ClusterQueue has a head left:
        (admitted, evicted), in the order they happened (see the module docstring).

        Within these cycles quota is only taken, never freed (an eviction frees it later), so
        a workload of the same shape (resource, node selector, other resources) as a head that
        fitted nowhere, and at least as large, would fit nowhere either: it is parked without
        looking again. That keeps a walk down a deep queue (an 8-GPU job behind hundreds of
        others) cheap."""
        admitted: list[Workload] = []
        evicted: list[Workload] = []
        too_big: dict[tuple[str, tuple[Any, ...]], int] = {}
        cursor: dict[str, int] = {}
        """Per ClusterQueue, where its head was: everything before it is parked (nothing is
        queued during these cycles, and what is admitted is a head), so a cycle never walks
        the parked part of a queue again."""
        while True:
            entries = self._cycle_heads(too_big, cursor)
            if not entries:
                return admitted, evicted
            entries.sort(key=lambda e: e[0])
            for _order, wl, flavor, victims in entries:
                self._settle(wl, flavor, victims, now, too_big, admitted, evicted)

    def _cycle_heads(
        self, too_big: dict[tuple[str, tuple[Any, ...]], int], cursor: dict[str, int]
    ) -> list[tuple[tuple[Any, ...], Workload, str | None, list[Workload]]]:
        """Each ClusterQueue's head this cycle, with the flavor it fits (else the one where
        it would fit by preempting, and its victims) and its place in Kueue's order."""
        entries: list[tuple[tuple[Any, ...], Workload, str | None, list[Workload]]] = []
        for cq, queue in self.pending.items():
            wl = self._head(cq, queue, too_big, cursor)
            if wl is None:
                continue
            flavor = self.fits(wl)
            victims: list[Workload] = []
            if flavor is None:
                found = self._find_victims(wl)
                if found is not None:
                    flavor, victims = found
            order = (
                flavor is not None and self.borrows(wl, flavor),
                -wl.priority,
                wl.created,
                wl.key,
            )
            entries.append((order, wl, flavor, victims))
        return entries

    def _settle(
        self,
        wl: Workload,
        flavor: str | None,
        victims: list[Workload],
        now: float,
        too_big: dict[tuple[str, tuple[Any, ...]], int],
        admitted: list[Workload],
        evicted: list[Workload],
    ) -> None:
        """One head in this cycle's order: parked (it fits nowhere), preempting (its victims
        evicted, its quota reserved), skipped (no longer fits), or admitted."""
        cq = wl.cluster_queue
        if flavor is None:
            if self.sticky.get(cq) == wl.key:
                # A preemptor whose victims are gone and that fits nowhere now (with TAS, its
                # nodes can be taken meanwhile): no longer the sticky head, its quota free.
                del self.sticky[cq]
                self._unreserve(wl.key)
            self.inadmissible[cq].add(wl.key)
            self._too_big(wl, too_big)
            return
        if victims:
            again = self._find_victims(wl)  # after what this cycle admitted before it
            if again is None:
                return  # skipped: stays the head, tried again next cycle
            self._preempt(wl, *again, evicted, admitted)
            return
        if not self._fits_in(wl, flavor):
            return  # skipped: no longer fits after another admission of the cycle
        if self.topology is not None and not self.topology(wl, flavor):
            found = self._topology_victims(wl, flavor)
            if found:
                self._preempt(wl, flavor, found, evicted, admitted)
                return
            # No topology assignment: parked as one that fits nowhere, holding nothing
            # (nodes only fill within these cycles, so a larger one of its shape fits none).
            if self.sticky.get(cq) == wl.key:
                del self.sticky[cq]
            self._unreserve(wl.key)
            self.inadmissible[cq].add(wl.key)
            self._too_big(wl, too_big)
            return
        self._admit(wl, flavor, now)
        if self.sticky.get(cq) == wl.key:
            del self.sticky[cq]
        self.waiting.pop(wl.key, None)
        admitted.append(wl)

    def _too_big(self, wl: Workload, too_big: dict[tuple[str, tuple[Any, ...]], int]) -> None:
        """``wl`` fitted nowhere, even by preempting: the larger of its shape (its priority
        too: the same candidates) in its queue are parked unseen in these cycles."""
        key = (wl.cluster_queue, _shape(wl))
        too_big[key] = min(wl.amount, too_big.get(key, 1 << 62))

    def _preempt(
        self,
        wl: Workload,
        flavor: str,
        victims: list[Workload],
        evicted: list[Workload],
        admitted: list[Workload],
    ) -> None:
        """``wl`` evicts ``victims`` and holds its quota in ``flavor`` until they are gone."""
        cq = wl.cluster_queue
        for v in victims:
            self.evicting.add(v.key)
            evicted.append(v)
            if v in admitted:
                admitted.remove(v)  # admitted and evicted at once: it never ran
        self.sticky[cq] = wl.key
        self.waiting[wl.key] = {v.key for v in victims}
        self._reserve(wl, flavor)

    def _find_victims(self, wl: Workload) -> tuple[str, list[Workload]] | None:
        """The reclaim's victims (:meth:`_victims`), else, with TAS preemption, those whose
        removal gives ``wl`` quota and nodes in a flavor (:meth:`_topology_victims`)."""
        found = self._victims(wl)
        if found is not None or self.topology_fits is None:
            return found
        for flavor in self._flavors(wl):
            victims = self._topology_victims(wl, flavor)
            if victims:
                return flavor, victims
        return None

    def _candidates(self, wl: Workload, flavor: str) -> list[Workload]:
        """Kueue's preemption candidates for ``wl`` in ``flavor`` (``findCandidates``), in
        ``CandidatesOrdering``."""
        cq = self.org.cluster_queues[wl.cluster_queue]
        resources = list(wl.requests)
        # Reclaiming from the cohort needs its queue within nominal quota once admitted (the
        # hierarchical advantage), as the reclaim of :meth:`_victims`.
        within_nominal = all(
            self.used(wl.cluster_queue, (flavor, r)) + n
            <= self.org.nominal(wl.cluster_queue, (flavor, r))
            for r, n in wl.requests.items()
        )
        borrowing = {
            m
            for m in self._members[wl.cluster_queue]
            if within_nominal and m != wl.cluster_queue and self.borrowing(m, flavor, resources)
        }
        out = []
        for w in self.admitted.values():
            if w.flavor != flavor or w.key in self.evicting:
                continue
            if w.cluster_queue == wl.cluster_queue:
                if cq.within_cluster_queue == "LowerPriority" and w.priority < wl.priority:
                    out.append(w)
            elif w.cluster_queue in borrowing and (
                cq.reclaim_within_cohort == "Any"
                or (cq.reclaim_within_cohort == "LowerPriority" and w.priority < wl.priority)
            ):
                out.append(w)
        out.sort(
            key=lambda w: (
                w.cluster_queue == wl.cluster_queue,
                w.priority,
                -(w.admitted_at or 0.0),
                w.key,
            )
        )
        return out

    def _topology_victims(self, wl: Workload, flavor: str) -> list[Workload] | None:
        """Kueue's ``classicalPreemptions`` with TAS: candidates removed one by one until
        ``wl`` fits on quota and nodes, then those not needed put back; None if none does."""
        if self.topology_fits is None:
            return None
        candidates = self._candidates(wl, flavor)
        if not candidates or not self._fits_without(wl, flavor, candidates):
            return None  # not even with every candidate gone
        chosen: list[Workload] = []
        for w in candidates:
            chosen.append(w)
            if self._fits_without(wl, flavor, chosen):
                for i in range(len(chosen) - 2, -1, -1):
                    trial = chosen[:i] + chosen[i + 1 :]
                    if self._fits_without(wl, flavor, trial):
                        chosen = trial
                return chosen
        return None

    def _fits_without(self, wl: Workload, flavor: str, gone: Sequence[Workload]) -> bool:
        """Whether ``wl`` fits in ``flavor`` on quota and (TAS) on the nodes were ``gone``'s
        workloads removed."""
        assert self.topology_fits is not None
        freed: dict[tuple[str, FlavorResource], int] = {}
        for w in gone:
            for r, n in w.requests.items():
                k = (w.cluster_queue, (flavor, r))
                freed[k] = freed.get(k, 0) + n
        for k, n in freed.items():
            self.usage[k] -= n
        try:
            fits = self._fits_in(wl, flavor)
        finally:
            for k, n in freed.items():
                self.usage[k] += n
        return fits and self.topology_fits(wl, flavor, gone)

    def _head(
        self,
        cq: str,
        queue: list[Workload],
        too_big: dict[tuple[str, tuple[Any, ...]], int],
        cursor: dict[str, int],
    ) -> Workload | None:
        """This cycle's head of ``cq``: the sticky preemptor (none while its victims still
        hold their quota), else the first workload not parked as inadmissible."""
        sticky = self.sticky.get(cq)
        if sticky is not None and sticky in self._pending_keys:
            if self.waiting.get(sticky):
                return None  # pending preemption: the queue waits for the victims to go
            return self._pending_keys[sticky]
        parked = self.inadmissible[cq]
        if cq in self.strict:  # StrictFIFO: the first in queue order or none
            if not queue or queue[0].key in parked:
                return None
            if queue[0].amount >= too_big.get((cq, _shape(queue[0])), 1 << 62):
                parked.add(queue[0].key)
                return None
            return queue[0]
        for i in range(cursor.get(cq, 0), len(queue)):
            wl = queue[i]
            if wl.key in parked:
                continue
            if wl.amount >= too_big.get((cq, _shape(wl)), 1 << 62):
                parked.add(wl.key)
                continue
            cursor[cq] = i
            return wl
        cursor[cq] = len(queue)
        return None

    def finish_eviction(self, key: str, now: float, *, requeue: bool = True) -> Workload | None:
        """An evicted workload's pods are gone: its quota is free, and it is queued again in
        its old place (its creation time), to start over (``requeue``: as :meth:`release`)."""
        wl = self.release(key, requeue=requeue)
        if wl is None:
            return None
        wl.flavor = None
        wl.admitted_at = None
        wl.queued_at = now
        self.submit(wl)
        return wl

    # -- checks

    def over_capacity(self) -> list[str]:
        """Broken invariants (empty when sound): quota or pool capacity exceeded."""
        problems = []
        per_fr: dict[FlavorResource, int] = {}
        for (cq, fr), n in self.usage.items():
            per_fr[fr] = per_fr.get(fr, 0) + n
            if n < 0:
                problems.append(f"{cq} {fr}: negative usage {n}")
            limit = self.org.borrowing_limit(cq, fr)
            if limit is not None and n > self.org.nominal(cq, fr) + limit:
                problems.append(f"{cq} {fr}: {n} beyond nominal + borrowing limit")
        for fr, n in per_fr.items():
            quota = sum(self.org.nominal(cq, fr) for cq in self.org.cluster_queues)
            if n > quota:
                problems.append(f"{fr}: {n} beyond the cohort's quota {quota}")
            if n > self.org.capacity.get(fr, 0):
                problems.append(f"{fr}: {n} beyond the pool's capacity")
        return problems

    def cluster_queue_objects(self) -> list[dict[str, Any]]:
        """The ClusterQueues with a ``status`` as Kueue would write it (for the culler)."""
        out = []
        for name, obj in self.org.cq_objects.items():
            by_flavor: dict[str, list[dict[str, Any]]] = {}
            for (cq, (flavor, resource)), n in self.usage.items():
                if cq == name:
                    borrowed = max(0, n - self.org.nominal(cq, (flavor, resource)))
                    by_flavor.setdefault(flavor, []).append(
                        {"name": resource, "total": str(n), "borrowed": str(borrowed)}
                    )
            status = {
                "flavorsReservation": [
                    {"name": f, "resources": r} for f, r in sorted(by_flavor.items())
                ],
                "pendingWorkloads": len(self.pending[name]),
            }
            out.append({**obj, "status": status})
        return out

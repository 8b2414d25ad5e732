"""Plain-data readers of Kueue objects.

Every function here takes the JSON form of a Kubernetes object (a ``dict`` as a watch or a
``GET`` returns it) and gives back small frozen dataclasses. No I/O, no client library: the
hub-side caches feed these readers, and the tests feed them literal dicts.

Both Kueue API versions served by Kueue 0.17 to 0.19 are understood: ``v1beta2``
(``spec.cohortName``) and ``v1beta1`` (``spec.cohort``). Malformed or missing fields never raise;
they read as absent.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any

from jupyter_gpuaas.core.labels import USER_LABEL

__all__ = [
    "ADMISSION_GATE",
    "JOB_UID_LABEL",
    "MAX_EXEC_TIME_LABEL",
    "POD_FINALIZER",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_NAME_LABEL",
    "REQUIRED_TOPOLOGY_ANNOTATION",
    "TERMINATION_TARGET",
    "TOPOLOGY_GATE",
    "TOPOLOGY_PLACEMENT_FAILED",
    "ClusterQueueInfo",
    "CohortInfo",
    "Condition",
    "FlavorResource",
    "LocalQueueInfo",
    "PendingWorkloadInfo",
    "QuantityError",
    "ResourceQuota",
    "ResourceTransformation",
    "TopologyWait",
    "WorkloadInfo",
    "display_value",
    "format_quantity",
    "kueue_value",
    "parse_quantity",
    "parse_time",
    "pending_item_for_workload",
    "pod_requests",
    "read_cluster_queue",
    "read_cohort",
    "read_conditions",
    "read_local_queue",
    "read_pending_workloads",
    "read_workload",
    "topology_wait",
    "transform_requests",
    "workload_for_pod",
]

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
"""Job label: Kueue's maximum execution time in seconds (copied to the Workload's
``spec.maximumExecutionTimeSeconds``; an admitted Workload running longer is deactivated)."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
POD_FINALIZER = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Pod condition Kueue sets (status patch) right before it deletes a pod it stops.
TERMINATION_TARGET = "TerminationTarget"
REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
"""Pod-template annotation of Kueue's Topology Aware Scheduling (apis/kueue/v1beta2/
topology_types.go): all the PodSet's pods within one domain of the named level (a node label of
the flavor's Topology); copied into the Workload's ``podSets[].topologyRequest.required``."""
TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
"""Scheduling gate on a TAS pod until Kueue has written its domain's node selector."""

_log = logging.getLogger(__name__)

FlavorResource = tuple[str, str]
"""``(flavor, resource)``: the key Kueue accounts quota and usage under."""


# --------------------------------------------------------------------------- quantities


class QuantityError(ValueError):
    """A string that is not a Kubernetes resource quantity, or one too large to count."""


_QUANTITY_RE = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60}
_DECIMAL_EXPONENT = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18
}  # fmt: skip
_MAX_QUANTITY = Fraction(2**63 - 1)
"""The largest amount counted, in the resource's base unit: Kubernetes reads a quantity as an
int64 (``Quantity.Value()``; Kueue accounts cpu in int64 milli-units), so a larger one is no
amount a cluster can hold. Refusing it before any arithmetic keeps ``cpu: 1e10000000`` (which
the API server stores) from costing seconds of exact big-number work per object read."""
_MAX_DIGITS = 64
"""Longest digit string of a quantity's number: far beyond int64's 19 digits plus nano's 9, and
far below Python's 4,300-digit limit on ``int(str)``."""
_MAX_INTEGER_DIGITS = len(str(2**63 - 1))
_NANO = Fraction(1, 10**9)
"""Kubernetes keeps a quantity to nano precision, rounding up what lies below."""


def parse_quantity(value: object) -> Fraction:
    """Parse a Kubernetes quantity (``"500m"``, ``"8Gi"``, ``"1e3"``, ``2``) exactly.

    As Kubernetes does, a string's precision below one nano is rounded up (away from zero), so
    ``"1e-20"`` reads as ``1n``. Raises :class:`QuantityError` for anything else (booleans and
    non-finite floats included), and for an amount beyond int64 ("too large"), decided from
    the exponent before any arithmetic.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return _bounded(Fraction(value), value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return _bounded(Fraction(value).limit_denominator(10**9), value)
    if value.isdigit() and value.isascii() and len(value) <= _MAX_DIGITS:  # the common case, fast
        return _bounded(Fraction(int(value)), value)
    return _parse_quantity_text(value)


def _parse_quantity_text(value: str) -> Fraction:
    """:func:`parse_quantity` of a string with a sign, a fraction, a suffix or an exponent."""
    match = _QUANTITY_RE.fullmatch(value.strip())
    if not match:
        raise QuantityError(f"{_shown(value)} is not a quantity (e.g. 1, 500m, 8Gi)")
    sign = -1 if match["num"].startswith("-") else 1
    whole, _, frac = match["num"].lstrip("+-").partition(".")
    significant = (whole + frac).lstrip("0")
    if not significant.rstrip("0"):
        return Fraction(0)
    multiplier, exponent = _suffix_scale(match["suffix"] or "")
    # value = sign × digits × 10^exponent × multiplier, with digits' trailing zeros moved into
    # the exponent: its size is known before it is computed.
    digits = significant.rstrip("0")
    exponent += len(significant) - len(digits) - len(frac)
    if len(digits) + exponent + len(str(multiplier)) - 1 > _MAX_INTEGER_DIGITS:
        raise QuantityError(f"{_shown(value)} is too large (at most {_MAX_QUANTITY} is counted)")
    if len(digits) > _MAX_DIGITS:
        raise QuantityError(f"{_shown(value)} has more than {_MAX_DIGITS} significant digits")
    if len(digits) + exponent < -9:  # below one nano
        return sign * _NANO
    amount = Fraction(int(digits) * multiplier) * Fraction(10) ** exponent
    return sign * _bounded(math.ceil(amount / _NANO) * _NANO, value)


def _suffix_scale(suffix: str) -> tuple[int, int]:
    """A quantity suffix as (binary multiplier, decimal exponent): ``Ki`` (1024, 0), ``m``
    (1, -3), ``e6`` (1, 6)."""
    if suffix in _BINARY:
        return _BINARY[suffix], 0
    if suffix in _DECIMAL_EXPONENT:
        return 1, _DECIMAL_EXPONENT[suffix]
    # e/E: an exponent of more than 6 digits is far out of range either way
    return 1, int(suffix[1:]) if len(suffix) <= 8 else (-1 if "-" in suffix else 1) * 10**7


def _bounded(amount: Fraction, value: object) -> Fraction:
    if abs(amount) > _MAX_QUANTITY:
        raise QuantityError(f"{_shown(value)} is too large (at most {_MAX_QUANTITY} is counted)")
    return amount


def _shown(value: object) -> str:
    """The value as a message quotes it: at most 40 characters of it."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def format_quantity(value: Fraction) -> str:
    """Format an exact quantity the way Kubernetes accepts it (integers plain, else milli)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{float(value):g}"


def kueue_value(resource: str, amount: Fraction) -> int:
    """An amount in the integer unit Kueue accounts in: millicores for cpu, else whole units
    (bytes for memory), rounded up like ``resource.Quantity.MilliValue()/Value()``."""
    scaled = amount * 1000 if resource == "cpu" else amount
    return -(-scaled.numerator // scaled.denominator)


def display_value(resource: str, value: int) -> str:
    """A Kueue integer amount back as a Kubernetes quantity (``2500`` cpu → ``"2500m"``)."""
    return format_quantity(Fraction(value, 1000)) if resource == "cpu" else str(value)


def _value_or_none(resource: str, value: object) -> int | None:
    if value is None:
        return None
    try:
        return kueue_value(resource, parse_quantity(value))
    except QuantityError:
        return None


# --------------------------------------------------------------------------- transformations


@dataclass(frozen=True)
class ResourceTransformation:
    """One entry of Kueue's ``Configuration.resources.transformations`` (config v1beta2).

    Kueue applies it to each pod's requests before it counts quota
    (``pkg/workload/workload.go`` ``applyResourceTransformations``): every output gets
    ``factor x input`` (``x`` the pod's amount of ``multiply_by``, where it asks for that),
    and ``Replace`` drops the input itself while ``Retain`` keeps it. HAMi's per-vGPU memory
    ``nvidia.com/gpumem`` multiplied by the vGPU count ``nvidia.com/gpu`` into
    ``nvidia.com/total-gpumem`` is the case this project needs.
    """

    input: str
    outputs: Mapping[str, Fraction]
    strategy: str = "Retain"
    multiply_by: str = ""

    def to_kueue(self) -> dict[str, Any]:
        """The entry as written in Kueue's Configuration."""
        out: dict[str, Any] = {"input": self.input, "strategy": self.strategy}
        if self.multiply_by:
            out["multiplyBy"] = self.multiply_by
        out["outputs"] = {name: format_quantity(f) for name, f in self.outputs.items()}
        return out


def transform_requests(
    requests: Mapping[str, Fraction], transformations: Iterable[ResourceTransformation]
) -> dict[str, Fraction]:
    """One pod's requests as Kueue counts them after its resource transformations.

    Kueue v0.19's arithmetic: outputs summed over inputs, a negative total clamped to 0, a
    retained input kept as requested. (Kueue v0.17 kept the *multiplied* amount under a
    retained input with ``multiplyBy``; the catalog accepts only ``Replace`` there, where
    both versions agree.) Amounts are per pod: Kueue multiplies by the pod count after this.
    """
    by_input = {t.input: t for t in transformations}
    if not any(name in by_input for name in requests):
        return dict(requests)
    retained: dict[str, Fraction] = {}
    generated: dict[str, Fraction] = {}
    for name, amount in requests.items():
        t = by_input.get(name)
        if t is None:
            retained[name] = amount
            continue
        base = amount
        if t.multiply_by and t.multiply_by in requests:
            base = amount * requests[t.multiply_by]
        for out_name, factor in t.outputs.items():
            generated[out_name] = generated.get(out_name, Fraction(0)) + base * factor
        if t.strategy == "Retain":
            retained[name] = amount
    for out_name, amount in generated.items():
        retained[out_name] = retained.get(out_name, Fraction(0)) + max(amount, Fraction(0))
    return retained


# --------------------------------------------------------------------------- small helpers


def as_mapping(value: object) -> Mapping[str, Any]:
    """A JSON object from the API, or an empty one when it is absent or of another type."""
    return value if isinstance(value, Mapping) else {}


def object_parts(
    obj: Mapping[str, Any],
) -> tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]:
    """An API object's metadata, spec and status (empty where absent)."""
    return (
        as_mapping(obj.get("metadata")),
        as_mapping(obj.get("spec")),
        as_mapping(obj.get("status")),
    )


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def as_int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# the seconds' fraction, before the offset: RFC 3339 allows any number of digits (Go writes 1 to
# 9), Python 3.10's fromisoformat only 3 or 6 (3.11+ any, truncated to microseconds)
_FRACTION = re.compile(r"\.(\d+)(?=[+-]\d\d:\d\d$|$)")


def parse_time(value: object) -> datetime | None:
    """RFC 3339 timestamp of the Kubernetes API → aware UTC datetime (``None`` if absent/bad)."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # 9999-12-31T23:59:59-01:00 lies past datetime.max
        return None


@dataclass(frozen=True)
class Condition:
    """One ``metav1.Condition``."""

    type: str
    status: bool | None
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None


def read_conditions(status: Mapping[str, Any]) -> dict[str, Condition]:
    """An object's ``status.conditions`` by type."""
    out: dict[str, Condition] = {}
    for raw in as_list(status.get("conditions")):
        c = as_mapping(raw)
        ctype = as_str(c.get("type"))
        if not ctype:
            continue
        st = as_str(c.get("status"))
        out[ctype] = Condition(
            type=ctype,
            status=True if st == "True" else False if st == "False" else None,
            reason=as_str(c.get("reason")),
            message=as_str(c.get("message")),
            last_transition_time=parse_time(c.get("lastTransitionTime")),
        )
    return out


def _owner(meta: Mapping[str, Any]) -> Mapping[str, Any]:
    """The controller among an object's owner references (else the first; empty if none)."""
    owner: Mapping[str, Any] = {}
    for raw in as_list(meta.get("ownerReferences")):
        ref = as_mapping(raw)
        if ref.get("controller") or not owner:
            owner = ref
    return owner


def _stopped(spec: Mapping[str, Any]) -> bool:
    policy = spec.get("stopPolicy")
    return isinstance(policy, str) and policy not in ("", "None")


# --------------------------------------------------------------------------- quotas


@dataclass(frozen=True)
class ResourceQuota:
    """One ``resourceGroups[].flavors[].resources[]`` entry."""

    flavor: str
    resource: str
    nominal: int
    """In Kueue's unit for the resource (see :func:`kueue_value`), as are the limits."""
    borrowing_limit: int | None = None
    lending_limit: int | None = None


def _read_quotas(
    spec: Mapping[str, Any],
) -> tuple[
    dict[FlavorResource, ResourceQuota], tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
]:
    """Quotas by (flavor, resource), and the resource groups as (covered, flavors in order)."""
    quotas: dict[FlavorResource, ResourceQuota] = {}
    groups: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
    for raw_group in as_list(spec.get("resourceGroups")):
        group = as_mapping(raw_group)
        covered = tuple(as_str(r) for r in as_list(group.get("coveredResources")) if as_str(r))
        flavors: list[str] = []
        for raw_flavor in as_list(group.get("flavors")):
            flavor = as_mapping(raw_flavor)
            fname = as_str(flavor.get("name"))
            if not fname:
                continue
            flavors.append(fname)
            for raw_res in as_list(flavor.get("resources")):
                res = as_mapping(raw_res)
                rname = as_str(res.get("name"))
                if not rname:
                    continue
                quotas[(fname, rname)] = ResourceQuota(
                    flavor=fname,
                    resource=rname,
                    nominal=_value_or_none(rname, res.get("nominalQuota")) or 0,
                    borrowing_limit=_value_or_none(rname, res.get("borrowingLimit")),
                    lending_limit=_value_or_none(rname, res.get("lendingLimit")),
                )
        groups.append((covered, tuple(flavors)))
    return quotas, tuple(groups)


def _read_usage(
    raw: object,
) -> tuple[dict[FlavorResource, int], dict[FlavorResource, int]]:
    totals: dict[FlavorResource, int] = {}
    borrowed: dict[FlavorResource, int] = {}
    for raw_flavor in as_list(raw):
        flavor = as_mapping(raw_flavor)
        fname = as_str(flavor.get("name"))
        for raw_res in as_list(flavor.get("resources")):
            res = as_mapping(raw_res)
            rname = as_str(res.get("name"))
            if not fname or not rname:
                continue
            totals[(fname, rname)] = _value_or_none(rname, res.get("total")) or 0
            borrowed[(fname, rname)] = _value_or_none(rname, res.get("borrowed")) or 0
    return totals, borrowed


@dataclass(frozen=True)
class ClusterQueueInfo:
    """What the project needs of a ClusterQueue: quotas (spec) and usage (status)."""

    name: str
    cohort: str | None
    quotas: Mapping[FlavorResource, ResourceQuota]
    resource_groups: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]
    reserved: Mapping[FlavorResource, int]
    """``status.flavorsReservation``: quota held by workloads with quota reserved (what counts)."""
    borrowed: Mapping[FlavorResource, int]
    in_use: Mapping[FlavorResource, int]
    """``status.flavorsUsage``: quota of admitted workloads."""
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    active: bool | None = None
    inactive_reason: str = ""
    stopped: bool = False
    reclaim_within_cohort: str = "Never"
    within_cluster_queue: str = "Never"

    def covers(self, resource: str) -> bool:
        return any(resource in covered for covered, _ in self.resource_groups)

    def flavors_for(self, resource: str) -> tuple[str, ...]:
        for covered, flavors in self.resource_groups:
            if resource in covered:
                return flavors
        return ()

    def usage(self, key: FlavorResource) -> int:
        return self.reserved.get(key, self.in_use.get(key, 0))


def read_cluster_queue(obj: Mapping[str, Any]) -> ClusterQueueInfo:
    meta, spec, status = object_parts(obj)
    quotas, groups = _read_quotas(spec)
    reserved, borrowed = _read_usage(status.get("flavorsReservation"))
    in_use, borrowed_in_use = _read_usage(status.get("flavorsUsage"))
    if not status.get("flavorsReservation"):
        reserved, borrowed = dict(in_use), borrowed_in_use
    conditions = read_conditions(status)
    active = conditions.get("Active")
    preemption = as_mapping(spec.get("preemption"))
    cohort = as_str(spec.get("cohortName")) or as_str(spec.get("cohort"))
    return ClusterQueueInfo(
        name=as_str(meta.get("name")),
        cohort=cohort or None,
        quotas=quotas,
        resource_groups=groups,
        reserved=reserved,
        borrowed=borrowed,
        in_use=in_use,
        pending_workloads=as_int(status.get("pendingWorkloads")),
        reserving_workloads=as_int(status.get("reservingWorkloads")),
        admitted_workloads=as_int(status.get("admittedWorkloads")),
        active=None if active is None else active.status,
        inactive_reason=(active.message or active.reason) if active and not active.status else "",
        stopped=_stopped(spec),
        reclaim_within_cohort=as_str(preemption.get("reclaimWithinCohort")) or "Never",
        within_cluster_queue=as_str(preemption.get("withinClusterQueue")) or "Never",
    )


@dataclass(frozen=True)
class CohortInfo:
    """A ``Cohort`` object: its own quota (lent to its members) and its parent cohort."""

    name: str
    parent: str | None
    quotas: Mapping[FlavorResource, ResourceQuota]


def read_cohort(obj: Mapping[str, Any]) -> CohortInfo:
    meta, spec = as_mapping(obj.get("metadata")), as_mapping(obj.get("spec"))
    quotas, _ = _read_quotas(spec)
    parent = as_str(spec.get("parentName")) or as_str(spec.get("parent"))
    return CohortInfo(name=as_str(meta.get("name")), parent=parent or None, quotas=quotas)


@dataclass(frozen=True)
class LocalQueueInfo:
    name: str
    namespace: str
    cluster_queue: str
    pending_workloads: int = 0
    reserving_workloads: int = 0
    admitted_workloads: int = 0
    active: bool | None = None
    stopped: bool = False


def read_local_queue(obj: Mapping[str, Any]) -> LocalQueueInfo:
    meta, spec, status = object_parts(obj)
    active = read_conditions(status).get("Active")
    return LocalQueueInfo(
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        cluster_queue=as_str(spec.get("clusterQueue")),
        pending_workloads=as_int(status.get("pendingWorkloads")),
        reserving_workloads=as_int(status.get("reservingWorkloads")),
        admitted_workloads=as_int(status.get("admittedWorkloads")),
        active=None if active is None else active.status,
        stopped=_stopped(spec),
    )


# --------------------------------------------------------------------------- workloads


def pod_requests(template: Mapping[str, Any]) -> dict[str, Fraction]:
    """Requests of one pod or pod template: the sum over containers, at least each init
    container's (as the scheduler counts them); a limit stands in for a missing request."""
    spec = as_mapping(template.get("spec"))

    def of(container: Mapping[str, Any]) -> dict[str, Fraction]:
        res = as_mapping(container.get("resources"))
        merged = {**as_mapping(res.get("limits")), **as_mapping(res.get("requests"))}
        out: dict[str, Fraction] = {}
        for name, qty in merged.items():
            try:
                out[str(name)] = parse_quantity(qty)
            except QuantityError as error:
                _skipped(str(name), error)
        return out

    total: dict[str, Fraction] = {}
    for raw in as_list(spec.get("containers")):
        for name, qty in of(as_mapping(raw)).items():
            total[name] = total.get(name, Fraction(0)) + qty
    for raw in as_list(spec.get("initContainers")):
        for name, qty in of(as_mapping(raw)).items():
            total[name] = max(total.get(name, Fraction(0)), qty)
    return total


@dataclass(frozen=True)
class WorkloadInfo:
    """A Workload, reduced to what the spawn progress, the culler and the queue view need
    (no pod template survives: only its requests)."""

    name: str
    namespace: str
    uid: str
    queue_name: str
    priority: int | None
    priority_class: str
    created: datetime | None
    owner_kind: str
    owner_name: str
    owner_uid: str
    job_uid: str
    active: bool
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    admitted_cluster_queue: str = ""
    assigned_flavors: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    resources: Mapping[str, Fraction] = field(default_factory=dict)
    """Total requests of all its pods (count x per-pod requests), by resource name."""
    pods: int = 0
    counted: Mapping[str, Fraction] = field(default_factory=dict)
    """What Kueue itself counts for it, after its resource transformations: the admission's
    ``resourceUsage``, else (pending) ``status.resourceRequests``; empty while Kueue has
    written neither."""
    required_topology: str = ""
    """The topology level its pods must share a domain of (Kueue TAS, the first PodSet's
    ``topologyRequest.required``); '' when it requires none."""

    @property
    def user_label(self) -> str:
        """The hub user named by :data:`~.labels.USER_LABEL` (copied by Kueue from the Job)."""
        return self.labels.get(USER_LABEL, "")

    @property
    def pending(self) -> bool:
        """Not (yet) holding quota, active, not finished: waiting in a queue."""
        return self.active and not (self.quota_reserved or self.admitted or self.finished)

    def _true(self, ctype: str) -> bool:
        cond = self.conditions.get(ctype)
        return bool(cond and cond.status)

    @property
    def quota_reserved(self) -> bool:
        return self._true("QuotaReserved")

    @property
    def admitted(self) -> bool:
        return self._true("Admitted")

    @property
    def finished(self) -> bool:
        return self._true("Finished")

    @property
    def evicted(self) -> Condition | None:
        cond = self.conditions.get("Evicted")
        return cond if cond and cond.status else None

    @property
    def preempted(self) -> Condition | None:
        """The Preempted condition, or an Evicted condition whose reason is Preempted."""
        cond = self.conditions.get("Preempted")
        if cond and cond.status:
            return cond
        evicted = self.evicted
        return evicted if evicted and evicted.reason == "Preempted" else None

    @property
    def pending_message(self) -> str:
        """Kueue's own words for why it is not admitted yet (QuotaReserved=False message)."""
        cond = self.conditions.get("QuotaReserved")
        if cond and cond.status is False:
            return cond.message
        return ""

    @property
    def inadmissible(self) -> bool:
        cond = self.conditions.get("QuotaReserved")
        return bool(cond and cond.status is False and cond.reason == "Inadmissible")


def read_workload(obj: Mapping[str, Any]) -> WorkloadInfo:
    meta, spec, status = object_parts(obj)
    labels = {str(k): as_str(v) for k, v in as_mapping(meta.get("labels")).items()}
    owner = _owner(meta)
    priority = spec.get("priority")
    pclass = as_mapping(spec.get("priorityClassRef"))
    admission = as_mapping(status.get("admission"))
    flavors: dict[str, str] = {}
    for raw in as_list(admission.get("podSetAssignments")):
        for res, flavor in as_mapping(as_mapping(raw).get("flavors")).items():
            if isinstance(res, str) and isinstance(flavor, str):
                flavors[res] = flavor
    counted = _sum_resources(
        as_mapping(raw).get("resourceUsage") for raw in as_list(admission.get("podSetAssignments"))
    ) or _sum_resources(
        as_mapping(raw).get("resources") for raw in as_list(status.get("resourceRequests"))
    )
    resources: dict[str, Fraction] = {}
    pods = 0
    required_topology = ""
    for raw in as_list(spec.get("podSets")):
        pod_set = as_mapping(raw)
        required_topology = required_topology or as_str(
            as_mapping(pod_set.get("topologyRequest")).get("required")
        )
        count = pod_set.get("count")
        n = count if isinstance(count, int) and not isinstance(count, bool) else 1
        pods += n
        for name, qty in pod_requests(as_mapping(pod_set.get("template"))).items():
            resources[name] = resources.get(name, Fraction(0)) + qty * n
    return WorkloadInfo(
        name=as_str(meta.get("name")),
        namespace=as_str(meta.get("namespace")),
        uid=as_str(meta.get("uid")),
        queue_name=as_str(spec.get("queueName")),
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else None,
        priority_class=as_str(pclass.get("name")) or as_str(spec.get("priorityClassName")),
        created=parse_time(meta.get("creationTimestamp")),
        owner_kind=as_str(owner.get("kind")),
        owner_name=as_str(owner.get("name")),
        owner_uid=as_str(owner.get("uid")),
        job_uid=labels.get(JOB_UID_LABEL, ""),
        active=spec.get("active") is not False,
        conditions=read_conditions(status),
        admitted_cluster_queue=as_str(admission.get("clusterQueue")),
        assigned_flavors=flavors,
        labels=labels,
        resources=resources,
        pods=pods,
        counted=counted,
        required_topology=required_topology,
    )


def _sum_resources(lists: Iterable[object]) -> dict[str, Fraction]:
    total: dict[str, Fraction] = {}
    for raw in lists:
        for name, qty in as_mapping(raw).items():
            try:
                total[str(name)] = total.get(str(name), Fraction(0)) + parse_quantity(qty)
            except QuantityError as error:
                _skipped(str(name), error)
    return total


_SKIPPED_SEEN: set[str] = set()
_SKIPPED_KEPT = 256


def _skipped(resource: str, error: QuantityError) -> None:
    """Say once per distinct value that a request was read as absent. The only log line of
    this module: every watch cache of the hub and the service reads objects through here, and a
    user who may create Jobs can write any quantity the API server stores."""
    message = f"{resource}: {error}; this request is read as absent"
    if message in _SKIPPED_SEEN:
        return
    if len(_SKIPPED_SEEN) >= _SKIPPED_KEPT:
        _SKIPPED_SEEN.clear()
    _SKIPPED_SEEN.add(message)
    _log.warning("unreadable resource quantity %s", message)


def workload_for_pod(
    workloads: Iterable[WorkloadInfo], *, pod_uid: str, pod_name: str = ""
) -> WorkloadInfo | None:
    """The workload Kueue made for a plain pod: owned by it (by uid), else labelled with it."""
    by_label: WorkloadInfo | None = None
    for wl in workloads:
        if pod_uid and wl.owner_kind == "Pod" and wl.owner_uid == pod_uid:
            return wl
        if pod_uid and wl.job_uid == pod_uid:
            by_label = wl
        elif not pod_uid and pod_name and wl.owner_kind == "Pod" and wl.owner_name == pod_name:
            by_label = by_label or wl
    return by_label


# --------------------------------------------------------------------------- topology

TOPOLOGY_PLACEMENT_FAILED = "TopologyPlacementFailed"
"""QuotaReserved=False reason of Kueue >= 0.19 with its UnadmittedWorkloadsObservability gate
(beta, off by default in 0.19): quota would do, but no topology domain fits the pods even were
every other Workload preempted. Without the gate the reason is ``Pending``."""
_TOPOLOGY_NO_FIT = re.compile(r'topology "[^"]*" (?:doesn\'t allow to fit|allows to fit only)')
"""Kueue's words when TAS finds no domain for a PodSet to which quota was found
(pkg/cache/scheduler/tas_flavor_snapshot.go ``notFitMessage``: 'topology "T" doesn't allow to
fit any of N pod(s)' / 'allows to fit only M out of N pod(s)'), inside the QuotaReserved=False
message 'couldn't assign flavors to pod set main: ...' that the scheduler writes."""


@dataclass(frozen=True)
class TopologyWait:
    """A pending Workload that Kueue's Topology Aware Scheduling holds back: its quota is there
    (or would be, with preemptions), but no domain of ``level`` has room for all its pods."""

    level: str
    """The level its pods must share (``kubernetes.io/hostname``: one node); '' when the
    Workload requires none (a preferred or unconstrained request that no free room fits)."""
    message: str
    """Kueue's own words (for operators)."""

    @property
    def one_node(self) -> bool:
        """It waits for room on one node (the lowest level Kueue allows is the hostname)."""
        return self.level == "kubernetes.io/hostname"


def topology_wait(wl: WorkloadInfo) -> TopologyWait | None:
    """Whether ``wl`` waits for topology rather than for quota (``None``: it does not, or it
    is not pending). Read from its QuotaReserved=False condition: the granular reason
    :data:`TOPOLOGY_PLACEMENT_FAILED`, or Kueue's TAS no-fit words in the message (the reason
    is then Kueue's fallback ``Pending``). A Workload short of quota never gets there: Kueue
    looks for a topology domain only once a flavor's quota fits."""
    if not wl.pending:
        return None
    cond = wl.conditions.get("QuotaReserved")
    if cond is None or cond.status is not False:
        return None
    if cond.reason != TOPOLOGY_PLACEMENT_FAILED and not _TOPOLOGY_NO_FIT.search(cond.message):
        return None
    return TopologyWait(level=wl.required_topology, message=cond.message)


# --------------------------------------------------------------------------- visibility API


@dataclass(frozen=True)
class PendingWorkloadInfo:
    """One item of the visibility API's ``pendingworkloads`` answer (positions start at 0)."""

    name: str
    namespace: str
    local_queue: str
    priority: int
    position_in_cluster_queue: int
    position_in_local_queue: int
    owner_uid: str = ""
    owner_name: str = ""


def read_pending_workloads(summary: Mapping[str, Any]) -> list[PendingWorkloadInfo]:
    """Items of a ``PendingWorkloadsSummary`` (LocalQueue or ClusterQueue endpoint)."""
    items: list[PendingWorkloadInfo] = []
    for raw in as_list(summary.get("items")):
        item = as_mapping(raw)
        meta = as_mapping(item.get("metadata"))
        owner = _owner(meta)
        items.append(
            PendingWorkloadInfo(
                name=as_str(meta.get("name")),
                namespace=as_str(meta.get("namespace")),
                local_queue=as_str(item.get("localQueueName")),
                priority=as_int(item.get("priority")),
                position_in_cluster_queue=as_int(item.get("positionInClusterQueue")),
                position_in_local_queue=as_int(item.get("positionInLocalQueue")),
                owner_uid=as_str(owner.get("uid")),
                owner_name=as_str(owner.get("name")),
            )
        )
    return items


def pending_item_for_workload(
    items: Iterable[PendingWorkloadInfo], *, workload_name: str = "", pod_uid: str = ""
) -> PendingWorkloadInfo | None:
    for item in items:
        if workload_name and item.name == workload_name:
            return item
        if pod_uid and item.owner_uid == pod_uid:
            return item
    return None

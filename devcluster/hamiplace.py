"""Which cards HAMi's scheduler gives a pod, or why it gives none (pure).

The dev cluster's stand-in for HAMi's scheduler extender (devcluster/hamischeduler.py serves
it) decides as HAMi v2.10.0 does (Project-HAMi/HAMi, commit 4707fb02):

- **what a container asks** (``pkg/device/nvidia/device.go`` ``GenerateResourceRequests``):
  ``nvidia.com/gpu`` vGPUs, each with ``nvidia.com/gpumem`` MiB, else ``gpumem-percentage`` of
  the card, else (no default memory configured) 100 % of it; ``nvidia.com/gpucores`` percent
  (default 0, capped at 100);
- **what a card holds**: the devices in ``hami.io/vgpu-devices-allocated`` of the node's pods
  that have not ended (``pkg/scheduler/scheduler.go`` drops pods in a terminated state);
- **per card, in order** (``Fit``): unhealthy ``CardNotHealth``; GPU type not allowed by
  ``nvidia.com/use-gputype`` / ``nouse-gputype`` ``CardTypeMismatch``; all vGPU slots taken
  ``CardTimeSlicingExhausted``; too little memory left ``CardInsufficientMemory``; too few cores
  ``CardInsufficientCore``; a 100 % request on a card anyone uses
  ``ExclusiveDeviceAllocateConflict``; a 0 % request on a card whose cores are all taken
  ``CardComputeUnitsExhausted``; cards that fit but fewer than asked
  ``AllocatedCardsInsufficientRequest``; more vGPUs than the node has cards
  ``NodeInsufficientDevice``. A node's reason is ``GenReason``'s ``"<cards>/<all> <Reason>"``
  list, sorted, joined by ``", "``;
- **which card** (``pkg/scheduler/policy/gpu_policy.go``): each card's score for the request is
  ``10 × (slots/count + cores/100 + memory/devmem)`` after placing it; ``binpack`` takes the
  highest first, ``spread`` (the chart's default, ``--gpu-scheduler-policy``) the lowest; the
  pod annotation ``hami.io/gpu-scheduler-policy`` overrides it. Ties go to the card registered
  last, as HAMi's stable sort and backwards walk do;
- **which node** (``policy/node_policy.go``, ``ComputeDefaultScore``): ``10 × (slots + cores +
  memory used / total)`` before placing; ``binpack`` (the default) takes the fullest node,
  ``spread`` (``hami.io/node-scheduler-policy``) the emptiest;
- **the Events** of a pod that fits nowhere (``score.go`` ``recordFilteringFailures``,
  ``scheduler.go`` ``Filter``): one ``FilteringFailed`` per reason, ``"<n> nodes
  <Reason>(<node>,...)"``, and ``"no available node, <n> nodes do not meet"``.

Not modelled: NUMA binding, ``topology-aware`` and ``mutex`` policies, UUID pinning, MIG mode,
resource quotas, and device types other than NVIDIA's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.kueue import parse_quantity

GPU = "nvidia.com/gpu"
MEMORY = "nvidia.com/gpumem"
MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
CORES = "nvidia.com/gpucores"
HAMI_ONLY = (MEMORY, MEMORY_PERCENT, CORES)
"""Resources only HAMi serves: a pod asking for one is HAMi's (devcluster/hamischeduler.py)."""
WEIGHT = 10  # pkg/util/types.go Weight
UNSET_PERCENT = 101  # HAMi's "no gpumem-percentage given"


@dataclass(frozen=True)
class Request:
    """One container's vGPUs (``ContainerDeviceRequest``)."""

    nums: int
    memory: int = 0  # MiB per vGPU, 0: by percentage
    percent: int = UNSET_PERCENT
    cores: int = 0

    def memory_on(self, card: hami.RegisteredCard) -> int:
        if self.memory > 0:
            return self.memory
        if self.percent != UNSET_PERCENT:
            return card.memory * self.percent // 100
        return 0


def _amount(resources: Mapping[str, Any], name: str) -> int | None:
    if name not in resources:
        return None
    try:
        return int(parse_quantity(resources[name]))
    except (TypeError, ValueError):
        return None


def container_request(container: Mapping[str, Any]) -> Request | None:
    """The container's vGPU request (limits first, then requests), ``None`` without vGPUs."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}

    def value(name: str) -> int | None:
        got = _amount(limits, name)
        return got if got is not None else _amount(requests, name)

    nums = value(GPU) or 0
    if nums <= 0:
        return None
    memory = value(MEMORY) or 0
    percent = value(MEMORY_PERCENT)
    percent = UNSET_PERCENT if percent is None or percent <= 0 else min(percent, 100)
    if percent == UNSET_PERCENT and memory == 0:
        percent = 100  # no defaultMemory configured: the whole card's memory
    cores = min(max(value(CORES) or 0, 0), 100)
    return Request(nums, memory, percent, cores)


def asks_hami(pod: Mapping[str, Any]) -> bool:
    """Whether a pod asks for a resource only HAMi serves (gpumem, its percentage, gpucores)."""
    spec = pod.get("spec") or {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = c.get("resources") or {}
        for part in (resources.get("limits") or {}, resources.get("requests") or {}):
            if any(name in part for name in HAMI_ONLY):
                return True
    return False


@dataclass
class Device:
    """A card and what is handed out of it (``DeviceUsage``)."""

    card: hami.RegisteredCard
    used: int = 0
    memory: int = 0
    cores: int = 0

    def add(self, use: hami.CardUse) -> None:
        self.used += 1
        self.memory += use.memory
        self.cores += use.cores


def _live(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def node_devices(
    cards: Sequence[hami.RegisteredCard], pods: Sequence[Mapping[str, Any]]
) -> list[Device]:
    """The node's cards with what its live pods hold of them (by HAMi's record)."""
    devices = [Device(c) for c in cards]
    by_uuid = {d.card.uuid: d for d in devices}
    for pod in pods:
        if not _live(pod):
            continue
        for use in hami.pod_devices(pod):
            if use.uuid in by_uuid:
                by_uuid[use.uuid].add(use)
    return devices


def _score(d: Device, req: Request) -> float:
    c = d.card
    if c.count == 0 or c.cores == 0 or c.memory == 0:
        return 0.0
    slots = (1 + d.used) / c.count
    cores = (req.cores + d.cores) / c.cores
    memory = (req.memory_on(c) + d.memory) / c.memory
    return WEIGHT * (slots + cores + memory)


def _type_allowed(annotations: Mapping[str, Any], card_type: str) -> bool:
    name = card_type.upper()

    def match(listed: str) -> bool:
        return any(t.strip() and t.strip().upper() in name for t in listed.split(","))

    use = str(annotations.get(hami.USE_GPUTYPE) or "")
    if use.strip() and not match(use):
        return False
    nouse = str(annotations.get(hami.NOUSE_GPUTYPE) or "")
    return not (nouse.strip() and match(nouse))


def gen_reason(reasons: Mapping[str, int], cards: int) -> str:
    """``GenReason``: ``"<n>/<cards> <Reason>"`` per reason, sorted, joined by ``", "``."""
    return ", ".join(sorted(f"{n}/{cards} {r}" for r, n in reasons.items()))


def fit(
    devices: Sequence[Device], req: Request, annotations: Mapping[str, Any], policy: str
) -> tuple[list[hami.CardUse], str]:
    """The cards for one container (and ``""``), or ``[]`` and the node's reason (``Fit``)."""
    if req.nums > len(devices):
        return [], hami.NODE_INSUFFICIENT_DEVICE
    # Stable, as Go's sort of so few cards is; walked from the end, as Fit walks them.
    order = sorted(devices, key=lambda d: _score(d, req), reverse=policy == "spread")
    reasons: dict[str, int] = {}
    picked: list[hami.CardUse] = []
    for d in reversed(order):
        reason = _why_not(d, req, annotations)
        if reason:
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        picked.append(hami.CardUse(d.card.uuid, req.memory_on(d.card), req.cores))
        if len(picked) == req.nums:
            return picked, ""
    if picked:
        reasons[hami.ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(picked)
    return [], gen_reason(reasons, len(devices))


def _why_not(d: Device, req: Request, annotations: Mapping[str, Any]) -> str:
    """Why the container cannot have card ``d`` (HAMi's reason, in Fit's order), or ``""``."""
    c = d.card
    checks = (
        (not c.health, hami.CARD_NOT_HEALTH),
        (not _type_allowed(annotations, c.type), hami.CARD_TYPE_MISMATCH),
        (c.count <= d.used, hami.CARD_TIME_SLICING_EXHAUSTED),
        (c.memory - d.memory < req.memory_on(c), hami.CARD_INSUFFICIENT_MEMORY),
        (c.cores - d.cores < req.cores, hami.CARD_INSUFFICIENT_CORE),
        (
            c.cores == 100 and req.cores == 100 and d.used > 0,
            hami.EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
        ),
        (c.cores != 0 and d.cores == c.cores and req.cores == 0, hami.CARD_COMPUTE_UNITS_EXHAUSTED),
    )
    return next((reason for failed, reason in checks if failed), "")


def node_score(devices: Sequence[Device]) -> float:
    """``ComputeDefaultScore``: how full the node is, before placing the pod."""
    total = sum(d.card.count for d in devices)
    cores = sum(d.card.cores for d in devices)
    memory = sum(d.card.memory for d in devices)
    if not total or not cores or not memory:
        return 0.0
    used = sum(d.used for d in devices) / total
    return WEIGHT * (
        used + sum(d.cores for d in devices) / cores + sum(d.memory for d in devices) / memory
    )


@dataclass(frozen=True)
class NodeFit:
    node: str
    score: float
    containers: tuple[tuple[hami.CardUse, ...], ...]  # init containers first, as HAMi lists them


@dataclass(frozen=True)
class Filtered:
    """HAMi's Filter for one pod: the node and cards chosen, or none and why."""

    chosen: NodeFit | None
    failed: Mapping[str, str] = field(default_factory=dict)  # node → reason
    fits: tuple[NodeFit, ...] = ()

    def events(self, nodes: int) -> list[tuple[str, str, str]]:
        """The Events HAMi's scheduler posts on the pod: (type, reason, message)."""
        if self.chosen is not None:
            scores = ",".join(f"{f.node}:{f.score:.2f}" for f in self.fits)
            msg = (
                f"find fit node({self.chosen.node}), {nodes - len(self.fits)} nodes not fit, "
                f"{len(self.fits)} nodes fit({scores})"
            )
            return [("Normal", hami.FILTERING_SUCCEED, msg)]
        by_reason: dict[str, list[str]] = {}
        for node, reason in self.failed.items():
            for part in reason.split(", "):
                bits = part.split(" ", 1)
                if len(bits) == 2 and "/" in bits[0]:
                    by_reason.setdefault(bits[1], []).append(node)
        out = [
            ("Warning", hami.FILTERING_FAILED, f"{len(ns)} nodes {r}({','.join(sorted(ns))})")
            for r, ns in sorted(by_reason.items())
        ]
        out.append(
            ("Warning", hami.FILTERING_FAILED, f"no available node, {nodes} nodes do not meet")
        )
        return out


def _requests(pod: Mapping[str, Any]) -> tuple[list[Request | None], list[Request | None]]:
    spec = pod.get("spec") or {}
    init = [container_request(c) for c in spec.get("initContainers") or []]
    app = [container_request(c) for c in spec.get("containers") or []]
    return init, app


def _fit_node(
    devices: Sequence[Device], pod: Mapping[str, Any], gpu_policy: str
) -> tuple[tuple[tuple[hami.CardUse, ...], ...], str]:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    init, app = _requests(pod)
    out: list[tuple[hami.CardUse, ...]] = []
    # Init containers run one at a time before the others: each is fitted on its own.
    for req in init:
        if req is None:
            out.append(())
            continue
        got, reason = fit([replace(d) for d in devices], req, annotations, gpu_policy)
        if reason:
            return (), reason
        out.append(tuple(got))
    working = [replace(d) for d in devices]
    for req in app:
        if req is None:
            out.append(())
            continue
        got, reason = fit(working, req, annotations, gpu_policy)
        if reason:
            return (), reason
        by_uuid = {d.card.uuid: d for d in working}
        for use in got:
            by_uuid[use.uuid].add(use)
        out.append(tuple(got))
    return tuple(out), ""


def policies(pod: Mapping[str, Any], node_default: str, gpu_default: str) -> tuple[str, str]:
    """The node and GPU policies for ``pod``: its annotations, else the scheduler's defaults."""
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    node = str(notes.get(hami.NODE_POLICY) or node_default).strip()
    gpu = str(notes.get(hami.GPU_POLICY) or gpu_default).strip()
    return node, gpu


def filter_pod(
    pod: Mapping[str, Any],
    nodes: Mapping[str, Sequence[Device] | None],
    *,
    node_policy: str = "binpack",
    gpu_policy: str = "spread",
) -> Filtered:
    """HAMi's Filter: ``nodes`` maps each candidate node to its devices (``None``: HAMi's device
    plugin registered nothing there). The policies are the scheduler's defaults (the chart's:
    binpack nodes, spread cards); the pod's annotations override them."""
    node_policy, gpu_policy = policies(pod, node_policy, gpu_policy)
    failed: dict[str, str] = {}
    fits: list[NodeFit] = []
    for name in sorted(nodes):
        devices = nodes[name]
        if not devices:
            failed[name] = "node unregistered"
            continue
        containers, reason = _fit_node(devices, pod, gpu_policy)
        if reason:
            failed[name] = reason
            continue
        fits.append(NodeFit(name, node_score(devices), containers))
    if not fits:
        return Filtered(None, failed)
    ranked = sorted(fits, key=lambda f: f.score, reverse=node_policy != "spread")
    return Filtered(ranked[0], failed, tuple(fits))

"""Every GPU, held or free, as the console's per-GPU view shows it (pure: plain data and a
clock in).

One row per holding — a whole GPU, a MIG slice, a share of a time-sliced GPU or a memory-capped
fraction — with its node, its pool (the Kueue ResourceFlavor it was admitted on), who holds it
and since when, whether it is busy, idle (since when) or unknown, and its memory and utilisation
where something measured them:

- notebook servers come from the reclaim loop's last plan (holder, team, activity verdict),
  joined by server to their pods (node, requests) and to their latest activity report (GPU
  memory their kernels hold, the utilisation of GPUs that are theirs alone);
- training comes from the admitted Workloads of the teams' namespaces, placed on their node by
  their pods (``spec.nodeName``; the Workload's owner is the pods' owner); its activity is not
  judged (``training``);
- what is **free**: per node and GPU resource, the node's allocatable amount less what the
  pods placed on it request (notebook and training pods alike), one row each (state ``free``):
  whole GPUs, MIG slices of each profile, shares; and per card of a HAMi node (one whose
  ``hami.io/node-nvidia-register`` lists its cards, as HAMi's device plugin registers them), the
  memory, cores and vGPU slots that the live pods' ``hami.io/vgpu-devices-allocated`` leave free
  on it. Its pool is the ResourceFlavors whose node labels the node carries.

Which card a fraction is on is HAMi's record on its pod (what its scheduler chose), never what
the server reports: a workbench's and a training Workload's ``uuids`` come from there when the
pod has one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any, Final, Literal, cast

from gpuaas_service import api_types as service_api
from gpuaas_service.model.pods import hub_server
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.reclaim.decide import Decision
from gpuaas_service.reclaim.idleness import ActivityReport, State
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents, resource_gpu_equivalents
from jupyter_gpuaas.core.kueue import (
    WorkloadInfo,
    as_list,
    as_mapping,
    parse_quantity,
    pod_requests,
)

__all__ = [
    "FREE",
    "TRAINING",
    "NodeGPUs",
    "PodPlace",
    "free_card_label",
    "free_rows",
    "gpu_rows",
    "holding_label",
    "pod_card_uuids",
    "pod_nodes",
    "pod_places",
    "read_node",
]

GPU_PREFIX = "nvidia.com/"
TRAINING: Final = "training"
"""The state of a training Workload's GPUs (not judged busy or idle: no activity reports)."""
FREE: Final = "free"
"""The state of what nobody holds on a node."""
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_CORES = "nvidia.com/gpucores"
_MIB = 1 << 20
_HAMI_SLOTS = "hami-vgpu-slots"  # what a pod on HAMi's cards holds of nvidia.com/gpu
_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


@dataclass(frozen=True)
class PodPlace:
    """Where a server's pod runs, what it asked for, and the cards HAMi placed it on."""

    node: str
    requests: Mapping[str, Fraction]
    cards: tuple[str, ...] = ()


def _card_uuids(pod: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(d.uuid for d in hami.pod_devices(pod)))


def pod_places(pods: Iterable[Mapping[str, Any]]) -> dict[str, PodPlace]:
    """Server key (``user`` or ``user/server``) → its pod's node and requests; pods that name
    no hub server are left out."""
    out: dict[str, PodPlace] = {}
    for pod in pods:
        server = hub_server(pod)
        if server is None:
            continue
        key = server_key(*server)
        node = as_mapping(pod.get("spec")).get("nodeName")
        out.setdefault(key, PodPlace(str(node or ""), pod_requests(pod), _card_uuids(pod)))
    return out


@dataclass(frozen=True)
class NodeGPUs:
    """A node's allocatable GPU resources (``nvidia.com/*``), its labels and the cards HAMi's
    device plugin registered on it (none: not a HAMi node)."""

    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, Fraction]
    cards: tuple[hami.RegisteredCard, ...] = ()


def read_node(node: Mapping[str, Any]) -> NodeGPUs | None:
    """A Node object's GPU resources; ``None`` for a node without any (or unschedulable)."""
    meta = as_mapping(node.get("metadata"))
    if as_mapping(node.get("spec")).get("unschedulable"):
        return None
    allocatable: dict[str, Fraction] = {}
    for resource, raw in as_mapping(as_mapping(node.get("status")).get("allocatable")).items():
        if not str(resource).startswith(GPU_PREFIX):
            continue
        try:
            amount = parse_quantity(raw)
        except (ValueError, TypeError):
            continue
        if amount > 0:
            allocatable[str(resource)] = amount
    if not allocatable:
        return None
    labels = {str(k): str(v) for k, v in as_mapping(meta.get("labels")).items()}
    cards = tuple(hami.read_register(as_mapping(meta.get("annotations"))))
    return NodeGPUs(str(meta.get("name") or ""), labels, allocatable, cards)


def _live(pod: Mapping[str, Any]) -> bool:
    """A pod that holds what it requests on its node: placed and not finished."""
    phase = as_mapping(pod.get("status")).get("phase")
    return bool(as_mapping(pod.get("spec")).get("nodeName")) and phase not in (
        "Succeeded",
        "Failed",
    )


def _owner_uids(pod: Mapping[str, Any]) -> list[str]:
    meta = as_mapping(pod.get("metadata"))
    uids = [
        meta.get("uid"),
        *(as_mapping(o).get("uid") for o in as_list(meta.get("ownerReferences"))),
    ]
    return [uid for uid in uids if isinstance(uid, str) and uid]


def pod_nodes(pods: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Pod uid and its owner's uid → the nodes its live pods run on (a training Workload's
    owner is its Job, or the pod itself)."""
    out: dict[str, set[str]] = {}
    for pod in pods:
        if not _live(pod):
            continue
        node = str(as_mapping(pod.get("spec")).get("nodeName"))
        for uid in _owner_uids(pod):
            out.setdefault(uid, set()).add(node)
    return out


def pod_card_uuids(pods: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Pod uid and its owner's uid → the cards HAMi placed its live pods on."""
    out: dict[str, list[str]] = {}
    for pod in pods:
        if not _live(pod):
            continue
        for uid in _owner_uids(pod):
            held = out.setdefault(uid, [])
            held += [u for u in _card_uuids(pod) if u not in held]
    return out


def _held_on_nodes(
    pods: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, dict[str, Fraction]], dict[str, list[hami.CardUse]]]:
    """Node → the GPU resources its live pods request, and node → the HAMi devices their
    records hold (a pod with such a record holds vGPU slots of HAMi's cards, not whole GPUs)."""
    out: dict[str, dict[str, Fraction]] = {}
    uses: dict[str, list[hami.CardUse]] = {}
    for pod in pods:
        if not _live(pod):
            continue
        node = str(as_mapping(pod.get("spec")).get("nodeName"))
        held = out.setdefault(node, {})
        devices = hami.pod_devices(pod)
        uses.setdefault(node, []).extend(devices)
        for resource, amount in pod_requests(pod).items():
            if not resource.startswith(GPU_PREFIX) or resource in (HAMI_MEMORY, HAMI_CORES):
                continue
            if devices and resource == "nvidia.com/gpu":
                resource = _HAMI_SLOTS
            held[resource] = held.get(resource, Fraction(0)) + amount
    return out, uses


def node_pools(
    labels: Mapping[str, str], flavor_labels: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The ResourceFlavors whose node labels (at least one) the node carries."""
    return sorted(
        name
        for name, wanted in flavor_labels.items()
        if wanted and all(labels.get(k) == v for k, v in wanted.items())
    )


def _free_row(
    node: NodeGPUs,
    pools: list[str],
    key: str,
    kind: Literal["gpu", "mig", "shared", "fraction"],
    free: Mapping[str, Fraction],
) -> tuple[service_api.ServiceGpuRow, Fraction]:
    gpu_eq = resource_gpu_equivalents(free)
    row: service_api.ServiceGpuRow = {
        "key": f"{node.name}/{key}",
        "node": node.name,
        "pool": pools,
        "kind": kind,
        "device": holding_label(free),
        "uuids": [],
        "holder": "",
        "holder_kind": FREE,
        "team": "",
        "offering": "",
        "gpu_equivalents": format_gpu_equivalents(gpu_eq),
        "since": None,
        "state": FREE,
        "idle_since": None,
        "memory_bytes": None,
        "memory_cap_bytes": memory_cap(free),
        "utilization_percent": None,
        "next_step": "",
    }
    return row, gpu_eq


def _free_card_row(
    node: NodeGPUs, pools: list[str], card: hami.RegisteredCard, uses: Sequence[hami.CardUse]
) -> tuple[service_api.ServiceGpuRow, Fraction] | None:
    """What HAMi's scheduler could still give out of one card: memory, cores and vGPU slots
    less its live pods' records; ``None`` for a card with no slot or no memory left."""
    on = [u for u in uses if u.uuid == card.uuid]
    slots = card.count - len(on)
    memory = card.memory - sum(u.memory for u in on)
    cores = max(card.cores - sum(u.cores for u in on), 0)
    if slots <= 0 or memory <= 0 or not card.health:
        return None
    row, _ = _free_row(node, pools, card.uuid, "fraction", {})
    gpu_eq = Fraction(cores, 100)
    row["device"] = free_card_label(card.type, slots, cores)
    row["uuids"] = [card.uuid]
    row["gpu_equivalents"] = format_gpu_equivalents(gpu_eq)
    row["memory_cap_bytes"] = memory * _MIB
    return row, gpu_eq


def free_rows(
    nodes: Iterable[NodeGPUs],
    pods: Iterable[Mapping[str, Any]],
    flavor_labels: Mapping[str, Mapping[str, str]],
) -> list[tuple[service_api.ServiceGpuRow, Fraction]]:
    """What nobody holds, per node and resource (module docstring), with its GPU-equivalents.

    ``pods``: every pod that may hold GPUs (notebook and training). On a HAMi node (one with
    registered cards) ``nvidia.com/gpu`` also counts HAMi's vGPU slots: those are the cards'
    rows (``fraction``, worth the card's free cores / 100), and the rest are whole GPUs of other
    device plugins. ``nvidia.com/gpumem`` and ``gpucores`` in a node's capacity are not read: a
    real HAMi node does not advertise them."""
    held, uses = _held_on_nodes(pods)
    out: list[tuple[service_api.ServiceGpuRow, Fraction]] = []
    for node in nodes:
        on = held.get(node.name, {})
        allocatable = dict(node.allocatable)
        if node.cards:
            slots = sum(c.count for c in node.cards)
            allocatable["nvidia.com/gpu"] = allocatable.get("nvidia.com/gpu", Fraction(0)) - slots
        free = {r: a - on.get(r, Fraction(0)) for r, a in allocatable.items()}
        free = {r: a for r, a in free.items() if a > 0}
        pools = node_pools(node.labels, flavor_labels)
        for resource, amount in sorted(free.items()):
            kind: Literal["gpu", "mig", "shared"]
            if _MIG.match(resource):
                kind = "mig"
            elif resource == "nvidia.com/gpu.shared":
                kind = "shared"
            elif resource == "nvidia.com/gpu":
                kind = "gpu"
            else:
                continue  # a resource the console cannot size (HAMi's node-wide sums among them)
            out.append(
                _free_row(node, pools, resource.removeprefix(GPU_PREFIX), kind, {resource: amount})
            )
        for card in node.cards:
            row = _free_card_row(node, pools, card, uses.get(node.name, []))
            if row is not None:
                out.append(row)
    return out


def free_card_label(card_type: str, slots: int, cores_percent: int) -> str:
    """What is free of one HAMi card, for people: "NVIDIA L4: 9 vGPU slots, 75% of its cores"
    (its free memory is the row's memory column)."""
    share = "all its cores" if cores_percent >= 100 else f"{cores_percent}% of its cores"
    return f"{card_type}: {slots} vGPU slot{'s' if slots != 1 else ''}, {share}"


def holding_label(requests: Mapping[str, Fraction]) -> str:
    """What a holding is, for people: "1 GPU", "MIG 1g.10gb", "1 share of a GPU",
    "10 GiB, 30% of a GPU"."""
    gpus = {r: a for r, a in requests.items() if r.startswith(GPU_PREFIX) and a}
    parts: list[str] = []
    for resource, amount in sorted(gpus.items()):
        count = format_gpu_equivalents(amount)
        if m := _MIG.fullmatch(resource):
            parts.append(
                f"MIG {m.group(1)}g.{m.group(2)}gb" + (f" × {count}" if amount != 1 else "")
            )
        elif resource == "nvidia.com/gpu.shared":
            parts.append(f"{count} share{'s' if amount != 1 else ''} of a GPU")
    memory = gpus.get("nvidia.com/gpumem")
    cores = gpus.get("nvidia.com/gpucores")
    if memory is not None:
        parts.append(f"{format_gpu_equivalents(memory * _MIB / (1 << 30))} GiB")
        if cores is not None:
            parts.append(f"{format_gpu_equivalents(cores)}% of a GPU")
    elif "nvidia.com/gpu" in gpus:
        n = gpus["nvidia.com/gpu"]
        parts.append(f"{format_gpu_equivalents(n)} GPU{'s' if n != 1 else ''}")
    return ", ".join(parts) or "—"


def memory_cap(requests: Mapping[str, Fraction]) -> int | None:
    """Bytes of GPU memory a holding may use, where its request says (a fraction's
    ``nvidia.com/gpumem`` per vGPU, a MIG slice's profile); ``None`` otherwise."""
    memory = requests.get("nvidia.com/gpumem")
    if memory is not None:
        return int(memory * requests.get("nvidia.com/gpu", Fraction(1)) * _MIB)
    total = 0
    for resource, amount in requests.items():
        if m := _MIG.fullmatch(resource):
            total += int(amount * int(m.group(2)) * (1 << 30))
    return total or None


def _utilization(report: ActivityReport | None, measured: float | None) -> float | None:
    """DCGM's per-pod figure, else the mean of what the server reports for its own GPUs."""
    if measured is not None:
        return round(measured, 1)
    own = [u for _, u in report.activity.gpu_utilization] if report else []
    return round(sum(own) / len(own), 1) if own else None


def _workbench_row(
    d: Decision,
    place: PodPlace | None,
    report: ActivityReport | None,
    utilization: float | None,
) -> service_api.ServiceGpuRow:
    wb = d.workbench
    idle = wb.idleness
    requests = place.requests if place else {}
    return {
        "key": wb.key,
        "node": place.node if place else "",
        "pool": sorted({flavor for flavor, _ in wb.holds}),
        # a GPU workbench's (CPU-only ones hold no row): Workbench.kind is a plain str
        "kind": cast("Literal['gpu', 'mig', 'shared', 'fraction']", wb.kind),
        "device": holding_label(requests),
        "uuids": (
            list(place.cards)
            if place and place.cards
            else sorted(u for u, _ in report.activity.gpu_utilization)
            if report
            else []
        ),
        "holder": wb.key,
        "holder_kind": "workbench",
        "team": wb.team,
        "offering": wb.offering,
        "gpu_equivalents": format_gpu_equivalents(wb.gpu_equivalents),
        "since": isoformat_z(wb.started_at),
        "state": idle.state.value,
        "idle_since": isoformat_z(idle.last_active) if idle.state is State.IDLE else None,
        "memory_bytes": idle.gpu_memory,
        "memory_cap_bytes": memory_cap(requests),
        "utilization_percent": _utilization(report, utilization),
        "next_step": d.action.value,
    }


def _training_row(
    wl: WorkloadInfo, nodes: Mapping[str, set[str]], cards: Mapping[str, list[str]]
) -> tuple[service_api.ServiceGpuRow, Fraction] | None:
    counted = wl.counted or wl.resources
    gpus = {r: a for r, a in counted.items() if r.startswith(GPU_PREFIX)}
    if not gpus:
        return None
    admitted = wl.conditions.get("Admitted")
    since = admitted.last_transition_time if admitted else None
    since = since or wl.created
    requests = {r: a for r, a in wl.resources.items() if r.startswith(GPU_PREFIX)}
    gpu_eq = resource_gpu_equivalents(gpus)
    row: service_api.ServiceGpuRow = {
        "key": f"{wl.namespace}/{wl.name}",
        "node": ", ".join(sorted(nodes.get(wl.owner_uid, ()))),
        "pool": sorted({f for r, f in wl.assigned_flavors.items() if r.startswith(GPU_PREFIX)}),
        "kind": "training",
        "device": holding_label(requests or gpus),
        "uuids": list(cards.get(wl.owner_uid, ())),
        "holder": wl.user_label or wl.owner_name or wl.name,
        "holder_kind": "training",
        "team": wl.namespace,
        "offering": "",
        "gpu_equivalents": format_gpu_equivalents(gpu_eq),
        "since": isoformat_z(since) if since else None,
        "state": TRAINING,
        "idle_since": None,
        "memory_bytes": None,
        "memory_cap_bytes": memory_cap(requests),
        "utilization_percent": None,
        "next_step": "",
    }
    return row, gpu_eq


def gpu_rows(
    decisions: Sequence[Decision],
    places: Mapping[str, PodPlace],
    reports: Mapping[str, ActivityReport | None],
    pod_utilization: Mapping[str, float],
    training: Iterable[WorkloadInfo],
    *,
    now: datetime,
    only: Iterable[str] | None = None,
    nodes: Iterable[NodeGPUs] = (),
    pods: Sequence[Mapping[str, Any]] = (),
    flavor_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> service_api.ServiceConsoleGpus:
    """The per-GPU view (module docstring): ``devices``, sorted by node then holder (free
    last on each node), and the ``nodes`` with what is held and free on each (GPU-equivalents,
    holdings, idle holdings). ``only``: the teams the caller may see (free rows name no team:
    every caller sees them). ``nodes``: the GPU nodes (none: no free rows); ``pods``: every
    notebook and training pod (their nodes and what they hold); ``flavor_labels``: each
    ResourceFlavor's node labels (a free row's pool)."""
    allowed = set(only) if only is not None else None
    placed = pod_nodes(pods)
    on_cards = pod_card_uuids(pods)
    rows: list[tuple[service_api.ServiceGpuRow, Fraction]] = []
    for d in decisions:
        wb = d.workbench
        if wb.gpu_equivalents <= 0 or (allowed is not None and wb.team not in allowed):
            continue
        key = wb.key
        row = _workbench_row(d, places.get(key), reports.get(key), pod_utilization.get(key))
        rows.append((row, wb.gpu_equivalents))
    for wl in training:
        if not (wl.admitted and not wl.finished):
            continue
        if allowed is not None and wl.namespace not in allowed:
            continue
        training_row = _training_row(wl, placed, on_cards)
        if training_row is not None:
            rows.append(training_row)
    rows.extend(free_rows(nodes, pods, flavor_labels or {}))
    rows.sort(
        key=lambda rg: (
            rg[0]["node"] == "",
            rg[0]["node"],
            rg[0]["state"] == FREE,
            rg[0]["holder"],
            rg[0]["key"],
        )
    )
    pools: dict[str, set[str]] = {}  # the nodes in the order of their first row
    holdings: dict[str, int] = {}
    idle: dict[str, int] = {}
    held: dict[str, Fraction] = {}
    free: dict[str, Fraction] = {}
    for r, gpu_eq in rows:
        node = r["node"]
        pools.setdefault(node, set()).update(r["pool"])
        if r["state"] == FREE:
            free[node] = free.get(node, Fraction(0)) + gpu_eq
            continue
        holdings[node] = holdings.get(node, 0) + 1
        idle[node] = idle.get(node, 0) + (r["state"] == State.IDLE.value)
        held[node] = held.get(node, Fraction(0)) + gpu_eq
    return {
        "now": isoformat_z(now),
        "visible_teams": sorted(allowed) if allowed is not None else None,
        "nodes": [
            {
                "node": name,
                "holdings": holdings.get(name, 0),
                "idle": idle.get(name, 0),
                "pools": sorted(in_pools),
                "gpu_equivalents": format_gpu_equivalents(held.get(name, Fraction(0))),
                "free_gpu_equivalents": format_gpu_equivalents(free.get(name, Fraction(0))),
            }
            for name, in_pools in pools.items()
        ],
        "devices": [r for r, _ in rows],
        "as_of": None,  # the console's: when the plan it was read with was made
    }

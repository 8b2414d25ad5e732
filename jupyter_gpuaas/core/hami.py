"""What HAMi writes on Nodes and Pods, and how a pod it cannot place says so (pure).

One home for HAMi's contract as the product reads it and the dev cluster writes it, from
Project-HAMi/HAMi v2.10.0 (commit 4707fb02):

- **node** ``hami.io/node-nvidia-register`` (``pkg/device/nvidia/device.go`` ``RegisterAnnos``),
  written by HAMi's device plugin (``pkg/device-plugin/nvidiadevice/nvinternal/plugin/
  register.go``): a JSON list of the node's cards, each ``id`` (UUID), ``index``, ``count`` (vGPU
  slots, ``deviceSplitCount``), ``devmem`` (MiB), ``devcore`` (100 per card), ``type`` (the NVML
  name, ``NVIDIA-`` prefixed if it lacks it), ``numa``, ``mode`` (``hami-core``), ``health``
  (``pkg/device/devices.go`` ``DeviceInfo``, ``MarshalNodeDevices``; JSON ``omitempty``, so a 0 or
  ``false`` field is absent);
- **pod** ``hami.io/vgpu-devices-allocated`` and ``hami.io/vgpu-devices-to-allocate``
  (``device.SupportDevices`` / ``InRequestDevices``), written by HAMi's scheduler when it picks
  the cards: per container ``UUID,NVIDIA,<MiB>,<cores>:`` for each device, then ``;``
  (``EncodePodSingleDevice``); ``hami.io/vgpu-node`` (the node) and ``hami.io/vgpu-time`` (Unix
  seconds) (``pkg/util/types.go``); at bind ``hami.io/bind-phase: allocating`` and
  ``hami.io/bind-time``, which its device plugin turns into ``success`` once the kubelet's
  Allocate has handed the devices over;
- **a pod that fits no card**: HAMi's scheduler extender returns the node in ``FailedNodes`` with
  the per-card reasons (``pkg/device/common/common.go`` ``GenReason``: ``"<cards>/<all>
  <Reason>"`` joined by ``", "``), so kube-scheduler leaves the pod ``Pending`` with
  ``PodScheduled=False``, reason ``Unschedulable``, message ``0/<n> nodes are available: <count>
  <reasons>.``; HAMi also posts Warning Events ``FilteringFailed`` (``pkg/scheduler/event.go``,
  ``score.go`` ``recordFilteringFailures``: ``"<n> nodes <Reason>(<node>,...)"``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALLOCATED",
    "ASSIGNED_NODE",
    "ASSIGNED_TIME",
    "BIND_PHASE",
    "BIND_TIME",
    "CARD_REASONS",
    "DEVICE_TYPE",
    "FILTERING_FAILED",
    "GPU_POLICY",
    "NODE_POLICY",
    "REGISTER",
    "SCHEDULER_NAME",
    "TO_ALLOCATE",
    "CardUse",
    "RegisteredCard",
    "decode_pod_devices",
    "encode_pod_devices",
    "encode_register",
    "no_room_condition",
    "pod_devices",
    "read_register",
    "unschedulable_reasons",
]

REGISTER = "hami.io/node-nvidia-register"
HANDSHAKE = "hami.io/node-handshake"
ALLOCATED = "hami.io/vgpu-devices-allocated"
TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
ASSIGNED_NODE = "hami.io/vgpu-node"
ASSIGNED_TIME = "hami.io/vgpu-time"
BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
NODE_POLICY = "hami.io/node-scheduler-policy"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
SCHEDULER_NAME = "hami-scheduler"
"""The chart's ``schedulerName`` (charts/hami/values.yaml), which its webhook sets on GPU pods."""
DEVICE_TYPE = "NVIDIA"
"""The device type in a pod's annotations (``nvidia.NvidiaGPUDevice``)."""
FILTERING_FAILED = "FilteringFailed"
FILTERING_SUCCEED = "FilteringSucceed"
BINDING_SUCCEED = "BindingSucceed"
BINDING_FAILED = "BindingFailed"

# pkg/device/common/common.go: why a card (or node) does not fit a container's request.
CARD_TYPE_MISMATCH = "CardTypeMismatch"
CARD_UUID_MISMATCH = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED = "CardTimeSlicingExhausted"
CARD_COMPUTE_UNITS_EXHAUSTED = "CardComputeUnitsExhausted"
CARD_INSUFFICIENT_MEMORY = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE = "CardInsufficientCore"
CARD_NOT_HEALTH = "CardNotHealth"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT = "ExclusiveDeviceAllocateConflict"
NODE_INSUFFICIENT_DEVICE = "NodeInsufficientDevice"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST = "AllocatedCardsInsufficientRequest"
CARD_REASONS = (
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_INSUFFICIENT_MEMORY,
    CARD_INSUFFICIENT_CORE,
    CARD_NOT_HEALTH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    NODE_INSUFFICIENT_DEVICE,
    ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
)
ROOM_REASONS = frozenset(
    {
        CARD_INSUFFICIENT_MEMORY,
        CARD_INSUFFICIENT_CORE,
        CARD_TIME_SLICING_EXHAUSTED,
        CARD_COMPUTE_UNITS_EXHAUSTED,
        EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
        ALLOCATED_CARDS_INSUFFICIENT_REQUEST,
    }
)
"""The reasons that mean "the cards are there, but others hold too much of them": what freeing a
card can cure (not a type mismatch, an unhealthy card, or too few cards on the node)."""

_REASON = re.compile(r"\b(\d+)/(\d+) ([A-Za-z]+)")


@dataclass(frozen=True)
class RegisteredCard:
    """One card of a node as HAMi's device plugin registers it."""

    uuid: str
    index: int
    count: int  # vGPU slots
    memory: int  # MiB
    cores: int  # 100 for a whole card
    type: str  # e.g. "NVIDIA H100 80GB HBM3"
    health: bool = True
    numa: int = 0
    mode: str = "hami-core"


def encode_register(cards: Iterable[RegisteredCard]) -> str:
    """The node annotation :data:`REGISTER` for ``cards`` (JSON, zero fields left out)."""
    out = []
    for c in cards:
        item: dict[str, Any] = {
            "id": c.uuid,
            "index": c.index,
            "count": c.count,
            "devmem": c.memory,
            "devcore": c.cores,
            "type": c.type,
            "numa": c.numa,
            "mode": c.mode,
            "health": c.health,
        }
        out.append({k: v for k, v in item.items() if v not in (0, "", False)})
    return json.dumps(out, separators=(",", ":"))


def read_register(annotations: Mapping[str, Any]) -> list[RegisteredCard]:
    """The cards a node's :data:`REGISTER` annotation lists; ``[]`` without one (not a HAMi
    node) or when it cannot be read (HAMi's scheduler then skips the node too)."""
    raw = annotations.get(REGISTER)
    if not raw:
        return []
    try:
        items = json.loads(str(raw))
    except ValueError:
        return []
    cards = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, Mapping) or not item.get("id"):
            continue
        try:
            cards.append(
                RegisteredCard(
                    uuid=str(item["id"]),
                    index=int(item.get("index") or 0),
                    count=int(item.get("count") or 0),
                    memory=int(item.get("devmem") or 0),
                    cores=int(item.get("devcore") or 0),
                    type=str(item.get("type") or ""),
                    health=bool(item.get("health")),
                    numa=int(item.get("numa") or 0),
                    mode=str(item.get("mode") or "hami-core"),
                )
            )
        except (TypeError, ValueError):
            continue
    return cards


@dataclass(frozen=True)
class CardUse:
    """One device of one container in a pod's annotation: a card and what is taken of it."""

    uuid: str
    memory: int  # MiB
    cores: int  # percent
    type: str = DEVICE_TYPE


def encode_pod_devices(containers: Sequence[Sequence[CardUse]]) -> str:
    """:data:`ALLOCATED` / :data:`TO_ALLOCATE` for a pod: one entry per container (init
    containers first, as HAMi lists them), ``UUID,NVIDIA,MiB,cores:`` per device, each entry
    ended by ``;``."""
    return "".join(
        "".join(f"{d.uuid},{d.type},{d.memory},{d.cores}:" for d in devices) + ";"
        for devices in containers
    )


def decode_pod_devices(text: str) -> list[list[CardUse]]:
    """The containers' devices of an annotation :func:`encode_pod_devices` wrote (malformed
    devices are skipped)."""
    if not text:
        return []
    entries = text.split(";")
    if entries and entries[-1] == "":
        entries.pop()
    out: list[list[CardUse]] = []
    for entry in entries:
        devices = []
        for item in entry.split(":"):
            parts = item.split(",")
            if len(parts) < 4 or not parts[0].strip():
                continue
            try:
                devices.append(
                    CardUse(parts[0].strip(), int(parts[2]), int(parts[3]), parts[1].strip())
                )
            except ValueError:
                continue
        out.append(devices)
    return out


def pod_devices(pod: Mapping[str, Any]) -> list[CardUse]:
    """Every device a pod holds by HAMi's record (:data:`ALLOCATED`), all containers."""
    meta = pod.get("metadata") or {}
    text = str((meta.get("annotations") or {}).get(ALLOCATED) or "")
    return [d for container in decode_pod_devices(text) for d in container]


def unschedulable_reasons(pod: Mapping[str, Any]) -> dict[str, int]:
    """HAMi's card reasons in a pending pod's ``PodScheduled=False``/``Unschedulable``
    condition (kube-scheduler quotes the extender's per-node reasons there): reason → the cards
    the message counts for it; ``{}`` when the pod is not unschedulable or HAMi gave no reason."""
    status = pod.get("status") or {}
    if status.get("phase") not in (None, "Pending"):
        return {}
    for cond in status.get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            # The part after "preemption:" repeats the reasons: count them once.
            message = str(cond.get("message") or "").split(" preemption:")[0]
            out: dict[str, int] = {}
            for m in _REASON.finditer(message):
                if m.group(3) in CARD_REASONS:
                    out[m.group(3)] = out.get(m.group(3), 0) + int(m.group(1))
            return out
    return {}


def no_room_condition(cards: int, nodes: int = 1) -> dict[str, str]:
    """kube-scheduler's ``PodScheduled`` condition for a pod HAMi's extender found no card with
    memory enough on (``cards`` cards per node, all short), as a model of the cluster (the
    utilisation replay) writes it on the pods it feeds the reclaim loop."""
    per_node = f"{cards}/{cards} {CARD_INSUFFICIENT_MEMORY}"
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": f"0/{nodes} nodes are available: {nodes} {per_node}. preemption: 0/{nodes} "
        f"nodes are available: {nodes} Preemption is not helpful for scheduling.",
    }

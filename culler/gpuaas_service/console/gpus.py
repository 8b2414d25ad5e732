"""Every GPU held, as the console's per-GPU view shows it (pure: plain data and a clock in).

One row per holding — a whole GPU, a MIG slice, a share of a time-sliced GPU or a memory-capped
fraction — with its node, its pool (the Kueue ResourceFlavor it was admitted on), who holds it
and since when, whether it is busy, idle (since when) or unknown, and its memory and utilisation
where something measured them:

- notebook servers come from the reclaim loop's last plan (holder, team, activity verdict),
  joined by server to their pods (node, requests) and to their latest activity report (GPU
  memory their kernels hold, the utilisation of GPUs that are theirs alone);
- training comes from the admitted Workloads of the teams' namespaces: the service does not
  watch training pods, so their node is not known and their activity is not judged (``training``).

The service reads no Node objects (least privilege): a GPU that nobody holds has no row; the
teams' quota rows say how much is free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from gpuaas_service.model.pods import hub_server
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.reclaim.decide import Decision
from gpuaas_service.reclaim.idleness import ActivityReport, State
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents, resource_gpu_equivalents
from jupyter_gpuaas.core.kueue import WorkloadInfo, as_mapping, pod_requests

__all__ = ["TRAINING", "PodPlace", "gpu_rows", "holding_label", "pod_places"]

GPU_PREFIX = "nvidia.com/"
TRAINING = "training"
"""The state of a training Workload's GPUs (not judged busy or idle: no activity reports)."""
_MIB = 1 << 20
_MIG = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


@dataclass(frozen=True)
class PodPlace:
    """Where a server's pod runs and what it asked for."""

    node: str
    requests: Mapping[str, Fraction]


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
        out.setdefault(key, PodPlace(str(node or ""), pod_requests(pod)))
    return out


def holding_label(requests: Mapping[str, Fraction]) -> str:
    """What a holding is, for people: "1 GPU", "MIG 1g.10gb", "1 share of a GPU",
    "10 GiB, 30% of a GPU"."""
    gpus = {r: a for r, a in requests.items() if r.startswith(GPU_PREFIX) and a}
    parts: list[str] = []
    for resource, amount in sorted(gpus.items()):
        count = format_gpu_equivalents(amount)
        if m := _MIG.match(resource):
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
        if m := _MIG.match(resource):
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
) -> dict[str, Any]:
    wb = d.workbench
    idle = wb.idleness
    requests = place.requests if place else {}
    return {
        "key": wb.key,
        "node": place.node if place else "",
        "pool": sorted({flavor for flavor, _ in wb.holds}),
        "kind": wb.kind,
        "device": holding_label(requests),
        "uuids": sorted(u for u, _ in report.activity.gpu_utilization) if report else [],
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


def _training_row(wl: WorkloadInfo) -> tuple[dict[str, Any], Fraction] | None:
    counted = wl.counted or wl.resources
    gpus = {r: a for r, a in counted.items() if r.startswith(GPU_PREFIX)}
    if not gpus:
        return None
    admitted = wl.conditions.get("Admitted")
    since = admitted.last_transition_time if admitted else None
    since = since or wl.created
    requests = {r: a for r, a in wl.resources.items() if r.startswith(GPU_PREFIX)}
    gpu_eq = resource_gpu_equivalents(gpus)
    row = {
        "key": f"{wl.namespace}/{wl.name}",
        "node": "",
        "pool": sorted({f for r, f in wl.assigned_flavors.items() if r.startswith(GPU_PREFIX)}),
        "kind": "training",
        "device": holding_label(requests or gpus),
        "uuids": [],
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
) -> dict[str, Any]:
    """The per-GPU view (module docstring): ``devices``, sorted by node then holder, and the
    ``nodes`` with what is held on each (GPU-equivalents, holdings, idle holdings).
    ``only``: the teams the caller may see."""
    allowed = set(only) if only is not None else None
    rows: list[tuple[dict[str, Any], Fraction]] = []
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
        training_row = _training_row(wl)
        if training_row is not None:
            rows.append(training_row)
    rows.sort(key=lambda rg: (rg[0]["node"] == "", rg[0]["node"], rg[0]["holder"]))
    nodes: dict[str, dict[str, Any]] = {}
    held: dict[str, Fraction] = {}
    for r, gpu_eq in rows:
        n = nodes.setdefault(r["node"], {"node": r["node"], "holdings": 0, "idle": 0, "pools": []})
        n["holdings"] += 1
        n["idle"] += r["state"] == State.IDLE.value
        n["pools"] = sorted({*n["pools"], *r["pool"]})
        held[r["node"]] = held.get(r["node"], Fraction(0)) + gpu_eq
    for name, n in nodes.items():
        n["gpu_equivalents"] = format_gpu_equivalents(held[name])
    return {
        "now": isoformat_z(now),
        "visible_teams": sorted(allowed) if allowed is not None else None,
        "nodes": list(nodes.values()),
        "devices": [r for r, _ in rows],
    }

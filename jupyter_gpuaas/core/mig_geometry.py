"""MIG geometries: which ones a GPU model allows, NVIDIA's named configs, and which config the
measured demand asks for (pure).

A GPU in MIG mode is cut into instances of fixed *profiles* (``1g.5gb``, ``3g.20gb``, ...): each
takes a number of the GPU's 7 compute slices and of its 8 memory slices, and each profile has a
most-instances-per-GPU. A *geometry* is the instances of one GPU (``2x1g.5gb+1x2g.10gb+1x3g.20gb``).
NVIDIA's MIG manager applies a geometry to a node from the node label ``nvidia.com/mig.config``,
which names a config of its mig-parted file; the names and geometries in :data:`CONFIGS` are
those of mig-parted's default file for the A100 40GB and the H100 80GB (``all-1g.5gb``,
``all-balanced``, ...: one name may mean a different geometry on each model).

:func:`plan` picks, from measured demand (how many instances of each profile servers asked for
recently or wait for), the named config whose geometry serves most of it, in compute slices:
a device plugin advertises each profile as its own resource (``nvidia.com/mig-<profile>``,
"mixed" strategy), so a request for one profile is served only by an instance of that profile.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from math import ceil
from typing import Any

from jupyter_gpuaas.core.kueue import as_mapping, as_str, pod_requests

__all__ = [
    "COMPUTE_SLICES",
    "CONFIGS",
    "MEMORY_SLICES",
    "MIG_CONFIG_LABEL",
    "MIG_CONFIG_STATE_LABEL",
    "MIG_RESOURCE_PREFIX",
    "MODELS",
    "Geometry",
    "NodeAdvice",
    "Plan",
    "Profile",
    "advice_text",
    "capacity",
    "compute_slices",
    "config_of",
    "format_geometry",
    "geometry_of",
    "model_of_product",
    "node_advice",
    "parse_geometry",
    "plan",
    "problems",
]

# The node label NVIDIA's MIG manager applies, and the one it reports its progress in
# (mig-parted deployments/gpu-operator/reconfigure-mig.sh: pending, rebooting, success, failed).
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"

COMPUTE_SLICES = 7
MEMORY_SLICES = 8

# One GPU's instances: (profile, count) pairs, sorted by profile size, no zero counts.
Geometry = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Profile:
    name: str  # as NVML and the device plugin name it, e.g. "1g.5gb"
    compute: int  # compute slices of the GPU's 7
    memory: int  # memory slices of the GPU's 8
    most: int  # most instances of it one GPU can hold


def _profiles(*rows: tuple[str, int, int, int]) -> dict[str, Profile]:
    return {name: Profile(name, c, m, n) for name, c, m, n in rows}


# NVIDIA's MIG user guide, "Supported MIG Profiles" (A100 40GB, H100 80GB).
MODELS: dict[str, dict[str, Profile]] = {
    "A100-40GB": _profiles(
        ("1g.5gb", 1, 1, 7),
        ("1g.10gb", 1, 2, 4),
        ("2g.10gb", 2, 2, 3),
        ("3g.20gb", 3, 4, 2),
        ("4g.20gb", 4, 4, 1),
        ("7g.40gb", 7, 8, 1),
    ),
    "H100-80GB": _profiles(
        ("1g.10gb", 1, 1, 7),
        ("1g.20gb", 1, 2, 4),
        ("2g.20gb", 2, 2, 3),
        ("3g.40gb", 3, 4, 2),
        ("4g.40gb", 4, 4, 1),
        ("7g.80gb", 7, 8, 1),
    ),
}


# mig-parted's default configs (deployments/systemd/config-default.yaml) for these models.
CONFIGS: dict[str, dict[str, Geometry]] = {
    "all-1g.5gb": {"A100-40GB": (("1g.5gb", 7),)},
    "all-1g.10gb": {"A100-40GB": (("1g.10gb", 4),), "H100-80GB": (("1g.10gb", 7),)},
    "all-1g.20gb": {"H100-80GB": (("1g.20gb", 4),)},
    "all-2g.10gb": {"A100-40GB": (("2g.10gb", 3),)},
    "all-2g.20gb": {"H100-80GB": (("2g.20gb", 3),)},
    "all-3g.20gb": {"A100-40GB": (("3g.20gb", 2),)},
    "all-3g.40gb": {"H100-80GB": (("3g.40gb", 2),)},
    "all-4g.20gb": {"A100-40GB": (("4g.20gb", 1),)},
    "all-4g.40gb": {"H100-80GB": (("4g.40gb", 1),)},
    "all-7g.40gb": {"A100-40GB": (("7g.40gb", 1),)},
    "all-7g.80gb": {"H100-80GB": (("7g.80gb", 1),)},
    "all-balanced": {
        "A100-40GB": (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)),
        "H100-80GB": (("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)),
    },
}

KNOWN_PROFILES = frozenset(p for profiles in MODELS.values() for p in profiles)
"""Every profile of a known model: a pod asking for another (``nvidia.com/mig-foo``) asks
for something no config here can give; its advice leaves it out and says so."""

_PRODUCT = re.compile(r"(A100|H100).*?(\d+)\s*GB", re.IGNORECASE)
_GROUP = re.compile(r"^(?:(\d+)x)?(\d+g\.\d+gb)$", re.IGNORECASE)


def _size(profile: str) -> tuple[int, str]:
    return int(profile.split("g.", 1)[0]), profile


def _normal(pairs: Iterable[tuple[str, int]]) -> Geometry:
    counts: dict[str, int] = {}
    for profile, n in pairs:
        counts[profile] = counts.get(profile, 0) + n
    return tuple(sorted(((p, n) for p, n in counts.items() if n), key=lambda pn: _size(pn[0])))


def model_of_product(product: str) -> str | None:
    """The model key (``A100-40GB``) of a GPU product name as NVML or GPU feature discovery
    writes it (``NVIDIA-A100-SXM4-40GB``, ``NVIDIA H100 80GB HBM3``); None if not one known."""
    match = _PRODUCT.search(product)
    if match is None:
        return None
    key = f"{match.group(1).upper()}-{match.group(2)}GB"
    return key if key in MODELS else None


def parse_geometry(text: str) -> Geometry:
    """A geometry from ``2x1g.5gb+1x3g.20gb`` (the ``mig=`` of a simulated-GPU spec)."""
    pairs: list[tuple[str, int]] = []
    for group in text.split("+"):
        match = _GROUP.fullmatch(group.strip())
        if match is None:
            raise ValueError(f"cannot read MIG geometry {text!r}: expected e.g. 2x1g.5gb+1x3g.20gb")
        pairs.append((match.group(2).lower(), int(match.group(1) or 1)))
    return _normal(pairs)


def format_geometry(geometry: Geometry) -> str:
    """``2x1g.5gb+1x3g.20gb``; ``none`` for a GPU without instances."""
    return "+".join(f"{n}x{p}" for p, n in geometry) or "none"


def problems(model: str, geometry: Geometry) -> list[str]:
    """Why ``geometry`` cannot be cut from one GPU of ``model`` (empty: it can). Counts slices
    and per-profile limits; NVIDIA's placement rules allow every geometry of :data:`CONFIGS`."""
    profiles = MODELS.get(model)
    if profiles is None:
        return [f"no MIG profiles known for {model} (known: {', '.join(MODELS)})"]
    out: list[str] = []
    compute = memory = 0
    for name, n in geometry:
        profile = profiles.get(name)
        if profile is None:
            out.append(f"{model} has no MIG profile {name} (it has {', '.join(profiles)})")
            continue
        if n > profile.most:
            out.append(f"{model} holds at most {profile.most} x {name}, not {n}")
        compute += profile.compute * n
        memory += profile.memory * n
    if compute > COMPUTE_SLICES:
        out.append(
            f"{format_geometry(geometry)} takes {compute} compute slices of {COMPUTE_SLICES}"
        )
    if memory > MEMORY_SLICES:
        out.append(f"{format_geometry(geometry)} takes {memory} memory slices of {MEMORY_SLICES}")
    return out


def compute_slices(model: str, geometry: Geometry) -> int:
    profiles = MODELS[model]
    return sum(profiles[p].compute * n for p, n in geometry if p in profiles)


def geometry_of(config: str, model: str) -> Geometry | None:
    """What named config ``config`` cuts one GPU of ``model`` into; None if it has no geometry
    for that model (mig-parted would leave such a GPU out, or refuse the config)."""
    return CONFIGS.get(config, {}).get(model)


def config_of(geometries: Mapping[str, Geometry]) -> str | None:
    """The named config that gives each model its geometry here (model -> geometry), if one does."""
    for name, per_model in CONFIGS.items():
        if all(per_model.get(model) == g for model, g in geometries.items()):
            return name
    return None


def capacity(config: str, gpus: Mapping[str, int]) -> dict[str, int] | None:
    """Instances of each profile that ``config`` gives GPUs ``gpus`` (model -> count); None
    when it has no geometry for one of the models."""
    out: dict[str, int] = {}
    for model, count in gpus.items():
        if count <= 0:
            continue
        geometry = geometry_of(config, model)
        if geometry is None:
            return None
        for profile, n in geometry:
            out[profile] = out.get(profile, 0) + n * count
    return out


@dataclass(frozen=True)
class Plan:
    """The config that serves most of the demand. ``config`` is None when no named config has
    a geometry for every model of the GPUs."""

    config: str | None
    capacity: dict[str, int]  # instances per profile under the config
    served: dict[str, int]  # of the demand, per profile
    unserved: dict[str, int]  # of the demand, per profile (no instance of that profile left)
    served_slices: int
    demand_slices: int

    @property
    def reason(self) -> str:
        if self.config is None:
            return "no named MIG config covers these GPUs"
        if not self.demand_slices:
            return "no measured demand for MIG slices"
        text = f"serves {self.served_slices} of {self.demand_slices} compute slices asked for"
        if self.unserved:
            text += " (not: " + ", ".join(f"{n}x{p}" for p, n in self.unserved.items()) + ")"
        return text


def _slices_of(profile: str) -> int:
    return _size(profile)[0]


def plan(demand: Mapping[str, int], gpus: Mapping[str, int], current: str | None = None) -> Plan:
    """The named config whose instances on ``gpus`` (model -> count of MIG GPUs) serve most of
    ``demand`` (profile -> instances asked for), counted in compute slices; on a tie the one
    serving more requests, then ``current`` (a reshape needs idle GPUs: do not advise one for
    nothing), then the first in :data:`CONFIGS`."""
    wanted = {p: n for p, n in demand.items() if n > 0}
    demand_slices = sum(_slices_of(p) * n for p, n in wanted.items())
    best: tuple[tuple[int, int, bool, int], Plan] | None = None
    for order, name in enumerate(CONFIGS):
        cap = capacity(name, gpus)
        if cap is None or not cap:
            continue
        served = {p: min(n, cap.get(p, 0)) for p, n in wanted.items()}
        served = {p: n for p, n in served.items() if n}
        unserved = {p: n - served.get(p, 0) for p, n in wanted.items() if n > served.get(p, 0)}
        slices = sum(_slices_of(p) * n for p, n in served.items())
        candidate = Plan(name, cap, served, unserved, slices, demand_slices)
        key = (slices, sum(served.values()), name == current, -order)
        if best is None or key > best[0]:
            best = (key, candidate)
    if best is None:
        return Plan(None, {}, {}, {p: n for p, n in wanted.items()}, 0, demand_slices)
    return best[1]


def advice_text(node: str, current: str | None, chosen: Plan) -> str:
    """One line for an operator: the node's config now, the advised one and how to apply it."""
    now = current or "no named config"
    if chosen.config is None or not chosen.demand_slices:
        return f"node {node}: {now} now; {chosen.reason}"
    if chosen.config == current:
        return f"node {node}: {now} now; demand suggests keeping it ({chosen.reason})"
    return (
        f"node {node}: {now} now; demand suggests {chosen.config} ({chosen.reason}); apply with "
        f"kubectl label node {node} {MIG_CONFIG_LABEL}={chosen.config} --overwrite"
    )


# --- a node's advice from the pods the service sees -------------------------------------------

MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
_MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"


@dataclass(frozen=True)
class NodeAdvice:
    """A MIG node's config now, the slices its pods hold or wait for, and the plan for them."""

    node: str
    model: str
    gpus: int  # MIG GPUs of the node
    current: str | None  # the node's nvidia.com/mig.config label
    demand: dict[str, int]
    plan: Plan
    ignored: tuple[str, ...] = ()
    """Profiles the node's pods asked for that no known model has (left out of ``demand``)."""

    @property
    def line(self) -> str:
        return advice_text(self.node, self.current, self.plan)


def _mig_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    return {
        name.removeprefix(MIG_RESOURCE_PREFIX): ceil(qty)
        for name, qty in pod_requests(pod).items()
        if name.startswith(MIG_RESOURCE_PREFIX) and qty > 0
    }


def _could_land(pod: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    """A pod on ``node`` that has not finished, or a pending one not yet on a node whose node
    selector the node matches (tolerations and affinity are not judged: this counts demand,
    not placement)."""
    spec, phase = as_mapping(pod.get("spec")), as_mapping(pod.get("status")).get("phase")
    if phase in ("Succeeded", "Failed"):
        return False
    if spec.get("nodeName"):
        return bool(spec["nodeName"] == node)
    selector = as_mapping(spec.get("nodeSelector"))
    return phase in (None, "Pending") and all(
        labels.get(str(k)) == str(v) for k, v in selector.items()
    )


def node_advice(node: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> NodeAdvice | None:
    """The advice for one Node object (None unless it is a MIG node, "mixed" strategy, of a
    model with known profiles): demand = the MIG slices of the pods on it that have not
    finished and of the pending pods that could land on it; its MIG GPUs = the fewest that
    hold the instances it advertises."""
    meta = as_mapping(node.get("metadata"))
    labels = {str(k): str(v) for k, v in as_mapping(meta.get("labels")).items()}
    model = model_of_product(labels.get(_GPU_PRODUCT_LABEL, ""))
    if model is None or labels.get(_MIG_STRATEGY_LABEL) != "mixed":
        return None
    name = as_str(meta.get("name"))
    allocatable = as_mapping(as_mapping(node.get("status")).get("allocatable"))
    profiles = MODELS[model]
    slices = sum(
        profiles[p].compute * int(str(n))
        for r, n in allocatable.items()
        if (p := str(r).removeprefix(MIG_RESOURCE_PREFIX)) in profiles and str(n).isdigit()
    )
    gpus = max(1, -(-slices // COMPUTE_SLICES))
    demand: dict[str, int] = {}
    ignored: set[str] = set()
    for pod in pods:
        if _could_land(pod, name, labels):
            for profile, n in _mig_requests(pod).items():
                if profile not in KNOWN_PROFILES:  # a typo or a profile of an unknown model
                    ignored.add(profile)
                    continue
                demand[profile] = demand.get(profile, 0) + n
    current = labels.get(MIG_CONFIG_LABEL)
    chosen = plan(demand, {model: gpus}, current)
    return NodeAdvice(name, model, gpus, current, demand, chosen, tuple(sorted(ignored)))

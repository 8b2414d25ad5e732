"""Which of the node's simulated GPUs a pod's containers get, as device plugins decide (pure).

The node agent's node has GPUs (a spec of :mod:`jupyter_gpuaas.gpu.spec`, from ``nodes.yaml``'s
``simulatedGpus``); Kubernetes has already checked the pod against the node's capacity. Like a
kubelet with its device plugins, the agent then picks devices for each container's extended
resources (``resources.limits``, else ``requests``) and passes them as those plugins do:

==============================  ==========================================  =====================
resource                        device                                      environment
==============================  ==========================================  =====================
``nvidia.com/gpu``              a whole GPU (sharing none, no MIG)          NVIDIA_VISIBLE_DEVICES
``nvidia.com/mig-<profile>``    a free MIG device of that profile           NVIDIA_VISIBLE_DEVICES
``nvidia.com/gpu.shared``       a replica of a time-sliced GPU              NVIDIA_VISIBLE_DEVICES
``nvidia.com/gpu`` with         a vGPU of a HAMi GPU: a memory cap          NVIDIA_VISIBLE_DEVICES,
``nvidia.com/gpumem`` (MiB),    (gpumem, else gpumem-percentage of the      CUDA_DEVICE_MEMORY_
``nvidia.com/gpumem-percentage`` GPU, else all of it) and a cores share     LIMIT_<i>, CUDA_DEVICE
or ``nvidia.com/gpucores`` (%)                                              _SM_LIMIT, ..._CACHE
==============================  ==========================================  =====================

A container without GPUs gets ``NVIDIA_VISIBLE_DEVICES=void`` (no GPU), as HAMi's webhook sets
``none`` for one. HAMi's resource names and units are those of its chart (charts/hami/values.yaml:
resourceName, resourceMem, resourceMemPercentage, resourceCores) and of its device plugin's
Allocate (limits in MiB as ``"<n>m"``, the cores of the first vGPU as CUDA_DEVICE_SM_LIMIT).

Replicas go to the least-used GPU with room. vGPUs go where HAMi's scheduler would put them
(it decides the GPU before the device plugin runs): only on GPUs of the types the pod's
``nvidia.com/use-gputype`` names (and not ``nvidia.com/nouse-gputype``), packed onto the fullest
card that fits (:func:`jupyter_gpuaas.core.packing.best_fit`; ``hami.io/gpu-scheduler-policy:
spread`` spreads instead), so whole cards stay free for whole-GPU work; a whole card (100 %
compute, all its memory) only on an empty one. When the vGPUs would fit an empty card but every
card has too little left, the pod waits (:class:`PlacementPending`). A container's vGPUs are on
distinct GPUs, as HAMi requires; init containers get no GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_gpuaas.core import mig_geometry, packing
from jupyter_gpuaas.gpu.hami import MEMORY_LIMIT, SHARED_CACHE, SM_LIMIT
from jupyter_gpuaas.gpu.spec import GiB, SimGpu, parse_devices

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
HAMI_RESOURCES = (HAMI_MEMORY, HAMI_MEMORY_PERCENT, HAMI_CORES)
# HAMi's pod annotations: which GPU types a pod's vGPUs may use, and its card policy.
USE_GPUTYPE = "nvidia.com/use-gputype"
NOUSE_GPUTYPE = "nvidia.com/nouse-gputype"
GPU_POLICY = "hami.io/gpu-scheduler-policy"
MiB = 1024**2

GrantKind = Literal["gpu", "mig", "replica", "vgpu"]


class AllocationError(Exception):
    """No devices for a request that Kubernetes admitted (kubelet: UnexpectedAdmissionError)."""


class PlacementPending(AllocationError):
    """HAMi vGPUs that an empty card of this node could hold, but every card now has too little
    left: the node's totals (what the scheduler and Kueue counted) are in pieces on cards that
    other pods hold. HAMi's scheduler keeps such a pod Pending until a card frees up."""


@dataclass(frozen=True)
class Grant:
    """One device handed to one container."""

    kind: GrantKind
    gpu: int  # index of the GPU on the node
    uuid: str  # what NVIDIA_VISIBLE_DEVICES names: the GPU's or the MIG device's UUID
    memory: int = 0  # a vGPU's cap, bytes
    cores: int = 0  # a vGPU's cores percentage (0: not limited)


@dataclass(frozen=True)
class ContainerDevices:
    container: str
    grants: tuple[Grant, ...] = ()

    def env(self, shared_cache: str) -> dict[str, str]:
        """The device plugins' environment for the container (``shared_cache``: the file
        HAMi-core keeps the container's usage in, when it has vGPUs)."""
        uuids = list(dict.fromkeys(g.uuid for g in sorted(self.grants, key=_order)))
        env = {"NVIDIA_VISIBLE_DEVICES": ",".join(uuids) or "void"}
        vgpus = sorted((g for g in self.grants if g.kind == "vgpu"), key=_order)
        if vgpus:
            # Index i is the i-th GPU the container sees: they are listed in the node's order.
            for i, grant in enumerate(vgpus):
                env[f"{MEMORY_LIMIT}_{i}"] = f"{grant.memory // MiB}m"
            env[SM_LIMIT] = str(vgpus[0].cores)
            env[SHARED_CACHE] = shared_cache
        return env


def _order(grant: Grant) -> tuple[int, str]:
    return grant.gpu, grant.uuid


def _quantity(value: Any, what: str) -> int:
    text = str(value).strip()
    if not text.isdigit():
        raise AllocationError(f"{what} must be a whole number, not {value!r}")
    return int(text)


def requests_of(container: Mapping[str, Any]) -> dict[str, int]:
    """The container's nvidia.com/* extended resources (limits, else requests), as counts."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("requests") or {}), **(resources.get("limits") or {})}
    return {
        name: _quantity(value, f"{container.get('name')}: {name}")
        for name, value in merged.items()
        if str(name).startswith("nvidia.com/")
    }


@dataclass
class _Usage:
    """What is handed out on the node: exclusive devices, slots and vGPU totals per GPU."""

    taken: set[str]
    slots: dict[int, int]
    memory: dict[int, int]
    cores: dict[int, int]

    @classmethod
    def of(cls, grants: Iterable[Grant]) -> _Usage:
        usage = cls(set(), {}, {}, {})
        for g in grants:
            usage.add(g)
        return usage

    def card(self, gpu: SimGpu, cores: int) -> packing.Card:
        """The GPU as the packing decision sees it (memory in MiB)."""
        return packing.Card(
            index=gpu.index,
            memory=gpu.memory // MiB,
            slots=gpu.slots,
            used_memory=self.memory.get(gpu.index, 0) // MiB,
            used_cores=self.cores.get(gpu.index, 0),
            used_slots=self.slots.get(gpu.index, 0),
            model=gpu.name,
        )

    def add(self, g: Grant) -> None:
        if g.kind in ("gpu", "mig"):
            self.taken.add(g.uuid)
        else:
            self.slots[g.gpu] = self.slots.get(g.gpu, 0) + 1
            self.memory[g.gpu] = self.memory.get(g.gpu, 0) + g.memory
            self.cores[g.gpu] = self.cores.get(g.gpu, 0) + g.cores


@dataclass(frozen=True)
class _CardChoice:
    """What the pod's HAMi annotations allow: GPU types (``nvidia.com/use-gputype``,
    ``nvidia.com/nouse-gputype``: comma-separated, matched within the model name, ignoring case)
    and the card policy (``hami.io/gpu-scheduler-policy``: binpack, the default here, or spread)."""

    use: tuple[str, ...] = ()
    nouse: tuple[str, ...] = ()
    policy: packing.Policy = "binpack"

    @classmethod
    def of(cls, pod: Mapping[str, Any]) -> _CardChoice:
        notes = (pod.get("metadata") or {}).get("annotations") or {}

        def types(key: str) -> tuple[str, ...]:
            return tuple(t.strip().upper() for t in str(notes.get(key, "")).split(",") if t.strip())

        spread = str(notes.get(GPU_POLICY, "")).strip() == "spread"
        return cls(types(USE_GPUTYPE), types(NOUSE_GPUTYPE), "spread" if spread else "binpack")

    def allows(self, gpu: SimGpu) -> bool:
        name = gpu.name.upper()
        if self.use and not any(t in name for t in self.use):
            return False
        return not any(t in name for t in self.nouse)


def allocate(
    gpus: Sequence[SimGpu], held: Iterable[Grant], pod: Mapping[str, Any]
) -> dict[str, ContainerDevices]:
    """Devices for each of the pod's (app) containers, given what other pods hold; raises
    AllocationError naming the container and what is missing (PlacementPending when HAMi
    vGPUs would fit a card that others' work holds, and may fit later)."""
    usage = _Usage.of(held)
    choice = _CardChoice.of(pod)
    out: dict[str, ContainerDevices] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        name = str(container.get("name"))
        grants = _container_grants(gpus, usage, name, requests_of(container), choice)
        for g in grants:
            usage.add(g)
        out[name] = ContainerDevices(name, tuple(grants))
    return out


def _container_grants(
    gpus: Sequence[SimGpu], usage: _Usage, name: str, req: Mapping[str, int], choice: _CardChoice
) -> list[Grant]:
    grants: list[Grant] = []
    hami = any(r in req for r in HAMI_RESOURCES)
    if hami and not req.get(GPU):
        raise AllocationError(
            f"container {name}: {', '.join(r for r in HAMI_RESOURCES if r in req)} without "
            f"{GPU}: HAMi caps vGPUs, so ask for {GPU}: 1 as well"
        )
    for resource, count in sorted(req.items()):
        if count == 0 or resource in HAMI_RESOURCES:
            continue
        if resource == GPU and hami:
            grants += _vgpus(gpus, usage, name, count, req, choice)
        elif resource == GPU:
            grants += _exclusive(
                name,
                resource,
                count,
                [
                    Grant("gpu", g.index, g.uuid)
                    for g in gpus
                    if g.sharing == "none" and not g.mig and g.uuid not in usage.taken
                ],
            )
        elif resource.startswith(MIG_PREFIX):
            profile = resource.removeprefix(MIG_PREFIX)
            free = [
                Grant("mig", g.index, m.uuid)
                for g in gpus
                for m in g.mig
                if m.profile == profile and m.uuid not in usage.taken
            ]
            grants += _exclusive(name, resource, count, free)
        elif resource == SHARED:
            grants += _replicas(gpus, usage, name, count)
        # Other nvidia.com/* resources are not GPUs this simulation hands out.
    return grants


def _exclusive(name: str, resource: str, count: int, free: list[Grant]) -> list[Grant]:
    if len(free) < count:
        raise AllocationError(
            f"container {name}: {resource}: {count} requested, {len(free)} free on this node "
            "(the node's capacity in nodes.yaml promises more than its simulatedGpus have)"
        )
    return free[:count]


def _replicas(gpus: Sequence[SimGpu], usage: _Usage, name: str, count: int) -> list[Grant]:
    grants: list[Grant] = []
    local = _Usage(set(), dict(usage.slots), {}, {})
    for _ in range(count):
        room = [
            g for g in gpus if g.sharing == "time-slicing" and local.slots.get(g.index, 0) < g.slots
        ]
        if not room:
            raise AllocationError(
                f"container {name}: {SHARED}: {count} requested, no time-sliced GPU on this "
                "node has a free replica"
            )
        gpu = min(room, key=lambda g: (local.slots.get(g.index, 0), g.index))
        grant = Grant("replica", gpu.index, gpu.uuid)
        local.add(grant)
        grants.append(grant)
    return grants


def _vgpus(
    gpus: Sequence[SimGpu],
    usage: _Usage,
    name: str,
    count: int,
    req: Mapping[str, int],
    choice: _CardChoice,
) -> list[Grant]:
    cores = req.get(HAMI_CORES, 0)
    if cores > 100:
        raise AllocationError(f"container {name}: {HAMI_CORES} is a percentage, not {cores}")
    grants: list[Grant] = []
    for _ in range(count):
        candidates = [
            g
            for g in gpus
            if g.sharing == "hami" and choice.allows(g) and all(x.gpu != g.index for x in grants)
        ]
        cards = [usage.card(g, cores) for g in candidates]
        share = packing.Share(_vgpu_memory_mib(req, cores, candidates), cores)
        card = packing.best_fit(cards, share, choice.policy)
        if card is None:
            what = (
                f"container {name}: {count} HAMi vGPU(s) of {_vgpu_text(req)} requested; no "
                "further HAMi GPU on this node has a free vGPU with that much memory and compute"
            )
            if any(packing.fits_empty(c, share) for c in cards):
                # Kubernetes (and Kueue) counted the node's totals; the room is in pieces.
                raise PlacementPending(f"{what}: {packing.explain_no_fit(cards, share)}")
            raise AllocationError(what)
        gpu = next(g for g in candidates if g.index == card.index)
        grants.append(Grant("vgpu", gpu.index, gpu.uuid, memory=share.memory * MiB, cores=cores))
    return grants


def _vgpu_memory_mib(req: Mapping[str, int], cores: int, gpus: Sequence[SimGpu]) -> int:
    """The vGPU's cap in MiB; 0 for "the card's memory" (no gpumem: a percentage of each card,
    decided per card below). A whole card (100 % compute, no size) is all of its memory."""
    if req.get(HAMI_MEMORY):
        return req[HAMI_MEMORY]
    percent = min(req.get(HAMI_MEMORY_PERCENT) or 100, 100)
    # HAMi sizes a percentage per card; here the smallest card's, so that it fits on any of them.
    return min((g.memory // MiB * percent // 100 for g in gpus), default=0)


def _vgpu_text(req: Mapping[str, int]) -> str:
    parts = [f"{r.removeprefix('nvidia.com/')}={req[r]}" for r in HAMI_RESOURCES if r in req]
    return ", ".join(parts)


def capacity(gpus: Sequence[SimGpu]) -> dict[str, int]:
    """The node's extended resources as the device plugins would advertise them (HAMi's
    vGPUs count in nvidia.com/gpu, as its device plugin registers them)."""
    out: dict[str, int] = {}

    def add(resource: str, n: int) -> None:
        out[resource] = out.get(resource, 0) + n

    for g in gpus:
        if g.mig:
            for m in g.mig:
                add(MIG_PREFIX + m.profile, 1)
        elif g.sharing == "time-slicing":
            add(SHARED, g.slots)
        elif g.sharing == "hami":
            add(GPU, g.slots)
        else:
            add(GPU, 1)
    return out


# --- MIG geometry (the node label nvidia.com/mig.config, applied as NVIDIA's MIG manager does) ---


class MigConfigError(ValueError):
    """A MIG config this node cannot apply (unknown name, no geometry for one of its models)."""


def mig_model(gpu: SimGpu) -> str:
    """The model key of :mod:`jupyter_gpuaas.core.mig_geometry` (``A100-40GB``)."""
    return f"{gpu.model.upper()}-{gpu.memory // GiB}GB"


def reshape(boot_spec: str, config: str | None) -> str:
    """The node's GPUs with its MIG-mode GPUs (the groups of ``boot_spec`` with ``mig=``) cut as
    the named ``config`` cuts their model; ``None`` (no label): ``boot_spec`` as it is. The
    other GPUs stay as they are, as with a mig-parted config that lists only these devices."""
    if config is None:
        return boot_spec
    if config not in mig_geometry.CONFIGS:
        raise MigConfigError(
            f"{mig_geometry.MIG_CONFIG_LABEL}={config} names no config this node knows "
            f"(known: {', '.join(mig_geometry.CONFIGS)})"
        )
    groups: list[str] = []
    for group in (g.strip() for g in boot_spec.split(",") if g.strip()):
        head, *options = group.split(":")
        if not any(o.startswith("mig=") for o in options):
            groups.append(group)
            continue
        model = mig_model(parse_devices(group)[0])
        geometry = mig_geometry.geometry_of(config, model)
        if geometry is None:
            raise MigConfigError(f"config {config} has no MIG geometry for this node's {model}")
        wrong = mig_geometry.problems(model, geometry)
        if wrong:
            raise MigConfigError(f"config {config} on {model}: {'; '.join(wrong)}")
        options = [
            f"mig={mig_geometry.format_geometry(geometry)}" if o.startswith("mig=") else o
            for o in options
        ]
        groups.append(":".join([head, *options]))
    return ",".join(groups)


def mig_config_of(gpus: Sequence[SimGpu]) -> str | None:
    """The named config the node's MIG-mode GPUs are cut as, if one names them all."""
    geometries: dict[str, mig_geometry.Geometry] = {}
    for g in gpus:
        if g.mig:
            geometry = mig_geometry.parse_geometry("+".join(m.profile for m in g.mig))
            if geometries.setdefault(mig_model(g), geometry) != geometry:
                return None
    return mig_geometry.config_of(geometries) if geometries else None

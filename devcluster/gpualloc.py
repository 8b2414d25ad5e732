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

Replicas go to the least-used GPU with room. HAMi's vGPUs go where HAMi's scheduler put them
(devcluster/hamischeduler.py decides the cards before the pod is bound): its device plugin reads
the pod's ``hami.io/vgpu-devices-to-allocate`` (per container ``UUID,NVIDIA,MiB,cores:``) and
hands each container those cards with those limits (``pkg/device-plugin/nvidiadevice/nvinternal/
plugin/server.go`` ``Allocate``); a pod with HAMi resources but no such record was not placed by
HAMi's scheduler, and Allocate fails. Init containers get no GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jupyter_gpuaas.core import hami, mig_geometry
from jupyter_gpuaas.gpu.hami import MEMORY_LIMIT, SHARED_CACHE, SM_LIMIT
from jupyter_gpuaas.gpu.spec import GiB, SimGpu, parse_devices

GPU = "nvidia.com/gpu"
SHARED = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"
HAMI_MEMORY = "nvidia.com/gpumem"
HAMI_MEMORY_PERCENT = "nvidia.com/gpumem-percentage"
HAMI_CORES = "nvidia.com/gpucores"
HAMI_RESOURCES = (HAMI_MEMORY, HAMI_MEMORY_PERCENT, HAMI_CORES)
MiB = 1024**2

GrantKind = Literal["gpu", "mig", "replica", "vgpu"]


class AllocationError(Exception):
    """No devices for a request that Kubernetes admitted (kubelet: UnexpectedAdmissionError)."""


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

    def add(self, g: Grant) -> None:
        if g.kind in ("gpu", "mig"):
            self.taken.add(g.uuid)
        else:
            self.slots[g.gpu] = self.slots.get(g.gpu, 0) + 1
            self.memory[g.gpu] = self.memory.get(g.gpu, 0) + g.memory
            self.cores[g.gpu] = self.cores.get(g.gpu, 0) + g.cores


def allocate(
    gpus: Sequence[SimGpu], held: Iterable[Grant], pod: Mapping[str, Any]
) -> dict[str, ContainerDevices]:
    """Devices for each of the pod's (app) containers, given what other pods hold (HAMi's
    vGPUs: where HAMi's scheduler put them); raises AllocationError naming the container and
    what is missing."""
    usage = _Usage.of(held)
    spec = pod.get("spec") or {}
    notes = (pod.get("metadata") or {}).get("annotations") or {}
    chosen = hami.decode_pod_devices(
        str(notes.get(hami.TO_ALLOCATE) or notes.get(hami.ALLOCATED) or "")
    )
    # HAMi lists the init containers first: the app containers' entries follow theirs.
    chosen = chosen[len(spec.get("initContainers") or []) :]
    out: dict[str, ContainerDevices] = {}
    for i, container in enumerate(spec.get("containers") or []):
        name = str(container.get("name"))
        placed = chosen[i] if i < len(chosen) else None
        grants = _container_grants(gpus, usage, name, requests_of(container), placed)
        for g in grants:
            usage.add(g)
        out[name] = ContainerDevices(name, tuple(grants))
    return out


def _container_grants(
    gpus: Sequence[SimGpu],
    usage: _Usage,
    name: str,
    req: Mapping[str, int],
    placed: Sequence[hami.CardUse] | None,
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
            grants += _vgpus(gpus, name, count, placed)
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
    gpus: Sequence[SimGpu], name: str, count: int, placed: Sequence[hami.CardUse] | None
) -> list[Grant]:
    """The container's vGPUs on the cards HAMi's scheduler chose, with the limits it chose."""
    if placed is None:
        raise AllocationError(
            f"container {name}: {count} HAMi vGPU(s) requested, but the pod has no "
            f"{hami.TO_ALLOCATE} for it: it was not placed by HAMi's scheduler "
            f"(schedulerName {hami.SCHEDULER_NAME})"
        )
    if len(placed) != count:
        raise AllocationError(
            f"container {name}: device number not matched ({count} requested, "
            f"{len(placed)} in {hami.TO_ALLOCATE})"
        )
    by_uuid = {g.uuid: g for g in gpus if g.sharing == "hami"}
    grants = []
    for use in placed:
        gpu = by_uuid.get(use.uuid)
        if gpu is None:
            raise AllocationError(
                f"container {name}: {hami.TO_ALLOCATE} names {use.uuid}, "
                "not a HAMi GPU of this node"
            )
        grants.append(Grant("vgpu", gpu.index, gpu.uuid, memory=use.memory * MiB, cores=use.cores))
    return grants


def hami_cards(gpus: Sequence[SimGpu]) -> list[hami.RegisteredCard]:
    """The node's HAMi GPUs as HAMi's device plugin registers them (its NVML name as type,
    ``deviceSplitCount`` slots, all memory in MiB, 100 % cores, healthy)."""
    return [
        hami.RegisteredCard(
            uuid=g.uuid,
            index=g.index,
            count=g.slots,
            memory=g.memory // MiB,
            cores=100,
            type=g.name if g.name.startswith("NVIDIA") else f"NVIDIA-{g.name}",
        )
        for g in gpus
        if g.sharing == "hami"
    ]


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

"""The admin catalog: GPU offerings, images, sizes and tenants (teams).

The catalog comes from traitlets on ``GPUaaSSpawner`` and/or a YAML file. :func:`build_catalog`
checks all of it at once and raises :class:`CatalogError` listing *every* problem with its
field path (``GPUaaSSpawner.offerings[2].resources["nvidia.com/gpu"]: ...``), so an admin fixes
a catalog in one round instead of one error per hub restart.

Shape of one source (traitlet values or the YAML file)::

    images:    [{slug, display_name, image, description}]
    sizes:     [{slug, display_name, description, cpu_guarantee, cpu_limit,
                 mem_guarantee, mem_limit}]
    offerings: [{slug, display_name, description, kind, resources, flavor, node_selector,
                 tolerations, gpu_model, gpu_memory, gpu_equivalents, isolation, shm_size,
                 min_count, max_count, default_count, images, sizes, default_image,
                 default_size, cpu_guarantee, cpu_limit, mem_guarantee, mem_limit,
                 memory_cap, cores_percent, scheduler_name, pod_annotations}]
    tenants:   [{name, display_name, groups, namespace, local_queue, cluster_queue,
                 offerings, default_offering, max_gpu_servers_per_user, max_gpus_per_user,
                 max_queued, priority_class, jobs}]
    jobs (of a tenant, optional: its notebooks as training Jobs, docs/jobs.md):
               {namespace, local_queue, offerings, priority_class, max_per_user, max_per_team,
                default_time_limit, max_time_limit}
    resource_transformations: [{input, strategy, multiplyBy, outputs}]

A ``fraction`` offering is a memory-capped share of one GPU as HAMi serves it (docs/fractions.md):
its pod asks for one vGPU (``nvidia.com/gpu``), ``memory_cap`` as ``nvidia.com/gpumem`` (MiB)
and ``cores_percent`` as ``nvidia.com/gpucores``. ``resource_transformations`` are Kueue's
(``Configuration.resources.transformations``, written the same way): the hub and the service
read them here, so that the form's headroom counts what Kueue counts; the same list must be in
Kueue's Configuration (the dev cluster renders it from the demo catalog).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from fractions import Fraction
from typing import Any, Literal, TypeVar

from jupyter_gpuaas.core.fields import (
    DNS_SUBDOMAIN_RE,
    LABEL_VALUE_RE,
    SLUG_RE,
    FieldError,
    FieldErrors,
    did_you_mean,
    is_qualified_name,
    key_path,
    read_duration,
    read_entries,
    read_int,
    read_mapping,
    read_number,
    read_str,
    read_str_list,
    type_name,
    unknown_keys,
)
from jupyter_gpuaas.core.kueue import (
    QuantityError,
    ResourceTransformation,
    parse_quantity,
    transform_requests,
)
from jupyter_gpuaas.core.parsing import ParseError, read_yaml_file

__all__ = [
    "GPU_KINDS",
    "HAMI_CORES",
    "HAMI_MEMORY",
    "HAMI_VGPU",
    "KINDS",
    "Catalog",
    "CatalogError",
    "CatalogSource",
    "Image",
    "Offering",
    "Size",
    "Tenant",
    "TenantJobs",
    "build_catalog",
    "load_catalog_file",
]

Kind = Literal["gpu", "mig", "shared", "fraction", "cpu"]
KINDS: tuple[Kind, ...] = ("gpu", "mig", "shared", "fraction", "cpu")
GPU_KINDS: frozenset[str] = frozenset({"gpu", "mig", "shared", "fraction"})
ISOLATIONS = ("hardware", "memory-limited", "none")

# HAMi's resource names (charts/hami/values.yaml: resourceName, resourceMem, resourceCores).
HAMI_VGPU = "nvidia.com/gpu"
"""vGPUs: slots of a physical GPU (``deviceSplitCount`` per GPU); each vGPU is on its own GPU."""
HAMI_MEMORY = "nvidia.com/gpumem"
"""Device memory per vGPU, in MiB: a hard cap HAMi-core enforces inside the container."""
HAMI_CORES = "nvidia.com/gpucores"
"""Compute per vGPU, in percent of one GPU (0-100): a throttle, not an isolation."""
_PER_VGPU = (HAMI_MEMORY, HAMI_CORES)
_STRATEGIES = ("Retain", "Replace")
_TRANSFORMATION_KEYS = ("input", "strategy", "multiplyBy", "outputs")

_TOLERATION_KEYS = {"key", "operator", "value", "effect", "tolerationSeconds"}
_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
_DEFAULT_SHM = "1Gi"
_DEFAULT_UNITS: dict[str, tuple[str, str]] = {
    "gpu": ("GPU", "GPUs"),
    "mig": ("MIG slice", "MIG slices"),
    "shared": ("GPU share", "GPU shares"),
    "fraction": ("GPU fraction", "GPU fractions"),
    "cpu": ("server", "servers"),
}


# --------------------------------------------------------------------------- model


class CatalogError(ValueError):
    """The catalog is invalid; ``errors`` holds every problem with its field path."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        lines = "\n".join(f"  - {e}" for e in self.errors)
        super().__init__(f"invalid GPU catalog ({len(self.errors)} problem(s)):\n{lines}")


@dataclass(frozen=True)
class Image:
    slug: str
    display_name: str
    image: str
    description: str = ""


@dataclass(frozen=True)
class Size:
    """A CPU/memory choice, in KubeSpawner's terms (cores as floats, memory as quantities)."""

    slug: str
    display_name: str
    description: str = ""
    cpu_guarantee: float | None = None
    cpu_limit: float | None = None
    mem_guarantee: str | None = None
    mem_limit: str | None = None


@dataclass(frozen=True)
class Offering:
    """One GPU choice (see ARCHITECTURE.md, "Offering").

    ``resources`` is what *one unit* requests (``count`` multiplies it);
    ``gpu_equivalents`` is the size of one unit in whole GPUs (MIG 1g.10gb on an H100: 1/7).
    """

    slug: str
    display_name: str
    kind: Kind
    resources: Mapping[str, int] = field(default_factory=dict)
    flavor: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    description: str = ""
    gpu_model: str = ""
    gpu_memory: str | None = None
    gpu_equivalents: Fraction = Fraction(0)
    isolation: str = "none"
    shm_size: str | None = None
    min_count: int = 1
    max_count: int = 1
    default_count: int = 1
    images: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()
    default_image: str | None = None
    default_size: str | None = None
    cpu_guarantee: float | None = None
    cpu_limit: float | None = None
    mem_guarantee: str | None = None
    mem_limit: str | None = None
    unit: str = "GPU"
    units: str = "GPUs"
    memory_cap: str | None = None
    """A fraction's hard memory limit (``nvidia.com/gpumem``), e.g. ``"5632Mi"``."""
    cores_percent: int | None = None
    """A fraction's share of the GPU's compute (``nvidia.com/gpucores``), 1-100."""
    scheduler_name: str | None = None
    """``spec.schedulerName`` of its pods (HAMi: ``hami-scheduler``), else the cluster's."""
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    """Annotations its pods carry (HAMi: ``nvidia.com/use-gputype: L4``, ...)."""
    transformations: tuple[ResourceTransformation, ...] = ()
    """The catalog's ``resource_transformations`` (Kueue's), applied by :meth:`quota_requests`."""

    @property
    def is_gpu(self) -> bool:
        return self.kind in GPU_KINDS

    def requests(self, count: int) -> dict[str, int]:
        """Extended resources of the pod for ``count`` units (requests = limits).

        A fraction's ``count`` is its number of vGPUs; HAMi's memory and cores are per vGPU
        and so stay as they are.
        """
        return {
            name: qty if self.kind == "fraction" and name in _PER_VGPU else qty * count
            for name, qty in self.resources.items()
        }

    def quota_requests(self, count: int) -> dict[str, int]:
        """What Kueue counts for ``count`` units: :meth:`requests` after the transformations
        (a quarter L4: ``nvidia.com/gpu: 1``, ``nvidia.com/total-gpumem: 5632``, ...)."""
        counted = transform_requests(
            {k: Fraction(v) for k, v in self.requests(count).items()}, self.transformations
        )
        return {k: -(-v.numerator // v.denominator) for k, v in counted.items()}

    @property
    def memory_quota_resource(self) -> tuple[str, Fraction] | None:
        """For a fraction, the resource Kueue keeps its memory quota in and the factor from
        MiB (``("nvidia.com/total-gpumem", 1)``), from the transformation of ``gpumem``."""
        if self.kind != "fraction":
            return None
        for t in self.transformations:
            if t.input == HAMI_MEMORY and len(t.outputs) == 1:
                name, factor = next(iter(t.outputs.items()))
                return name, factor
        return None

    def gpu_equivalents_for(self, count: int) -> Fraction:
        return self.gpu_equivalents * count

    @property
    def isolation_text(self) -> str:
        if self.kind == "cpu":
            return "no GPU"
        if self.kind == "gpu":
            return "whole GPU, not shared with anyone"
        if self.kind == "mig":
            return "hardware-isolated MIG slice"
        if self.kind == "fraction":
            return "memory-limited, no fault isolation; a cap against accidents, not a hard limit"
        if self.isolation == "memory-limited":
            return "shared GPU, memory-limited (no fault isolation)"
        return "time-shared, no memory isolation"


@dataclass(frozen=True)
class Tenant:
    """A team: JupyterHub groups → a LocalQueue, its offerings and per-user caps."""

    name: str
    display_name: str
    groups: tuple[str, ...]
    local_queue: str
    offerings: tuple[str, ...]
    default_offering: str
    namespace: str | None = None
    cluster_queue: str | None = None
    max_gpu_servers_per_user: int | None = None
    max_gpus_per_user: Fraction | None = None
    max_queued: int | None = None
    priority_class: str | None = None
    jobs: TenantJobs | None = None


@dataclass(frozen=True)
class TenantJobs:
    """Where a team's notebooks run as training Jobs, and its caps (docs/jobs.md).

    ``max_per_user`` / ``max_per_team``: Jobs queued or running at once (``None``: no cap);
    time limits in seconds (``None``: none)."""

    namespace: str
    local_queue: str
    offerings: tuple[str, ...]
    priority_class: str | None = None
    max_per_user: int | None = None
    max_per_team: int | None = None
    default_time_limit: int | None = None
    max_time_limit: int | None = None


@dataclass(frozen=True)
class Catalog:
    offerings: Mapping[str, Offering]
    tenants: Mapping[str, Tenant]
    images: Mapping[str, Image] = field(default_factory=dict)
    sizes: Mapping[str, Size] = field(default_factory=dict)
    transformations: tuple[ResourceTransformation, ...] = ()
    """Kueue's resource transformations, as the catalog's ``resource_transformations``."""

    def tenants_for_groups(self, groups: Iterable[str]) -> list[Tenant]:
        """The tenants a user belongs to, in catalog order."""
        mine = set(groups)
        return [t for t in self.tenants.values() if mine.intersection(t.groups)]

    def images_for(self, offering: Offering) -> list[Image]:
        slugs = offering.images or tuple(self.images)
        return [self.images[s] for s in slugs if s in self.images]

    def sizes_for(self, offering: Offering) -> list[Size]:
        slugs = offering.sizes or tuple(self.sizes)
        return [self.sizes[s] for s in slugs if s in self.sizes]

    def default_image_for(self, offering: Offering) -> Image | None:
        images = self.images_for(offering)
        if offering.default_image and offering.default_image in self.images:
            return self.images[offering.default_image]
        return images[0] if images else None

    def default_size_for(self, offering: Offering) -> Size | None:
        sizes = self.sizes_for(offering)
        if offering.default_size and offering.default_size in self.sizes:
            return self.sizes[offering.default_size]
        return sizes[0] if sizes else None


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class CatalogSource:
    """One place the catalog is configured: ``origin`` prefixes every error path.

    e.g. ``CatalogSource("GPUaaSSpawner.", {"offerings": [...]})`` gives paths like
    ``GPUaaSSpawner.offerings[0].kind``; a file gives ``/etc/gpuaas/catalog.yaml: offerings[0]``.
    """

    origin: str
    data: Mapping[str, Any]


def load_catalog_file(path: str) -> CatalogSource:
    """Read a YAML catalog file (plain data only, within bounds: core/parsing.py)."""
    origin = f"{path}: "
    try:
        data = read_yaml_file(path)
    except OSError as e:
        raise CatalogError([FieldError(path, f"cannot read the catalog file: {e.strerror}")]) from e
    except ParseError as e:
        raise CatalogError([FieldError(e.path, e.message)]) from None
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise CatalogError([FieldError(path, "the file must hold a mapping with 'offerings', ...")])
    return CatalogSource(origin=origin, data=data)


def _fraction(errs: FieldErrors, path: str, data: Mapping[str, Any], key: str) -> Fraction | None:
    """A non-negative number given as ``1``, ``0.25`` or ``"1/7"``."""
    p = key_path(path, key)
    if key not in data or data[key] is None:
        return None
    value = data[key]
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float):
            if not math.isfinite(value):  # YAML's .nan and .inf
                errs.add(p, f"must be a finite number, not {value!r}")
                return None
            result = Fraction(value).limit_denominator(1000)
        elif isinstance(value, int | str):
            result = Fraction(value)
        else:
            raise ValueError
    except (ValueError, ZeroDivisionError, OverflowError):
        errs.add(p, f'must be a number such as 1, 0.25 or "1/7", not {value!r}')
        return None
    if result < 0:
        errs.add(p, f"must not be negative, not {value!r}")
        return None
    return result


def _memory(errs: FieldErrors, path: str, data: Mapping[str, Any], key: str) -> str | None:
    p = key_path(path, key)
    if key not in data or data[key] is None:
        return None
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, str | int):
        errs.add(p, f'must be a size such as "8Gi", not {value!r}')
        return None
    try:
        amount = parse_quantity(value)
    except QuantityError:
        errs.add(p, f'{value!r} is not a size such as "8Gi" or "512Mi"')
        return None
    if amount <= 0:
        errs.add(p, f"must be more than 0, not {value!r}")
        return None
    return str(value)


def _resources(errs: FieldErrors, path: str, data: Mapping[str, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p, name, qty in read_entries(errs, path, data, "resources"):
        if not isinstance(name, str) or not is_qualified_name(name) or "/" not in name:
            errs.add(p, "must be an extended resource name such as nvidia.com/gpu")
            continue
        if name in ("cpu", "memory") or name.startswith(("requests.", "limits.")):
            errs.add(p, "CPU and memory come from sizes or cpu_*/mem_* fields, not resources")
            continue
        if isinstance(qty, bool) or not isinstance(qty, int) or qty < 1:
            errs.add(p, f"must be a whole number of at least 1 (per unit), not {qty!r}")
            continue
        out[name] = qty
    return out


def _node_selector(errs: FieldErrors, path: str, data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p, key, value in read_entries(errs, path, data, "node_selector"):
        if not isinstance(key, str) or not is_qualified_name(key):
            errs.add(p, "is not a valid node label key")
        elif not isinstance(value, str) or not LABEL_VALUE_RE.fullmatch(value):
            errs.add(p, f"{value!r} is not a valid node label value")
        else:
            out[key] = value
    return out


def _tolerations(
    errs: FieldErrors, path: str, data: Mapping[str, Any]
) -> tuple[dict[str, Any], ...]:
    if "tolerations" not in data or data["tolerations"] is None:
        return ()
    raw = data["tolerations"]
    base = key_path(path, "tolerations")
    if not isinstance(raw, list):
        errs.add(base, "must be a list of Kubernetes tolerations")
        return ()
    out: list[dict[str, Any]] = []
    for i, tol in enumerate(raw):
        p = f"{base}[{i}]"
        if not isinstance(tol, Mapping):
            errs.add(p, "must be a mapping such as {key: nvidia.com/gpu, operator: Exists}")
            continue
        before = len(errs.items)
        _check_toleration(errs, p, tol)
        if len(errs.items) == before:
            out.append(dict(tol))
    return tuple(out)


def _check_toleration(errs: FieldErrors, p: str, tol: Mapping[str, Any]) -> None:
    """One toleration, checked as the API server checks it."""
    unknown_keys(errs, p, tol, _TOLERATION_KEYS)
    operator = tol.get("operator", "Equal")
    if operator not in ("Equal", "Exists"):
        errs.add(f"{p}.operator", f"must be Equal or Exists, not {operator!r}")
    key = tol.get("key", "")
    if not isinstance(key, str) or (key and not is_qualified_name(key)):
        errs.add(f"{p}.key", f"{key!r} is not a valid taint key")
    elif not key and operator != "Exists":
        errs.add(f"{p}.key", "an empty key needs operator Exists")
    value = tol.get("value", "")
    if not isinstance(value, str) or (operator == "Exists" and value):
        errs.add(f"{p}.value", "must be a string, and empty with operator Exists")
    if tol.get("effect", "") not in _EFFECTS:
        errs.add(f"{p}.effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute")
    seconds = tol.get("tolerationSeconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)):
        errs.add(f"{p}.tolerationSeconds", "must be a whole number of seconds")


def _list_of_mappings(
    errs: FieldErrors, origin: str, data: Mapping[str, Any], key: str
) -> list[tuple[str, Any]]:
    """Items of a top-level list with their paths (items not checked yet)."""
    if key not in data or data[key] is None:
        return []
    raw = data[key]
    if not isinstance(raw, list):
        errs.add(f"{origin}{key}", f"must be a list, not {type_name(raw)}")
        return []
    return [(f"{origin}{key}[{i}]", item) for i, item in enumerate(raw)]


def _not_mapping(errs: FieldErrors, path: str, item: Any) -> None:
    errs.add(path, f"must be a mapping, not {type_name(item)}")


_IMAGE_FIELDS = ("slug", "display_name", "image", "description")
_SIZE_FIELDS = (
    "slug",
    "display_name",
    "description",
    "cpu_guarantee",
    "cpu_limit",
    "mem_guarantee",
    "mem_limit",
)
_OFFERING_FIELDS = (
    "slug",
    "display_name",
    "description",
    "kind",
    "resources",
    "flavor",
    "node_selector",
    "tolerations",
    "gpu_model",
    "gpu_memory",
    "gpu_equivalents",
    "isolation",
    "shm_size",
    "min_count",
    "max_count",
    "default_count",
    "images",
    "sizes",
    "default_image",
    "default_size",
    "cpu_guarantee",
    "cpu_limit",
    "mem_guarantee",
    "mem_limit",
    "unit",
    "units",
    "memory_cap",
    "cores_percent",
    "scheduler_name",
    "pod_annotations",
)
_TENANT_FIELDS = (
    "name",
    "display_name",
    "groups",
    "namespace",
    "local_queue",
    "cluster_queue",
    "offerings",
    "default_offering",
    "max_gpu_servers_per_user",
    "max_gpus_per_user",
    "max_queued",
    "priority_class",
    "jobs",
)
_TENANT_JOBS_FIELDS = (
    "namespace",
    "local_queue",
    "offerings",
    "priority_class",
    "max_per_user",
    "max_per_team",
    "default_time_limit",
    "max_time_limit",
)
_TOP_FIELDS = ("offerings", "tenants", "images", "sizes", "resource_transformations")


_CORES = "a number of CPU cores"


def _check_guarantee_limit(
    errs: FieldErrors,
    path: str,
    guarantee: Any,
    limit: Any,
    names: tuple[str, str],
    convert: Callable[[Any], Fraction],
) -> None:
    if guarantee is not None and limit is not None and convert(guarantee) > convert(limit):
        errs.add(key_path(path, names[0]), f"must not exceed {names[1]} ({limit})")


def _cpu_mem(
    errs: FieldErrors, path: str, data: Mapping[str, Any]
) -> tuple[float | None, float | None, str | None, str | None]:
    cpu_g = read_number(errs, path, data, "cpu_guarantee", what=_CORES, above=0)
    cpu_l = read_number(errs, path, data, "cpu_limit", what=_CORES, above=0)
    mem_g = _memory(errs, path, data, "mem_guarantee")
    mem_l = _memory(errs, path, data, "mem_limit")
    _check_guarantee_limit(errs, path, cpu_g, cpu_l, ("cpu_guarantee", "cpu_limit"), Fraction)
    _check_guarantee_limit(errs, path, mem_g, mem_l, ("mem_guarantee", "mem_limit"), parse_quantity)
    return cpu_g, cpu_l, mem_g, mem_l


def _read_image(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> Image | None:
    unknown_keys(errs, p, d, _IMAGE_FIELDS)
    slug = read_str(errs, p, d, "slug", required=True, pattern=SLUG_RE, what="a slug (a-z, 0-9, -)")
    image = read_str(errs, p, d, "image", required=True)
    if image is not None and (any(c.isspace() for c in image) or not image.strip()):
        errs.add(key_path(p, "image"), f"{image!r} is not an image reference")
        image = None
    name = read_str(errs, p, d, "display_name", default=slug) or ""
    desc = read_str(errs, p, d, "description", default="") or ""
    if slug is None or image is None:
        return None
    return Image(slug=slug, display_name=name or slug, image=image, description=desc)


def _read_size(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> Size | None:
    unknown_keys(errs, p, d, _SIZE_FIELDS)
    slug = read_str(errs, p, d, "slug", required=True, pattern=SLUG_RE, what="a slug (a-z, 0-9, -)")
    name = read_str(errs, p, d, "display_name", default=slug) or ""
    desc = read_str(errs, p, d, "description", default="") or ""
    cpu_g, cpu_l, mem_g, mem_l = _cpu_mem(errs, p, d)
    if slug is None:
        return None
    return Size(slug, name or slug, desc, cpu_g, cpu_l, mem_g, mem_l)


def _read_kind(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> Kind | None:
    kind = read_str(errs, p, d, "kind", required=True)
    if kind is None:
        return None
    for known in KINDS:
        if kind == known:
            return known
    errs.add(key_path(p, "kind"), f"must be one of {', '.join(KINDS)}, not {kind!r}")
    return None


def _read_counts(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> tuple[int, int, int]:
    """``min_count``, ``max_count`` (default: the minimum) and ``default_count`` (default: the
    minimum), the default between the two."""
    min_count = read_int(errs, p, d, "min_count", default=1, minimum=1) or 1
    max_count = read_int(errs, p, d, "max_count", default=None, minimum=1)
    default_count = read_int(errs, p, d, "default_count", default=None, minimum=1)
    if max_count is None:
        max_count = max(min_count, 1)
    if max_count < min_count:
        errs.add(key_path(p, "max_count"), f"must be at least min_count ({min_count})")
    if default_count is None:
        default_count = min_count
    elif not min_count <= default_count <= max_count:
        errs.add(
            key_path(p, "default_count"),
            f"must be between min_count ({min_count}) and max_count ({max_count})",
        )
    return min_count, max_count, default_count


def _gpu_offering_rules(
    errs: FieldErrors,
    p: str,
    d: Mapping[str, Any],
    kind: str,
    *,
    resources: Mapping[str, int],
    flavor: str | None,
    node_selector: Mapping[str, str],
    gpu_eq: Fraction | None,
    isolation: str | None,
    shm_size: str | None,
) -> tuple[Fraction | None, str | None, str | None]:
    """What a GPU offering must say (resources, flavor, size in GPUs), and its defaults: its
    GPU-equivalents, isolation and ``/dev/shm`` size."""
    if not resources and "resources" not in d and kind != "fraction":
        errs.add(key_path(p, "resources"), f"is required for a {kind} offering")
    if flavor is None and "flavor" not in d:
        errs.add(
            key_path(p, "flavor"),
            f"is required for a {kind} offering (the Kueue ResourceFlavor whose quota it uses)",
        )
    if kind == "gpu" and gpu_eq is None:
        gpu_eq = Fraction(1)
    if gpu_eq is None and "gpu_equivalents" not in d:
        errs.add(
            key_path(p, "gpu_equivalents"),
            f'is required for a {kind} offering (its size in whole GPUs, e.g. "1/7")',
        )
    elif gpu_eq is not None and gpu_eq == 0:
        errs.add(key_path(p, "gpu_equivalents"), "must be more than 0 for a GPU offering")
    if isolation is None and "isolation" not in d:
        isolation = "none" if kind == "shared" else "hardware"
    if kind == "shared" and isolation == "hardware":
        errs.add(
            key_path(p, "isolation"),
            "a shared (time-sliced) GPU is not hardware-isolated: none or memory-limited",
        )
    if shm_size is None and "shm_size" not in d:
        shm_size = _DEFAULT_SHM
    if "nvidia.com/gpu" in resources and kind in ("mig", "shared") and not node_selector:
        errs.add(
            key_path(p, "node_selector"),
            f"a {kind} offering requesting nvidia.com/gpu (MIG single strategy or "
            "time-slicing without renaming) needs a node_selector such as "
            "nvidia.com/gpu.product to tell its nodes apart from whole GPUs",
        )
    return gpu_eq, isolation, shm_size


def _read_offering(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> Offering | None:
    unknown_keys(errs, p, d, _OFFERING_FIELDS)
    before = len(errs.items)
    slug = read_str(errs, p, d, "slug", required=True, pattern=SLUG_RE, what="a slug (a-z, 0-9, -)")
    name = read_str(errs, p, d, "display_name", default=slug) or ""
    desc = read_str(errs, p, d, "description", default="") or ""
    kind = _read_kind(errs, p, d)
    resources = _resources(errs, p, d)
    flavor = read_str(errs, p, d, "flavor", pattern=DNS_SUBDOMAIN_RE, what="a ResourceFlavor name")
    node_selector = _node_selector(errs, p, d)
    tolerations = _tolerations(errs, p, d)
    gpu_model = read_str(errs, p, d, "gpu_model", default="") or ""
    gpu_memory = _memory(errs, p, d, "gpu_memory")
    gpu_eq = _fraction(errs, p, d, "gpu_equivalents")
    isolation = read_str(errs, p, d, "isolation")
    if isolation is not None and isolation not in ISOLATIONS:
        errs.add(key_path(p, "isolation"), f"must be one of {', '.join(ISOLATIONS)}")
        isolation = None
    shm_size = _memory(errs, p, d, "shm_size")
    min_count, max_count, default_count = _read_counts(errs, p, d)
    images = read_str_list(errs, p, d, "images")
    sizes = read_str_list(errs, p, d, "sizes")
    default_image = read_str(errs, p, d, "default_image")
    default_size = read_str(errs, p, d, "default_size")
    cpu_g, cpu_l, mem_g, mem_l = _cpu_mem(errs, p, d)
    unit = read_str(errs, p, d, "unit")
    units = read_str(errs, p, d, "units")
    memory_cap = _memory(errs, p, d, "memory_cap")
    cores = read_int(errs, p, d, "cores_percent", default=None, minimum=1)
    scheduler_name = read_str(
        errs, p, d, "scheduler_name", pattern=DNS_SUBDOMAIN_RE, what="a scheduler name"
    )
    pod_annotations = _pod_annotations(errs, p, d)

    if kind == "fraction":
        resources, isolation = _fraction_fields(
            errs, p, d, gpu_memory=gpu_memory, memory_cap=memory_cap, cores=cores,
            isolation=isolation, gpu_eq=gpu_eq,
        )  # fmt: skip
    elif kind is not None:
        for key in ("memory_cap", "cores_percent"):
            if d.get(key) is not None:
                errs.add(key_path(p, key), f"is only for a fraction offering, not a {kind} one")

    if kind in GPU_KINDS:
        gpu_eq, isolation, shm_size = _gpu_offering_rules(
            errs,
            p,
            d,
            kind,
            resources=resources,
            flavor=flavor,
            node_selector=node_selector,
            gpu_eq=gpu_eq,
            isolation=isolation,
            shm_size=shm_size,
        )
    elif kind == "cpu":
        _cpu_offering_rules(errs, p, resources, gpu_eq)
        gpu_eq = Fraction(0)
    if len(errs.items) != before or slug is None or kind is None:
        return None
    default_unit, default_units = _DEFAULT_UNITS[kind]
    return Offering(
        slug=slug,
        display_name=name or slug,
        kind=kind,
        resources=resources,
        flavor=flavor,
        node_selector=node_selector,
        tolerations=tolerations,
        description=desc,
        gpu_model=gpu_model,
        gpu_memory=gpu_memory,
        gpu_equivalents=gpu_eq or Fraction(0),
        isolation=isolation or "none",
        shm_size=shm_size,
        min_count=min_count,
        max_count=max_count,
        default_count=default_count,
        images=images,
        sizes=sizes,
        default_image=default_image,
        default_size=default_size,
        cpu_guarantee=cpu_g,
        cpu_limit=cpu_l,
        mem_guarantee=mem_g,
        mem_limit=mem_l,
        unit=unit or default_unit,
        units=units or default_units,
        memory_cap=memory_cap if kind == "fraction" else None,
        cores_percent=cores if kind == "fraction" else None,
        scheduler_name=scheduler_name,
        pod_annotations=pod_annotations,
    )


def _cpu_offering_rules(
    errs: FieldErrors, p: str, resources: Mapping[str, int], gpu_eq: Fraction | None
) -> None:
    if resources:
        errs.add(key_path(p, "resources"), "a cpu offering requests no extended resources")
    if gpu_eq:
        errs.add(key_path(p, "gpu_equivalents"), "must be 0 for a cpu offering")


_MIB = 1 << 20


def _fraction_fields(
    errs: FieldErrors,
    p: str,
    d: Mapping[str, Any],
    *,
    gpu_memory: str | None,
    memory_cap: str | None,
    cores: int | None,
    isolation: str | None,
    gpu_eq: Fraction | None,
) -> tuple[dict[str, int], str]:
    """A fraction's pod resources (HAMi's names) from its cap and cores, and its isolation."""
    if d.get("resources") is not None:
        errs.add(
            key_path(p, "resources"),
            f"a fraction's resources come from memory_cap and cores_percent ({HAMI_VGPU}, "
            f"{HAMI_MEMORY}, {HAMI_CORES} as HAMi expects them): remove resources",
        )
    if gpu_memory is None and "gpu_memory" not in d:
        errs.add(
            key_path(p, "gpu_memory"),
            'is required for a fraction offering: the memory of its GPU model, e.g. "23034Mi" '
            "(an NVIDIA L4, as nvidia-smi and the node's nvidia.com/gpu.memory label say)",
        )
    cap_mib = _memory_cap_mib(errs, p, d, gpu_memory=gpu_memory, memory_cap=memory_cap)
    if cores is not None and cores > 100:
        errs.add(
            key_path(p, "cores_percent"),
            f"must be at most 100, not {cores}: {HAMI_CORES} is a percentage of one GPU's "
            "compute (a fraction is on one GPU)",
        )
    if isolation is not None and isolation != "memory-limited":
        errs.add(
            key_path(p, "isolation"),
            "a HAMi fraction caps memory but shares faults and bandwidth with its neighbours: "
            "memory-limited (or leave it out)",
        )
    if gpu_eq is not None and cores is not None and cores <= 100 and gpu_eq * 100 != cores:
        # A pool that counts shares and whole GPUs in one quota counts total-gpucores:
        # the offering's size there is its compute share, so the two must agree.
        errs.add(
            key_path(p, "gpu_equivalents"),
            f"is {gpu_eq} but cores_percent says {Fraction(cores, 100)} of a GPU: a "
            f"fraction's size is its compute share (the quota counts {HAMI_CORES}); "
            f'give gpu_equivalents: "{Fraction(cores, 100)}" or change cores_percent',
        )
    resources = {HAMI_VGPU: 1}
    if cap_mib is not None:
        resources[HAMI_MEMORY] = cap_mib
    if cores is not None:
        resources[HAMI_CORES] = cores
    return resources, "memory-limited"


def _memory_cap_mib(
    errs: FieldErrors,
    p: str,
    d: Mapping[str, Any],
    *,
    gpu_memory: str | None,
    memory_cap: str | None,
) -> int | None:
    """A fraction's memory cap in MiB (HAMi's unit), checked against its GPU's memory."""
    if memory_cap is None:
        if "memory_cap" not in d:
            errs.add(
                key_path(p, "memory_cap"),
                'is required for a fraction offering: its hard GPU memory limit, e.g. "5632Mi"',
            )
        return None
    cap = parse_quantity(memory_cap)
    if cap % _MIB:
        errs.add(
            key_path(p, "memory_cap"),
            f"HAMi counts {HAMI_MEMORY} in whole MiB: {memory_cap!r} is not; use a multiple "
            'of 1Mi such as "5632Mi"',
        )
        return None
    if gpu_memory is not None and cap > parse_quantity(gpu_memory):
        errs.add(
            key_path(p, "memory_cap"),
            f"{memory_cap} is more than the GPU's memory (gpu_memory: {gpu_memory}): lower "
            "memory_cap, or correct gpu_memory if the GPU is larger",
        )
        return None
    return int(cap // _MIB)


def _pod_annotations(errs: FieldErrors, path: str, data: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for p, key, value in read_entries(errs, path, data, "pod_annotations"):
        if not isinstance(key, str) or not is_qualified_name(key):
            errs.add(p, "is not a valid annotation key (such as nvidia.com/use-gputype)")
        elif not isinstance(value, str):
            errs.add(p, f"must be a string, not {type_name(value)} (quote numbers in YAML)")
        else:
            out[key] = value
    return out


def _read_transformations(
    errs: FieldErrors, src: CatalogSource, seen: dict[str, str]
) -> list[ResourceTransformation]:
    """``resource_transformations`` of one source, checked as Kueue checks them (and more)."""
    out: list[ResourceTransformation] = []
    for p, d in _list_of_mappings(errs, src.origin, src.data, "resource_transformations"):
        if not isinstance(d, Mapping):
            _not_mapping(errs, p, d)
            continue
        before = len(errs.items)
        unknown_keys(errs, p, d, _TRANSFORMATION_KEYS)
        name = _transformation_input(errs, p, d, seen)
        strategy = read_str(errs, p, d, "strategy", default="Retain") or "Retain"
        if strategy not in _STRATEGIES:
            errs.add(key_path(p, "strategy"), f"must be Retain or Replace, not {strategy!r}")
        multiply_by = read_str(errs, p, d, "multiplyBy", default="") or ""
        if multiply_by and not is_qualified_name(multiply_by):
            errs.add(key_path(p, "multiplyBy"), f"{multiply_by!r} is not a resource name")
        if multiply_by and strategy == "Retain":
            errs.add(
                key_path(p, "strategy"),
                "must be Replace with multiplyBy: Kueue before v0.19 keeps the multiplied amount "
                "under a retained input, so the quota would differ by Kueue version",
            )
        outputs = _transformation_outputs(errs, p, d)
        if not outputs and strategy == "Replace" and "outputs" not in d:
            errs.add(
                key_path(p, "outputs"),
                "is required: Replace without outputs makes Kueue ignore the input entirely",
            )
        if len(errs.items) == before and name is not None:
            out.append(ResourceTransformation(name, outputs, strategy, multiply_by))
    return out


def _transformation_input(
    errs: FieldErrors, p: str, d: Mapping[str, Any], seen: dict[str, str]
) -> str | None:
    """A transformation's ``input`` resource, transformed once across the catalog (``seen``:
    each input's path so far)."""
    name = read_str(errs, p, d, "input", required=True)
    if name is not None and not is_qualified_name(name):
        errs.add(key_path(p, "input"), f"{name!r} is not a resource name")
    elif name is not None and name in seen:
        errs.add(key_path(p, "input"), f"{name} is already transformed at {seen[name]}")
    elif name is not None:
        seen[name] = p
    return name


def _transformation_outputs(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> dict[str, Fraction]:
    """A transformation's ``outputs``: resource name → amount per unit of input."""
    outputs: dict[str, Fraction] = {}
    for op, out_name, factor in read_entries(errs, p, d, "outputs"):
        if not isinstance(out_name, str) or not is_qualified_name(out_name):
            errs.add(op, "is not a resource name (such as nvidia.com/total-gpumem)")
            continue
        try:
            amount = parse_quantity(factor)
        except QuantityError:
            errs.add(op, f'must be a quantity per unit of input such as "1", not {factor!r}')
            continue
        if amount <= 0:
            errs.add(op, f"must be more than 0, not {factor!r}")
            continue
        outputs[out_name] = amount
    return outputs


def _check_fraction_transformations(
    errs: FieldErrors, p: str, off: Offering, by_input: Mapping[str, ResourceTransformation]
) -> None:
    """Each per-vGPU resource of a fraction needs its transformation, multiplied by vGPUs."""
    fields = {HAMI_MEMORY: "memory_cap", HAMI_CORES: "cores_percent"}
    for resource in _PER_VGPU:
        if resource not in off.resources:
            continue
        t = by_input.get(resource)
        total = resource.replace("nvidia.com/", "nvidia.com/total-")
        if t is None:
            errs.add(
                key_path(p, fields[resource]),
                f"{resource} has no entry in resource_transformations: Kueue would count it per "
                f"pod, not per vGPU. Add {{input: {resource}, strategy: Replace, multiplyBy: "
                f"{HAMI_VGPU}, outputs: {{{total}: 1}}}} to resource_transformations and the same "
                "to Kueue's Configuration (resources.transformations)",
            )
        elif t.multiply_by != HAMI_VGPU:
            errs.add(
                key_path(p, fields[resource]),
                f"the transformation of {resource} must have multiplyBy: {HAMI_VGPU} (HAMi "
                f"counts it per vGPU), not {t.multiply_by or 'nothing'}",
            )


def _read_tenant(errs: FieldErrors, p: str, d: Mapping[str, Any]) -> Tenant | None:
    unknown_keys(errs, p, d, _TENANT_FIELDS)
    before = len(errs.items)
    name = read_str(errs, p, d, "name", required=True, pattern=SLUG_RE, what="a slug (a-z, 0-9, -)")
    display = read_str(errs, p, d, "display_name", default=name) or ""
    groups = read_str_list(errs, p, d, "groups", required=True)
    namespace = read_str(errs, p, d, "namespace", pattern=SLUG_RE, what="a namespace name")
    lq = read_str(
        errs,
        p,
        d,
        "local_queue",
        required=True,
        pattern=DNS_SUBDOMAIN_RE,
        what="a LocalQueue name",
    )
    cq = read_str(errs, p, d, "cluster_queue", pattern=DNS_SUBDOMAIN_RE, what="a ClusterQueue name")
    offerings = read_str_list(errs, p, d, "offerings", required=True)
    default_offering = read_str(errs, p, d, "default_offering")
    if default_offering is None and offerings:
        default_offering = offerings[0]
    elif default_offering is not None and offerings and default_offering not in offerings:
        errs.add(
            key_path(p, "default_offering"),
            f"{default_offering!r} is not one of this tenant's offerings",
        )
    max_servers = read_int(errs, p, d, "max_gpu_servers_per_user", default=None, minimum=0)
    max_gpus = _fraction(errs, p, d, "max_gpus_per_user")
    max_queued = read_int(errs, p, d, "max_queued", default=None, minimum=0)
    pclass = read_str(
        errs, p, d, "priority_class", pattern=DNS_SUBDOMAIN_RE, what="a WorkloadPriorityClass name"
    )
    jobs = _read_tenant_jobs(errs, p, d, offerings)
    if len(errs.items) != before or name is None or lq is None or default_offering is None:
        return None
    return Tenant(
        name=name,
        display_name=display or name,
        groups=groups,
        local_queue=lq,
        offerings=offerings,
        default_offering=default_offering,
        namespace=namespace,
        cluster_queue=cq,
        max_gpu_servers_per_user=max_servers,
        max_gpus_per_user=max_gpus,
        max_queued=max_queued,
        priority_class=pclass,
        jobs=jobs,
    )


_SECOND = timedelta(seconds=1)


def _seconds(value: timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def _read_tenant_jobs(
    errs: FieldErrors, p: str, d: Mapping[str, Any], tenant_offerings: tuple[str, ...]
) -> TenantJobs | None:
    """A tenant's ``jobs`` section (its training Jobs from JupyterLab), or ``None``."""
    raw = read_mapping(errs, p, d, "jobs")
    if raw is None:
        return None
    jp = key_path(p, "jobs")
    unknown_keys(errs, jp, raw, _TENANT_JOBS_FIELDS)
    before = len(errs.items)
    ns = read_str(
        errs, jp, raw, "namespace", required=True, pattern=SLUG_RE, what="a namespace name"
    )
    lq = read_str(
        errs,
        jp,
        raw,
        "local_queue",
        required=True,
        pattern=DNS_SUBDOMAIN_RE,
        what="a LocalQueue name",
    )
    offerings = read_str_list(errs, jp, raw, "offerings") or tenant_offerings
    for i, slug in enumerate(offerings):
        if "offerings" in raw and slug not in tenant_offerings:
            errs.add(
                f"{key_path(jp, 'offerings')}[{i}]",
                f"{slug!r} is not one of this tenant's offerings"
                + did_you_mean(slug, tenant_offerings),
            )
    pclass = read_str(
        errs,
        jp,
        raw,
        "priority_class",
        pattern=DNS_SUBDOMAIN_RE,
        what="a WorkloadPriorityClass name",
    )
    per_user = read_int(errs, jp, raw, "max_per_user", default=None, minimum=0)
    per_team = read_int(errs, jp, raw, "max_per_team", default=None, minimum=0)
    default_limit = _seconds(read_duration(errs, jp, raw, "default_time_limit", minimum=_SECOND))
    max_limit = _seconds(read_duration(errs, jp, raw, "max_time_limit", minimum=_SECOND))
    if default_limit is not None and max_limit is not None and default_limit > max_limit:
        errs.add(key_path(jp, "default_time_limit"), "must not exceed max_time_limit")
    if len(errs.items) != before or ns is None or lq is None:
        return None
    return TenantJobs(
        namespace=ns,
        local_queue=lq,
        offerings=offerings,
        priority_class=pclass,
        max_per_user=per_user,
        max_per_team=per_team,
        default_time_limit=default_limit,
        max_time_limit=max_limit,
    )


_Slugged = TypeVar("_Slugged", Image, Size)


def _read_all(
    errs: FieldErrors,
    src: CatalogSource,
    key: str,
    read: Callable[[FieldErrors, str, Mapping[str, Any]], _Slugged | None],
    noun: str,
    into: dict[str, _Slugged],
) -> None:
    """Read the list ``key`` of one source into ``into`` by slug (a slug twice is an error)."""
    for p, d in _list_of_mappings(errs, src.origin, src.data, key):
        if not isinstance(d, Mapping):
            _not_mapping(errs, p, d)
            continue
        item = read(errs, p, d)
        if item is not None:
            if item.slug in into:
                errs.add(key_path(p, "slug"), f"{noun} {item.slug!r} is defined twice")
            into[item.slug] = item


def build_catalog(sources: Sequence[CatalogSource], *, default_namespace: str = "") -> Catalog:
    """Check and combine every source; raise :class:`CatalogError` with all problems.

    Lists from several sources are concatenated (a slug defined twice is an error).
    """
    errs = FieldErrors()
    images: dict[str, Image] = {}
    sizes: dict[str, Size] = {}
    raw_offerings: list[tuple[str, Any]] = []
    raw_tenants: list[tuple[str, Any]] = []
    transformations: list[ResourceTransformation] = []
    transformed: dict[str, str] = {}

    for src in sources:
        unknown_keys(errs, src.origin.rstrip(". :"), src.data, _TOP_FIELDS)
        transformations += _read_transformations(errs, src, transformed)
        _read_all(errs, src, "images", _read_image, "image", images)
        _read_all(errs, src, "sizes", _read_size, "size", sizes)
        raw_offerings += _list_of_mappings(errs, src.origin, src.data, "offerings")
        raw_tenants += _list_of_mappings(errs, src.origin, src.data, "tenants")

    offerings, slugs = _read_offerings(errs, raw_offerings, images, sizes, transformations)
    tenants = _read_tenants(errs, raw_tenants, slugs, offerings, default_namespace)

    nothing_else = not errs.items
    if not raw_offerings and nothing_else:
        errs.add(
            "offerings", "no offerings are configured (GPUaaSSpawner.offerings or catalog_file)"
        )
    if not raw_tenants and nothing_else:
        errs.add("tenants", "no tenants are configured (GPUaaSSpawner.tenants or catalog_file)")
    if errs.items:
        raise CatalogError(errs.items)
    return Catalog(
        offerings=offerings,
        tenants=tenants,
        images=images,
        sizes=sizes,
        transformations=tuple(transformations),
    )


def _read_offerings(
    errs: FieldErrors,
    raw: list[tuple[str, Any]],
    images: Mapping[str, Image],
    sizes: Mapping[str, Size],
    transformations: list[ResourceTransformation],
) -> tuple[dict[str, Offering], set[str]]:
    """The valid offerings by slug, each with the catalog's transformations, and every slug
    defined (valid or not: a tenant naming an invalid one is not told it does not exist)."""
    offerings: dict[str, Offering] = {}
    paths: dict[str, str] = {}
    slugs: set[str] = set()
    for p, d in raw:
        if not isinstance(d, Mapping):
            _not_mapping(errs, p, d)
            continue
        slug = d.get("slug")
        if isinstance(slug, str) and slug in slugs:
            errs.add(key_path(p, "slug"), f"offering {slug!r} is defined twice")
            continue
        if isinstance(slug, str):
            slugs.add(slug)
        off = _read_offering(errs, p, d)
        if off is None:
            continue
        _check_offering_choices(errs, p, off, images, sizes)
        offerings[off.slug] = off
        paths[off.slug] = p
    by_input = {t.input: t for t in transformations}
    for slug, off in offerings.items():
        if off.kind == "fraction":
            _check_fraction_transformations(errs, paths[slug], off, by_input)
        offerings[slug] = replace(off, transformations=tuple(transformations))
    return offerings, slugs


def _check_offering_choices(
    errs: FieldErrors,
    p: str,
    off: Offering,
    images: Mapping[str, Image],
    sizes: Mapping[str, Size],
) -> None:
    """An offering's images and sizes exist, and its defaults are among them."""
    for i, s in enumerate(off.images):
        if s not in images:
            errs.add(f"{key_path(p, 'images')}[{i}]", f"unknown image {s!r}")
    for i, s in enumerate(off.sizes):
        if s not in sizes:
            errs.add(f"{key_path(p, 'sizes')}[{i}]", f"unknown size {s!r}")
    if off.default_image is not None and off.default_image not in (off.images or images):
        errs.add(key_path(p, "default_image"), f"{off.default_image!r} is not offered here")
    if off.default_size is not None and off.default_size not in (off.sizes or sizes):
        errs.add(key_path(p, "default_size"), f"{off.default_size!r} is not offered here")


def _read_tenants(
    errs: FieldErrors,
    raw: list[tuple[str, Any]],
    slugs: set[str],
    offerings: Mapping[str, Offering],
    default_namespace: str,
) -> dict[str, Tenant]:
    """The valid tenants by name; a name or a LocalQueue used twice, or an offering that is
    not defined, is an error."""
    tenants: dict[str, Tenant] = {}
    paths: dict[str, str] = {}
    queues: dict[tuple[str, str], str] = {}
    for p, d in raw:
        if not isinstance(d, Mapping):
            _not_mapping(errs, p, d)
            continue
        name = d.get("name")
        if isinstance(name, str) and name in paths:
            errs.add(key_path(p, "name"), f"tenant {name!r} is already defined at {paths[name]}")
            continue
        if isinstance(name, str):
            paths[name] = p
        tenant = _read_tenant(errs, p, d)
        for i, slug in enumerate(read_str_list(FieldErrors(), p, d, "offerings")):
            if slug not in slugs:
                errs.add(
                    f"{key_path(p, 'offerings')}[{i}]",
                    f"unknown offering {slug!r}{did_you_mean(slug, offerings)}",
                )
        _claim_local_queue(errs, p, d, queues, default_namespace)
        if tenant is not None:
            tenants[tenant.name] = tenant
    return tenants


def _claim_local_queue(
    errs: FieldErrors,
    p: str,
    d: Mapping[str, Any],
    queues: dict[tuple[str, str], str],
    default_namespace: str,
) -> None:
    """Record the tenant's LocalQueue in ``queues``; one already used by another is an error."""
    lq = d.get("local_queue")
    if not isinstance(lq, str):
        return
    name = d.get("name")
    raw_ns = d.get("namespace")
    ns = raw_ns if isinstance(raw_ns, str) else default_namespace
    if (ns, lq) in queues:
        errs.add(
            key_path(p, "local_queue"),
            f"LocalQueue {ns}/{lq} is already used by tenant {queues[(ns, lq)]!r}",
        )
    else:
        queues[(ns, lq)] = name if isinstance(name, str) else p

"""GPU-equivalents: how much of a whole GPU a piece of work holds (pure).

The catalog states each offering's size (MIG 1g.10gb on an H100: 1/7; a memory-capped share:
whatever the admin says), and the spawner writes it on the notebook pod
(:data:`~.labels.GPU_EQUIVALENTS_ANNOTATION`, exact: ``"1/7"``). Everyone else reads it from
there: :func:`pod_gpu_equivalents`. Only work the spawner did not create (training Jobs, other
Workloads) is sized from its requests by :data:`RESOURCE_GPU_EQUIVALENTS`, a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from jupyter_gpuaas.core.kueue import as_mapping, pod_requests
from jupyter_gpuaas.core.labels import GPU_EQUIVALENTS_ANNOTATION

__all__ = [
    "RESOURCE_GPU_EQUIVALENTS",
    "exact_gpu_equivalents",
    "format_gpu_equivalents",
    "parse_gpu_equivalents",
    "pod_gpu_equivalents",
    "resource_gpu_equivalents",
]

RESOURCE_GPU_EQUIVALENTS: Mapping[str, Fraction] = {
    "nvidia.com/gpu": Fraction(1),
    "nvidia.com/gpu.shared": Fraction(1, 4),
}
"""GPU-equivalents per unit of a resource, for work without the annotation; MIG profiles
``mig-<N>g.*`` count N/7 (of an A100/H100's seven slices) unless listed."""


def parse_gpu_equivalents(text: object) -> Fraction | None:
    """``"1"``, ``"1/7"``, ``"0.25"`` → the amount; ``None`` for anything else or negative."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        value = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        return None
    return value if value >= 0 else None


def exact_gpu_equivalents(value: Fraction) -> str:
    """The written form that reads back the same: ``"1/7"``, ``"2"`` (pods, the queue answer)."""
    return str(value)


def format_gpu_equivalents(value: Fraction) -> str:
    """For people: ``Fraction(1, 7)`` → ``"0.14"``, ``Fraction(2)`` → ``"2"``."""
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def resource_gpu_equivalents(
    resources: Mapping[str, Fraction],
    weights: Mapping[str, Fraction] = RESOURCE_GPU_EQUIVALENTS,
) -> Fraction:
    """GPU-equivalents guessed from requests: whole GPUs 1, MIG ``<N>g`` slices N/7, others
    by ``weights``; resources it does not know count 0. A HAMi fraction counts its compute
    share: ``nvidia.com/total-gpucores`` (as Kueue counts it) / 100, or one pod's
    ``nvidia.com/gpucores`` x its vGPUs / 100, instead of a whole GPU per vGPU."""
    total = Fraction(0)
    cores = resources.get("nvidia.com/total-gpucores")
    if cores is None and "nvidia.com/gpucores" in resources:
        cores = resources["nvidia.com/gpucores"] * resources.get("nvidia.com/gpu", Fraction(1))
    if cores is not None:
        total += Fraction(cores) / 100
    for name, qty in resources.items():
        if cores is not None and name == "nvidia.com/gpu":
            continue
        if name in weights:
            total += weights[name] * qty
        elif name.startswith("nvidia.com/mig-"):
            head = name.removeprefix("nvidia.com/mig-").split("g.", 1)[0]
            if head.isdigit():
                total += Fraction(int(head), 7) * qty
    return total


def pod_gpu_equivalents(
    pod: Mapping[str, Any], weights: Mapping[str, Fraction] = RESOURCE_GPU_EQUIVALENTS
) -> Fraction:
    """A pod's GPU-equivalents: the catalog's value the spawner wrote on it, else (a pod the
    spawner did not create, or an unreadable annotation) the guess from its requests."""
    annotations = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    written = parse_gpu_equivalents(annotations.get(GPU_EQUIVALENTS_ANNOTATION))
    if written is not None:
        return written
    return resource_gpu_equivalents(pod_requests(pod), weights)

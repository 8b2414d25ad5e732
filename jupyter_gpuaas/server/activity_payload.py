"""The server's ``activity`` payload, built with its contract in ``core.activity``: from the
GPU sample and the server's kernels and terminals as they are now."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import (
    KernelActivity,
    TerminalActivity,
    activity_json,
    build_activity,
)
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.gpu.sampler import Sampler
from jupyter_gpuaas.server.kernel_requests import as_its_user_left_it


def attributable_utilization(devices: Sequence[Device]) -> list[tuple[str, int]]:
    """Utilisation that is this server's alone: whole, unshared GPUs. A MIG device reports
    none, and a time-shared GPU's figure is everyone's, so neither can say this server is busy."""
    return [
        (d.uuid, d.utilization)
        for d in devices
        if d.whole_gpu and not d.shared and d.utilization is not None
    ]


def activity_payload(
    *,
    sampled_at: datetime,
    source: str,
    error: str | None,
    kernels: Sequence[KernelActivity],
    terminals: Sequence[TerminalActivity],
    devices: Sequence[Device],
    busy_utilization_percent: float,
    started: datetime,
) -> api.Activity:
    """The JSON of ``GET gpuaas/api/activity`` and of the reports to the gpuaas service."""
    activity = build_activity(
        sampled_at=sampled_at,
        source=source,
        error=error,
        kernels=kernels,
        terminals=terminals,
        utilization=attributable_utilization(devices),
        busy_utilization_percent=busy_utilization_percent,
        started=started,
    )
    return activity_json(activity)


async def current_activity(
    sampler: Sampler, settings: Mapping[str, Any], *, busy_utilization_percent: float
) -> api.Activity:
    """The ``activity`` payload now (``GET gpuaas/api/activity``'s answer and what the reporter
    posts), from the server's web settings (its kernel and terminal managers)."""
    sample = await sampler.sample()
    km: Any = settings["kernel_manager"]
    gpu = sample.attribution.kernels
    kernels = []
    # Kernel states are read live: the GPU sample may be up to sample_ttl old.
    for kernel_id, model, kernel in kernel_models_and_objects(km):
        state, last = as_its_user_left_it(
            kernel, model.get("execution_state"), model.get("last_activity")
        )
        kernels.append(
            KernelActivity(
                kernel_id=kernel_id,
                execution_state=state,
                last_activity=_parse(last),
                connections=int(model.get("connections", 0)),
                gpu_memory=gpu[kernel_id].gpu_memory if kernel_id in gpu else 0,
            )
        )
    return activity_payload(
        sampled_at=sample.sampled_at,
        source=sample.read.source,
        error=sample.read.error,
        kernels=kernels,
        terminals=_terminals(settings),
        devices=sample.read.devices,
        busy_utilization_percent=busy_utilization_percent,
        started=settings.get("started") or datetime.now(timezone.utc),
    )


def latest_user_activity(settings: Mapping[str, Any]) -> datetime | None:
    """The newest activity of a person in this server's kernels and terminals (``None``: none
    yet), read from memory without a GPU sample: what the reporter watches between reports. The
    server's own requests in a kernel (a snapshot) do not count, as in the report."""
    times: list[datetime] = []
    for _, model, kernel in kernel_models_and_objects(settings["kernel_manager"]):
        _, last = as_its_user_left_it(
            kernel, model.get("execution_state"), model.get("last_activity")
        )
        parsed = _parse(last)
        if parsed is not None:
            times.append(parsed)
    times += [t.last_activity for t in _terminals(settings) if t.last_activity is not None]
    return max(times, default=None)


def kernel_models_and_objects(km: Any) -> Iterator[tuple[str, dict[str, Any], Any]]:
    """``(kernel_id, model, kernel)`` of each running kernel, as :func:`kernel_models`."""
    for kernel_id, model in kernel_models(km):
        try:
            yield kernel_id, model, km.get_kernel(kernel_id)
        except KeyError:
            continue


def kernel_models(km: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kernel_id, model)`` of each running kernel of a kernel manager, skipping any that
    shut down while being listed."""
    for kernel_id in list(km.list_kernel_ids()):
        try:
            yield kernel_id, km.kernel_model(kernel_id)
        except KeyError:
            continue


def _terminals(settings: Mapping[str, Any]) -> list[TerminalActivity]:
    manager: Any = settings.get("terminal_manager")
    if manager is None:
        return []  # terminals disabled, or jupyter-server-terminals not installed
    return [
        TerminalActivity(name=str(t.get("name")), last_activity=_parse(t.get("last_activity")))
        for t in manager.list()
    ]


def _parse(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00"))

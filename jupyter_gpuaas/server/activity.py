"""The server's ``activity`` payload, built with its contract in ``core.activity``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from jupyter_gpuaas.core.activity import (
    KernelActivity,
    TerminalActivity,
    activity_json,
    build_activity,
)
from jupyter_gpuaas.gpu.model import Device


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
) -> dict[str, Any]:
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

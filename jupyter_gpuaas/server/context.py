"""What the extension's handlers and tasks share, built once by the extension app."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.api_documents import RequestBodies, request_bodies
from jupyter_gpuaas.gpu.sampler import Sampler
from jupyter_gpuaas.server.jobs import Collector
from jupyter_gpuaas.server.kernel_requests import KernelStateSettings, StateSizes
from jupyter_gpuaas.server.reporter import Reporter
from jupyter_gpuaas.server.service_client import ServiceClient

__all__ = ["ServerState"]


@dataclass(frozen=True)
class ServerState:
    """The server's GPU sampler, its activity as of now, and its link to the gpuaas service.

    Built in :meth:`GPUaaS.initialize_settings <jupyter_gpuaas.server.app.GPUaaS>` and handed
    to every handler (as a handler argument) and, in parts, to the reporter.
    """

    sampler: Sampler
    activity_now: Callable[[], Awaitable[api.Activity]]
    """The ``activity`` payload now: the endpoint's answer and what the reporter posts."""
    client: ServiceClient
    """The one client of the gpuaas hub service (queue, reclaim warning, jobs, reports)."""
    reporter: Reporter | None = None
    """Posts the activity to the service; ``None`` when reporting is off."""
    collector: Collector | None = None
    """Collects finished GPU jobs' results in the background; ``None`` when off."""
    kernel_state: KernelStateSettings = field(default_factory=KernelStateSettings)
    """Where and within which bounds kernels save their variables (``c.GPUaaS.kernel_state_*``)."""
    keeps_state_on_moves: bool = True
    """Whether kernels save their variables before a reclaim or a move to a bigger GPU
    (``c.GPUaaS.kernel_state_on_reclaim``)."""
    state_sizes: StateSizes | None = None
    """The kernels' own estimates of their state, shared by the activity report and the
    sidebar's ``GET gpuaas/api/kernel-state/estimate``; ``None`` where state is not kept."""
    bodies: RequestBodies = field(default_factory=lambda: request_bodies("extension"))
    """The request bodies the extension's OpenAPI document allows, their validators compiled
    once, as the state is built (the handlers refuse any other body with a 400)."""

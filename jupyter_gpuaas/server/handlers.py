"""HTTP handlers of `{base_url}gpuaas/api/` (docs/api.md)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from jupyter_gpuaas.core.activity import KernelActivity, TerminalActivity
from jupyter_gpuaas.server.activity import activity_payload

if TYPE_CHECKING:
    from jupyter_gpuaas.server.app import GPUaaS


class GPUaaSHandler(ExtensionHandlerMixin, APIHandler):
    """Base of our handlers: JSON APIs that never count as user activity.

    An open sidebar polls these endpoints every few seconds. jupyter-server's APIHandler.finish()
    calls update_api_activity(), which sets settings["api_last_activity"] for every
    authenticated request unless the handler's _track_activity is False; that setting feeds
    ServerApp.last_activity(), which JupyterHub and idle cullers read. Counting polls would
    let an idle browser tab hold a GPU forever, so both are switched off here: the flag, and
    the method itself in case a jupyter-server version stops checking the flag.
    """

    _track_activity = False
    # The GPU figures describe kernels, so reading them takes the kernels read permission.
    auth_resource = "kernels"

    def update_api_activity(self) -> None:
        """Polling is not activity (see the class docstring)."""

    @property
    def gpuaas(self) -> GPUaaS:
        return cast("GPUaaS", self.extensionapp)

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Cache-Control", "no-store")


class UsageHandler(GPUaaSHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        sample = await self.gpuaas.sampler.sample()
        await self.finish(sample.usage_json)


class ActivityHandler(GPUaaSHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(await activity_for(self.gpuaas, self.settings))


async def activity_for(app: GPUaaS, settings: Any) -> dict[str, Any]:
    """The `activity` payload now (the endpoint's answer, and what the reporter posts)."""
    sample = await app.sampler.sample()
    km: Any = settings["kernel_manager"]
    gpu = sample.attribution.kernels
    kernels = []
    # Kernel states are read live: the GPU sample may be up to sample_ttl old.
    for kernel_id, model in kernel_models(km):
        kernels.append(
            KernelActivity(
                kernel_id=kernel_id,
                execution_state=model.get("execution_state"),
                last_activity=_parse(model.get("last_activity")),
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
        busy_utilization_percent=app.busy_utilization_percent,
        started=settings.get("started") or datetime.now(timezone.utc),
    )


def kernel_models(km: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(kernel_id, model)`` of each running kernel of a kernel manager, skipping any that
    shut down while being listed."""
    for kernel_id in list(km.list_kernel_ids()):
        try:
            yield kernel_id, km.kernel_model(kernel_id)
        except KeyError:
            continue


def _terminals(settings: Any) -> list[TerminalActivity]:
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

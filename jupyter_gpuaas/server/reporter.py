"""Activity reporting to the gpuaas hub service, and the reclaim warning for the sidebar.

The culler never enters users' servers (that would need the ``access:servers`` scope: the power
to run code in every one of them). Instead this server pushes its ``activity`` payload
(docs/api.md) every ``GPUaaS.activity_report_interval`` seconds to the gpuaas service
(``POST {service}/api/activity``) with its own hub token (``JUPYTERHUB_API_TOKEN``; the scope
``access:services!service=gpuaas`` must be in ``Spawner.server_token_scopes``). The service
accepts it only for this server. Without JupyterHub (no token) or without a service URL, nothing
is reported.

``GET gpuaas/api/reclaim`` passes on the service's answer for this server (a pending warning:
deadline, reason, snoozes left, ``saving`` at the deadline); ``POST gpuaas/api/reclaim/snooze``
forwards "Keep my GPU" (the service enforces the policy's ``max_snoozes``). Like the other
endpoints, neither counts as user activity.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from jupyter_gpuaas.server.handlers import GPUaaSHandler, activity_for
from jupyter_gpuaas.server.service_client import ServiceClient

if TYPE_CHECKING:
    from jupyter_gpuaas.server.app import GPUaaS

__all__ = ["ReclaimHandler", "Reporter", "SnoozeHandler"]


class Reporter:
    """Posts the activity payload every ``interval`` seconds (one task per server)."""

    def __init__(
        self,
        app: GPUaaS,
        settings: Any,
        client: ServiceClient,
        interval: float,
        log: logging.Logger | Any = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.client = client
        self.interval = interval
        self.log = log or logging.getLogger(__name__)
        self.sent = 0
        self.failed = 0
        self.last_answer: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def report_once(self) -> bool:
        payload = await activity_for(self.app, self.settings)
        answer = await self.client.request("api/activity", method="POST", body=payload)
        if answer.problem is None:
            self.sent += 1
            self.last_answer = answer.data
            return True
        self.failed += 1
        self.log.warning(
            "GPUaaS: activity report not accepted (HTTP %s): %s",
            answer.status,
            answer.problem.as_json()["error"],
        )
        return False

    async def _run(self) -> None:
        delay = self.interval
        while True:
            try:
                ok = await self.report_once()
            except Exception:  # a failed report must not end the reporting
                ok = False
                self.log.exception("GPUaaS: activity report failed")
            # Back off while the service is away (up to 10 intervals), then report as usual.
            delay = self.interval if ok else min(delay * 2, self.interval * 10)
            await asyncio.sleep(delay)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None


class ReclaimHandler(GPUaaSHandler):
    """``GET gpuaas/api/reclaim``: this server's pending reclaim warning (or ``null``)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        answer = await ServiceClient.for_app(self.gpuaas).request("api/reclaim")
        if answer.problem:
            await self.finish({"warning": None, **answer.problem.as_json()})
        else:
            await self.finish(answer.data)


class StandingHandler(GPUaaSHandler):
    """``GET gpuaas/api/reclaim/standing``: the reclaim policy that applies to this server and
    where it stands (the service's last plan, for this server only)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        answer = await ServiceClient.for_app(self.gpuaas).request("api/reclaim/standing")
        if answer.problem:
            await self.finish({"known": False, **answer.problem.as_json()})
        else:
            await self.finish(answer.data)


class SnoozeHandler(GPUaaSHandler):
    """``POST gpuaas/api/reclaim/snooze``: "Keep my GPU" (409 when no snooze is left)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        client = ServiceClient.for_app(self.gpuaas)
        answer = await client.request("api/reclaim/snooze", method="POST", accept=(200, 409))
        if answer.problem:
            self.set_status(502)
            await self.finish(answer.problem.as_json())
        else:
            self.set_status(answer.status)
            await self.finish(answer.data)

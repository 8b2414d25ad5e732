"""Activity reporting to the gpuaas hub service.

The culler never enters users' servers (that would need the ``access:servers`` scope: the power
to run code in every one of them). Instead this server pushes its ``activity`` payload
(docs/api.md) every ``GPUaaS.activity_report_interval`` seconds to the gpuaas service
(``POST {service}/api/activity``) with its own hub token (``JUPYTERHUB_API_TOKEN``; the scope
``access:services!service=gpuaas`` must be in ``Spawner.server_token_scopes``). The service
accepts it only for this server. Without JupyterHub (no token) or without a service URL, nothing
is reported. The reclaim warning the service answers with is passed on to the sidebar by the
handlers (``GET gpuaas/api/reclaim``, ``POST gpuaas/api/reclaim/snooze``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from jupyter_gpuaas.server.service_client import ServiceClient

__all__ = ["Reporter"]


class Reporter:
    """Posts the activity payload every ``interval`` seconds (one task per server)."""

    def __init__(
        self,
        activity_now: Callable[[], Awaitable[dict[str, Any]]],
        client: ServiceClient,
        interval: float,
        log: logging.Logger | Any = None,
    ) -> None:
        self.activity_now = activity_now
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
        payload = await self.activity_now()
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

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
import json
import logging
import os
from typing import TYPE_CHECKING, Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from jupyter_gpuaas.server.handlers import GPUaaSHandler, activity_for
from jupyter_gpuaas.server.queue import SERVICE_URL_ENV

if TYPE_CHECKING:
    from jupyter_gpuaas.server.app import GPUaaS

__all__ = ["ReclaimHandler", "Reporter", "SnoozeHandler", "ask_service", "service_url"]


def service_url(app: Any) -> str:
    return str(getattr(app, "queue_service_url", "") or os.environ.get(SERVICE_URL_ENV, ""))


async def ask_service(
    url: str, path: str, token: str, *, method: str = "GET", body: Any = None, timeout: float = 5.0
) -> tuple[int, dict[str, Any]]:
    """One request to the gpuaas service with this server's token: (status, JSON answer).

    Never raises for service trouble: status 0 and ``{"error": ...}`` when it cannot be asked.
    """
    if not url or not token:
        why = "no hub token (not under JupyterHub)" if url else "no gpuaas service configured"
        return 0, {"error": why, "error_kind": "not_configured"}
    request = HTTPRequest(
        url.rstrip("/") + "/" + path.lstrip("/"),
        method=method,
        headers={
            "Authorization": f"token {token}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        },
        body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
        connect_timeout=timeout,
        request_timeout=timeout,
        follow_redirects=False,
    )
    try:
        response = await AsyncHTTPClient().fetch(request, raise_error=False)
    except (OSError, TimeoutError) as err:
        return 0, {
            "error": f"the gpuaas service cannot be reached: {err}",
            "error_kind": "service_unavailable",
        }
    except HTTPClientError as err:  # pragma: no cover - raise_error=False
        return err.code, {"error": str(err), "error_kind": "service_error"}
    if response.code == 599:
        return 0, {
            "error": f"the gpuaas service cannot be reached: {response.error}",
            "error_kind": "service_unavailable",
        }
    try:
        data = json.loads(response.body or b"{}")
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    if response.code in (401, 403):
        data.setdefault(
            "error",
            "the gpuaas service refused this server's token: it needs the scope"
            " access:services!service=gpuaas (Spawner.server_token_scopes)",
        )
        data.setdefault("error_kind", "forbidden")
    return response.code, data


class Reporter:
    """Posts the activity payload every ``interval`` seconds (one task per server)."""

    def __init__(
        self,
        app: GPUaaS,
        settings: Any,
        url: str,
        token: str,
        interval: float,
        timeout: float,
        log: logging.Logger | Any = None,
    ) -> None:
        self.app = app
        self.settings = settings
        self.url = url
        self.token = token
        self.interval = interval
        self.timeout = timeout
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
        status, answer = await ask_service(
            self.url,
            "api/activity",
            self.token,
            method="POST",
            body=payload,
            timeout=self.timeout,
        )
        if status == 200:
            self.sent += 1
            self.last_answer = answer
            return True
        self.failed += 1
        self.log.warning(
            "GPUaaS: activity report not accepted (HTTP %s): %s",
            status,
            answer.get("error") or answer.get("message"),
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
        app = self.gpuaas
        status, answer = await ask_service(
            service_url(app),
            "api/reclaim",
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            timeout=getattr(app, "queue_timeout", 5.0),
        )
        if status != 200:
            answer = {
                "warning": None,
                "error": answer.get("error") or answer.get("message") or f"HTTP {status}",
                "error_kind": answer.get("error_kind", "service_error"),
            }
        await self.finish(answer)


class SnoozeHandler(GPUaaSHandler):
    """``POST gpuaas/api/reclaim/snooze``: "Keep my GPU" (409 when no snooze is left)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        app = self.gpuaas
        status, answer = await ask_service(
            service_url(app),
            "api/reclaim/snooze",
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            method="POST",
            timeout=getattr(app, "queue_timeout", 5.0),
        )
        self.set_status(status if status in (200, 409) else 502)
        await self.finish(answer)

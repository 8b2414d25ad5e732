"""``GET gpuaas/api/queue``: the user's pending GPU work, from the gpuaas hub service.

The server holds no Kubernetes credentials: it asks the hub service ``gpuaas``
(culler/gpuaas_culler/service.py) with its own hub token (``JUPYTERHUB_API_TOKEN``, which needs
the scope ``access:services!service=gpuaas``; docs/queue.md) and passes the answer on. When the
service cannot be asked the answer is still JSON with status 200, empty lists and ``error`` /
``error_kind`` set, so that the sidebar shows why without treating it as a broken server.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from jupyter_gpuaas.server.handlers import GPUaaSHandler

__all__ = ["QueueHandler", "error_payload", "fetch_queue"]

SERVICE_URL_ENV = "GPUAAS_SERVICE_URL"


def error_payload(kind: str, message: str) -> dict[str, Any]:
    """The ``queue`` answer when it cannot be had (same shape as a real one)."""
    return {
        "user": None,
        "generated_at": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"),
        "synced": False,
        "items": [],
        "teams": [],
        "error": message,
        "error_kind": kind,
    }


async def fetch_queue(service_url: str, token: str, timeout: float = 5.0) -> dict[str, Any]:
    """Ask the gpuaas service for the token owner's queue; never raises for service trouble."""
    if not service_url:
        return error_payload(
            "not_configured",
            "No gpuaas hub service is configured for this server "
            f"(set c.GPUaaS.queue_service_url or ${SERVICE_URL_ENV}).",
        )
    if not token:
        return error_payload(
            "not_configured",
            "This server has no hub token (JUPYTERHUB_API_TOKEN): it is not running under "
            "JupyterHub, so the gpuaas hub service cannot be asked.",
        )
    url = service_url.rstrip("/") + "/api/queue"
    request = HTTPRequest(
        url,
        headers={"Authorization": f"token {token}", "Accept": "application/json"},
        connect_timeout=timeout,
        request_timeout=timeout,
        follow_redirects=False,
    )
    try:
        response = await AsyncHTTPClient().fetch(request)
    except HTTPClientError as err:
        if err.code in (401, 403):
            return error_payload(
                "forbidden",
                "The gpuaas hub service refused this server's token: it needs the scope "
                "access:services!service=gpuaas (Spawner.server_token_scopes).",
            )
        if err.code == 599:
            return error_payload("service_unavailable", _down(url, str(err)))
        return error_payload(
            "service_error", f"The gpuaas hub service answered HTTP {err.code} ({url})."
        )
    except (OSError, TimeoutError) as err:
        return error_payload("service_unavailable", _down(url, str(err)))
    try:
        data = json.loads(response.body)
    except ValueError:
        return error_payload(
            "service_error", f"The gpuaas hub service's answer is not JSON ({url})."
        )
    if not isinstance(data, dict):
        return error_payload("service_error", f"Unexpected answer from {url}.")
    return data


def _down(url: str, detail: str) -> str:
    return f"The gpuaas hub service cannot be reached ({url}: {detail}); retrying."


class QueueHandler(GPUaaSHandler):
    """Reads the user's queue; like the other endpoints, polling it is not activity."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        app = self.gpuaas
        url = getattr(app, "queue_service_url", "") or os.environ.get(SERVICE_URL_ENV, "")
        token = os.environ.get("JUPYTERHUB_API_TOKEN", "")
        await self.finish(await fetch_queue(url, token, getattr(app, "queue_timeout", 5.0)))

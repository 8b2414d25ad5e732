"""The user's pending GPU work (``GET gpuaas/api/queue``), from the gpuaas hub service.

The service is asked through :mod:`.service_client`. When it cannot be asked the answer is still
JSON with status 200, empty lists and ``error`` / ``error_kind`` set, so that the sidebar shows
why without treating it as a broken server.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import cast

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.server.service_client import ServiceClient, ServiceProblem

__all__ = ["error_payload", "fetch_queue"]


def error_payload(problem: ServiceProblem) -> api.Queue:
    """The ``queue`` answer when it cannot be had (same shape as a real one)."""
    return {
        "user": None,
        "generated_at": isoformat_z(datetime.now(timezone.utc)),
        "synced": False,
        "items": [],
        "teams": [],
        **problem.as_json(),
    }


async def fetch_queue(client: ServiceClient) -> api.Queue:
    """Ask the gpuaas service for the token owner's queue; never raises for service trouble."""
    answer = await client.request("api/queue")
    if answer.problem:
        return error_payload(answer.problem)
    # passed on as the service gave it: its document's `queue`, which its own tests check
    return cast(api.Queue, answer.data)

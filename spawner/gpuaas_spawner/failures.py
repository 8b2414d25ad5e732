"""Spawn failures that neither the user's request nor a hub restart would mend. Pure.

JupyterHub counts a spawn that ends in an *error* (any exception but a ``SpawnException`` or an
HTTP error below 500) towards ``Spawner.consecutive_failure_limit`` and exits when the count
reaches it (z2jh: 5). A cluster that is down makes every spawn fail that way, and the exit would
not bring it back: it would only drop every spawn waiting in Kueue's queue. So the failures
named here end the spawn as a clean failure (``SpawnException``; 6.x metrics:
``status="failure"`` with the reason) whose message says what to do, and the admin learns of them
from the hub's log and ``/hub/metrics`` instead of from a hub that keeps exiting.

The server's own failures (it exits before it is ready, or Kueue admitted it but it did not
become ready in time) are told by :mod:`gpuaas_spawner.progress`.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import ClientConnectionError
from kubernetes_asyncio.client.rest import ApiException

__all__ = ["Failure", "classify_start_error"]

KUEUE_DOWN = (
    "Kueue, which queues GPU servers, is not answering, so no server can be started or "
    "queued right now. Nothing was created. Try again in a few minutes; if it persists, tell "
    "an admin (Kueue's webhook is unreachable)."
)
CLUSTER_DOWN = (
    "The Kubernetes cluster is not answering, so no server can be started right now. Nothing "
    "of yours was lost. Try again in a few minutes; if it persists, tell an admin (the hub "
    "cannot reach the Kubernetes API)."
)
# KubeSpawner's message when its retries of the pod's creation ran out (each one timed out)
_CREATE_RETRIES_RAN_OUT = "Could not create pod "


@dataclass(frozen=True)
class Failure:
    """A clean failure: ``reason`` for metrics and logs, ``message`` for the user."""

    reason: str
    message: str
    status_code: int = 503


def classify_start_error(exc: BaseException) -> Failure | None:
    """The clean failure that ``exc`` (raised while starting a server) stands for, or ``None``
    for an error that stays an error (a bug, RBAC refusing the hub, a bad manifest)."""
    if isinstance(exc, ApiException):
        body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body
        text = f"{exc.reason or ''} {body or ''}"
        if "failed calling webhook" in text and "kueue" in text.lower():
            return Failure("kueue_unavailable", KUEUE_DOWN)
        if exc.status in (502, 503, 504):  # the API server (or what fronts it) is down
            return Failure("cluster_unavailable", CLUSTER_DOWN)
        return None
    if isinstance(exc, (ClientConnectionError, ConnectionError)):
        return Failure("cluster_unavailable", CLUSTER_DOWN)
    if isinstance(exc, TimeoutError) and str(exc).startswith(_CREATE_RETRIES_RAN_OUT):
        return Failure("cluster_unavailable", CLUSTER_DOWN)
    return None

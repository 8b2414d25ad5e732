"""Spawn failures that neither the user's request nor a hub restart would mend. Pure.

JupyterHub counts a spawn that ends in an *error* (any exception but a ``SpawnException`` or an
HTTP error below 500) towards ``Spawner.consecutive_failure_limit`` and exits when the count
reaches it (z2jh: 5). A cluster that is down makes every spawn fail that way, and the exit would
not bring it back: it would only drop every spawn waiting in Kueue's queue. So the failures
named here end the spawn as a clean failure (``SpawnException``; 6.x metrics:
``status="failure"`` with the reason) whose message says what to do, and the admin learns of them
from the hub's log and ``/hub/metrics`` instead of from a hub that keeps exiting.

A cluster that stops answering for a moment (an API server paused by a node's memory pressure,
a control-plane upgrade) must not count either, and must not end as a ``TimeoutError``: JupyterHub
takes any ``TimeoutError`` out of ``start`` for its own start timeout ("failed to start in 120
seconds", with an empty reason). :func:`cluster_not_answering` names the errors of such a
moment; the spawner retries what is safe to retry (the token Secret and the pod, within
KubeSpawner's ``k8s_api_request_retry_timeout``) and :func:`classify_start_error` turns what is
left into the clean failure :data:`CLUSTER_DOWN`.

The server's own failures (it exits before it is ready, or Kueue admitted it but it did not
become ready in time) are told by :mod:`gpuaas_spawner.progress`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from aiohttp import ClientConnectionError
from kubernetes_asyncio.client.rest import ApiException

from gpuaas_spawner.messages import say

__all__ = ["CLUSTER_DOWN", "KUEUE_DOWN", "Failure", "classify_start_error", "cluster_not_answering"]

KUEUE_DOWN = say("start.queue_down")
CLUSTER_DOWN = say("start.cluster_down")
# Status codes of an API server (or the load balancer in front of it) that cannot answer now
_UNAVAILABLE = (502, 503, 504)


@dataclass(frozen=True)
class Failure:
    """A clean failure: ``reason`` for metrics and logs, ``message`` for the user."""

    reason: str
    message: str
    status_code: int = 503


def cluster_not_answering(exc: BaseException) -> bool:
    """Whether ``exc`` says the Kubernetes API did not answer (a request that timed out, a
    connection refused or dropped, a 502/503/504), as opposed to an answer that refuses.

    Every ``TimeoutError`` counts: inside a start, each one comes from a request to the API
    server (``asyncio.wait_for`` around a call, or KubeSpawner's retries of one running out);
    the spawner's own deadlines end as clean failures of their own before any of KubeSpawner's.
    Those are ``asyncio.TimeoutError``, not the builtin one, before Python 3.11.
    """
    if isinstance(exc, ApiException):
        return exc.status in _UNAVAILABLE
    timeouts = (TimeoutError, asyncio.TimeoutError)
    return isinstance(exc, (*timeouts, ClientConnectionError, ConnectionError))


def classify_start_error(exc: BaseException) -> Failure | None:
    """The clean failure that ``exc`` (raised while starting a server) stands for, or ``None``
    for an error that stays an error (a bug, RBAC refusing the hub, a bad manifest)."""
    if isinstance(exc, ApiException):
        body = exc.body.decode(errors="replace") if isinstance(exc.body, bytes) else exc.body
        text = f"{exc.reason or ''} {body or ''}"
        if "failed calling webhook" in text and "kueue" in text.lower():
            return Failure("kueue_unavailable", KUEUE_DOWN)
    if cluster_not_answering(exc):
        return Failure("cluster_unavailable", CLUSTER_DOWN)
    return None

"""The server extension's one client of the gpuaas hub service (culler/gpuaas_service).

The server holds no Kubernetes credentials: for the user's queue, the reclaim warning, "Keep my
GPU" and its activity reports it asks the hub service ``gpuaas`` with its own hub token
(``JUPYTERHUB_API_TOKEN``, which needs the scope ``access:services!service=gpuaas`` in
``Spawner.server_token_scopes``; docs/queue.md). Where to find the service: ``c.GPUaaS.
queue_service_url``, else ``$GPUAAS_SERVICE_URL`` (set by the hub's spawner configuration).

Trouble with the service is never an exception: every answer is a :class:`ServiceAnswer`, and
when the service could not be asked (or refused) it carries one :class:`ServiceProblem` — a
kind, what happened and what to do — that the handlers pass to the sidebar as
``{"error": ..., "error_kind": ...}``.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, TypedDict

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

__all__ = [
    "SERVICE_URL_ENV",
    "TOKEN_ENV",
    "ServiceAnswer",
    "ServiceClient",
    "ServiceProblem",
]

SERVICE_URL_ENV = "GPUAAS_SERVICE_URL"
TOKEN_ENV = "JUPYTERHUB_API_TOKEN"
SERVICE = "The gpuaas hub service"


class ProblemFields(TypedDict):
    """What an answer the service did not give says instead (the ``error`` and ``error_kind``
    of the documents' ``queue`` and ``service_unreachable``)."""

    error: str
    error_kind: str


@dataclass(frozen=True)
class ServiceProblem:
    """Why the service gave no usable answer.

    ``kind``: ``not_configured`` (no service URL, or no hub token: not under JupyterHub),
    ``forbidden`` (the token lacks the scope), ``service_unavailable`` (not reachable: retried),
    ``service_error`` (an answer that is an error or not JSON).
    """

    kind: str
    message: str
    action: str

    def as_json(self) -> ProblemFields:
        """The fields the sidebar reads (docs/queue.md, docs/culler.md)."""
        return {"error": f"{self.message} {self.action}", "error_kind": self.kind}


@dataclass(frozen=True)
class ServiceAnswer:
    status: int
    """The HTTP status; 0 when the service could not be asked."""
    data: dict[str, Any] = field(default_factory=dict)
    problem: ServiceProblem | None = None


@dataclass(frozen=True)
class ServiceClient:
    url: str
    token: str
    timeout: float = 5.0

    @classmethod
    def for_app(cls, app: Any) -> ServiceClient:
        """The client a ``GPUaaS`` extension app is configured for."""
        url = getattr(app, "queue_service_url", "") or os.environ.get(SERVICE_URL_ENV, "")
        timeout = getattr(app, "queue_timeout", 5.0)
        return cls(url=str(url), token=os.environ.get(TOKEN_ENV, ""), timeout=float(timeout))

    @property
    def configured(self) -> bool:
        return bool(self.url and self.token)

    async def request(
        self,
        path: str,
        *,
        method: str = "GET",
        body: Any = None,
        accept: Collection[int] = (200,),
    ) -> ServiceAnswer:
        """One request with this server's token. A JSON object answered with a status in
        ``accept`` is the service's answer; anything else comes back as a problem."""
        if not self.url:
            return ServiceAnswer(0, problem=_NO_SERVICE)
        if not self.token:
            return ServiceAnswer(0, problem=_NO_TOKEN)
        url = self.url.rstrip("/") + "/" + path.lstrip("/")
        request = HTTPRequest(
            url,
            method=method,
            headers={
                "Authorization": f"token {self.token}",
                "Accept": "application/json",
                "Content-Type": "application/json",
            },
            body=json.dumps(body) if body is not None else (b"" if method == "POST" else None),
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            follow_redirects=False,
        )
        try:
            response = await AsyncHTTPClient().fetch(request, raise_error=False)
        except (OSError, asyncio.TimeoutError, HTTPClientError) as err:
            # raise_error=False still raises what is no answer at all: a timeout or a dropped
            # connection (tornado's 599 HTTPClientError), a refused one (OSError)
            return ServiceAnswer(0, problem=_unreachable(url, str(err)))
        if response.code == 599:  # tornado's code for no HTTP answer at all
            return ServiceAnswer(0, problem=_unreachable(url, str(response.error)))
        if response.code in (401, 403):
            return ServiceAnswer(response.code, problem=_FORBIDDEN)
        try:
            data = json.loads(response.body or b"{}")
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return ServiceAnswer(response.code, problem=_not_json(url))
        if response.code not in accept:
            said = data.get("message") or data.get("error")
            detail = f": {said}" if isinstance(said, str) and said else ""
            return ServiceAnswer(
                response.code,
                data,
                ServiceProblem(
                    "service_error",
                    f"{SERVICE} answered HTTP {response.code} ({url}){detail}.",
                    "Its log says more.",
                ),
            )
        return ServiceAnswer(response.code, data)


_NO_SERVICE = ServiceProblem(
    "not_configured",
    "No gpuaas hub service is configured for this server.",
    f"Set c.GPUaaS.queue_service_url or ${SERVICE_URL_ENV}.",
)
_NO_TOKEN = ServiceProblem(
    "not_configured",
    f"This server has no hub token ({TOKEN_ENV}): it is not running under JupyterHub, so the"
    " gpuaas hub service cannot be asked.",
    "Start it from JupyterHub.",
)
_FORBIDDEN = ServiceProblem(
    "forbidden",
    f"{SERVICE} refused this server's token.",
    "Add the scope access:services!service=gpuaas to Spawner.server_token_scopes.",
)


def _unreachable(url: str, detail: str) -> ServiceProblem:
    return ServiceProblem(
        "service_unavailable", f"{SERVICE} cannot be reached ({url}: {detail}).", "Retrying."
    )


def _not_json(url: str) -> ServiceProblem:
    return ServiceProblem(
        "service_error",
        f"{SERVICE}'s answer is not a JSON object ({url}).",
        "Check that c.GPUaaS.queue_service_url points at the service.",
    )

"""The Hub REST API as the gpuaas service uses it (its own token, minimal scopes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote, urlencode

from gpuaas_service.clients.http import OwnClient

__all__ = ["Hub", "HubClient", "HubError"]


class HubError(RuntimeError):
    """The hub could not be read or refused (the cycle acts on nothing)."""


class Hub(Protocol):
    async def user(self, name: str) -> dict[str, Any] | None: ...

    async def group_members(self) -> dict[str, list[str]]: ...

    async def stop_server(self, user: str, server: str) -> int: ...


class HubClient:
    """The Hub REST API with the culler's token (tornado's async client; timeouts, pages)."""

    def __init__(
        self,
        api_url: str,
        token: str,
        *,
        timeout: float = 20.0,
        page_size: int = 200,
        max_clients: int = 10,
    ) -> None:
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        """Seconds for connecting and for the whole answer, per request."""
        self.page_size = page_size
        """Groups asked for per page of ``GET /groups``."""
        self.requests = 0
        self.http = OwnClient(max_clients)
        """Its own connections: a slow webhook or Prometheus never queues Hub requests."""

    async def _fetch(
        self,
        method: str,
        path: str,
        accept: str = "application/json",
        *,
        missing: Any = ...,
        body: Any = None,
    ) -> Any:
        """The answer's JSON (``DELETE``: its status); ``missing`` is returned for a 404;
        ``body`` is sent as JSON."""
        from tornado.httpclient import HTTPClientError, HTTPRequest

        self.requests += 1
        req = HTTPRequest(
            self.api_url + path,
            method=method,
            headers={"Authorization": f"token {self.token}", "Accept": accept},
            body=None if body is None else json.dumps(body),
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            allow_nonstandard_methods=True,
        )
        try:
            resp = await self.http().fetch(req)
        except HTTPClientError as e:
            if method == "DELETE" and e.code in (400, 404):
                return e.code  # not running (any more): nothing to stop
            if e.code == 404 and missing is not ...:
                return missing
            raise HubError(f"{method} {path}: HTTP {e.code} {e.message}") from e
        except OSError as e:
            raise HubError(f"{method} {path}: {e}") from e
        if method == "DELETE":
            return resp.code
        return json.loads(resp.body or b"null")

    async def info(self) -> dict[str, Any]:
        """``GET /hub/api/``: the hub's version (no scope needed)."""
        answer = await self._fetch("GET", "/")
        return answer if isinstance(answer, dict) else {}

    async def whoami(self) -> dict[str, Any]:
        """``GET /hub/api/user``: the token's owner (``kind``, ``name``) and its scopes."""
        answer = await self._fetch("GET", "/user")
        return answer if isinstance(answer, dict) else {}

    async def user(self, name: str) -> dict[str, Any] | None:
        """The user's model with their active servers and groups; ``None``: no such user."""
        model: dict[str, Any] | None = await self._fetch(
            "GET", f"/users/{quote(name)}", missing=None
        )
        return model

    async def tokens(self, name: str) -> list[dict[str, Any]]:
        """The user's API tokens' models (ids, notes, times; never their secrets), scope
        ``read:tokens``: which one the hub issued to a server (web/servers.py)."""
        answer = await self._fetch("GET", f"/users/{quote(name)}/tokens", missing={})
        tokens = answer.get("api_tokens") if isinstance(answer, dict) else None
        return [t for t in tokens or () if isinstance(t, dict)]

    async def group_members(self) -> dict[str, list[str]]:
        """User → the names of their groups, from every page of ``GET /groups``."""
        members: dict[str, list[str]] = {}
        offset = 0
        while True:
            query = urlencode({"offset": offset, "limit": self.page_size})
            page = await self._fetch(
                "GET", f"/groups?{query}", accept="application/jupyterhub-pagination+json"
            )
            items = page if isinstance(page, list) else page.get("items") or []
            for group in items:
                for user in group.get("users") or []:
                    members.setdefault(str(user), []).append(str(group.get("name")))
            nxt = None if isinstance(page, list) else (page.get("_pagination") or {}).get("next")
            if not nxt or not items:
                return members
            offset = int(nxt.get("offset", offset + len(items)))

    async def stop_server(self, user: str, server: str) -> int:
        path = (
            f"/users/{quote(user)}/servers/{quote(server)}"
            if server
            else (f"/users/{quote(user)}/server")
        )
        code: int = await self._fetch("DELETE", path)
        return code

    async def start_server(self, user: str, server: str, options: Mapping[str, Any]) -> None:
        """Start the server with ``options`` as its ``user_options`` (scope ``servers``;
        sent as the whole body, which JupyterHub 5 and 6 both take as the options)."""
        path = (
            f"/users/{quote(user)}/servers/{quote(server)}"
            if server
            else f"/users/{quote(user)}/server"
        )
        await self._fetch("POST", path, accept="*/*", body=dict(options))

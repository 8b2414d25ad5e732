"""Which running server a request's hub token was issued to, as the hub says.

What only a single-user server does (report its activity, read and answer its warning, submit
its notebooks as Jobs) is taken only with the token the hub issued to that server when it
started, and only while the hub has that server running:

1. The token's scopes name exactly one server of its owner (``access:servers!server=U/S``,
   :func:`~gpuaas_service.reclaim.activity_store.server_of_token`): a cheap first filter, not
   the proof (a user may mint such a token for themselves).
2. The hub has that server running (``GET /hub/api/users/{U}``, scope ``read:servers``): a
   made-up server name is refused, never given a rate bucket or a place in the reports.
3. The token is the one the hub issued to that server: JupyterHub creates it as the server
   starts, with the note ``Server at <the server's URL>``, just before it sets the server's
   ``started``; of the owner's tokens with that note (``GET /hub/api/users/{U}/tokens``, scope
   ``read:tokens``), the newest created by then is the server's. A token its user mints with
   the same note is older (minted before the start) or newer (after it): refused. The caller's
   token is known by the ``token_id`` of the hub's answer for it (JupyterHub 5 or later).

Answers are cached (a user's servers for ``user_ttl`` seconds, asked again at most every
``refresh_after`` seconds for a server not in them; a server's token for as long as that start
lasts), and bounded, so a flood of requests costs the hub a few calls per user.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol
from urllib.parse import urlparse

from tornado import web

from gpuaas_service.clients.hub import HubError
from gpuaas_service.reclaim.activity_store import server_of_token
from jupyter_gpuaas.core.kueue import as_list, as_mapping, parse_time

__all__ = ["HubDirectory", "ServerTokens"]

SERVER_TOKEN_NOTE = "Server at "
"""How JupyterHub notes the token it issues to a server as it starts (``user.py``, spawn)."""
CREATED_SLACK = timedelta(seconds=1)
"""How much later than the server's ``started`` its token may say it was created."""


class HubDirectory(Protocol):
    """What :class:`ServerTokens` asks the hub (:class:`~gpuaas_service.clients.hub.HubClient`)."""

    async def user(self, name: str) -> dict[str, Any] | None: ...

    async def tokens(self, name: str) -> list[dict[str, Any]]: ...


class ServerTokens:
    """(user, server) of a server's own token, or an HTTP error that says why not."""

    def __init__(
        self,
        hub: HubDirectory,
        *,
        user_ttl: float = 30.0,
        refresh_after: float = 5.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hub = hub
        self.user_ttl = user_ttl
        self.refresh_after = refresh_after
        self.max_entries = max_entries
        self.clock = clock
        self._users: OrderedDict[str, tuple[float, Mapping[str, Any]]] = OrderedDict()
        """User → (when asked, their running servers by name)."""
        self._issued: OrderedDict[tuple[str, str, str], str] = OrderedDict()
        """(user, server, its started) → the id of the token the hub issued to that start."""
        self._asking: dict[str, asyncio.Future[Mapping[str, Any]]] = {}
        self.hub_calls = 0

    async def server_of(self, model: Mapping[str, Any] | None) -> tuple[str, str]:
        """(user, server) of a request whose token the hub answered ``model`` for
        (``GET /hub/api/user``); 403 with why for any other token, 503 while the hub cannot
        be asked."""
        if not model:
            raise web.HTTPError(
                403, "a server's token with the scope access:services!service=gpuaas is needed"
            )
        server = server_of_token(model)
        if server is None:
            raise web.HTTPError(
                403,
                "only a single-user server's own token may do this (its scopes name exactly one"
                " server: access:servers!server=USER/NAME)",
            )
        user = str(model["name"])
        token_id = model.get("token_id")
        if not isinstance(token_id, str) or not token_id:
            raise web.HTTPError(
                403, "the hub did not say which token this is (JupyterHub 5 or later is needed)"
            )
        running = await self._server(user, server)
        if running is None:
            raise web.HTTPError(403, f"the hub has no running server {user}/{server}")
        issued = await self._issued_token(user, server, running)
        if issued != token_id and self._may_ask_again(user):
            # the server may have started again since the hub was asked: its new token is
            # not the one remembered for the old start (asked at most every refresh_after)
            running = as_mapping(await self._ask_user(user)).get(server)
            if running is None:
                raise web.HTTPError(403, f"the hub has no running server {user}/{server}")
            issued = await self._issued_token(user, server, as_mapping(running))
        if issued != token_id:
            raise web.HTTPError(
                403,
                "only a single-user server's own token may do this: the one the hub issued to"
                f" the server {user}/{server} as it started (a token its user mints is not it)",
            )
        return user, server

    async def _server(self, user: str, server: str) -> Mapping[str, Any] | None:
        now = self.clock()
        cached = self._users.get(user)
        if cached is not None:
            asked_at, servers = cached
            fresh = now - asked_at < self.user_ttl
            if fresh and (server in servers or now - asked_at < self.refresh_after):
                found = servers.get(server)
                return as_mapping(found) if found is not None else None
        servers = await self._ask_user(user)
        found = servers.get(server)
        return as_mapping(found) if found is not None else None

    def _may_ask_again(self, user: str) -> bool:
        cached = self._users.get(user)
        return cached is None or self.clock() - cached[0] >= self.refresh_after

    async def _ask_user(self, user: str) -> Mapping[str, Any]:
        """The user's running servers, one hub call at a time per user."""
        pending = self._asking.get(user)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[Mapping[str, Any]] = asyncio.get_running_loop().create_future()
        self._asking[user] = future
        try:
            self.hub_calls += 1
            model = await self.hub.user(user)
            servers = {
                str(name): as_mapping(s)
                for name, s in as_mapping(as_mapping(model).get("servers")).items()
                if not as_mapping(s).get("stopped")
            }
        except HubError as e:
            error = _unavailable(e)
            future.set_exception(error)
            raise error from e
        except asyncio.CancelledError:
            future.cancel()  # the callers waiting on this answer are told too
            raise
        except Exception as e:
            future.set_exception(e)
            raise
        finally:
            del self._asking[user]
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: no "never retrieved" warning
        self._remember(self._users, user, (self.clock(), servers))
        future.set_result(servers)
        return servers

    async def _issued_token(self, user: str, server: str, running: Mapping[str, Any]) -> str:
        started = str(running.get("started") or "")
        key = (user, server, started)
        if key in self._issued:
            self._issued.move_to_end(key)
            return self._issued[key]
        try:
            self.hub_calls += 1
            tokens = await self.hub.tokens(user)
        except HubError as e:
            raise _unavailable(e) from e
        issued = issued_token_id(tokens, str(running.get("url") or ""), started)
        if issued:
            self._remember(self._issued, key, issued)
        return issued

    def _remember(self, table: OrderedDict[Any, Any], key: Any, value: Any) -> None:
        table.pop(key, None)
        table[key] = value
        while len(table) > self.max_entries:
            table.popitem(last=False)


def issued_token_id(tokens: list[dict[str, Any]], server_url: str, started: str) -> str:
    """The id of the token the hub issued to the server at ``server_url`` for its start at
    ``started`` (both from the hub's server model), among its user's ``tokens`` (the hub's
    token models); ``""`` if none is."""
    path = urlparse(server_url).path.rstrip("/")
    start = parse_time(started)
    if not path or start is None:
        return ""
    best: tuple[Any, str] | None = None
    for raw in as_list(tokens):
        token = as_mapping(raw)
        note = str(token.get("note") or "")
        created = parse_time(token.get("created"))
        if not note.startswith(SERVER_TOKEN_NOTE) or created is None:
            continue
        if note[len(SERVER_TOKEN_NOTE) :].rstrip("/") != path or created > start + CREATED_SLACK:
            continue
        if best is None or created > best[0]:
            best = (created, str(token.get("id") or ""))
    return best[1] if best is not None else ""


def _unavailable(e: HubError) -> web.HTTPError:
    return web.HTTPError(503, f"the hub cannot say which server this token is for now: {e}")

"""The Hub REST API handlers of :class:`.service.HubStandIn` (the part the gpuaas service
uses; the stand-in's docstring lists them). Imported when the stand-in's app is made, so that
the replay's workers never import tornado for it. The handlers know the stand-in only as
:class:`Hub` (what they read of it), so that this module does not import the service's."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol
from urllib.parse import unquote

from tornado import web


class Hub(Protocol):
    """What the handlers use of the hub stand-in (:class:`.service.HubStandIn`)."""

    requests: int
    stops: list[tuple[float, str, str, str]]
    stop_pod: Callable[[str], Awaitable[None]]

    @property
    def teams(self) -> Mapping[str, str]: ...

    @property
    def servers(self) -> Mapping[tuple[str, str], Any]: ...

    def by_token(self, token: str) -> dict[str, Any] | None: ...

    def user_model(self, name: str) -> dict[str, Any] | None: ...

    def tokens(self, name: str) -> list[dict[str, Any]]: ...

    def remove(self, user: str, name: str) -> None: ...


class Base(web.RequestHandler):
    def initialize(self, hub: Hub) -> None:
        self.hub = hub

    def caller(self) -> dict[str, Any] | None:
        """The token's owner (``Authorization: token …`` or ``bearer …``), else None."""
        self.hub.requests += 1
        auth = self.request.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        return self.hub.by_token(token.strip())

    def service_only(self) -> None:
        model = self.caller()
        if not model or model.get("kind") != "service":
            raise web.HTTPError(403)

    def answer(self, body: Any) -> None:
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(body))


class WhoAmI(Base):
    def get(self) -> None:
        model = self.caller()
        if model is None:
            raise web.HTTPError(403)
        self.answer(model)


class User(Base):
    def get(self, name: str) -> None:
        self.service_only()
        model = self.hub.user_model(unquote(name))
        if model is None:
            raise web.HTTPError(404)
        self.answer(model)


class Tokens(Base):
    def get(self, name: str) -> None:
        self.service_only()
        self.answer({"api_tokens": self.hub.tokens(unquote(name))})


class Groups(Base):
    def get(self) -> None:
        self.service_only()
        groups: dict[str, list[str]] = {}
        for user, team in sorted(self.hub.teams.items()):
            groups.setdefault(team, []).append(user)
        items = [{"name": g, "users": u} for g, u in sorted(groups.items())]
        self.answer({"items": items, "_pagination": {"next": None}})


class Stop(Base):
    async def delete(self, name: str, server: str) -> None:
        self.service_only()
        user, server = unquote(name), unquote(server)
        s = self.hub.servers.get((user, server))
        if s is None:
            raise web.HTTPError(404)
        self.hub.stops.append((time.monotonic(), user, server, s.pod))
        self.hub.remove(user, server)
        await self.hub.stop_pod(s.pod)
        self.set_status(202)
        self.finish()


def application(hub: Hub) -> web.Application:
    args = {"hub": hub}
    return web.Application(
        [
            (r"/hub/api/user", WhoAmI, args),
            (r"/hub/api/users/([^/]+)", User, args),
            (r"/hub/api/users/([^/]+)/tokens", Tokens, args),
            (r"/hub/api/groups", Groups, args),
            (r"/hub/api/users/([^/]+)/servers/([^/]*)", Stop, args),
        ]
    )

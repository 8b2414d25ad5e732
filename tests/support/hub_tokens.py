"""The hub as the gpuaas service's handlers see it: who a token is (``HubAuth``'s answer, ``GET
/hub/api/user``), which servers a user has running and which tokens they hold (``GET
/hub/api/users/{name}``, ``.../tokens``). One in-memory stand-in for those interfaces of our
collaborators, shaped as JupyterHub 5-6 answers them: a server's token is noted
``Server at <its URL>`` and created just before the server's ``started``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from gpuaas_service.clients.hub import HubError

SERVICE_SCOPE = "access:services!service=gpuaas"
STARTED = datetime(2026, 11, 30, 11, 0, tzinfo=timezone.utc)


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


class TokenHub:
    """Running servers, the tokens the hub issued them and tokens users minted themselves."""

    def __init__(self, groups: dict[str, list[str]] | None = None) -> None:
        self.running: dict[str, dict[str, dict[str, Any]]] = {}
        self.api_tokens: dict[str, list[dict[str, Any]]] = {}
        self.whoami: dict[str, dict[str, Any]] = {}
        """Token → the hub's answer for it."""
        self.groups = groups or {}
        self.calls: list[str] = []
        self.down = False
        self._ids = 0

    def _token(self, user: str, secret: str, scopes: list[str], note: str, at: datetime) -> str:
        self._ids += 1
        token_id = f"a{self._ids}"
        self.api_tokens.setdefault(user, []).append(
            {"id": token_id, "user": user, "kind": "api_token", "note": note, "created": iso(at)}
        )
        self.whoami[secret] = {
            "kind": "user",
            "name": user,
            "groups": self.groups.get(user, []),
            "scopes": scopes,
            "token_id": token_id,
            "session_id": None,
        }
        return secret

    def start(
        self, user: str, server: str = "", at: datetime = STARTED, *, secret: str = ""
    ) -> str:
        """Start ``user``'s ``server`` as the hub does; the token it issued that server
        (``secret``: its text, by default made up)."""
        url = f"/user/{user}/{server}/" if server else f"/user/{user}/"
        self.running.setdefault(user, {})[server] = {
            "name": server,
            "url": url,
            "started": iso(at),
            "ready": True,
            "pending": None,
            "stopped": False,
        }
        # JupyterHub notes the default server's URL with a doubled slash
        note = f"Server at {url}/" if not server else f"Server at {url}"
        scopes = [f"access:servers!server={user}/{server}", f"users:activity!user={user}"]
        secret = secret or f"server-{user}-{server}-{self._ids}"
        return self._token(
            user, secret, [*scopes, SERVICE_SCOPE], note, at - timedelta(milliseconds=30)
        )

    def stop(self, user: str, server: str = "") -> None:
        self.running.get(user, {}).pop(server, None)

    def mint(
        self,
        user: str,
        scopes: list[str],
        note: str = "",
        at: datetime = STARTED,
        *,
        secret: str = "",
    ) -> str:
        """A token ``user`` mints themselves (``POST /hub/api/users/{name}/tokens``)."""
        secret = secret or f"minted-{user}-{self._ids}"
        return self._token(user, secret, scopes, note or "Requested via api", at)

    # HubAuth's interface
    async def get_user(self, handler: Any, sync: bool = True) -> Any:
        token = handler.request.headers.get("Authorization", "").partition(" ")[2]
        return self.whoami.get(token)

    # HubClient's interface (web/servers.py HubDirectory)
    async def user(self, name: str) -> dict[str, Any] | None:
        self.calls.append(f"user {name}")
        if self.down:
            raise HubError(f"GET /users/{name}: connection refused")
        if name not in self.running and name not in self.api_tokens:
            return None
        return {"name": name, "servers": dict(self.running.get(name, {}))}

    async def tokens(self, name: str) -> list[dict[str, Any]]:
        self.calls.append(f"tokens {name}")
        if self.down:
            raise HubError(f"GET /users/{name}/tokens: connection refused")
        return list(self.api_tokens.get(name, []))

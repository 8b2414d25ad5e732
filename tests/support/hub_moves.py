"""The hub as the way up to a bigger GPU sees it (culler/gpuaas_service/resize/): the
servers' ``user_options``, and a stop and a start as JupyterHub does them (a stopping server is
listed, pending ``stop``, for a few polls; a start while it is listed is a bug of the caller)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from tests.support.hub_tokens import STARTED, TokenHub

TEAM_A = ["team-a"]


class MovingHub(TokenHub):
    """TokenHub with the servers' ``user_options``, and stops and starts as the hub does them."""

    def __init__(self) -> None:
        super().__init__(groups={"alice": TEAM_A, "bob": TEAM_A})
        self.options: dict[tuple[str, str], dict[str, Any]] = {}
        self.started: list[tuple[str, str, dict[str, Any]]] = []
        self.starts = 0
        self.last_token = ""
        self.stop_after = 2
        """How many times the hub still lists a stopping server."""

    def run(self, user: str, options: dict[str, Any], server: str = "") -> str:
        self.options[(user, server)] = options
        self.starts += 1
        self.last_token = self.start(user, server, STARTED + timedelta(minutes=self.starts))
        return self.last_token

    async def user(self, name: str) -> dict[str, Any] | None:
        model = await super().user(name)
        for server, entry in ((model or {}).get("servers") or {}).items():
            entry["user_options"] = self.options.get((name, server))
        return model

    async def stop_server(self, user: str, server: str) -> int:
        self.running[user][server] = {**self.running[user][server], "pending": "stop"}
        self.calls.append(f"stop {user}")
        return 202

    async def start_server(self, user: str, server: str, options: Mapping[str, Any]) -> None:
        assert server not in self.running.get(user, {}), "started while still running"
        self.started.append((user, server, dict(options)))
        self.run(user, dict(options), server)

    def tick(self) -> None:
        """One poll of the hub: a stopping server is gone after :attr:`stop_after` of them."""
        for servers in self.running.values():
            for server, entry in list(servers.items()):
                if entry.get("pending") == "stop":
                    self.stop_after -= 1
                    if self.stop_after <= 0:
                        del servers[server]


class TickingHub(MovingHub):
    async def user(self, name: str) -> dict[str, Any] | None:
        self.tick()
        return await super().user(name)

"""The real gpuaas service for the dev-cluster check, and the hub it talks to.

:class:`HubStandIn` is a small HTTP server on loopback that serves the part of the Hub REST API
the service uses, for the users and servers of the replayed window:

- ``GET /hub/api/user`` — who a token belongs to (``HubAuth`` asks it for every request the
  service gets): the service's own token, or a server's token with the scopes a server's token
  has (``access:servers!server=USER/NAME``, ``access:services!service=gpuaas``,
  ``users:activity!user=USER``) and the token's ``token_id``, as JupyterHub 5 gives it;
  anything else is ``403``;
- ``GET /hub/api/users/NAME`` — the user's groups (their team) and active servers with their
  ``url``, ``ready`` once the server has started (its pod Running, then the server's start-up,
  compressed);
- ``GET /hub/api/users/NAME/tokens`` — the user's tokens: the one issued to each server as it
  started, noted ``Server at URL`` (the service knows a server's own token by it:
  culler/gpuaas_service/web/servers.py);
- ``GET /hub/api/groups`` — the teams and their members (one page);
- ``DELETE /hub/api/users/NAME/servers/SERVER`` — stops the server as KubeSpawner does: the pod
  is deleted (grace period 0); ``202``, or ``404`` when it is not running.

Only the service's token may read users and groups and stop servers. :func:`start_service`
runs ``python -m gpuaas_service.app`` (= ``gpuaas-service``) with the ``gpuaas``
ServiceAccount's kubeconfig, the policy file given and the hub stand-in as its hub.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster.queue_hub import CULLER_SCOPES, SERVER_CHECK_SCOPES
from gpuaas_service.web.servers import SERVER_TOKEN_NOTE

SERVICE_SCOPES = list(dict.fromkeys([*CULLER_SCOPES, *SERVER_CHECK_SCOPES]))
"""The scopes the dev cluster's hub gives the gpuaas service."""


@dataclass
class Server:
    user: str
    name: str
    team: str
    pod: str
    created: float
    """Monotonic time the pod was created (the spawn)."""
    ready_at: float | None = None
    """Monotonic time the server is up (pod Running + the server's start-up)."""
    token: str = field(default_factory=lambda: "srv-" + secrets.token_hex(16))


class HubStandIn:
    """The Hub API for the window's users and servers (see the module docstring)."""

    def __init__(self, stop_pod: Callable[[str], Awaitable[None]], clock: Any) -> None:
        self.service_token = "svc-" + secrets.token_hex(16)
        self.servers: dict[tuple[str, str], Server] = {}
        self.teams: dict[str, str] = {}
        self.stop_pod = stop_pod
        self.clock = clock
        """The wall clock as an ISO string, for ``started``."""
        self.stops: list[tuple[float, str, str, str]] = []
        """(monotonic time, user, server, pod) of every stop the service asked for."""
        self.requests = 0

    def add(self, server: Server) -> None:
        self.servers[(server.user, server.name)] = server
        self.teams[server.user] = server.team

    def remove(self, user: str, name: str) -> None:
        self.servers.pop((user, name), None)

    @staticmethod
    def token_id(server: Server) -> str:
        """The hub's id for the token it issued to ``server`` (never the token itself)."""
        return "tok-" + server.token[-12:]

    def by_token(self, token: str) -> dict[str, Any] | None:
        if token == self.service_token:
            return {"kind": "service", "name": "gpuaas", "scopes": SERVICE_SCOPES}
        for s in self.servers.values():
            if s.token == token:
                return {
                    "kind": "user",
                    "name": s.user,
                    "groups": [s.team],
                    "scopes": [
                        f"access:servers!server={s.user}/{s.name}",
                        "access:services!service=gpuaas",
                        f"users:activity!user={s.user}",
                    ],
                    "token_id": self.token_id(s),
                }
        return None

    def tokens(self, name: str) -> list[dict[str, Any]]:
        """``name``'s tokens as the hub lists them: each server's, noted with its URL."""
        return [
            {
                "id": self.token_id(s),
                "note": f"{SERVER_TOKEN_NOTE}/user/{s.user}/{s.name}/",
                "created": self.clock(s.created),
            }
            for s in self.servers.values()
            if s.user == name
        ]

    def user_model(self, name: str) -> dict[str, Any] | None:
        if name not in self.teams:
            return None
        now = time.monotonic()
        servers = {}
        for s in self.servers.values():
            if s.user != name:
                continue
            ready = s.ready_at is not None and s.ready_at <= now
            servers[s.name] = {
                "name": s.name,
                "url": f"/user/{name}/{s.name}/",
                "ready": ready,
                "pending": None if ready else "spawn",
                "started": self.clock(s.created),
            }
        return {"kind": "user", "name": name, "groups": [self.teams[name]], "servers": servers}

    def make_app(self) -> Any:
        from .hub_handlers import application

        return application(self)


def start_service(
    *,
    hub_port: int,
    service_port: int,
    service_token: str,
    kubeconfig: Path,
    policy: Path,
    interval: float,
    save_lead: float,
    reports_per_minute: float,
    log: Path,
    job_namespaces: tuple[str, ...],
) -> subprocess.Popen[bytes]:
    """``gpuaas-service`` as the hub would start it, with ``policy`` and the cycle
    ``interval`` (seconds); its log (the audit lines among it) goes to ``log``."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "JUPYTERHUB_API_URL": f"http://127.0.0.1:{hub_port}/hub/api",
        "JUPYTERHUB_API_TOKEN": service_token,
        "JUPYTERHUB_SERVICE_NAME": "gpuaas",
        "JUPYTERHUB_SERVICE_URL": f"http://127.0.0.1:{service_port}",
        "JUPYTERHUB_SERVICE_PREFIX": "/services/gpuaas/",
        "JUPYTERHUB_OAUTH_ACCESS_SCOPES": json.dumps(["access:services!service=gpuaas"]),
    }
    args = [
        sys.executable,
        "-m",
        "gpuaas_service.app",
        f"--GPUaaSService.policy={policy}",
        f"--GPUaaSService.culler_interval={interval:g}",
        f"--GPUaaSService.save_lead={save_lead:g}",
        f"--GPUaaSService.activity_reports_per_minute={reports_per_minute:g}",
        "--GPUaaSService.poll_interval=1",
        *(f"--GPUaaSService.job_namespaces={ns}" for ns in job_namespaces),
    ]
    out = log.open("wb")
    return subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)


def audit_lines(log: Path) -> list[dict[str, Any]]:
    """The service's audit records (one JSON object per line, after the log prefix)."""
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        start = line.find('{"')
        if start < 0 or '"event": "culler.' not in line:
            continue
        try:
            out.append(json.loads(line[start:]))
        except ValueError:
            continue
    return out

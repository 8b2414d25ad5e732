"""A real JupyterHub on the dev cluster with the gpuaas service, and tokens for its users.

Used by tests/integration/test_queue_service.py, tests/real_hub/test_queue_browser.py and
benchmarks/bench_queue.py. The hub is devcluster/hub.py's; this adds the managed service ``gpuaas``
(``gpuaas-service``, culler/gpuaas_service/app.py, with the ``gpuaas`` ServiceAccount's
kubeconfig), grants users ``access:services!service=gpuaas`` and puts it in the servers' token
scopes (docs/queue.md).
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from devcluster.hub import DEFAULT_TEAMS, HubProcess, HubSettings, free_port
from jupyter_gpuaas.core.labels import HUB_TOKEN_SECRET_SUFFIX

SERVER_TOKEN_SCOPES = [
    "users:activity!user",
    "access:servers!server",
    "access:services!service=gpuaas",
]


CULLER_SCOPES = [
    "read:servers",
    "read:users:groups",
    "list:groups",
    "read:groups",
    "delete:servers",
]
"""What the gpuaas service needs of the Hub API to reclaim: a server's state and its user's
groups before acting on it, the groups when a policy names them, stopping servers. No
``list:users`` (it never lists users: it watches pods) and no ``access:servers`` (servers
report to it)."""

# `servers` (start and stop) exists in JupyterHub 5.5 and 6; 6 also calls the start part
# start:servers, which 5.5 (z2jh's hub image) does not know
RESIZE_SCOPES = ["delete:servers", "servers"]
"""What the way up to a bigger GPU needs (``api/resize``): stopping the asking user's server and
starting it again on the bigger offering (culler/gpuaas_service/resize/)."""

SERVER_CHECK_SCOPES = ["read:servers", "read:tokens"]
"""What the gpuaas service always needs of the Hub API: whether a server is running and which
token the hub issued to it (token ids and notes, never the tokens themselves), before it takes
a report, a "Keep my GPU" or a notebook Job from that server."""


OPERATOR_TOKEN = "dev-operator-" + secrets.token_hex(16)
"""The service's operator token in the dev cluster's hubs (``api/health``, ``metrics``)."""

CONSOLE_SCOPE = "custom:gpuaas:console"
"""The custom hub scope that opens the GPU console (docs/console.md); ``...!group=T``: team T
only."""

JOB_NAMESPACES = tuple(DEFAULT_TEAMS)
"""The dev cluster's teams' namespaces, where their training Jobs run."""


def service_config(
    port: int,
    kubeconfig: Path,
    poll_interval: float = 1.0,
    culler_args: Sequence[str] = (),
    report_interval: float | None = None,
    service_args: Sequence[str] = (),
    console_users: Sequence[str] = ("admin",),
) -> str:
    """The hub configuration lines for the gpuaas service (what an admin writes).

    ``service_args``: more ``gpuaas-service`` options (e.g. its ``catalog_file``, for notebook
    Jobs). ``culler_args`` (e.g. ``["--GPUaaSService.policy=policy.yaml"]``) turn on its reclaim
    loop, which then gets
    the Hub API scopes it needs; ``report_interval`` sets how often servers report activity.
    ``console_users`` (the hub's admins) and the admin service ``tester`` get the console's
    scope; its page logs browsers in through the hub's OAuth and is listed in the Services menu.
    """
    service = {
        "name": "gpuaas",
        "url": f"http://127.0.0.1:{port}",
        "command": [
            sys.executable,
            "-m",
            "gpuaas_service.app",  # = gpuaas-service
            f"--GPUaaSService.poll_interval={poll_interval:g}",
            # the dev cluster's teams run their training Jobs here (devcluster/manifests)
            *(f"--GPUaaSService.job_namespaces={ns}" for ns in JOB_NAMESPACES),
            *culler_args,
            *service_args,
        ],
        "environment": {"KUBECONFIG": str(kubeconfig), "GPUAAS_OPERATOR_TOKEN": OPERATOR_TOKEN},
        # the console's page: OAuth tokens of this service may carry the console scope
        "oauth_client_allowed_scopes": [CONSOLE_SCOPE],
        "oauth_no_confirm": True,
        "display": True,
    }
    roles: list[dict[str, Any]] = [
        {"name": "user", "scopes": ["self", "access:services!service=gpuaas"]},
        {
            "name": "gpuaas-console",
            "description": "The GPU console, every team",
            "scopes": [CONSOLE_SCOPE, "access:services!service=gpuaas"],
            "users": list(console_users),
        },
    ]
    # which running server a token was issued to (culler/gpuaas_service/web/servers.py)
    roles.append({"name": "gpuaas-servers", "services": ["gpuaas"], "scopes": SERVER_CHECK_SCOPES})
    roles.append({"name": "gpuaas-resize", "services": ["gpuaas"], "scopes": RESIZE_SCOPES})
    if culler_args:
        roles.append({"name": "gpuaas-culler", "services": ["gpuaas"], "scopes": CULLER_SCOPES})
    scopes = {CONSOLE_SCOPE: {"description": "Read the GPU console of the gpuaas service"}}
    template_vars = {"gpuaas_console": {"url": "/services/gpuaas/console/", "scope": CONSOLE_SCOPE}}
    lines = f"""
# The gpuaas hub service (docs/queue.md, docs/culler.md, docs/console.md)
c.JupyterHub.custom_scopes = {json.dumps(scopes)}
# the "GPU console" link in the hub's navigation, for those with the console scope
import gpuaas_spawner
c.JupyterHub.template_paths = [gpuaas_spawner.HUB_TEMPLATES]
c.JupyterHub.template_vars = {json.dumps(template_vars)}
c.JupyterHub.services.append({service!r})
c.JupyterHub.load_roles.extend({json.dumps(roles)})
# the tests' admin service "tester", where there is one, reads the console too
for _role in c.JupyterHub.load_roles:
    if _role["name"] == "gpuaas-console":
        _role["services"] = [s["name"] for s in c.JupyterHub.services if s["name"] == "tester"]
c.Spawner.server_token_scopes = {json.dumps(SERVER_TOKEN_SCOPES)}
c.KubeSpawner.environment.update({{"GPUAAS_SERVICE_URL": "http://127.0.0.1:{port}/services/gpuaas/"}})
"""
    if report_interval is not None:
        lines += (
            f'c.KubeSpawner.args.append("--GPUaaS.activity_report_interval={report_interval:g}")\n'
        )
    return lines


class QueueHub:
    def __init__(self, hub: HubProcess, admin_token: str, service_port: int) -> None:
        self.hub = hub
        self.admin_token = admin_token
        self.service_port = service_port

    @property
    def service_url(self) -> str:
        """The service through the hub's proxy (what servers are configured with)."""
        return f"{self.hub.url}/services/gpuaas/"

    def request(self, path: str, token: str, method: str = "GET", body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.hub.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"null")

    def user_token(self, user: str, scopes: list[str] | None = None) -> str:
        """A token for ``user`` as the hub issues one to their server."""
        out = self.request(
            f"/hub/api/users/{user}/tokens",
            self.admin_token,
            "POST",
            {"scopes": scopes or SERVER_TOKEN_SCOPES, "expires_in": 3600, "note": "queue test"},
        )
        return str(out["token"])

    def server_token(self, user: str, offering: str = "cpu", timeout: float = 120.0) -> str:
        """The token the hub issued to ``user``'s default server, started here (on
        ``offering``) unless it runs. Only such a token passes the service's server check:
        one with the same scopes that a test mints itself is refused, as a user's would be."""
        running = self.request(f"/hub/api/users/{user}", self.admin_token)["servers"].get("")
        if not running:
            self.request(
                f"/hub/api/users/{user}/server", self.admin_token, "POST", {"offering": offering}
            )
        deadline = time.monotonic() + timeout
        while not (running and running.get("ready")):
            if time.monotonic() > deadline:
                raise AssertionError(f"{user}'s server not ready in {timeout}s: {running}")
            time.sleep(0.5)
            running = self.request(f"/hub/api/users/{user}", self.admin_token)["servers"].get("")
        return secret_token(
            self.hub.settings.kubeconfig, f"jupyter-{user}{HUB_TOKEN_SECRET_SUFFIX}"
        )

    def queue(self, token: str) -> dict[str, Any]:
        out: dict[str, Any] = self.request("/services/gpuaas/api/queue", token)
        return out

    def wait_synced(self, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                health = self.request("/services/gpuaas/api/health", OPERATOR_TOKEN)
                if health.get("synced"):
                    return dict(health)
                last = health
            except (OSError, urllib.error.URLError) as e:
                last = e
            time.sleep(0.5)
        raise AssertionError(
            f"gpuaas service not synced in {timeout}s: {last}\n{self.hub.log_tail()}"
        )


def secret_token(kubeconfig: Path, name: str, namespace: str = "jupyter-users") -> str:
    """The ``token`` of Secret ``name``, read with ``kubeconfig`` (a ServiceAccount's: its
    bearer token and the cluster's CA, as :func:`devcluster.kube.write_kubeconfig` writes)."""
    cfg = yaml.safe_load(kubeconfig.read_text())
    cluster, creds = cfg["clusters"][0]["cluster"], cfg["users"][0]["user"]
    ctx = ssl.create_default_context(
        cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
    )
    req = urllib.request.Request(
        f"{cluster['server']}/api/v1/namespaces/{namespace}/secrets/{name}",
        headers={"Authorization": f"Bearer {creds['token']}", "Accept": "application/json"},
    )
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        secret = json.loads(resp.read())
    return base64.b64decode(secret["data"]["token"]).decode()


@contextmanager
def queue_hub(
    state_dir: Path,
    cluster_state: Path,
    kubeconfig: Path | None = None,
    service_args: Sequence[str] = (),
) -> Iterator[QueueHub]:
    """Start the hub with the gpuaas service; stop both at the end.

    ``kubeconfig``: the service's (default: the ``gpuaas`` ServiceAccount's, under
    ``cluster_state``); the benchmarks pass one that goes through their counting proxy."""
    token = secrets.token_hex(16)
    port = free_port()
    settings = HubSettings(
        state_dir=state_dir,
        kubeconfig=cluster_state / "credentials" / "hub.kubeconfig",
        service_token=token,
        extra_config=service_config(
            port,
            kubeconfig or cluster_state / "credentials" / "gpuaas.kubeconfig",
            service_args=service_args,
        ),
    )
    hub = HubProcess(settings)
    hub.start()
    try:
        qh = QueueHub(hub, token, port)
        qh.wait_synced()
        yield qh
    finally:
        hub.stop()

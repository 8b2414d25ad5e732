"""Real JupyterHub with GPUaaSSpawner on the dev cluster (tests/hub).

``hub`` (session): a ``jupyterhub`` process (demo/hub.py: DummyAuthenticator, users alice and bob
in team-a, carol and dave in team-b, the catalog spawner/demo-catalog.yaml, configurable-http-
proxy) whose spawner talks to the cluster of ``devcluster.testing.cluster`` as the ServiceAccount
``jupyterhub/hub``. Servers on the local offerings run as real ``jupyterhub-singleuser``
processes on the node agent's node. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # devcluster and demo run from the repository
    sys.path.insert(0, str(REPO_ROOT))

from demo.hub import HubProcess, HubSettings  # noqa: E402
from devcluster.testing import Cluster, cluster  # noqa: E402

__all__ = ["cluster", "hub", "k8s"]

USERS_NS = "jupyter-users"


@dataclass
class Response:
    status: int
    body: Any


class Hub:
    """The running hub and a small REST client (admin service token, or a user's token)."""

    def __init__(self, proc: HubProcess, token: str) -> None:
        self.proc = proc
        self.url = proc.url
        self.token = token
        self._user_tokens: dict[str, str] = {}

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> Response:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            f"{self.url}/hub/api{path}",
            method=method,
            data=data,
            headers={
                "Authorization": f"token {token or self.token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                text = r.read().decode()
                return Response(r.status, json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            try:
                return Response(e.code, json.loads(text))
            except ValueError:
                return Response(e.code, text)

    def user_token(self, name: str) -> str:
        """A token of the user (as they would make on /hub/token)."""
        if name not in self._user_tokens:
            r = self.api("POST", f"/users/{name}/tokens", {"note": "hub tests"})
            assert r.status == 201, r
            self._user_tokens[name] = r.body["token"]
        return self._user_tokens[name]

    def server(self, user: str, server: str = "") -> dict[str, Any] | None:
        r = self.api("GET", f"/users/{user}")
        assert r.status == 200, r
        found: dict[str, Any] | None = r.body["servers"].get(server)
        return found

    def wait_ready(self, user: str, server: str = "", timeout: float = 90.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.server(user, server)
            if s and s.get("ready"):
                return s
            if s is None:
                raise AssertionError(f"{user}/{server} stopped:\n{self.proc.log_tail()}")
            time.sleep(0.5)
        raise AssertionError(f"{user}/{server} not ready in {timeout}s:\n{self.proc.log_tail()}")

    def stop(self, user: str, server: str = "", timeout: float = 60.0) -> None:
        """Stop (or cancel) a server and wait until the hub says it is gone."""
        path = f"/users/{user}/servers/{server}" if server else f"/users/{user}/server"
        r = self.api("DELETE", path, timeout=timeout)
        assert r.status in (202, 204, 400, 404), r  # 400/404: not running
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.server(user, server)
            if s is None or (s.get("stopped") and not s.get("pending")):
                return
            time.sleep(0.5)
        raise AssertionError(f"{user}/{server} did not stop in {timeout}s")

    def progress_events(
        self, user: str, server: str = "", *, until: str, timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        """Read the spawn's progress stream (SSE) until a message contains ``until``."""
        path = (
            f"/users/{user}/servers/{server}/progress"
            if server
            else f"/users/{user}/server/progress"
        )
        req = urllib.request.Request(
            f"{self.url}/hub/api{path}", headers={"Authorization": f"token {self.token}"}
        )
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        with urllib.request.urlopen(req, timeout=timeout) as r:
            for raw in r:
                line = raw.decode().strip()
                if line.startswith("data:"):
                    event = json.loads(line[5:])
                    events.append(event)
                    if until in str(event.get("message", "")):
                        return events
                if time.monotonic() > deadline:
                    break
        raise AssertionError(f"no progress message with {until!r} in {events}")


@pytest.fixture(scope="session")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    state = tmp_path_factory.mktemp("hub")
    token = secrets.token_hex(24)
    # The hub's own ServiceAccount (jupyterhub/hub) and the project's RBAC, nothing more.
    kubeconfig = cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig")
    settings = HubSettings(
        state_dir=state,
        kubeconfig=kubeconfig,
        service_token=token,
        queue_timeout=300.0,
        start_timeout=90,
        poll_interval=1.0,
    )
    proc = HubProcess(settings)
    proc.start()
    try:
        yield Hub(proc, token)
    finally:
        proc.stop()


@pytest.fixture
async def k8s(cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """An admin-ish view for checking what exists: the read-only gpuaas ServiceAccount cannot
    read Secrets, so this uses the hub's own identity (which the tests never write with)."""
    async with cluster.api("jupyterhub", "hub") as api:
        yield api

"""A real JupyterHub with GPUaaSSpawner on the dev cluster: for ``make demo`` and tests/real_hub.

:func:`write_hub_config` writes a ``jupyterhub_config.py`` for a cluster started by
``devcluster.up()``; :class:`HubProcess` runs ``jupyterhub`` with it (and
configurable-http-proxy), all on 127.0.0.1. The hub talks to Kubernetes with its own
ServiceAccount token (``<cluster state>/credentials/hub.kubeconfig``, RBAC of
``devcluster/manifests/50-rbac.yaml`` and ``55-hub-secrets-rbac.yaml``). Users' servers are pods
in ``jupyter-users`` queued by Kueue; on the node agent's node ``local-0`` they are real
``jupyterhub-singleuser`` processes with simulated GPUs and the GPU sidebar.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devcluster import procs
from devcluster.config import DEFAULT_PORT_BASE
from devcluster.config import DEMO_CATALOG as DEMO_CATALOG

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TEAMS: dict[str, list[str]] = {"team-a": ["alice", "bob"], "team-b": ["carol", "dave"]}


# Ports handed out below Linux's ephemeral range (32768-60999 by default): a port from the
# ephemeral range can be taken by any outgoing connection between this check and the server's
# bind (seen: "Failed to bind hub ... Address already in use"). The dev clusters' blocks start
# at 26400, so stay below that. Each dev cluster's sessions (tests, benchmarks, the demo) take
# ports from their own block of 100, keyed by the cluster's GPUAAS_CLUSTER_PORT_BASE: runs on two
# clusters of one machine cannot pick the same port while a hub or service that was handed it
# is still starting (seen: a test's requests answered by another run's gpuaas service).
_PORT_RANGE = (15000, 26000)
_BLOCK_SIZE = 100
# From a random place in the block, so that a run does not start where the last one left
# servers that may still be going away.
_next_in_block = itertools.count(random.randrange(_BLOCK_SIZE))


def port_block(env: Mapping[str, str] | None = None) -> range:
    """The ports this process hands out: the block of its dev cluster's port base."""
    raw = (env if env is not None else os.environ).get("GPUAAS_CLUSTER_PORT_BASE") or ""
    base = int(raw) if raw.isdigit() else DEFAULT_PORT_BASE
    blocks = (_PORT_RANGE[1] - _PORT_RANGE[0]) // _BLOCK_SIZE
    start = _PORT_RANGE[0] + (base // _BLOCK_SIZE) % blocks * _BLOCK_SIZE
    return range(start, start + _BLOCK_SIZE)


# Ports this process handed out, and when: one that is not bound yet looks free, so it is not
# handed out again for a while (two calls would otherwise meet at the same next free port).
_handed_out: dict[int, float] = {}
_HOLD_SECONDS = 300.0


def free_port(preferred: int = 0) -> int:
    """``preferred`` if it is free on 127.0.0.1, else the next free port of :func:`port_block`
    that this process has not handed out in the last few minutes."""
    block = port_block()
    first = next(_next_in_block)
    now = time.monotonic()
    recent = {p for p, at in _handed_out.items() if now - at < _HOLD_SECONDS}
    candidates = [preferred] if preferred else []
    in_turn = (block[(first + i) % len(block)] for i in range(len(block)))
    candidates += [p for p in in_turn if p not in recent]
    for port in candidates:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out[port] = now
        return port
    raise RuntimeError(
        f"no free port in {block.start}-{block.stop - 1} on 127.0.0.1: stop the hubs and servers "
        "of earlier runs, or use another GPUAAS_CLUSTER_PORT_BASE"
    )


def find_chp() -> str:
    """The configurable-http-proxy executable JupyterHub starts (raises if there is none)."""
    candidates = [
        os.environ.get("CONFIGPROXY_EXECUTABLE", ""),
        shutil.which("configurable-http-proxy") or "",
        str(REPO / "node_modules" / ".bin" / "configurable-http-proxy"),  # from `npm ci`
    ]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "configurable-http-proxy not found: run `make install` (it comes with `npm ci`), "
        "or set CONFIGPROXY_EXECUTABLE"
    )


@dataclass
class HubSettings:
    """Where and how the hub runs."""

    state_dir: Path
    kubeconfig: Path
    port: int = 0  # public (proxy) port; 0: a free one
    catalog_file: Path = DEMO_CATALOG
    teams: Mapping[str, list[str]] = field(default_factory=lambda: dict(DEFAULT_TEAMS))
    admin_users: tuple[str, ...] = ("admin",)
    password: str = "gpuaas-demo"
    service_token: str = ""  # an admin service "tester" with this token, if set
    queue_timeout: float = 600.0
    start_timeout: int = 120
    poll_interval: float = 1.0
    persistent_homes: bool = False
    """Each server's home on a persistent volume (a claim per server, KubeSpawner's storage
    settings as Zero to JupyterHub sets them by default), kept across stops."""
    extra_config: str = ""


# KubeSpawner's storage settings as Zero to JupyterHub's default (singleuser.storage.type
# dynamic): a claim per server, of the cluster's default StorageClass, mounted at the home.
PERSISTENT_HOMES_CONFIG = """
c.KubeSpawner.storage_pvc_ensure = True
c.KubeSpawner.storage_capacity = "10Gi"
c.KubeSpawner.storage_access_modes = ["ReadWriteOnce"]
c.KubeSpawner.volumes = [
    {"name": "volume-{user_server}", "persistentVolumeClaim": {"claimName": "{pvc_name}"}},
]
c.KubeSpawner.volume_mounts = [{"name": "volume-{user_server}", "mountPath": "/home/jovyan"}]
"""


def write_hub_config(settings: HubSettings) -> Path:
    """Write ``jupyterhub_config.py`` (and pick free ports); return its path."""
    state = settings.state_dir
    state.mkdir(parents=True, exist_ok=True)
    if not settings.port:
        settings.port = free_port()
    hub_port, api_port = free_port(), free_port()
    groups = {team: {"users": list(users)} for team, users in settings.teams.items()}
    services: list[dict[str, object]] = []
    roles: list[dict[str, object]] = []
    if settings.service_token:
        services.append({"name": "tester", "api_token": settings.service_token})
        roles.append({"name": "admin", "services": ["tester"]})
    venv_bin = str(Path(sys.executable).parent)
    text = f"""\
# Written by devcluster/hub.py for the dev cluster; every value is on 127.0.0.1.
c = get_config()  # noqa: F821
c.JupyterHub.spawner_class = "gpuaas"
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {settings.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{api_port}"
c.ConfigurableHTTPProxy.command = [{find_chp()!r}]
c.ConfigurableHTTPProxy.pid_file = {str(state / "proxy.pid")!r}
c.JupyterHub.db_url = "sqlite:///{state / "jupyterhub.sqlite"}"
c.JupyterHub.cookie_secret_file = {str(state / "cookie_secret")!r}
c.JupyterHub.pid_file = {str(state / "jupyterhub.pid")!r}
c.JupyterHub.allow_named_servers = True
c.JupyterHub.cleanup_servers = True

# Demo users: any of these names with the password below.
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = {settings.password!r}
c.Authenticator.allowed_users = {sorted({u for us in settings.teams.values() for u in us})!r}
c.Authenticator.admin_users = {sorted(settings.admin_users)!r}
c.JupyterHub.load_groups = {json.dumps(groups)}
c.JupyterHub.services = {json.dumps(services)}
c.JupyterHub.load_roles = {json.dumps(roles)}

# Queued spawns are pending spawns: they hold these slots while they wait in Kueue's queue.
c.JupyterHub.concurrent_spawn_limit = 50
c.JupyterHub.active_server_limit = 0
# Only errors count (JupyterHub 6): queue timeouts and refused options are clean 400s, so the
# usual limit (z2jh's 5; the hub exits when it is reached) stays safe with queued spawns.
c.Spawner.consecutive_failure_limit = 5

c.KubeSpawner.namespace = "jupyter-users"
c.KubeSpawner.image = "localhost/jupyter-gpuaas-dev:local"
c.KubeSpawner.cmd = ["jupyterhub-singleuser"]
# The node agent runs the command from this machine (PATH: {venv_bin} first), and gives each
# server the node's simulated GPUs of its allocation (nodes.yaml simulatedGpus).
c.KubeSpawner.args = [{'"--allow-root",' if os.geteuid() == 0 else ""}
    "--GPUaaS.gpu_source=simulated",
]
c.KubeSpawner.default_url = "/lab"
c.KubeSpawner.start_timeout = {settings.start_timeout}
c.KubeSpawner.http_timeout = {settings.start_timeout}
c.KubeSpawner.delete_grace_period = 5
c.KubeSpawner.uid = None
c.KubeSpawner.fs_gid = None
c.KubeSpawner.environment = {{"JUPYTERLAB_SETTINGS_DIR": "$(HOME)/lab-settings"}}

c.GPUaaSSpawner.catalog_file = {str(settings.catalog_file)!r}
c.GPUaaSSpawner.queue_timeout = {settings.queue_timeout}
c.GPUaaSSpawner.queue_poll_interval = {settings.poll_interval}
c.GPUaaSSpawner.stop_timeout = 30

from gpuaas_spawner import check_catalog  # noqa: E402
check_catalog(c)
{PERSISTENT_HOMES_CONFIG if settings.persistent_homes else ""}
{settings.extra_config}
"""
    path = state / "jupyterhub_config.py"
    path.write_text(text)
    return path


class HubProcess:
    """``jupyterhub -f <config>`` as a child process (its own session; log in the state dir).

    JupyterHub starts its proxy and its managed services in sessions of their own, so they
    outlive a hub that dies. While the hub runs, :meth:`running` notes every process below it;
    :meth:`stop` stops the hub and then each of those still alive, however the hub ended, so
    that nothing it started keeps its port."""

    def __init__(self, settings: HubSettings, *, env: Mapping[str, str] | None = None) -> None:
        self.settings = settings
        self.config = write_hub_config(settings)
        self.log_path = settings.state_dir / "jupyterhub.log"
        self.url = f"http://127.0.0.1:{settings.port}"
        self._env = dict(env if env is not None else os.environ)
        self._env["KUBECONFIG"] = str(settings.kubeconfig)
        self._env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + self._env["PATH"]
        self.proc: subprocess.Popen[bytes] | None = None
        self._started: dict[int, procs.ProcRecord] = {}

    def running(self) -> bool:
        """Whether the hub runs; notes the processes it has started meanwhile."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        for rec in procs.descendants(self.proc.pid):
            self._started.setdefault(rec.pid, rec)
        return True

    @property
    def started_processes(self) -> list[procs.ProcRecord]:
        """The processes noted below the hub (proxy, services), alive or not."""
        return list(self._started.values())

    def start(self, timeout: float = 90.0) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "jupyterhub", "-f", str(self.config), "--debug"],
                cwd=self.settings.state_dir,
                env=self._env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running():
                self.stop()  # what it started before it exited
                raise RuntimeError(
                    f"jupyterhub exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.05)  # a refused connection costs nothing; the tests start sooner
        self.stop()
        raise RuntimeError(f"jupyterhub did not answer in {timeout:.0f}s:\n{self.log_tail()}")

    def service_pid(self) -> int | None:
        """The pid of the gpuaas service this hub started (its managed service), if it runs."""
        if self.proc is None:
            return None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.proc.pid and b"gpuaas_service.app" in cmdline:
                return int(entry.name)
        return None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> list[str]:
        """SIGTERM (the hub stops its servers: ``cleanup_servers``), SIGKILL after ``timeout``;
        then whatever it had started and left running (its proxy, its services), also after a
        crash. Returns notes on what had to be killed."""
        proc = self.proc
        if proc is not None and self.running():
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        return procs.stop_together(self._started.values(), timeout=10)

"""One culler cycle with N running servers on one hub, against jupyterhub-idle-culler.

Sets up (loopback only):

- the dev cluster (the running one if any, else one started and stopped again at the end;
  ``GPUAAS_CLUSTER_*`` pick which) with ``--servers``
  notebook pods in ``jupyter-users`` bound to kwok's simulated nodes, labelled and annotated as
  GPUaaSSpawner's pods are (``component=singleuser-server``, team, offering, hub user and server
  name, GPU requests, ``GPUAAS_OFFERING_KIND``), created in bulk with the admin's credentials;
- a real JupyterHub whose database already holds the N users, each with a running default
  server: the rows are written before the hub starts, with a spawner class (``BenchSpawner``, in
  the generated config) whose ``poll()`` says "running" and a null proxy, so no process runs per
  server; at start-up the hub checks each server's URL once, answered by one tiny HTTP responder;
- two hub services with their own tokens and the scopes each documents: ``gpuaas`` (the culler:
``devcluster.queue_hub.CULLER_SCOPES``) and
  ``idle-culler`` (``list:users``, ``read:users:activity``,
  ``read:servers``, ``delete:servers``).

Then, in the same process and alternating, ``--rounds`` times: one :class:`ReclaimLoop` cycle (the
real ``HubClient``, ``KubeClient`` with the gpuaas ServiceAccount's kubeconfig, the
``WatchedKueueView`` watch caches and the notebook pod watch of ``gpuaas-service``, an activity
report per server — all idle, no queued work, so nothing is reclaimed; the policy exempts a
group, so each cycle reads the hub's groups) and one ``jupyterhub_idle_culler.cull_idle``
(``--timeout`` 1 h, servers
active just now, so nothing is culled; its defaults otherwise: pages of the hub's default
size). Counted per cycle: hub API requests (every ``AsyncHTTPClient.fetch`` to the hub), and
for the culler the Kubernetes API requests (counted from the outside, by a proxy between its
client and the API server, ``benchmarks/kube_counter.py``; the watches are long-lived streams
opened before, not per cycle). A first culler cycle is run before and shown
apart: it writes one audit line per server (an unchanged skip is logged once).

    python -m benchmarks.bench_culler [--servers 5000] [--rounds 3] [--keep]

Needs ``jupyterhub-idle-culler`` in the environment (the ``test`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devcluster.cluster import ClusterInfo, running  # noqa: E402
from devcluster.queue_hub import CULLER_SCOPES  # noqa: E402 - the repository is on the path now

NS = "jupyter-users"
BENCH_LABEL = "gpuaas-bench"
# (node, offering, kind, GPU resource) cycled over the servers: kwok's simulated nodes only.
SHAPES = [
    ("h100-0", "h100", "gpu", "nvidia.com/gpu"),
    ("a100-mig-0", "mig-1g", "mig", "nvidia.com/mig-1g.5gb"),
    ("l4-shared-0", "l4-shared", "shared", "nvidia.com/gpu.shared"),
    ("h100-1", "h100", "gpu", "nvidia.com/gpu"),
]
TEAMS = ("team-a", "team-b")
IDLE_CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]


def gpu_policy(**rule: str) -> dict[str, Any]:
    """The benchmarks' reclaim policy (the service's benchmarks share it): one rule for every
    GPU kind, idle after 30 min, reclaimed when queued work needs it or after 8 h idle;
    admins exempt. ``rule``: fields added to the rule (``warn_before="10m"``)."""
    return {
        "report_stale_after": "10m",
        "policies": [
            {
                "name": "gpus",
                "match": {"kinds": ["gpu", "mig", "shared"]},
                "idle_after": "30m",
                "reclaim": "when-queued",
                "max_idle": "8h",
                **rule,
            }
        ],
        "exempt": {"groups": ["admins"]},
    }


POLICY = gpu_policy()

HUB_CONFIG = """\
from jupyterhub.proxy import Proxy
from jupyterhub.spawner import Spawner


class BenchSpawner(Spawner):
    \"\"\"No process: start() returns the responder's URL, poll() says running.\"\"\"

    async def start(self):
        return "http://127.0.0.1:{responder}"

    async def poll(self):
        return None

    async def stop(self, now=False):
        return None


class NullProxy(Proxy):
    \"\"\"No proxy: the benchmark talks to the hub's API port directly.\"\"\"

    should_start = False

    async def add_route(self, routespec, target, data):
        return None

    async def delete_route(self, routespec):
        return None

    async def get_all_routes(self):
        return {{}}


c.JupyterHub.spawner_class = BenchSpawner
c.JupyterHub.proxy_class = NullProxy
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {proxy_port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{db}"
c.JupyterHub.cookie_secret_file = "{state}/cookie_secret"
c.JupyterHub.cleanup_servers = False
c.JupyterHub.authenticator_class = "null"
c.JupyterHub.last_activity_interval = 3600
c.JupyterHub.log_level = "WARN"
c.Spawner.poll_interval = 0
c.Spawner.http_timeout = 600
c.JupyterHub.services = [
    {{"name": "gpuaas", "api_token": "{culler_token}"}},
    {{"name": "idle-culler", "api_token": "{idle_token}"}},
]
c.JupyterHub.load_roles = [
    {{"name": "gpuaas-culler", "scopes": {culler_scopes!r}, "services": ["gpuaas"]}},
    {{"name": "idle-culler", "scopes": {idle_scopes!r}, "services": ["idle-culler"]}},
]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- pods


def pod_manifest(i: int, user: str) -> dict[str, Any]:
    node, offering, kind, gpu = SHAPES[i % len(SHAPES)]
    team = TEAMS[i % len(TEAMS)]
    env = {
        "JUPYTERHUB_API_URL": "http://hub:8081/hub/api",
        "JUPYTERHUB_ACTIVITY_URL": f"http://hub:8081/hub/api/users/{user}/activity",
        "JUPYTERHUB_BASE_URL": "/",
        "JUPYTERHUB_CLIENT_ID": f"jupyterhub-user-{user}",
        "JUPYTERHUB_OAUTH_CALLBACK_URL": f"/user/{user}/oauth_callback",
        "JUPYTERHUB_SERVER_NAME": "",
        "JUPYTERHUB_SERVICE_PREFIX": f"/user/{user}/",
        "JUPYTERHUB_SERVICE_URL": f"http://0.0.0.0:8888/user/{user}/",
        "JUPYTERHUB_USER": user,
        "JPY_API_TOKEN": "",
        "GPUAAS_OFFERING_KIND": kind,
        "GPUAAS_SERVICE_URL": "http://proxy-public/services/gpuaas/",
        "MEM_GUARANTEE": "536870912",
        "CPU_GUARANTEE": "0.5",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"jupyter-{user}",
            "namespace": NS,
            "labels": {
                "component": "singleuser-server",
                "app": "jupyterhub",
                "heritage": "jupyterhub",
                "hub.jupyter.org/servername": "",
                "hub.jupyter.org/username": user,
                "gpuaas.jupyter.org/team": team,
                "gpuaas.jupyter.org/offering": offering,
                BENCH_LABEL: "culler",
            },
            "annotations": {
                "hub.jupyter.org/username": user,
                "hub.jupyter.org/servername": "",
            },
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "OnFailure",
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "name": "notebook",
                    "image": "localhost/jupyter-gpuaas-dev:local",
                    "args": ["jupyterhub-singleuser"],
                    "ports": [{"name": "notebook-port", "containerPort": 8888}],
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "resources": {
                        "requests": {"cpu": "500m", "memory": "512Mi", gpu: "1"},
                        "limits": {"cpu": "1", "memory": "1Gi", gpu: "1"},
                    },
                }
            ],
            "tolerations": [
                {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


async def create_pods(api: Any, users: list[str], concurrency: int = 24) -> None:
    from kubernetes_asyncio import client
    from kubernetes_asyncio.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
    for item in enumerate(users):
        queue.put_nowait(item)

    async def worker() -> None:
        while not queue.empty():
            i, user = queue.get_nowait()
            try:
                body: Any = pod_manifest(i, user)
                await core.create_namespaced_pod(NS, body)
            except ApiException as e:
                if e.status != 409:  # already there (--keep from an earlier run)
                    raise

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def delete_pods(api: Any, timeout: float = 300) -> None:
    """Delete the benchmark's pods, wait until they are gone, and delete the Events kwok wrote
    about pods in the namespace (thousands: they would otherwise linger for the Event TTL in
    every list of the namespace's Events)."""
    from kubernetes_asyncio import client

    core = client.CoreV1Api(api)
    selector = f"{BENCH_LABEL}=culler"
    await core.delete_collection_namespaced_pod(NS, label_selector=selector, grace_period_seconds=0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = await core.list_namespaced_pod(NS, label_selector=selector, limit=1)
        if not left.items:
            break
        await asyncio.sleep(2)
    await core.delete_collection_namespaced_event(NS, field_selector="source=kwok_controller")


# --------------------------------------------------------------------------- the hub


def write_users(db: Path, users: list[str], responder_port: int) -> None:
    """The users, their groups and a running default server each, straight into the hub's DB."""
    from jupyterhub import orm

    session = orm.new_session_factory(f"sqlite:///{db}")()
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    groups = {}
    for team in TEAMS:
        group = session.query(orm.Group).filter_by(name=team).first() or orm.Group(name=team)
        session.add(group)
        groups[team] = group
    for i, name in enumerate(users):
        user = orm.User(name=name, last_activity=now)
        user.groups.append(groups[TEAMS[i % len(TEAMS)]])
        server = orm.Server(ip="127.0.0.1", port=responder_port, base_url=f"/user/{name}/")
        spawner = orm.Spawner(name="", server=server, started=now, last_activity=now)
        user._orm_spawners.append(spawner)
        session.add(user)
    session.commit()
    session.close()


class Responder:
    """Answers every URL with 200: the hub's start-up check of each server's URL."""

    def __init__(self) -> None:
        from tornado.httpserver import HTTPServer
        from tornado.web import Application, RequestHandler

        class Ok(RequestHandler):
            def get(self, path: str) -> None:
                self.write("ok")

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        sock.setblocking(False)
        self.port = int(sock.getsockname()[1])
        self.server = HTTPServer(Application([(r"/(.*)", Ok)]))
        self.server.add_sockets([sock])

    def stop(self) -> None:
        self.server.stop()


@contextlib.asynccontextmanager
async def bench_hub(state: Path, users: list[str]) -> AsyncIterator[dict[str, Any]]:
    from tornado.httpclient import AsyncHTTPClient, HTTPClientError

    responder = Responder()
    hub_port = free_port()
    tokens = {"culler": secrets.token_hex(24), "idle": secrets.token_hex(24)}
    db = state / "jupyterhub.sqlite"
    (state / "jupyterhub_config.py").write_text(
        HUB_CONFIG.format(
            responder=responder.port,
            proxy_port=free_port(),
            hub_port=hub_port,
            db=db,
            state=state,
            culler_token=tokens["culler"],
            idle_token=tokens["idle"],
            culler_scopes=CULLER_SCOPES,
            idle_scopes=IDLE_CULLER_SCOPES,
        )
    )
    write_users(db, users, responder.port)
    log = (state / "hub.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterhub", "-f", str(state / "jupyterhub_config.py")],
        cwd=state,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    api = f"http://127.0.0.1:{hub_port}/hub/api"
    started = time.monotonic()
    try:
        client = AsyncHTTPClient()
        while True:
            if proc.poll() is not None:
                tail = (state / "hub.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"jupyterhub exited:\n{tail}")
            with contextlib.suppress(HTTPClientError, OSError):
                await client.fetch(api + "/", request_timeout=5)
                break
            if time.monotonic() - started > 900:
                raise RuntimeError("jupyterhub did not start in 15 min")
            await asyncio.sleep(1)
        # every server checked and still running?
        headers = {"Authorization": f"token {tokens['idle']}"}
        resp = await client.fetch(
            api + "/users?state=active&limit=1",
            headers={**headers, "Accept": "application/jupyterhub-pagination+json"},
            request_timeout=60,
        )
        total = json.loads(resp.body)["_pagination"]["total"]
        if total != len(users):
            raise RuntimeError(f"{total} active users on the hub, not {len(users)}")
        yield {
            "api": api,
            "tokens": tokens,
            "pid": proc.pid,
            "start_seconds": time.monotonic() - started,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        responder.stop()


def idle_report(now: datetime, since: datetime) -> dict[str, Any]:
    """An activity report of a server idle since ``since`` (one idle kernel)."""
    stamp = since.isoformat()
    return {
        "sampled_at": now.isoformat(),
        "source": "simulated",
        "kernels": [{"kernel_id": "k", "execution_state": "idle", "last_activity": stamp}],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": stamp,
    }


# --------------------------------------------------------------------------- counting


class HubCounter:
    """Counts every ``AsyncHTTPClient.fetch`` to the hub (both cullers use tornado's client)."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.n = 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[HubCounter]:
        from tornado.httpclient import AsyncHTTPClient

        original = AsyncHTTPClient.fetch
        counter = self

        def fetch(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            url = request if isinstance(request, str) else request.url
            if url.startswith(counter.api):
                counter.n += 1
            return original(self, request, *args, **kwargs)

        AsyncHTTPClient.fetch = fetch  # type: ignore[method-assign]
        try:
            yield self
        finally:
            AsyncHTTPClient.fetch = original  # type: ignore[method-assign]


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# --------------------------------------------------------------------------- the run


async def run(args: argparse.Namespace) -> int:
    # A cluster this run started is stopped at the end; one already running is left running.
    with running() as info:
        return await run_on(args, info)


async def run_on(args: argparse.Namespace, info: ClusterInfo) -> int:
    from kubernetes_asyncio import config as kconfig

    from benchmarks.kube_counter import CountingProxy
    from devcluster.testing import Cluster

    # the peer, as installed (no type information of its own)
    cull_idle = importlib.import_module("jupyterhub_idle_culler").cull_idle
    users = [f"bench{i:05d}" for i in range(args.servers)]

    admin = await kconfig.new_client_from_config(str(info.kubeconfig))
    pods_seconds = await timed_pods(admin, users)

    # The culler's Kubernetes client: the gpuaas ServiceAccount, as in the service, through a
    # proxy that counts its requests (the admin's client above goes direct: not counted).
    logdir = Path(tempfile.mkdtemp(prefix="bench-culler-"))
    direct = Cluster(info).kubeconfig_for("jupyterhub", "gpuaas", logdir / "gpuaas.kubeconfig")
    proxy = CountingProxy(direct, logdir / "counted.kubeconfig").__enter__()
    kubeconfig = proxy.kubeconfig

    def k8s_requests() -> int:
        return proxy.count

    view, pod_watch = await start_watches(kubeconfig)

    handler = culler_logs(logdir / "culler.log")

    rows: dict[str, list[tuple[float, int, int]]] = {"gpuaas-culler": [], "idle-culler": []}
    hub_info: dict[str, Any] = {}
    parts: dict[str, float] = {}
    hub_rss = 0.0
    status = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"starting a hub with {len(users)} running servers ...", flush=True)
            async with bench_hub(Path(tmp), users) as hub:
                hub_info = hub
                print(f"  {hub['start_seconds']:.1f} s", flush=True)
                status, parts = await measure(
                    args.rounds, hub, view, pod_watch, users, k8s_requests, cull_idle, rows
                )
                hub_rss = rss_mib(hub["pid"])
    finally:
        await view.stop()
        await pod_watch.stop()
        if not args.keep:
            await delete_pods(admin)
        await admin.close()
        handler.close()
        proxy.__exit__(None, None, None)
        shutil.rmtree(logdir, ignore_errors=True)

    print_figures(len(users), pods_seconds, hub_info, hub_rss, args.rounds, rows, parts)
    return status


async def timed_pods(admin: Any, users: list[str]) -> float:
    """Create the users' pods on kwok's nodes; the seconds it took."""
    t = time.monotonic()
    print(f"creating {len(users)} pods on kwok's nodes ...", flush=True)
    await create_pods(admin, users)
    pods_seconds = time.monotonic() - t
    print(f"  {pods_seconds:.1f} s", flush=True)
    return pods_seconds


async def start_watches(kubeconfig: Path) -> tuple[Any, Any]:
    """The service's Kueue view and notebook pod watch, as the ServiceAccount of
    ``kubeconfig``, loaded."""
    from kubernetes_asyncio import config as kconfig
    from kubernetes_asyncio.config import kube_config

    from gpuaas_service.clients.kubernetes import notebook_pod_reflector
    from jupyter_gpuaas.hub.kueue_watch import WatchedKueueView

    # kubespawner's load_config() (in the watch caches) reads the default location, taken from
    # $KUBECONFIG when kubernetes_asyncio was imported: point it at the ServiceAccount's.
    kube_config.KUBE_CONFIG_DEFAULT_LOCATION = str(kubeconfig)
    await kconfig.load_kube_config(config_file=str(kubeconfig))
    from kubespawner.clients import load_config, shared_client

    load_config()
    view = WatchedKueueView(
        namespaces=[NS, "team-a", "team-b"],
        custom_objects_api=lambda: shared_client("CustomObjectsApi"),
        poll_interval=2.0,
    )
    await view.start(timeout=60)
    pod_watch = notebook_pod_reflector(NS)
    await pod_watch.start()
    await asyncio.wait_for(pod_watch.first_load_future, 120)
    return view, pod_watch


async def measure(
    n_rounds: int,
    hub: dict[str, Any],
    view: Any,
    pod_watch: Any,
    users: Sequence[str],
    k8s_requests: Callable[[], int],
    cull_idle: Any,
    rows: dict[str, list[tuple[float, int, int]]],
) -> tuple[int, dict[str, float]]:
    """Against the running hub: a first gpuaas cycle, then the rounds of both cullers (into
    ``rows``), then where a cycle's time goes; (1 where our culler acted, else 0; the parts)."""
    from gpuaas_service.clients.hub import HubClient
    from gpuaas_service.clients.kubernetes import KubeClient
    from gpuaas_service.reclaim.activity_store import ActivityStore
    from gpuaas_service.reclaim.loop import Feeds, ReclaimLoop, Settings
    from gpuaas_service.reclaim.policy import load_policy

    idle_log = logging.getLogger("idle-culler")
    counter = HubCounter(hub["api"])
    store = ActivityStore()
    loop = ReclaimLoop(
        hub=HubClient(hub["api"], hub["tokens"]["culler"], timeout=120),
        kube=KubeClient(timeout=120),
        view=view,
        policies=load_policy(POLICY),
        store=store,
        settings=Settings(notebook_namespace=NS, job_namespaces=("team-a", "team-b")),
        feeds=Feeds(pods=lambda: pod_watch.resources.values()),
    )

    def report() -> None:
        now = datetime.now(timezone.utc)
        payload = idle_report(now, now)
        for u in users:
            store.record(u, "", payload, now)

    async def ours() -> tuple[float, int, int, int]:
        report()  # the servers' reports arrive between cycles, not timed
        hub0, k0 = counter.n, k8s_requests()
        t0 = time.perf_counter()
        plan = await loop.cycle()
        took = time.perf_counter() - t0
        if plan is None:
            raise RuntimeError(f"culler cycle failed: {loop.state.last_error}")
        acted = sum(1 for d in plan.decisions if d.action.value != "skip")
        return took, counter.n - hub0, k8s_requests() - k0, acted

    async def theirs() -> tuple[float, int, int]:
        hub0, k0 = counter.n, k8s_requests()
        t0 = time.perf_counter()
        await cull_idle(
            url=hub["api"],
            api_token=hub["tokens"]["idle"],
            inactive_limit=3600,
            logger=idle_log,
        )
        return time.perf_counter() - t0, counter.n - hub0, k8s_requests() - k0

    with counter.installed():
        first = await ours()
        print(
            f"first culler cycle (one audit line per server): {first[0]:.2f} s,"
            f" {first[1]} hub + {first[2]} Kubernetes calls",
            flush=True,
        )
        status = await rounds(n_rounds, ours, theirs, rows)
        parts = await cycle_parts(loop)  # where a cycle's time goes
    return status, parts


def culler_logs(path: Path) -> logging.Handler:
    """Both cullers' logs into ``path`` only (a line per server would drown the figures)."""
    handler = logging.FileHandler(path)
    for name in ("gpuaas.culler", "idle-culler"):
        lg = logging.getLogger(name)
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    return handler


async def rounds(
    n: int,
    ours: Callable[[], Awaitable[tuple[float, int, int, int]]],
    theirs: Callable[[], Awaitable[tuple[float, int, int]]],
    rows: dict[str, list[tuple[float, int, int]]],
) -> int:
    """``n`` rounds of a gpuaas cycle then an idle-culler cycle, into ``rows``; 1 where our
    culler acted on a server (the cycles are meant to be no-ops), else 0."""
    status = 0
    for r in range(n):
        took, hub_calls, k_calls, acted = await ours()
        if acted:
            print(f"  the culler acted on {acted} servers: not a no-op cycle")
            status = 1
        rows["gpuaas-culler"].append((took, hub_calls, k_calls))
        rows["idle-culler"].append(await theirs())
        print(
            f"  round {r + 1}: gpuaas-culler {rows['gpuaas-culler'][-1][0]:.2f} s,"
            f" idle-culler {rows['idle-culler'][-1][0]:.2f} s",
            flush=True,
        )
    return status


async def cycle_parts(loop: Any) -> dict[str, float]:
    """Where a cycle's time goes: the hub's groups, the flavors and the notebook pods, each
    read once (not counted in the rounds)."""
    parts: dict[str, float] = {}
    t0 = time.perf_counter()
    await loop.hub.group_members()
    parts["hub groups (every page)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    await loop.kube.flavor_labels()
    parts["ResourceFlavors, one list"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    await loop.kube.list_pods(NS)
    parts["notebook pods, one list (the watch saves it)"] = time.perf_counter() - t0
    return parts


def print_figures(
    servers: int,
    pods_seconds: float,
    hub_info: dict[str, Any],
    hub_rss: float,
    n_rounds: int,
    rows: dict[str, list[tuple[float, int, int]]],
    parts: dict[str, float],
) -> None:
    print()
    print(
        f"{servers} running servers (pods created in {pods_seconds:.0f} s; hub started in"
        f" {hub_info.get('start_seconds', 0):.0f} s, RSS {hub_rss:.0f} MiB); nothing culled;"
        f" {n_rounds} rounds"
    )
    print(f"{'':16} {'cycle s (median, min-max)':>28} {'hub calls':>10} {'k8s calls':>10}")
    for name, values in rows.items():
        times = [v[0] for v in values]
        print(
            f"{name:16} {statistics.median(times):>12.2f} ({min(times):.2f}-{max(times):.2f})"
            f"{'':6} {statistics.median(v[1] for v in values):>10.0f}"
            f" {statistics.median(v[2] for v in values):>10.0f}"
        )
    for what, seconds in parts.items():
        print(f"  {what}: {seconds:.2f} s")
    ours_t = statistics.median(v[0] for v in rows["gpuaas-culler"])
    theirs_t = statistics.median(v[0] for v in rows["idle-culler"])
    print(f"gpuaas-culler / idle-culler cycle time: {ours_t / theirs_t:.2f} (aim: <= 0.5)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--servers", type=int, default=5000, help="running servers (default 5000)")
    p.add_argument("--rounds", type=int, default=3, help="cycles of each culler (default 3)")
    p.add_argument("--keep", action="store_true", help="leave the pods on the cluster")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

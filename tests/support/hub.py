"""Shared helpers of the hub tests: the running hub, its users' pods and Workloads, a browser
logged in to it, and the hub with the gpuaas service's reclaim loop (tests/real_hub)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import secrets
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect

from devcluster.chromium import CHROMIUM, CHROMIUM_ARGS
from devcluster.hub import DEFAULT_TEAMS, HubProcess, HubSettings, free_port
from devcluster.queue_hub import OPERATOR_TOKEN, secret_token, service_config
from devcluster.testing import Cluster, on_local_node
from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
from gpuaas_service.reclaim.handoffs import HANDOFFS_CONFIGMAP

USERS_NS = "jupyter-users"
FAILURE_LIMIT = 5  # devcluster/hub.py's Spawner.consecutive_failure_limit (z2jh's default)


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

    def contents(self, user: str, path: str, body: Any = None) -> Any:
        """Jupyter Server's contents API of the user's server, through the hub's proxy: GET
        ``path``, or PUT ``body`` (a contents model) there."""
        req = urllib.request.Request(
            f"{self.url}/user/{user}/api/contents/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "PUT",
            headers={
                "Authorization": f"token {self.user_token(user)}",
                "Content-Type": "application/json",
            },
        )
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())

    def server_token(self, user: str, offering: str = "cpu") -> str:
        """The token the hub issued to ``user``'s default server (started on ``offering``
        unless it runs), from the server's token Secret: only that token passes the gpuaas
        service's server check (one a test mints with the same scopes is refused)."""
        if self.server(user) is None:
            self.start_all({user: {"offering": offering}})
        self.wait_ready(user)
        return secret_token(self.proc.settings.kubeconfig, f"jupyter-{user}-hub-token")

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

    def start_all(self, spawns: dict[str, dict[str, Any]], timeout: float = 120.0) -> None:
        """Ask for every user's default server with its options, then wait until all are ready."""
        for user, options in spawns.items():
            r = self.api("POST", f"/users/{user}/server", options)
            assert r.status in (201, 202), f"{r}\n{self.proc.log_tail()}"
        for user in spawns:
            self.wait_ready(user, timeout=timeout)

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


KUEUE = ("kueue.x-k8s.io", "v1beta2")


def usage_of(hub: Hub, user: str) -> dict[str, Any]:
    """The user's server's own GPU usage API (the jupyter_gpuaas server extension's
    ``gpuaas/api/usage``), as the sidebar reads it: through the hub's proxy, with the user's
    token."""
    req = urllib.request.Request(
        f"{hub.url}/user/{user}/gpuaas/api/usage",
        headers={"Authorization": f"token {hub.user_token(user)}"},
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


# Users of team-a in the session hub whose only use of it is to read the spawn form: the form
# keeps a user's last choice (and restarts it after a stop they did not choose), so the advice
# test needs users with no last choice, whatever ran before it.
ADVICE_USERS = ("erin", "frank")


def resize_offer(hub: Hub, user: str = "alice") -> Any:
    """What the user's server answers for the ways up and down (``gpuaas/api/resize``), or
    (its HTTP status, the start of its body) when it refuses: for a failure's message too."""
    req = urllib.request.Request(
        f"{hub.url}/user/{user}/gpuaas/api/resize",
        headers={"Authorization": f"token {hub.user_token(user)}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return (e.code, e.read()[:500])


async def pods_of(api: client.ApiClient, user: str) -> list[dict[str, Any]]:
    core = client.CoreV1Api(api)
    found = await core.list_namespaced_pod(
        USERS_NS, label_selector=f"hub.jupyter.org/username={user}", _preload_content=False
    )
    items: list[dict[str, Any]] = json.loads(await found.read())["items"]  # type: ignore[attr-defined]
    return items


async def workloads_of(api: client.ApiClient, pod_names: set[str]) -> list[dict[str, Any]]:
    crd = client.CustomObjectsApi(api)
    listing = await crd.list_namespaced_custom_object(*KUEUE, USERS_NS, "workloads")
    out = []
    for w in listing["items"]:
        owners = {o.get("name") for o in w["metadata"].get("ownerReferences") or []}
        if owners & pod_names or any(
            w["metadata"]["name"].startswith(f"pod-{n}-") for n in pod_names
        ):
            out.append(w)
    return out


async def secret_value(api: client.ApiClient, name: str) -> str | None:
    core = client.CoreV1Api(api)
    try:
        secret = await core.read_namespaced_secret(name, USERS_NS)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
    return base64.b64decode((secret.data or {})["token"]).decode()


async def eventually(check: Any, timeout: float = 30.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.5)
    raise AssertionError(f"not so within {timeout}s: {what} (last: {last})")


async def no_pods(api: client.ApiClient, user: str) -> bool:
    """Whether none of the user's pods is left (not even one going away)."""
    return not await pods_of(api, user)


async def delete_home(api: client.ApiClient, user: str) -> None:
    """Delete the user's home volume claim (persistent homes: ``claim-<user>``, KubeSpawner's
    default name), if there is one."""
    try:
        await client.CoreV1Api(api).delete_namespaced_persistent_volume_claim(
            f"claim-{user}", USERS_NS
        )
    except ApiException as e:
        if e.status != 404:
            raise


async def nothing_left(api: client.ApiClient, user: str, pod_name: str) -> bool:
    pods = await pods_of(api, user)
    wls = await workloads_of(api, {pod_name})
    secret = await secret_value(api, f"{pod_name}-hub-token")
    return not pods and not wls and secret is None


@contextmanager
def own_hub(cluster: Cluster, state: Path, **settings: Any) -> Iterator[Hub]:
    """A hub of the test's own (devcluster/hub.py's configuration with ``settings``)."""
    token = secrets.token_hex(24)
    settings.setdefault("start_timeout", 90)
    proc = HubProcess(
        HubSettings(
            state_dir=state,
            kubeconfig=cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig"),
            service_token=token,
            **settings,
        )
    )
    proc.start()
    try:
        yield Hub(proc, token)
    finally:
        proc.stop()


PASSWORD = "gpuaas-demo"  # devcluster/hub.py's default


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} missing: `make chromium` (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            await b.close()


async def login(
    browser: Any,
    hub: Hub,
    user: str,
    *,
    until: str | Callable[[str], bool] = "**/hub/**",
    commit: bool = False,
    timeout: float | None = None,
) -> Any:
    """A new browser context's page logged in as ``user``, once its URL matches ``until``
    (``commit``: as soon as that page's response starts, not when it has loaded)."""
    context = await browser.new_context()
    page = await context.new_page()
    page.set_default_timeout(30_000)
    await page.goto(f"{hub.url}/hub/login")
    await page.fill("#username_input", user)
    await page.fill("#password_input", PASSWORD)
    await page.click("#login_submit")
    await page.wait_for_url(until, wait_until="commit" if commit else "load", timeout=timeout)
    return page


MIG = "nvidia.com/mig-1g.5gb"


WARNED = "gpuaas.jupyter.org/reclaim-warned-at"


POLICY = """\
report_stale_after: 30s
handoff_timeout: 2m
policies:
  # bob and dave: the restart test, whose window must hold a service restart and a snooze.
  - name: local-mig-restart
    match: {kinds: [mig], users: [bob, dave]}
    idle_after: 2s
    warn_before: 60s
    max_snoozes: 1
    snooze_for: 1h
  - name: local-mig
    match: {kinds: [mig]}
    idle_after: 2s
    warn_before: 20s
    max_snoozes: 1
    snooze_for: 1h
"""


# The sample organisation's training queues do not cover the local flavor (its pods would run
# for real on this machine): a queue of the cohort "gpuaas" that does, for this module only. It
# owns nothing on local and borrows what the notebooks' queues lend.
QUEUE = """apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: culler-test-training}
spec:
  cohortName: gpuaas
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: team-a}
  resourceGroups:
    - coveredResources: [nvidia.com/mig-1g.5gb]
      flavors:
        - name: local
          resources: [{name: nvidia.com/mig-1g.5gb, nominalQuota: 0}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: culler-test, namespace: team-a}
spec: {clusterQueue: culler-test-training}
"""


def culler_config(
    port: int,
    kubeconfig: Path,
    policy: Path,
    save_lead: float = 3,
    dry_run: bool = False,
    extra_args: Sequence[str] = (),
) -> str:
    args = [
        f"--GPUaaSService.policy={policy}",
        "--GPUaaSService.culler_interval=1",
        f"--GPUaaSService.save_lead={save_lead}",
        *(["--GPUaaSService.culler_dry_run=True"] if dry_run else []),
        *extra_args,
    ]
    return service_config(port, kubeconfig, poll_interval=1, culler_args=args, report_interval=1)


class CullerHub(Hub):
    def __init__(self, proc: HubProcess, token: str, port: int) -> None:
        super().__init__(proc, token)
        self.port = port

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/services/gpuaas/metrics"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(r.read().decode())

    def audit(self) -> list[dict[str, Any]]:
        out = []
        for line in self.proc.log_path.read_text(errors="replace").splitlines():
            if "gpuaas.culler.audit" in line and "{" in line:
                out.append(json.loads(line[line.index("{") :]))
        return out


@contextmanager
def run_culler_hub(
    cluster: Cluster,
    state: Path,
    *,
    save_lead: float = 3,
    dry_run: bool = False,
    policy_text: str = POLICY,
    extra_args: Sequence[str] = (),
    extra_config: str = "",
    teams: Mapping[str, list[str]] | None = None,
    persistent_homes: bool = False,
) -> Iterator[CullerHub]:
    """A hub with the gpuaas service and the culler (policy above unless ``policy_text``), for
    one test module; ``extra_args``: more ``gpuaas-service`` options; ``extra_config``: more
    hub configuration lines; ``teams``: its users (default: devcluster/hub.py's);
    ``persistent_homes``: homes on volume claims as Zero to JupyterHub keeps them (deleted
    when the module ends)."""
    kubectl = str(cluster.info.bin_dir / "kubectl")
    admin = [kubectl, "--kubeconfig", str(cluster.info.kubeconfig)]
    subprocess.run([*admin, "apply", "-f", "-"], input=QUEUE.encode(), check=True)
    forget = [*admin, "-n", USERS_NS, "delete", "configmap", HANDOFFS_CONFIGMAP, JOURNAL_CONFIGMAP]
    # each module's culler starts with no hand-off records or console journal of an earlier one
    subprocess.run([*forget, "--ignore-not-found"], check=True)
    policy = state / "policy.yaml"
    policy.write_text(policy_text)
    token = secrets.token_hex(24)
    port = free_port()
    settings = HubSettings(
        state_dir=state,
        kubeconfig=cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig"),
        service_token=token,
        start_timeout=90,
        poll_interval=1.0,
        teams=dict(DEFAULT_TEAMS if teams is None else teams),
        persistent_homes=persistent_homes,
        extra_config=culler_config(
            port,
            cluster.kubeconfig_for("jupyterhub", "gpuaas", state / "gpuaas.kubeconfig"),
            policy,
            save_lead,
            dry_run,
            extra_args,
        )
        + extra_config,
    )
    proc = HubProcess(settings)
    proc.start()
    try:
        yield CullerHub(proc, token, port)
    finally:
        proc.stop()
        subprocess.run(
            [*admin, "-n", "team-a", "delete", "jobs", "-l", "gpuaas-test=culler", "--wait"],
            check=False,
        )
        subprocess.run([*admin, "delete", "-f", "-"], input=QUEUE.encode(), check=False)
        if persistent_homes:  # the next module's users start with empty homes
            claims = [f"claim-{user}" for users in settings.teams.values() for user in users]
            delete = [*admin, "-n", USERS_NS, "delete", "pvc", *claims, "--ignore-not-found"]
            subprocess.run([*delete, "--timeout=60s"], check=False)  # gone, not terminating


async def make_busy(hub: Hub, user: str) -> None:
    """Start a kernel in the user's server and keep it executing (a long sleep)."""
    await run_in_new_kernel(hub, user, "import time; time.sleep(900)", until="execute_input")


async def run_in_new_kernel(
    hub: Hub, user: str, code: str, *, until: str, notebook: str = ""
) -> None:
    """Start a kernel in the user's server (``notebook``'s, in a session, where given) and send
    it ``code``; return once it answers with ``until`` (``execute_input``: it runs it;
    ``execute_reply``: it ran it, without error)."""
    token = hub.user_token(user)
    session = {
        "path": notebook,
        "name": notebook,
        "type": "notebook",
        "kernel": {"name": "python3"},
    }
    req = urllib.request.Request(
        f"{hub.url}/user/{user}/api/{'sessions' if notebook else 'kernels'}",
        data=json.dumps(session).encode() if notebook else b"{}",
        method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        answer = json.loads(r.read())
        kernel = answer["kernel"]["id"] if notebook else answer["id"]
    ws_url = hub.url.replace("http", "ws", 1) + f"/user/{user}/api/kernels/{kernel}/channels"
    ws = await websocket_connect(
        HTTPRequest(ws_url, headers={"Authorization": f"token {token}"}, connect_timeout=60)
    )
    msg = {
        "header": {
            "msg_id": uuid.uuid4().hex,
            "username": user,
            "session": uuid.uuid4().hex,
            "msg_type": "execute_request",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "channel": "shell",
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
    }
    await ws.write_message(json.dumps(msg))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        raw = await asyncio.wait_for(ws.read_message(), 60)
        if raw is None:
            break
        reply = json.loads(raw)
        if reply.get("msg_type") == until:
            if until == "execute_reply":
                assert reply["content"]["status"] == "ok", reply["content"]
            return
    raise AssertionError(f"{user}'s kernel never answered {until} to {code!r}")


def training_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "culler-test", "gpuaas-test": "culler"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    **on_local_node(),
                    "containers": [
                        {
                            "name": "train",
                            "image": "localhost/train:dev",
                            "command": ["sleep", "60"],
                            "resources": {"requests": {MIG: "1"}, "limits": {MIG: "1"}},
                        }
                    ],
                }
            },
        },
    }


async def pod_of(api: client.ApiClient, user: str) -> dict[str, Any] | None:
    core = client.CoreV1Api(api)
    resp = await core.list_namespaced_pod(
        USERS_NS, label_selector=f"hub.jupyter.org/username={user}", _preload_content=False
    )
    items: list[dict[str, Any]] = json.loads(await resp.read())["items"]  # type: ignore[attr-defined]
    return items[0] if items else None


async def delete_jobs(cluster: Cluster, k8s: client.ApiClient) -> None:
    async with cluster.api("team-a", "alice") as api:
        batch = client.BatchV1Api(api)
        for job in (await batch.list_namespaced_job("team-a", label_selector="gpuaas-test")).items:
            await batch.delete_namespaced_job(
                job.metadata.name, "team-a", propagation_policy="Background"
            )

    async def gone() -> bool:
        crd = client.CustomObjectsApi(k8s)
        wls = await crd.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "team-a", "workloads"
        )
        return not wls["items"]

    await eventually(gone, 60, "the Job's workload to go")


async def warnings_on(k8s: client.ApiClient, pod: dict[str, Any]) -> int:
    events = await client.CoreV1Api(k8s).list_namespaced_event(USERS_NS)
    return sum(
        1
        for e in events.items
        if e.involved_object.uid == pod["metadata"]["uid"] and e.reason == "GPUReclaimWarning"
    )


def service_get(
    hub: Hub, path: str, token: str, method: str = "GET", body: bytes | None = None
) -> Any:
    """``(status, body)`` of a request to the gpuaas service through the hub's proxy (the body
    parsed when it is JSON)."""
    req = urllib.request.Request(
        f"{hub.url}/services/gpuaas/{path}",
        method=method,
        data=body,
        headers={"Authorization": f"token {token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, json.loads(text) if r.headers["Content-Type"].startswith(
                "application/json"
            ) else text
    except urllib.error.HTTPError as e:
        text = e.read().decode()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text


async def restart_service(hub: Hub, ready: Any, timeout: float, what: str) -> Any:
    """Stop the hub's gpuaas service (SIGTERM), as a crash or a deploy would; the hub starts it
    again at its next poll of its managed services (about 30 s). Returns the first truthy
    ``await ready()`` of the new process."""
    old = hub.proc.service_pid()
    assert old is not None, "the gpuaas service is not running"
    os.kill(old, signal.SIGTERM)

    async def restarted() -> Any:
        pid = hub.proc.service_pid()
        if pid is None or pid == old:
            return None
        try:
            return await ready()
        except OSError:  # not listening yet
            return None

    return await eventually(restarted, timeout, what)


def spawn_counts(hub: Hub) -> dict[tuple[str, str], float]:
    """JupyterHub's own tally of finished spawns, by (status, reason), from /hub/metrics
    (it lists some pairs with 0 from the start)."""
    req = urllib.request.Request(
        f"{hub.url}/hub/metrics", headers={"Authorization": f"token {hub.token}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        text = r.read().decode()
    counts: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("jupyterhub_server_spawn_duration_seconds_count{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.index("}")]))
            # JupyterHub 5.5 has no "reason" label (and no "error" status: every failure counts)
            key = (labels["status"], labels.get("reason", ""))
            counts[key] = float(line.rsplit(" ", 1)[1])
    return counts


def snooze(hub: Hub, user: str) -> tuple[int, dict[str, Any]]:
    """ "Keep my GPU" in ``user``'s JupyterLab: through their server to the gpuaas service."""
    req = urllib.request.Request(
        f"{hub.url}/user/{user}/gpuaas/api/reclaim/snooze",
        data=b"",
        method="POST",
        headers={"Authorization": f"token {hub.user_token(user)}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

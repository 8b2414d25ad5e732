"""Pods on local-0 run as real processes, each at its own loopback pod IP."""

from __future__ import annotations

import asyncio
import os
import time
import urllib.request
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.testing import Cluster, churn_same_name, core, wait_for

pytestmark = pytest.mark.integration

NS = "jupyter-users"
PORT = 18080

# Binds the host:port of JUPYTERHUB_SERVICE_URL, as jupyterhub-singleuser does.
SINGLEUSER_LIKE = (
    "import http.server, os, urllib.parse as u\n"
    "url = u.urlsplit(os.environ['JUPYTERHUB_SERVICE_URL'])\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = (os.environ['HOME'] + ' ' + os.environ['GREETING']).encode()\n"
    "        self.send_response(200); self.end_headers(); self.wfile.write(body)\n"
    "http.server.HTTPServer((url.hostname, url.port), H).serve_forever()\n"
)


def local_pod(name: str, container: dict[str, Any]) -> dict[str, Any]:
    container.setdefault("resources", {"requests": {"cpu": "100m", "memory": "64Mi"}})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                "kueue.x-k8s.io/queue-name": "team-a",
                "kueue.x-k8s.io/priority-class": "interactive",
            },
        },
        "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": {"gpuaas.dev/pool": "local"},
            "terminationGracePeriodSeconds": 5,
            "containers": [container],
        },
    }


def http_get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


async def ready_ip(v1: Any, name: str) -> str | None:
    pod = await v1.read_namespaced_pod(name, NS)
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    return pod.status.pod_ip if pod.status.phase == "Running" and ready else None


async def test_local_pods_serve_http_at_their_own_pod_ips(cluster: Cluster) -> None:
    plain = local_pod(
        "web-plain",
        {
            "name": "web",
            "image": "python:3.11",
            "command": ["python3", "-m", "http.server", "--bind", "$(POD_IP)", str(PORT)],
            "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1},
        },
    )
    singleuser = local_pod(
        "web-singleuser",
        {
            "name": "notebook",
            "image": "quay.io/jupyter/base-notebook",
            "args": ["python3", "-c", SINGLEUSER_LIKE],
            "env": [
                # what KubeSpawner sets (ip 0.0.0.0): the agent binds it to the pod IP
                {"name": "JUPYTERHUB_SERVICE_URL", "value": f"http://0.0.0.0:{PORT}/user/x/"},
                {"name": "GREETING", "value": "hello from $(HOSTNAME)"},
            ],
        },
    )
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        for pod in (plain, singleuser):
            await v1.create_namespaced_pod(NS, pod)
        try:
            ip1 = await wait_for("web-plain Ready", lambda: ready_ip(v1, "web-plain"), 60)
            ip2 = await wait_for("web-singleuser Ready", lambda: ready_ip(v1, "web-singleuser"), 60)
            assert ip1 != ip2
            for ip in (ip1, ip2):
                assert ip.startswith(cluster.info.settings.pod_ip_prefix + ".")
            listing = await asyncio.to_thread(http_get, f"http://{ip1}:{PORT}/")
            assert "Directory listing" in listing
            body2 = await wait_for(
                "the singleuser-like server to answer",
                lambda: asyncio.to_thread(_try_get, f"http://{ip2}:{PORT}/"),
                20,
            )
            home, greeting = body2.split(" ", 1)
            assert "nodeagent/pods/jupyter-users_web-singleuser_" in home
            assert greeting == "hello from web-singleuser"
            pod = await v1.read_namespaced_pod("web-plain", NS)
            assert pod.spec.node_name == "local-0"
            status = pod.status.container_statuses[0]
            assert status.ready
            assert status.state.running is not None
            assert pod.status.host_ip == "127.0.0.1"
        finally:
            t0 = time.monotonic()
            for name in ("web-plain", "web-singleuser"):
                try:
                    await v1.delete_namespaced_pod(name, NS)
                except ApiException as e:
                    if e.status != 404:
                        raise

            async def gone() -> bool:
                names = {p.metadata.name for p in (await v1.list_namespaced_pod(NS)).items}
                return not names & {"web-plain", "web-singleuser"}

            await wait_for("both pods gone", gone, 20)
            assert time.monotonic() - t0 < 10


def _try_get(url: str) -> str | None:
    try:
        return http_get(url)
    except OSError:
        return None


async def test_local_pod_that_exits_reports_its_exit_code(cluster: Cluster) -> None:
    pod = local_pod(
        "exits-3",
        {
            "name": "main",
            "image": "busybox",
            "command": ["sh", "-c", "echo bye; exit 3"],
            "terminationMessagePolicy": "FallbackToLogsOnError",
        },
    )
    pod["spec"]["restartPolicy"] = "Never"
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        await v1.create_namespaced_pod(NS, pod)
        try:

            async def failed() -> client.V1Pod | None:
                p = await v1.read_namespaced_pod("exits-3", NS)
                return p if p.status.phase == "Failed" else None

            done = await wait_for("pod Failed", failed, 60)
            term = done.status.container_statuses[0].state.terminated
            assert term.exit_code == 3
            assert term.reason == "Error"
            assert term.message == "bye"  # FallbackToLogsOnError: its log's tail
        finally:
            await v1.delete_namespaced_pod("exits-3", NS)


async def test_deletion_grace_period_ends_with_sigkill(cluster: Cluster) -> None:
    pod = local_pod(
        "ignores-term",
        {
            "name": "main",
            "image": "busybox",
            "command": ["sh", "-c", "trap '' TERM; echo started; while true; do sleep 0.1; done"],
        },
    )
    pod["spec"]["terminationGracePeriodSeconds"] = 2
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        await v1.create_namespaced_pod(NS, pod)
        await wait_for("pod Ready", lambda: ready_ip(v1, "ignores-term"), 60)
        running = await v1.read_namespaced_pod("ignores-term", NS)
        pid = int(running.status.container_statuses[0].container_id.split("://")[1])
        assert os.path.exists(f"/proc/{pid}")
        t0 = time.monotonic()
        await v1.delete_namespaced_pod("ignores-term", NS)

        async def gone() -> bool:
            names = {p.metadata.name for p in (await v1.list_namespaced_pod(NS)).items}
            return "ignores-term" not in names

        await wait_for("pod gone", gone, 20, every=0.1)
        elapsed = time.monotonic() - t0
        assert 2 <= elapsed < 8, elapsed  # waited for the grace period, then killed
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


# Fewer rounds than on kwok's nodes (test_kueue.py): each starts and stops a real process.
RECREATE_ROUNDS = 15


async def test_local_pod_recreated_at_once_under_the_same_name_keeps_running(
    cluster: Cluster,
) -> None:
    pod = local_pod("churn", {"name": "main", "image": "busybox", "command": ["sleep", "3600"]})
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        try:
            # 1 s, as KubeSpawner's default delete_grace_period
            uids = await churn_same_name(hub, NS, pod, RECREATE_ROUNDS, grace_seconds=1)
            assert len(set(uids)) == RECREATE_ROUNDS + 1
        finally:
            try:
                await v1.delete_namespaced_pod("churn", NS)
            except ApiException as e:
                if e.status != 404:
                    raise

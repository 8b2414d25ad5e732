"""A broken cluster or a broken server does not bring the hub down.

A hub of its own whose failures are real: Kueue's pod webhook made unreachable (its
webhook configuration pointed at a closed port, as when Kueue's process is gone), a server
command that exits at once (as a server with a broken config of the user's does), and an
offering that Kueue admits but no node can take (the start timeout after admission, here 5 s).
Each is a failure a hub restart cannot mend; more of them in a row than
``consecutive_failure_limit`` must leave the hub running, each user told what to do, nothing
left behind, and ``/hub/metrics`` counting failures, not errors.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from devcluster.hub import DEMO_CATALOG
from devcluster.testing import Cluster
from gpuaas_spawner import hubcompat
from gpuaas_spawner.failures import CLUSTER_DOWN, KUEUE_DOWN
from tests.support.hub import FAILURE_LIMIT, Hub, eventually, nothing_left, own_hub, spawn_counts

pytestmark = pytest.mark.integration

WEBHOOKS = "mutatingwebhookconfiguration/kueue-mutating-webhook-configuration"
# The server command of this hub: exits at once, as a server whose own settings are broken does.
EXITS = ["python", "-c", "raise SystemExit('a broken setting in ~/.jupyter')"]
NOWHERE = {
    "slug": "nowhere",
    "display_name": "H100 on no node",
    "kind": "gpu",
    "resources": {"nvidia.com/gpu": 1},
    "flavor": "h100",
    # quota in team-a's h100 flavor, so Kueue admits it, but no node carries this label
    "node_selector": {"gpuaas.dev/pool": "h100", "gpuaas.dev/no-such-node": "true"},
    "sizes": ["large"],
}


def _catalog(path: Path) -> Path:
    data = yaml.safe_load(DEMO_CATALOG.read_text())
    data["offerings"].append(NOWHERE)
    (team_a,) = (t for t in data["tenants"] if t["name"] == "team-a")
    team_a["offerings"].append("nowhere")
    path.write_text(yaml.safe_dump(data))
    return path


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def kueue_webhook_unreachable(cluster: Cluster) -> Iterator[None]:
    """Point Kueue's pod webhook at a closed port; put it back afterwards."""
    kubectl = [str(cluster.info.bin_dir / "kubectl"), "--kubeconfig", str(cluster.info.kubeconfig)]
    config = json.loads(
        subprocess.run(
            [*kubectl, "get", WEBHOOKS, "-o", "json"], check=True, capture_output=True
        ).stdout.decode()
    )
    (index,) = (i for i, w in enumerate(config["webhooks"]) if w["name"] == "mpod.kb.io")
    path = f"/webhooks/{index}/clientConfig/service/port"
    port = config["webhooks"][index]["clientConfig"]["service"]["port"]

    def patch(value: int) -> None:
        op = [{"op": "replace", "path": path, "value": value}]
        subprocess.run(
            [*kubectl, "patch", WEBHOOKS, "--type=json", "-p", json.dumps(op)], check=True
        )

    patch(_closed_port())
    try:
        yield
    finally:
        patch(port)


@contextmanager
def api_server_paused(cluster: Cluster) -> Iterator[None]:
    """Stop the kube-apiserver process (SIGSTOP) for the block: the kernel still accepts
    connections and nobody answers them, as when the API server hangs (not refused, as when it
    is gone); then let it go on and wait until it is ready again."""
    (apiserver,) = (r for r in cluster.info.processes if r.name == "kube-apiserver")
    os.kill(apiserver.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(apiserver.pid, signal.SIGCONT)
    kubectl = [str(cluster.info.kubectl), "--kubeconfig", str(cluster.info.kubeconfig)]
    subprocess.run([*kubectl, "get", "--raw", "/readyz"], check=True, capture_output=True)


def spawn_failure(
    hub: Hub, user: str, options: dict[str, Any], server: str = ""
) -> tuple[int, str]:
    """Spawn; return the status the hub answered with (202: later) and what the user is told."""
    path = f"/users/{user}/servers/{server}" if server else f"/users/{user}/server"
    r = hub.api("POST", path, options, timeout=60)
    if r.status == 202:  # slower than slow_spawn_timeout: the failure comes on the progress stream
        events = hub.progress_events(user, server, until="Spawn failed", timeout=90)
        message = str(events[-1]["message"]).removeprefix("Spawn failed: ")
        return r.status, message
    assert r.status >= 400, (options, r)
    return r.status, str(r.body["message"])


async def test_failures_a_restart_cannot_mend_are_clean_and_never_stop_the_hub(
    cluster: Cluster, k8s: client.ApiClient, tmp_path: Path
) -> None:
    settings = {
        "catalog_file": _catalog(tmp_path / "catalog.yaml"),
        "start_timeout": 5,
        "poll_interval": 0.5,
        "extra_config": f"c.KubeSpawner.cmd = {EXITS!r}\nc.KubeSpawner.args = []\n",
    }
    with own_hub(cluster, tmp_path, **settings) as hub:
        told: list[str] = []
        try:
            with kueue_webhook_unreachable(cluster):
                for _ in range(2):
                    status, message = spawn_failure(hub, "alice", {"offering": "local-mig-1g"})
                    assert (status, message) == (503, KUEUE_DOWN)
                    told.append("kueue_unavailable")
                    await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"))
            for _ in range(2):
                _, message = spawn_failure(hub, "alice", {"offering": "local-mig-1g"})
                assert message.startswith("Your server exited before it was ready (exit code 1)")
                assert "start-up file of your own" in message, message
                told.append("server_exited")
                await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"))
            for _ in range(FAILURE_LIMIT + 1 - len(told)):
                _, message = spawn_failure(hub, "alice", {"offering": "nowhere"})
                assert message.startswith("Your server was admitted but did not become ready"), (
                    message
                )
                assert "start it again, and tell an admin if it happens again" in message
                told.append("start_timeout")
                await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"))
            assert len(told) > FAILURE_LIMIT

            # JupyterHub counted failures, not errors, and so never exited
            counts = spawn_counts(hub)
            if hubcompat.COUNTS_EVERY_FAILURE:  # 5.5: one "failure" status for everything
                assert counts.get(("failure", "")) == len(told), counts
            else:
                for reason in set(told):
                    assert counts.get(("failure", reason)) == told.count(reason), counts
            assert sum(n for (st, _), n in counts.items() if st == "error") == 0, counts
            log = hub.proc.log_path.read_text(errors="replace")
            assert "consecutive spawns failed" not in log
            assert "Aborting due to" not in log
            assert hub.proc.proc is not None
            assert hub.proc.proc.poll() is None
            assert hub.api("GET", "/users/alice").status == 200
        finally:
            hub.stop("alice")
        await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice")


# c.KubeSpawner.k8s_api_request_retry_timeout of the hub below: how long a start retries the
# creation of the token Secret and the pod while the API server does not answer
RETRY_WINDOW = 20
# Servers that really run (on the node agent's node), one per user, within the teams' quotas
RUNNING = {
    "alice": {"offering": "local-mig-1g"},
    "bob": {"offering": "local-quarter"},
    "carol": {"offering": "local-mig-1g"},
    "dave": {"offering": "local-quarter"},
}
# More spawns than consecutive_failure_limit, at once: every user's default server and a named one
FAILING = [(user, server) for user in RUNNING for server in ("", "second")][: FAILURE_LIMIT + 2]


def _hub_alive(hub: Hub) -> None:
    log = hub.proc.log_path.read_text(errors="replace")
    assert "Aborting due to" not in log
    assert hub.proc.proc is not None
    assert hub.proc.proc.poll() is None
    assert hub.api("GET", "/users/alice").status == 200


async def test_a_paused_api_server_is_waited_out_and_never_stops_the_hub(
    cluster: Cluster, k8s: client.ApiClient, tmp_path: Path
) -> None:
    """A warm hub (its pod and Kueue watches running) while the API server hangs: a pause
    within the retry window delays the spawns and they start; a longer one fails each spawn in
    words ("the cluster is not answering"), as a failure, not an error, so more of them than
    ``consecutive_failure_limit`` leave the hub running."""
    extra = f"c.KubeSpawner.k8s_api_request_retry_timeout = {RETRY_WINDOW}\n"
    with own_hub(cluster, tmp_path, start_timeout=90, poll_interval=0.5, extra_config=extra) as hub:
        try:
            hub.start_all({"alice": RUNNING["alice"]})  # warms the hub's watches
            hub.stop("alice")
            await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"))

            with ThreadPoolExecutor(len(RUNNING)) as pool:
                with api_server_paused(cluster):
                    asked = [
                        pool.submit(hub.api, "POST", f"/users/{u}/server", o, timeout=60)
                        for u, o in RUNNING.items()
                    ]
                    time.sleep(RETRY_WINDOW / 2)
                answers = [f.result() for f in asked]
                assert all(r.status in (201, 202) for r in answers), answers
            for user in RUNNING:
                hub.wait_ready(user, timeout=120)
            for user in RUNNING:
                hub.stop(user)
            _hub_alive(hub)

            with ThreadPoolExecutor(len(FAILING)) as pool, api_server_paused(cluster):
                told = list(
                    pool.map(
                        lambda us: spawn_failure(hub, us[0], {"offering": "cpu"}, us[1]), FAILING
                    )
                )
            assert len(told) > FAILURE_LIMIT
            assert told == [(202, CLUSTER_DOWN)] * len(told), told

            counts = spawn_counts(hub)
            if hubcompat.COUNTS_EVERY_FAILURE:
                assert counts.get(("failure", "")) == len(told), counts
            else:
                assert counts.get(("failure", "cluster_unavailable")) == len(told), counts
            assert sum(n for (st, _), n in counts.items() if st == "error") == 0, counts
            _hub_alive(hub)
            assert "failed to start in" not in hub.proc.log_path.read_text(errors="replace")
        finally:
            for user, server in FAILING:
                hub.stop(user, server)
        for user in RUNNING:
            for pod in (f"jupyter-{user}", f"jupyter-{user}--second"):
                await eventually(
                    lambda user=user, pod=pod: nothing_left(k8s, user, pod), timeout=60, what=pod
                )

"""Bad states and teardown, on second, throwaway clusters (the session's cluster stays up).

Each test uses another state directory, port block and pod IP prefix (which also shows that
those overrides work):

- a port in use fails `up` at once, naming the port, its holder and the override;
- a component that exits fails `up` at once with the tail of its log, and stops what it started;
- `down` after a crash (the node agent killed with SIGKILL, its pod's server orphaned) stops every
  recorded process and the orphan, leaves nothing listening on the cluster's ports or pod IPs,
  and removes the state directory.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from devcluster import cluster as devcluster
from devcluster import procs
from devcluster.cluster import ClusterError
from devcluster.config import HOST, Settings, load_settings
from devcluster.testing import (
    Cluster,
    core,
    free_pod_ip_prefix,
    free_port_base,
    leftovers,
    wait_for,
)

pytestmark = pytest.mark.integration


def other_settings(tmp_path: Path, **extra: str) -> Settings:
    env = dict(os.environ)
    env.update(
        GPUAAS_CLUSTER_DIR=str(tmp_path / "cluster"),
        GPUAAS_CLUSTER_PORT_BASE=str(free_port_base()),
        GPUAAS_CLUSTER_POD_IP_PREFIX=free_pod_ip_prefix(),
        **extra,
    )
    return load_settings(env)


def test_a_port_in_use_fails_fast_with_a_clear_message(cluster: Cluster, tmp_path: Path) -> None:
    settings = other_settings(tmp_path)
    with socket.socket() as s:
        s.bind((HOST, settings.ports.apiserver))
        s.listen()
        t0 = time.monotonic()
        with pytest.raises(ClusterError) as err:
            devcluster.up(settings, log=lambda _m: None)
    assert time.monotonic() - t0 < 5
    message = str(err.value)
    assert f"{settings.ports.apiserver} (apiserver)" in message
    assert "GPUAAS_CLUSTER_PORT_BASE" in message
    assert f"pid {os.getpid()}" in message  # who holds it
    assert not settings.state_dir.exists()


def test_a_component_that_exits_fails_fast_with_its_log(cluster: Cluster, tmp_path: Path) -> None:
    # The real binaries, except a "kueue" that prints a complaint and exits.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for entry in cluster.info.bin_dir.iterdir():
        if entry.name != "kueue":
            (bin_dir / entry.name).symlink_to(entry)
    fake = bin_dir / "kueue"
    fake.write_text("#!/bin/sh\necho 'kueue: cannot start: simulated failure' >&2\nexit 3\n")
    fake.chmod(0o755)
    settings = other_settings(tmp_path, GPUAAS_CLUSTER_BIN=str(bin_dir))
    with pytest.raises(ClusterError) as err:
        devcluster.up(settings, log=lambda _m: None)
    assert err.value.component == "kueue"
    assert "exited (code 3)" in err.value.message
    assert "simulated failure" in err.value.log_tail
    state = procs.read_json(settings.state_file) or {}
    assert state.get("failed") is True
    assert (settings.logs_dir / "kueue.log").is_file()  # kept for a look
    records = [procs.ProcRecord.from_json(p) for p in state.get("processes", [])]
    assert {r.name for r in records} >= {"etcd", "kube-apiserver", "kwok", "kueue"}
    # everything it had started was stopped; only the state dir (with the logs) is left
    assert leftovers(settings, records) == [f"{settings.state_dir} still exists"]
    devcluster.down(settings, log=lambda _m: None)
    assert leftovers(settings, []) == []


async def test_down_after_a_crash_leaves_no_process_or_port(
    cluster: Cluster, tmp_path: Path
) -> None:
    settings = other_settings(tmp_path)
    info = await asyncio.to_thread(devcluster.up, settings)
    records = list(info.processes)
    try:
        assert info.started
        assert settings.kubeconfig.is_file()
        cfg = client.Configuration()
        await config.load_kube_config(
            config_file=str(info.credentials("hub")), client_configuration=cfg
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "orphan-to-be", "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "spec": {
                "nodeSelector": {"gpuaas.dev/pool": "local"},
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "web",
                        "image": "python:3.11",
                        "command": ["python3", "-m", "http.server", "--bind", "$(POD_IP)", "18081"],
                        "env": [
                            {
                                "name": "POD_IP",
                                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                            }
                        ],
                        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    }
                ],
            },
        }
        async with client.ApiClient(cfg) as api:
            v1 = core(api)
            await v1.create_namespaced_pod("jupyter-users", pod)

            async def serving() -> str | None:
                p = await v1.read_namespaced_pod("orphan-to-be", "jupyter-users")
                ip = p.status.pod_ip
                if p.status.phase != "Running" or not ip:
                    return None
                return (
                    ip
                    if (ip, 18081) in procs.listening_sockets(settings.pod_ip_prefix + ".")
                    else None
                )

            ip = await wait_for("the pod's server to listen", serving, 60)
            assert ip.startswith(settings.pod_ip_prefix + ".")
        agent = next(r for r in records if r.name == "nodeagent")
        os.kill(agent.pid, signal.SIGKILL)  # crash: the pod's process is now an orphan
        await wait_for(
            "agent dead", lambda: asyncio.to_thread(lambda: not procs.is_alive(agent)), 10
        )
        assert (ip, 18081) in procs.listening_sockets(settings.pod_ip_prefix + ".")
    finally:
        await asyncio.to_thread(devcluster.down, settings)
    assert leftovers(settings, records) == []

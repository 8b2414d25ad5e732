"""Bad states and teardown, on second, throwaway clusters (the session's cluster stays up).

Each test uses another state directory, port block and pod IP prefix (which also shows that
those overrides work):

- a port in use fails `up` at once, naming the port, its holder and the override;
- a component that exits fails `up` at once with the tail of its log, and stops what it started;
- `down` after a crash (the node agent killed with SIGKILL, its pod's server orphaned) stops every
  recorded process and the orphan, leaves nothing listening on the cluster's ports or pod IPs,
  and removes the state directory;
- the demo's cluster configuration (its ports and pod IPs, held as the demo holds it) runs beside
  the tests' cluster with a pod of the same name in each; the tests are refused on it, and its
  start and stop leave the tests' cluster and pod as they were.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client, config

from devcluster import claim, procs
from devcluster import cluster as devcluster
from devcluster.cluster import ClusterError
from devcluster.config import HOST, Settings, demo_settings, load_settings
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


def server_pod(name: str) -> dict[str, Any]:
    """A pod on the node agent's node whose process serves HTTP on its pod IP, port 18081."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
        "spec": {
            "nodeSelector": {"gpuaas.dev/pool": "local"},
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
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


async def serving(v1: Any, name: str, settings: Settings) -> str:
    """The pod IP once :func:`server_pod` ``name`` runs and its server listens there."""

    async def listening() -> str | None:
        p = await v1.read_namespaced_pod(name, "jupyter-users")
        ip = p.status.pod_ip
        if p.status.phase != "Running" or not ip:
            return None
        return ip if (ip, 18081) in procs.listening_sockets(settings.pod_ip_prefix + ".") else None

    ip: str = await wait_for(f"{name}'s server to listen", listening, 60)
    return ip


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
        pod = server_pod("orphan-to-be")
        async with client.ApiClient(cfg) as api:
            v1 = core(api)
            await v1.create_namespaced_pod("jupyter-users", pod)
            ip = await serving(v1, "orphan-to-be", settings)
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


def live_components(settings: Settings) -> set[tuple[str, int]]:
    """Name and pid of each of the cluster's processes that runs."""
    components = devcluster.status(settings)["components"]
    return {(c["name"], c["pid"]) for c in components if c["alive"]}


def demo_configuration(tmp_path: Path) -> Settings:
    """The demo's cluster configuration (its ports and pod IPs) in a throwaway directory, never
    .demo/cluster; should a real demo run on this machine, another block and prefix, left to it."""
    demo = demo_settings()
    ports_taken = any(procs.port_in_use(HOST, p) for _, p in demo.ports.items())
    ips_taken = bool(procs.listening_sockets(demo.pod_ip_prefix + "."))
    if ports_taken or ips_taken:
        demo = replace(
            demo_settings(port_base=free_port_base()), pod_ip_prefix=free_pod_ip_prefix()
        )
    return replace(demo, state_dir=tmp_path / "demo-cluster")


async def test_the_demos_cluster_runs_beside_the_tests_and_neither_touches_the_other(
    cluster: Cluster, tmp_path: Path
) -> None:
    tests = cluster.info.settings
    demo = demo_configuration(tmp_path)
    components = live_components(tests)
    name = "same-name-in-both"  # as two hubs' jupyter-alice
    async with cluster.api("jupyterhub", "hub") as api:
        v1 = core(api)
        await v1.create_namespaced_pod("jupyter-users", server_pod(name))
        try:
            tests_ip = await serving(v1, name, tests)
            tests_uid = (await v1.read_namespaced_pod(name, "jupyter-users")).metadata.uid
            with claim.exclusive(demo, "make demo (in this test)") as held:
                info = await asyncio.to_thread(devcluster.up, demo, log=lambda _m: None)
                try:
                    assert info.started  # its own cluster, not the tests' one reused
                    cfg = client.Configuration()
                    await config.load_kube_config(
                        config_file=str(info.credentials("hub")), client_configuration=cfg
                    )
                    async with client.ApiClient(cfg) as demo_api:
                        demo_v1 = core(demo_api)
                        await demo_v1.create_namespaced_pod("jupyter-users", server_pod(name))
                        demo_ip = await serving(demo_v1, name, demo)
                        assert demo_ip.startswith(demo.pod_ip_prefix + ".")
                        assert tests_ip.startswith(tests.pod_ip_prefix + ".")
                        await demo_v1.delete_namespaced_pod(name, "jupyter-users")
                    # What the tests and the CLI are refused on the demo's cluster.
                    with pytest.raises(claim.ClusterInUse), claim.shared(demo):
                        pass
                    with pytest.raises(ClusterError, match="stop the demo instead"):
                        devcluster.down(demo, log=lambda _m: None)
                finally:
                    await asyncio.to_thread(devcluster.down, demo, log=lambda _m: None, held=held)
            assert leftovers(demo, info.processes) == []
            # The tests' cluster went on as it was: same processes, its pod of the same name.
            assert devcluster.status(tests)["running"]
            assert live_components(tests) == components
            pod = await v1.read_namespaced_pod(name, "jupyter-users")
            assert (pod.metadata.uid, pod.status.phase) == (tests_uid, "Running")
            assert (tests_ip, 18081) in procs.listening_sockets(tests.pod_ip_prefix + ".")
        finally:
            await v1.delete_namespaced_pod(name, "jupyter-users", grace_period_seconds=0)

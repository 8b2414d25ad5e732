"""The dev cluster's pure parts, without a cluster: settings, nodes.yaml, the node agent's rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import claim
from devcluster.claim import demo_holder
from devcluster.cluster import ClusterError, down, known_cause, kueue_transformations
from devcluster.config import (
    BINARIES,
    DEMO_POD_IP_PREFIX,
    DEMO_PORT_BASE,
    DEMO_STATE_DIR,
    MANIFESTS_DIR,
    PACKAGE_DIR,
    PORT_OFFSETS,
    STAGES_FILE,
    Settings,
    build_key,
    demo_settings,
    load_settings,
    read_versions,
)
from devcluster.hub import free_port, port_block
from devcluster.kwokfinisher import Finisher, due
from devcluster.nodeagent import (
    ContainerConfigError,
    IPPool,
    bind_url_to,
    container_argv,
    container_env,
    container_home,
    delete_body,
    expand,
    home_mount,
    pod_phase,
    termination_message,
    uid_bound,
)
from devcluster.nodes import NodesFileError, load_nodes
from devcluster.provisioner import (
    PROVISIONED_BY,
    PROVISIONER,
    STORAGE_CLASS,
    Provision,
    Refuse,
    Remove,
    plan,
    quantity_bytes,
)
from devcluster.testing import free_pod_ip_prefix, free_port_base


def test_settings_defaults_and_overrides(tmp_path: Path) -> None:
    s = load_settings({"HOME": str(tmp_path)})
    assert s.state_dir == tmp_path / ".local/state/jupyter-gpuaas/cluster"
    assert s.kubeconfig == s.state_dir / "kubeconfig"
    assert s.ports.apiserver == 26443
    assert len({p for _, p in s.ports.items()}) == len(PORT_OFFSETS)
    o = load_settings(
        {
            "HOME": str(tmp_path),
            "GPUAAS_CLUSTER_DIR": str(tmp_path / "c"),
            "GPUAAS_CLUSTER_PORT_BASE": "30000",
            "GPUAAS_CLUSTER_PORT_APISERVER": "6443",
        }
    )
    assert o.state_dir == tmp_path / "c"
    assert o.ports.apiserver == 6443
    assert o.ports.etcd == 30079
    with pytest.raises(ValueError, match="GPUAAS_CLUSTER_PORT_BASE"):
        load_settings({"HOME": str(tmp_path), "GPUAAS_CLUSTER_PORT_BASE": "x"})
    with pytest.raises(ValueError, match=r"127\.0"):
        load_settings({"HOME": str(tmp_path), "GPUAAS_CLUSTER_POD_IP_PREFIX": "127.0"})


def test_nodes_file_declares_the_pools() -> None:
    nodes = {n.name: n for n in load_nodes()}
    assert set(nodes) == {
        "h100-0",
        "h100-1",
        "h200-0",
        "h200-1",
        "h200-2",
        "a100-mig-0",
        "l4-shared-0",
        "l4-hami-0",
        "local-0",
    }
    assert nodes["local-0"].run_by == "agent"
    m = nodes["h100-0"].manifest()
    assert m["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert m["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert "kwok.x-k8s.io/node" not in nodes["local-0"].manifest()["metadata"]["annotations"]


def test_the_topology_pool_labels_each_node_with_its_rack() -> None:
    """Every level of the Topology gpu-racks is a label of each node its flavor selects."""
    docs = list(yaml.safe_load_all((MANIFESTS_DIR / "15-topology.yaml").read_text()))
    levels = [lv["nodeLabel"] for lv in docs[0]["spec"]["levels"]]
    assert levels == ["gpuaas.dev/rack", "kubernetes.io/hostname"]
    h200 = [n.manifest()["metadata"]["labels"] for n in load_nodes() if n.pool == "h200"]
    assert [labels["gpuaas.dev/rack"] for labels in h200] == ["rack-1", "rack-1", "rack-2"]
    assert all(set(levels) <= set(labels) for labels in h200)


def test_per_node_labels_are_at_most_one_per_node(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.yaml"
    bad.write_text(
        "pools:\n  - name: x\n    count: 1\n    capacity: {cpu: '1', memory: 1Gi, pods: '1'}\n"
        "    perNodeLabels: [{a: b}, {a: c}]\n"
    )
    with pytest.raises(NodesFileError, match="perNodeLabels"):
        load_nodes(bad)


def test_nodes_file_errors_are_clear(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.yaml"
    bad.write_text("pools:\n  - name: x\n    runBy: docker\n    capacity: {cpu: '1'}\n")
    with pytest.raises(NodesFileError, match="runBy"):
        load_nodes(bad)


def _pool_capacity() -> dict[tuple[str, str], float]:
    """Each pool's GPU resources, HAMi's per-vGPU ones also as their transformed totals."""
    capacity: dict[tuple[str, str], float] = {}
    for n in load_nodes():
        for res, qty in n.capacity.items():
            if res.startswith("nvidia.com/"):
                key = (n.pool, res)
                capacity[key] = capacity.get(key, 0) + float(qty)
    # Kueue counts HAMi's per-vGPU memory and cores as their transformed totals: a pool's
    # nvidia.com/gpumem (the devices' sum) is what nvidia.com/total-gpumem quota may use.
    for t in kueue_transformations():
        for out, factor in t["outputs"].items():
            for (pool, res), amount in list(capacity.items()):
                if res == t["input"]:
                    capacity[(pool, out)] = amount * float(factor)
    return capacity


def _pool_quota(pool_of: dict[str, str]) -> dict[tuple[str, str], float]:
    """The sample ClusterQueues' GPU quota, summed per pool (``pool_of``: flavor → pool)."""
    quota: dict[tuple[str, str], float] = {}
    docs = yaml.safe_load_all((MANIFESTS_DIR / "30-cluster-queues.yaml").read_text())
    for doc in docs:
        if doc["kind"] != "ClusterQueue":
            continue
        for group in doc["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for r in flavor["resources"]:
                    if r["name"].startswith("nvidia.com/"):
                        key = (pool_of[flavor["name"]], r["name"])
                        quota[key] = quota.get(key, 0) + float(r["nominalQuota"])
    return quota


def test_sample_quotas_fit_in_the_pools() -> None:
    capacity = _pool_capacity()
    # A flavor's quota is its pool's (nodeLabels gpuaas.dev/pool); several flavors may share one
    # pool (local and local-hami: local-0's A100s and its HAMi L4), and their quotas add up.
    pool_of = {
        doc["metadata"]["name"]: doc["spec"]["nodeLabels"]["gpuaas.dev/pool"]
        for doc in yaml.safe_load_all((MANIFESTS_DIR / "20-resource-flavors.yaml").read_text())
    }
    assert pool_of["local-hami"] == "local"
    quota = _pool_quota(pool_of)
    assert quota
    for key, q in quota.items():
        assert q <= capacity.get(key, 0), f"quota {key} = {q} > capacity {capacity.get(key, 0)}"


def test_expand_follows_kubernetes_rules() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)-$(C)-$$(A)", env) == "1-two-$(C)-$(A)"


POD = {
    "metadata": {
        "name": "jupyter-alice",
        "namespace": "jupyter-users",
        "uid": "u-1",
        "labels": {"a": "b"},
    },
    "spec": {"nodeName": "local-0", "serviceAccountName": "default"},
}


def test_container_env_resolves_simple_values(tmp_path: Path) -> None:
    container = {
        "name": "notebook",
        "env": [
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
            {"name": "URL", "value": "http://$(IP):8888/"},
            {"name": "JUPYTERHUB_SERVICE_URL", "value": "http://0.0.0.0:8888/user/alice/"},
            {
                "name": "OPT",
                "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}},
            },
        ],
    }
    env = container_env(
        POD,
        container,
        pod_ip="127.42.0.7",
        host_ip="127.0.0.1",
        workdir=tmp_path,
        base={"PATH": "/bin", "SECRET": "x"},
    )
    assert env["IP"] == "127.42.0.7"
    assert env["NAME"] == "jupyter-alice"
    assert env["LABEL"] == "b"
    assert env["URL"] == "http://127.42.0.7:8888/"
    assert env["JUPYTERHUB_SERVICE_URL"] == "http://127.42.0.7:8888/user/alice/"
    assert env["HOME"] == str(tmp_path)
    assert env["PATH"] == "/bin"
    assert "SECRET" not in env
    assert "OPT" not in env
    with pytest.raises(ContainerConfigError):
        container_env(
            POD,
            {
                "name": "c",
                "env": [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
            },
            pod_ip="127.42.0.7",
            host_ip="127.0.0.1",
            workdir=tmp_path,
            base={},
        )


def test_bind_url_keeps_specific_hosts() -> None:
    assert bind_url_to("http://0.0.0.0:8888/x/", "127.42.0.2") == "http://127.42.0.2:8888/x/"
    assert bind_url_to("http://:8888/x/", "127.42.0.2") == "http://127.42.0.2:8888/x/"
    assert bind_url_to("http://10.1.2.3:8888/", "127.42.0.2") == "http://10.1.2.3:8888/"


def test_container_argv() -> None:
    env = {"PORT": "8888"}
    c = {"args": ["jupyterhub-singleuser", "--ip=0.0.0.0", "--port=$(PORT)"]}
    assert container_argv(c, env, "127.42.0.3") == [
        "jupyterhub-singleuser",
        "--ip=127.42.0.3",
        "--port=8888",
    ]
    c2 = {"command": ["python3"], "args": ["-m", "x", "--ServerApp.ip", "0.0.0.0"]}
    assert container_argv(c2, env, "127.42.0.3") == [
        "python3",
        "-m",
        "x",
        "--ServerApp.ip",
        "127.42.0.3",
    ]
    with pytest.raises(ContainerConfigError):
        container_argv({"name": "image-only"}, env, "127.42.0.3")


def test_pod_phase_follows_restart_policy() -> None:
    assert pod_phase("Never", [0, 0]) == "Succeeded"
    assert pod_phase("Never", [0, 1]) == "Failed"
    assert pod_phase("Never", [0, None]) is None
    assert pod_phase("OnFailure", [0]) == "Succeeded"
    assert pod_phase("OnFailure", [1]) is None
    assert pod_phase("Always", [0]) is None


def test_ip_pool_reuses_released_addresses() -> None:
    pool = IPPool("127.42")
    a = pool.claim("a")
    b = pool.claim("b")
    assert (a, b) == ("127.42.0.1", "127.42.0.2")
    pool.release(a)
    assert pool.claim("c") == "127.42.0.1"
    assert pool.claim("d", wanted="127.42.9.9") == "127.42.9.9"


def test_missing_go_fails_the_build_with_a_clear_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devcluster.cluster import BuildError, ensure_binaries

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no Go here
    settings = load_settings({"HOME": str(tmp_path), "GPUAAS_CACHE": str(tmp_path / "cache")})
    lines: list[str] = []
    with pytest.raises(BuildError) as err:
        ensure_binaries(settings, log=lines.append)
    assert "Go is not installed" in str(err.value)
    assert "make cluster-build" in str(err.value)


# The previous pins (Kubernetes 1.35, Kueue 0.17): a machine may still hold their build.
PREVIOUS_KEY = "k8s-v1.35.4_etcd-v3.6.16_kwok-v0.8.0_kueue-v0.17.0"


def test_build_sh_and_python_derive_the_same_cache_key_from_the_pins() -> None:
    # build.sh writes into cluster-bin/<key>, cluster.py looks there: one key, from versions.env
    key_line = next(
        line
        for line in (PACKAGE_DIR / "build.sh").read_text().splitlines()
        if line.startswith("key=")
    )
    script = f'. "{PACKAGE_DIR / "versions.env"}"; {key_line}; printf %s "$key"'
    from_sh = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert from_sh == build_key(read_versions())


def test_every_pin_is_in_the_cache_key() -> None:
    pins = read_versions()
    assert set(pins) == {"KUBERNETES_VERSION", "ETCD_VERSION", "KWOK_VERSION", "KUEUE_VERSION"}
    for name in pins:
        assert build_key({**pins, name: "v9.9.9"}) != build_key(pins), name


def test_a_cache_of_the_previous_pins_is_not_reused(tmp_path: Path) -> None:
    from devcluster.cluster import BuildError, ensure_binaries

    assert build_key(read_versions()) != PREVIOUS_KEY
    old = tmp_path / "cache" / "cluster-bin" / PREVIOUS_KEY
    (old / "kueue-config" / "default").mkdir(parents=True)
    (old / "kueue-config" / "default" / "kustomization.yaml").write_text("resources: []\n")
    for name in BINARIES:
        (old / name).write_text("#!/bin/sh\n")
        (old / name).chmod(0o755)
    (old / ".complete").touch()
    settings = load_settings({"HOME": str(tmp_path), "GPUAAS_CACHE": str(tmp_path / "cache")})
    with pytest.raises(BuildError) as err:
        ensure_binaries(settings, build=False)  # build=True would start the real build
    assert build_key(read_versions()) in str(err.value)
    assert "make cluster-build" in str(err.value)


def test_kwok_stages_never_delete_and_bind_each_pod_write_to_its_uid() -> None:
    # kwok deletes by name only: removal is kwok-finisher's, by UID
    stages = [s for s in yaml.safe_load_all(STAGES_FILE.read_text()) if s]
    pod_stages = [s for s in stages if s["spec"]["resourceRef"]["kind"] == "Pod"]
    assert pod_stages
    for stage in pod_stages:
        nxt = stage["spec"]["next"]
        assert not nxt.get("delete"), stage["metadata"]["name"]
        assert "statusTemplate" not in nxt, stage["metadata"]["name"]
        for patch in nxt.get("patches", []):
            assert patch["template"].startswith("metadata:\n  uid: {{ .metadata.uid"), patch


def test_kwok_finisher_removes_only_deleted_unheld_pods_on_its_nodes() -> None:
    nodes = frozenset({"h100-0"})
    deleted = {"deletionTimestamp": "2026-01-01T00:00:00Z", "uid": "u1"}

    def pod(node: str, **meta: object) -> dict[str, object]:
        return {"metadata": meta, "spec": {"nodeName": node}}

    assert due(pod("h100-0", **deleted), nodes)
    assert not due(pod("h100-0", **deleted, finalizers=["kueue.x-k8s.io/managed"]), nodes)
    assert not due(pod("h100-0", uid="u1"), nodes)
    assert not due(pod("local-0", **deleted), nodes)
    assert delete_body("u1") == {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"}}
    assert uid_bound("u1", {"status": {"phase": "Failed"}}) == {
        "metadata": {"uid": "u1"},
        "status": {"phase": "Failed"},
    }
    # a watch's BOOKMARK carries no uid: ignored, not a crash of the watch
    Finisher(None, nodes).seen("BOOKMARK", {"metadata": {"resourceVersion": "7"}})


def test_a_component_out_of_inotify_instances_says_what_to_do(tmp_path: Path) -> None:
    # Seen when nine clusters ran on one machine: Kueue exited with only "too many open files".
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    tail = '{"level":"error","msg":"Could not run manager","error":"too many open files"}'
    hint = known_cause(tail, limit)
    assert "fs.inotify.max_user_instances is 128" in hint
    assert "sysctl -w fs.inotify.max_user_instances=1024" in hint
    error = ClusterError("kueue", "exited (code 1) before GET /readyz", tail)
    text = str(error)  # with this machine's limit, before the log
    assert text.index("out of inotify instances") < text.index("last lines")
    assert known_cause('{"error":"connection refused"}', limit) == ""


def test_each_cluster_hands_out_ports_from_its_own_block() -> None:
    # Seen: two runs on one machine picked the same port at random; one run's requests were
    # answered by the other run's gpuaas service (403: wrong operator token).
    default = port_block({})
    assert default == port_block({"GPUAAS_CLUSTER_PORT_BASE": "26400"})
    blocks = [port_block({"GPUAAS_CLUSTER_PORT_BASE": str(b)}) for b in range(26400, 28000, 100)]
    seen: set[int] = set()
    for block in blocks:
        assert len(block) == 100
        assert block.start >= 15000
        assert block.stop <= 26000  # below the clusters' blocks and the ephemeral range
        assert seen.isdisjoint(block)
        seen.update(block)
    first, second = free_port(), free_port()
    assert first != second
    assert {first, second} <= set(port_block())


def test_ports_taken_in_the_block_do_not_make_two_calls_meet() -> None:
    # Seen: with the block's next ports in use, consecutive calls walked to the same free port,
    # and a hub was configured with one port for its proxy and the proxy's API.
    import socket

    held = []
    try:
        for port in port_block():
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            held.append(s)
            if len(held) == 50:
                break
        ports = [free_port() for _ in range(5)]
        assert len(set(ports)) == 5
    finally:
        for s in held:
            s.close()


# --- the demo and the tests each on their own cluster -----------------------------------------


def test_the_demo_and_the_tests_have_their_own_directory_ports_pod_ips_and_hub_ports(
    tmp_path: Path,
) -> None:
    # Even with the tests' variables set, the demo keeps its own cluster (its state in .demo/).
    env = {
        "HOME": str(tmp_path),
        "GPUAAS_CLUSTER_DIR": str(tmp_path / "tests-cluster"),
        "GPUAAS_CLUSTER_PORT_BASE": str(DEMO_PORT_BASE),
        "GPUAAS_CLUSTER_POD_IP_PREFIX": "127.46",
    }
    demo = demo_settings(env)
    assert demo.state_dir == DEMO_STATE_DIR / "cluster"
    assert demo.port_base == DEMO_PORT_BASE
    assert demo.pod_ip_prefix == "127.46"
    assert demo.claim_file.parent == DEMO_STATE_DIR
    tests = load_settings({"HOME": str(tmp_path)})
    assert tests.state_dir != demo.state_dir
    assert tests.claim_file != demo.claim_file
    assert {p for _, p in tests.ports.items()}.isdisjoint(p for _, p in demo.ports.items())
    assert tests.pod_ip_prefix != demo.pod_ip_prefix
    hub_ports = [port_block({"GPUAAS_CLUSTER_PORT_BASE": str(s.port_base)}) for s in (tests, demo)]
    assert set(hub_ports[0]).isdisjoint(hub_ports[1])
    # Throwaway clusters of the tests never take the demo's ports or pod IPs.
    assert free_port_base(DEMO_PORT_BASE) != DEMO_PORT_BASE
    assert free_pod_ip_prefix(46) != DEMO_POD_IP_PREFIX
    # GPUAAS_CLUSTER_BIN is the one variable the demo honours (prebuilt binaries).
    assert demo_settings({**env, "GPUAAS_CLUSTER_BIN": str(tmp_path)}).bin_dir_override == tmp_path


def settings_in(tmp_path: Path) -> Settings:
    return load_settings({"HOME": str(tmp_path), "GPUAAS_CLUSTER_DIR": str(tmp_path / "c")})


def test_a_demo_holds_its_cluster_alone(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    assert demo_holder(settings) is None
    with claim.exclusive(settings, "make demo in /clone") as held:
        held.note(url="http://127.0.0.1:8000")
        who = demo_holder(settings)
        assert who == f"make demo in /clone (pid {os.getpid()}, hub http://127.0.0.1:8000)"
        with (
            pytest.raises(claim.ClusterInUse) as second_demo,
            claim.exclusive(settings, "make demo in /clone"),
        ):
            pass
        assert f"in use by {who}" in str(second_demo.value)
        assert f"kill -INT {os.getpid()}" in str(second_demo.value)
        with pytest.raises(claim.ClusterInUse) as tests, claim.shared(settings):
            pass
        assert "tests never use a demo's cluster" in str(tests.value)
        settings.state_dir.mkdir()
        with pytest.raises(ClusterError, match="stop the demo instead"):
            down(settings, log=lambda _m: None)
        assert settings.state_dir.is_dir()  # untouched
        down(settings, log=lambda _m: None, held=held)  # the demo's own clean-up
        assert not settings.state_dir.exists()
    assert demo_holder(settings) is None
    with claim.shared(settings):
        pass


def test_test_sessions_share_a_cluster_and_keep_a_demo_off_it(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    with claim.shared(settings), claim.shared(settings):
        assert demo_holder(settings) is None
        with (
            pytest.raises(claim.ClusterInUse, match="in use by test sessions"),
            claim.exclusive(settings, "make demo"),
        ):
            pass
    with claim.exclusive(settings, "make demo"):
        pass


def test_the_claim_goes_with_its_holder_however_it_ends(tmp_path: Path) -> None:
    settings = settings_in(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from devcluster import claim\n"
            "from devcluster.config import load_settings\n"
            f"s = load_settings({{'GPUAAS_CLUSTER_DIR': {str(settings.state_dir)!r}}})\n"
            "with claim.exclusive(s, 'make demo'):\n"
            "    print('held', flush=True)\n"
            "    time.sleep(300)\n",
        ],
        cwd=PACKAGE_DIR.parent,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert demo_holder(settings) == f"make demo (pid {holder.pid})"
        holder.kill()  # no clean-up at all: the kernel drops the lock
        holder.wait(10)
        assert demo_holder(settings) is None
        with claim.exclusive(settings, "make demo"):
            pass
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


# --- persistent volumes: the provisioner's decisions, the agent's homes -------------------------


def claim_of(
    name: str = "claim-alice",
    *,
    size: str = "10Gi",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    storage_class: str | None = STORAGE_CLASS,
    phase: str = "Pending",
    **spec: Any,
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "jupyter-users", "uid": f"uid-{name}"},
        "spec": {
            "accessModes": list(modes),
            "resources": {"requests": {"storage": size}},
            **({"storageClassName": storage_class} if storage_class else {}),
            **spec,
        },
        "status": {"phase": phase},
    }


def test_storage_sizes_are_read_as_kubernetes_writes_them() -> None:
    assert quantity_bytes("10Gi") == 10 * 1024**3
    assert quantity_bytes("500M") == 500 * 1000**2
    assert quantity_bytes("1.5Gi") == 3 * 1024**3 // 2
    assert quantity_bytes("1024") == 1024
    with pytest.raises(ValueError, match="not a storage size"):
        quantity_bytes("ten gigs")


def test_a_pending_claim_of_the_class_gets_a_directory_volume_bound_to_it(tmp_path: Path) -> None:
    claim = claim_of()
    (action,) = plan([claim], [], tmp_path, 20 * 1024**3)
    assert isinstance(action, Provision)
    assert action.directory == tmp_path / "pvc-uid-claim-alice"
    spec = action.volume["spec"]
    assert spec["hostPath"]["path"] == str(action.directory)
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "jupyter-users",
        "name": "claim-alice",
        "uid": "uid-claim-alice",
    }
    assert (spec["capacity"], spec["accessModes"]) == ({"storage": "10Gi"}, ["ReadWriteOnce"])
    assert spec["persistentVolumeReclaimPolicy"] == "Delete"
    # Made once: a volume already pre-bound to the claim, or a bound claim, gets nothing more.
    assert plan([claim], [action.volume], tmp_path, 20 * 1024**3) == []
    assert plan([claim_of(phase="Bound")], [], tmp_path, 20 * 1024**3) == []
    # Another class's claims are left to their provisioner.
    assert plan([claim_of(storage_class="fast-ssd")], [], tmp_path, 20 * 1024**3) == []


@pytest.mark.parametrize(
    ("claim", "why"),
    [
        (claim_of(modes=("ReadWriteMany",)), "directories of one node"),
        (claim_of(size="1Ti"), "1Ti requested, more than the 20 GiB"),
        (claim_of(volumeMode="Block"), "only Filesystem"),
        (claim_of(size="lots"), "not a storage size"),
    ],
)
def test_a_claim_a_directory_cannot_honour_is_told_why(
    tmp_path: Path, claim: dict[str, Any], why: str
) -> None:
    (action,) = plan([claim], [], tmp_path, 20 * 1024**3)
    assert isinstance(action, Refuse)
    assert why in action.message


def test_only_released_volumes_of_ours_with_policy_delete_are_removed(tmp_path: Path) -> None:
    def volume(name: str, phase: str, policy: str = "Delete", ours: bool = True) -> dict[str, Any]:
        annotations = {PROVISIONED_BY: PROVISIONER} if ours else {}
        return {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "persistentVolumeReclaimPolicy": policy,
                "hostPath": {"path": str(tmp_path / name)},
            },
            "status": {"phase": phase},
        }

    volumes = [
        volume("pvc-released", "Released"),
        volume("pvc-bound", "Bound"),
        volume("pvc-kept", "Released", policy="Retain"),
        volume("pvc-theirs", "Released", ours=False),
    ]
    assert plan([], volumes, tmp_path, 1) == [Remove("pvc-released", tmp_path / "pvc-released")]
    outside = volume("pvc-outside", "Released")
    outside["spec"]["hostPath"]["path"] = "/etc"
    assert plan([], [outside], tmp_path, 1) == []


def test_the_home_is_the_mount_at_the_images_home() -> None:
    mount = {"name": "home", "mountPath": "/home/jovyan"}
    assert home_mount({"volumeMounts": [mount]}) == mount
    assert home_mount({"volumeMounts": [{**mount, "mountPath": "/data"}]}) is None
    assert container_home({"workingDir": "/work"}) == "/work"
    assert container_home({"env": [{"name": "HOME", "value": "/u"}], "workingDir": "/w"}) == "/u"
    assert home_mount({"workingDir": "/data/", "volumeMounts": [{**mount, "mountPath": "/data"}]})


def test_an_error_exit_leaves_the_logs_tail_only_where_the_pod_asks_for_it() -> None:
    asks = {"name": "notebook", "terminationMessagePolicy": "FallbackToLogsOnError"}
    log = b"".join(f"line {i}\n".encode() for i in range(200))
    message = termination_message(asks, 1, log)
    assert message is not None
    # a kubelet's limits: the last 80 lines, at most 2048 bytes
    assert message.splitlines() == [f"line {i}" for i in range(120, 200)]
    long_lines = b"x" * 5000 + b"\nthe end\n"
    tail = termination_message(asks, 1, long_lines)
    assert tail is not None
    assert tail.endswith("the end")
    assert len(tail.encode()) <= 2048
    assert termination_message(asks, 0, log) is None  # a clean exit says nothing
    assert termination_message({"name": "notebook"}, 1, log) is None  # policy File (default)
    assert termination_message(asks, 1, b"") is None

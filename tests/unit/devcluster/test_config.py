"""devcluster/config.py: the test lanes' clusters (the rest of its tests are in
tests/integration/test_devcluster_pure.py, beside the cluster's other pure parts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.config import (
    DEMO_PORT_BASE,
    PORT_OFFSETS,
    demo_settings,
    lane_environ,
    load_settings,
)
from devcluster.hub import port_block


def test_lane_zero_is_the_tests_cluster_as_the_environment_chooses_it(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "GPUAAS_CLUSTER_PORT_APISERVER": "6443", "OTHER": "kept"}
    assert lane_environ(0, env) == env


def test_lanes_share_no_directory_port_pod_ip_or_hub_port_with_each_other_or_the_demo(
    tmp_path: Path,
) -> None:
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin", "GPUAAS_CLUSTER_PORT_SCHEDULER": "10259"}
    lanes = [load_settings(lane_environ(n, env)) for n in range(3)]
    everyone = [*lanes, demo_settings(env)]

    assert len({s.state_dir for s in everyone}) == 4
    assert lanes[1].state_dir == Path(f"{lanes[0].state_dir}-lane1")
    ports = [p for s in everyone for _, p in s.ports.items()]
    assert len(set(ports)) == len(ports) == 4 * len(PORT_OFFSETS)
    assert DEMO_PORT_BASE not in {s.port_base for s in lanes}
    assert len({s.pod_ip_prefix for s in everyone}) == 4
    blocks = {port_block({"GPUAAS_CLUSTER_PORT_BASE": str(s.port_base)}).start for s in everyone}
    assert len(blocks) == 4
    # The other variables go along; a one-port override stays with lane 0 alone.
    assert lane_environ(1, env)["PATH"] == "/usr/bin"
    assert lanes[0].ports.scheduler == 10259
    assert lanes[1].ports.scheduler != 10259


def test_a_lane_that_would_leave_the_loopback_octets_is_refused(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "GPUAAS_CLUSTER_POD_IP_PREFIX": "127.156"}
    assert lane_environ(0, env) == env
    with pytest.raises(ValueError, match=r"127\.256"):
        lane_environ(1, env)
    with pytest.raises(ValueError, match="want 0 or more"):
        lane_environ(-1, env)

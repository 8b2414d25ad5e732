"""devcluster/testing.py's pure parts (the fixture and helpers run in tests/integration)."""

from __future__ import annotations

from pathlib import Path

from devcluster.testing import runs_from

STATE = Path("/tmp/cluster-x")


def test_a_process_runs_from_its_state_dir_by_argument_flag_value_or_working_directory() -> None:
    assert runs_from(STATE, ["etcd", "--data-dir=/tmp/cluster-x/etcd"], "/")
    assert runs_from(STATE, ["python", "-m", "devcluster.nodeagent", "/tmp/cluster-x"], "/")
    assert runs_from(STATE, ["server"], "/tmp/cluster-x/pods/alice")
    assert runs_from(STATE, ["server"], "/tmp/cluster-x")


def test_a_sibling_directory_with_the_same_start_is_another_clusters() -> None:
    lane1 = "/tmp/cluster-x-lane1"
    assert not runs_from(STATE, ["etcd", f"--data-dir={lane1}/etcd"], lane1)
    assert not runs_from(STATE, ["kueue", f"--config={lane1}/kueue.yaml"], "")

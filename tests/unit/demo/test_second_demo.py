"""A second ``make demo`` in the same clone is refused before it starts anything, and says who
holds the demo's cluster and how to stop it (devcluster/claim.py; the claim itself:
tests/integration/test_devcluster_pure.py; the demo's cluster beside the tests' one:
tests/integration/test_teardown.py)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import demo.__main__ as demo_main
from devcluster import claim
from devcluster.config import Settings, demo_settings


def test_a_second_demo_in_the_same_clone_is_refused_with_who_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(demo_settings({"HOME": str(tmp_path)}), state_dir=tmp_path / "cluster")
    monkeypatch.setattr(demo_main, "demo_settings", lambda port_base: settings)
    monkeypatch.setenv("GPUAAS_CLUSTER_PORT_BASE", "1")  # main() sets it; restored after
    monkeypatch.setattr(sys, "argv", ["demo"])

    def must_not_start(*_args: object) -> None:
        raise AssertionError("the second demo started")

    monkeypatch.setattr(demo_main, "run_demo", must_not_start)
    with claim.exclusive(settings, "make demo in /the/first/clone") as first:
        first.note(url="http://127.0.0.1:8000")
        with pytest.raises(SystemExit) as refused:
            demo_main.main()
    message = str(refused.value)
    assert message.startswith("make demo: not started: ")
    assert "make demo in /the/first/clone" in message
    assert "http://127.0.0.1:8000" in message
    assert f"kill -INT {os.getpid()}" in message  # how to stop the first one


def test_with_no_other_demo_the_demo_takes_its_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = replace(demo_settings({"HOME": str(tmp_path)}), state_dir=tmp_path / "cluster")
    monkeypatch.setattr(demo_main, "demo_settings", lambda port_base: settings)
    monkeypatch.setenv("GPUAAS_CLUSTER_PORT_BASE", "1")
    monkeypatch.setattr(sys, "argv", ["demo"])
    ran: list[Settings] = []
    monkeypatch.setattr(demo_main, "run_demo", lambda _args, s, _claim: ran.append(s))
    demo_main.main()
    assert ran == [settings]

"""The sizing view's MIG part (console/fit.py, pure): per MIG node, its config now, the slices
its pods want and the config that would serve them, with the line that applies it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gpuaas_service.console.fit import fit_rows, mig_rows
from jupyter_gpuaas.core.sizing import PeakHistory


def node(name: str, product: str, allocatable: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "nvidia.com/gpu.product": product,
                "nvidia.com/mig.strategy": "mixed",
                "gpuaas.dev/pool": name,
                **labels,
            },
        },
        "status": {"allocatable": allocatable},
    }


def pod(resource: str, n: int, on: str = "", pool: str = "", phase: str = "Running") -> Any:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {resource: str(n)}}}],
    }
    if on:
        spec["nodeName"] = on
    if pool:
        spec["nodeSelector"] = {"gpuaas.dev/pool": pool}
    return {"spec": spec, "status": {"phase": phase}}


NODES = [
    node(
        "local-0",
        "NVIDIA-A100-SXM4-40GB",
        {"nvidia.com/mig-1g.5gb": "7"},
        **{"nvidia.com/mig.config": "all-1g.5gb"},
    ),
    node("h100-mig-0", "NVIDIA-H100-80GB-HBM3", {"nvidia.com/mig-1g.10gb": "14"}),
    node("l4-0", "NVIDIA-L4", {"nvidia.com/gpu": "4"}),  # not MIG: left out
]


def test_each_mig_node_gets_its_advice_from_the_demand_on_it() -> None:
    pods = [
        pod("nvidia.com/mig-1g.5gb", 2, on="local-0"),
        pod("nvidia.com/mig-3g.20gb", 1, pool="local-0", phase="Pending"),
        pod("nvidia.com/mig-2g.10gb", 1, pool="local-0", phase="Pending"),
        pod("nvidia.com/mig-3g.40gb", 3, pool="h100-mig-0", phase="Pending"),
        pod("nvidia.com/mig-1g.10gb", 1, on="h100-mig-0", phase="Succeeded"),
    ]
    rows = mig_rows(NODES, pods)
    assert [r["node"] for r in rows] == ["h100-mig-0", "local-0"]
    h100, local = rows
    assert local == {
        "node": "local-0",
        "model": "A100-40GB",
        "gpus": 1,
        "now": "all-1g.5gb",
        "demand": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
        "advised": "all-balanced",
        "reason": "serves 7 of 7 compute slices asked for",
        "line": "node local-0: all-1g.5gb now; demand suggests all-balanced (serves 7 of 7 "
        "compute slices asked for); apply with kubectl label node local-0 "
        "nvidia.com/mig.config=all-balanced --overwrite",
    }
    # 14 x 1g.10gb: two H100s; three 3g.40gb wanted, two GPUs hold four
    assert (h100["gpus"], h100["now"], h100["advised"]) == (2, None, "all-3g.40gb")
    assert h100["demand"] == {"3g.40gb": 3}


def test_the_sizing_view_carries_mig_only_when_given_nodes() -> None:
    without = fit_rows([], PeakHistory({}), None)
    assert "mig" not in without
    with_nodes = fit_rows([], PeakHistory({}), None, mig_nodes=NODES, pods=[])
    lines = [r["line"] for r in with_nodes["mig"]]
    assert lines == [
        "node h100-mig-0: no named config now; no measured demand for MIG slices",
        "node local-0: all-1g.5gb now; no measured demand for MIG slices",
    ]


def test_a_pod_asking_for_an_unknown_mig_profile_is_left_out_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fourth audit, finding 3: ``nvidia.com/mig-foo`` made the advice raise (every cycle)."""
    caplog.set_level(logging.WARNING, logger="gpuaas.console")
    pods = [
        pod("nvidia.com/mig-foo", 1, pool="local-0", phase="Pending"),
        pod("nvidia.com/mig-1g.999gb", 2, pool="local-0", phase="Pending"),
        pod("nvidia.com/mig-1g.5gb", 2, on="local-0"),
    ]
    for _ in range(3):
        rows = mig_rows(NODES, pods)
        local = next(r for r in rows if r["node"] == "local-0")
        assert local["demand"] == {"1g.5gb": 2}
        assert local["advised"] == "all-1g.5gb"
    logged = [r.getMessage() for r in caplog.records if "no known model has" in r.getMessage()]
    assert len(logged) == 2, logged  # once per profile, not once per cycle
    assert any("nvidia.com/mig-foo" in m for m in logged)

"""``gpuaas-admin --mig-advice``: the MIG advice from ``kubectl get ... -o json`` outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaas_service.cli import main

NODE = {
    "metadata": {
        "name": "local-0",
        "labels": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "all-1g.5gb",
        },
    },
    "status": {"allocatable": {"nvidia.com/mig-1g.5gb": "7"}},
}


def slice_pod(profile: str) -> dict[str, object]:
    limits = {f"nvidia.com/mig-{profile}": "1"}
    return {
        "spec": {"nodeName": "local-0", "containers": [{"resources": {"limits": limits}}]},
        "status": {"phase": "Running"},
    }


def write(tmp_path: Path, name: str, items: list[object]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"kind": "List", "items": items}))
    return str(path)


def test_mig_advice_prints_the_line_per_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = write(tmp_path, "nodes.json", [NODE])
    pods = write(tmp_path, "pods.json", [slice_pod(p) for p in ("1g.5gb", "2g.10gb", "3g.20gb")])
    assert main(["--mig-advice", nodes, "--pods", pods]) == 0
    assert capsys.readouterr().out == (
        "node local-0: all-1g.5gb now; demand suggests all-balanced (serves 6 of 6 compute "
        "slices asked for); apply with kubectl label node local-0 "
        "nvidia.com/mig.config=all-balanced --overwrite\n"
    )
    assert main(["--mig-advice", nodes, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["node"], row["now"], row["advised"], row["demand"]) == (
        "local-0",
        "all-1g.5gb",
        "all-1g.5gb",
        {},
    )


def test_mig_advice_refuses_what_is_not_a_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "nodes.json"
    bad.write_text('{"kind": "Node"}')
    assert main(["--mig-advice", str(bad)]) == 2
    assert "not a list" in capsys.readouterr().err

"""Fourth audit, finding 9: the whole cards a waiting pod asks for (reclaim/inputs.py
``_whole_cards``, behind every placement wait) are read as Kubernetes quantities: ``int("1k")``
raised on every cycle that saw such a pod."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.reclaim.inputs import _whole_cards


def pod(*containers: dict[str, str]) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": f"c{i}", "resources": {"requests": asked, "limits": asked}}
                for i, asked in enumerate(containers)
            ]
        }
    }


@pytest.mark.parametrize(
    ("gpu", "cores", "cards"),
    [
        ("2", "100", 2),
        ("2", "0.1k", 2),  # 100 cores as Kubernetes may write them
        ("1k", "100", 1000),  # raised ValueError before the fix
        ("2", "1e2", 2),
        (None, "100", 1),  # no count: one card
        ("1", "25", 0),  # a share, not a whole card
        ("one", "100", 0),  # not a quantity: no whole card, no traceback
        ("1", "1e999999999", 0),  # far beyond int64: not a quantity Kubernetes stores
    ],
)
def test_whole_cards_are_read_as_kubernetes_quantities(
    gpu: str | None, cores: str, cards: int
) -> None:
    asked = {"nvidia.com/gpucores": cores, "nvidia.com/gpumem": "81920"}
    if gpu is not None:
        asked["nvidia.com/gpu"] = gpu
    assert _whole_cards(pod(asked)) == cards


def test_each_containers_whole_cards_add_up() -> None:
    whole = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "100"}
    share = {"nvidia.com/gpu": "1", "nvidia.com/gpucores": "50"}
    assert _whole_cards(pod(whole, share, {**whole, "nvidia.com/gpu": "2"})) == 3

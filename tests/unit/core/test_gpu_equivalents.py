"""GPU-equivalents: the catalog's value as the spawner wrote it, a guess only for other work."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from jupyter_gpuaas.core.gpu_equivalents import (
    exact_gpu_equivalents,
    format_gpu_equivalents,
    parse_gpu_equivalents,
    pod_gpu_equivalents,
    resource_gpu_equivalents,
)
from jupyter_gpuaas.core.labels import GPU_EQUIVALENTS_ANNOTATION


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(2), "2"),
        (Fraction(1, 7), "0.14"),
        (Fraction(1, 4), "0.25"),
        (Fraction(3, 2), "1.5"),
    ],
)
def test_format_gpu_equivalents(value: Fraction, text: str) -> None:
    assert format_gpu_equivalents(value) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("1/7", Fraction(1, 7)),
        (" 0.25 ", Fraction(1, 4)),
        ("0", Fraction(0)),
        ("-1", None),
        ("1/0", None),
        ("a lot", None),
        ("", None),
        (None, None),
        (2, None),  # annotations are strings
    ],
)
def test_parse_gpu_equivalents(text: object, value: Fraction | None) -> None:
    assert parse_gpu_equivalents(text) == value


@pytest.mark.parametrize("value", [Fraction(1, 7), Fraction(2), Fraction(3, 4), Fraction(0)])
def test_exact_form_reads_back_the_same(value: Fraction) -> None:
    assert parse_gpu_equivalents(exact_gpu_equivalents(value)) == value


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"nvidia.com/gpu": Fraction(2)}, Fraction(2)),
        ({"nvidia.com/mig-1g.5gb": Fraction(1)}, Fraction(1, 7)),
        ({"nvidia.com/mig-3g.20gb": Fraction(2)}, Fraction(6, 7)),
        ({"nvidia.com/gpu.shared": Fraction(1)}, Fraction(1, 4)),
        ({"cpu": Fraction(4), "memory": Fraction(2**30)}, Fraction(0)),
        ({"nvidia.com/mig-bogus": Fraction(1)}, Fraction(0)),
        # HAMi: one pod's 2 vGPUs x 25 %, or Kueue's transformed total
        (
            {"nvidia.com/gpu": Fraction(2), "nvidia.com/gpucores": Fraction(25)},
            Fraction(1, 2),
        ),
        (
            {"nvidia.com/gpu": Fraction(3), "nvidia.com/total-gpucores": Fraction(75)},
            Fraction(3, 4),
        ),
    ],
)
def test_resource_gpu_equivalents(resources: dict[str, Fraction], expected: Fraction) -> None:
    assert resource_gpu_equivalents(resources) == expected


def pod(annotation: str | None, resources: dict[str, str]) -> dict[str, Any]:
    annotations = {GPU_EQUIVALENTS_ANNOTATION: annotation} if annotation is not None else {}
    return {
        "metadata": {"name": "p", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"requests": resources}}]},
    }


@pytest.mark.parametrize(
    ("annotation", "resources", "expected"),
    [
        # the spawner's pod: the catalog's value wins over any guess from the resource name
        pytest.param("1/2", {"nvidia.com/gpu.shared": "1"}, Fraction(1, 2), id="catalog value"),
        pytest.param("1/7", {"nvidia.com/gpu": "1"}, Fraction(1, 7), id="MIG single strategy"),
        pytest.param("0", {"cpu": "2"}, Fraction(0), id="cpu offering"),
        # work the spawner did not create: guessed from its requests
        pytest.param(None, {"nvidia.com/gpu": "2"}, Fraction(2), id="training job"),
        pytest.param(None, {"nvidia.com/mig-3g.20gb": "1"}, Fraction(3, 7), id="job on a slice"),
        pytest.param("lots", {"nvidia.com/gpu": "1"}, Fraction(1), id="unreadable annotation"),
    ],
)
def test_pod_gpu_equivalents(
    annotation: str | None, resources: dict[str, str], expected: Fraction
) -> None:
    assert pod_gpu_equivalents(pod(annotation, resources)) == expected

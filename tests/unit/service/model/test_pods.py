"""Which hub server a notebook pod is (model/pods.py), read once for the loop and the console."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.model.pods import hub_server
from jupyter_gpuaas.core.labels import HUB_SERVERNAME_ANNOTATION, HUB_USERNAME_ANNOTATION


def _pod(annotations: dict[str, Any] | None) -> dict[str, Any]:
    return {"metadata": {"name": "jupyter-x", "annotations": annotations}}


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({HUB_USERNAME_ANNOTATION: "alice"}, ("alice", "")),
        ({HUB_USERNAME_ANNOTATION: "alice", HUB_SERVERNAME_ANNOTATION: "gpu2"}, ("alice", "gpu2")),
        ({HUB_USERNAME_ANNOTATION: "alice", HUB_SERVERNAME_ANNOTATION: None}, ("alice", "")),
        ({HUB_USERNAME_ANNOTATION: ""}, None),
        ({HUB_USERNAME_ANNOTATION: 7}, None),
        ({HUB_SERVERNAME_ANNOTATION: "gpu2"}, None),
        (None, None),
    ],
)
def test_hub_server_reads_the_spawners_annotations(
    annotations: dict[str, Any] | None, expected: tuple[str, str] | None
) -> None:
    assert hub_server(_pod(annotations)) == expected


def test_a_pod_without_metadata_names_no_server() -> None:
    assert hub_server({}) is None

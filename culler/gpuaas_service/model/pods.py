"""Notebook pods as the service reads them: which hub server a pod is (its placement
annotations, read by the reclaim loop and the console alike), and where a workbench's pod is —
what the Kubernetes client needs to annotate it or post an Event on it, and what the reclaim
loop keeps of each pod it acts on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jupyter_gpuaas.core.kueue import as_mapping
from jupyter_gpuaas.core.labels import HUB_SERVERNAME_ANNOTATION, HUB_USERNAME_ANNOTATION

__all__ = ["PodRef", "hub_server"]


@dataclass(frozen=True)
class PodRef:
    """Where a workbench's pod is (for annotations and Events)."""

    namespace: str
    name: str
    uid: str


def hub_server(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """The hub user and server name (``""``: the default server) that KubeSpawner wrote on
    the pod; ``None`` for a pod that names no hub user."""
    ann = as_mapping(as_mapping(pod.get("metadata")).get("annotations"))
    user = ann.get(HUB_USERNAME_ANNOTATION)
    if not isinstance(user, str) or not user:
        return None
    return user, str(ann.get(HUB_SERVERNAME_ANNOTATION) or "")

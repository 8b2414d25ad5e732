"""Where a workbench's pod is: what the Kubernetes client needs to annotate it or post an Event
on it, and what the reclaim loop keeps of each pod it acts on."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PodRef"]


@dataclass(frozen=True)
class PodRef:
    """Where a workbench's pod is (for annotations and Events)."""

    namespace: str
    name: str
    uid: str

"""Failed starts of GPU workbenches, seen in the notebook pods the service watches (pure).

A **failed start** is a workbench pod that got past the queue — Kueue admitted it (removed its
admission gate ``kueue.x-k8s.io/admission``), or it was never queued — and then ended without
ever being Ready: its phase became ``Failed`` or ``Succeeded`` (the server exited), or it was
deleted (the hub gave up at its ``start_timeout``, the image could not be pulled, the user
cancelled the start after admission). A pod deleted while it still waited in the queue is
*not* a failed start: it never started (the queue views count its wait). Each pod (by uid)
counts at most once.

:meth:`StartWatch.observe` is given the pods as the watch holds them, once per cycle of the
reclaim loop: a pod admitted and gone between two looks is not seen past the queue and is not
counted, and a restart of the service forgets what it saw (a pod that ends before the first
look after it is not counted either). It is a floor, not an exact figure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gpuaas_service.model.pods import hub_server
from jupyter_gpuaas.core.kueue import ADMISSION_GATE, as_list, as_mapping, read_conditions
from jupyter_gpuaas.core.labels import OFFERING_LABEL, TEAM_LABEL

__all__ = ["FailedStart", "StartWatch", "past_the_queue"]


@dataclass(frozen=True)
class FailedStart:
    """One workbench pod that was admitted and ended without being Ready."""

    at: datetime
    team: str
    user: str
    server: str
    offering: str
    pod: str
    how: str
    """``failed`` (the pod's phase), ``exited`` (phase Succeeded) or ``deleted``."""


def past_the_queue(pod: Mapping[str, Any]) -> bool:
    """Kueue has admitted the pod (its admission gate is gone), or it was never gated."""
    spec = as_mapping(pod.get("spec"))
    if spec.get("nodeName"):
        return True
    return not any(
        as_mapping(g).get("name") == ADMISSION_GATE for g in as_list(spec.get("schedulingGates"))
    )


def _ready(pod: Mapping[str, Any]) -> bool:
    ready = read_conditions(as_mapping(pod.get("status"))).get("Ready")
    return ready is not None and ready.status is True


@dataclass
class _Seen:
    """What was seen of one pod so far."""

    team: str
    user: str
    server: str
    offering: str
    pod: str
    admitted: bool = False
    ready: bool = False
    counted: bool = False


@dataclass
class StartWatch:
    """Remembers each workbench pod between looks, to tell a failed start when it ends."""

    seen: dict[str, _Seen] = field(default_factory=dict)
    """Pod uid → what was seen of it (pods that are gone are dropped)."""

    def observe(self, pods: Iterable[Mapping[str, Any]], now: datetime) -> list[FailedStart]:
        """The failed starts that ended since the previous look (stamped ``now``)."""
        failed: list[FailedStart] = []
        here: set[str] = set()
        for pod in pods:
            meta = as_mapping(pod.get("metadata"))
            uid = str(meta.get("uid") or "")
            server = hub_server(pod)
            if not uid or server is None:
                continue
            here.add(uid)
            seen = self.seen.get(uid)
            if seen is None:
                labels = as_mapping(meta.get("labels"))
                seen = self.seen[uid] = _Seen(
                    team=str(labels.get(TEAM_LABEL) or "-"),
                    user=server[0],
                    server=server[1],
                    offering=str(labels.get(OFFERING_LABEL) or ""),
                    pod=str(meta.get("name") or ""),
                )
            seen.admitted = seen.admitted or past_the_queue(pod)
            seen.ready = seen.ready or _ready(pod)
            if seen.counted or seen.ready or not seen.admitted:
                continue
            phase = as_mapping(pod.get("status")).get("phase")
            how = (
                "failed"
                if phase == "Failed"
                else "exited"
                if phase == "Succeeded"
                else "deleted"
                if meta.get("deletionTimestamp")
                else ""
            )
            if how:
                seen.counted = True
                failed.append(_failed(seen, now, how))
        for uid in [u for u in self.seen if u not in here]:
            seen = self.seen.pop(uid)
            if seen.admitted and not seen.ready and not seen.counted:
                failed.append(_failed(seen, now, "deleted"))
        return failed


def _failed(seen: _Seen, now: datetime, how: str) -> FailedStart:
    return FailedStart(now, seen.team, seen.user, seen.server, seen.offering, seen.pod, how)

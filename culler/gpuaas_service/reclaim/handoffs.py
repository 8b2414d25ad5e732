"""The culler's hand-off records as text, kept in a ConfigMap across restarts.

A hand-off record says which queued workload a reclaim freed GPUs for, and when it was admitted
(:class:`.decide.HandOffRecord`); ``reported`` marks the results already in the audit log, so a
restarted culler neither forgets a hand-off it is waiting on nor reports one twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from gpuaas_service.reclaim.decide import HandOffRecord
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kueue import parse_time

__all__ = ["HANDOFFS_CONFIGMAP", "handoffs_from_text", "handoffs_to_text"]

HANDOFFS_CONFIGMAP = "gpuaas-culler-handoffs"
"""ConfigMap in the notebook namespace that keeps the hand-off records across restarts."""


def handoffs_to_text(
    handoffs: Mapping[str, HandOffRecord], reported: Iterable[tuple[str, str]]
) -> str:
    """The hand-off records and which of their results were already recorded, as JSON."""
    done = sorted(reported)
    return json.dumps(
        {
            "version": 1,
            "handoffs": [
                {
                    "cluster_queue": cq,
                    "workload": r.workload,
                    "reclaimed_at": isoformat_z(r.reclaimed_at),
                    "admitted_at": isoformat_z(r.admitted_at) if r.admitted_at else None,
                    "team": r.team,
                    "reported": [m for w, m in done if w == r.workload],
                }
                for cq, r in sorted(handoffs.items())
            ],
        },
        sort_keys=True,
    )


def handoffs_from_text(text: str) -> tuple[dict[str, HandOffRecord], set[tuple[str, str]]]:
    """The inverse of :func:`handoffs_to_text`; ``ValueError`` says what is wrong."""
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != 1:
        raise ValueError("not a version 1 hand-off record")
    handoffs: dict[str, HandOffRecord] = {}
    reported: set[tuple[str, str]] = set()
    for raw in data.get("handoffs") or []:
        reclaimed = parse_time(raw.get("reclaimed_at"))
        if reclaimed is None or not raw.get("cluster_queue") or not raw.get("workload"):
            raise ValueError(f"incomplete hand-off record: {raw!r}")
        record = HandOffRecord(
            workload=str(raw["workload"]),
            cluster_queue=str(raw["cluster_queue"]),
            reclaimed_at=reclaimed,
            admitted_at=parse_time(raw.get("admitted_at")),
            team=str(raw.get("team") or ""),  # records written before teams were kept have none
        )
        handoffs[record.cluster_queue] = record
        reported |= {(record.workload, str(m)) for m in raw.get("reported") or []}
    return handoffs, reported

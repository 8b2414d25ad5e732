"""Snapshots of a cycle's inputs: dumped by the live service and read back by --explain."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta

from gpuaas_service.console.aggregates import plan_rows
from gpuaas_service.console.preview import (
    plan_of_snapshot,
)
from gpuaas_service.reclaim.decide import Action, decide
from gpuaas_service.reclaim.explain_input import dump_snapshot, load_snapshot
from gpuaas_service.reclaim.idleness import ActivityReport
from gpuaas_service.reclaim.policy import load_policy_file
from jupyter_gpuaas.core.activity import parse_activity
from tests.support.console_samples import EXAMPLES


def test_dump_snapshot_gives_back_the_same_plan() -> None:
    """What the live console serves for --explain: the loop's inputs, dumped and read again."""
    policies = load_policy_file(str(EXAMPLES / "policy.yaml"))
    data = json.loads((EXAMPLES / "snapshot.json").read_text())
    snap = load_snapshot(data, policies)
    plan = decide(snap.workbenches, snap.pending, policies, now=snap.now, handoffs=snap.handoffs)
    reports = {
        w["user"]: ActivityReport(
            datetime.fromisoformat(w["activity_received_at"].replace("Z", "+00:00")),
            parse_activity(w["activity"]),
        )
        for w in data["workbenches"]
        if w.get("activity")
    }
    # as the loop holds them: a warning with its deadline and reason on the pod
    warned = [
        replace(
            d.workbench,
            warned_at=snap.now - timedelta(minutes=1),
            warned_deadline=snap.now + timedelta(minutes=14),
            warned_reason="told",
        )
        if d.action is Action.WARN
        else d.workbench
        for d in plan.decisions
    ]
    plan = decide(warned, snap.pending, policies, now=snap.now, handoffs=snap.handoffs)
    dumped = dump_snapshot(
        plan.now, warned, snap.pending, snap.handoffs, reports=reports, pod_utilization={}
    )
    again = plan_of_snapshot(json.loads(json.dumps(dumped)), policies)
    assert plan_rows(again) == plan_rows(plan)
    assert any(r["action"] == "wait" for r in plan_rows(again))

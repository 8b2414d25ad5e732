"""What the reclaim loop publishes (gpuaas_service.reclaim.events): a cycle's result names the
workbenches its plan confirmed, in the plan's order, and the events are values that a listener
cannot change under the loop."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import pytest

from gpuaas_service.reclaim.decide import Action, Decision, Plan, Workbench
from gpuaas_service.reclaim.events import CycleInputs, CycleResult, LoopEvent
from gpuaas_service.reclaim.idleness import Idleness, State

NOW = datetime(2026, 12, 1, 12, tzinfo=timezone.utc)


def workbench(user: str, server: str = "") -> Workbench:
    idle = Idleness(State.IDLE, last_active=NOW, reason="idle")
    return Workbench(user=user, server=server, started_at=NOW, idleness=idle)


def inputs() -> CycleInputs:
    return CycleInputs(pending=(), handoffs=(), reports={}, pod_utilization={}, dry_run=False)


def test_a_cycles_workbenches_are_its_plans_in_the_plans_order() -> None:
    wbs = [workbench("carol"), workbench("alice", "gpu2"), workbench("bob")]
    actions = [Action.SKIP, Action.RECLAIM, Action.WARN]
    decisions = tuple(
        Decision(workbench=wb, action=a, code="c", reason="r")
        for wb, a in zip(wbs, actions, strict=True)
    )
    result = CycleResult(now=NOW, plan=Plan(now=NOW, decisions=decisions), inputs=inputs())
    assert [wb.key for wb in result.workbenches] == ["carol", "alice/gpu2", "bob"]


def test_an_empty_plan_has_no_workbenches() -> None:
    result = CycleResult(now=NOW, plan=Plan(now=NOW, decisions=()), inputs=inputs())
    assert result.workbenches == []


def test_a_cycles_inputs_keep_nothing_of_the_cluster_unless_given() -> None:
    kept = inputs()
    assert (kept.waits, kept.queue_state, kept.workloads, kept.pods, kept.job_pods) == (
        (),
        None,
        (),
        (),
        (),
    )


def test_an_event_is_a_value_its_listeners_cannot_change() -> None:
    event = LoopEvent(kind="reclaim", at=NOW, workbench=workbench("alice"), reason="idle")
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.reason = "changed"  # type: ignore[misc]
    assert (event.workload, event.team, event.result, event.latency_seconds, event.dry_run) == (
        "",
        "",
        "",
        None,
        False,
    )


def test_an_event_is_built_by_keyword_only() -> None:
    with pytest.raises(TypeError):
        LoopEvent("reclaim", NOW)  # type: ignore[call-arg]

"""The kernel-state fields of the activity payload: a server says it keeps state, the service
asks for a snapshot, the server answers with each kernel's outcome (core/activity.py)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from jupyter_gpuaas.core.activity import (
    KernelStateReport,
    ReportError,
    SnapshotRequest,
    activity_json,
    kernel_state_json,
    parse_activity,
    read_kernel_state_mark,
    snapshot_request_of,
)
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)


def payload(**extra: Any) -> dict[str, Any]:
    return {
        "sampled_at": isoformat_z(T0),
        "source": "simulated",
        "error": None,
        "kernels": [],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": isoformat_z(T0),
        **extra,
    }


def kept_with_losses(lost: int = 1) -> KernelStateOutcome:
    return KernelStateOutcome(
        "k1",
        "train.ipynb",
        "kept_with_losses",
        lost=tuple(LostVariable(f"batches{i}", "a generator") for i in range(lost)),
        bytes=1024,
        seconds=0.5,
        saved_at=T0,
    )


def test_the_kernel_state_fields_go_and_come_back() -> None:
    report = KernelStateReport(T0, (kept_with_losses(),))
    body = payload(keeps_kernel_state=True, kernel_state=kernel_state_json(report))
    activity = parse_activity(json.loads(json.dumps(body)), now=T0)
    assert activity.keeps_kernel_state is True
    assert activity.kernel_state == report
    assert activity_json(activity)["kernel_state"] == kernel_state_json(report)


def test_a_server_that_says_nothing_keeps_no_state_and_writes_no_new_fields() -> None:
    activity = parse_activity(payload(), now=T0)
    assert activity.keeps_kernel_state is False
    assert activity.kernel_state is None
    out = activity_json(activity)
    assert "keeps_kernel_state" not in out
    assert "kernel_state" not in out


def test_bad_kernel_state_fields_are_listed_with_their_paths() -> None:
    bad = payload(
        keeps_kernel_state="yes",
        kernel_state={
            "outcomes": [
                {"kernel_id": "k1", "outcome": "saved"},
                {"kernel_id": "k2", "outcome": "kept", "seconds": float("nan")},
            ],
            "error": 5,
        },
    )
    with pytest.raises(ReportError) as e:
        parse_activity(bad, now=T0)
    paths = {err.path for err in e.value.errors}
    assert paths == {
        "keeps_kernel_state",
        "kernel_state.requested_at",
        "kernel_state.error",
        "kernel_state.outcomes[0]",
        "kernel_state.outcomes[1]",
    }
    assert "is not one of kept" in str(e.value)


def test_an_answer_dated_after_the_services_clock_is_refused() -> None:
    late = KernelStateReport(T0 + timedelta(hours=1), ())
    with pytest.raises(ReportError, match=r"kernel_state.requested_at: .* lies in the future"):
        parse_activity(payload(kernel_state=kernel_state_json(late)), now=T0)


def test_a_long_list_of_lost_variables_is_shortened_and_the_rest_counted() -> None:
    report = KernelStateReport(T0, (kept_with_losses(lost=3000),))
    body = kernel_state_json(report, max_bytes=4096)
    assert len(json.dumps(body)) <= 4096
    lost = body["outcomes"][0]["lost"]
    assert lost[-1] == {"name": f"{3001 - len(lost)} more", "reason": "too many to list"}
    assert lost[0] == {"name": "batches0", "reason": "a generator"}
    full = kernel_state_json(KernelStateReport(T0, (kept_with_losses(lost=3),)))
    assert [v["name"] for v in full["outcomes"][0]["lost"]] == ["batches0", "batches1", "batches2"]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            {"snapshot": {"requested_at": isoformat_z(T0), "deadline_seconds": 58}},
            SnapshotRequest(T0, 58.0),
        ),
        ({"snapshot": None}, None),
        ({}, None),
        ({"snapshot": {"requested_at": "soon", "deadline_seconds": 5}}, None),
        ({"snapshot": {"requested_at": isoformat_z(T0), "deadline_seconds": -1}}, None),
        ({"snapshot": {"requested_at": isoformat_z(T0), "deadline_seconds": True}}, None),
        ({"snapshot": {"requested_at": isoformat_z(T0), "deadline_seconds": float("inf")}}, None),
    ],
)
def test_the_servers_reading_of_a_snapshot_request(
    answer: dict[str, Any], expected: SnapshotRequest | None
) -> None:
    assert snapshot_request_of(answer) == expected


def test_the_request_goes_to_json_and_is_read_back() -> None:
    request = SnapshotRequest(T0, 12.34567, "reclaim")
    assert snapshot_request_of({"snapshot": request.to_json()}) == SnapshotRequest(T0, 12.346)


def test_the_mark_left_on_a_pod_is_read_back_or_ignored() -> None:
    report = KernelStateReport(T0, (kept_with_losses(),), "")
    assert read_kernel_state_mark(json.dumps(kernel_state_json(report))) == report
    for unreadable in (None, "", "{", "[]", json.dumps({"outcomes": []})):
        assert read_kernel_state_mark(unreadable) is None

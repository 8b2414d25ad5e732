"""The hand-off records as the text kept in their ConfigMap."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gpuaas_service.reclaim.decide import HandOffRecord
from gpuaas_service.reclaim.handoffs import (
    handoffs_from_text,
    handoffs_to_text,
)
from tests.support.service_world import (
    T0,
)


def test_handoff_records_round_trip() -> None:
    records = {
        "team-a-training": HandOffRecord(
            workload="team-a/train",
            cluster_queue="team-a-training",
            reclaimed_at=T0,
            admitted_at=T0 + timedelta(seconds=12),
            team="team-a",
        )
    }
    marks = {("team-a/train", "handoff-succeeded"), ("team-a/other", "handoff-failed")}
    back, reported = handoffs_from_text(handoffs_to_text(records, marks))
    assert back == records
    assert reported == {("team-a/train", "handoff-succeeded")}
    with pytest.raises(ValueError, match="incomplete"):
        handoffs_from_text('{"version": 1, "handoffs": [{"workload": "x"}]}')
    # a record kept before teams were recorded still reads, without a team
    old = handoffs_to_text(records, marks).replace(', "team": "team-a"', "")
    assert handoffs_from_text(old)[0]["team-a-training"].team == ""

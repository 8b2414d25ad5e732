"""The activity payload refuses what it used to clamp or echo, and durations and times that
overflow are field errors."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from jupyter_gpuaas.core.activity import MAX_KERNELS, ReportError, parse_activity
from jupyter_gpuaas.core.durations import parse_duration
from jupyter_gpuaas.core.kueue import parse_time

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


def payload(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "sampled_at": "2026-11-30T11:59:50Z",
        "source": "nvml",
        "kernels": [
            {"kernel_id": "k", "execution_state": "idle", "last_activity": "2026-11-30T11:00:00Z"}
        ],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": "2026-11-30T11:00:00Z",
    }
    base.update(over)
    return base


def paths(bad: dict[str, Any]) -> list[str]:
    with pytest.raises(ReportError) as info:
        parse_activity(bad, now=NOW)
    return [e.path for e in info.value.errors]


def test_times_in_the_future_are_refused_not_clamped() -> None:
    assert parse_activity(payload(sampled_at="2026-11-30T12:01:00Z"), now=NOW)  # within skew
    later = "2026-11-30T13:00:00Z"
    kernel = {"kernel_id": "k", "execution_state": "idle", "last_activity": later}
    assert paths(payload(idle_since=later, kernels=[kernel])) == [
        "kernels[0].last_activity",
        "idle_since",
    ]
    assert paths(payload(idle_since="9999-12-31T23:59:59-01:00")) == ["idle_since"]


@pytest.mark.parametrize(
    ("over", "path"),
    [
        ({"gpu_memory": -1}, "gpu_memory"),
        ({"gpu_memory": 1 << 60}, "gpu_memory"),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": float("nan")}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": float("inf")}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": 101}]},
            "gpu_utilization[0].utilization",
        ),
        (
            {"gpu_utilization": [{"uuid": "GPU-1", "utilization": -3}]},
            "gpu_utilization[0].utilization",
        ),
        ({"kernels": [{"kernel_id": "k", "connections": -1}]}, "kernels[0].connections"),
        ({"kernels": [{"kernel_id": "k"}] * (MAX_KERNELS + 1)}, "kernels"),
        ({"error": "x" * 5000}, "error"),
    ],
)
def test_out_of_range_values_and_counts_are_refused(over: dict[str, Any], path: str) -> None:
    assert paths(payload(**over)) == [path]


def test_errors_do_not_echo_unbounded_input() -> None:
    huge = "y" * 100_000
    bad = payload(idle_since=huge, gpu_utilization=[{"uuid": "u", "utilization": huge}] * 60)
    with pytest.raises(ReportError) as info:
        parse_activity(bad, now=NOW)
    assert len(str(info.value)) < 4000
    assert info.value.more > 0  # counted, not listed


def test_overflowing_durations_and_times_are_plain_errors() -> None:
    with pytest.raises(ValueError, match="longest duration"):
        parse_duration("999999999999999w")
    assert parse_time("9999-12-31T23:59:59-01:00") is None
    assert parse_time("0001-01-01T00:00:00+01:00") is None

"""The activity payload's one definition: building, writing and reading it back."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from jupyter_gpuaas.core.activity import (
    BUSY_EXECUTION_STATES,
    MAX_KERNELS,
    Activity,
    KernelActivity,
    ReportError,
    TerminalActivity,
    activity_json,
    build_activity,
    parse_activity,
)

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)
STARTED = T0 - timedelta(hours=1)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def kernel(state: str, minutes: int | None, gpu: int | None = 0) -> KernelActivity:
    return KernelActivity("k", state, at(minutes) if minutes is not None else None, 1, gpu)


def build(
    kernels: list[KernelActivity],
    terminals: list[TerminalActivity] = [],  # noqa: B006 - never modified
    utilization: list[tuple[str, float]] = [],  # noqa: B006 - never modified
) -> Activity:
    return build_activity(
        sampled_at=at(10),
        source="nvml",
        error=None,
        kernels=kernels,
        terminals=terminals,
        utilization=utilization,
        busy_utilization_percent=5,
        started=STARTED,
    )


def test_only_busy_is_busy() -> None:
    assert BUSY_EXECUTION_STATES == ("busy",)
    states = ["busy", "idle", "starting", "restarting", "autorestarting", "dead", None]
    assert [s for s in states if KernelActivity("k", s, None).busy] == ["busy"]


@pytest.mark.parametrize(
    ("kernels", "terminals", "utilization", "expected"),
    [
        pytest.param([], [], [], STARTED, id="nothing ran: idle since the server started"),
        pytest.param([kernel("idle", 5)], [], [], at(5), id="one idle kernel"),
        pytest.param(
            [kernel("idle", 5), kernel("idle", 9)],
            [TerminalActivity("1", at(7))],
            [],
            at(9),
            id="latest of kernels and terminals",
        ),
        pytest.param(
            [kernel("idle", 5)],
            [TerminalActivity("1", at(12))],
            [],
            at(12),
            id="a terminal used later",
        ),
        pytest.param([kernel("busy", 5), kernel("idle", 9)], [], [], None, id="a busy kernel"),
        pytest.param([kernel("idle", 5)], [], [("GPU-0", 6)], None, id="GPU above threshold"),
        pytest.param([kernel("idle", 5)], [], [("GPU-0", 5)], at(5), id="GPU at threshold"),
        pytest.param([kernel("starting", None)], [], [], STARTED, id="no activity time yet"),
        pytest.param([kernel("starting", 8)], [], [], at(8), id="starting is not busy"),
    ],
)
def test_idle_since(
    kernels: list[KernelActivity],
    terminals: list[TerminalActivity],
    utilization: list[tuple[str, float]],
    expected: datetime | None,
) -> None:
    assert build(kernels, terminals, utilization).idle_since == expected


@pytest.mark.parametrize(
    ("sizes", "total"),
    [([], 0), ([0, 2, 3], 5), ([2, None], None)],
)
def test_total_gpu_memory(sizes: list[int | None], total: int | None) -> None:
    assert build([kernel("idle", 0, s) for s in sizes]).gpu_memory == total


def test_what_is_written_reads_back_the_same() -> None:
    activity = build(
        [kernel("busy", 5, 2048), kernel("idle", 7, None)],
        [TerminalActivity("1", at(9))],
        [("GPU-0", 42)],
    )
    assert parse_activity(activity_json(activity)) == activity


def test_parse_null_gpu_memory_means_unknown_size() -> None:
    payload = activity_json(build([kernel("idle", 5)]))
    assert parse_activity({**payload, "gpu_memory": None}).gpu_memory is None


def test_parse_reports_every_problem_with_its_path() -> None:
    bad = {
        "source": 3,
        "kernels": [{"kernel_id": "k", "last_activity": "yesterday", "gpu_memory": -1}, 7],
        "terminals": "none",
        "gpu_utilization": [{"uuid": "GPU-1", "utilization": "high"}],
        "idle_since": "soon",
    }
    with pytest.raises(ReportError) as info:
        parse_activity(bad)
    assert [e.path for e in info.value.errors] == [
        "source",
        "kernels[1]",
        "kernels[0].last_activity",
        "kernels[0].gpu_memory",
        "terminals",
        "gpu_utilization[0].utilization",
        "idle_since",
    ]
    with pytest.raises(ReportError, match=r"\(report\): must be a JSON object"):
        parse_activity([])


# --------------------------------------------------------------------------- limits of a report
# Nothing is clamped or echoed: out-of-range values, times in the future and too many items are
# field errors.

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

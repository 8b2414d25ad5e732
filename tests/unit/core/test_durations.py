"""Durations and times as the project writes and reads them: one form everywhere."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuaas.core.durations import format_duration, isoformat_z, parse_duration


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("30m", timedelta(minutes=30)),
        ("2h", timedelta(hours=2)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1h 30m", timedelta(hours=1, minutes=30)),
        ("45s", timedelta(seconds=45)),
        ("7d", timedelta(days=7)),
        ("1w", timedelta(days=7)),
        ("0", timedelta(0)),
        (0, timedelta(0)),
    ],
)
def test_parse_duration(text: object, value: timedelta) -> None:
    assert parse_duration(text) == value


@pytest.mark.parametrize("text", ["5 parsecs", "", "30", "m30", "1.5h", "-5m", "h"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a duration \(use e\.g\. 30m, 2h\)"):
        parse_duration(text)


@pytest.mark.parametrize("value", [30, 1.5, True, None, [1]])
def test_parse_duration_rejects_non_strings(value: object) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(value)


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=0, max_value=10**8))
def test_format_duration_round_trips(seconds: int) -> None:
    value = timedelta(seconds=seconds)
    assert parse_duration(format_duration(value)) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(seconds=5), "5s"),
        (timedelta(seconds=61.9), "1m1s"),  # sub-second parts are dropped
        (timedelta(minutes=10), "10m"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(hours=2, minutes=30), "2h30m"),
        (timedelta(days=7), "7d"),
        (timedelta(days=1, seconds=1), "1d1s"),
        (timedelta(minutes=-5), "-5m"),
        (5.0, "5s"),  # seconds as a number, as the spawner counts them
        (119, "1m59s"),
        (600, "10m"),
        (7200, "2h"),
        (9000, "2h30m"),
    ],
)
def test_format_duration(value: timedelta | float, text: str) -> None:
    assert format_duration(value) == text


@pytest.mark.parametrize(
    ("dt", "text"),
    [
        (datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=timezone.utc), "2026-01-02T03:04:05.678Z"),
        (datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05.000Z"),  # naive: taken as UTC
        (
            datetime(2026, 1, 2, 4, 4, 5, tzinfo=timezone(timedelta(hours=1))),
            "2026-01-02T03:04:05.000Z",
        ),
    ],
)
def test_isoformat_z(dt: datetime, text: str) -> None:
    assert isoformat_z(dt) == text


def test_an_overflowing_duration_is_a_plain_error() -> None:
    with pytest.raises(ValueError, match="longest duration"):
        parse_duration("999999999999999w")

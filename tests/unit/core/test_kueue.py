"""Readers of Kueue's objects and values."""

from __future__ import annotations

import logging
import math
from datetime import timedelta, timezone
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuaas.core.kueue import QuantityError, parse_quantity, parse_time, pod_requests


def test_times_that_overflow_are_no_time() -> None:
    assert parse_time("9999-12-31T23:59:59-01:00") is None
    assert parse_time("0001-01-01T00:00:00+01:00") is None


@pytest.mark.parametrize(
    ("text", "micros"),
    [
        ("2026-11-30T10:59:59Z", 0),
        ("2026-11-30T10:59:59.9Z", 900_000),  # JupyterHub's and Go's: trailing zeros dropped
        ("2026-11-30T10:59:59.95Z", 950_000),
        ("2026-11-30T10:59:59.123Z", 123_000),
        ("2026-11-30T10:59:59.1234Z", 123_400),
        ("2026-11-30T10:59:59.123456Z", 123_456),
        ("2026-11-30T10:59:59.123456789Z", 123_456),  # Go's RFC3339Nano: truncated, as 3.11+
        ("2026-11-30T11:59:59.5+01:00", 500_000),
    ],
)
def test_any_fraction_of_a_second_on_every_python(text: str, micros: int) -> None:
    # Python 3.10's fromisoformat takes 3 or 6 digits only
    parsed = parse_time(text)
    assert parsed is not None
    assert parsed.tzinfo == timezone.utc
    assert (parsed.hour, parsed.minute, parsed.second, parsed.microsecond) == (10, 59, 59, micros)


# --------------------------------------------------------------------------- quantity bounds

MAX = 2**63 - 1


def _reference(mantissa: int, exponent: int) -> Fraction | None:
    """``mantissa × 10^exponent`` as Kubernetes keeps it: rounded up to nano precision, or
    ``None`` where it is beyond int64 (computed the slow, exact way)."""
    exact = Fraction(mantissa) * Fraction(10) ** exponent
    if exact > MAX:
        return None
    return Fraction(math.ceil(exact * 10**9), 10**9)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("9223372036854775807", Fraction(MAX)),
        ("7Ei", Fraction(7 << 60)),
        ("1e-20", Fraction(1, 10**9)),  # below one nano: Kubernetes rounds up to 1n
        ("-1e-20", Fraction(-1, 10**9)),
        ("1.5n", Fraction(2, 10**9)),
        ("1.0000000001", Fraction(1_000_000_001, 10**9)),
        ("0e999999999999", Fraction(0)),
        ("0." + "0" * 100, Fraction(0)),
        ("1." + "0" * 100, Fraction(1)),
        ("0" * 100 + "2", Fraction(2)),
        ("1e-99999999999999", Fraction(1, 10**9)),
    ],
)
def test_quantities_at_the_edges(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "huge",
    [
        "1e10000000",  # what a team member can put in a Job
        "10e9999999",  # what the API server stores for it
        "1e" + "9" * 5000,  # an exponent longer than Python's int(str) limit
        "9" * 5000,  # so is the number
        "9223372036854775808",
        "8Ei",
        "1E20",
        9.5e18,
        10**30,
    ],
)
def test_quantities_beyond_int64_are_too_large(huge: object) -> None:
    with pytest.raises(QuantityError, match="too large"):
        parse_quantity(huge)


@pytest.mark.parametrize("bad", ["1\n1", "1e3\n5", "5Gi\nx", float("inf"), float("-inf")])
def test_newlines_inside_and_non_finite_numbers_are_no_quantity(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


@given(
    mantissa=st.integers(min_value=0, max_value=10**30),
    exponent=st.integers(min_value=-45, max_value=25),
    fraction_digits=st.integers(min_value=0, max_value=12),
)
@settings(max_examples=300, deadline=timedelta(seconds=1), derandomize=True, database=None)
def test_the_size_check_agrees_with_exact_arithmetic(
    mantissa: int, exponent: int, fraction_digits: int
) -> None:
    # The same value written with a decimal point: mantissa / 10^f × 10^(e + f).
    digits = str(mantissa).rjust(fraction_digits + 1, "0")
    written = f"{digits[: len(digits) - fraction_digits]}.{digits[len(digits) - fraction_digits :]}"
    text = f"{written}e{exponent + fraction_digits}"
    expected = _reference(mantissa, exponent)
    if expected is None:
        with pytest.raises(QuantityError, match="too large"):
            parse_quantity(text)
    else:
        assert parse_quantity(text) == expected


@given(exponent=st.integers(min_value=-(10**15), max_value=10**15), sign=st.sampled_from("+-"))
@settings(max_examples=200, deadline=timedelta(milliseconds=200), derandomize=True, database=None)
def test_any_exponent_is_decided_without_big_arithmetic(exponent: int, sign: str) -> None:
    text = f"{sign}7e{exponent}"
    if exponent > 18:
        with pytest.raises(QuantityError, match="too large"):
            parse_quantity(text)
    else:
        assert 0 < abs(parse_quantity(text)) <= MAX


def test_an_unreadable_request_reads_as_absent_and_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A value of this test's own: the log says each distinct value once per process.
    container = {"resources": {"requests": {"cpu": "7e12345678", "nvidia.com/gpu": "1"}}}
    pod = {"spec": {"containers": [container]}}
    caplog.set_level(logging.WARNING, logger="jupyter_gpuaas.core.kueue")
    for _ in range(3):
        assert pod_requests(pod) == {"nvidia.com/gpu": Fraction(1)}
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert "cpu: '7e12345678' is too large" in messages[0]
    assert "read as absent" in messages[0]

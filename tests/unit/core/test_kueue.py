"""Readers of Kueue's objects and values."""

from __future__ import annotations

from jupyter_gpuaas.core.kueue import parse_time


def test_times_that_overflow_are_no_time() -> None:
    assert parse_time("9999-12-31T23:59:59-01:00") is None
    assert parse_time("0001-01-01T00:00:00+01:00") is None

"""The unit tests' guard against real sleeps (``real_sleeps`` in tests/unit/conftest.py): a sleep
over 50 ms fails the test and says what to use instead. The stand-ins' real sleeps are replaced
here, so that these tests wait for nothing themselves."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.support.clock import RealSleeps


def no_real_sleep(real_sleeps: RealSleeps, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """What the test's sleeps asked for, none of it slept."""
    asked: list[float] = []

    async def async_sleep(delay: float, result: Any = None) -> Any:
        asked.append(delay)
        return result

    monkeypatch.setattr(real_sleeps, "real_sleep", asked.append)
    monkeypatch.setattr(real_sleeps, "real_async_sleep", async_sleep)
    return asked


def caught(real_sleeps: RealSleeps) -> str | None:
    """The guard's failure message, taken back so that this test itself passes."""
    failure = real_sleeps.failure()
    real_sleeps.caught.clear()
    return failure


def test_a_time_sleep_of_0_3_s_fails_the_test_and_says_what_to_use_instead(
    real_sleeps: RealSleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = no_real_sleep(real_sleeps, monkeypatch)
    time.sleep(0.3)
    failure = caught(real_sleeps)
    assert asked == [0.3]
    assert failure is not None
    assert f"time.sleep(0.3) at {__file__}:" in failure
    assert "at most 0.05 s" in failure
    assert "an event the code under test sets" in failure
    assert "FakeClock" in failure
    assert "until()" in failure


async def test_an_asyncio_sleep_of_0_3_s_fails_the_test(
    real_sleeps: RealSleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = no_real_sleep(real_sleeps, monkeypatch)
    assert await asyncio.sleep(0.3, "woke") == "woke"
    failure = caught(real_sleeps)
    assert asked == [0.3]
    assert failure is not None
    assert f"asyncio.sleep(0.3) at {__file__}:" in failure


async def test_sleeps_up_to_50_ms_pass(
    real_sleeps: RealSleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = no_real_sleep(real_sleeps, monkeypatch)
    time.sleep(0.05)
    await asyncio.sleep(0.05)
    await asyncio.sleep(0)
    assert asked == [0.05, 0.05, 0]
    assert real_sleeps.failure() is None


async def test_a_long_sleep_cancelled_early_kept_nobody_waiting(real_sleeps: RealSleeps) -> None:
    """A product loop's sleep between its rounds, cancelled when the loop stops: no real wait."""
    loop_sleeping = asyncio.ensure_future(asyncio.sleep(60))
    await asyncio.sleep(0)  # it has started sleeping
    loop_sleeping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop_sleeping
    assert real_sleeps.failure() is None

"""Time in the unit tests: the one fake clock, and waiting for a condition instead of sleeping.

The product takes its clock as a plain callable (``clock: Callable[[], float]`` for seconds,
``Callable[[], datetime]`` for wall time), so a test hands it a :class:`FakeClock` (seconds) or
its :meth:`FakeClock.utc` (the same instant as an aware UTC datetime) and moves ``now``. Where
real time must pass (another task or a server acts), :func:`until` checks the condition every
10 ms instead of a sleep long enough for a loaded machine.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timezone


class FakeClock:
    """Seconds since the epoch, changed only by the test (``advance`` or ``now = ...``)."""

    def __init__(self, start: float | datetime = 1000.0) -> None:
        self.now = start.timestamp() if isinstance(start, datetime) else float(start)

    def __call__(self) -> float:
        return self.now

    def utc(self) -> datetime:
        """The same instant as an aware datetime in UTC, for code that reads wall time."""
        return datetime.fromtimestamp(self.now, timezone.utc)

    def advance(self, seconds: float) -> None:
        self.now += seconds


async def until(what: str, condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` after ``timeout`` s."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)

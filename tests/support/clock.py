"""Time in the unit tests: the one fake clock, waiting for a condition instead of sleeping, and
the guard against real sleeps (tests/unit/conftest.py's ``real_sleeps``).

The product takes its clock as a plain callable (``clock: Callable[[], float]`` for seconds,
``Callable[[], datetime]`` for wall time), so a test hands it a :class:`FakeClock` (seconds) or
its :meth:`FakeClock.utc` (the same instant as an aware UTC datetime) and moves ``now``. Where
real time must pass (another task or a server acts), :func:`until` checks the condition every
10 ms instead of a sleep long enough for a loaded machine.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import datetime, timezone
from typing import Any


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


SLEEP_LIMIT = 0.05
"""The longest real sleep a unit test may take, in seconds."""
INSTEAD = (
    "wait for an event the code under test sets, or move time with tests.support.clock's "
    "FakeClock (injected as the code's clock), or poll a condition with its until()"
)


class RealSleeps:
    """Stands in for ``time.sleep`` and ``asyncio.sleep`` in the test process (its
    :meth:`sleep` and :meth:`async_sleep`, which sleep with the real ones it is given) and notes
    each sleep over :data:`SLEEP_LIMIT` that ran its course (one cancelled early, as a product
    loop's at its stop, kept nobody waiting)."""

    def __init__(
        self,
        sleep: Callable[[float], None] = time.sleep,
        async_sleep: Callable[..., Coroutine[Any, Any, Any]] = asyncio.sleep,
    ) -> None:
        self.real_sleep = sleep
        self.real_async_sleep = async_sleep
        self.caught: list[str] = []

    def sleep(self, seconds: float) -> None:
        where = _caller()
        self.real_sleep(seconds)
        self._note("time.sleep", seconds, where)

    def async_sleep(self, delay: float, result: Any = None) -> Coroutine[Any, Any, Any]:
        where = _caller()

        async def sleeping() -> Any:
            value = await self.real_async_sleep(delay, result)
            self._note("asyncio.sleep", delay, where)
            return value

        return sleeping()

    def _note(self, call: str, seconds: float, where: str) -> None:
        if seconds > SLEEP_LIMIT:
            self.caught.append(f"{call}({seconds:g}) at {where}")

    def failure(self) -> str | None:
        """What to tell the test's author, or ``None`` if it slept no longer than allowed."""
        if not self.caught:
            return None
        return (
            f"a unit test may sleep at most {SLEEP_LIMIT:g} s of real time; it slept "
            f"{'; '.join(self.caught)}. Instead, {INSTEAD}."
        )


def _caller() -> str:
    frame = sys._getframe(2)  # the sleep's caller: above the stand-in's own frame
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"

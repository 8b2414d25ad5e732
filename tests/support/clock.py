"""The one fake clock of the unit tests: time that moves only when a test moves it.

The product takes its clock as a plain callable (``clock: Callable[[], float]`` for seconds,
``Callable[[], datetime]`` for wall time), so a test hands it a :class:`FakeClock` (seconds) or
its :meth:`FakeClock.utc` (the same instant as an aware UTC datetime) and moves ``now``.
"""

from __future__ import annotations

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

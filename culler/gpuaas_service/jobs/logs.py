"""The notebook Jobs' runner logs kept in memory (pure: times are passed in).

A Job's runner posts the tail of its log while it runs; the sidebar reads it back. What is kept
is bounded: each log to its last ``max_each`` characters, all of them together to ``max_total``
(the longest silent log goes first), and a log not updated for ``keep_for`` is dropped (its
Job finished, was cancelled, or its pod died). A finished Job's log is also in its result
ConfigMap, which the service reads when memory has none.
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime, timedelta

__all__ = ["MAX_LOG", "RunnerLogs"]

MAX_LOG = 256 * 1024
"""Characters of one Job's log kept (its tail)."""


class RunnerLogs:
    """The latest log tail per Job key (``namespace/name``), bounded in total and in age."""

    def __init__(
        self,
        *,
        max_each: int = MAX_LOG,
        max_total: int = 32 * 1024 * 1024,
        keep_for: timedelta = timedelta(hours=6),
    ) -> None:
        self.max_each = max_each
        self.max_total = max_total
        self.keep_for = keep_for
        self._logs: OrderedDict[str, tuple[datetime, str]] = OrderedDict()
        """Key → (when last updated, its tail), the longest silent first."""
        self.total = 0
        """Characters kept, all logs together."""

    def put(self, key: str, text: str, now: datetime) -> None:
        self.drop(key)
        tail = text[-self.max_each :] if self.max_each > 0 else ""
        self._logs[key] = (now, tail)
        self.total += len(tail)
        self._prune(now)

    def get(self, key: str, now: datetime) -> str | None:
        """The Job's log tail, or ``None`` when none is kept (never sent, or dropped)."""
        self._prune(now)
        found = self._logs.get(key)
        return found[1] if found is not None else None

    def drop(self, key: str) -> None:
        found = self._logs.pop(key, None)
        if found is not None:
            self.total -= len(found[1])

    def _prune(self, now: datetime) -> None:
        oldest = now - self.keep_for
        while self._logs:
            key, (updated, _text) = next(iter(self._logs.items()))
            if updated >= oldest and self.total <= self.max_total:
                return
            self.drop(key)

    def __len__(self) -> int:
        return len(self._logs)

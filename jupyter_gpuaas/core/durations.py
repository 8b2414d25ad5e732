"""Times and durations as the project writes and reads them (pure).

Durations have one written form everywhere — policy files, decisions, warnings, the spawn
page: ``45s``, ``30m``, ``1h30m``, ``2d``, ``1w`` (``0`` where zero makes sense), so that what
a person reads is what an admin writes.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

__all__ = ["DURATION_HINT", "format_duration", "isoformat_z", "parse_duration"]

DURATION_HINT = "use e.g. 30m, 2h"
_DURATION_RE = re.compile(r"^\s*(?:\d+\s*[wdhms]\s*)+$")
_DURATION_PART_RE = re.compile(r"(\d+)\s*([wdhms])")
MAX_DURATION_SECONDS = 10000 * 86400
"""Longer is a typo, and past ~2.7 million years an overflow: refused, never a traceback."""
_UNIT_SECONDS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def isoformat_z(dt: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a Z, as docs/api.md shows."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_duration(value: object) -> timedelta:
    """``"1h30m"`` → ``timedelta(hours=1, minutes=30)``; ``0`` and ``"0"`` are zero.

    Raises :class:`ValueError` with the message a configuration error shows.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value == 0:
        return timedelta(0)
    if isinstance(value, str):
        text = value.strip()
        if text == "0":
            return timedelta(0)
        if _DURATION_RE.fullmatch(text):
            seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART_RE.findall(text))
            if seconds <= MAX_DURATION_SECONDS:
                return timedelta(seconds=seconds)
            shown = text if len(text) <= 40 else text[:37] + "..."
            raise ValueError(f"{json.dumps(shown)} is longer than the longest duration, 10000d")
    shown = json.dumps(value) if isinstance(value, str) else repr(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    extra = " (a number needs a unit)" if isinstance(value, int | float) else ""
    raise ValueError(f"{shown} is not a duration{extra} ({DURATION_HINT})")


def format_duration(value: timedelta | float) -> str:
    """The inverse of :func:`parse_duration`, largest unit first: ``"1h30m"``, ``"2d"``, ``"0s"``.

    A number is seconds. Sub-second parts are dropped; negative durations get a leading ``-``.
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    total = int(seconds)
    sign = "-" if total < 0 else ""
    total = abs(total)
    if total == 0:
        return "0s"
    parts: list[str] = []
    for unit in ("d", "h", "m", "s"):
        n, total = divmod(total, _UNIT_SECONDS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return sign + "".join(parts)

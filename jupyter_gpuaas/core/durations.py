"""Times and durations as the project writes and reads them (pure)."""

from __future__ import annotations

from datetime import datetime, timezone

__all__ = ["isoformat_z"]


def isoformat_z(dt: datetime) -> str:
    """ISO 8601 UTC with milliseconds and a Z, as docs/api.md shows."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"

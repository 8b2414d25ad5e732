"""The doctor inside the service, for the console's ``api/console/checks``: one run at a time,
its answer kept for a while (a run asks the apiserver about every verb, the hub and Prometheus:
tens of requests, not something to do per page load)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timezone

from gpuaas_service import api_types as service_api
from gpuaas_service.doctor.checks import Check, all_ok

__all__ = ["CachedChecks"]


class CachedChecks:
    """``await checks()`` → the console's payload: the last run if younger than ``ttl``
    seconds, else a new one (callers meanwhile wait for the same run)."""

    def __init__(
        self,
        run: Callable[[], Awaitable[list[Check]]],
        *,
        ttl: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run = run
        self.ttl = ttl
        self.clock = clock
        self._answer: service_api.ServiceConsoleChecks | None = None
        self._at = 0.0
        self._lock = asyncio.Lock()

    async def __call__(self, *, fresh: bool = False) -> service_api.ServiceConsoleChecks:
        async with self._lock:
            if fresh or self._answer is None or self.clock() - self._at >= self.ttl:
                checks = await self.run()
                self._answer = {
                    "checked_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "ok": all_ok(checks),
                    "checks": [c.as_dict() for c in checks],
                }
                self._at = self.clock()
            return self._answer

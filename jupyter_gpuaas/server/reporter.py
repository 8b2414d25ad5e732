"""Activity reporting to the gpuaas hub service.

The culler never enters users' servers (that would need the ``access:servers`` scope: the power
to run code in every one of them). Instead this server pushes its ``activity`` payload
(docs/api.md) every ``GPUaaS.activity_report_interval`` seconds to the gpuaas service
(``POST {service}/api/activity``) with its own hub token (``JUPYTERHUB_API_TOKEN``; the scope
``access:services!service=gpuaas`` must be in ``Spawner.server_token_scopes``). The service
accepts it only for this server. Without JupyterHub (no token) or without a service URL, nothing
is reported. The reclaim warning the service answers with is passed on to the sidebar by the
handlers (``GET gpuaas/api/reclaim``, ``POST gpuaas/api/reclaim/snooze``).

With a ``snapshot`` function (the server keeps kernel state: docs/kernel-state.md) every report
says ``keeps_kernel_state``. When the service's answer asks for a snapshot (before a reclaim
stops this server), the reporter saves every kernel's variables within the time the request
gives and reports again at once with the outcomes (``kernel_state``), each request once. An
answer's ``report_again_in`` brings the next report forward (a warned server reports more often
near its stop, so that it hears the request in time).

Between reports, a ``latest_activity`` watch (a read of the kernels' and terminals' times in
memory, no GPU sample) brings the next report forward when a person comes back after a quiet
spell of at least one interval: the service never judges a server by a report from before its
user ran a cell (the one that would warn her 13 s after it). Activity within an interval of the
last report waits for the next one, so a busy server reports no more often than before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import (
    KernelStateReport,
    kernel_state_json,
    snapshot_request_of,
)
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome
from jupyter_gpuaas.server.service_client import ServiceClient

__all__ = ["Reporter", "Snapshot"]

Snapshot = Callable[[float], Awaitable[list[KernelStateOutcome]]]
"""Saves every kernel's variables within the given seconds; one outcome per kernel."""
MIN_DELAY = 1.0
"""The shortest wait between reports, whatever an answer asks."""


class Reporter:
    """Posts the activity payload every ``interval`` seconds (one task per server)."""

    def __init__(
        self,
        activity_now: Callable[[], Awaitable[api.Activity]],
        client: ServiceClient,
        interval: float,
        log: logging.Logger | Any = None,
        snapshot: Snapshot | None = None,
        state_size: Callable[[], Awaitable[int]] | None = None,
        latest_activity: Callable[[], datetime | None] | None = None,
        watch_interval: float = 0.0,
    ) -> None:
        self.activity_now = activity_now
        self.client = client
        self.interval = interval
        self.log = log or logging.getLogger(__name__)
        self.snapshot = snapshot
        """Saves the kernels' variables when the service asks (``None``: this server keeps no
        kernel state, and says so)."""
        self.state_size = state_size
        """Bytes a snapshot of the kernels would write, estimated (``kernel_state_bytes``: the
        service's wait for it grows with it); only where ``snapshot`` is set."""
        self.sent = 0
        self.failed = 0
        self.snapshots = 0
        self.last_answer: dict[str, Any] = {}
        self._answer_due: KernelStateReport | None = None
        """The outcomes of the last snapshot, sent with each report until one is taken."""
        self._snapshotted: str = ""
        """The request last answered (its ``requested_at``): each request is answered once."""
        self._task: asyncio.Task[None] | None = None
        self.latest_activity = latest_activity
        """The newest activity of a person in this server (``None``: none yet), read cheaply."""
        self.watch_interval = watch_interval
        """Seconds between reads of ``latest_activity`` while waiting (0: no watch)."""
        self._reported_activity: datetime | None = None
        """``latest_activity`` as of the last report."""
        self.early = 0
        """Reports brought forward by the watch."""

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    async def report_once(self) -> bool:
        """Report now; when the answer asks for a snapshot, take it and report again at once."""
        ok = await self._report()
        request = snapshot_request_of(self.last_answer) if ok and self.snapshot else None
        if request is None or isoformat_z(request.requested_at) == self._snapshotted:
            return ok
        self._snapshotted = isoformat_z(request.requested_at)
        self._answer_due = await self._take_snapshot(request.requested_at, request.deadline_seconds)
        return await self._report()

    def next_delay(self, ok: bool, delay: float) -> float:
        """The wait before the next report: ``interval``, or sooner where the last answer asks
        (``report_again_in``); after a failure, twice the last wait (up to 10 intervals)."""
        if not ok:
            return min(delay * 2, self.interval * 10)
        again = self.last_answer.get("report_again_in")
        if isinstance(again, int | float) and not isinstance(again, bool) and math.isfinite(again):
            return max(min(self.interval, float(again)), MIN_DELAY)
        return self.interval

    def came_back(self) -> bool:
        """Whether a person has been active since the last report after a quiet spell of at
        least one interval (what that report could not tell)."""
        if self.latest_activity is None:
            return False
        latest = self.latest_activity()
        if latest is None:
            return False
        reported = self._reported_activity
        return reported is None or (latest - reported).total_seconds() >= self.interval

    async def wait(self, delay: float) -> None:
        """Wait ``delay`` seconds before the next report, or less where :meth:`came_back`."""
        if self.latest_activity is None or self.watch_interval <= 0:
            await asyncio.sleep(delay)
            return
        loop = asyncio.get_running_loop()
        end = loop.time() + delay
        while (left := end - loop.time()) > 0:
            await asyncio.sleep(min(self.watch_interval, left))
            if self.came_back():
                self.early += 1
                return

    async def _take_snapshot(self, requested_at: datetime, seconds: float) -> KernelStateReport:
        assert self.snapshot is not None
        self.snapshots += 1
        try:
            outcomes = await self.snapshot(seconds)
        except Exception as e:  # a snapshot that cannot run is an answer too: the service says so
            self.log.exception("GPUaaS: the kernels' snapshot for the gpuaas service failed")
            return KernelStateReport(requested_at, (), f"the snapshot could not run: {e}")
        return KernelStateReport(requested_at, tuple(outcomes))

    async def _report(self) -> bool:
        if self.latest_activity is not None:
            self._reported_activity = self.latest_activity()
        payload = await self.activity_now()
        if self.snapshot is not None:
            payload = {**payload, "keeps_kernel_state": True}
            if self.state_size is not None:
                try:
                    payload["kernel_state_bytes"] = await self.state_size()
                except Exception:  # an estimate that fails leaves the wait as the policy's base
                    self.log.exception("GPUaaS: the kernels' state size could not be estimated")
        if self._answer_due is not None:
            payload["kernel_state"] = kernel_state_json(self._answer_due)
        answer = await self.client.request("api/activity", method="POST", body=payload)
        if answer.problem is None:
            self.sent += 1
            self.last_answer = answer.data
            self._answer_due = None
            return True
        self.failed += 1
        self.log.warning(
            "GPUaaS: activity report not accepted (HTTP %s): %s",
            answer.status,
            answer.problem.as_json()["error"],
        )
        return False

    async def _run(self) -> None:
        delay = self.interval
        while True:
            try:
                ok = await self.report_once()
            except Exception:  # a failed report must not end the reporting
                ok = False
                self.log.exception("GPUaaS: activity report failed")
            # Back off while the service is away (up to 10 intervals), then report as usual.
            delay = self.next_delay(ok, delay)
            await self.wait(delay)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

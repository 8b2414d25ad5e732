"""The optional notification hook: warnings and reclaims posted to a webhook.

For users who have no JupyterLab tab open (the sidebar banner is the other way a warning
reaches them). The policy file's ``notify: {webhook: URL, timeout: 5s}`` turns it on.

Each post is one small JSON object, never a token::

    {"event": "warn", "user": "alice", "server": "", "team": "team-a", "kind": "mig",
     "offering": "local-mig-1g", "reason": "queued team-a/train needs what it holds (...)",
     "reclaim_at": "2026-11-30T12:15:00Z", "at": "2026-11-30T12:00:00Z", "dry_run": false}

``event`` is ``warn`` (the countdown started; ``reclaim_at`` is the deadline) or ``reclaim``
(the server was stopped; ``reclaim_at`` is when). Posting never holds up a cycle: each post is
a background task with the configured timeout, sent once (no retries), and at most
``max_in_flight`` are outstanding — more are dropped with a log line rather than queued behind a
receiver that is down. Every outcome is one JSON line on the logger ``gpuaas.culler.notify``
(the URL's host only: webhook paths often hold a secret).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit

from gpuaas_service.clients.http import OwnClient
from gpuaas_service.reclaim.policy import Notify
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = ["Notifier"]

log = logging.getLogger("gpuaas.culler.notify")


class Notifier:
    """Posts events to one webhook in the background (tornado's async HTTP client)."""

    def __init__(self, config: Notify, *, max_in_flight: int = 50) -> None:
        self.url = config.webhook
        self.timeout = config.timeout.total_seconds()
        self.max_in_flight = max_in_flight
        self.host = urlsplit(config.webhook).netloc
        self.tasks: set[asyncio.Task[bool]] = set()
        self.sent = 0
        self.failed = 0
        self.dropped = 0
        self.http = OwnClient(max_in_flight)
        """Its own connections, one per post in flight: a receiver that never answers holds
        only these (never the Hub's or Prometheus's), and no post waits in a queue."""

    def notify(self, payload: Mapping[str, Any]) -> asyncio.Task[bool] | None:
        """Start posting ``payload``; returns at once (the task, or ``None`` when dropped)."""
        body = dict(payload)
        if len(self.tasks) >= self.max_in_flight:
            self.dropped += 1
            self._log("dropped", body, error=f"{len(self.tasks)} posts still in flight")
            return None
        task = asyncio.ensure_future(self._post(body))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    async def drain(self) -> None:
        """Wait for the posts in flight (tests; a clean shutdown)."""
        if self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def _post(self, body: dict[str, Any]) -> bool:
        from tornado.httpclient import HTTPClientError, HTTPRequest

        started = time.monotonic()
        req = HTTPRequest(
            self.url,
            method="POST",
            body=json.dumps(body, sort_keys=True),
            headers={"Content-Type": "application/json", "User-Agent": "gpuaas-culler"},
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
            follow_redirects=False,
        )
        try:
            resp = await self.http().fetch(req)
        except HTTPClientError as e:
            error = f"HTTP {e.code} {e.message}" if e.code != 599 else f"{e.message}"
        except Exception as e:  # noqa: BLE001 - refused, DNS, TLS, timeout: logged, not raised
            error = f"{type(e).__name__}: {e}"
        else:
            self.sent += 1
            self._log("sent", body, status=resp.code, seconds=time.monotonic() - started)
            return True
        self.failed += 1
        self._log("failed", body, error=error, seconds=time.monotonic() - started)
        return False

    def _log(self, result: str, body: Mapping[str, Any], **extra: Any) -> None:
        record: dict[str, Any] = {
            "event": "culler.notify",
            "at": isoformat_z(datetime.now(timezone.utc)),
            "result": result,
            "webhook_host": self.host,
            "notice": body.get("event"),
            "user": body.get("user"),
            "server": body.get("server"),
        }
        if "seconds" in extra:
            extra["seconds"] = round(float(extra["seconds"]), 3)
        record.update(extra)
        line = json.dumps(record, sort_keys=True)
        if result == "sent":
            log.info(line)
        else:
            log.warning(line)

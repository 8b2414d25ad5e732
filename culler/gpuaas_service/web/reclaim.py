"""The gpuaas service's endpoints for single-user servers' culling, and its ``/metrics``.

Under the service prefix (``/services/gpuaas/``):

- ``POST api/activity`` — a server's ``activity`` payload (docs/api.md). Only the token the
  hub issued to a server it has running may report, and only for that server
  (:mod:`gpuaas_service.web.servers`); anything else is ``403``; a malformed payload ``400``
  with its field paths. The answer may ask for a snapshot of the server's kernels before its
  stop (``snapshot``) and for its next report sooner (``report_again_in``; docs/culler.md).
- ``GET api/reclaim`` — the calling server's pending warning (deadline, reason, snoozes left,
  ``saving`` at the deadline) or ``null``.
- ``POST api/reclaim/snooze`` — "Keep my GPU": ``200`` with the new deadline-free state, or
  ``409`` with why: the policy allows no more snoozes, or the stop is already under way.
  A busy report that arrives while the stop is under way is answered ``409`` too.
- ``GET metrics`` — Prometheus text (no user names in it); only with the operator token.

Callers are identified by the hub (``HubAuth``, which needs ``access:services!service=gpuaas``
on the token); no handler here counts as the user's activity.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from tornado import web

from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.reclaim.decide import SnoozeResult
from gpuaas_service.reclaim.loop import ReclaimLoop, ReportAsks
from gpuaas_service.web.base import (
    OperatorTokenHandler,
    ServerHandler,
    error_answer,
    limit,
    operations,
)
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import ReportError
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.fields import FieldError

__all__ = ["reclaim_handlers", "report_answer", "snooze_answer"]


def report_answer(
    received_at: datetime,
    reclaim: api.ServiceReclaim,
    *,
    stopping: str = "",
    asks: ReportAsks | None = None,
) -> api.ServiceReportAnswer:
    """``POST api/activity``'s answer: taken, with the server's ``api/reclaim`` answer and what
    the loop asks of it (:meth:`ReclaimLoop.report_asks`); or, while its stop is under way
    (``stopping`` says why), taken too late to keep the server."""
    if stopping:
        return {"accepted": False, "reason": stopping}
    answer: api.ServiceReportAnswer = {
        "accepted": True,
        "received_at": isoformat_z(received_at),
        "server": reclaim["server"],
        "now": reclaim["now"],
        "warning": reclaim["warning"],
    }
    # key by key: mypy checks each against the document (a ** spread it cannot)
    if asks and "snapshot" in asks:
        answer["snapshot"] = asks["snapshot"]
    if asks and "report_again_in" in asks:
        answer["report_again_in"] = asks["report_again_in"]
    return answer


def snooze_answer(result: SnoozeResult) -> api.ServiceSnooze:
    """``POST api/reclaim/snooze``'s answer."""
    return {
        "allowed": result.allowed,
        "reason": result.reason,
        "until": isoformat_z(result.until) if result.until else None,
        "snoozes_left": result.snoozes_left,
    }


@operations(post="postActivity")
class ActivityReportHandler(ServerHandler):
    def _invalid(self, message: str, errors: Sequence[FieldError], more: int) -> None:
        self.set_status(400)
        answer = error_answer(400, f"invalid activity report: {message}", errors, more_errors=more)
        self.finish(json.dumps(answer))

    def post(self) -> None:
        # The body is limited before it is read (the HTTP server's max_body_size), and
        # counted against the server's rate limit before it is parsed.
        user, server = self.caller()
        limit(self.context, "activity", server_key(user, server))
        payload = self.json_body("postActivity", what="activity report")
        now = self.loop.clock()
        try:
            # what the document cannot say: no time ahead of the service's clock
            self.loop.store.record(user, server, payload, now)
        except ReportError as e:
            self._invalid(str(e), e.errors, e.more)
            return
        stopping = self.loop.stop_under_way(user, server)
        if stopping:
            # Taken, but too late to keep the server: say so rather than accept and ignore it.
            self.set_status(409)
        answer = report_answer(
            now,
            self.loop.warning_for(user, server, now),
            stopping=stopping,
            asks=self.loop.report_asks(user, server, now),
        )
        self.finish(json.dumps(answer))


@operations(get="getReclaim")
class ReclaimHandler(ServerHandler):
    def get(self) -> None:
        user, server = self.caller()
        self.finish(json.dumps(self.loop.warning_for(user, server)))


@operations(post="postReclaimSnooze")
class SnoozeHandler(ServerHandler):
    async def post(self) -> None:
        user, server = self.caller()
        result = await self.loop.snooze(user, server)
        if not result.allowed:
            self.set_status(409)
        self.finish(json.dumps(snooze_answer(result)))


@operations(get="getMetrics")
class MetricsHandler(OperatorTokenHandler):
    """``GET metrics``: only with the operator token (docs/security.md)."""

    def initialize(self, context: ServiceContext, loop: ReclaimLoop) -> None:
        self.context = context
        self.loop = loop

    def get(self) -> None:
        body, content_type = self.loop.metrics.exposition()
        self.set_header("Content-Type", content_type)
        self.finish(body)


def reclaim_handlers(
    context: ServiceContext, loop: ReclaimLoop
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The culler's endpoints, for :func:`gpuaas_service.web.app.make_app`."""
    kw: dict[str, object] = {"context": context, "loop": loop}
    return [
        (context.root + "api/activity", ActivityReportHandler, kw),
        (context.root + "api/reclaim", ReclaimHandler, kw),
        (context.root + "api/reclaim/snooze", SnoozeHandler, kw),
        (context.root + "metrics", MetricsHandler, kw),
    ]

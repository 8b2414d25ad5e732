"""The console's history: ``GET api/console/history[?range=6h&team=T]`` (docs/console.md).

Allocated, busy and idle GPU-equivalents per team, queued workloads and the oldest wait,
reclaims and (for a caller who sees every team) hand-offs, over the last ``range`` (5m to 31d,
default 6h), read from the Prometheus of ``GPUaaSService.prometheus_url`` with range queries
(clients/prometheus.py). Every chart shares one time grid whose step is chosen from the range
so that a series has at most ``max_points`` points; a query with more than ``max_series``
series keeps the first ones by name and says how many it cut. The range is rounded up to a
whole number of steps, and an answer is served again to callers of the same teams and rounded
range for ``keep_seconds`` (10 s, never more than its step); callers asking the same while it
is being read share that one reading. So pages opened together, or reloaded, or ranges a few
seconds apart, ask Prometheus once. A caller whose question is not answered from what is kept
is held to a per-caller limit (``c.GPUaaSService.history_requests_per_minute``; over it,
``429`` with ``Retry-After``): one caller cannot queue Prometheus queries for everyone.

History is an addition to the live view, never a condition of it: without a Prometheus, or
when it does not answer within ``timeout`` or answers an error, the answer is ``200`` with
``{"available": false, "reason": ..., "message": ...}``, the message a line the page shows.
The caller needs the console scope; a team lead's queries are narrowed to their teams in
PromQL, so no other team's series ever leaves Prometheus for them.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tornado import web

from gpuaas_service import api_types as service_api
from gpuaas_service.clients.prometheus import (
    HistoryQuery,
    Matrix,
    PrometheusClient,
    PrometheusError,
    history_queries,
    history_step,
    read_matrix,
)
from gpuaas_service.console.answers import GZIP_LEVEL, ConsoleState
from gpuaas_service.web.base import limit, operations
from gpuaas_service.web.console import _ConsoleHandler
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.durations import format_duration, parse_duration

__all__ = [
    "Bodies",
    "History",
    "history_answer",
    "history_bodies",
    "history_handlers",
    "parse_range",
    "rounded_range",
]

DEFAULT_RANGE = 6 * 3600
MIN_RANGE = 300
MAX_RANGE = 31 * 86400
NOT_CONFIGURED = (
    "no Prometheus is configured: set c.GPUaaSService.prometheus_url to a Prometheus that"
    " scrapes this service's /metrics (docs/console.md)"
)


@dataclass(frozen=True)
class History:
    """Where the history comes from, and its bounds."""

    client: PrometheusClient | None
    """``None``: no Prometheus configured (every answer says how to connect one)."""
    max_points: int = 240
    max_series: int = 30
    timeout: float = 5.0
    clock: Callable[[], float] = field(default=time.time)
    keep_seconds: float = 10.0
    """How long an answer is served again to callers of the same teams and range, at most
    one step (a page polls each minute; many pages, or a reload, ask Prometheus once)."""
    monotonic: Callable[[], float] = field(default=time.monotonic)
    kept: dict[tuple[frozenset[str] | None, int], tuple[float, Bodies]] = field(
        default_factory=dict, compare=False
    )
    """(teams, rounded range) → (when it goes stale, the answer's JSON and its gzip)."""
    reading: dict[tuple[frozenset[str] | None, int], asyncio.Future[Bodies]] = field(
        default_factory=dict, compare=False
    )
    """(teams, rounded range) → the answer being read from Prometheus now."""


@dataclass(frozen=True)
class Bodies:
    """An answer's JSON and that JSON gzipped (a day's history is a few hundred kB)."""

    json: bytes
    gzip: bytes


KEEP_ANSWERS = 64
"""At most this many (teams, range) answers are kept at once."""


def rounded_range(range_seconds: int, max_points: int) -> int:
    """``range_seconds`` rounded up to a whole number of its steps (the grid is the same, so
    ranges a few seconds apart are one question to Prometheus)."""
    step = history_step(range_seconds, max_points)
    return step * math.ceil(range_seconds / step)


async def history_bodies(
    history: History,
    teams: set[str] | None,
    range_seconds: int,
    *,
    admit: Callable[[], None] | None = None,
) -> Bodies:
    """:func:`history_answer` as JSON and gzipped, over the range rounded up to whole steps;
    an answer from Prometheus served again for ``keep_seconds`` (never longer than its step),
    one being read shared by every caller who asks the same meanwhile; unavailable answers
    are not kept. ``admit()`` is called (and may raise: the caller's limit) only when
    Prometheus is to be asked for this caller."""
    range_seconds = rounded_range(range_seconds, history.max_points)
    key = (frozenset(teams) if teams is not None else None, range_seconds)
    kept = history.kept.get(key)
    if kept is not None and kept[0] > history.monotonic():
        return kept[1]
    reading = history.reading.get(key)
    if reading is None:
        if admit is not None:
            admit()
        reading = asyncio.ensure_future(_read(history, key, teams, range_seconds))
        history.reading[key] = reading
        reading.add_done_callback(lambda _done: history.reading.pop(key, None))
    # shielded: a caller that goes away does not cancel the others' reading
    return await asyncio.shield(reading)


async def _read(
    history: History,
    key: tuple[frozenset[str] | None, int],
    teams: set[str] | None,
    range_seconds: int,
) -> Bodies:
    now = history.monotonic()
    answer = await history_answer(history, teams, range_seconds)
    body = json.dumps(answer).encode()
    bodies = Bodies(body, gzip.compress(body, GZIP_LEVEL, mtime=0))
    if answer["available"]:
        if len(history.kept) >= KEEP_ANSWERS:
            history.kept.clear()
        history.kept[key] = (now + min(history.keep_seconds, answer["step"]), bodies)
    return bodies


def parse_range(raw: str) -> int:
    """The ``range`` parameter in seconds (default 6h); ValueError saying what is allowed."""
    if not raw:
        return DEFAULT_RANGE
    try:
        seconds = int(parse_duration(raw[:40]).total_seconds())
    except ValueError as e:
        raise ValueError(f"range: {e}") from None
    if not MIN_RANGE <= seconds <= MAX_RANGE:
        raise ValueError(
            f"range={raw[:20]!r}: from {format_duration(MIN_RANGE)} to {format_duration(MAX_RANGE)}"
        )
    return seconds


def unavailable(reason: str) -> service_api.ServiceHistoryUnavailable:
    return {
        "available": False,
        "reason": reason,
        "message": f"History is unavailable: {reason}. The live view is not affected.",
    }


def _chart(query: HistoryQuery, matrix: Matrix) -> service_api.ServiceHistoryChart:
    chart: service_api.ServiceHistoryChart = {
        "name": query.name,
        "title": query.title,
        "unit": query.unit,
        "by": query.by,
        "series": [
            {"name": name, "values": values}
            for name, values in zip(matrix.names, matrix.values, strict=True)
        ],
        "total_series": matrix.total,
        "truncated": matrix.truncated,
    }
    if matrix.truncated:
        chart["note"] = (
            f"{len(matrix.names)} of {matrix.total} series shown (the first by {query.by});"
            " pick teams to see others"
        )
    return chart


async def history_answer(
    history: History, teams: set[str] | None, range_seconds: int
) -> service_api.ServiceConsoleHistory:
    """The answer for ``teams`` (``None``: every team) over the last ``range_seconds``."""
    if history.client is None:
        return unavailable(NOT_CONFIGURED)
    client = history.client
    step = history_step(range_seconds, history.max_points)
    # the grid's last point at or just after now, so that the latest scrape is in it
    end = math.ceil(history.clock() / step) * step
    start = end - step * math.ceil(range_seconds / step)
    queries = history_queries(teams, step)

    async def one(query: HistoryQuery) -> Matrix:
        answer = await client.query_range(query.expr, start, end, step, timeout=history.timeout)
        return read_matrix(answer, query.by, start, step, end, history.max_series)

    try:
        matrices = await asyncio.wait_for(
            asyncio.gather(*(one(q) for q in queries)), history.timeout
        )
    except asyncio.TimeoutError:
        return unavailable(
            f"Prometheus at {client.url} did not answer within {history.timeout:g} s"
        )
    except PrometheusError as e:
        return unavailable(f"Prometheus could not be read ({e})")
    times = matrices[0].times if matrices else []
    return {
        "available": True,
        "start": start,
        "end": end,
        "step": step,
        "range_seconds": range_seconds,
        "max_points": history.max_points,
        "max_series": history.max_series,
        "teams": sorted(teams) if teams is not None else None,
        "times": times,
        "charts": [_chart(q, m) for q, m in zip(queries, matrices, strict=True)],
    }


@operations(get="getConsoleHistory")
class ConsoleHistoryHandler(_ConsoleHandler):
    """``GET api/console/history``: the console scope; a team lead gets their teams only."""

    history: History

    def initialize(  # type: ignore[override]
        self, context: ServiceContext, console: ConsoleState, history: History
    ) -> None:
        super().initialize(context, console)
        self.history = history

    async def get(self) -> None:
        try:
            range_seconds = parse_range(self.get_argument("range", ""))
        except ValueError as e:
            raise web.HTTPError(400, str(e)) from None
        only = self.teams
        asked = {t for t in self.get_arguments("team") if t}
        if asked:
            only = asked if only is None else only & asked
        if only is not None and not only:
            raise web.HTTPError(403, "none of the teams asked for is one this caller may see")
        model = self.current_user or {}
        caller = f"{model.get('kind', 'user')}:{model.get('name', '')}"
        bodies = await history_bodies(
            self.history,
            only,
            range_seconds,
            admit=lambda: limit(self.context, "history", caller),
        )
        self.finish_answer(lambda: bodies.json, lambda: bodies.gzip)


def history_handlers(
    context: ServiceContext, console: ConsoleState, history: History
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The history's endpoint, for :func:`gpuaas_service.web.app.make_app`."""
    kw: dict[str, object] = {"context": context, "console": console, "history": history}
    return [(context.root + "api/console/history", ConsoleHistoryHandler, kw)]

"""The console's history (web/console_history.py) against a fake Prometheus on 127.0.0.1 that
answers range queries as Prometheus's HTTP API does: points on one grid, series bounded, a team
lead's queries narrowed in PromQL, and a missing, unreachable, slow or failing Prometheus
answered with ``available: false`` and the reason."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import pytest
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.clients.prometheus import (
    PrometheusClient,
    history_queries,
    history_step,
    read_matrix,
    team_matcher,
)
from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.web.app import make_app
from gpuaas_service.web.console_history import (
    NOT_CONFIGURED,
    History,
    history_answer,
    history_bodies,
    parse_range,
)
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.limits import RateLimit
from tests.support.clock import FakeClock, until
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.service_world import World

NOW = 1_764_500_000.0
LEAD_CHARTS = ["allocated", "busy", "idle", "queued", "wait", "reclaims"]
"""The charts of a caller who sees some teams; one who sees every team gets hand-offs too."""


@dataclass
class FakePrometheus:
    """What it was asked, and how it answers: ``series`` per query (by label value), once
    ``answering`` is set (clear it to hold the answers back); ``error``: an error answer
    instead."""

    url: str = ""
    asked: list[dict[str, str]] = field(default_factory=list)
    series: int = 2
    answering: asyncio.Event = field(default_factory=asyncio.Event)
    error: str = ""


@pytest.fixture
async def prometheus() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    fake.answering.set()

    class QueryRange(web.RequestHandler):
        async def get(self) -> None:
            args = {k: self.get_argument(k) for k in ("query", "start", "end", "step", "timeout")}
            fake.asked.append(args)
            await fake.answering.wait()
            if fake.error:
                self.set_status(422)
                self.finish({"status": "error", "errorType": "execution", "error": fake.error})
                return
            start, end, step = (float(args[k]) for k in ("start", "end", "step"))
            by = "result" if "handoffs" in args["query"] else "team"
            result = [
                {
                    "metric": {by: f"team-{i:02d}"},
                    # every other point, as a series that comes and goes does
                    "values": [
                        [start + k * step, str(i + k)]
                        for k in range(int((end - start) // step) + 1)
                        if k % 2 == 0
                    ],
                }
                for i in range(fake.series)
            ]
            self.finish({"status": "success", "data": {"resultType": "matrix", "result": result}})

    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(web.Application([(r"/api/v1/query_range", QueryRange)]))
    server.add_sockets([sock])
    fake.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        yield fake
    finally:
        fake.answering.set()  # the answers held back end with the test
        server.stop()


def history(url: str, **kw: Any) -> History:
    return History(PrometheusClient(url, timeout=2), clock=lambda: NOW, **kw)


@pytest.mark.parametrize(
    ("range_seconds", "points", "step"),
    [(3600, 240, 15), (6 * 3600, 240, 120), (7 * 86400, 240, 3600), (31 * 86400, 240, 21600)],
)
def test_the_step_keeps_each_series_within_its_points(
    range_seconds: int, points: int, step: int
) -> None:
    assert history_step(range_seconds, points) == step
    assert range_seconds / step <= points


def test_team_names_are_matched_exactly_in_promql() -> None:
    assert team_matcher(None) == ""
    assert team_matcher({"team-b", "team-a"}) == r'team=~"team\\-a|team\\-b"'
    assert team_matcher({'a"b.c'}) == r'team=~"a\"b\\.c"'


def test_a_team_leads_queries_name_their_teams_and_leave_out_hand_offs() -> None:
    every = history_queries(None, 60)
    lead = history_queries({"team-a"}, 60)
    assert [q.name for q in every] == [*LEAD_CHARTS, "handoffs"]
    assert "handoffs" not in [q.name for q in lead]
    assert all(r'team=~"team\\-a"' in q.expr for q in lead)
    reclaims = next(q.expr for q in lead if q.name == "reclaims")
    assert "offset 60s" in reclaims
    assert "increase(" not in reclaims, "increase() misses a counter's first count"


async def test_every_chart_on_one_grid_with_gaps_as_none(prometheus: FakePrometheus) -> None:
    answer = await history_answer(history(prometheus.url), None, 3600)
    assert answer["available"] is True
    step = answer["step"]
    assert step == 15
    assert answer["end"] == (NOW // step + 1) * step, "the step at or after now"
    assert answer["end"] - answer["start"] == 3600
    assert len(answer["times"]) == 3600 // 15 + 1
    assert len(prometheus.asked) == 7
    assert {a["step"] for a in prometheus.asked} == {"15"}
    idle = next(c for c in answer["charts"] if c["name"] == "idle")
    assert [s["name"] for s in idle["series"]] == ["team-00", "team-01"]
    values = idle["series"][1]["values"]
    assert values[:4] == [1.0, None, 3.0, None]
    assert len(values) == len(answer["times"])
    assert idle["truncated"] is False


async def test_a_query_with_too_many_series_is_cut_and_says_so(
    prometheus: FakePrometheus,
) -> None:
    prometheus.series = 50
    answer = await history_answer(history(prometheus.url, max_series=5), None, 3600)
    assert answer["available"]
    chart = answer["charts"][0]
    assert [s["name"] for s in chart["series"]] == [f"team-{i:02d}" for i in range(5)]
    assert chart["truncated"] is True
    assert chart["total_series"] == 50
    assert "5 of 50 series shown" in chart["note"]


async def test_without_prometheus_the_answer_says_how_to_connect_one() -> None:
    answer = await history_answer(History(None), None, 3600)
    assert answer == {
        "available": False,
        "reason": NOT_CONFIGURED,
        "message": f"History is unavailable: {NOT_CONFIGURED}. The live view is not affected.",
    }
    assert not answer["available"]
    assert "c.GPUaaSService.prometheus_url" in answer["reason"]


async def test_an_unreachable_prometheus_makes_history_unavailable_and_says_why() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    answer = await history_answer(history(f"http://127.0.0.1:{closed}"), None, 3600)
    assert answer["available"] is False
    assert f"127.0.0.1:{closed}" in answer["reason"]
    assert answer["message"].startswith("History is unavailable: Prometheus could not be read")


async def test_the_reason_a_team_lead_reads_never_holds_prometheus_credentials() -> None:
    # Fifth audit, finding 3: prometheus_url's user:password@ was in the "unavailable" reason.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    url = f"http://grafana:s3cret@127.0.0.1:{closed}"
    answer = await history_answer(history(url), {"team-a"}, 3600)
    assert answer["available"] is False
    assert f"http://127.0.0.1:{closed}" in answer["reason"]
    assert "s3cret" not in json.dumps(answer)
    assert "grafana" not in json.dumps(answer)


async def test_a_slow_prometheus_is_given_up_after_the_timeout(
    prometheus: FakePrometheus,
) -> None:
    await history_answer(history(prometheus.url, timeout=0.3), None, 3600)
    assert {a["timeout"] for a in prometheus.asked} == {"0.3s"}, "Prometheus stops too"
    prometheus.answering.clear()  # from now on it never answers
    answer = await history_answer(history(prometheus.url, timeout=0.02), None, 3600)
    assert answer["available"] is False
    assert "did not answer within 0.02 s" in answer["reason"]


async def test_an_error_answer_makes_history_unavailable_with_prometheus_words(
    prometheus: FakePrometheus,
) -> None:
    prometheus.error = "query processing would load too many samples into memory"
    answer = await history_answer(history(prometheus.url), None, 3600)
    assert answer["available"] is False
    assert "too many samples" in answer["reason"]


def test_a_matrix_point_off_the_grid_lands_on_the_nearest_step_and_nan_is_a_gap() -> None:
    answer = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"team": "t"}, "values": [[100.2, "1"], [110, "NaN"]]}],
        },
    }
    matrix = read_matrix(answer, "team", 100, 10, 120, 5)
    assert matrix.times == [100, 110, 120]
    assert matrix.values == [[1.0, None, None]]


@pytest.mark.parametrize(
    ("raw", "seconds"), [("", 6 * 3600), ("1h", 3600), ("7d", 7 * 86400), ("5m", 300)]
)
def test_the_range_parameter(raw: str, seconds: int) -> None:
    assert parse_range(raw) == seconds


@pytest.mark.parametrize(("raw", "words"), [("1m", "from 5m to 31d"), ("soon", "range:")])
def test_a_bad_range_says_what_is_allowed(raw: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_range(raw)


async def test_the_route_gives_a_team_lead_their_teams_series_only(
    prometheus: FakePrometheus,
) -> None:
    hub = TokenHub()
    auth = cast(Any, hub)
    w = World()
    console = ConsoleState(
        w.loop,
        w.view,
        notebook_namespace="jupyter-users",
        job_namespaces=[],
        regret_window=timedelta(hours=1),
    )
    context = ServiceContext(hub_auth=auth, console_auth=auth, loop=w.loop, console=console)
    app = make_app(context, history=history(prometheus.url))
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app)
    server.add_sockets([sock])
    lead = hub.mint("bob", ["custom:gpuaas:console!group=team-a", SERVICE_SCOPE])
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/services/gpuaas/api/console/history"
    client = AsyncHTTPClient(force_instance=True)
    try:

        async def ask(query: str) -> tuple[int, Any]:
            r = await client.fetch(
                HTTPRequest(base + query, headers={"Authorization": f"Bearer {lead}"}),
                raise_error=False,
            )
            return r.code, json.loads(r.body)

        code, answer = await ask("?range=1h")
        assert code == 200, answer
        assert answer["teams"] == ["team-a"]
        # on the wire: gzipped to a client that takes gzip (the same answer, kept)
        raw = await client.fetch(
            HTTPRequest(
                base + "?range=1h",
                headers={"Authorization": f"Bearer {lead}", "Accept-Encoding": "gzip"},
                decompress_response=False,
            )
        )
        assert raw.headers["Content-Encoding"] == "gzip"
        assert json.loads(gzip.decompress(raw.body)) == answer
        assert [c["name"] for c in answer["charts"]] == LEAD_CHARTS
        assert all(r'team=~"team\\-a"' in a["query"] for a in prometheus.asked)
        # asking for another team's series gives nothing of it
        assert (await ask("?team=team-b"))[0] == 403
        code, answer = await ask("?range=forever")
        assert code == 400
        assert "range" in answer["message"]
    finally:
        server.stop()


def test_the_service_builds_its_history_from_prometheus_url() -> None:
    from gpuaas_service.app import GPUaaSService

    service = GPUaaSService(
        prometheus_url="http://prometheus.monitoring:9090",
        history_max_series=7,
        history_max_points=99,
    )
    built = service._history()
    assert built.client is not None
    assert built.client.url == "http://prometheus.monitoring:9090"
    assert (built.max_points, built.max_series, built.timeout) == (99, 7, 5.0)
    assert GPUaaSService(prometheus_url="")._history().client is None


async def test_an_answer_is_served_again_for_its_keep_time_an_unavailable_one_never(
    prometheus: FakePrometheus,
) -> None:
    clock = [100.0]
    kept = history(prometheus.url, keep_seconds=10, monotonic=lambda: clock[0])
    first = (await history_bodies(kept, None, 3600)).json
    asked = len(prometheus.asked)
    clock[0] += 9
    assert (await history_bodies(kept, None, 3600)).json == first
    assert len(prometheus.asked) == asked, "served again without asking Prometheus"
    await history_bodies(kept, {"team-a"}, 3600)
    assert len(prometheus.asked) > asked, "other teams: their own answer"
    clock[0] += 2
    asked = len(prometheus.asked)
    await history_bodies(kept, None, 3600)
    assert len(prometheus.asked) > asked, "stale after keep_seconds"
    prometheus.error = "too many samples"
    clock[0] += 11
    assert json.loads((await history_bodies(kept, None, 3600)).json)["available"] is False
    prometheus.error = ""
    assert json.loads((await history_bodies(kept, None, 3600)).json)["available"] is True


# ------------------------------------------------------------------ one caller, many ranges
# Fourth audit, finding 7: a team lead's 60 requests, each a new range=, queued 360 Prometheus
# queries and the operator's history answered "not available".


async def test_ranges_a_few_seconds_apart_are_one_question_to_prometheus(
    prometheus: FakePrometheus,
) -> None:
    kept = history(prometheus.url)
    first = json.loads((await history_bodies(kept, None, 3001)).json)
    asked = len(prometheus.asked)
    assert (first["step"], first["range_seconds"]) == (15, 3015)  # up to whole 15 s steps
    for seconds in (3002, 3010, 3015):
        assert json.loads((await history_bodies(kept, None, seconds)).json) == first
    assert len(prometheus.asked) == asked, "the same grid: served again"
    await history_bodies(kept, None, 3016)  # the next step: a question of its own
    assert len(prometheus.asked) == 2 * asked


async def test_callers_asking_the_same_meanwhile_share_one_reading(
    prometheus: FakePrometheus,
) -> None:
    prometheus.answering.clear()
    kept = history(prometheus.url)
    admitted: list[int] = []
    asking = asyncio.gather(
        *(
            history_bodies(kept, {"team-a"}, 6 * 3600 + 1 + k, admit=lambda: admitted.append(1))
            for k in range(10)
        )
    )
    queries = len(history_queries({"team-a"}, 120))
    await until("Prometheus to be asked", lambda: len(prometheus.asked) == queries)
    prometheus.answering.set()  # every caller has asked by now, all while it is reading
    answers = await asyncio.wait_for(asking, 10)
    assert len({a.json for a in answers}) == 1
    assert len(prometheus.asked) == queries  # one reading
    assert admitted == [1], "only the caller who made Prometheus work is counted"
    assert kept.reading == {}


async def test_one_caller_over_its_limit_is_429_and_the_operators_history_still_answers(
    prometheus: FakePrometheus,
) -> None:
    clock = FakeClock()  # no refill, nothing kept goes stale, however long the machine takes
    hub = TokenHub()
    auth = cast(Any, hub)
    w = World()
    console = ConsoleState(
        w.loop,
        w.view,
        notebook_namespace="jupyter-users",
        job_namespaces=[],
        regret_window=timedelta(hours=1),
    )
    context = ServiceContext(
        hub_auth=auth,
        console_auth=auth,
        loop=w.loop,
        console=console,
        limits={"history": RateLimit(6 / 60, 3)},
        monotonic=clock,
    )
    app = make_app(context, history=history(prometheus.url, monotonic=clock))
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(app)
    server.add_sockets([sock])
    lead = hub.mint("bob", ["custom:gpuaas:console!group=team-a", SERVICE_SCOPE])
    operator = hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE])
    base = f"http://127.0.0.1:{sock.getsockname()[1]}/services/gpuaas/api/console/history"
    client = AsyncHTTPClient(force_instance=True)

    async def ask(token: str, query: str) -> tuple[int, Any, Any]:
        r = await client.fetch(
            HTTPRequest(base + query, headers={"Authorization": f"Bearer {token}"}),
            raise_error=False,
        )
        return r.code, r.headers, json.loads(r.body)

    try:
        codes = [(await ask(lead, f"?range={h}h"))[0] for h in range(1, 21)]
        assert codes[:3] == [200, 200, 200]
        assert set(codes[3:]) == {429}
        code, headers, answer = await ask(lead, "?range=21h")
        assert code == 429
        assert int(headers["Retry-After"]) >= 1
        assert "too many requests" in answer["message"]
        asked = len(prometheus.asked)
        assert asked == 3 * len(history_queries({"team-a"}, 60))  # nothing queued for the 429s
        assert (await ask(lead, "?range=1h"))[0] == 200  # what is kept costs nothing
        code, _, answer = await ask(operator, "?range=6h")
        assert code == 200
        assert answer["available"] is True
    finally:
        server.stop()

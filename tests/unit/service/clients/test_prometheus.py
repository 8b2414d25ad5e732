"""Per-pod GPU utilisation from Prometheus: reading instant-query answers, and the client
against a real HTTP server on 127.0.0.1 that answers as Prometheus's query API does."""

from __future__ import annotations

import asyncio
import base64
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from tornado import web

from gpuaas_service.clients.http import split_credentials
from gpuaas_service.clients.prometheus import (
    DEFAULT_QUERY,
    HAMI_LAST_KERNEL_QUERY,
    RANGE_QUERIES_AT_ONCE,
    PrometheusClient,
    PrometheusError,
    read_last_kernel,
    read_pod_utilization,
)


def vector(*samples: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1764500000.0, v]} for m, v in samples],
        },
    }


def test_samples_by_pod_in_either_label_spelling_highest_wins() -> None:
    answer = vector(
        ({"namespace": "jupyter-users", "pod": "jupyter-alice"}, "12.5"),
        ({"exported_namespace": "jupyter-users", "exported_pod": "jupyter-bob"}, "80"),
        ({"namespace": "jupyter-users", "pod": "jupyter-bob", "gpu": "1"}, "3"),
        ({"namespace": "jupyter-users"}, "99"),  # no pod: not a workbench's
        ({"namespace": "jupyter-users", "pod": "jupyter-nan"}, "NaN"),
        ({"namespace": "jupyter-users", "pod": "jupyter-junk"}, "x"),
    )
    assert read_pod_utilization(answer) == {
        ("jupyter-users", "jupyter-alice"): 12.5,
        ("jupyter-users", "jupyter-bob"): 80.0,
    }


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"status": "error", "errorType": "bad_data", "error": "parse error"}, "bad_data"),
        ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "instant vector"),
        (None, "query failed"),
    ],
)
def test_a_failed_or_misshapen_answer_is_an_error_that_says_why(answer: Any, message: str) -> None:
    with pytest.raises(PrometheusError, match=message):
        read_pod_utilization(answer)


@pytest.fixture
async def prometheus() -> AsyncIterator[tuple[str, list[str]]]:
    queries: list[str] = []

    class Query(web.RequestHandler):
        def get(self) -> None:
            query = self.get_argument("query")
            queries.append(query)
            if "syntax error" in query:
                self.set_status(400)
                self.finish({"status": "error", "errorType": "bad_data", "error": "parse error"})
                return
            self.finish(vector(({"namespace": "ns", "pod": "p"}, "42")))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = web.Application([(r"/prom/api/v1/query", Query)]).listen(port, "127.0.0.1")
    try:
        yield f"http://127.0.0.1:{port}/prom/", queries
    finally:
        server.stop()


async def test_the_client_sends_the_query_and_reads_the_vector(
    prometheus: tuple[str, list[str]],
) -> None:
    url, queries = prometheus
    assert await PrometheusClient(url).pod_utilization() == {("ns", "p"): 42.0}
    assert queries == [DEFAULT_QUERY]


async def test_the_client_reports_a_bad_query_and_an_unreachable_prometheus(
    prometheus: tuple[str, list[str]],
) -> None:
    url, _ = prometheus
    with pytest.raises(PrometheusError, match=r"HTTP 400.*parse error"):
        await PrometheusClient(url, "syntax error(").pod_utilization()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(PrometheusError, match=re.escape(f"127.0.0.1:{closed}")):
        await PrometheusClient(f"http://127.0.0.1:{closed}", timeout=2).pod_utilization()


async def test_a_prometheus_behind_basic_auth_gets_the_urls_credentials_and_nobody_sees_them() -> (
    None
):
    # Fifth audit, finding 3: the password went out percent-encoded and was shown with every error.
    seen: list[str] = []

    class Query(web.RequestHandler):
        def get(self) -> None:
            seen.append(self.request.headers.get("Authorization", ""))
            if seen[-1] != "Basic " + base64.b64encode(b"grafana:p@ss:w").decode():
                self.set_status(401)
                self.finish({"status": "error", "errorType": "auth", "error": "unauthorized"})
                return
            self.finish(vector(({"namespace": "ns", "pod": "p"}, "42")))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = web.Application([(r"/api/v1/query", Query)]).listen(port, "127.0.0.1")
    try:
        client = PrometheusClient(f"http://grafana:p%40ss:w@127.0.0.1:{port}/")
        assert client.url == f"http://127.0.0.1:{port}"
        assert await client.pod_utilization() == {("ns", "p"): 42.0}
        wrong = PrometheusClient(f"http://grafana:wrong-pass@127.0.0.1:{port}")
        with pytest.raises(PrometheusError) as refused:
            await wrong.pod_utilization()
    finally:
        server.stop()
    assert "HTTP 401" in str(refused.value)
    assert "wrong-pass" not in str(refused.value)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(PrometheusError) as unreachable:
        await PrometheusClient(f"http://grafana:s3cret@127.0.0.1:{closed}", timeout=2).instant("1")
    assert f"http://127.0.0.1:{closed}" in str(unreachable.value)
    assert "s3cret" not in str(unreachable.value)
    assert "grafana" not in str(unreachable.value)


@pytest.mark.parametrize(
    ("url", "shown", "username", "password"),
    [
        ("http://prom:9090", "http://prom:9090", None, None),
        ("https://u:p%40ss@prom:9090/x?q=1", "https://prom:9090/x?q=1", "u", "p@ss"),
        ("http://only-user@prom", "http://prom", "only-user", None),
        ("http://u:@prom", "http://prom", "u", ""),
        ("http://u:pw@[::1", "http://[::1", None, None),  # does not parse: cut all the same
    ],
)
def test_a_urls_credentials_are_taken_apart_from_it(
    url: str, shown: str, username: str | None, password: str | None
) -> None:
    split = split_credentials(url)
    assert (split.url, split.username, split.password) == (shown, username, password)
    assert split.has_credentials is (username is not None)


def test_hamis_last_kernel_per_pod_the_most_recent_wins() -> None:
    """hami_container_last_kernel_elapsed_seconds has one sample per container and vGPU."""
    answer = vector(
        ({"namespace": "u", "pod": "jupyter-ann", "container": "notebook"}, "600"),
        ({"namespace": "u", "pod": "jupyter-ann", "container": "sidecar"}, "30"),
        ({"exported_namespace": "u", "exported_pod": "jupyter-ben"}, "7200"),
    )
    assert read_last_kernel(answer) == {("u", "jupyter-ann"): 30.0, ("u", "jupyter-ben"): 7200.0}


async def test_the_client_asks_for_hamis_last_kernel(prometheus: tuple[str, list[str]]) -> None:
    url, queries = prometheus
    assert await PrometheusClient(url).last_kernel() == {("ns", "p"): 42.0}
    assert queries == [HAMI_LAST_KERNEL_QUERY]
    assert "hami_container_last_kernel_elapsed_seconds" in HAMI_LAST_KERNEL_QUERY


async def test_a_historys_range_queries_go_out_together_and_never_hold_up_the_cycles() -> None:
    """A history answer asks its 7 charts at once, and the culler's instant query is answered
    while they are all still waiting for Prometheus."""
    charts = 7
    assert charts <= RANGE_QUERIES_AT_ONCE
    waiting: list[str] = []
    all_in, release = asyncio.Event(), asyncio.Event()

    class QueryRange(web.RequestHandler):
        async def get(self) -> None:
            waiting.append(self.get_argument("query"))
            if len(waiting) == charts:
                all_in.set()
            await release.wait()
            self.finish({"status": "success", "data": {"resultType": "matrix", "result": []}})

    class Query(web.RequestHandler):
        def get(self) -> None:
            self.finish(vector(({"namespace": "ns", "pod": "p"}, "42")))

    app = web.Application([(r"/api/v1/query_range", QueryRange), (r"/api/v1/query", Query)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = app.listen(port, "127.0.0.1")
    client = PrometheusClient(f"http://127.0.0.1:{port}", timeout=30)
    try:
        asked = asyncio.gather(*(client.query_range(f"q{i}", 0, 600, 60) for i in range(charts)))
        await asyncio.wait_for(all_in.wait(), 20)  # all 7 at Prometheus at once
        assert await asyncio.wait_for(client.pod_utilization(), 20) == {("ns", "p"): 42.0}
        release.set()
        answers = await asyncio.wait_for(asked, 20)
        assert len(answers) == charts
        assert sorted(waiting) == [f"q{i}" for i in range(charts)]
    finally:
        release.set()
        server.stop()

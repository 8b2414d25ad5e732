"""Per-pod GPU utilisation from Prometheus (DCGM exporter's metrics), for MIG slices and GPUs.

A MIG slice has no utilisation a server can read through NVML, so without this a MIG workbench
is judged by its kernels, terminals and memory only. Where DCGM exporter runs with its
Kubernetes pod mapping and Prometheus scrapes it, the culler can ask Prometheus instead: one
instant query per cycle (``GET /api/v1/query``) whose answer has one sample per pod, in percent.

The default query uses ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (a ratio from 0 to 1 that DCGM reports
for MIG instances as well as whole GPUs; ``DCGM_FI_DEV_GPU_UTIL`` is not reported for MIG
instances), the busiest moment of the last two minutes, per pod. DCGM exporter names the pod in
the labels ``namespace`` and ``pod``; a Prometheus that scrapes it without ``honor_labels``
renames them ``exported_namespace`` and ``exported_pod``: both spellings are read.

For HAMi fractions (docs/fractions.md) a second query reads HAMi's vGPU monitor:
``hami_container_last_kernel_elapsed_seconds`` (``cmd/vGPUmonitor/metrics.go``: seconds since the
container last launched a kernel, per vGPU; exported only once it has launched one), the most
recent per pod.

The console's history (:func:`history_queries`, :func:`read_matrix`, ``query_range``) asks the
same Prometheus for the service's own metrics over hours and days with range queries
(``GET /api/v1/query_range``): a step chosen from the range so that every series has at most a
bounded number of points, and at most a bounded number of series kept per query, the rest
counted and cut.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlencode

from gpuaas_service.clients.http import OwnClient, split_credentials
from jupyter_gpuaas.core.kueue import as_list, as_mapping

__all__ = [
    "DEFAULT_QUERY",
    "HAMI_LAST_KERNEL_QUERY",
    "RANGE_QUERIES_AT_ONCE",
    "HistoryQuery",
    "Matrix",
    "PrometheusClient",
    "PrometheusError",
    "history_queries",
    "history_step",
    "read_last_kernel",
    "read_matrix",
    "read_pod_utilization",
    "team_matcher",
]

DEFAULT_QUERY = (
    "100 * max by (namespace, pod, exported_namespace, exported_pod)"
    " (max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE[2m]))"
)


HAMI_LAST_KERNEL_QUERY = (
    "min by (namespace, pod, exported_namespace, exported_pod)"
    " (hami_container_last_kernel_elapsed_seconds)"
)


class PrometheusError(RuntimeError):
    """Prometheus could not be asked, or its answer is not a vector of per-pod samples."""


def read_pod_utilization(answer: Any) -> dict[tuple[str, str], float]:
    """``(namespace, pod)`` → percent, from an instant query's JSON answer.

    Samples without a pod label are left out; of several samples for one pod, the highest
    counts (a pod with two GPUs is busy when either is).
    """
    return _read_vector(answer, max)


def read_last_kernel(answer: Any) -> dict[tuple[str, str], float]:
    """``(namespace, pod)`` → seconds since its last kernel; of several samples (vGPUs,
    containers) the smallest counts: the pod's latest kernel."""
    return _read_vector(answer, min)


def _result(answer: Any, result_type: str, what: str) -> list[Any]:
    """The ``result`` of a successful answer of ``result_type``; PrometheusError otherwise."""
    body = as_mapping(answer)
    if body.get("status") != "success":
        raise PrometheusError(
            f"query failed: {body.get('errorType', 'error')}: {body.get('error', answer)!r}"
        )
    data = as_mapping(body.get("data"))
    if data.get("resultType") != result_type:
        raise PrometheusError(f"{what}, not {data.get('resultType')!r}")
    return as_list(data.get("result"))


def _read_vector(answer: Any, pick: Any) -> dict[tuple[str, str], float]:
    result = _result(answer, "vector", "the query must give an instant vector (one sample per pod)")
    out: dict[tuple[str, str], float] = {}
    for raw in result:
        sample = as_mapping(raw)
        labels = as_mapping(sample.get("metric"))
        pod = labels.get("exported_pod") or labels.get("pod")
        namespace = labels.get("exported_namespace") or labels.get("namespace")
        value = as_list(sample.get("value"))
        if not pod or not namespace or len(value) != 2:
            continue
        try:
            percent = float(value[1])
        except (TypeError, ValueError):
            continue
        if percent != percent:  # NaN: no reading
            continue
        key = (str(namespace), str(pod))
        out[key] = pick(percent, out.get(key, percent))
    return out


# Steps a history's points are spaced by (seconds): the smallest that keeps the points bounded.
HISTORY_STEPS = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def history_step(range_seconds: float, max_points: int) -> int:
    """The step of a range query over ``range_seconds`` with at most ``max_points`` points
    per series (one more for the end), from :data:`HISTORY_STEPS`, else whole days."""
    wanted = range_seconds / max(max_points, 1)
    for step in HISTORY_STEPS:
        if step >= wanted:
            return step
    return 86400 * math.ceil(wanted / 86400)


def team_matcher(teams: Collection[str] | None) -> str:
    """The label matcher of a history's queries: every team (``None``), or exactly these
    (each name escaped for RE2, then for a PromQL string)."""
    if teams is None:
        return ""
    pattern = "|".join(re.escape(team) for team in sorted(teams))
    quoted = pattern.replace("\\", "\\\\").replace('"', '\\"')
    return f'team=~"{quoted}"'


def per_step(counter: str, step: int) -> str:
    """How much ``counter`` (a selector) grew in each step. Not ``increase()``: the service
    creates a team's counter at its first count, already 1, and ``increase()`` sees no growth
    from a series' first sample; here a series that was not there a step ago counts whole.
    A restart of the service (a counter back at 0) counts as no growth, not a negative one."""
    before = f"{counter} offset {step}s"
    return f"(clamp_min({counter} - {before}, 0) or ({counter} unless {before}))"


@dataclass(frozen=True)
class HistoryQuery:
    """One chart of the console's history: its PromQL, what its series are by, its unit."""

    name: Literal["allocated", "busy", "idle", "queued", "wait", "reclaims", "handoffs"]
    title: str
    unit: str
    expr: str
    by: str  # the label that names each series


def history_queries(teams: Collection[str] | None, step: int) -> list[HistoryQuery]:
    """The history's queries over the service's metrics (metrics.py), for ``teams`` only
    unless ``None``. Counters are read as growth per ``step`` (:func:`per_step`): one step's
    count. Hand-offs have no team: only a caller who sees every team gets them."""
    only = team_matcher(teams)
    sel = f"{{{only}}}"
    states: tuple[Literal["allocated", "busy", "idle"], ...] = ("allocated", "busy", "idle")
    queries = [
        HistoryQuery(
            state,
            f"{state.capitalize()} GPU-equivalents",
            "GPU-equivalents",
            f"sum by (team) (gpuaas_gpu_equivalents_{state}{sel})",
            "team",
        )
        for state in states
    ]
    queries += [
        HistoryQuery(
            "queued",
            "Queued GPU workloads",
            "workloads",
            f"sum by (team) (gpuaas_queued_workloads{sel})",
            "team",
        ),
        HistoryQuery(
            "wait",
            "Oldest queued wait",
            "seconds",
            f"max by (team) (gpuaas_queue_oldest_wait_seconds{sel})",
            "team",
        ),
        HistoryQuery(
            "reclaims",
            "Reclaims per step",
            "workbenches",
            f"sum by (team) {per_step(f'gpuaas_reclaims_total{sel}', step)}",
            "team",
        ),
    ]
    if teams is None:
        queries.append(
            HistoryQuery(
                "handoffs",
                "Hand-offs per step",
                "hand-offs",
                f"sum by (result) {per_step('gpuaas_handoffs_total', step)}",
                "result",
            )
        )
    return queries


@dataclass(frozen=True)
class Matrix:
    """A range query's series on one time grid: ``values[i][k]`` is series ``i`` at
    ``times[k]`` (``None``: no sample there); ``total``: series in the answer, of which only
    the first ``len(names)`` (by name) are kept."""

    times: list[float]
    names: list[str]
    values: list[list[float | None]]
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.names)


def read_matrix(
    answer: Any, by: str, start: float, step: float, end: float, max_series: int
) -> Matrix:
    """A ``query_range`` JSON answer on the grid ``start, start + step, ... <= end``, each
    series named by its label ``by``; at most ``max_series`` series kept."""
    result = _result(answer, "matrix", "a range query must give a matrix")
    count = int((end - start) // step) + 1 if end >= start else 0
    times = [start + k * step for k in range(count)]
    # Named and sorted first: only the series kept have their points read (an answer of
    # hundreds of series costs its names, not its points).
    series_named = [
        (str(as_mapping(as_mapping(raw).get("metric")).get(by) or ""), as_mapping(raw))
        for raw in result
    ]
    series_named.sort(key=lambda item: item[0])
    named: list[tuple[str, list[float | None]]] = []
    for name, series in series_named[: max(max_series, 0)]:
        row: list[float | None] = [None] * count
        for point in as_list(series.get("values")):
            pair = as_list(point)
            if len(pair) != 2:
                continue
            try:
                at, value = float(pair[0]), float(pair[1])
            except (TypeError, ValueError):
                continue
            k = round((at - start) / step)
            if 0 <= k < count and value == value:  # NaN: no reading
                row[k] = value
        named.append((name, row))
    return Matrix(times, [n for n, _ in named], [r for _, r in named], len(result))


RANGE_QUERIES_AT_ONCE = 8
"""Range queries in flight at once: a history answer's charts (7) are asked together."""


class PrometheusClient:
    """Asks one Prometheus for the per-pod utilisation and the console's history (tornado's
    async client): the culler's instant queries and the history's range queries each on a
    client of their own, so that a cycle's query never waits behind the charts. A Prometheus
    behind basic auth is given as ``https://user:password@host``: the credentials go into each
    request's ``Authorization`` header and nowhere else (:attr:`url` is without them)."""

    def __init__(self, url: str, query: str = DEFAULT_QUERY, *, timeout: float = 10.0) -> None:
        split = split_credentials(url.rstrip("/"))
        self.url = split.url
        """Without its credentials: what every error and answer names."""
        self._auth = split
        """A ``user:password@`` in the URL, sent as basic auth (never shown)."""
        self.query = query
        self.timeout = timeout
        self.http = OwnClient(2)  # one query per cycle; never queued behind another collaborator
        self.range_http = OwnClient(RANGE_QUERIES_AT_ONCE)

    async def pod_utilization(self) -> Mapping[tuple[str, str], float]:
        return read_pod_utilization(await self._ask(self.query))

    async def last_kernel(
        self, query: str = HAMI_LAST_KERNEL_QUERY
    ) -> Mapping[tuple[str, str], float]:
        """Seconds since each pod's last kernel (HAMi's vGPU monitor)."""
        return read_last_kernel(await self._ask(query))

    async def query_range(
        self, query: str, start: float, end: float, step: float, *, timeout: float | None = None
    ) -> Any:
        """The JSON answer of ``GET /api/v1/query_range`` (Prometheus stops at its own
        ``timeout`` too, so a slow query does not go on after the answer is given up)."""
        wait = self.timeout if timeout is None else timeout
        args = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        path = f"query_range?{urlencode({**args, 'timeout': f'{wait:g}s'})}"
        return await self._get(path, wait, self.range_http)

    async def instant(self, expr: str) -> Any:
        """The JSON answer of an instant query (``GET /api/v1/query``), as it comes."""
        return await self._ask(expr)

    async def rules(self) -> Any:
        """The JSON answer of ``GET /api/v1/rules`` (the loaded alerting and recording rules)."""
        return await self._get("rules", self.timeout, self.http)

    async def _ask(self, query: str) -> Any:
        return await self._get(f"query?{urlencode({'query': query})}", self.timeout, self.http)

    async def _get(self, path: str, timeout: float, http: OwnClient) -> Any:
        from tornado.httpclient import HTTPClientError, HTTPRequest

        auth = self._auth
        req = HTTPRequest(
            f"{self.url}/api/v1/{path}",
            connect_timeout=timeout,
            request_timeout=timeout,
            auth_username=auth.username if auth.has_credentials else None,
            auth_password=(auth.password or "") if auth.has_credentials else None,
        )
        try:
            resp = await http().fetch(req)
        except HTTPClientError as e:
            detail = e.response.body.decode(errors="replace")[:300] if e.response else ""
            raise PrometheusError(f"{self.url}: HTTP {e.code} {detail}".strip()) from e
        except OSError as e:
            raise PrometheusError(f"{self.url}: {e}") from e
        try:
            return json.loads(resp.body or b"null")
        except ValueError as e:
            raise PrometheusError(f"{self.url}: not JSON: {e}") from e

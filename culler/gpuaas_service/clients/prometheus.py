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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from gpuaas_service.clients.http import OwnClient
from jupyter_gpuaas.core.kueue import as_list, as_mapping

__all__ = [
    "DEFAULT_QUERY",
    "HAMI_LAST_KERNEL_QUERY",
    "PrometheusClient",
    "PrometheusError",
    "read_last_kernel",
    "read_pod_utilization",
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


def _read_vector(answer: Any, pick: Any) -> dict[tuple[str, str], float]:
    body = as_mapping(answer)
    if body.get("status") != "success":
        raise PrometheusError(
            f"query failed: {body.get('errorType', 'error')}: {body.get('error', answer)!r}"
        )
    data = as_mapping(body.get("data"))
    if data.get("resultType") != "vector":
        raise PrometheusError(
            f"the query must give an instant vector (one sample per pod), not"
            f" {data.get('resultType')!r}"
        )
    out: dict[tuple[str, str], float] = {}
    for raw in as_list(data.get("result")):
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


class PrometheusClient:
    """Asks one Prometheus for the per-pod utilisation (tornado's async client)."""

    def __init__(self, url: str, query: str = DEFAULT_QUERY, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.query = query
        self.timeout = timeout
        self.http = OwnClient(2)  # one query per cycle; never queued behind another collaborator

    async def pod_utilization(self) -> Mapping[tuple[str, str], float]:
        return read_pod_utilization(await self._ask(self.query))

    async def last_kernel(
        self, query: str = HAMI_LAST_KERNEL_QUERY
    ) -> Mapping[tuple[str, str], float]:
        """Seconds since each pod's last kernel (HAMi's vGPU monitor)."""
        return read_last_kernel(await self._ask(query))

    async def _ask(self, query: str) -> Any:
        from tornado.httpclient import HTTPClientError, HTTPRequest

        req = HTTPRequest(
            f"{self.url}/api/v1/query?{urlencode({'query': query})}",
            connect_timeout=self.timeout,
            request_timeout=self.timeout,
        )
        try:
            resp = await self.http().fetch(req)
        except HTTPClientError as e:
            detail = e.response.body.decode(errors="replace")[:300] if e.response else ""
            raise PrometheusError(f"{self.url}: HTTP {e.code} {detail}".strip()) from e
        except OSError as e:
            raise PrometheusError(f"{self.url}: {e}") from e
        try:
            return json.loads(resp.body or b"null")
        except ValueError as e:
            raise PrometheusError(f"{self.url}: not JSON: {e}") from e

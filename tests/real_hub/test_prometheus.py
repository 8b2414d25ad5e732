"""A real Prometheus over the real service and the node agent's DCGM endpoint.

One scenario for the module: alice and carol each hold a local 1g.5gb MIG slice and leave it
idle; dave holds the 3g.20gb slice and a process on it keeps it 80 % busy (a simulated hold on
the node's device). The policy says ``busy_signal: gpu``: the culler judges them by the DCGM
figure it reads from Prometheus, not by their servers' reports. A training Job that needs two
1g slices then queues: alice and carol are warned and reclaimed, dave is not, and Kueue admits
the Job (a hand-off). Then every panel of the shipped Grafana dashboard, the shipped alert rules
and the console's history read that Prometheus with real data.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.hub import free_port
from devcluster.prometheus import PrometheusNotInstalled, PrometheusProcess, ScrapeTargets
from devcluster.queue_hub import OPERATOR_TOKEN
from devcluster.testing import Cluster
from jupyter_gpuaas.gpu import simulate
from tests.support.console_page import seen
from tests.support.hub import (
    POLICY,
    CullerHub,
    eventually,
    login,
    pod_of,
    run_culler_hub,
    training_job,
)
from tests.support.hub import service_get as get

pytestmark = pytest.mark.integration

DASHBOARD = Path(__file__).resolve().parents[2] / "culler" / "deploy" / "grafana-dashboard.json"
GPU_POLICY = POLICY.replace("    idle_after: 2s\n", "    idle_after: 2s\n    busy_signal: gpu\n")


def query(prom: PrometheusProcess, expr: str) -> list[dict[str, Any]]:
    url = f"{prom.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def query_range(prom: PrometheusProcess, expr: str, seconds: float) -> list[dict[str, Any]]:
    """``expr`` over the last ``seconds``, as a Grafana time-series panel asks for it."""
    now = time.time()
    args = {"query": expr, "start": now - seconds, "end": now, "step": 2}
    url = f"{prom.url}/api/v1/query_range?{urllib.parse.urlencode(args)}"
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def panel_queries() -> list[tuple[str, str]]:
    """(panel title, expr) of every target, with Grafana's variables as Grafana fills them
    for "All" teams over the last hour."""
    board = json.loads(DASHBOARD.read_text())
    out = []
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$__range", "1h").replace('"$team"', '".*"')
            out.append((str(panel["title"]), expr))
    return out


@pytest.fixture(scope="module")
def world(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[CullerHub, PrometheusProcess]]:
    state = tmp_path_factory.mktemp("prometheus-hub")
    prom_port = free_port()
    extra = [f"--GPUaaSService.prometheus_url=http://127.0.0.1:{prom_port}"]
    with run_culler_hub(cluster, state, policy_text=GPU_POLICY, extra_args=extra) as hub:
        targets = ScrapeTargets(
            dcgm=f"127.0.0.1:{cluster.info.settings.ports.dcgm}",
            service=f"127.0.0.1:{hub.port}",
            operator_token=OPERATOR_TOKEN,
            interval=1.0,
        )
        prom = PrometheusProcess(state / "prometheus", prom_port, targets)
        try:
            prom.start()
        except PrometheusNotInstalled as e:
            if os.environ.get("CI"):  # make install installs it: on CI its absence is a failure
                pytest.fail(f"{e}; make install should have installed it")
            pytest.skip(f"{e}; `make prometheus` installs it")
        try:
            yield hub, prom
        finally:
            prom.stop()


def dcgm_series(prom: PrometheusProcess, pod: str) -> dict[str, str]:
    found = query(prom, f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{pod="{pod}"}}')
    return dict(found[0]["metric"]) if found else {}


@pytest.fixture(scope="module")
def reclaimed(
    world: tuple[CullerHub, PrometheusProcess], cluster: Cluster
) -> Iterator[tuple[CullerHub, PrometheusProcess]]:
    hub, prom = world
    hub.start_all(
        {
            "alice": {"team": "team-a", "offering": "local-mig-1g"},
            "carol": {"team": "team-b", "offering": "local-mig-1g"},
            "dave": {"team": "team-b", "offering": "local-mig-3g"},
        }
    )

    async def run() -> simulate.Hold:
        async with cluster.api("jupyterhub", "hub") as k8s:
            dave = await pod_of(k8s, "dave")
        assert dave is not None
        name = dave["metadata"]["name"]

        async def labelled() -> dict[str, str]:
            return dcgm_series(prom, name)

        labels = await eventually(labelled, 30, "dave's slice in Prometheus with its pod label")
        # what a process in dave's pod would hold: 2 GiB on his MIG device, 80 % busy
        busy = simulate.hold(
            "2GiB",
            f"{labels['gpu']}:{labels['GPU_I_ID']}",
            utilization=80,
            directory=cluster.info.settings.agent_dir / "gpus",
        )

        async def judged() -> bool:
            _, answer = get(hub, "api/console", hub.token)
            rows = {w["key"]: json.dumps(w) for w in answer["workbenches"]}
            return "DCGM" in rows.get("dave", "") and "DCGM" in rows.get("alice", "")

        await eventually(judged, 60, "the console's verdicts from DCGM's figures")
        async with cluster.api("team-a", "alice") as api:
            await client.BatchV1Api(api).create_namespaced_job(
                "team-a",
                training_job("train-prom"),  # type: ignore[arg-type]
            )

        async def handed_off() -> bool:
            return "gpuaas_handoff_latency_seconds_count 1.0" in hub.metrics()

        await eventually(handed_off, 180, "the reclaim's hand-off")
        # two scrapes later Prometheus has it too
        await asyncio.sleep(3)
        return busy

    hold = asyncio.run(run())
    try:
        yield hub, prom
    finally:
        hold.release()
        for user in ("alice", "bob", "carol", "dave"):
            hub.stop(user)


def test_the_culler_judges_by_dcgm_utilisation_read_from_prometheus(
    reclaimed: tuple[CullerHub, PrometheusProcess],
) -> None:
    hub, prom = reclaimed
    assert hub.server("dave") is not None, "dave's slice is 80 % busy: never reclaimed"
    assert hub.server("alice") is None
    assert hub.server("carol") is None
    _, answer = get(hub, "api/console", hub.token)
    dave = next(w for w in answer["workbenches"] if w["key"] == "dave")
    assert re.search(r"pod GPU utilisation 80%", json.dumps(dave)), dave
    assert dave["activity"] == "busy"
    # what Prometheus holds for dave's pod: the 80 % and the 2 GiB, with dcgm-exporter's labels
    used = query(prom, 'DCGM_FI_DEV_FB_USED{namespace="jupyter-users", GPU_I_PROFILE="3g.20gb"}')
    assert [float(s["value"][1]) for s in used] == [2048.0]
    assert {"gpu", "UUID", "device", "modelName", "Hostname", "pod", "container"} <= set(
        used[0]["metric"]
    )


def test_every_dashboard_panel_returns_series(
    reclaimed: tuple[CullerHub, PrometheusProcess],
) -> None:
    _, prom = reclaimed
    # over the scenario's last 10 minutes: the queue's gauges go when the Job is admitted
    panels = panel_queries()
    empty = [(title, expr) for title, expr in panels if not query_range(prom, expr, 600)]
    assert not empty, f"panels whose query returned no series: {empty}"
    assert len({title for title, _ in panels}) >= 9


def test_the_shipped_alert_rules_are_loaded_and_evaluate(
    reclaimed: tuple[CullerHub, PrometheusProcess],
) -> None:
    _, prom = reclaimed
    with urllib.request.urlopen(f"{prom.url}/api/v1/rules", timeout=10) as r:
        groups = json.loads(r.read())["data"]["groups"]
    rules = [rule for g in groups for rule in g["rules"]]
    names = {rule["name"] for rule in rules}
    assert {"GPUaaSHandOffFailed", "GPUaaSCullerNoCompletedCycle", "GPUaaSPolicyInvalid"} <= names
    deadline = time.monotonic() + 10
    while any(rule.get("health") != "ok" for rule in rules) and time.monotonic() < deadline:
        time.sleep(1)
        with urllib.request.urlopen(f"{prom.url}/api/v1/rules", timeout=10) as r:
            rules = [x for g in json.loads(r.read())["data"]["groups"] for x in g["rules"]]
    assert all(rule["health"] == "ok" for rule in rules), rules
    # the culler completes its cycles and its policy is valid: neither alert fires
    firing = {rule["name"] for rule in rules if rule["state"] == "firing"}
    assert not firing & {"GPUaaSCullerNoCompletedCycle", "GPUaaSPolicyInvalid"}


def test_the_consoles_history_reads_the_reclaims_from_prometheus(
    reclaimed: tuple[CullerHub, PrometheusProcess],
) -> None:
    hub, _ = reclaimed

    async def handoff_charted() -> Any:
        status, answer = get(hub, "api/console/history?range=1h", hub.token)
        assert status == 200, answer
        assert answer["available"] is True, answer
        handoffs = next(c for c in answer["charts"] if c["name"] == "handoffs")
        return answer if handoffs["series"] else None

    answer = asyncio.run(eventually(handoff_charted, 30, "the hand-off in the history"))
    assert answer["step"] == 15
    charts = {c["name"]: c for c in answer["charts"]}
    assert set(charts) == {"allocated", "busy", "idle", "queued", "wait", "reclaims", "handoffs"}

    def peak(chart: str) -> dict[str, float]:
        return {
            s["name"]: max(v for v in s["values"] if v is not None) for s in charts[chart]["series"]
        }

    assert peak("allocated")["team-b"] > peak("allocated")["team-a"] > 0  # dave's 3g and carol's 1g
    assert peak("busy")["team-b"] > 0, "dave's 3g slice, busy by DCGM"
    assert peak("reclaims") == {"team-a": 1.0, "team-b": 1.0}
    assert peak("handoffs")["succeeded"] >= 1.0
    assert peak("queued")["team-a"] >= 1.0


async def test_the_console_page_draws_the_history_charts(
    reclaimed: tuple[CullerHub, PrometheusProcess], browser: Any
) -> None:
    hub, _ = reclaimed
    page = await login(browser, hub, "admin")
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    await page.goto(f"{hub.url}/services/gpuaas/console/")
    await page.wait_for_selector('#history-charts figure[data-chart="Reclaims per step"] canvas')
    assert await page.locator("#history-charts figure").count() == 7
    # minutes of data: the range follows it, not a sliver at the edge of "last 6h"
    chosen = await page.locator("#history-range").input_value()
    assert chosen in ("15m", "1h"), chosen
    assert "From Prometheus, one point per 15 s." in await seen(page.locator("#history-status"))
    legend = await seen(page.locator('#history-charts figure[data-chart="Reclaims per step"]'))
    assert "team-a" in legend
    assert "team-b" in legend
    assert not [e for e in errors if "uplot" in e.lower() or "Content Security" in e], errors

"""The Grafana dashboard and the alert rules in culler/deploy/ name only metrics the service
exports (a renamed metric would leave a panel blank and an alert silent)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from gpuaas_service.metrics import Metrics

DEPLOY = Path(__file__).resolve().parents[3] / "culler" / "deploy"
NAME = re.compile(r"\bgpuaas_[a-z_]+")


def exported() -> set[str]:
    names: set[str] = set()
    for family in Metrics().registry.collect():
        names.add(family.name)
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
    return names


def test_dashboard_queries_name_exported_metrics() -> None:
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    used = {n for e in exprs for n in NAME.findall(e)}
    assert used, "the dashboard queries the service's metrics"
    assert used <= exported(), used - exported()
    assert {"gpuaas_gpu_equivalents_idle", "gpuaas_queued_gpu_equivalents"} <= used


def test_alert_rules_name_exported_metrics() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yaml").read_text())
    alerts = {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}
    assert {
        "GPUaaSIdleGPUsWhileTeamQueueWaits",
        "GPUaaSHandOffFailed",
        "GPUaaSCullerNoCompletedCycle",
    } <= set(alerts)
    used = {n for e in alerts.values() for n in NAME.findall(e)}
    assert used <= exported(), used - exported()

"""The demo's Prometheus: the service is told where it is, the banner names it, and its
configuration scrapes the service (with the operator token) and the node agent's GPUs."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from demo.__main__ import banner, hub_settings
from demo.jobs import write_catalog
from devcluster.config import demo_settings
from devcluster.hub import write_hub_config
from devcluster.prometheus import RULES_FILE, ScrapeTargets, write_config


def test_the_demo_service_reads_the_demos_prometheus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFIGPROXY_EXECUTABLE", "/bin/true")
    cluster = demo_settings({"HOME": str(tmp_path)})
    catalog = write_catalog(tmp_path / "demo")
    settings = hub_settings(cluster, 0, "pw", catalog, 21234, "http://127.0.0.1:26690")
    text = write_hub_config(replace(settings, state_dir=tmp_path / "hub")).read_text()
    assert "--GPUaaSService.prometheus_url=http://127.0.0.1:26690" in text
    assert "'url': 'http://127.0.0.1:21234'" in text
    without = hub_settings(cluster, 0, "pw", catalog)
    plain = write_hub_config(replace(without, state_dir=tmp_path / "h2")).read_text()
    assert "prometheus_url" not in plain
    assert cluster.ports.dcgm == cluster.port_base, "dcgm-exporter's 9400 in the demo's block"


def test_the_banner_names_prometheus_or_says_there_is_none(tmp_path: Path) -> None:
    hub = cast(Any, SimpleNamespace(url="http://127.0.0.1:8000", log_path=tmp_path / "hub.log"))
    cluster = demo_settings({"HOME": str(tmp_path)})
    text = banner(hub, "pw", Path("/bin/kubectl"), cluster, "http://127.0.0.1:26690")
    assert "Prometheus: http://127.0.0.1:26690" in text
    assert "so the console has no history" in banner(hub, "pw", Path("/bin/kubectl"), cluster)


def test_the_scrape_config_sends_the_token_from_a_file_and_keeps_dcgms_labels(
    tmp_path: Path,
) -> None:
    targets = ScrapeTargets(dcgm="127.0.0.1:26600", service="127.0.0.1:21234", operator_token="t")
    config = json.loads(write_config(tmp_path, targets).read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert jobs["dcgm-exporter"]["honor_labels"] is True
    service = jobs["gpuaas-service"]
    assert service["metrics_path"] == "/services/gpuaas/metrics"
    assert service["authorization"] == {"credentials_file": str(tmp_path / "operator-token")}
    assert config["rule_files"] == [str(RULES_FILE)]

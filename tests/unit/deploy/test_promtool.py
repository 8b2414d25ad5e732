"""``promtool check rules`` on the shipped alert rules, and the devcluster's Prometheus config.

promtool comes with Prometheus (Debian's ``prometheus`` package, which ``make install``
installs as root, as on CI); on a machine without it these are skipped, saying so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from devcluster.prometheus import (
    RULES_FILE,
    PrometheusNotInstalled,
    ScrapeTargets,
    find_binary,
    write_config,
)


@pytest.fixture(scope="module")
def promtool() -> str:
    try:
        return find_binary("promtool")
    except PrometheusNotInstalled as e:
        if os.environ.get("CI"):  # make install installs it: on CI its absence is a failure
            pytest.fail(f"promtool is not installed ({e}); make install should have installed it")
        pytest.skip(f"promtool is not installed here ({e}); `make prometheus` installs it")


def test_promtool_accepts_the_shipped_alert_rules(promtool: str) -> None:
    out = subprocess.run(
        [promtool, "check", "rules", str(RULES_FILE)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 4 rules found" in out.stdout + out.stderr


def test_promtool_refuses_a_broken_rule(promtool: str, tmp_path: Path) -> None:
    broken = tmp_path / "rules.yaml"
    broken.write_text(RULES_FILE.read_text().replace("increase(", "increase((", 1))
    out = subprocess.run(
        [promtool, "check", "rules", str(broken)], capture_output=True, text=True, check=False
    )
    assert out.returncode != 0


def test_the_devcluster_prometheus_config_passes_promtool(promtool: str, tmp_path: Path) -> None:
    targets = ScrapeTargets(
        dcgm="127.0.0.1:9400", service="127.0.0.1:10101", operator_token="secret", interval=5
    )
    config = write_config(tmp_path, targets)
    out = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "operator-token").read_text() == "secret"
    assert "secret" not in config.read_text()

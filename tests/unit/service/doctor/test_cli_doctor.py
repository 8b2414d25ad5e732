"""``gpuaas-admin --doctor``: its lines, its JSON, its exit status, and the settings it takes
from the service's configuration file (the checks and the reads are faked here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuaas_service import cli
from gpuaas_service.doctor import Check, DoctorSettings

GOOD = [Check("hub", "ok", "JupyterHub 5.4 at http://hub")]
BAD = [*GOOD, Check("localqueue.team-a", "missing", "no LocalQueue users/team-a", "create it")]


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    out: dict[str, Any] = {"checks": GOOD}

    async def fake(settings: DoctorSettings, api: Any = None) -> list[Check]:
        out["settings"] = settings
        checks: list[Check] = out["checks"]
        return checks

    monkeypatch.setattr("gpuaas_service.doctor.run_doctor", fake)
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "secret-token")
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://hub:8081/hub/api")
    return out


def test_all_ok_exits_0(seen: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--doctor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["ok      hub: JupyterHub 5.4 at http://hub", "1 checks: all ok"]


def test_one_missing_exits_1_with_its_fix(
    seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    seen["checks"] = BAD
    assert cli.main(["--doctor"]) == 1
    out = capsys.readouterr().out
    assert "missing localqueue.team-a: no LocalQueue users/team-a -> fix: create it" in out
    assert out.endswith("2 checks: 1 not ok\n")


def test_json_is_one_object_per_check(
    seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    seen["checks"] = BAD
    assert cli.main(["--doctor", "--json"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[1] == {
        "name": "localqueue.team-a",
        "status": "missing",
        "detail": "no LocalQueue users/team-a",
        "fix": "create it",
    }


def test_settings_come_from_the_service_config(
    seen: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gpuaas_service_config.py"
    config.write_text(
        'c.GPUaaSService.notebook_namespace = "users"\n'
        'c.GPUaaSService.job_namespaces = ["team-a"]\n'
        'c.GPUaaSService.prometheus_url = "http://prom:9090"\n'
        'c.GPUaaSService.catalog_file = "/etc/catalog.yaml"\n'
    )
    argv = ["--doctor", "--config", str(config), "--as-service-account", "jupyterhub/gpuaas"]
    assert cli.main([*argv, "--policy", "p.yaml"]) == 0
    s: DoctorSettings = seen["settings"]
    assert (s.notebook_namespace, s.job_namespaces) == ("users", ("team-a",))
    assert (s.hub_api_url, s.hub_token) == ("http://hub:8081/hub/api", "secret-token")
    assert s.prometheus_url == "http://prom:9090"
    assert s.catalog_file == "/etc/catalog.yaml"
    assert s.policy_file == "p.yaml"  # the command line wins
    assert s.service_account == "jupyterhub/gpuaas"
    assert "history allocated" in (s.prometheus_queries or {})


def test_a_missing_config_file_is_a_clear_error(
    seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--doctor", "--config", "/nonexistent.py"]) == 2
    assert "not found" in capsys.readouterr().err


def test_service_account_needs_a_namespace(seen: dict[str, Any]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["--doctor", "--as-service-account", "gpuaas"])


def test_only_judges_the_named_checks(
    seen: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    seen["checks"] = BAD
    assert cli.main(["--doctor", "--only", "hub"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 checks: all ok"
    assert cli.main(["--doctor", "--only", "hub", "--only", "localqueue."]) == 1
    assert cli.main(["--doctor", "--only", "nothing"]) == 1
    assert "no check is named nothing" in capsys.readouterr().err

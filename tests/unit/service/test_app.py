"""gpuaas-service's configuration: traitlets options, the flags and variables of earlier releases,
the config file, and what the reclaim loop is given."""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from gpuaas_service.app import GPUaaSService
from gpuaas_service.clients.prometheus import DEFAULT_QUERY
from gpuaas_service.reclaim.loop import Settings

ENV_VARS = [
    "JUPYTERHUB_SERVICE_URL",
    "JUPYTERHUB_SERVICE_PREFIX",
    "JUPYTERHUB_API_URL",
    "GPUAAS_NOTEBOOK_NAMESPACE",
    "GPUAAS_JOB_NAMESPACES",
    "GPUAAS_QUEUE_POLL_INTERVAL",
    "GPUAAS_CULLER_POLICY",
    "GPUAAS_CULLER_INTERVAL",
    "GPUAAS_CULLER_DRY_RUN",
    "GPUAAS_CULLER_PROMETHEUS_URL",
    "GPUAAS_CULLER_PROMETHEUS_QUERY",
    "GPUAAS_CULLER_SAVE_LEAD",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no gpuaas_service_config.py of the caller's


def app(*argv: str) -> GPUaaSService:
    a = GPUaaSService()
    a.initialize(list(argv))
    return a


def test_defaults_are_product_defaults_not_the_demos() -> None:
    a = app()
    assert a.job_namespaces == []  # the demo's team-a,team-b are set by the demo
    assert a.notebook_namespace == "jupyter-users"
    assert a.url == "http://127.0.0.1:10101"
    assert a.prefix == "/services/gpuaas/"
    assert a.hub_api_url == "http://127.0.0.1:8081/hub/api"
    assert a.poll_interval == 2.0
    assert a.policy == ""
    assert a.culler_dry_run is False
    assert a.prometheus_url == ""
    assert a.prometheus_query == DEFAULT_QUERY
    assert a.log_level == "INFO"
    # the loop's own defaults, one number each
    loop = Settings()
    assert (a.culler_interval, a.culler_max_backoff, a.save_lead, a.hub_concurrency) == (
        loop.interval,
        loop.max_backoff,
        loop.save_lead,
        loop.hub_concurrency,
    )


# (earlier flag, --GPUaaSService spelling, environment variable, value given, trait, value read)
OPTIONS: list[tuple[str, str, str | None, str, str, Any]] = [
    ("--url", "url", "JUPYTERHUB_SERVICE_URL", "http://0.0.0.0:9", "url", "http://0.0.0.0:9"),
    ("--prefix", "prefix", "JUPYTERHUB_SERVICE_PREFIX", "/services/x/", "prefix", "/services/x/"),
    (
        "--notebook-namespace",
        "notebook_namespace",
        "GPUAAS_NOTEBOOK_NAMESPACE",
        "users",
        "notebook_namespace",
        "users",
    ),
    (
        "--job-namespaces",
        "job_namespaces",
        "GPUAAS_JOB_NAMESPACES",
        "team-a, team-b",
        "job_namespaces",
        ["team-a", "team-b"],
    ),
    (
        "--poll-interval",
        "poll_interval",
        "GPUAAS_QUEUE_POLL_INTERVAL",
        "5",
        "poll_interval",
        5.0,
    ),
    ("--policy", "policy", "GPUAAS_CULLER_POLICY", "/p.yaml", "policy", "/p.yaml"),
    (
        "--culler-interval",
        "culler_interval",
        "GPUAAS_CULLER_INTERVAL",
        "7",
        "culler_interval",
        7.0,
    ),
    (
        "--prometheus-url",
        "prometheus_url",
        "GPUAAS_CULLER_PROMETHEUS_URL",
        "http://prom:9090",
        "prometheus_url",
        "http://prom:9090",
    ),
    (
        "--prometheus-query",
        "prometheus_query",
        "GPUAAS_CULLER_PROMETHEUS_QUERY",
        "up",
        "prometheus_query",
        "up",
    ),
    ("--save-lead", "save_lead", "GPUAAS_CULLER_SAVE_LEAD", "40", "save_lead", 40.0),
    ("--log-level", "log_level", None, "DEBUG", "log_level", logging.DEBUG),
]


@pytest.mark.parametrize(("flag", "option", "env", "given", "trait", "read"), OPTIONS)
def test_each_option_by_its_earlier_flag_its_new_name_and_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
    flag: str,
    option: str,
    env: str | None,
    given: str,
    trait: str,
    read: Any,
) -> None:
    section = "Application" if option == "log_level" else "GPUaaSService"
    assert getattr(app(f"{flag}={given}"), trait) == read
    assert getattr(app(flag, given), trait) == read  # argparse's "--flag value" too
    assert getattr(app(f"--{section}.{option}={given}"), trait) == read
    if env is not None:
        monkeypatch.setenv(env, given)
        assert getattr(app(), trait) == read


def test_dry_run_by_flag_and_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert app("--culler-dry-run").culler_dry_run is True
    assert app("--GPUaaSService.culler_dry_run=True").culler_dry_run is True
    for value, expected in [("1", True), ("yes", True), ("true", True), ("0", False), ("", False)]:
        monkeypatch.setenv("GPUAAS_CULLER_DRY_RUN", value)
        assert app().culler_dry_run is expected, value


def test_job_namespaces_repeated_or_comma_separated() -> None:
    a = app("--GPUaaSService.job_namespaces=team-a", "--GPUaaSService.job_namespaces=team-b")
    assert a.job_namespaces == ["team-a", "team-b"]
    assert app("--job-namespaces=team-a,,team-b,team-a").job_namespaces == ["team-a", "team-b"]


CONFIG = """
c.GPUaaSService.job_namespaces = ["ml", "research"]
c.GPUaaSService.culler_max_backoff = 600
c.GPUaaSService.hub_concurrency = 3
c.GPUaaSService.culler_interval = 45
"""


def test_a_config_file_takes_effect_below_the_command_line_above_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "elsewhere" / "my_config.py"
    path.parent.mkdir()
    path.write_text(CONFIG)
    monkeypatch.setenv("GPUAAS_CULLER_INTERVAL", "99")
    monkeypatch.setenv("GPUAAS_CULLER_SAVE_LEAD", "33")
    a = app("-f", str(path), "--GPUaaSService.hub_concurrency=5")
    assert a.job_namespaces == ["ml", "research"]
    assert a.culler_max_backoff == 600
    assert a.hub_concurrency == 5  # the flag wins over the file
    assert a.culler_interval == 45  # the file wins over the variable
    assert a.save_lead == 33  # the variable where the file says nothing
    assert app(f"--config={path}").culler_max_backoff == 600


def test_the_default_config_file_is_read_from_the_working_directory(tmp_path: Path) -> None:
    assert app().culler_max_backoff == Settings().max_backoff  # none there: skipped
    (tmp_path / "gpuaas_service_config.py").write_text(CONFIG)
    assert app().culler_max_backoff == 600


def test_a_config_file_named_but_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraitError, match=r"nope\.py not found"):
        app("-f", str(tmp_path / "nope.py"))


def test_a_bad_environment_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_CULLER_INTERVAL", "soon")
    with pytest.raises(TraitError, match="GPUAAS_CULLER_INTERVAL='soon'"):
        app()


def test_a_value_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):  # traitlets says why and exits
        app("--GPUaaSService.hub_concurrency=0")
    assert "should not be less than 1" in capsys.readouterr().err


def test_the_loop_gets_plain_frozen_settings() -> None:
    a = app(
        "--job-namespaces=team-a",
        "--GPUaaSService.culler_max_backoff=120",
        "--GPUaaSService.hub_concurrency=2",
        "--culler-interval=5",
        "--save-lead=9",
        "--culler-dry-run",
        "--notebook-namespace=users",
    )
    s = a.loop_settings()
    assert s == Settings(
        notebook_namespace="users",
        job_namespaces=("team-a",),
        interval=5,
        max_backoff=120,
        save_lead=9,
        dry_run=True,
        hub_concurrency=2,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.interval = 1  # type: ignore[misc]


def test_every_option_says_its_default_and_gives_an_example() -> None:
    for name, trait in GPUaaSService.class_own_traits(config=True).items():
        assert "Default" in trait.help, name
        assert "Example: " in trait.help, name
        if name != "config_file":
            assert f"c.GPUaaSService.{name} = " in trait.help, name


def _script() -> list[str]:
    script = Path(sys.executable).with_name("gpuaas-service")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpuaas_service.app"]


def test_help_all_lists_every_option_with_its_example(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    out = subprocess.run(
        [*_script(), "--help-all"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
        check=True,
    ).stdout
    for name in GPUaaSService.class_own_traits(config=True):
        assert f"--GPUaaSService.{name}=" in out, name
    for alias in GPUaaSService.aliases:
        assert (f"--{alias}" if len(alias) > 1 else f"-{alias}") in out, alias
    assert "--culler-dry-run" in out
    bad = subprocess.run(
        [*_script(), "-f", str(tmp_path / "missing.py")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert bad.returncode != 0
    assert "missing.py not found" in bad.stderr
    assert "Traceback" not in bad.stderr

"""gpuaas-service's configuration: traitlets options, the few environment variables it reads (the
hub's for a managed service, the operator token), the config file, and what the reclaim loop is
given."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from traitlets import TraitError

from gpuaas_service.app import GPUaaSService, _tick_until
from gpuaas_service.clients.prometheus import DEFAULT_QUERY
from gpuaas_service.reclaim.loop import Settings
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.jobs_samples import jobs_catalog_data

ENV_VARS = [
    "JUPYTERHUB_SERVICE_URL",
    "JUPYTERHUB_SERVICE_PREFIX",
    "JUPYTERHUB_API_URL",
    "GPUAAS_OPERATOR_TOKEN",
    # never read (the project was never released with them); cleared so a test sees that
    "GPUAAS_NOTEBOOK_NAMESPACE",
    "GPUAAS_JOB_NAMESPACES",
    "GPUAAS_QUEUE_POLL_INTERVAL",
    "GPUAAS_CULLER_POLICY",
    "GPUAAS_CULLER_INTERVAL",
    "GPUAAS_CULLER_DRY_RUN",
    "GPUAAS_CULLER_PROMETHEUS_URL",
    "GPUAAS_CULLER_PROMETHEUS_QUERY",
    "GPUAAS_CULLER_SAVE_LEAD",
    "GPUAAS_CATALOG_FILE",
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


# (--GPUaaSService spelling, the environment variable its default comes from, given, read)
OPTIONS: list[tuple[str, str | None, str, Any]] = [
    ("url", "JUPYTERHUB_SERVICE_URL", "http://0.0.0.0:9", "http://0.0.0.0:9"),
    ("prefix", "JUPYTERHUB_SERVICE_PREFIX", "/services/x/", "/services/x/"),
    ("hub_api_url", "JUPYTERHUB_API_URL", "http://hub:8081/hub/api", "http://hub:8081/hub/api"),
    ("operator_token", "GPUAAS_OPERATOR_TOKEN", "op-secret", "op-secret"),
    ("notebook_namespace", None, "users", "users"),
    ("poll_interval", None, "5", 5.0),
    ("policy", None, "/p.yaml", "/p.yaml"),
    ("culler_interval", None, "7", 7.0),
    ("culler_dry_run", None, "True", True),
    ("prometheus_url", None, "http://prom:9090", "http://prom:9090"),
    ("prometheus_query", None, "up", "up"),
    ("save_lead", None, "40", 40.0),
    ("catalog_file", None, "/c.yaml", "/c.yaml"),
]


@pytest.mark.parametrize(("option", "env", "given", "read"), OPTIONS)
def test_each_option_by_its_name_and_where_the_hub_sets_it_its_environment_variable(
    monkeypatch: pytest.MonkeyPatch, option: str, env: str | None, given: str, read: Any
) -> None:
    assert getattr(app(f"--GPUaaSService.{option}={given}"), option) == read
    if env is not None:
        monkeypatch.setenv(env, given)
        assert getattr(app(), option) == read


def test_the_log_level_has_its_short_flag() -> None:
    assert app("--log-level=DEBUG").log_level == logging.DEBUG
    assert app("--Application.log_level=DEBUG").log_level == logging.DEBUG


@pytest.mark.parametrize(
    ("flag", "option"),
    [
        ("--policy=/p.yaml", "policy"),
        ("--culler-interval=7", "culler_interval"),
        ("--job-namespaces=team-a", "job_namespaces"),
        ("--culler-dry-run", "culler_dry_run"),
    ],
)
def test_no_short_flag_but_the_config_file_and_the_log_level(
    flag: str, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        a = app(flag)
    except SystemExit:  # traitlets' argparse: "unrecognized arguments"
        assert "unrecognized arguments" in capsys.readouterr().err
        return
    assert getattr(a, option) == GPUaaSService.class_traits()[option].default()
    assert "Unrecognized alias" in capsys.readouterr().err  # traitlets: "it will have no effect"


def test_no_other_environment_variable_sets_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS[4:]:
        monkeypatch.setenv(name, "7")
    a = app()
    assert (a.policy, a.notebook_namespace, a.job_namespaces, a.catalog_file) == (
        "",
        "jupyter-users",
        [],
        "",
    )
    assert (a.culler_interval, a.save_lead, a.poll_interval) == (
        Settings().interval,
        Settings().save_lead,
        2.0,
    )
    assert a.culler_dry_run is False


def test_job_namespaces_by_repeating_the_option() -> None:
    a = app("--GPUaaSService.job_namespaces=team-a", "--GPUaaSService.job_namespaces=team-b")
    assert a.job_namespaces == ["team-a", "team-b"]


CONFIG = """
c.GPUaaSService.job_namespaces = ["ml", "research"]
c.GPUaaSService.culler_max_backoff = 600
c.GPUaaSService.hub_concurrency = 3
c.GPUaaSService.culler_interval = 45
"""


def test_a_config_file_takes_effect_below_the_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "elsewhere" / "my_config.py"
    path.parent.mkdir()
    path.write_text(CONFIG)
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/services/hubs/")
    a = app("-f", str(path), "--GPUaaSService.hub_concurrency=5")
    assert a.job_namespaces == ["ml", "research"]
    assert a.culler_max_backoff == 600
    assert a.hub_concurrency == 5  # the flag wins over the file
    assert a.culler_interval == 45  # the file's
    assert a.save_lead == Settings().save_lead  # the default where the file says nothing
    assert a.prefix == "/services/hubs/"  # the hub's variable where the file says nothing
    assert app(f"--config={path}").culler_max_backoff == 600


def test_the_default_config_file_is_read_from_the_working_directory(tmp_path: Path) -> None:
    assert app().culler_max_backoff == Settings().max_backoff  # none there: skipped
    (tmp_path / "gpuaas_service_config.py").write_text(CONFIG)
    assert app().culler_max_backoff == 600


def test_a_config_file_named_but_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TraitError, match=r"nope\.py not found"):
        app("-f", str(tmp_path / "nope.py"))


def test_a_value_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):  # traitlets says why and exits
        app("--GPUaaSService.hub_concurrency=0")
    assert "should not be less than 1" in capsys.readouterr().err


def test_the_loop_gets_plain_frozen_settings() -> None:
    a = app(
        "--GPUaaSService.job_namespaces=team-a",
        "--GPUaaSService.culler_max_backoff=120",
        "--GPUaaSService.hub_concurrency=2",
        "--GPUaaSService.culler_interval=5",
        "--GPUaaSService.save_lead=9",
        "--GPUaaSService.culler_dry_run=True",
        "--GPUaaSService.notebook_namespace=users",
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
    assert "--culler-dry-run" not in out
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


class _ListedPods:
    """The notebook pods' watch, listed (what the loop's ``pods`` feed reads)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.resources = {"jupyter-alice": {"metadata": {"name": "jupyter-alice"}}}
        self.first_load_future: asyncio.Future[Any] = loop.create_future()
        self.first_load_future.set_result(None)


async def test_the_loop_is_built_with_its_feeds_and_the_teams_names_in_its_settings(
    tmp_path: Path,
) -> None:
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(yaml.safe_dump(jobs_catalog_data()))
    a = app(
        f"--GPUaaSService.catalog_file={catalog}",
        "--GPUaaSService.job_namespaces=team-a",
        "--GPUaaSService.notebook_namespace=users",
    )
    loop = a._reclaim_loop(
        cast(Any, StaticKueueView()), cast(Any, _ListedPods(asyncio.get_running_loop())), None
    )
    assert loop.settings == dataclasses.replace(
        a.loop_settings(), team_names=loop.settings.team_names
    )
    assert loop.settings.team_names["team-b"] == "Team B"
    assert loop.feeds.pods is not None
    assert [p["metadata"]["name"] for p in loop.feeds.pods() or ()] == ["jupyter-alice"]
    assert loop.feeds.job_pods is not None  # a Jobs' namespace besides the notebooks'
    assert loop.feeds.utilization is None  # no prometheus_url
    assert loop.state.policies.policies == ()  # no policy file: reclaim is off


async def test_the_main_loop_ticks_until_a_stop_is_asked() -> None:
    # Each wait between two ticks ends in asyncio's TimeoutError, which on Python 3.10 is not the
    # builtin one: caught as the builtin, the service exited at the first.
    stop = asyncio.Event()
    ticks = 0

    def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 3:
            stop.set()

    await asyncio.wait_for(_tick_until(stop, tick, 0.001), 5)
    assert ticks == 3
    await _tick_until(stop, tick, 5)  # already asked: no tick, no wait
    assert ticks == 3

"""Fixtures of the browser tests: a real JupyterLab with simulated GPUs, and headless Chromium.

The server is a real ``jupyter lab`` process (with this checkout's server extension and
prebuilt labextension), its kernels are real ipykernel processes, and the browser is Debian's
Chromium driven by Playwright. Everything listens on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devcluster.chromium import CHROMIUM, CHROMIUM_ARGS
from devcluster.hub import free_port

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION = REPO / "jupyter_gpuaas" / "labextension"
# The panel's default refresh interval (labextension/schema/plugin.json), in seconds.
REFRESH_S = 2.0
# The server's sample cache (GPUaaS.sample_ttl) in these tests, in seconds.
SAMPLE_TTL_S = 0.5
# Simulated GPUs: two H100 80GB, the second time-shared with 6 GiB used by other pods, and an
# A100 40GB split into seven 1g.5gb MIG devices.
SIMULATED_DEVICES = "1xH100-80GB,1xH100-80GB:other=6GiB,1xA100-40GB:mig=7x1g.5gb"
SIMULATED_SHARED = ["1"]
SERVER_START_TIMEOUT_S = 90.0
# JupyterLab's page loads its extensions' bundles: on a loaded two-core machine, well over
# Playwright's default 30 s.
PAGE_LOAD_TIMEOUT_MS = 90_000


@dataclass
class Lab:
    """A running JupyterLab server."""

    url: str  # base URL, ending in "/"
    token: str
    root: Path
    sim_dir: Path
    log: Path
    process: subprocess.Popen[bytes]

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the server's REST API with the token; return the decoded JSON (or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path.lstrip("/"),
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def _wait_until_ready(lab: Lab) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if lab.process.poll() is not None:
            pytest.fail(
                f"jupyter lab exited with {lab.process.returncode} while starting:\n"
                + lab.log_tail()
            )
        try:
            usage = lab.api("GET", "gpuaas/api/usage", timeout=5)
        except (urllib.error.URLError, ConnectionError, TimeoutError) as err:
            last_error = err
            time.sleep(0.25)
            continue
        if usage.get("source") == "nvml":
            pytest.fail(f"the server extension reads a real driver, not simulated GPUs: {usage}")
        return
    pytest.fail(
        f"jupyter lab did not answer gpuaas/api/usage within {SERVER_START_TIMEOUT_S:.0f} s "
        f"({last_error}):\n" + lab.log_tail()
    )


@pytest.fixture(scope="module")
def lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A real JupyterLab with simulated GPUs, its own config, data and settings dirs.

    A test module can set ``GPUAAS_CONFIG`` (a dict of ``GPUaaS`` traits) to change the
    simulated GPUs from the defaults above.
    """
    with start_lab(
        tmp_path_factory.mktemp("lab"), getattr(request.module, "GPUAAS_CONFIG", {})
    ) as server:
        yield server


@contextmanager
def start_lab(
    base: Path,
    gpuaas_config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[Lab]:
    """Run ``jupyter lab`` (as the ``lab`` fixture does) under ``base``; stop it at the end.

    ``gpuaas_config``: ``GPUaaS`` traits over the defaults above; ``env``: more environment
    variables for the server (e.g. ``JUPYTERHUB_API_TOKEN``, ``GPUAAS_SERVICE_URL``).
    """
    if not (LABEXTENSION / "package.json").is_file():
        pytest.fail(
            f"{LABEXTENSION} is missing: build the labextension first "
            "(`npm ci && npm run build:prod`, as `make install` does)"
        )
    root = base / "root"
    config = base / "config"
    sim_dir = base / "sim"
    settings = base / "settings"
    labextensions = base / "labextensions"
    for directory in (root, config, sim_dir, settings, labextensions):
        directory.mkdir(parents=True, exist_ok=True)

    # This checkout's labextension comes first, whatever else is installed.
    (labextensions / "jupyter-gpuaas").symlink_to(LABEXTENSION, target_is_directory=True)
    _write_json(
        config / "jupyter_server_config.json",
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_gpuaas": True}},
            "GPUaaS": {
                "sample_ttl": SAMPLE_TTL_S,
                "simulated_devices": SIMULATED_DEVICES,
                "simulated_shared": SIMULATED_SHARED,
                **(gpuaas_config or {}),
            },
            "LabApp": {
                "extra_labextensions_path": [str(labextensions)],
                # window.jupyterapp, so that tests can run JupyterLab's own commands.
                "expose_app_in_browser": True,
            },
        },
    )
    # No "get notified about Jupyter news?" toast, no request for news.
    _write_json(
        config / "labconfig" / "page_config.json",
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}},
    )
    _write_json(
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False},
    )

    token = secrets.token_hex(16)
    port = free_port()
    environment = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_DATA_DIR": str(base / "data"),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "IPYTHONDIR": str(base / "ipython"),
        "JUPYTER_GPUAAS_SIM_DIR": str(sim_dir),
        # The kernels import this checkout's jupyter_gpuaas, installed or not.
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
        ),
        "PYTHONUNBUFFERED": "1",
    }
    environment.pop("JUPYTER_TOKEN", None)
    environment.update(env or {})
    log = base / "jupyter-lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        "--ServerApp.ip=127.0.0.1",
        f"--port={port}",
        "--port-retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--GPUaaS.gpu_source=simulated",
    ]
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command, cwd=root, env=environment, stdout=log_file, stderr=subprocess.STDOUT
        )
    server = Lab(
        url=f"http://127.0.0.1:{port}/",
        token=token,
        root=root,
        sim_dir=sim_dir,
        log=log,
        process=process,
    )
    try:
        _wait_until_ready(server)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # jupyter stops and shuts its kernels down
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright."""
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"no Chromium at {CHROMIUM}: install it with `make chromium` (apt-get)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield chromium
        finally:
            chromium.close()


@contextmanager
def lab_page(browser: Any, lab: Lab) -> Iterator[Any]:
    """A JupyterLab page of ``lab``, loaded and logged in with the token, in a context of its
    own; fails at the end if the page had uncaught errors."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{lab.url}lab?token={lab.token}", timeout=PAGE_LOAD_TIMEOUT_MS)
    page.wait_for_selector("#jp-main-dock-panel", timeout=PAGE_LOAD_TIMEOUT_MS)
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    yield page
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


@pytest.fixture(scope="module")
def page(browser: Any, lab: Lab) -> Iterator[Any]:
    """A JupyterLab page, loaded and logged in with the token."""
    with lab_page(browser, lab) as page:
        yield page

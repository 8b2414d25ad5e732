"""The reclaim warning wherever the user is in a real JupyterLab (headless Chromium), with the
GPU panel closed: JupyterLab's notification with "Keep my GPU" and "Save now", updated rather
than repeated; the mark on the GPU tab and in the page title; the browser's own notification
while the tab is in the background; and, once the server is stopped after the deadline, what
the old tab says.

The server extension asks a small stand-in for the gpuaas hub service's server endpoints
(``api/reclaim``, ``api/reclaim/snooze``, ``api/reclaim/standing``, ``api/activity``,
``api/queue``), started by this module on 127.0.0.1, which answers as the service does
(culler/gpuaas_service/web/reclaim.py) with a warning the test sets. The same flows against the
real hub, Kueue and culler are in tests/real_hub/test_culler_browser.py. The page config names a hub
prefix, as JupyterHub's singleuser server does, so that the stopped tab links to the hub's home.
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import Lab, lab_page, start_lab
from tests.support.lab_page import (
    PANEL,
    PANEL_TAB,
    expect,
    open_panel,
    run_until_printed,
    shut_down_and_close,
    write_notebook,
)

pytestmark = pytest.mark.e2e

TOAST = ".Toastify__toast"
# The banner polls every 5 s; slack for a loaded two-core machine.
POLL_MS = 15_000


def _iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FakeService:
    """Answers the server's requests as the gpuaas service would, for one server's token."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.warning: dict[str, Any] | None = None
        self.snoozes = 0
        self.reclaim_requests = 0
        self.lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if self.headers.get("Authorization") == f"token {service.token}":
                    return True
                self._answer(403, {"message": "not this server's token"})
                return False

            def do_GET(self) -> None:
                if self._authorised():
                    self._answer(200, service.get(self.path))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                if self._authorised():
                    self._answer(*service.post(self.path))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def warn(self, seconds: float, snoozes_left: int = 1) -> None:
        """A warning with its deadline ``seconds`` from now, for the team's own queued Job."""
        now = datetime.now(timezone.utc)
        with self.lock:
            self.warning = {
                "warned_at": _iso(now),
                "reclaim_at": _iso(now + timedelta(seconds=seconds)),
                "reason": "queued team-a/train needs what it holds (nvidia.com/mig-1g.5gb)",
                "snoozes_left": snoozes_left,
                "dry_run": False,
                "cause": {
                    "code": "demand",
                    "kind": "mig",
                    "idle_seconds": 600,
                    "limit_seconds": None,
                    "for": {"team": "own", "name": "train", "object": "Job"},
                },
            }

    def get(self, path: str) -> dict[str, Any]:
        now = datetime.now(timezone.utc)
        if path.endswith("api/reclaim"):
            with self.lock:
                self.reclaim_requests += 1
                w = None if self.warning is None else dict(self.warning)
            if w is not None:
                at = datetime.fromisoformat(w["reclaim_at"].replace("Z", "+00:00"))
                w["seconds_left"] = max(0, int((at - now).total_seconds()))
                w["saving"] = now >= at - timedelta(seconds=2)
            return {"server": "", "now": _iso(now), "warning": w}
        if path.endswith("api/reclaim/standing"):
            return {"known": False, "now": _iso(now), "reclaim_on": True}
        if path.endswith("api/queue"):
            return {
                "user": "alice",
                "generated_at": _iso(now),
                "synced": True,
                "items": [],
                "teams": [],
            }
        return {}

    def post(self, path: str) -> tuple[int, dict[str, Any]]:
        now = datetime.now(timezone.utc)
        if path.endswith("api/reclaim/snooze"):
            with self.lock:
                if self.warning is None or self.warning["snoozes_left"] < 1:
                    return 409, {"allowed": False, "reason": "no snoozes left", "until": None}
                self.snoozes += 1
                left = self.warning["snoozes_left"] - 1
                self.warning = None
            until = _iso(now + timedelta(minutes=15))
            return 200, {"allowed": True, "reason": "kept", "until": until, "snoozes_left": left}
        return 200, {"accepted": True, "received_at": _iso(now)}


@contextmanager
def _fake_service() -> Iterator[FakeService]:
    fake = FakeService(secrets.token_hex(16))
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


@pytest.fixture(scope="module")
def service() -> Iterator[FakeService]:
    with _fake_service() as fake:
        yield fake


def _hub_page_config(base: Path) -> Path:
    """A config dir whose page config says, as JupyterHub's singleuser server does, where
    the hub is."""
    config = base / "hub-page-config"
    (config / "labconfig").mkdir(parents=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"hubPrefix": "/hub/", "hubHost": "", "hubUser": "alice"})
    )
    return config


@contextmanager
def _reclaim_lab(base: Path, service: FakeService) -> Iterator[Lab]:
    """A JupyterLab on a MIG slice that asks ``service``, with a hub prefix."""
    env = {
        "JUPYTERHUB_API_TOKEN": service.token,
        "GPUAAS_SERVICE_URL": service.url,
        "JUPYTER_CONFIG_PATH": str(_hub_page_config(base)),
    }
    config = {"simulated_devices": "1xA100-40GB:mig=7x1g.5gb", "simulated_shared": []}
    with start_lab(base, config, env=env) as server:
        yield server


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, service: FakeService) -> Iterator[Lab]:
    with _reclaim_lab(tmp_path_factory.mktemp("lab-reclaim"), service) as server:
        yield server


@pytest.fixture
def service_to_stop() -> Iterator[FakeService]:
    """The service of the server that the test stops: its warnings reach no other page."""
    with _fake_service() as fake:
        yield fake


@pytest.fixture
def server_to_stop(tmp_path: Path, service_to_stop: FakeService) -> Iterator[Lab]:
    """A server of its own for the test that stops it, so that the module's goes on whatever
    the order of the tests."""
    with _reclaim_lab(tmp_path, service_to_stop) as server:
        yield server


def has_class(name: str) -> re.Pattern[str]:
    """One class among an element's classes, for Playwright's ``to_have_class``."""
    return re.compile(rf"(^|\s){re.escape(name)}(\s|$)")


def _warning_toasts(page: Any) -> Any:
    return page.locator(TOAST, has_text="will be freed at")


def test_the_warning_reaches_the_user_with_the_panel_closed(
    page: Any, service: FakeService
) -> None:
    # The tab is in the background: the browser's own notification is the way to reach the
    # user there (recorded here in place of the desktop's; permission already granted).
    page.evaluate(
        """() => {
        window.__shown = [];
        window.Notification = class {
            static permission = 'granted';
            static requestPermission() { return Promise.resolve('granted'); }
            constructor(title, options) { window.__shown.push({ title, ...options }); }
        };
        document.hasFocus = () => false;
    }"""
    )
    expect()(page.locator(PANEL)).to_be_hidden()
    service.warn(seconds=245)

    toast = _warning_toasts(page)
    expect()(toast).to_have_count(1, timeout=POLL_MS)
    expect()(toast).to_contain_text("This MIG slice will be freed at")
    expect()(toast).to_contain_text("for queued work")
    expect()(toast.get_by_role("button", name="Keep my GPU")).to_be_visible()
    expect()(toast.get_by_role("button", name="Save now")).to_be_visible()
    # The mark on the GPU tab and in the title, with the panel still closed.
    tab = page.locator(PANEL_TAB)
    expect()(tab).to_have_class(has_class("jp-gpuaas-tab-warned"))
    assert page.title().startswith("GPU freed in "), page.title()
    expect()(page.locator(PANEL)).to_be_hidden()
    shown = page.evaluate("() => window.__shown")
    assert len(shown) == 1, shown
    assert shown[0]["title"].startswith("Your GPU will be freed at"), shown

    # Polls go on (the panel is hidden): the same notification, not a second one.
    before = service.reclaim_requests
    page.wait_for_timeout(11_000)
    assert service.reclaim_requests >= before + 2, "the warning was not polled while hidden"
    expect()(toast).to_have_count(1)
    assert len(page.evaluate("() => window.__shown")) == 1
    # JupyterLab's title changes as tabs change; the mark stays in front.
    page.evaluate("() => { document.title = 'Launcher - JupyterLab'; }")
    page.wait_for_function("() => document.title.startsWith('GPU freed in ')")

    # "Save now" leaves the warning up.
    toast.get_by_role("button", name="Save now").click()
    expect()(toast).to_have_count(1)


def test_keep_my_gpu_from_the_notification(page: Any, service: FakeService) -> None:
    service.warn(seconds=245)  # the same warning again if the first test put it up
    toast = _warning_toasts(page)
    expect()(toast).to_have_count(1, timeout=POLL_MS)
    snoozes = service.snoozes
    toast.get_by_role("button", name="Keep my GPU").click()
    kept = page.locator(TOAST, has_text="Kept: this GPU stays until")
    expect()(kept).to_have_count(1, timeout=POLL_MS)
    expect()(kept).to_contain_text("That was the last keep.")
    assert service.snoozes == snoozes + 1
    expect()(_warning_toasts(page)).to_have_count(0)
    expect()(page.locator(PANEL_TAB)).not_to_have_class(has_class("jp-gpuaas-tab-warned"))
    page.wait_for_function("() => !document.title.startsWith('GPU freed')")


def test_the_panel_says_what_a_reclaim_would_keep_before_it_comes(
    lab: Lab, page: Any, service: FakeService
) -> None:
    """Before any warning, where reclaiming is on: the kernels' own estimate of their
    variables, in the banner's words, with what can never be kept named; then in the warning."""
    write_notebook(
        lab.root / "kept.ipynb",
        "import numpy as np\nx = np.ones(8 << 20)\nb = (i for i in [])\nprint('ready')",
    )
    opened = run_until_printed(page, "kept.ipynb", "ready")
    try:
        with service.lock:
            service.warning = None
        panel = open_panel(page)
        kept = panel.locator(".jp-gpuaas-reclaim-kept")
        expect()(kept).to_have_text(
            "A reclaim would keep 64 MiB of variables (about 1 s to save). "
            "Never kept: “b” (a generator).",
            timeout=POLL_MS * 2,
        )
        service.warn(seconds=600)
        warned = panel.locator(".jp-gpuaas-reclaim-warned .jp-gpuaas-reclaim-kept")
        expect()(warned).to_contain_text("A reclaim would keep 64 MiB", timeout=POLL_MS)
        # The warning is withdrawn: the notice names what the warning was about.
        with service.lock:
            service.warning = None
        over = page.locator(TOAST, has_text="The reclaim warning is over")
        expect()(over).to_have_text(
            "The reclaim warning is over: this MIG slice stays with this server.",
            timeout=POLL_MS,
        )
    finally:
        with service.lock:
            service.warning = None
        shut_down_and_close(page, opened["widgetId"])


def test_the_old_tab_after_the_stop(
    browser: Any, server_to_stop: Lab, service_to_stop: FakeService
) -> None:
    with lab_page(browser, server_to_stop) as page:
        _the_old_tab_after_the_stop(server_to_stop, page, service_to_stop)


def _the_old_tab_after_the_stop(lab: Lab, page: Any, service: FakeService) -> None:
    service.warn(seconds=8, snoozes_left=0)
    toast = _warning_toasts(page)
    expect()(toast).to_have_count(1, timeout=POLL_MS)
    expect()(toast.get_by_role("button", name="Keep my GPU")).to_have_count(0)
    page.wait_for_timeout(9_000)  # past the deadline
    # The service forgets the warning as it asks the hub to stop the server, which may answer
    # a little longer: that is the stop beginning, not the warning ending.
    with service.lock:
        service.warning = None
    before = service.reclaim_requests
    deadline = time.monotonic() + POLL_MS / 1000
    while service.reclaim_requests < before + 2:
        assert time.monotonic() < deadline, "the warning is no longer polled"
        page.wait_for_timeout(500)
    expect()(page.locator(TOAST, has_text="warning is over")).to_have_count(0)
    expect()(toast).to_have_count(1)
    # The server is stopped, as the hub stops it: nothing answers any more.
    lab.process.send_signal(signal.SIGTERM)
    lab.process.wait(timeout=30)

    stopped = page.locator(TOAST, has_text="Your server was stopped at about")
    expect()(stopped).to_have_count(1, timeout=POLL_MS * 2)
    expect()(stopped).to_contain_text(
        "to free this MIG slice for queued work. Your files are kept."
    )
    expect()(stopped.get_by_role("button", name="Start again")).to_be_visible()
    expect()(_warning_toasts(page)).to_have_count(0)
    expect()(page.locator(PANEL_TAB)).to_have_class(has_class("jp-gpuaas-tab-stopped"))
    page.wait_for_function("() => document.title.startsWith('Server stopped · ')")
    # The panel says it too, with the way back (read without opening it: JupyterLab's own
    # "server unavailable" dialog may cover the page).
    banner = page.locator(f"{PANEL} .jp-gpuaas-reclaim")
    text = banner.text_content() or ""
    assert "Your server was stopped" in text, text
    assert "Your files are kept" in text, text
    assert "in now" not in text, text
    assert "HTTP" not in text, text
    link = banner.locator("a.jp-gpuaas-reclaim-hub")
    expect()(link).to_have_attribute("href", "/hub/home")

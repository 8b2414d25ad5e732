"""The reclaim warning in JupyterLab (real hub, cluster, singleuser servers; Chromium): the banner
with its countdown, "Keep my GPU", and the save of open documents before the stop."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import (
    CullerHub,
    delete_jobs,
    eventually,
)
from tests.support.reclaim_browser import (
    PAIR,
    login_to_lab,
    open_gpu_panel,
    queue_job,
    told_on_return,
    type_unsaved,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def _saved_before_stop(hub: CullerHub) -> bool:
    """Whether carol's open document got its unsaved " second" within 60 s (until her
    server stops)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if "second" in hub.contents("carol", "notes.txt")["content"]:
                return True
        except OSError:
            return False  # already stopped
        time.sleep(0.5)
    return False


def _wait_stopped(hub: CullerHub, users: Sequence[str], timeout: float = 60) -> None:
    """Until none of ``users`` has a server, or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(hub.server(u) for u in users):
        time.sleep(1)


async def test_banner_countdown_keep_my_gpu_and_save_before_stop(
    reclaiming_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient, browser: Any
) -> None:
    hub = reclaiming_hub
    hub.start_all(PAIR)
    hub.contents("carol", "notes.txt", {"type": "file", "format": "text", "content": "first"})

    alice = await login_to_lab(browser, hub, "alice")
    await open_gpu_panel(alice, hub, "alice")
    carol = await login_to_lab(browser, hub, "carol")
    await type_unsaved(carol, hub, "carol", "notes.txt", " second")  # saved by the banner only

    # Round 1: the warning with its countdown; at the deadline open documents are saved.
    await queue_job(cluster, "train-browser-1")
    banner = alice.locator(".jp-gpuaas-reclaim")
    await banner.filter(has_text="will be freed at").wait_for(timeout=60_000)
    text = await banner.inner_text()
    assert "kernel" in text
    # This server keeps its kernels' state: the warning says so, and nothing of "lost".
    assert "saves its variables" in text, text
    assert "lost" not in text, text
    # and so does the notification, in the words of what the stop will do
    toast = alice.locator(".Toastify__toast", has_text="will be freed at")
    await toast.wait_for(timeout=30_000)
    said = await toast.inner_text()
    assert "Files stay; saved variables come back." in said, said
    assert "Keep my GPU" in text
    countdown = banner.locator(".jp-gpuaas-reclaim-countdown")
    first = int(await countdown.get_attribute("data-seconds-left") or "0")
    await alice.wait_for_timeout(2500)
    second = int(await countdown.get_attribute("data-seconds-left") or "0")
    assert 0 < second < first <= 20

    assert _saved_before_stop(hub), "carol's open document was not saved before the stop"
    _wait_stopped(hub, ("alice", "carol"))
    assert hub.server("alice") is None
    assert hub.server("carol") is None
    await told_on_return(alice, hub, "your team's queued work")
    await told_on_return(carol, hub, "queued work of Team A")

    async def handed_off() -> bool:
        return "gpuaas_handoff_latency_seconds_count 1.0" in hub.metrics()

    await eventually(handed_off, 60, "the Job's admission")
    await delete_jobs(cluster, k8s)

    # Round 2: new servers, a new Job; alice presses "Keep my GPU": nobody is stopped.
    hub.start_all(PAIR)
    assert hub.contents("carol", "notes.txt")["content"] == "first second"  # kept in her home
    await open_gpu_panel(alice, hub, "alice")
    await queue_job(cluster, "train-browser-2")
    await banner.filter(has_text="will be freed at").wait_for(timeout=60_000)
    await banner.locator(".jp-gpuaas-reclaim-keep").click()
    # The note that answers the press (not has_text="Kept": the warning's own reason ends in
    # "unless it is used or kept", which matches at once, before the press is answered).
    kept = banner.locator(".jp-gpuaas-reclaim-note", has_text=re.compile(r"^Kept"))
    await kept.wait_for(timeout=30_000)
    assert await banner.locator(".jp-gpuaas-reclaim-countdown").count() == 0
    await alice.wait_for_timeout(25_000)  # past the 20 s warning
    assert hub.server("alice") is not None
    assert hub.server("carol") is not None
    for user in ("alice", "carol"):
        hub.stop(user)
    await delete_jobs(cluster, k8s)

"""After a real reclaim, one prompt: the product's notice ("Your server was
stopped at about … [Start again]"), and not JupyterLab's own "Server unavailable or unreachable …
Would you like to restart it?" modal on top of it (real hub, cluster, singleuser servers;
Chromium, a notebook open with its kernel, as a user works)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import CullerHub, delete_jobs
from tests.support.reclaim_browser import PAIR, login_to_lab, open_gpu_panel, queue_job

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

TOAST = ".Toastify__toast"
JUPYTERLAB_MODAL = "Server unavailable or unreachable"


async def test_after_a_reclaim_the_products_notice_is_the_one_prompt(
    reclaiming_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient, browser: Any
) -> None:
    hub = reclaiming_hub
    hub.start_all(PAIR)
    kernel = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb = {"cells": [], "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5}
    hub.contents("alice", "work.ipynb", {"type": "notebook", "content": nb})
    alice = await login_to_lab(browser, hub, "alice")
    await open_gpu_panel(alice, hub, "alice")
    await alice.goto(f"{hub.url}/user/alice/lab/tree/work.ipynb")
    await alice.locator(".jp-Notebook").wait_for(timeout=90_000)
    await alice.wait_for_timeout(5000)  # its kernel started, its websocket open

    await queue_job(cluster, "train-one-prompt")
    warning = alice.locator(TOAST, has_text="will be freed")
    await warning.wait_for(timeout=60_000)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and hub.server("alice"):
        time.sleep(1)
    assert hub.server("alice") is None, "alice's server was not reclaimed"

    stopped = alice.locator(TOAST, has_text="Your server was stopped at about")
    await stopped.wait_for(timeout=30_000)
    assert await stopped.get_by_role("button", name="Start again").is_visible()
    # JupyterLab notices the lost server on its own polls (kernels, sessions, every 10 s and
    # more): past two of them, its modal never came.
    modal = alice.locator(".jp-Dialog", has_text=JUPYTERLAB_MODAL)
    for _ in range(25):
        assert await modal.count() == 0, await alice.locator(".jp-Dialog").inner_text()
        await alice.wait_for_timeout(1000)
    dialogs = alice.locator(".jp-Dialog")
    assert await dialogs.count() == 0, await dialogs.all_inner_texts()
    assert await stopped.is_visible()
    # The GPU sidebar says it once (its stop notice), not also in each section that asked the
    # stopped server since ("Could not load your GPU jobs: your server is not running", within
    # the 25 s above, before the sections kept quiet about it)
    sidebar = await alice.locator("#jupyter-gpuaas-panel").text_content() or ""
    assert "Your server was stopped" in sidebar, sidebar
    assert "not running" not in sidebar, sidebar
    await delete_jobs(cluster, k8s)

"""A Job that Kueue's Topology Aware Scheduling holds back, as people see it in Chromium: the
sidebar's Queue section (alice's own JupyterLab, fed by the real gpuaas service) and the GPU
console (the hub's admin, through the hub's OAuth) both say it is waiting for a whole node.

On the dev cluster's pool h200 (three kwok nodes of 8 GPUs, flavor h200 with the Topology
gpu-racks: docs/deploy.md, *Topology Aware Scheduling*), three 5-GPU Jobs take a node each;
alice's 8-GPU Job asking for one node (``kueue.x-k8s.io/podset-required-topology:
kubernetes.io/hostname``) then has its quota but no node: the real Kueue v0.19.2 keeps it
pending with its TAS words, which the service reads (``topology_wait``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from devcluster.hub import DEMO_CATALOG
from devcluster.queue_hub import CONSOLE_SCOPE, QueueHub, queue_hub
from devcluster.testing import (
    Cluster,
    clear_jobs,
    create_job,
    spread_topology_pool,
    topology_job,
)
from tests.support.lab import Lab, start_lab
from tests.support.lab import browser as browser  # the fixtures of tests/e2e, reused
from tests.support.lab import page as page
from tests.support.lab_page import expect, open_panel, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

T = TypeVar("T")
SERVICE_SCOPE = "access:services!service=gpuaas"
QUEUE = ".jp-gpuaas-section-queue"
WAIT_MS = 60_000
"""Kueue's scheduling cycle, the service's watch and the page's refresh all lie in between."""
PASSWORD = "gpuaas-demo"  # devcluster/hub.py's default


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine in a thread of its own: Playwright's sync API holds this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="module")
def queue_hub_proc(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueueHub]:
    args = [f"--GPUaaSService.catalog_file={DEMO_CATALOG}"]
    with queue_hub(
        tmp_path_factory.mktemp("topology-hub"), cluster.info.settings.state_dir, service_args=args
    ) as qh:
        yield qh


@pytest.fixture(scope="module")
def lab(queue_hub_proc: QueueHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """alice's JupyterLab (the ``page`` fixture of tests/e2e opens this one)."""
    env = {
        "JUPYTERHUB_API_TOKEN": queue_hub_proc.user_token("alice", [SERVICE_SCOPE]),
        "GPUAAS_SERVICE_URL": queue_hub_proc.service_url,
    }
    with start_lab(tmp_path_factory.mktemp("lab"), env=env) as server:
        yield server


@pytest.fixture
def held_for_a_node(cluster: Cluster) -> Iterator[None]:
    """Every node of h200 holds a 5-GPU Job; alice's 8-GPU Job waits for a whole node."""
    run(clear_jobs(cluster))

    async def setup() -> None:
        async with cluster.api("team-a", "alice") as alice:
            await spread_topology_pool(alice)
            await create_job(alice, "team-a", topology_job("big", "alice"))

    run(setup())
    yield
    run(clear_jobs(cluster))


def test_a_job_held_for_a_whole_node_says_so_in_the_sidebar_and_the_console(
    queue_hub_proc: QueueHub, lab: Lab, page: Any, browser: Any, held_for_a_node: None
) -> None:
    # The sidebar: alice's Job, in the service's words.
    panel = open_panel(page)
    section = panel.locator(QUEUE)
    item = section.locator(".jp-gpuaas-queue-item", has_text="Job big")
    try:
        expect()(item.locator(".jp-gpuaas-queue-waiting-for")).to_have_text(
            "waiting for a whole node", timeout=WAIT_MS
        )
    except AssertionError as err:
        answer = lab.api("GET", "gpuaas/api/queue")
        raise AssertionError(f"{err}\nthe server extension answers: {answer}") from err
    # Kueue's own words stay for operators, out of sight
    assert 'topology "gpu-racks"' in (item.get_attribute("data-reason") or "")
    section.scroll_into_view_if_needed()
    screenshot(page, "sidebar-queue-whole-node.png")

    # The console, as the hub's admin: team A's queued work counts it.
    token = queue_hub_proc.user_token("admin", [CONSOLE_SCOPE, SERVICE_SCOPE])
    deadline = time.monotonic() + WAIT_MS / 1000
    queued: dict[str, Any] = {}
    while queued.get("waiting_for_a_whole_node") != 1:
        assert time.monotonic() < deadline, f"team A's queued work in the console: {queued}"
        time.sleep(0.5)
        answer = queue_hub_proc.request("/services/gpuaas/api/console", token)
        queued = next((t["queued"] for t in answer["teams"] if t["team"] == "team-a"), {})
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        console = context.new_page()
        console.goto(f"{queue_hub_proc.hub.url}/hub/login")
        console.fill("#username_input", "admin")
        console.fill("#password_input", PASSWORD)
        console.click("#login_submit")
        console.wait_for_url("**/hub/**")
        console.goto(f"{queue_hub_proc.hub.url}/services/gpuaas/console/")
        row = console.locator('#queued li[data-team="team-a"]')
        expect()(row).to_contain_text("1 waiting for a whole node", timeout=WAIT_MS)
    finally:
        context.close()

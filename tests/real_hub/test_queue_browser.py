"""The GPU sidebar's Queue section in Chromium, fed by the real gpuaas hub service.

A real JupyterHub with the ``gpuaas`` service on the dev cluster (devcluster/queue_hub.py) and a
real JupyterLab started directly (not spawned by the hub, tests/support/lab.py) with what a spawned
server gets (docs/queue.md): ``JUPYTERHUB_API_TOKEN`` (alice's token with the scope
``access:services!service=gpuaas``) and ``GPUAAS_SERVICE_URL`` (the service through the hub's
proxy). Team A's training quota is filled; alice submits three one-GPU Jobs and bob one. Alice's
Queue section lists exactly her three at positions 1-3, her team by its catalog name (never its
slug); when one GPU frees up and her first Job
is admitted, it shows the other two at positions 1 and 2. With the service down, the section says
so and the rest of the panel goes on.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from devcluster.hub import DEMO_CATALOG
from devcluster.queue_hub import QueueHub, queue_hub
from devcluster.testing import (
    Cluster,
    batch,
    clear_jobs,
    create_job,
    fill_training_quota,
    labelled_job,
    submit_in_order,
)
from tests.support.lab import Lab, start_lab
from tests.support.lab import browser as browser  # the fixtures of tests/e2e, reused
from tests.support.lab import page as page
from tests.support.lab_page import ONE_REFRESH_MS, USAGE_URL, expect, open_panel, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

T = TypeVar("T")
SERVICE_SCOPE = "access:services!service=gpuaas"
QUEUE = ".jp-gpuaas-section-queue"
# Bounded waits for a loaded two-core machine: Kueue admitting, the service's visibility poll
# (1 s here), the panel's refresh (2 s) and rendering all lie in between.
QUEUE_WAIT_MS = 60_000


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine in a thread of its own: Playwright's sync API holds this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@pytest.fixture(scope="module")
def queue_hub_proc(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[QueueHub]:
    # the demo catalog: the section names teams by their display names, never by slug
    args = [f"--GPUaaSService.catalog_file={DEMO_CATALOG}"]
    with queue_hub(
        tmp_path_factory.mktemp("queue-hub"), cluster.info.settings.state_dir, service_args=args
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
def clean_team_a(cluster: Cluster) -> Iterator[None]:
    run(clear_jobs(cluster))
    yield
    run(clear_jobs(cluster))


async def _fill_and_submit(cluster: Cluster) -> None:
    async with cluster.api("team-a", "alice") as alice, cluster.api("team-a", "bob") as bob:
        await fill_training_quota(alice)
        await submit_in_order(alice, "alice", ["a1", "a2", "a3"])
        await create_job(bob, "team-a", labelled_job("b1", "bob"))


async def _free_one_gpu(cluster: Cluster) -> None:
    async with cluster.api("team-a", "alice") as alice:
        await batch(alice).delete_namespaced_job(
            "fill-1", "team-a", propagation_policy="Background"
        )


def _rows(section: Any) -> list[tuple[str, str | None]]:
    """(name, data-position) of each row of the section's list, as shown."""
    items = section.locator(".jp-gpuaas-queue-item")
    return [
        (
            items.nth(i).locator(".jp-gpuaas-queue-name").inner_text(),
            items.nth(i).get_attribute("data-position"),
        )
        for i in range(items.count())
    ]


def _expect_queue(section: Any, lab: Lab, names: list[str]) -> None:
    """The section lists exactly ``names`` (Jobs), at positions 1, 2, ... in that order."""
    items = section.locator(".jp-gpuaas-queue-item")
    # its place in team A's training queue, the same in the cluster queue: said once, unnamed
    positions = [f"#{n} in the team's queue" for n in range(1, len(names) + 1)]
    try:
        expect()(items.locator(".jp-gpuaas-queue-name")).to_have_text(
            [f"Job {n}" for n in names], timeout=QUEUE_WAIT_MS
        )
        expect()(items.locator(".jp-gpuaas-queue-position")).to_have_text(
            positions, timeout=QUEUE_WAIT_MS
        )
    except AssertionError as err:
        answer = lab.api("GET", "gpuaas/api/queue")
        raise AssertionError(f"{err}\nthe server extension answers: {answer}") from err
    assert _rows(section) == [(f"Job {n}", str(i)) for i, n in enumerate(names, 1)]


def test_queue_section_shows_positions_and_follows_an_admission(
    cluster: Cluster, lab: Lab, page: Any, clean_team_a: None
) -> None:
    answer = lab.api("GET", "gpuaas/api/queue")
    assert answer["user"] == "alice", answer
    assert answer["error"] is None, answer
    panel = open_panel(page)
    section = panel.locator(QUEUE)
    expect()(section.locator("h3")).to_have_text("Queue")
    # Nothing of alice's is queued yet: the section says so (and names her team's figures).
    expect()(section.locator(".jp-gpuaas-queue-empty")).to_have_text(
        "Nothing queued.", timeout=QUEUE_WAIT_MS
    )
    expect()(section.locator(".jp-gpuaas-queue-item")).to_have_count(0)
    expect()(section.locator(".jp-gpuaas-queue-error")).to_have_count(0)
    team_a = section.locator('.jp-gpuaas-queue-team[data-team="team-a"]')
    expect()(team_a.locator(".jp-gpuaas-queue-team-name")).to_have_text("Team A")
    expect()(team_a).to_contain_text(re.compile(r"\d+ admitted · \d+ pending"))

    # Team A's training quota full; alice's three Jobs and bob's one wait.
    run(_fill_and_submit(cluster))
    _expect_queue(section, lab, ["a1", "a2", "a3"])
    expect()(section.locator(".jp-gpuaas-queue-empty")).to_have_count(0)
    expect()(section).not_to_contain_text("b1")  # bob's Job is not hers to see
    first = section.locator(".jp-gpuaas-queue-item").first
    # what it asked for and its team, in words: the Job has no offering; its team by name
    expect()(first.locator(".jp-gpuaas-meta")).to_contain_text(
        re.compile("^" + re.escape("1\N{MULTIPLICATION SIGN} GPU · Team A · waiting "))
    )
    expect()(section).not_to_contain_text("team-a")  # no slug anywhere in the section
    expect()(first).to_have_attribute("data-reason", re.compile("quota"))  # Kueue's, out of sight
    expect()(team_a).to_contain_text(re.compile(r"[1-9]\d* admitted · [1-9]\d* pending"))
    section.scroll_into_view_if_needed()
    screenshot(page, "sidebar-queue.png")

    # One GPU frees up: a1 is admitted, a2 and a3 move up.
    run(_free_one_gpu(cluster))
    started = time.monotonic()
    _expect_queue(section, lab, ["a2", "a3"])
    print(f"the Queue section moved up {time.monotonic() - started:.1f}s after the GPU was freed")


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_a_stopped_service_shows_a_note_and_the_panel_goes_on(
    queue_hub_proc: QueueHub, lab: Lab, page: Any
) -> None:
    panel = open_panel(page)
    section = panel.locator(QUEUE)
    expect()(section.locator(".jp-gpuaas-queue-error")).to_have_count(0, timeout=QUEUE_WAIT_MS)
    # The hub stops its managed service (and its proxy) with it.
    queue_hub_proc.hub.stop()
    deadline = time.monotonic() + 30
    while _listening(queue_hub_proc.service_port):
        assert time.monotonic() < deadline, "the gpuaas service still listens"
        time.sleep(0.2)

    note = section.locator(".jp-gpuaas-queue-error")
    expect()(note).to_contain_text("The queue cannot be reached right now", timeout=QUEUE_WAIT_MS)
    expect()(note).to_have_attribute("role", "status")
    assert lab.api("GET", "gpuaas/api/queue")["error_kind"] == "service_unavailable"
    # No list and no "Nothing queued": the section does not pretend to know.
    expect()(section.locator(".jp-gpuaas-queue-item")).to_have_count(0)
    expect()(section.locator(".jp-gpuaas-queue-empty")).to_have_count(0)

    # The rest of the panel goes on: usage is still polled, read and shown, with no error.
    with page.expect_response(USAGE_URL, timeout=ONE_REFRESH_MS) as response:
        pass
    assert response.value.ok
    expect()(panel.locator(".jp-gpuaas-source")).to_have_text("simulated")
    whole = panel.locator(".jp-gpuaas-devices > .jp-gpuaas-device:not(.jp-mod-mig)")
    expect()(whole).to_have_count(3)
    expect()(panel.locator(".jp-gpuaas-error-note")).to_be_hidden()

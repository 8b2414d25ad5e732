"""The GPU console's page (TypeScript, built by ``npm run build:console``) in Chromium against
the service's own web app over a simulated cycle: the first screen, every GPU with its holder
and node and what is free on each node, the filters, the compact team rows with a failed
start, quota rows with nothing in them folded (drawn when opened, kept open across answers), and
a team lead's page with their team alone.
(The same page with a real hub, Kueue and servers: tests/real_hub/test_console.py.)"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from devcluster.chromium import CHROMIUM, CHROMIUM_ARGS
from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from tests.support import service_samples as samples
from tests.support.console_page import seen
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.service_samples import NS, team_a_queues
from tests.support.service_world import MIG, World

BUILT = (
    Path(__file__).resolve().parents[2]
    / "culler/gpuaas_service/console/static/js/culler/gpuaas_service/console/src/main.js"
)


NODES: list[dict[str, Any]] = [
    {
        "metadata": {"name": f"gpu-node-{i}", "labels": {"gpuaas.dev/pool": "local"}},
        "status": {"allocatable": {"cpu": "32", "nvidia.com/mig-1g.5gb": "7"}},
    }
    for i in range(2)
]
NODES[0]["metadata"]["labels"] |= {  # an A100 in NVIDIA's mixed strategy: MIG advice
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig.config": "all-1g.5gb",  # what its seven 1g slices are
}
"""The pods' two nodes, of seven 1g slices each; the first labelled as GPU feature discovery
labels a MIG A100."""
STARTING = {
    "metadata": {
        "name": "jupyter-erin",
        "uid": "uid-erin",
        "labels": {"gpuaas.jupyter.org/team": "team-a"},
        "annotations": {"hub.jupyter.org/username": "erin"},
    },
    "spec": {"nodeName": "gpu-node-0"},
    "status": {"phase": "Pending"},
}


@dataclass
class Console:
    url: str
    tokens: dict[str, str]


@pytest.fixture
async def console() -> AsyncIterator[Console]:
    if not BUILT.is_file():
        pytest.fail(f"the console page is not built ({BUILT.name}): npm run build:console")
    world = World()
    # team A's notebook queue also has a whole-GPU quota that nothing uses: a folded row
    notebooks = {("local", MIG): 3, ("h100", "nvidia.com/gpu"): 2}
    world.view.state = team_a_queues(
        samples.cluster_queue("team-a-notebooks", notebooks, {("local", MIG): 3}),
        samples.cluster_queue("team-a-training", {("local", MIG): 0}, {("local", MIG): 0}),
    )
    for i, pod in enumerate(world.pods):
        pod.setdefault("spec", {})["nodeName"] = f"gpu-node-{i % 2}"
    starting = [STARTING]  # admitted, never Ready: gone at the next cycle (a failed start)
    state = ConsoleState(
        world.loop,
        world.view,
        notebook_namespace=NS,
        job_namespaces=["team-a"],
        regret_window=timedelta(hours=1),
        pods=lambda: [*world.pods, *starting],
        nodes=lambda: NODES,
        job_pods=list,
    )
    world.loop.listeners.append(state)
    await world.cycle()
    starting.clear()
    await world.cycle()
    hub = TokenHub()
    cast(Any, hub).base_url = "/services/gpuaas/"  # where HubOAuth's XSRF cookie is scoped
    context = ServiceContext(
        hub_auth=cast(Any, hub), console_auth=cast(Any, hub), loop=world.loop, console=state
    )
    tokens = {
        "operator": hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE]),
        "lead of team-b": hub.mint("leadb", ["custom:gpuaas:console!group=team-b", SERVICE_SCOPE]),
    }
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context))
    server.add_sockets([sock])
    yield Console(f"http://127.0.0.1:{sock.getsockname()[1]}/services/gpuaas/console/", tokens)
    server.stop()


async def open_page(playwright_browser: Any, console: Console, who: str) -> tuple[Any, list[str]]:
    """The page as ``who`` (their token on every request: the page, its modules, its API)."""
    context = await playwright_browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {console.tokens[who]}"},
        viewport={"width": 1400, "height": 1000},
    )
    page = await context.new_page()
    page.set_default_timeout(20_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(console.url)
    return page, errors


async def test_the_console_page_every_gpu_and_a_team_leads_view(console: Console) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page, errors = await open_page(chromium, console, "operator")
            await _every_gpu(page)
            await _team_a(page)
            await _fit(page)
            assert errors == []

            lead, errors = await open_page(chromium, console, "lead of team-b")
            await _team_leads_view(lead)
            assert errors == []
        finally:
            await chromium.close()


async def _every_gpu(page: Any) -> None:
    """The operator's overview and per-GPU view: who holds what, what is free, filters."""
    for card in ("holds", "idle", "queued", "next"):
        await page.locator(f"#overview #{card}").wait_for()
    assert "GPU-eq. idle in 2 workbenches" in await page.locator("#idle").inner_text()
    await page.locator("#overview #queued li[data-team='team-a']").wait_for()
    for holder, node in (("alice", "gpu-node-0"), ("bob", "gpu-node-1")):
        row = page.locator(f"#gpus tr[data-holder='{holder}']")
        await row.wait_for()
        text = await seen(row)
        assert node in text, text
        assert "MIG 1g.5gb" in text, text
    held = "#gpus tbody tr:not([data-state='free'])"
    assert await page.locator(held).count() == 3
    # what nobody holds, per node, from the Node objects less the pods on them
    for node, left in (("gpu-node-0", 5), ("gpu-node-1", 6)):  # 2 held on 0, 1 on 1
        free = page.locator(f"#gpus tr[data-node='{node}'][data-state='free']")
        text = await seen(free)
        assert f"MIG 1g.5gb × {left}" in text, text
        assert "nobody" in text, text
    assert "0.86 GPU-eq. free" in await seen(page.locator("#gpu-nodes"))
    await page.select_option("#g-state", "free")
    await page.locator("#gpus tr[data-holder='alice']").wait_for(state="detached")
    assert await page.locator("#gpus tbody tr").count() == 2
    await page.select_option("#g-state", "busy")
    await page.locator("#gpus tr[data-holder='alice']").wait_for(state="detached")
    assert await page.locator("#gpus tbody tr").count() == 1  # alice/busy


async def _team_a(page: Any) -> None:
    """team-a's quota in a person's units, its failed start, its folded rows."""
    team = page.locator("#teams .team[data-team='team-a']")
    quota = await seen(team.locator("table.quota").first)
    assert "3 × MIG 1g.5gb" in quota, quota  # a person's units, not Kueue's integers
    assert await team.locator(".scale").count() >= 2  # today's bar and the quota's
    # erin's pod was admitted and went without ever being Ready: a failed start
    assert ", 1 failed start" in await seen(team)
    # the quota rows with nothing in them: their table is made when opened, and they
    # stay open when the next answer draws the teams again
    folded = team.locator("details.folded")
    assert await folded.locator("table").count() == 0
    drawn = await team.element_handle()
    await folded.locator("summary").click()
    assert "2 GPUs" in await seen(folded.locator("table.quota"))  # h100's quota
    await drawn.wait_for_element_state("hidden")  # detached: drawn again
    assert await folded.get_attribute("open") is not None
    assert await folded.locator("table.quota tbody tr").count() >= 1


async def _fit(page: Any) -> None:
    """Sizing: no advice yet; the MIG advice for the node that has slices held."""
    await page.locator("#workbenches tr[data-key='alice']").wait_for()
    assert "No advice" in await seen(page.locator("#fit"))
    mig = page.locator("#fit .mig-advice tr[data-node='gpu-node-0']")
    # two 1g slices held, seven made: the config serves them
    assert "2 × 1g.5gb" in await seen(mig)
    assert "all-1g.5gb now; demand suggests keeping it" in await seen(mig)
    assert await page.locator("#fit .mig-advice tr[data-node='gpu-node-1']").count() == 0
    assert await page.locator("section#history").count() == 1


async def _team_leads_view(lead: Any) -> None:
    """A team lead sees no other team's holdings, what is free, and no node advice."""
    await lead.locator("#status", has_text="teams team-b").wait_for()
    # no other team's holdings; what is free names nobody and is shown
    assert await lead.locator("#gpus tbody tr:not([data-state='free'])").count() == 0
    assert await lead.locator("#gpus tbody tr[data-state='free']").count() == 2
    assert await lead.locator("#teams .team[data-team='team-a']").count() == 0
    await lead.locator("#fit p.hint").first.wait_for()
    assert await lead.locator("#fit .mig-advice").count() == 0  # nodes: admins only


async def test_each_part_of_the_page_is_drawn_from_its_own_answer(console: Console) -> None:
    """``api/console`` failing leaves the per-GPU view and sizing drawn from theirs, and the
    status line says why the rest is missing."""
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await chromium.new_context(
                extra_http_headers={"Authorization": f"Bearer {console.tokens['operator']}"},
                viewport={"width": 1400, "height": 1000},
            )
            await context.route(
                "**/api/console",
                lambda route: route.fulfill(
                    status=503, content_type="application/json", body='{"message": "down"}'
                ),
            )
            page = await context.new_page()
            page.set_default_timeout(20_000)
            await page.goto(console.url)
            await page.locator("#status", has_text="The console answered 503: down").wait_for()
            await page.locator("#gpus tr[data-holder='alice']").wait_for()
            assert "No advice" in await seen(page.locator("#fit"))
            assert await page.locator("#teams .team").count() == 0
            assert await page.locator("#overview .card").count() == 0
        finally:
            await chromium.close()

"""The spawn form, the queued progress page and JupyterLab through the real hub, in Chromium."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.support.hub import Hub, eventually, login, nothing_left, pods_of

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


async def test_form_states_live_queue_position_and_cancel(
    hub: Hub, k8s: client.ApiClient, browser: Any
) -> None:
    # team-a's local GPU is taken by alice, so bob's choice of it queues
    r = hub.api("POST", "/users/alice/server", {"team": "team-a", "offering": "local-gpu"})
    assert r.status in (201, 202), r
    try:
        hub.wait_ready("alice")
        page = await login(browser, hub, "bob")
        await page.goto(f"{hub.url}/hub/spawn")
        status = page.locator("#gpuaas-team-a-local-gpu-status")
        await status.wait_for()
        assert "queue" in (await status.inner_text()).lower()
        mig = await page.locator("#gpuaas-team-a-local-mig-1g-status").inner_text()
        assert "available" in mig.lower(), mig
        assert "not available" not in mig.lower(), mig
        facts = await page.locator("#gpuaas-team-a-local-mig-1g-facts").inner_text()
        assert "hardware" in facts.lower(), facts  # isolation said in words
        # team-b's offerings are not offered to bob at all
        assert await page.locator("[data-team='team-b']").count() == 0

        await page.check("#gpuaas-team-a-local-gpu")
        await page.click("#spawn_form [type=submit]")
        await page.wait_for_url("**/spawn-pending/bob**")
        message = page.locator("#progress-message")
        await message.filter(has_text="position 1").wait_for(timeout=60_000)
        assert "Queued in Team A: position 1" in await message.inner_text()
        (pod,) = await pods_of(k8s, "bob")
        assert pod["spec"].get("schedulingGates")

        # cancel from the pending page: nothing of bob's server is left
        await page.click("#stop-server-btn")
        await eventually(
            lambda: nothing_left(k8s, "bob", "jupyter-bob"), timeout=30, what="bob cancelled"
        )
    finally:
        hub.stop("bob")
        hub.stop("alice")
    await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice stopped")


async def test_team_user_lands_in_jupyterlab_with_the_gpu_sidebar(
    hub: Hub, k8s: client.ApiClient, browser: Any
) -> None:
    page = await login(browser, hub, "carol")
    try:
        await page.goto(f"{hub.url}/hub/spawn")
        await page.check("#gpuaas-team-b-local-mig-3g")
        await page.click("#spawn_form [type=submit]")
        await page.wait_for_url("**/user/carol/lab**", timeout=90_000)
        await page.locator("#jp-main-dock-panel").wait_for(timeout=60_000)
        tab = page.locator("[data-id='jupyter-gpuaas-panel']")
        await tab.wait_for(timeout=30_000)
        await tab.click()
        panel = page.locator("#jupyter-gpuaas-panel")
        await panel.filter(has_text="imulated").wait_for(timeout=30_000)
        (pod,) = await pods_of(k8s, "carol")
        assert pod["spec"]["nodeName"] == "local-0"
        assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-b"
    finally:
        hub.stop("carol")
    await eventually(lambda: nothing_left(k8s, "carol", "jupyter-carol"), what="carol stopped")


async def test_offerings_over_the_users_limit_are_greyed_out_with_the_reason(
    hub: Hub, k8s: client.ApiClient, browser: Any
) -> None:
    page = await login(browser, hub, "alice")  # first: with a server, login lands in it
    # alice's one GPU server runs, so her form for a second (named) server offers no more GPUs
    r = hub.api("POST", "/users/alice/server", {"team": "team-a", "offering": "local-mig-1g"})
    assert r.status in (201, 202), r
    try:
        hub.wait_ready("alice")
        await page.goto(f"{hub.url}/hub/spawn/alice/second")
        reason = "limit: 1 GPU server per user"
        for slug in ("local-gpu", "local-mig-1g", "h100", "mig-1g", "l4-shared"):
            status = page.locator(f"#gpuaas-team-a-{slug}-status")
            assert f"Not available: {reason}" in await status.inner_text(), slug
            assert await page.locator(f"#gpuaas-team-a-{slug}").is_disabled(), slug
        cpu = page.locator("#gpuaas-team-a-cpu")
        assert await cpu.is_enabled()
        assert await cpu.is_checked()  # the form moved the choice to what can start

        # greyed out as drawn, not only disabled: the label has the muted colour, unlike CPU's
        def colour(slug: str) -> Any:
            return page.locator(f"label[for='gpuaas-team-a-{slug}']").evaluate(
                "e => getComputedStyle(e).color"
            )

        assert await colour("local-gpu") != await colour("cpu")
        await page.screenshot(path=str(hub.proc.settings.state_dir / "greyed-out.png"))

        # a disabled choice forced back on (a crafted post) is refused, with the same reason
        await page.locator("#gpuaas-team-a-local-gpu").evaluate(
            "e => { e.disabled = false; e.checked = true; }"
        )
        await page.click("#spawn_form [type=submit]")
        error = page.locator(".spawn-error-msg")
        await error.wait_for()
        assert reason in await error.inner_text()
        assert [p["metadata"]["name"] for p in await pods_of(k8s, "alice")] == ["jupyter-alice"]
        assert hub.server("alice", "second") is None
    finally:
        hub.stop("alice", "second")
        hub.stop("alice")
    await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice stopped")

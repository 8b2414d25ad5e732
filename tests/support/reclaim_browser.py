"""What the reclaim browser tests do with a hub that runs the culler (tests/real_hub): log a user in
to their running JupyterLab, queue the training Job that needs the servers' GPUs, and read the
notice the spawn form shows on return."""

from __future__ import annotations

import re
from typing import Any

from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import Hub, login, training_job

PAIR = {
    "alice": {"team": "team-a", "offering": "local-mig-1g"},
    "carol": {"team": "team-b", "offering": "local-mig-1g"},
}
"""Two servers on the local node's MIG slices: the training Job needs both."""


async def login_to_lab(browser: Any, hub: Hub, user: str) -> Any:
    """Log in (the running server's JupyterLab is where the hub sends the user)."""
    return await login(browser, hub, user, until=f"**/user/{user}/**", commit=True, timeout=60_000)


async def open_gpu_panel(page: Any, hub: Hub, user: str) -> None:
    """Open JupyterLab and show the GPU panel. A persistent home keeps JupyterLab's layout, so
    the panel may be showing already: its tab is clicked only when it is not (a click on the
    tab of a showing panel closes it)."""
    await page.goto(f"{hub.url}/user/{user}/lab")
    tab = page.locator(".jp-SideBar [data-id='jupyter-gpuaas-panel']")
    await tab.wait_for(timeout=90_000)
    await page.locator("#jp-main-dock-panel").wait_for(timeout=60_000)
    panel = page.locator("#jupyter-gpuaas-panel")
    if not await panel.is_visible():
        await tab.click()
    await panel.wait_for(state="visible")


async def type_unsaved(page: Any, hub: Hub, user: str, path: str, text: str) -> None:
    """Open ``path`` in JupyterLab's editor and type ``text`` at its end, unsaved."""
    await page.goto(f"{hub.url}/user/{user}/lab/tree/{path}")
    await page.locator(".jp-FileEditor .cm-content").click(timeout=90_000)
    await page.keyboard.press("End")
    await page.keyboard.type(text)


async def queue_job(cluster: Cluster, name: str) -> None:
    """Queue the training Job (two MIG slices) in team-a's test queue, as alice."""
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job(name),  # type: ignore[arg-type]
        )


async def told_on_return(page: Any, hub: Hub, whose: str) -> None:
    """The spawn form says when and for whose work the server was stopped, in the reader's
    own time zone, and that the files are kept."""
    await page.goto(f"{hub.url}/hub/spawn")
    notice = await page.locator("#gpuaas-notice").inner_text()
    assert f"to give its GPU to {whose}, after the warning at" in notice, notice
    assert "Your files are kept." in notice
    assert "UTC" not in notice, notice
    assert "[[time:" not in notice, notice
    assert re.search(r"\((just now|\d+ min ago)\)", notice), notice

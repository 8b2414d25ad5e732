"""The way up to a bigger GPU, from the sidebar to the restarted server (real hub, gpuaas
service, cluster, JupyterLab and browser).

alice's server runs a quarter of the local L4 (a HAMi fraction: the fake NVML shows its 5.5 GiB
cap) with her home on its volume. A kernel holds most of the cap, so the GPU panel warns and
offers the next size up; she edits a file, takes the action and confirms. Her edit is saved,
the gpuaas service stops the server and starts it on half the L4, the hub's progress page
follows it, and JupyterLab opens again on the bigger server with her files.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.hub import DEMO_CATALOG, free_port
from devcluster.queue_hub import service_config
from devcluster.testing import Cluster
from jupyter_gpuaas.core.labels import OFFERING_LABEL
from tests.support.hub import (
    Hub,
    delete_home,
    eventually,
    login,
    no_pods,
    own_hub,
    pods_of,
    resize_offer,
    run_in_new_kernel,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

NOTE = {"type": "file", "format": "text", "content": "results of a long afternoon"}
ADDED = " and a line typed just before the move"


@pytest.fixture
def way_up_hub(cluster: Cluster, tmp_path: Path) -> Iterator[Hub]:
    """A hub with persistent homes and the gpuaas service, which reads the hub's catalog."""
    port = free_port()
    config = service_config(
        port,
        cluster.kubeconfig_for("jupyterhub", "gpuaas", tmp_path / "gpuaas.kubeconfig"),
        service_args=[f"--GPUaaSService.catalog_file={DEMO_CATALOG}"],
    )
    with own_hub(cluster, tmp_path, persistent_homes=True, extra_config=config) as hub:
        yield hub


async def test_the_way_up_from_the_sidebar_restarts_the_server_bigger_with_its_files(
    way_up_hub: Hub, browser: Any, k8s: client.ApiClient
) -> None:
    hub = way_up_hub
    try:
        page = await login(browser, hub, "alice")  # before her server runs: to the hub's page
        hub.start_all({"alice": {"team": "team-a", "offering": "local-quarter"}})
        before = hub.server("alice")
        assert before is not None
        hub.contents("alice", "notes.txt", NOTE)
        # a kernel holds 95% of the 5.5 GiB cap (simulated GPU memory)
        held = "from jupyter_gpuaas.gpu import simulate\nheld = simulate.hold('5.2GiB', device=0)"
        await run_in_new_kernel(hub, "alice", held, until="execute_reply")

        await page.goto(f"{hub.url}/user/alice/lab/tree/notes.txt", timeout=180_000)
        editor = page.locator(".jp-FileEditor .cm-content")
        await editor.click(timeout=90_000)
        await page.keyboard.press("Control+End")
        await page.keyboard.type(ADDED)  # unsaved: the move must save it
        await page.locator("[data-id='jupyter-gpuaas-panel']").click()

        warning = page.locator(".jp-gpuaas-cap-warning")
        await warning.first.wait_for(timeout=60_000)
        action = page.locator(".jp-gpuaas-way-up-button")
        try:
            await action.wait_for(timeout=60_000)
        except Exception as e:
            raise AssertionError(f"no action; the extension says {resize_offer(hub)}") from e
        assert await action.inner_text() == "Move to a bigger GPU: Half of an L4 (this machine)"
        await action.click()
        dialog = page.locator(".jp-Dialog")
        await dialog.wait_for()
        assert "instead of Quarter of an L4 (this machine) (5.5 GiB)" in await dialog.inner_text()
        assert "same home folder" in await dialog.inner_text()
        # team-a's pool holds one half-L4: alice's own quarter, stopped first, frees it (issue
        # 50, finding 4: the dialog said "will queue: first in line once a half-L4 frees up")
        assert "will queue" not in await dialog.inner_text()
        assert resize_offer(hub)["next"]["headroom"]["fit"] == "now"
        await dialog.get_by_role("button", name="Save and move").click()

        # the hub's progress page follows the stop and the start, then opens JupyterLab again
        await page.wait_for_url("**/hub/spawn-pending/alice**", timeout=150_000)
        await page.wait_for_url("**/user/alice/lab**", timeout=180_000)
        await page.locator("[data-id='jupyter-gpuaas-panel']").wait_for(timeout=90_000)

        after = hub.wait_ready("alice")
        assert after["user_options"]["offering"] == "local-half"
        assert after["user_options"]["team"] == "team-a"
        assert after["started"] != before["started"]
        assert hub.contents("alice", "notes.txt")["content"] == NOTE["content"] + ADDED
        pods = await pods_of(k8s, "alice")
        assert len(pods) == 1
        assert pods[0]["metadata"]["labels"][OFFERING_LABEL] == "local-half"
        (container,) = pods[0]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpumem"] == "11264"  # MiB: half an L4
        await page.context.close()
    finally:
        hub.stop("alice")
        await eventually(lambda: no_pods(k8s, "alice"), what="alice's pod gone", timeout=90)
        await delete_home(k8s, "alice")

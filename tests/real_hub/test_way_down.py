"""The way down to a smaller GPU, from the sidebar to the restarted server, with the kernel's
variables kept (issue 36.4; real hub with persistent homes, the gpuaas service and its usage
recorder, cluster, JupyterLab, ipykernel and browser).

alice's server runs half of the local L4 (a HAMi fraction: 11 GiB). Her notebook's kernel
holds 1 GiB of GPU memory and a variable. The service sees her session's peak stay far below
its share (her reclaim policy's ``way_down_after`` is 0 here; the service's own is left at its
30 min), so the GPU panel offers the smaller share; she takes it and confirms. The server is
stopped and started on a quarter of the L4, and when she opens her notebook again its variable
is back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.hub import DEMO_CATALOG
from devcluster.testing import Cluster
from tests.support.hub import (
    CullerHub,
    delete_home,
    eventually,
    login,
    no_pods,
    pods_of,
    resize_offer,
    run_culler_hub,
    run_in_new_kernel,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

# A policy that never reclaims in this test's time: the loop runs (and with it the usage
# recorder, which the way down reads) but leaves alice's server alone.
NEVER = """\
report_stale_after: 30s
policies:
  - name: never-in-this-test
    match: {kinds: [fraction]}
    idle_after: 24h
    warn_before: 60s
    way_down_after: 0s
"""
GIB = 1 << 30
NOTEBOOK = {
    "type": "notebook",
    "content": {
        "cells": [],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    },
}
BUILD = (
    "from jupyter_gpuaas.gpu import simulate\n"
    "held = simulate.hold('1GiB', device=0)\n"
    "epochs = {'done': 7}"
)


@pytest.fixture
def way_down_hub(cluster: Cluster, tmp_path: Path) -> Iterator[CullerHub]:
    with run_culler_hub(
        cluster,
        tmp_path,
        policy_text=NEVER,
        persistent_homes=True,
        extra_args=[
            f"--GPUaaSService.catalog_file={DEMO_CATALOG}",
        ],
    ) as hub:
        yield hub


async def test_the_way_down_from_the_sidebar_restarts_the_server_smaller_with_its_variables(
    way_down_hub: CullerHub, browser: Any, k8s: client.ApiClient
) -> None:
    hub = way_down_hub
    try:
        page = await login(browser, hub, "alice")
        hub.start_all({"alice": {"team": "team-a", "offering": "local-half"}})
        before = hub.server("alice")
        assert before is not None
        hub.contents("alice", "train.ipynb", NOTEBOOK)  # the notebook she opens again
        await run_in_new_kernel(hub, "alice", BUILD, until="execute_reply", notebook="train.ipynb")

        deadline = time.monotonic() + 90
        offer = resize_offer(hub)
        # The first reports may come before the kernel holds its memory: until the peak shows.
        while not (isinstance(offer, dict) and (offer.get("down") or {}).get("peak", 0) >= GIB):
            assert time.monotonic() < deadline, f"no way down offered: {offer}"
            await asyncio.sleep(2)
            offer = resize_offer(hub)
        assert offer["down"]["slug"] == "local-quarter", offer
        assert offer["down"]["peak_text"] == "1 GiB", offer

        await page.goto(f"{hub.url}/user/alice/lab", timeout=180_000)
        await page.locator("[data-id='jupyter-gpuaas-panel']").click(timeout=90_000)
        line = page.locator(".jp-gpuaas-way-down")
        await line.wait_for(timeout=90_000)
        text = await line.inner_text()
        assert "This session uses 1 GiB of its 11 GiB: move to Quarter of an L4" in text, text
        await page.locator(".jp-gpuaas-way-down-button").click()
        dialog = page.locator(".jp-Dialog")
        await dialog.wait_for()
        words = await dialog.inner_text()
        assert "Its GPU memory peak so far is 1 GiB" in words, words
        assert "each idle kernel saves its variables first" in words, words
        await dialog.get_by_role("button", name="Save and move").click()

        await page.wait_for_url("**/hub/spawn-pending/alice**", timeout=150_000)
        await page.wait_for_url("**/user/alice/lab**", timeout=180_000)
        after = hub.wait_ready("alice")
        assert after["user_options"]["offering"] == "local-quarter"
        assert after["started"] != before["started"]
        pods = await pods_of(k8s, "alice")
        assert len(pods) == 1
        (container,) = pods[0]["spec"]["containers"]
        assert container["resources"]["limits"]["nvidia.com/gpumem"] == "5632"  # a quarter L4

        await variables_back_in(page, hub)
        await page.context.close()
    finally:
        hub.stop("alice")
        await eventually(lambda: no_pods(k8s, "alice"), what="alice's pod gone", timeout=90)
        await delete_home(k8s, "alice")


async def variables_back_in(page: Any, hub: CullerHub) -> None:
    """Her notebook opens with a new kernel on the smaller share: its variables are back,
    named in quotes (a notification shows Markdown raw), and the simulated GPU hold is said to
    hold no GPU memory: pickling restores data, not device memory."""
    await page.goto(f"{hub.url}/user/alice/lab/tree/train.ipynb", timeout=180_000)
    back = page.locator(".Toastify__toast", has_text="train.ipynb: its variables are back")
    await back.wait_for(timeout=120_000)
    toast_text = await back.inner_text()
    assert "“epochs”" in toast_text, toast_text
    assert "“held”" in toast_text, toast_text
    assert "`" not in toast_text, toast_text
    await back.get_by_role("button", name="Details").click()
    details = page.locator(".jp-Dialog")
    await details.wait_for()
    said = await details.inner_text()
    assert "“held” is back as a simulated GPU hold of 1 GiB on GPU " in said, said
    assert (
        "holding no GPU memory: a restored object keeps its data, not the device memory it held."
        in said
    ), said

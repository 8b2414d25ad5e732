"""A real reclaim keeps the user's work (real hub with persistent homes, Kueue, node agent, the
gpuaas service; Chromium): alice's file and the change she had not saved yet are in her home
when she starts again, and the spawn form tells her what happened and offers what she had (her
MIG slice, not CPU only, although her session used no GPU memory)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from devcluster.testing import Cluster
from jupyter_gpuaas.core.sizing import HISTORY_CONFIGMAP, history_from_configmap
from tests.support.hub import (
    USERS_NS,
    CullerHub,
    delete_jobs,
    eventually,
    no_pods,
    pods_of,
)
from tests.support.reclaim_browser import (
    PAIR,
    login_to_lab,
    queue_job,
    told_on_return,
    type_unsaved,
)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

RESULTS = "results.txt"
CPU_ONLY = "input[name='offering'][value='cpu']"
MEASURED = "used no GPU memory"


async def session_recorded(k8s: client.ApiClient, user: str) -> tuple[int, ...]:
    """The user's session peaks (MiB, newest first) as the service recorded them."""
    core = client.CoreV1Api(k8s)
    try:
        cm = await core.read_namespaced_config_map(HISTORY_CONFIGMAP, USERS_NS)
    except ApiException as e:
        if e.status == 404:
            return ()
        raise
    history, problems = history_from_configmap(cm.data)
    assert not problems, problems
    return history.of(user)


async def offers_what_she_had(page: Any, hub: CullerHub) -> None:
    """Start again after a reclaim restarts what she had: her MIG slice is preselected, not
    CPU only, although her session used no GPU memory; that advice is beside it, a suggestion.
    The service records the session's peak once it sees the server gone, and the hub rereads
    the history every 30 s: the form is loaded again until it says the advice."""
    advice = page.locator("#gpuaas-advice-team-a")
    deadline = time.monotonic() + 90
    while MEASURED not in "".join(await advice.all_inner_texts()) and time.monotonic() < deadline:
        await page.wait_for_timeout(3000)
        await page.goto(f"{hub.url}/hub/spawn")
    said = await advice.inner_text()
    assert "used no GPU memory: CPU only (this machine) fits." in said, said
    cpu = page.locator("#gpuaas-team-a-cpu")
    assert await page.locator("label[for='gpuaas-team-a-cpu'] .gpuaas-advised").is_visible()
    assert await page.locator("#gpuaas-team-a-local-mig-1g").is_checked()
    assert not await cpu.is_checked()
    assert await page.locator(f"{CPU_ONLY}:checked").count() == 0  # in no team
    # and what the form would send is her slice: the checked radio of her team
    checked = page.locator("fieldset[data-team='team-a'] input[name='offering']:checked")
    assert await checked.get_attribute("value") == "local-mig-1g"


async def test_a_reclaimed_user_finds_her_file_and_her_unsaved_change_on_return(
    reclaiming_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient, browser: Any
) -> None:
    hub = reclaiming_hub
    try:
        hub.start_all(PAIR)
        written = {"type": "file", "format": "text", "content": "epoch 1: loss 0.91"}
        hub.contents("alice", RESULTS, written)
        alice = await login_to_lab(browser, hub, "alice")
        await type_unsaved(alice, hub, "alice", RESULTS, ", epoch 2: loss 0.64")
        assert hub.contents("alice", RESULTS)["content"] == written["content"]  # not saved yet

        # alice runs nothing (idle after 2 s); a queued Job needs her slice: the real reclaim
        await queue_job(cluster, "train-homes")

        async def stopped() -> bool:
            return hub.server("alice") is None and await no_pods(k8s, "alice")

        await eventually(stopped, 120, "alice's server reclaimed")
        core = client.CoreV1Api(k8s)
        claim = await core.read_namespaced_persistent_volume_claim("claim-alice", USERS_NS)
        assert claim.status.phase == "Bound"  # the home outlives the server

        await told_on_return(alice, hub, "your team's queued work")

        # her sessions, which used no GPU memory, are in the history the form's advice reads
        # (earlier modules' sessions of alice in this cluster too: none used a GPU either)
        async def used_no_gpu() -> tuple[int, ...] | None:
            peaks = await session_recorded(k8s, "alice")
            return peaks if peaks and max(peaks) == 0 else None

        await eventually(used_no_gpu, 60, "her peak")
        await offers_what_she_had(alice, hub)
        # she starts again from the form, on a GPU the Job does not hold
        await alice.check("#gpuaas-team-a-local-quarter")
        await alice.click("#spawn_form [type=submit]")
        await alice.wait_for_url("**/user/alice/lab**", timeout=120_000)
        (pod,) = await pods_of(k8s, "alice")
        claims = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        ]
        assert claims == ["claim-alice"]  # the same home, not a new one
        await alice.goto(f"{hub.url}/user/alice/lab/tree/{RESULTS}")
        editor = alice.locator(".jp-FileEditor .cm-content")
        await editor.filter(has_text="epoch 2: loss 0.64").wait_for(timeout=90_000)
        assert hub.contents("alice", RESULTS)["content"] == (
            "epoch 1: loss 0.91, epoch 2: loss 0.64"
        )
    finally:
        for user in PAIR:
            hub.stop(user)
        await delete_jobs(cluster, k8s)

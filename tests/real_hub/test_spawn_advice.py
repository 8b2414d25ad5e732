"""The spawn form preselects what fits each user's measured GPU memory (real hub, browser).

The users' session peaks are written as the gpuaas service keeps them (its own ServiceAccount,
its ConfigMap, the text of :func:`jupyter_gpuaas.core.sizing.history_json`); the hub reads them
with its own ServiceAccount, through the RBAC and admission policies of the dev cluster.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from devcluster.testing import Cluster
from gpuaas_service.clients.kubernetes import EVENT_SOURCE
from jupyter_gpuaas.core.labels import STATE_KEY
from jupyter_gpuaas.core.sizing import HISTORY_CONFIGMAP, PeakHistory, history_json
from tests.support.hub import ADVICE_USERS, USERS_NS, Hub, login

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

GIB = 1024  # MiB
# Two team-a users who never start a server in the session hub (``ADVICE_USERS``): what the form
# preselects for them is the advice alone, not a last choice another test left behind.
SMALL, LARGE = ADVICE_USERS
PEAKS = PeakHistory({SMALL: (3 * GIB, 2 * GIB, GIB), LARGE: (8 * GIB, 5 * GIB)})
# How long a form may show the history the hub read before this test wrote it (the session
# hub's usage_history_max_age, 30 s, and a margin)
HUB_CACHE = 45.0


def _configmap(history: PeakHistory) -> client.V1ConfigMap:
    return client.V1ConfigMap(
        metadata=client.V1ObjectMeta(
            name=HISTORY_CONFIGMAP, labels={"app.kubernetes.io/managed-by": EVENT_SOURCE}
        ),
        data={STATE_KEY: history_json(history)},
    )


@pytest.fixture
async def recorded_peaks(cluster: Cluster) -> AsyncIterator[None]:
    """The history, written as the gpuaas service writes it; emptied afterwards."""
    async with cluster.api("jupyterhub", "gpuaas") as api:
        core = client.CoreV1Api(api)
        try:
            await core.read_namespaced_config_map(HISTORY_CONFIGMAP, USERS_NS)
            exists = True
        except ApiException as e:
            if e.status != 404:
                raise
            exists = False
        if exists:
            await core.replace_namespaced_config_map(HISTORY_CONFIGMAP, USERS_NS, _configmap(PEAKS))
        else:
            await core.create_namespaced_config_map(USERS_NS, _configmap(PEAKS))
        try:
            yield
        finally:
            await core.replace_namespaced_config_map(
                HISTORY_CONFIGMAP, USERS_NS, _configmap(PeakHistory({}))
            )


async def _advised_form(page: Any, hub: Hub, team: str) -> str:
    """Open the spawn form until it shows its advice (the hub may still hold an older read)."""
    deadline = time.monotonic() + HUB_CACHE
    advice = page.locator(f"#gpuaas-advice-{team}")
    while True:
        await page.goto(f"{hub.url}/hub/spawn")
        await page.locator("#gpuaas-form").wait_for()
        if await advice.count():
            return str(await advice.inner_text())
        assert time.monotonic() < deadline, "no advice on the form"
        await page.wait_for_timeout(2000)


async def test_the_form_preselects_what_fits_the_measured_use_and_says_why(
    hub: Hub, browser: Any, recorded_peaks: None
) -> None:
    page = await login(browser, hub, SMALL)
    advice = await _advised_form(page, hub, "team-a")
    assert advice == (
        "Your last 3 sessions peaked at 3 GiB; 5 GiB is enough: A100 MIG 1g.5gb (this machine)."
        " You may pick any other."
    )
    assert await page.is_checked("#gpuaas-team-a-local-mig-1g")
    badge = (
        page.locator("#gpuaas-team-a-local-mig-1g").locator("xpath=..").locator(".gpuaas-advised")
    )
    assert await badge.inner_text() == "fits your use"

    # LARGE's sessions needed more: a half L4 (11 GiB) is preselected, not the team's default; of
    # the two halves of the same size, the catalog's first (the one on this machine)
    page = await login(browser, hub, LARGE)
    advice = await _advised_form(page, hub, "team-a")
    assert advice == (
        "Your last 2 sessions peaked at 8 GiB; 11 GiB is enough: Half of an L4 (this machine)."
        " You may pick any other."
    )
    assert await page.is_checked("#gpuaas-team-a-local-half")
    assert not await page.is_checked("#gpuaas-team-a-local-mig-1g")

    # carol has no history: no advice line and no offering marked as fitting her use (what is
    # preselected then, the team's default where it is free, is the form's usual choice)
    page = await login(browser, hub, "carol")
    await page.goto(f"{hub.url}/hub/spawn")
    await page.locator("#gpuaas-form").wait_for()
    assert await page.locator("#gpuaas-advice-team-b").count() == 0
    assert await page.locator("[data-team='team-b'] .gpuaas-advised").count() == 0

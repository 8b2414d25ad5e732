"""The console's *Deployment checks* section in Chromium (docs/deploy.md, docs/console.md): an
operator sees the doctor's lines, those not ok first with their fixes, and "Check again" runs
them anew; a team lead's page has no such section. The service runs the checks as its own
account and token on the dev cluster, the reference set-up: every line is ok (three
lines once said raw HTTP 403 texts, and one offering was named twice)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import expect

from devcluster.testing import Cluster
from tests.support.doctor_world import Setup, doctor_world
from tests.support.hub import Hub, login

pytestmark = pytest.mark.integration

# as the page's own requests (api.ts): a cookie login's API call carries the page's XSRF token
FETCH = (
    "path => fetch(path, {headers: {'X-XSRFToken':"
    " document.querySelector('meta[name=\"xsrf-token\"]').content}})"
)

LEAD = """
c.JupyterHub.load_roles.append({"name": "team-a-lead", "users": ["bob"],
    "scopes": ["custom:gpuaas:console!group=team-a", "access:services!service=gpuaas"]})
"""


@pytest.fixture(scope="module")
def world(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with doctor_world(cluster, tmp_path_factory.mktemp("console-checks"), LEAD) as w:
        yield w


async def _console(browser: Any, world: Setup, user: str) -> Any:
    hub = Hub(world.hub, world.tester_token)
    page = await login(browser, hub, user)
    await page.goto(f"{world.hub.url}/services/gpuaas/console/")
    await page.wait_for_selector("#status")
    return page


async def test_an_operator_sees_the_checks(browser: Any, world: Setup) -> None:
    page = await _console(browser, world, "admin")
    status = page.locator("#checks-status")
    await expect(page.locator("#checks-status")).to_contain_text("checks:", timeout=120_000)
    assert await page.locator("#checks").is_visible()
    text = await status.text_content()
    rows = page.locator("#checks-table tbody tr")
    statuses = await rows.evaluate_all("rs => rs.map(r => [r.dataset.check, r.dataset.status])")
    by_name = dict(statuses)
    assert by_name["hub"] == "ok"
    assert by_name["hub.scopes"] == "ok"
    assert by_name["localqueue.team-a"] == "ok"
    assert by_name["rbac.nodes.cluster"] == "ok"
    # the service's own account reads what the checks judge (its doctor RBAC): all ok
    assert by_name["admission.gpuaas-service-pod-writes"] == "ok"
    assert by_name["kueue.version"] == "ok"
    answer = json.loads(
        await page.evaluate(f"({FETCH})('../api/console/checks').then(r => r.text())")
    )
    bad = [c for c in answer["checks"] if c["status"] != "ok"]
    assert bad == [], "\n".join(json.dumps(c) for c in bad)
    assert text is not None
    assert f"{len(statuses)} checks: all ok" in text
    # each offering is named once in a queue's line
    for check in answer["checks"]:
        named = re.findall(r"for offerings? ([\w.,\- ]+)$", check["detail"])
        if named:
            slugs = named[0].split(", ")
            assert len(slugs) == len(set(slugs)), check
    assert [[c["name"], c["status"]] for c in answer["checks"]] == [list(s) for s in statuses]
    before = answer["checked_at"]
    await page.wait_for_timeout(1100)
    await page.click("#checks-again")
    await expect(page.locator("#checks-status")).not_to_contain_text(before, timeout=120_000)
    await expect(page.locator("#checks-status")).to_contain_text("checks:", timeout=120_000)


async def test_a_team_lead_has_no_checks_section(browser: Any, world: Setup) -> None:
    page = await _console(browser, world, "bob")
    await expect(page.locator("#status")).to_contain_text("Showing teams team-a", timeout=60_000)
    answer = await page.evaluate(f"({FETCH})('../api/console/checks').then(r => r.status)")
    assert answer == 403
    # the same page's own API call passes: the 403 is the checks' alone
    assert await page.evaluate(f"({FETCH})('../api/console').then(r => r.status)") == 200
    assert not await page.locator("#checks").is_visible()

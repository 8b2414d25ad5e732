"""A reclaim and its hand-off as the console shows them, on the real cluster through the real
hub (docs/console.md): alice's idle MIG slice (team-a, a short countdown) is reclaimed for a
queued team-a Job, Kueue admits the Job, and the console's API and page list the warning, the
reclaim and the hand-off with how long admission took; a restarted service still lists them.
Its own hub and policy: the module ``test_console`` keeps its 10-minute countdown.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.console_page import drawn, screenshot_whole, seen
from tests.support.hub import (
    CullerHub,
    eventually,
    login,
    restart_service,
    run_culler_hub,
    training_job,
)
from tests.support.hub import service_get as get
from tests.support.lab_page import docs_image

pytestmark = pytest.mark.integration


# alice (team-a): warned 5 s ahead, stopped 3 s after the warning's end (save_lead); carol
# (team-b) holds the other local slice and is never idle long enough, so alice's is the one
# that frees the Job's slice.
POLICY = """\
report_stale_after: 30s
handoff_timeout: 3m
policies:
  - name: team-a-quick
    match: {teams: [team-a], kinds: [mig]}
    idle_after: 2s
    warn_before: 5s
  - name: team-b-slow
    match: {teams: [team-b], kinds: [mig]}
    idle_after: 1h
    warn_before: 10m
"""

JOB = "console-handoff"


def handoff_of(answer: dict[str, Any]) -> dict[str, Any] | None:
    return next((h for h in answer["handoffs"] if JOB in h["workload"]), None)


@pytest.fixture(scope="module")
def handed_off(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    """alice (team-a) and carol (team-b) idle on a local slice each; a team-a Job needing one
    slice queues; alice's is reclaimed for it and the hand-off succeeds (seen in the console)."""
    state = tmp_path_factory.mktemp("console-handoff-hub")
    with run_culler_hub(cluster, state, policy_text=POLICY) as hub:
        try:
            for user, team in (("alice", "team-a"), ("carol", "team-b")):
                r = hub.api(
                    "POST", f"/users/{user}/server", {"team": team, "offering": "local-mig-1g"}
                )
                assert r.status in (201, 202), r
            for user in ("alice", "carol"):
                hub.wait_ready(user, timeout=120)
            asyncio.run(hand_off(hub, cluster))
            yield hub
        finally:
            for user in ("alice", "carol"):
                hub.stop(user)


async def hand_off(hub: CullerHub, cluster: Cluster) -> None:
    async def both_reporting() -> bool:
        # both servers' reports in (idle, not unknown): carol's slice is then kept for her
        # policy's hour, not for want of a report
        _, answer = get(hub, "api/console", hub.token)
        rows = {w["key"]: w for w in answer["workbenches"]}
        return {"alice", "carol"} <= rows.keys() and all(
            rows[u]["activity"] == "idle" for u in ("alice", "carol")
        )

    await eventually(both_reporting, 90, "alice's and carol's reports in the console")
    job = training_job(JOB)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job("team-a", job)  # type: ignore[arg-type]
    t_queued = time.monotonic()

    async def handoff_done() -> bool:
        h = handoff_of(get(hub, "api/console", hub.token)[1])
        return h is not None and h["status"] == "succeeded"

    await eventually(handoff_done, 180, "the hand-off of alice's slice, succeeded")
    print(f"queued -> hand-off succeeded in the console: {time.monotonic() - t_queued:.1f}s")


async def test_a_reclaim_and_its_handoff_in_the_console(
    handed_off: CullerHub, browser: Any
) -> None:
    hub = handed_off
    status, answer = get(hub, "api/console", hub.token)
    assert status == 200, answer
    assert hub.server("alice") is None, "alice's server was stopped through the hub"
    assert hub.server("carol") is not None
    h = handoff_of(answer)
    assert h is not None
    assert h["team"] == "team-a"
    assert h["admitted_at"] is not None
    assert h["latency_seconds"] is not None
    assert 0 <= h["latency_seconds"] < 180
    # the events, newest first: alice warned, then reclaimed for the Job, then the hand-off
    mine = [e for e in answer["events"] if e["user"] == "alice" or JOB in e["workload"]]
    kinds = [e["event"] for e in reversed(mine)]
    assert kinds[:1] == ["warn"], mine
    assert "reclaim" in kinds
    assert kinds[-1] == "handoff", mine
    reclaim = next(e for e in mine if e["event"] == "reclaim")
    assert (reclaim["team"], reclaim["offering"], reclaim["dry_run"]) == (
        "team-a",
        "local-mig-1g",
        False,
    )
    assert JOB in reclaim["workload"]
    handoff = next(e for e in mine if e["event"] == "handoff")
    assert handoff["result"] == "succeeded"
    assert handoff["latency_seconds"] == pytest.approx(h["latency_seconds"])
    assert answer["regret"]["reclaims"] >= 1

    # the page (through the hub's OAuth): the hand-off row with its latency, the events
    page = await login(browser, hub, "admin")
    await page.set_viewport_size({"width": 1400, "height": 1000})
    await page.goto(f"{hub.url}/services/gpuaas/console/")
    row = page.locator("#handoffs tbody tr", has_text=JOB)
    await row.filter(has_text="succeeded").wait_for()
    await drawn(row)  # painted when near the screen (console_page.py)
    cells = await row.locator("td").all_inner_texts()
    assert cells[1] == "team-a", cells
    seconds = round(h["latency_seconds"])
    shown = f"{seconds} s" if seconds < 60 else f"{seconds // 60} min"
    assert cells[4] == shown, cells  # how long admission took
    events = page.locator("#events tbody tr")
    # the reclaim's own row: its What cell (the Why column may name a reclaim too)
    what = page.locator("td:nth-child(2)", has_text=re.compile(r"^reclaim"))
    await events.filter(has=what).filter(has_text="alice").wait_for()
    assert "admitted after" in await seen(events.filter(has_text="handoff succeeded"))
    await page.locator("#events-title").scroll_into_view_if_needed()
    await screenshot_whole(page, str(docs_image("console-handoff.png")))


async def test_the_consoles_events_and_handoffs_survive_a_restart(handed_off: CullerHub) -> None:
    """The journal (ConfigMap gpuaas-console-journal) and the hand-off records
    (gpuaas-culler-handoffs) are read back by the restarted service."""
    hub = handed_off
    _, before = get(hub, "api/console", hub.token)
    kept = [(e["event"], e["user"], e["at"], e["workload"]) for e in before["events"]]
    assert {"warn", "reclaim", "handoff"} <= {k[0] for k in kept}, kept

    async def cycled() -> dict[str, Any] | None:
        status, answer = get(hub, "api/console", hub.token)
        # a complete cycle of the new service: it has read its ConfigMaps
        return answer if status == 200 and answer["last_completed"] else None

    after = await restart_service(hub, cycled, 90, "the restarted service's first cycle")
    assert after["now"] > before["now"]
    events = [(e["event"], e["user"], e["at"], e["workload"]) for e in after["events"]]
    assert events[-len(kept) :] == kept, "the events before the restart, in order"
    h, h0 = handoff_of(after), handoff_of(before)
    assert h is not None
    assert h0 is not None
    assert h["status"] == h0["status"]
    # the record keeps its times in milliseconds (isoformat_z)
    assert h["latency_seconds"] == pytest.approx(h0["latency_seconds"], abs=0.002)
    assert after["regret"]["reclaims"] == before["regret"]["reclaims"]

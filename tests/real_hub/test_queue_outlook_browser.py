"""Waiting for a GPU, with the real hub, Kueue, the node agent's servers and the gpuaas service's
culler (Chromium): the progress page of a queued server says what holds the GPU and when the
reclaim plan frees it, "Leave the queue" ends the wait and says so; and a "Keep my GPU" hands
the reclaim over to another team's server with a whole warning of its own, which names the
other team by its display name (the service reads the hub's catalog), journaled as "lent". A
warning is given only to the server the reclaim will stop: the other team's open tab says nothing,
a warning already running is carried out rather than moved to a server idle enough since, and a
warning withdrawn is in the console's journal with its reason.

Team A's and team B's notebook queues each hold one local MIG slice.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.config import DEMO_CATALOG
from devcluster.testing import Cluster
from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
from jupyter_gpuaas.core.labels import (
    RECLAIM_DEADLINE,
    RECLAIM_OUTLOOK,
    RECLAIM_REASON,
    STATE_KEY,
)
from tests.support.alerts_seen import about_reclaim, alerts_seen, forget_alerts, watch_alerts
from tests.support.console_page import drawn
from tests.support.hub import (  # noqa: F401  (the browser fixture)
    USERS_NS,
    WARNED,
    CullerHub,
    browser,
    delete_jobs,
    eventually,
    login,
    pod_of,
    run_culler_hub,
    run_in_new_kernel,
    service_get,
    snooze,
    training_job,
)
from tests.support.reclaim_browser import login_to_lab, open_gpu_panel

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

WARN_BEFORE = 45
BOB_WARN_BEFORE = 90
POLICY = f"""\
report_stale_after: 30s
handoff_timeout: 2m
prefer_own_team: true
policies:
  # bob (team A) and dave (team B): the planned-warning test. bob's warning is withdrawn early
  # in its long countdown (a tab reads a warning gone in its last 30 s as the stop beginning);
  # dave's is carried out.
  - name: planned-team-a
    match: {{kinds: [mig], users: [bob]}}
    idle_after: 2s
    warn_before: {BOB_WARN_BEFORE}s
  - name: planned-team-b
    match: {{kinds: [mig], users: [dave]}}
    idle_after: 2s
    warn_before: {WARN_BEFORE}s
  - name: local-mig
    match: {{kinds: [mig]}}
    idle_after: 2s
    warn_before: {WARN_BEFORE}s
    max_snoozes: 1
    snooze_for: 1h
"""
TEMPLATES = "import gpuaas_spawner\nc.JupyterHub.template_paths = [gpuaas_spawner.HUB_TEMPLATES]\n"
MIG_1G = "local-mig-1g"
TOAST = ".Toastify__toast"
OVER = "The reclaim warning is over"


@pytest.fixture(scope="module")
def culler_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    with run_culler_hub(
        cluster,
        tmp_path_factory.mktemp("queue-outlook"),
        policy_text=POLICY,
        extra_config=TEMPLATES,
        extra_args=(f"--GPUaaSService.catalog_file={DEMO_CATALOG}",),
    ) as hub:
        yield hub


@pytest.fixture(autouse=True)
async def nothing_left_over(culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient) -> Any:
    yield
    for user in ("alice", "bob", "carol", "dave"):
        culler_hub.stop(user)
    await delete_jobs(cluster, k8s)


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


async def test_the_wait_says_what_holds_the_gpu_and_leave_the_queue_ends_it(
    culler_hub: CullerHub,
    k8s: client.ApiClient,
    browser: Any,  # noqa: F811
) -> None:
    hub = culler_hub
    hub.start_all({"alice": {"team": "team-a", "offering": MIG_1G}})
    # bob (team A) asks for the slice alice holds: his server waits in team A's queue.
    r = hub.api("POST", "/users/bob/server", {"team": "team-a", "offering": MIG_1G})
    assert r.status == 202, r

    page = await login(browser, hub, "bob")
    await page.goto(f"{hub.url}/hub/spawn-pending/bob")
    message = page.locator("#progress-message")
    await message.filter(has_text="teammate's server, idle").wait_for(timeout=60_000)
    text = await message.inner_text()
    assert text.startswith("Queued in Team A: position 1"), text
    assert re.search(r"in use by a teammate's server, idle (under a minute|\d+ min)", text), text
    # The culler warned alice for bob: the page says her server is being freed, and about when.
    await message.filter(has_text="being freed for you").wait_for(timeout=30_000)
    text = await message.inner_text()
    assert "(being freed)" in text, text
    assert re.search(r"being freed for you: (about \d+ min|any moment now)\.", text), text
    for forbidden in ("alice", "Kueue", "gate", "T0", "Z", "HTTP", "local-mig", "GPU-eq"):
        assert forbidden not in text, (forbidden, text)
    bob_pod = await pod_of(k8s, "bob")
    assert bob_pod is not None
    outlook = json.loads(bob_pod["metadata"]["annotations"][RECLAIM_OUTLOOK])
    assert outlook["holders"][0]["team"] == "team-a"
    assert "alice" not in json.dumps(outlook)  # nobody is named to another user

    # "Leave the queue": the wait ends, the page says so, nothing was started.
    leave = page.locator("#gpuaas-leave-queue")
    assert await leave.inner_text() == "Leave the queue"
    assert await leave.is_visible()  # shown while it waits in the queue, and only then
    hint = await page.locator("#gpuaas-leave-hint").inner_text()
    assert hint == "Your place in the queue is kept while this page is closed."
    assert await page.locator("#gpuaas-starting").is_hidden()
    await leave.click()
    told = page.locator("#gpuaas-left-message")
    await told.filter(has_text="You left the queue; nothing was started.").wait_for(timeout=30_000)
    assert await page.locator("#progress-message").is_hidden()
    assert await page.locator("#gpuaas-left-again a").get_attribute("href") == "/hub/spawn/bob"

    async def bob_gone() -> bool:
        return hub.server("bob") is None and await pod_of(k8s, "bob") is None

    await eventually(bob_gone, 60, "bob's waiting server and pod to go")

    # Nobody waits for alice's slice now: her warning is withdrawn and she keeps her server.
    async def alice_unwarned() -> bool:
        pod = await pod_of(k8s, "alice")
        return pod is not None and WARNED not in (pod["metadata"].get("annotations") or {})

    await eventually(alice_unwarned, 30, "alice's warning to be withdrawn")
    assert hub.server("alice") is not None
    # The form says it again on bob's next visit.
    await page.goto(f"{hub.url}/hub/spawn")
    notice = await page.locator("#gpuaas-notice").inner_text()
    assert "You left the queue; nothing was started." in notice, notice


async def test_once_the_wait_ends_the_page_says_starting_not_leave_the_queue(
    culler_hub: CullerHub,
    k8s: client.ApiClient,
    browser: Any,  # noqa: F811
) -> None:
    """The page offers "Leave the queue" and its hint only while the server waits: a server
    that is starting (admitted, as a way down's move often is at once) is said to be starting.
    bob waits behind alice's slice; once she stops, his server starts and the page says so."""
    hub = culler_hub
    hub.start_all({"alice": {"team": "team-a", "offering": MIG_1G}})
    r = hub.api("POST", "/users/bob/server", {"team": "team-a", "offering": MIG_1G})
    assert r.status == 202, r
    page = await login(browser, hub, "bob")
    await page.goto(f"{hub.url}/hub/spawn-pending/bob")
    leave = page.locator("#gpuaas-leave-queue")
    await leave.wait_for(state="visible", timeout=60_000)  # queued: the way out is there
    starting = page.locator("#gpuaas-starting")
    assert await starting.is_hidden()

    hub.stop("alice")  # her slice is free: Kueue admits bob's server, and it starts
    await starting.wait_for(state="visible", timeout=120_000)
    assert await starting.inner_text() == "Your server is starting; it is not waiting in the queue."
    assert await leave.is_hidden()
    assert await page.locator("#gpuaas-leave-hint").is_hidden()
    await page.wait_for_url("**/user/bob/**", timeout=120_000)  # and it opens when it is up


def one_slice_job(name: str) -> dict[str, Any]:
    job = training_job(name)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1
    return job


async def test_keep_my_gpu_hands_over_with_a_whole_warning_and_is_journaled(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    hub.start_all(
        {
            "alice": {"team": "team-a", "offering": MIG_1G},
            "carol": {"team": "team-b", "offering": MIG_1G},
        }
    )
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            one_slice_job("train-handover"),  # type: ignore[arg-type]
        )

    async def warned(user: str) -> dict[str, Any] | None:
        pod = await pod_of(k8s, user)
        return pod if pod and WARNED in (pod["metadata"].get("annotations") or {}) else None

    # prefer_own_team: team A's Job takes team A's idle slice first, although carol's is as idle.
    await eventually(lambda: warned("alice"), 60, "the warning on alice's pod")
    assert await warned("carol") is None

    status, answer = snooze(hub, "alice")
    assert status == 200, answer
    kept_at = time.monotonic()

    carol = await eventually(lambda: warned("carol"), 30, "the warning on carol's pod")
    ann = carol["metadata"]["annotations"]
    given = when(ann[RECLAIM_DEADLINE]) - when(ann[WARNED])
    assert given >= timedelta(seconds=WARN_BEFORE), ann  # a whole warning, not what alice had left
    # team A's work is named to carol by its display name only: no slug, no Job's name
    assert ann[RECLAIM_REASON].startswith("queued work of Team A needs what it holds"), ann
    assert "team-a" not in ann[RECLAIM_REASON]
    assert "train-handover" not in ann[RECLAIM_REASON]
    # carol is not stopped before her own deadline...
    while time.monotonic() < kept_at + WARN_BEFORE - 10:
        assert hub.server("carol") is not None, "carol was stopped before her warning ran out"
        time.sleep(2)

    # ...and after it she is, for team A's Job; alice keeps hers.
    async def carol_stopped() -> bool:
        return hub.server("carol") is None

    await eventually(carol_stopped, WARN_BEFORE + 60, "the hub to stop carol")
    assert hub.server("alice") is not None

    # The console's journal notes that team B's quota went to team A's work.
    async def lent() -> list[dict[str, Any]]:
        async with cluster.api("jupyterhub", "gpuaas") as api:
            kept = await client.CoreV1Api(api).read_namespaced_config_map(
                JOURNAL_CONFIGMAP, USERS_NS
            )
        entries = json.loads(kept.data[STATE_KEY]).get("entries") or []
        return [e for e in entries if e.get("event") == "lent"]

    (entry,) = await eventually(lent, 30, "the lent entry in the console's journal")
    assert (entry["user"], entry["team"]) == ("carol", "team-b")
    assert "queued work of team-a" in entry["reason"]


def console(hub: CullerHub) -> dict[str, Any]:
    status, answer = service_get(hub, "api/console", hub.token)
    assert status == 200, answer
    return dict(answer)


def plan_row(answer: dict[str, Any], user: str) -> dict[str, Any]:
    return next((w for w in answer["workbenches"] if w["key"] == user), {})


def counting_down(row: dict[str, Any]) -> bool:
    return row.get("action") in ("warn", "wait")


async def activity_is(hub: CullerHub, wanted: dict[str, str]) -> bool:
    """The service's own view (its servers' reports in): each user's server as ``wanted``."""
    answer = console(hub)
    return all(plan_row(answer, u).get("activity") == a for u, a in wanted.items())


def stop_kernels(hub: CullerHub, user: str) -> None:
    """Shut down every kernel of ``user``'s server (as the user would, through its API)."""
    headers = {"Authorization": f"token {hub.user_token(user)}"}
    base = f"{hub.url}/user/{user}/api/kernels"
    with urllib.request.urlopen(urllib.request.Request(base, headers=headers), timeout=30) as r:
        kernels = json.loads(r.read())
    for k in kernels:
        req = urllib.request.Request(f"{base}/{k['id']}", method="DELETE", headers=headers)
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 204, r.status


async def test_only_the_server_the_reclaim_will_stop_is_warned_and_a_withdrawal_is_journaled(
    culler_hub: CullerHub,
    cluster: Cluster,
    k8s: client.ApiClient,
    browser: Any,  # noqa: F811
) -> None:
    """A warning is given to the server the plan will stop, and to no other (a team B user
    was warned, then told "not needed" 30 s later when prefer_own_team chose a team A server
    that had become idle enough since: a countdown for nothing).

    1. Both idle: team A's Job warns bob (his own team's); dave's (team B) tab says nothing.
       The Job is deleted while bob's warning runs: his tab says the warning is over, and the
       console's journal lists the withdrawal with its reason.
    2. bob busy, dave idle: the Job warns dave (the only idle server). bob's server becomes
       idle enough during dave's countdown: dave's warning is carried out, not withdrawn for
       bob, and bob's tab says nothing."""
    hub = culler_hub
    hub.start_all(
        {
            "bob": {"team": "team-a", "offering": MIG_1G},
            "dave": {"team": "team-b", "offering": MIG_1G},
        }
    )
    tabs = {}
    for user in ("bob", "dave"):
        tabs[user] = await login_to_lab(browser, hub, user)
        await open_gpu_panel(tabs[user], hub, user)
        await watch_alerts(tabs[user])
    bob, dave = tabs["bob"], tabs["dave"]
    both_idle = {"bob": "idle", "dave": "idle"}
    await eventually(lambda: activity_is(hub, both_idle), 90, "both servers' reports in, idle")

    await warned_then_withdrawn(hub, cluster, k8s, browser, bob, dave)
    await warning_carried_out(hub, cluster, bob, dave)


async def warned_then_withdrawn(
    hub: CullerHub, cluster: Cluster, k8s: client.ApiClient, chromium: Any, bob: Any, dave: Any
) -> None:
    """Both idle: team A's Job goes to team A's server, and dave is never told of it; the Job
    deleted, bob's warning is withdrawn, and the journal says so, with why."""
    await queue_one_slice_job(cluster, "train-planned-1")
    await bob.locator(TOAST, has_text="will be freed").wait_for(timeout=60_000)
    for _ in range(3):  # some cycles of the service (one a second) with the warning on
        answer = console(hub)
        assert counting_down(plan_row(answer, "bob")), plan_row(answer, "bob")
        assert not counting_down(plan_row(answer, "dave")), plan_row(answer, "dave")
        await bob.wait_for_timeout(1000)
    await delete_jobs(cluster, k8s)  # nothing waits for the slice now

    # the notice is short (8 s): the tab's own record has it, when the Job's deletion took longer
    async def told_over() -> list[str]:
        return [s for s in await alerts_seen(bob) if OVER in s]

    (said,) = await eventually(told_over, 30, "bob's tab to say the warning is over")
    assert "stays with this server" in said, said

    async def withdrawn() -> dict[str, Any] | None:
        events = console(hub)["events"]
        return next((e for e in events if (e["event"], e["user"]) == ("withdraw", "bob")), None)

    entry = await eventually(withdrawn, 30, "the withdrawal in the console's journal")
    assert entry["reason"].startswith("warning withdrawn: "), entry
    assert entry["team"] == "team-a", entry
    # ...as the console's page lists it, the reason where the event is
    admin = await login(chromium, hub, "admin")
    await admin.goto(f"{hub.url}/services/gpuaas/console/")
    row = admin.locator("#events tbody tr").filter(has_text="withdraw").filter(has_text="bob")
    await row.first.wait_for(timeout=30_000)
    await drawn(row.first)
    cell = row.first.locator("td").nth(1)
    assert await cell.inner_text() == "withdraw"
    assert await cell.get_attribute("title") == entry["reason"]
    assert about_reclaim(await alerts_seen(dave)) == [], await alerts_seen(dave)
    assert not [e for e in console(hub)["events"] if e["user"] == "dave"]
    await admin.context.close()


async def warning_carried_out(hub: CullerHub, cluster: Cluster, bob: Any, dave: Any) -> None:
    """bob busy: dave's is the one idle server, and he is warned for the Job; bob idle
    enough during the countdown does not take dave's place (a warning is carried out)."""
    await bob.locator(TOAST, has_text=OVER).wait_for(state="detached")
    await forget_alerts(bob)
    await run_in_new_kernel(hub, "bob", "import time; time.sleep(900)", until="execute_input")
    busy = {"bob": "busy", "dave": "idle"}
    await eventually(lambda: activity_is(hub, busy), 60, "bob busy, dave idle, as reported")
    await queue_one_slice_job(cluster, "train-planned-2")
    await dave.locator(TOAST, has_text="will be freed").wait_for(timeout=60_000)
    dave_warned_at = plan_row(console(hub), "dave")["warned_at"]
    assert dave_warned_at is not None

    # bob's kernel ends: his server is idle enough (2 s) well before dave's deadline (45 s).
    stop_kernels(hub, "bob")

    async def bob_idle_enough() -> bool:
        row = plan_row(console(hub), "bob")
        return row.get("activity") == "idle" and (row.get("idle_seconds") or 0) >= 5

    await eventually(bob_idle_enough, 30, "bob's server idle past idle_after")
    for _ in range(5):  # some cycles with both idle: dave's warning stands, bob is not warned
        answer = console(hub)
        assert counting_down(plan_row(answer, "dave")), plan_row(answer, "dave")
        assert plan_row(answer, "dave")["warned_at"] == dave_warned_at
        assert not counting_down(plan_row(answer, "bob")), plan_row(answer, "bob")
        await bob.wait_for_timeout(1000)

    async def dave_stopped() -> bool:
        return hub.server("dave") is None

    await eventually(dave_stopped, WARN_BEFORE + 60, "the hub to stop dave's server")
    assert hub.server("bob") is not None
    assert about_reclaim(await alerts_seen(bob)) == [], await alerts_seen(bob)
    seen = await alerts_seen(dave)
    assert not [s for s in seen if OVER in s], seen
    # the events from dave's warning on (the journal's times and the plan's, to the second)
    start = when(dave_warned_at) - timedelta(seconds=2)
    since = [e for e in console(hub)["events"] if when(e["at"]) >= start]
    assert not [e for e in since if e["user"] == "bob"], since
    dave_events = {e["event"] for e in since if e["user"] == "dave"}
    assert "withdraw" not in dave_events, since
    assert "reclaim" in dave_events, since


async def queue_one_slice_job(cluster: Cluster, name: str) -> None:
    async with cluster.api("team-a", "alice") as api:  # team A's Job (its ServiceAccount)
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            one_slice_job(name),  # type: ignore[arg-type]
        )

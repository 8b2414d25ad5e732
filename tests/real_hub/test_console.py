"""The GPU console on the real cluster with a real hub (docs/console.md): who may see what, the
live plan is what ``gpuaas-admin --explain`` prints for the service's own snapshot, the policy
preview (field paths; a shorter idle_after shows more reclaims and nothing changes), the
export, a server's standing; and in Chromium: the page through the hub's OAuth with two teams
and a warned workbench (screenshot in docs/), the warning and the sidebar's policy line.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.console_page import screenshot_whole, seen
from tests.support.hub import (
    WARNED,
    CullerHub,
    eventually,
    login,
    pod_of,
    run_culler_hub,
    training_job,
)
from tests.support.hub import service_get as get
from tests.support.lab_page import docs_image

pytestmark = pytest.mark.integration


POLICY = """\
report_stale_after: 30s
handoff_timeout: 2m
policies:
  - name: team-a-mig
    match: {teams: [team-a], kinds: [mig]}
    idle_after: 2s
    warn_before: 10m
  - name: team-b-slow
    match: {teams: [team-b], kinds: [mig]}
    idle_after: 1h
    reclaim: always
    warn_before: 10m
"""

# what carol's server's own token holds (the spawner's server_token_scopes, expanded)

LEAD = """
# bob leads team-a: the console for his team only
c.JupyterHub.load_roles.append({"name": "team-a-lead", "users": ["bob"],
    "scopes": ["custom:gpuaas:console!group=team-a", "access:services!service=gpuaas"]})
"""


@pytest.fixture(scope="module")
def console_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    state = tmp_path_factory.mktemp("console-hub")
    with run_culler_hub(cluster, state, policy_text=POLICY, extra_config=LEAD) as hub:
        yield hub


async def login_anywhere(browser: Any, hub: CullerHub, user: str) -> Any:
    """Log in (the hub may send a user with a running server straight to it)."""
    return await login(browser, hub, user, until=lambda url: "/hub/login" not in url, commit=True)


def row(answer: dict[str, Any], key: str) -> dict[str, Any] | None:
    return next((w for w in answer["workbenches"] if w["key"] == key), None)


@pytest.fixture(scope="module")
def warned(console_hub: CullerHub, cluster: Cluster) -> Iterator[CullerHub]:
    """alice (team-a) and carol (team-b) on a local 1g MIG slice each, idle; a team-a Job
    needing one slice queues: alice's is warned (10 min countdown), carol's is left alone."""
    hub = console_hub
    for user, team in (("alice", "team-a"), ("carol", "team-b")):
        r = hub.api("POST", f"/users/{user}/server", {"team": team, "offering": "local-mig-1g"})
        assert r.status in (201, 202), r
    for user in ("alice", "carol"):
        hub.wait_ready(user, timeout=120)
    job = training_job("console-train")
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1

    async def queue() -> None:
        async with cluster.api("team-a", "alice") as api:
            await client.BatchV1Api(api).create_namespaced_job("team-a", job)  # type: ignore[arg-type]

    asyncio.run(queue())
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        status, answer = get(hub, "api/console", hub.token)
        assert status == 200, answer
        alice, carol = row(answer, "alice"), row(answer, "carol")
        # alice warned, and carol's server's reports in (idle, not unknown): the tests below
        # compare what the policy does with both; on a loaded machine the reports come late.
        if alice and alice["action"] in ("warn", "wait") and carol and carol["activity"] == "idle":
            break
        time.sleep(1)
    else:
        raise AssertionError(f"alice not warned or carol not idle in the console: {alice} {carol}")
    try:
        yield hub
    finally:
        admin = [
            str(cluster.info.bin_dir / "kubectl"),
            "--kubeconfig",
            str(cluster.info.kubeconfig),
        ]
        subprocess.run([*admin, "-n", "team-a", "delete", "job", "console-train"], check=False)
        for user in ("alice", "carol"):
            hub.stop(user)


async def test_admin_sees_every_team_and_the_plan_explain_prints(
    warned: CullerHub, tmp_path: Path
) -> None:
    hub = warned
    # the same cycle in both answers: the console's plan and the snapshot of its inputs
    for _ in range(20):
        _, before = get(hub, "api/console", hub.token)
        status, snap = get(hub, "api/console/snapshot", hub.token)
        assert status == 200, snap
        _, after = get(hub, "api/console", hub.token)
        same = [a for a in (before, after) if a["decided_at"] == snap["now"]]
        if same:
            answer = same[0]
            break
        time.sleep(0.3)
    else:
        raise AssertionError("no console answer of the snapshot's cycle")
    assert answer["visible_teams"] is None
    assert {"team-a", "team-b"} <= {t["team"] for t in answer["teams"]}
    assert {"alice", "carol"} <= {w["key"] for w in answer["workbenches"]}
    carol = row(answer, "carol")
    assert carol is not None
    assert (carol["policy"], carol["action"], carol["code"]) == (
        "team-b-slow",
        "skip",
        "not-idle-yet",
    )
    team_a = next(t for t in answer["teams"] if t["team"] == "team-a")
    assert team_a["queued"]["workloads"] >= 1

    (tmp_path / "snap.json").write_text(json.dumps(snap))
    (tmp_path / "policy.yaml").write_text(POLICY)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuaas_service.cli",
            "--explain",
            "--json",
            "--policy",
            str(tmp_path / "policy.yaml"),
            "--snapshot",
            str(tmp_path / "snap.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    explained = {
        (e["user"] if not e["server"] else f"{e['user']}/{e['server']}"): e
        for e in map(json.loads, out.splitlines())
    }
    for w in answer["workbenches"]:
        e = explained[w["key"]]
        assert (w["action"], w["code"], w["reason"], w["policy"]) == (
            e["action"],
            e["code"],
            e["reason"],
            e["policy"],
        ), w["key"]


async def test_a_team_lead_sees_their_team_and_a_user_gets_403(warned: CullerHub) -> None:
    hub = warned
    status, lead = get(hub, "api/console", hub.user_token("bob"))
    assert status == 200, lead
    assert lead["visible_teams"] == ["team-a"]
    assert [t["team"] for t in lead["teams"]] == ["team-a"]
    assert {w["team"] for w in lead["workbenches"]} == {"team-a"}
    assert get(hub, "api/console/snapshot", hub.user_token("bob"))[0] == 403

    carol = hub.user_token("carol")
    for path in (
        "api/console",
        "console/",
        "api/console/export?format=csv",
        "api/console/snapshot",
    ):
        status, body = get(hub, path, carol)
        assert status == 403, (path, body)
    status, body = get(hub, "api/console/preview", carol, "POST", POLICY.encode())
    assert status == 403, body


async def test_every_gpu_with_its_holder_and_a_team_leads_share_of_it(
    warned: CullerHub, browser: Any
) -> None:
    """The per-GPU view: alice's and carol's MIG slices on the node agent's node, each with its
    holder, team, pool and activity, and what is free on each node; bob (team-a's lead) sees
    team-a's holdings alone (and what is free), in the API and on the page; carol (no console
    scope) gets 403."""
    hub = warned
    status, gpus = get(hub, "api/console/gpus", hub.token)
    assert status == 200, gpus
    held = {r["holder"]: r for r in gpus["devices"]}
    assert {"alice", "carol"} <= set(held), gpus
    for user, team in (("alice", "team-a"), ("carol", "team-b")):
        r = held[user]
        assert (r["team"], r["kind"], r["device"]) == (team, "mig", "MIG 1g.5gb"), r
        assert all((r["node"], r["pool"], r["since"])), r
        assert r["memory_cap_bytes"] == 5 << 30, r
    assert held["carol"]["state"] == "idle", held["carol"]
    assert held["carol"]["idle_since"], held["carol"]
    nodes = {n["node"] for n in gpus["nodes"]}
    assert {held["alice"]["node"], held["carol"]["node"]} <= nodes
    status, lead = get(hub, "api/console/gpus", hub.user_token("bob"))
    assert status == 200, lead
    assert lead["visible_teams"] == ["team-a"]
    # a team lead sees their team's holdings (and what is free: free rows name no team)
    assert {r["team"] for r in lead["devices"] if r["state"] != "free"} == {"team-a"}
    assert "alice" in {r["holder"] for r in lead["devices"]}
    assert get(hub, "api/console/gpus", hub.user_token("carol"))[0] == 403

    admin = await login_anywhere(browser, hub, "admin")
    await admin.goto(f"{hub.url}/services/gpuaas/console/")
    # the first screen: who holds what, what is idle, what is queued, what goes next
    for card in ("holds", "idle", "queued", "next"):
        await admin.locator(f"#overview #{card}").wait_for()
    await admin.locator("#overview #holds tr[data-team='team-a']").wait_for()
    await admin.locator("#overview #queued li[data-team='team-a']").wait_for()
    for user in ("alice", "carol"):
        gpu = admin.locator(f"#gpus tr[data-holder='{user}']")
        await gpu.wait_for()
        text = await seen(gpu)
        assert "MIG 1g.5gb" in text, text
        assert held[user]["node"] in text, text
    # filtered by team, then by state
    await admin.select_option("#g-team", "team-b")
    await admin.locator("#gpus tr[data-holder='alice']").wait_for(state="detached")
    assert await admin.locator("#gpus tr[data-holder='carol']").count() == 1
    await admin.select_option("#g-team", "")
    await admin.select_option("#g-state", "idle")
    await admin.locator("#gpus tr[data-holder='carol']").wait_for()
    assert await admin.locator("#gpus tbody tr:not([data-state='idle'])").count() == 0
    # teams: quota in a person's units, rows with nothing in them folded away
    team_a = admin.locator("#teams .team[data-team='team-a']")
    assert "MIG 1g.5gb" in await seen(team_a.locator("table.quota").first)
    assert await team_a.locator(".scale").count() >= 1

    lead_page = await login_anywhere(browser, hub, "bob")
    await lead_page.goto(f"{hub.url}/services/gpuaas/console/")
    await lead_page.locator("#gpus tr[data-holder='alice']").wait_for()
    assert await lead_page.locator("#gpus tr[data-holder='carol']").count() == 0
    others = "#gpus tbody tr:not([data-team='team-a']):not([data-state='free'])"
    assert await lead_page.locator(others).count() == 0
    assert "teams team-a" in await lead_page.locator("#status").inner_text()


async def test_free_gpus_per_node_from_the_node_objects(warned: CullerHub, browser: Any) -> None:
    """What nobody holds, per node and resource, read from the Node objects less the pods on
    them: the kwok H100 nodes' whole GPUs (8 each, nothing placed there in this module) and the
    agent's node's other devices; a team lead sees the same free rows; the page's "free"
    filter lists them."""
    hub = warned
    status, gpus = get(hub, "api/console/gpus", hub.token)
    assert status == 200, gpus
    held = {r["holder"]: r for r in gpus["devices"] if r["state"] != "free"}
    free = [r for r in gpus["devices"] if r["state"] == "free"]
    assert all((r["holder"], r["team"], r["holder_kind"]) == ("", "", "free") for r in free)
    h100 = {r["node"]: r for r in free if r["pool"] == ["h100"]}
    assert len(h100) == 2, free
    assert {(r["kind"], r["device"], r["gpu_equivalents"]) for r in h100.values()} == {
        ("gpu", "8 GPUs", "8")
    }
    agent = [r for r in free if r["node"] == held["alice"]["node"]]
    assert agent, free
    assert all("local" in r["pool"] for r in agent), agent
    # HAMi's cards, each its own row, read from HAMi's node annotation and the pods' records
    # (never from the nodes' gpumem/gpucores sums): nothing is placed on them in this module.
    l4 = [r for r in free if r["node"] == "l4-hami-0"]
    assert len(l4) == 4, l4
    assert all(r["kind"] == "fraction" for r in l4), l4
    assert all(r["uuids"] == [r["key"].split("/", 1)[1]] for r in l4), l4
    assert {r["device"] for r in l4} == {"NVIDIA L4: 10 vGPU slots, all its cores"}
    agent_cards = {r["device"] for r in agent if r["kind"] == "fraction"}
    assert agent_cards == {
        "NVIDIA L4: 4 vGPU slots, all its cores",
        "NVIDIA H100 80GB HBM3: 10 vGPU slots, all its cores",
    }, agent
    summary = {n["node"]: n for n in gpus["nodes"]}
    assert all(summary[n]["free_gpu_equivalents"] == "8" for n in h100), summary
    status, lead = get(hub, "api/console/gpus", hub.user_token("bob"))
    assert status == 200, lead
    assert {r["key"] for r in lead["devices"] if r["state"] == "free"} == {r["key"] for r in free}

    admin = await login_anywhere(browser, hub, "admin")
    await admin.goto(f"{hub.url}/services/gpuaas/console/")
    await admin.locator("#gpus tr[data-holder='alice']").wait_for()
    await admin.select_option("#g-state", "free")
    h100_row = admin.locator(f"#gpus tr[data-node='{min(h100)}'][data-state='free']")
    await h100_row.wait_for()
    assert "8 GPUs" in await seen(h100_row)
    assert await admin.locator("#gpus tbody tr:not([data-state='free'])").count() == 0
    assert "8 GPU-eq. free" in await seen(admin.locator("#gpu-nodes"))


async def test_policy_preview_paths_and_a_shorter_idle_after(
    warned: CullerHub, k8s: client.ApiClient
) -> None:
    hub = warned
    bad = b"policies:\n  - name: team-a-mig\n    idle_after: soon\n    reclaim: sometimes\n"
    status, body = get(hub, "api/console/preview", hub.token, "POST", bad)
    assert status == 400, body
    assert [e["path"] for e in body["errors"]] == ["policies[0].idle_after", "policies[0].reclaim"]

    # The preview decides on the last cycle: carol must have been idle past the shorter
    # idle_after in it (on a fast machine the tests before this one take under 2 s).
    async def carol_idle_3s() -> bool:
        carol = row(get(hub, "api/console", hub.token)[1], "carol")
        return carol is not None and (carol["idle_seconds"] or 0) >= 3

    await eventually(carol_idle_3s, 30, "carol idle for 3 s in the console")
    shorter = POLICY.replace("idle_after: 1h", "idle_after: 2s")
    status, body = get(hub, "api/console/preview", hub.token, "POST", shorter.encode())
    assert status == 200, body
    assert body["summary"]["warn"] + body["summary"]["reclaim"] > (
        body["summary_in_force"]["warn"] + body["summary_in_force"]["reclaim"]
    ), body["summary"]
    assert {"key": "carol", "now": "skip", "preview": "warn"} in body["changed"]
    # nothing changed: the policy in force, carol's next step, her pod
    time.sleep(3)
    _, answer = get(hub, "api/console", hub.token)
    assert "team-b-slow: " in answer["policy"]["in_force"]
    assert "idle after 1h" in answer["policy"]["in_force"]
    carol = row(answer, "carol")
    assert carol is not None
    assert carol["action"] == "skip"
    pod = await pod_of(k8s, "carol")
    assert pod is not None
    assert WARNED not in (pod["metadata"].get("annotations") or {})


async def test_export_and_a_servers_standing(warned: CullerHub) -> None:
    hub = warned

    async def counted() -> bool:
        status, body = get(hub, "api/console/export?format=json", hub.token)
        assert status == 200, body
        return any(r["user"] == "alice" and r["idle_hours"] > 0 for r in body["rows"])

    await eventually(counted, 30, "alice's idle GPU time in the export")
    status, text = get(hub, "api/console/export?format=csv", hub.token)
    assert status == 200
    assert text.splitlines()[0].startswith("day,team,user,offering,kind,allocated_hours")
    assert any(",team-a,alice,local-mig-1g,mig," in line for line in text.splitlines())

    server_token = hub.server_token("carol")  # her running server's own
    status, standing = get(hub, "api/reclaim/standing", server_token)
    assert status == 200, standing
    assert standing["known"] is True
    assert standing["policy"]["name"] == "team-b-slow"
    assert standing["policy"]["idle_after_seconds"] == 3600
    assert (standing["activity"], standing["code"]) == ("idle", "not-idle-yet")
    # a user's own token is not a server's: refused
    assert get(hub, "api/reclaim/standing", hub.user_token("carol"))[0] == 403


async def test_console_page_warning_and_policy_line_in_chromium(
    warned: CullerHub, browser: Any, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = warned
    admin = await login_anywhere(browser, hub, "admin")
    await admin.set_viewport_size({"width": 1400, "height": 1000})
    # found from the hub in one click: "GPU console" in the hub's navigation
    await admin.goto(f"{hub.url}/hub/home")
    await admin.get_by_role("link", name="GPU console").click()
    await admin.wait_for_url("**/services/gpuaas/console/")
    await admin.locator("#teams .team[data-team='team-a']").wait_for()
    await admin.locator("#teams .team[data-team='team-b']").wait_for()
    alice = admin.locator("#workbenches tr[data-key='alice']")
    await alice.locator(".act-warn, .act-wait").wait_for()
    # live: the page updates without a reload (the status line's time moves)
    first = await admin.locator("#status").inner_text()
    await admin.wait_for_function(
        "t => document.getElementById('status').textContent !== t", arg=first, timeout=20_000
    )
    # filter by team
    await admin.select_option("#f-team", "team-b")
    assert await admin.locator("#workbenches tbody tr").count() >= 1
    assert await alice.count() == 0
    await admin.select_option("#f-team", "")
    # the preview through the page: its XSRF token, the field errors, then a valid policy
    await admin.fill("#policy-text", "policies:\n  - name: x\n    idle_after: soon\n")
    await admin.click("#preview")
    await admin.locator(
        "#preview-result .errors code", has_text="policies[0].idle_after"
    ).wait_for()
    await admin.fill("#policy-text", POLICY.replace("idle_after: 1h", "idle_after: 2s"))
    await admin.click("#preview")
    changes = admin.locator("#preview-changes")
    await changes.get_by_role("cell", name="carol", exact=True).wait_for()
    carol_row = changes.locator("tr", has=admin.get_by_role("cell", name="carol", exact=True))
    assert "warn" in await carol_row.locator(".act-warn").inner_text()
    await screenshot_whole(admin, str(docs_image("console.png")))
    # a cookie-authenticated POST without the XSRF token is refused
    status = await admin.evaluate(
        "async () => (await fetch('../api/console/preview', {method: 'POST', body: 'x'})).status"
    )
    assert status == 403

    # alice's warning, said once in plain words; carol's sidebar says where she stands
    page = await login_anywhere(browser, hub, "alice")
    await page.goto(f"{hub.url}/hub/home")  # no console scope: no link to it
    assert await page.get_by_role("link", name="GPU console").count() == 0
    await page.goto(f"{hub.url}/user/alice/lab")
    await page.locator("[data-id='jupyter-gpuaas-panel']").click(timeout=90_000)
    banner = page.locator(".jp-gpuaas-reclaim")
    await banner.filter(has_text="will be freed at").wait_for(timeout=60_000)
    text = await banner.inner_text()
    assert "This MIG slice will be freed at" in text
    assert "Your team's job console-train is waiting for this MIG slice" in text, text
    assert text.count(" s)") + text.count("min)") == 1, text  # the countdown once
    assert "nvidia.com" not in await banner.locator(".jp-gpuaas-reclaim-reason").inner_text()
    await banner.locator(".jp-gpuaas-reclaim-details summary").click()
    assert (
        "nvidia.com/mig-1g.5gb" in await banner.locator(".jp-gpuaas-reclaim-details").inner_text()
    )

    carol = await login_anywhere(browser, hub, "carol")
    await carol.goto(f"{hub.url}/user/carol/lab")
    await carol.locator("[data-id='jupyter-gpuaas-panel']").click(timeout=90_000)
    line = carol.locator(".jp-gpuaas-reclaim-standing")
    await line.filter(has_text="Policy team-b-slow: idle for").wait_for(timeout=60_000)
    assert "reclaimed after 1 h idle" in await line.inner_text()

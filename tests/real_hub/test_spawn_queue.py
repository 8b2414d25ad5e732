"""Queued spawns and what a real hub does with them: the queue timeout and a hub restart.

Each test runs its own hub (devcluster/hub.py, the session hub's configuration) with the settings it
is about: a queue timeout of a few seconds, or ``cleanup_servers = False`` (as Zero-to-JupyterHub
runs it: servers outlive a hub restart). team-a's only local GPU goes to alice; bob's spawns of the
same offering wait in team-a's queue behind it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.hub import HubProcess, HubSettings
from devcluster.testing import Cluster
from gpuaas_spawner import hubcompat
from tests.support.hub import (
    FAILURE_LIMIT,
    Hub,
    eventually,
    login,
    nothing_left,
    pods_of,
    secret_value,
    spawn_counts,
)

pytestmark = pytest.mark.integration

LOCAL_GPU = {"team": "team-a", "offering": "local-gpu"}


@contextmanager
def run_hub(cluster: Cluster, state: Path, **settings: Any) -> Iterator[Hub]:
    token = secrets.token_hex(24)
    proc = HubProcess(
        HubSettings(
            state_dir=state,
            kubeconfig=cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig"),
            service_token=token,
            start_timeout=90,
            **settings,
        )
    )
    proc.start()
    try:
        yield Hub(proc, token)
    finally:
        proc.stop()


def queue_timeout_failure(hub: Hub, user: str) -> str:
    """Spawn ``user``'s server into the full queue; return what the hub tells them at the end."""
    r = hub.api("POST", f"/users/{user}/server", LOCAL_GPU, timeout=60)
    # The hub answers a spawn after slow_spawn_timeout (10 s) at the latest: a spawn that ended
    # before then is answered with its failure, a slower one with 202 and then its progress.
    if r.status == 202:
        events = hub.progress_events(user, until="Spawn failed", timeout=90)
        return str(events[-1]["message"])
    assert r.status == 400, r
    return str(r.body["message"])


async def test_queue_timeouts_are_clean_failures_that_do_not_count_towards_the_limit(
    cluster: Cluster, k8s: client.ApiClient, tmp_path: Path
) -> None:
    with run_hub(cluster, tmp_path, queue_timeout=3.0, poll_interval=0.5) as hub:
        config = hub.proc.config.read_text()
        assert f"c.Spawner.consecutive_failure_limit = {FAILURE_LIMIT}" in config
        r = hub.api("POST", "/users/alice/server", LOCAL_GPU)
        assert r.status in (201, 202), r
        try:
            hub.wait_ready("alice")
            # more queue timeouts in a row than the limit after which the hub exits on errors
            for _ in range(FAILURE_LIMIT + 1):
                message = queue_timeout_failure(hub, "bob")
                waited = r"waited under a minute in Team A's queue \(position 1\)"
                assert re.search(waited + " without getting a GPU", message), message
                assert "try again later or choose an offering with free quota" in message
                # the spawn page (progress stream) says the same to the user
                (event,) = hub.progress_events("bob", until="Spawn failed", timeout=30)
                assert event["failed"] is True
                assert event["message"] == f"Spawn failed: {message}", event
                assert hub.server("bob") is None
                await eventually(
                    lambda: nothing_left(k8s, "bob", "jupyter-bob"),
                    what="bob's pod, Workload and Secret gone after the queue timeout",
                )

            # JupyterHub counted them as failures the user caused, not as hub errors ...
            counts = spawn_counts(hub)
            if hubcompat.COUNTS_EVERY_FAILURE:  # 5.5: one "failure" status for everything
                assert counts.get(("failure", "")) == FAILURE_LIMIT + 1, counts
            else:
                assert counts.get(("failure", "queue_timeout")) == FAILURE_LIMIT + 1, counts
                assert sum(n for (st, _), n in counts.items() if st == "error") == 0, counts
            # ... so its consecutive-failure counter never moved (5.5 logs it from 2 on, 6.x
            # counts only errors) and it did not exit
            log = hub.proc.log_path.read_text(errors="replace")
            assert "consecutive spawns failed" not in log
            assert "Aborting due to" not in log
            assert hub.proc.proc is not None
            assert hub.proc.proc.poll() is None
            alice = hub.server("alice")
            assert alice is not None
            assert alice["ready"]
        finally:
            hub.stop("bob")
            hub.stop("alice")
        await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice")


@pytest.mark.e2e
async def test_a_hub_restart_ends_a_queued_spawn_and_the_user_is_told_on_the_next_visit(
    cluster: Cluster,
    k8s: client.ApiClient,
    tmp_path: Path,
    browser: Any,
) -> None:
    keep_servers = "c.JupyterHub.cleanup_servers = False  # servers outlive the hub process\n"
    with run_hub(cluster, tmp_path, queue_timeout=600.0, extra_config=keep_servers) as hub:
        r = hub.api("POST", "/users/alice/server", LOCAL_GPU)
        assert r.status in (201, 202), r
        try:
            hub.wait_ready("alice")
            r = hub.api("POST", "/users/bob/server", LOCAL_GPU)
            assert r.status == 202, r
            hub.progress_events("bob", until="position 1", timeout=60)

            hub.proc.stop()
            # the queued pod, its Workload and its Secret outlive the hub process
            (pod,) = await pods_of(k8s, "bob")
            assert pod["spec"].get("schedulingGates"), pod["spec"]
            assert await secret_value(k8s, "jupyter-bob-hub-token")

            hub.proc.start()
            # the new hub ends the spawn it cannot finish, and leaves nothing of it behind
            await eventually(
                lambda: nothing_left(k8s, "bob", "jupyter-bob"),
                timeout=90,
                what="bob's queued pod, Workload and Secret removed after the restart",
            )
            assert hub.server("bob") is None
            assert hub.wait_ready("alice")["ready"]  # a running server is kept

            # bob's next visit: the spawn form says what happened
            notice_text = "was waiting in Team A's queue when JupyterHub restarted"
            page = await login(browser, hub, "bob")
            await page.goto(f"{hub.url}/hub/spawn")
            notice = page.locator("#gpuaas-notice")
            await notice.wait_for()
            assert notice_text in await notice.inner_text()

            # ... and still after yet another restart: it is kept in the hub's database
            hub.proc.stop()
            hub.proc.start()
            await page.goto(f"{hub.url}/hub/spawn")
            await notice.wait_for()
            assert notice_text in await notice.inner_text()
            await page.context.close()

            # a new spawn of that server forgets it (here one cancelled while queued, which
            # the form then tells as leaving the queue)
            r = hub.api("POST", "/users/bob/server", LOCAL_GPU)
            assert r.status == 202, r
            hub.progress_events("bob", until="position 1", timeout=60)
            hub.stop("bob")
            await eventually(lambda: nothing_left(k8s, "bob", "jupyter-bob"), what="cancelled")
            page = await login(browser, hub, "bob")
            await page.goto(f"{hub.url}/hub/spawn")
            await page.locator("#gpuaas-form").wait_for()
            told = await page.locator("#gpuaas-notice").all_inner_texts()
            assert not any(notice_text in t for t in told), told
            assert any("You left the queue; nothing was started." in t for t in told), told
        finally:
            hub.stop("bob")
            hub.stop("alice")
        await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice")

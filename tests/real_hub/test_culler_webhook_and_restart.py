"""A webhook that never answers and a restart mid-countdown, on a real ``gpuaas-service`` under
the real hub, with real servers.

One scenario: bob's and carol's idle MIG workbenches are warned for a queued Job; the policy's
webhook accepts connections and never answers; the service is restarted in the middle of the
countdown. Then:

5 — the webhook was called and never answered, yet the warnings came and the stop came on
    time (within a few cycles of the deadline);
8 — after the restart, bob's server (its own token, ``GET api/reclaim``) gets its warning back
    with the same deadline, and the stop comes no sooner than ``save_lead`` after the first
    answer that said ``saving``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import (
    WARNED,
    CullerHub,
    delete_jobs,
    eventually,
    pod_of,
    run_culler_hub,
    training_job,
)

pytestmark = pytest.mark.integration

SAVE_LEAD = 8.0
WARN_BEFORE = 75  # room for the hub to notice the killed service and start it again (<= ~35 s)


class SilentWebhook:
    """Accepts connections, reads nothing, answers nothing, holds them open."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            self.held.append(conn)

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


@pytest.fixture(scope="module")
def webhook() -> Iterator[SilentWebhook]:
    hook = SilentWebhook()
    yield hook
    hook.close()


@pytest.fixture(scope="module")
def culler_hub(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, webhook: SilentWebhook
) -> Iterator[CullerHub]:
    # No snapshot before the stop: its wait (at most snapshot_timeout, after the deadline) is
    # test_reclaim_keeps_state.py's; here the stop's timing shows the webhook's alone.
    policy = f"""\
report_stale_after: 30s
handoff_timeout: 2m
snapshot_timeout: 0s
notify: {{webhook: "http://127.0.0.1:{webhook.port}/hook", timeout: 60s}}
policies:
  - name: local-mig
    match: {{kinds: [mig]}}
    idle_after: 2s
    warn_before: {WARN_BEFORE}s
"""
    state = tmp_path_factory.mktemp("culler-webhook-restart")
    with run_culler_hub(cluster, state, save_lead=SAVE_LEAD, policy_text=policy) as hub:
        yield hub


def reclaim_answer(hub: CullerHub, token: str) -> dict[str, Any] | None:
    req = urllib.request.Request(
        f"http://127.0.0.1:{hub.port}/services/gpuaas/api/reclaim",
        headers={"Authorization": f"token {token}"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            out: dict[str, Any] = json.loads(r.read())
            return out
    except (OSError, urllib.error.URLError):
        return None  # the service is restarting


def parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


async def test_a_silent_webhook_and_a_restart_mid_countdown_delay_nothing(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient, webhook: SilentWebhook
) -> None:
    hub = culler_hub
    spawns = {
        "bob": {"team": "team-a", "offering": "local-mig-1g"},
        "carol": {"team": "team-b", "offering": "local-mig-1g"},
    }
    hub.start_all(spawns)
    token = hub.server_token("bob")
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-webhook"),  # type: ignore[arg-type]
        )

    async def bob_warned() -> dict[str, Any] | None:
        pod = await pod_of(k8s, "bob")
        ann = (pod or {}).get("metadata", {}).get("annotations") or {}
        answer = reclaim_answer(hub, token) if WARNED in ann else None
        return answer if answer and answer["warning"] else None

    before = await eventually(bob_warned, 60, "the warning on bob's pod and in his banner")
    deadline = parse(before["warning"]["reclaim_at"])  # what bob was told

    async def webhook_called() -> bool:
        return len(webhook.held) >= 1

    await eventually(webhook_called, 20, "the webhook to be called")

    # The service is restarted in the middle of the countdown.
    old = hub.proc.service_pid()
    assert old is not None
    os.kill(old, signal.SIGTERM)

    async def restarted() -> dict[str, Any] | None:
        pid = hub.proc.service_pid()
        if pid is None or pid == old:
            return None
        answer = reclaim_answer(hub, token)
        return answer if answer and answer.get("warning") else None

    again = await eventually(restarted, 60, "the restarted service to show bob's warning")
    assert parse(again["warning"]["reclaim_at"]) == deadline  # the same deadline, from the pod
    left = (deadline - datetime.now(timezone.utc)).total_seconds()
    assert left > SAVE_LEAD, f"the restart took past the saving window ({left:.0f}s left)"

    # The sidebar's view until the stop: when "saving" first showed, when the server went.
    first_saving: float | None = None
    stopped_at: float | None = None
    limit = time.monotonic() + left + 60
    while time.monotonic() < limit:
        answer = reclaim_answer(hub, token)
        if answer and answer.get("warning") and answer["warning"]["saving"]:
            first_saving = first_saving or time.time()
        server = hub.server("bob")
        if server is None or server.get("pending") == "stop":
            stopped_at = time.time()
            break
        time.sleep(0.25)
    assert stopped_at is not None, "bob's server was never stopped"
    assert first_saving is not None, "the server was stopped without ever being told to save"
    # 8: never stopped before its sidebar has had "saving" for save_lead (0.5 s polling slack)
    assert stopped_at - first_saving >= SAVE_LEAD - 0.5, stopped_at - first_saving
    assert stopped_at >= deadline.timestamp() - 0.5
    # 5: the silent webhook (two warnings posted, never answered) held up nothing: the stop
    # came within a few one-second cycles of the deadline.
    assert stopped_at - deadline.timestamp() < 15, stopped_at - deadline.timestamp()
    assert len(webhook.held) >= 2
    # the deadline bob was told is the one kept on his pod (a restart reads it from there)
    pod = await pod_of(k8s, "bob")
    if pod is not None:  # (still Terminating)
        kept = pod["metadata"]["annotations"].get("gpuaas.jupyter.org/reclaim-deadline")
        assert kept is not None
        assert parse(kept) == deadline

    for user in spawns:
        hub.stop(user)
    await delete_jobs(cluster, k8s)

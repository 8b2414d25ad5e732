"""The gpuaas service's queue endpoint on the real cluster, with a real JupyterHub.

Team A's training quota (with everything it can borrow: the 16 h100 GPUs of the cohort) is
filled; alice submits three one-GPU Jobs and bob one, each labelled with their user name (the
admission policy checks the label names the submitter). Alice's endpoint lists exactly her three
at positions 1-3; when one is admitted, the others move up; bob sees only his.
"""

from __future__ import annotations

import asyncio
import time
import urllib.error
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.queue_hub import OPERATOR_TOKEN, QueueHub, queue_hub
from devcluster.testing import (
    Cluster,
    batch,
    clear_jobs,
    create_job,
    fill_training_quota,
    labelled_job,
    submit_in_order,
    wait_for,
    workload_of,
)
from jupyter_gpuaas.core.labels import USER_LABEL
from jupyter_gpuaas.server.queue import fetch_queue
from jupyter_gpuaas.server.service_client import ServiceClient

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueueHub]:
    with queue_hub(tmp_path_factory.mktemp("hub"), cluster.info.settings.state_dir) as qh:
        yield qh


@pytest.fixture
async def clean_team_a(cluster: Cluster) -> AsyncIterator[None]:
    await clear_jobs(cluster)
    yield
    await clear_jobs(cluster)


async def test_user_label_must_name_the_submitter(cluster: Cluster, clean_team_a: None) -> None:
    async with cluster.api("team-a", "bob") as bob:
        with pytest.raises(ApiException) as err:
            await batch(bob).create_namespaced_job("team-a", labelled_job("spoof", "alice"))
        assert err.value.status in (403, 422)
        assert "must name the submitter" in str(err.value.body)
        job = await create_job(bob, "team-a", labelled_job("own", "bob"))
        # Kueue copies the vouched-for label onto the Workload (labelKeysToCopy).
        wl = await wait_for(
            "bob's Workload", lambda: workload_of(bob, "team-a", job["metadata"]["uid"])
        )
        assert wl["metadata"]["labels"][USER_LABEL] == "bob"
        # Relabelling an existing Job to someone else is refused too.
        patch = {"metadata": {"labels": {USER_LABEL: "alice"}}}
        with pytest.raises(ApiException):
            await batch(bob).patch_namespaced_job("own", "team-a", patch)


async def _positions(
    hub: QueueHub, token: str, want: list[tuple[str, int]], timeout: float = 30
) -> dict[str, Any]:
    last: dict[str, Any] = {}

    async def probe() -> dict[str, Any] | None:
        nonlocal last
        last = await asyncio.to_thread(hub.queue, token)
        got = [(i["name"], i["position_in_local_queue"]) for i in last["items"]]
        return last if got == want else None

    try:
        return await wait_for(f"positions {want}", probe, timeout, every=0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}; last answer: {last}") from e


async def test_queue_positions_per_user(
    cluster: Cluster, hub: QueueHub, clean_team_a: None
) -> None:
    alice_token = hub.user_token("alice")
    bob_token = hub.user_token("bob")
    async with cluster.api("team-a", "alice") as alice, cluster.api("team-a", "bob") as bob:
        # Fill what team A's training queue can use: 16 h100 GPUs (own 6 + borrowed 10).
        await fill_training_quota(alice)
        await submit_in_order(alice, "alice", ["a1", "a2", "a3"])
        await create_job(bob, "team-a", labelled_job("b1", "bob"))

        mine = await _positions(hub, alice_token, [("a1", 1), ("a2", 2), ("a3", 3)])
        assert [i["position_in_cluster_queue"] for i in mine["items"]] == [1, 2, 3]
        first = mine["items"][0]
        assert first["kind"] == "job"
        assert first["cluster_queue"] == "team-a-training"
        assert first["team"] == "team-a"
        assert first["resources"]["nvidia.com/gpu"] == "1"
        assert first["gpu_equivalents"] == "1"
        assert first["waited_seconds"] is not None
        assert "template" not in str(mine)
        assert "sleep" not in str(mine)

        # Team counts come from the ClusterQueue's status, which Kueue writes some time after
        # the positions (seconds on a loaded machine): wait for them to catch up.
        async def team_a_counted() -> dict[str, Any] | None:
            answer = await asyncio.to_thread(hub.queue, alice_token)
            team = next((t for t in answer["teams"] if t["team"] == "team-a"), None)
            return team if team and team["admitted"] >= 3 and team["pending"] >= 3 else None

        await wait_for("team A's admitted and pending counts", team_a_counted, 30, every=0.5)

        theirs = await _positions(hub, bob_token, [("b1", 4)])
        assert all(i["name"] == "b1" for i in theirs["items"])

        # The server extension's path: the same answer with the server's own token.
        via_ext = await fetch_queue(ServiceClient(hub.service_url, alice_token))
        assert [i["name"] for i in via_ext["items"]] == ["a1", "a2", "a3"]

        # One GPU frees up: a1 is admitted, a2 and a3 move up (bob too).
        await batch(alice).delete_namespaced_job(
            "fill-1", "team-a", propagation_policy="Background"
        )
        started = time.monotonic()
        await _positions(hub, alice_token, [("a2", 1), ("a3", 2)])
        moved_after = time.monotonic() - started
        await _positions(hub, bob_token, [("b1", 3)])
        print(f"positions moved {moved_after:.1f}s after the admission was made possible")

        health = hub.request("/services/gpuaas/api/health", OPERATOR_TOKEN)
        assert "team-a/training" in health["polled_queues"]


async def test_queue_refuses_strangers_and_reports_a_down_service(hub: QueueHub) -> None:
    with pytest.raises(urllib.error.HTTPError) as err:
        hub.queue("not-a-token")
    assert err.value.code in (401, 403)
    # A token without access:services!service=gpuaas is refused.
    plain = hub.user_token("carol", ["read:users:activity!user"])
    with pytest.raises(urllib.error.HTTPError) as err:
        hub.queue(plain)
    assert err.value.code == 403
    token = hub.user_token("carol")
    empty = hub.queue(token)
    assert empty["items"] == []
    assert empty["user"] == "carol"
    down = await fetch_queue(ServiceClient("http://127.0.0.1:9/services/gpuaas/", token, timeout=2))
    assert down["error_kind"] == "service_unavailable"
    assert down["items"] == []

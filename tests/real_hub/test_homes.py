"""Users' homes on persistent volumes, as Zero to JupyterHub keeps them (real hub and cluster).

The hub of these tests has KubeSpawner's storage settings as z2jh's defaults (a claim per server
of the cluster's default StorageClass, mounted at the home); the dev cluster provisions the
claims and the node agent gives each server its volume's directory as its home.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from devcluster.testing import Cluster
from tests.support.hub import USERS_NS, Hub, delete_home, eventually, no_pods, own_hub

pytestmark = pytest.mark.integration

NOTE = {"type": "file", "format": "text", "content": "results of a long afternoon"}


@pytest.fixture
def homes_hub(cluster: Cluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Hub]:
    extra = getattr(request, "param", "")
    with own_hub(cluster, tmp_path, persistent_homes=True, extra_config=extra) as hub:
        yield hub


async def test_files_are_kept_when_the_server_stops_and_starts_on_another_gpu(
    homes_hub: Hub, k8s: client.ApiClient
) -> None:
    hub = homes_hub
    try:
        hub.start_all({"alice": {"team": "team-a", "offering": "local-mig-1g"}})
        hub.contents("alice", "notes.txt", NOTE)
        hub.stop("alice")
        await eventually(lambda: no_pods(k8s, "alice"), what="alice's pod gone")
        # back on another offering (the way up to a bigger GPU is such a switch)
        hub.start_all({"alice": {"team": "team-a", "offering": "local-quarter"}})
        assert hub.contents("alice", "notes.txt")["content"] == NOTE["content"]
    finally:
        hub.stop("alice")
        await eventually(lambda: no_pods(k8s, "alice"), what="alice's pod gone")
        await delete_home(k8s, "alice")


@pytest.mark.parametrize("homes_hub", ['c.KubeSpawner.storage_capacity = "50Gi"\n'], indirect=True)
async def test_a_home_that_cannot_be_provisioned_fails_the_start_saying_so(
    homes_hub: Hub, k8s: client.ApiClient
) -> None:
    hub = homes_hub
    try:
        r = hub.api("POST", "/users/bob/server", {"team": "team-a", "offering": "cpu"}, timeout=60)
        if r.status == 202:  # slower than slow_spawn_timeout: the failure is on the stream
            events = hub.progress_events("bob", until="Spawn failed", timeout=90)
            message = str(events[-1]["message"]).removeprefix("Spawn failed: ")
        else:
            assert r.status == 503, r  # the cluster's fault, not the user's request
            message = str(r.body["message"])
        assert message.startswith(
            "The storage for your home folder could not be created, so your server cannot start:"
        ), message
        assert "50Gi" in message, message  # the provisioner's reason
        assert "Nothing of yours was changed. Tell an admin" in message
        assert hub.server("bob") is None
        await eventually(lambda: no_pods(k8s, "bob"), what="bob's pod gone")
        assert hub.api("GET", "/users/bob").status == 200  # the hub goes on
    finally:
        hub.stop("bob")
        await delete_home(k8s, "bob")


async def _claim_exists(k8s: client.ApiClient, user: str) -> bool:
    try:
        await client.CoreV1Api(k8s).read_namespaced_persistent_volume_claim(
            f"claim-{user}", USERS_NS
        )
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


async def test_a_home_claim_deleted_behind_the_hubs_back_is_made_again(
    homes_hub: Hub, k8s: client.ApiClient
) -> None:
    """The hub's saved state names carol's claim (KubeSpawner then never creates it
    again); an admin, or a new cluster under a kept hub, removed it. Her next start makes it
    again and her server runs, on a new, empty home she is told about, instead of waiting for
    a node until the start timeout."""
    hub, user = homes_hub, "carol"
    options = {"team": "team-b", "offering": "cpu"}
    try:
        hub.start_all({user: options})
        hub.contents(user, "notes.txt", NOTE)
        hub.stop(user)
        await eventually(lambda: no_pods(k8s, user), what=f"{user}'s pod gone")
        await delete_home(k8s, user)
        await eventually(
            lambda: _not(_claim_exists(k8s, user)), timeout=60, what=f"claim-{user} gone"
        )
        r = hub.api("POST", f"/users/{user}/server", options)
        assert r.status in (201, 202), r
        if r.status == 202:
            events = hub.progress_events(user, until="was no longer in the cluster", timeout=60)
            assert f"volume claim claim-{user}" in str(events[-1]["message"])
        hub.wait_ready(user, timeout=120)  # before the fix: "waiting for a free node", then out
        assert await _claim_exists(k8s, user)
        assert f"event=home-claim-missing user={user} server= claim=claim-{user}" in (
            hub.proc.log_path.read_text()
        )
        listed = [f["name"] for f in hub.contents(user, "")["content"]]
        assert "notes.txt" not in listed  # a new, empty home: what the message said
    finally:
        hub.stop(user)
        await eventually(lambda: no_pods(k8s, user), what=f"{user}'s pod gone")
        await delete_home(k8s, user)


async def _not(check: Awaitable[bool]) -> bool:
    return not await check

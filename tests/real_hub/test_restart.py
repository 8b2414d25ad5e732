"""Quick stop-and-start of a server through the real hub: each start ends in a running server.

KubeSpawner reuses the pod name (``jupyter-<user>``): a restart creates the new pod the moment
the old one is gone, which is when anything finishing the old pod by name alone would hit the
new one instead. Each round here stops the server, starts it again at once, and checks
that the new pod (a new UID) runs, is Ready and serves the user through the hub's proxy.
"""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
from kubernetes_asyncio import client

from tests.support.hub import USERS_NS, Hub, eventually, nothing_left, pods_of

pytestmark = pytest.mark.integration

RESTART_ROUNDS = 10
USER = "bob"  # team-a; the other hub tests stop his server when they are done with it
OPTIONS = {"team": "team-a", "offering": "local-mig-1g"}


def _status(url: str, token: str) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=20) as r:
        return int(r.status)


async def test_quick_stop_and_start_rounds_each_end_in_a_ready_server(
    hub: Hub, k8s: client.ApiClient
) -> None:
    token = hub.user_token(USER)
    uids: list[str] = []
    try:
        for i in range(RESTART_ROUNDS):
            r = hub.api("POST", f"/users/{USER}/server", OPTIONS)
            assert r.status in (201, 202), (i, r)
            server = await asyncio.to_thread(hub.wait_ready, USER)
            assert server["ready"], (i, server)
            (pod,) = await pods_of(k8s, USER)
            uid = pod["metadata"]["uid"]
            assert uid not in uids, f"round {i}: the hub reports a pod of an earlier round"
            uids.append(uid)
            assert pod["metadata"]["name"] == f"jupyter-{USER}"
            assert pod["status"]["phase"] == "Running"
            assert not pod["metadata"].get("deletionTimestamp"), (i, pod["metadata"])
            ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Ready"]
            assert ready == "True", (i, pod["status"])
            # the user reaches this server (the new pod's) through the proxy
            code = await asyncio.to_thread(_status, f"{hub.url}/user/{USER}/api/status", token)
            assert code == 200
            (again,) = await pods_of(k8s, USER)
            assert again["metadata"]["uid"] == uid, f"round {i}: the new pod was replaced"
            await asyncio.to_thread(hub.stop, USER)
    finally:
        await asyncio.to_thread(hub.stop, USER)
    assert len(uids) == RESTART_ROUNDS
    await eventually(
        lambda: nothing_left(k8s, USER, f"jupyter-{USER}"),
        what=f"{USER}'s pod/Workload/Secret in {USERS_NS}",
    )

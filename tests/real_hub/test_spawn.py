"""GPU spawns through a real JupyterHub on the real cluster (Kueue, node agent, singleuser)."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest
from kubernetes_asyncio import client

from tests.support.hub import (
    KUEUE,
    USERS_NS,
    Hub,
    eventually,
    nothing_left,
    pods_of,
    secret_value,
    usage_of,
    workloads_of,
)

pytestmark = pytest.mark.integration


def _get(url: str, token: str) -> int:
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=20) as r:
        return int(r.status)


async def test_mig_notebook_is_admitted_runs_on_the_node_agent_and_answers(
    hub: Hub, k8s: client.ApiClient
) -> None:
    r = hub.api("POST", "/users/alice/server", {"team": "team-a", "offering": "local-mig-1g"})
    assert r.status in (201, 202), r
    try:
        server = hub.wait_ready("alice")
        # what the server got, in canonical form (the request named no count, image or size)
        assert server["user_options"] == {
            "team": "team-a",
            "offering": "local-mig-1g",
            "count": 1,
            "image": "local-python",
            "size": "small",
        }
        (pod,) = await pods_of(k8s, "alice")
        labels = pod["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
        assert labels["kueue.x-k8s.io/priority-class"] == "interactive"
        assert pod["spec"]["nodeName"] == "local-0"
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["podIP"].startswith("127.")
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert limits["nvidia.com/mig-1g.5gb"] == "1"
        assert any(v.get("emptyDir", {}).get("medium") == "Memory" for v in pod["spec"]["volumes"])
        (wl,) = await workloads_of(k8s, {pod["metadata"]["name"]})
        conds = {c["type"]: c["status"] for c in wl["status"]["conditions"]}
        assert conds.get("Admitted") == "True"
        assert wl["status"]["admission"]["clusterQueue"] == "team-a-notebooks"

        # the user's server answers through the hub's proxy, with the user's own token
        token = hub.user_token("alice")
        assert _get(f"{hub.url}/user/alice/api/status", token) == 200
        # ... and its GPU extension reads the simulated GPUs
        usage = usage_of(hub, "alice")
        assert usage["source"] == "simulated", usage
        # ... of its own allocation only: the node agent handed it one 1g.5gb MIG device, so
        # it sees that device under its parent GPU, not the node's other GPUs.
        assert [(d["mig_profile"], d["parent_uuid"] is None) for d in usage["devices"]] == [
            (None, True),
            ("1g.5gb", False),
        ], usage["devices"]

        # no pod spec or Workload holds the server's hub token (it is in the Secret only)
        secret_name = f"{pod['metadata']['name']}-hub-token"
        hub_token = await secret_value(k8s, secret_name)
        assert hub_token
        assert hub_token not in json.dumps(pod)
        assert hub_token not in json.dumps(wl)
        secret = await client.CoreV1Api(k8s).read_namespaced_secret(secret_name, USERS_NS)
        owners = [(o.kind, o.name) for o in secret.metadata.owner_references or []]
        assert owners == [("Pod", pod["metadata"]["name"])]
    finally:
        hub.stop("alice")
    await eventually(
        lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice's pod/Workload/Secret"
    )


async def test_full_quota_queues_with_position_then_starts_when_freed(
    hub: Hub, k8s: client.ApiClient
) -> None:
    # team-a's whole local GPU quota (1 GPU) goes to alice
    r = hub.api("POST", "/users/alice/server", {"team": "team-a", "offering": "local-gpu"})
    assert r.status in (201, 202), r
    try:
        hub.wait_ready("alice")
        r = hub.api("POST", "/users/bob/server", {"team": "team-a", "offering": "local-gpu"})
        assert r.status == 202, r  # pending: queued
        events = hub.progress_events("bob", until="position 1", timeout=60)
        assert "Queued in Team A: position 1" in events[-1]["message"]
        (pod,) = await pods_of(k8s, "bob")
        assert pod["spec"].get("schedulingGates"), pod["spec"]
        # the queued server's token is not in its pod or Workload either
        token = await secret_value(k8s, "jupyter-bob-hub-token")
        assert token
        for wl in await workloads_of(k8s, {"jupyter-bob"}):
            assert token not in json.dumps(wl)
        assert token not in json.dumps(pod)

        hub.stop("alice")  # quota freed
        server = hub.wait_ready("bob", timeout=90)
        assert server["ready"]
        (pod,) = await pods_of(k8s, "bob")
        assert pod["spec"]["nodeName"] == "local-0"
    finally:
        hub.stop("bob")
        hub.stop("alice")
    for user in ("alice", "bob"):
        await eventually(lambda u=user: nothing_left(k8s, u, f"jupyter-{u}"), what=user)


async def test_cancelling_a_queued_spawn_leaves_nothing(hub: Hub, k8s: client.ApiClient) -> None:
    r = hub.api("POST", "/users/alice/server", {"team": "team-a", "offering": "local-gpu"})
    assert r.status in (201, 202), r
    try:
        hub.wait_ready("alice")
        r = hub.api("POST", "/users/bob/server", {"team": "team-a", "offering": "local-gpu"})
        assert r.status == 202, r
        hub.progress_events("bob", until="position 1", timeout=60)
        assert await workloads_of(k8s, {"jupyter-bob"})
        hub.stop("bob")  # cancel = DELETE of the pending server
        await eventually(
            lambda: nothing_left(k8s, "bob", "jupyter-bob"),
            timeout=30,
            what="bob's pod, Workload and Secret gone",
        )
        assert hub.server("bob") is None
    finally:
        hub.stop("bob")
        hub.stop("alice")
    await eventually(lambda: nothing_left(k8s, "alice", "jupyter-alice"), what="alice")


FORGED = [
    ({"team": "team-a", "offering": "nope"}, "Unknown offering 'nope'"),
    ({"team": "team-b", "offering": "local-mig-1g"}, "not one of your teams"),
    ({"team": "team-a", "offering": "local-mig-3g"}, "not available to Team A"),
    ({"team": "team-a", "offering": "h100", "count": 99}, "count must be 1 to 2"),
    ({"team": "team-a", "offering": "h100", "count": "2; rm"}, "count"),
    (
        {"team": "team-a", "offering": "local-mig-1g", "resources": {"nvidia.com/gpu": 8}},
        "Unknown option(s) 'resources'",
    ),
    (
        {"team": "team-a", "offering": "cpu", "extra_labels": {"kueue.x-k8s.io/queue-name": "b"}},
        "Unknown option(s) 'extra_labels'",
    ),
    ({"team": "team-a", "offering": "cpu", "local_queue": "team-b"}, "Unknown option(s)"),
    ({"team": "team-a", "offering": "cpu", "node_selector": {"a": "b"}}, "Unknown option(s)"),
    ({"team": "team-a", "offering": "cpu", "image": "evil/image:latest"}, "image"),
    ({"team": "team-a", "offering": "local-gpu", "size": "huge"}, "Size 'huge'"),
]


async def test_forged_rest_spawns_are_refused_and_create_nothing(
    hub: Hub, k8s: client.ApiClient
) -> None:
    token = hub.user_token("alice")  # alice forging her own requests
    for i, (body, message) in enumerate(FORGED):
        r = hub.api("POST", f"/users/alice/servers/forged{i}", body, token=token)
        assert r.status == 400, (body, r)
        assert message in r.body["message"], (body, r.body)
        s = hub.server("alice", f"forged{i}")
        assert s is None or not s.get("ready"), s
    # More refusals in a row than consecutive_failure_limit (5): JupyterHub 5.5 counts every
    # failed spawn and exits two seconds after the limit; refusals must not bring it down there.
    assert len(FORGED) > 5
    await asyncio.sleep(2.5)
    assert hub.proc.proc is not None
    assert hub.proc.proc.poll() is None, hub.proc.log_tail()
    assert hub.api("GET", "/users/alice").status == 200
    # nothing reached the cluster
    assert await pods_of(k8s, "alice") == []
    for i in range(len(FORGED)):
        assert await secret_value(k8s, f"jupyter-alice--forged{i}-hub-token") is None
    crd = client.CustomObjectsApi(k8s)
    listing = await crd.list_namespaced_custom_object(*KUEUE, USERS_NS, "workloads")
    assert [
        w["metadata"]["name"] for w in listing["items"] if "alice" in w["metadata"]["name"]
    ] == []

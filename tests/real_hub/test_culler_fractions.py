"""The culler's fractional hand-off on the real cluster with a real hub: two idle quarters of one
team on the node agent's HAMi L4 (local-0, flavor local-hami) are warned and stopped through the
hub for the team's queued half, which Kueue then admits and which starts as a real server with
its own cap; another team's idle quarter, which could not help (notebook queues never borrow),
is left alone. And quota is not placement: an idle half is reclaimed to free a whole H100 for an
admitted training Job whose card existed only as scraps.

What the quarters hold and what the half lacks are Kueue's transformed amounts
(``nvidia.com/total-gpumem``, ``nvidia.com/total-gpucores``): team-a's notebook quota on
local-hami is 2 vGPUs, 11264 MiB, 50 % (devcluster/manifests/30-cluster-queues.yaml).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster, create_job, delete_jobs
from jupyter_gpuaas.core import hami
from tests.support.hub import (
    WARNED,
    CullerHub,
    eventually,
    pod_of,
    run_culler_hub,
    usage_of,
    warnings_on,
    workloads_of,
)
from tests.support.shared_pool import whole_card_job

pytestmark = pytest.mark.integration

GiB = 1 << 30
TEAMS = {"team-a": ["alice", "bob", "erin"], "team-b": ["carol"]}
USERS = [u for users in TEAMS.values() for u in users]

POLICY = """\
report_stale_after: 30s
handoff_timeout: 2m
policies:
  - name: local-fractions
    match: {kinds: [fraction]}
    idle_after: 2s
    warn_before: 20s
"""


@pytest.fixture(scope="module")
def culler_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    state = tmp_path_factory.mktemp("culler-fractions")
    with run_culler_hub(cluster, state, policy_text=POLICY, teams=TEAMS) as hub:
        yield hub


@pytest.fixture(autouse=True)
async def nothing_left_over(culler_hub: CullerHub, k8s: client.ApiClient) -> AsyncIterator[None]:
    yield
    for user in USERS:
        culler_hub.stop(user)

    async def gone() -> bool:
        return [await pod_of(k8s, u) for u in USERS] == [None] * len(USERS)

    await eventually(gone, 90, "every test server's pod to go")


async def test_two_idle_quarters_are_reclaimed_for_the_teams_queued_half(
    culler_hub: CullerHub, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    quarter = {"team": "team-a", "offering": "local-quarter"}
    hub.start_all(
        {"alice": quarter, "bob": quarter, "carol": {**quarter, "team": "team-b"}}, timeout=180
    )
    for user in ("alice", "bob", "carol"):
        pod = await pod_of(k8s, user)
        assert pod is not None
        assert pod["spec"]["nodeName"] == "local-0"
        assert WARNED not in (pod["metadata"].get("annotations") or {}), user

    # team-a's fractional quota on local-hami is used: erin's half queues.
    r = hub.api("POST", "/users/erin/server", {"team": "team-a", "offering": "local-half"})
    assert r.status == 202, r
    events = hub.progress_events("erin", until="position 1", timeout=60)
    assert "Queued in Team A: position 1" in events[-1]["message"]
    t_queued = time.monotonic()
    erin = await pod_of(k8s, "erin")
    assert erin is not None
    assert erin["spec"].get("schedulingGates"), erin["spec"]

    async def warned() -> list[dict[str, Any]] | None:
        pods = [await pod_of(k8s, u) for u in ("alice", "bob")]
        if all(p and WARNED in (p["metadata"].get("annotations") or {}) for p in pods):
            return [p for p in pods if p]
        return None

    warned_pods = await eventually(warned, 60, "the warnings on alice's and bob's quarters")

    async def one_warning_event_each() -> bool:
        return [await warnings_on(k8s, p) for p in warned_pods] == [1, 1]

    await eventually(one_warning_event_each, 30, "a GPUReclaimWarning Event on each quarter")
    carol = await pod_of(k8s, "carol")
    assert carol is not None
    assert WARNED not in (carol["metadata"].get("annotations") or {})

    # After the 20 s warning both are stopped through the hub; carol's quarter stays.
    async def stopped() -> bool:
        return all(hub.server(u) is None for u in ("alice", "bob"))

    await eventually(stopped, 90, "the hub to stop alice's and bob's quarters")
    assert hub.server("carol") is not None

    # Kueue admits the half on local-hami and erin's server starts, capped at 11 GiB.
    server = hub.wait_ready("erin", timeout=120)
    assert server["ready"]
    elapsed = time.monotonic() - t_queued
    print(f"half queued -> its server ready through the culler: {elapsed:.1f}s")
    erin = await pod_of(k8s, "erin")
    assert erin is not None
    (wl,) = await workloads_of(k8s, {erin["metadata"]["name"]})
    (assignment,) = wl["status"]["admission"]["podSetAssignments"]
    assert set(assignment["flavors"].values()) == {"local-hami"}, assignment
    assert assignment["resourceUsage"]["nvidia.com/total-gpumem"] == "11264", assignment
    (device,) = usage_of(hub, "erin")["devices"]
    assert device["cap"]["memory"] == 11 * GiB, device
    assert device["cap"]["cores_percent"] == 50, device
    assert hub.server("carol") is not None

    async def handed_off() -> bool:
        return "gpuaas_handoff_latency_seconds_count 1.0" in hub.metrics()

    await eventually(handed_off, 30, "the hand-off in the metrics")
    assert 'gpuaas_reclaimed_gpu_equivalents_total{team="team-a"} 0.5' in hub.metrics()
    records = hub.audit()
    assert {r["user"] for r in records if r.get("action") == "reclaim"} == {"alice", "bob"}
    assert any(r.get("event") == "culler.handoff" and r["result"] == "succeeded" for r in records)


async def _team_a_pods(api: client.ApiClient) -> list[Any]:
    return list((await client.CoreV1Api(api).list_namespaced_pod("team-a")).items)


async def _event_of(api: client.ApiClient, uid: str, reason: str) -> Any:
    events = await client.CoreV1Api(api).list_namespaced_event(
        "team-a", field_selector=f"involvedObject.uid={uid}"
    )
    return next((e for e in events.items if e.reason == reason), None)


async def _cards_of(k8s: client.ApiClient, users: Sequence[str]) -> dict[str, str]:
    """The card (HAMi's allocation record's first device) each user's share is on."""
    cards = {}
    for user in users:
        pod = await pod_of(k8s, user)
        assert pod is not None
        record = pod["metadata"]["annotations"][hami.ALLOCATED]
        cards[user] = record.split(",", 1)[0]
    return cards


async def _warned(k8s: client.ApiClient, users: Sequence[str]) -> list[str] | None:
    """The users whose pod carries the reclaim warning (None: nobody's yet)."""
    warned = []
    for user in users:
        pod = await pod_of(k8s, user)
        if pod and WARNED in (pod["metadata"].get("annotations") or {}):
            warned.append(user)
    return warned or None


async def test_an_idle_share_is_reclaimed_to_free_a_whole_card_for_an_admitted_job(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    """Quota is not placement: two idle halves on the two H100s of local-0 leave a whole
    H100 of quota and no whole card. Kueue admits a whole-card Job, whose pod HAMi's scheduler
    leaves Pending (PodScheduled=False, Unschedulable, its FilteringFailed reasons); the service
    warns the share on the card it chooses, stops it after the countdown, and HAMi's scheduler
    places the Job there (FilteringSucceed). The other share is left alone."""
    hub = culler_hub
    # the module's hub logs the earlier test's reclaims too: this test reads only its own
    earlier = len(hub.audit())
    half = {"team": "team-a", "offering": "local-h100-half"}
    # Binpacked: alice and carol fill one card, bob opens the other; carol then leaves.
    hub.start_all({"alice": half}, timeout=180)
    hub.start_all({"carol": {**half, "team": "team-b"}}, timeout=180)
    hub.start_all({"bob": half}, timeout=180)
    cards = await _cards_of(k8s, ("alice", "bob", "carol"))
    assert cards["alice"] == cards["carol"] != cards["bob"], cards
    hub.stop("carol")

    async def carol_gone() -> bool:
        return await pod_of(k8s, "carol") is None

    await eventually(carol_gone, 60, "carol's pod to go")

    async with cluster.api("team-a", "alice") as alice_api:
        await create_job(alice_api, "team-a", whole_card_job("defrag"))
        try:

            async def unschedulable() -> Any:
                for pod in await _team_a_pods(alice_api):
                    reasons = hami.unschedulable_reasons(alice_api.sanitize_for_serialization(pod))
                    if reasons.get(hami.CARD_INSUFFICIENT_MEMORY) == 2:
                        return pod
                return None

            job_pod = await eventually(
                unschedulable, 60, "the Job's pod Unschedulable: both cards lack memory"
            )
            failed = await eventually(
                lambda: _event_of(alice_api, job_pod.metadata.uid, hami.FILTERING_FAILED),
                30,
                "HAMi's FilteringFailed event on the Job's pod",
            )
            assert failed.type == "Warning"

            (chosen,) = await eventually(
                lambda: _warned(k8s, ("alice", "bob")), 60, "a warning on one of the halves"
            )
            other = "bob" if chosen == "alice" else "alice"
            pod = await pod_of(k8s, chosen)
            assert pod is not None
            told = pod["metadata"]["annotations"]["gpuaas.jupyter.org/reclaim-reason"]
            assert told.startswith(
                "a training Job needs a whole H100; your idle share is on the card it can use"
            ), told
            assert await warnings_on(k8s, pod) == 1

            # After the 20 s countdown the chosen half is stopped through the hub, and the Job
            # is placed on the card it held.
            async def stopped() -> bool:
                return hub.server(chosen) is None

            await eventually(stopped, 90, f"the hub to stop {chosen}'s half")
            placed = await eventually(
                lambda: _event_of(alice_api, job_pod.metadata.uid, hami.FILTERING_SUCCEED),
                60,
                "HAMi's FilteringSucceed event on the Job's pod",
            )
            assert placed.type == "Normal"
            running = await client.CoreV1Api(alice_api).read_namespaced_pod(
                job_pod.metadata.name, "team-a"
            )
            assert running.metadata.annotations[hami.ALLOCATED].startswith(f"{cards[chosen]},")
            assert hub.server(other) is not None
            other_pod = await pod_of(k8s, other)
            assert other_pod is not None
            assert WARNED not in (other_pod["metadata"].get("annotations") or {})
            records = hub.audit()[earlier:]
            reclaims = [r for r in records if r.get("action") == "reclaim"]
            assert [(r["user"], r["code"]) for r in reclaims] == [(chosen, "placement")]
            assert any(
                r.get("event") == "culler.target"
                and r["workload"] == f"team-a/{job_pod.metadata.name}"
                for r in records
            )
        finally:
            await delete_jobs(alice_api, "team-a")

"""The culler on the real cluster with a real hub: idle GPU workbenches are warned, then stopped
through the hub for a queued training Job, which Kueue then admits; a busy one is left alone.

The hub runs the gpuaas service (culler/gpuaas_service/app.py) as a managed service with a
short-duration policy; servers on local-0 are real jupyterhub-singleuser processes that report
their activity to it every second with their own tokens.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from gpuaas_service.reclaim.handoffs import HANDOFFS_CONFIGMAP
from jupyter_gpuaas.core.labels import STATE_KEY
from tests.support.hub import (
    KUEUE,
    USERS_NS,
    WARNED,
    CullerHub,
    delete_jobs,
    eventually,
    make_busy,
    pod_of,
    restart_service,
    run_culler_hub,
    snooze,
    training_job,
    warnings_on,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def culler_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    with run_culler_hub(cluster, tmp_path_factory.mktemp("culler-hub")) as hub:
        yield hub


@pytest.fixture(autouse=True)
async def nothing_left_over(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> AsyncIterator[None]:
    """Each test starts on an empty cluster, even after the one before it failed half-way."""
    yield
    for user in ("alice", "bob", "carol", "dave"):
        culler_hub.stop(user)
    await delete_jobs(cluster, k8s)


async def test_idle_workbenches_are_reclaimed_for_a_queued_job(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    spawns = {
        "alice": {"team": "team-a", "offering": "local-mig-1g"},
        "carol": {"team": "team-b", "offering": "local-mig-1g"},
        "dave": {"team": "team-b", "offering": "local-mig-3g"},
    }
    hub.start_all(spawns)
    await make_busy(hub, "dave")

    # Nothing is queued: idle as they are, nobody is warned.
    await asyncio.sleep(4)
    for user in spawns:
        pod = await pod_of(k8s, user)
        assert pod is not None
        assert WARNED not in (pod["metadata"].get("annotations") or {})

    # A training Job needing both local 1g.5gb slices queues behind the two idle notebooks
    # (one of team A's, one of team B's: each team's notebook queue holds one on local).
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-mig"),  # type: ignore[arg-type]
        )
    t_queued = time.monotonic()

    async def warned() -> bool:
        pods = [await pod_of(k8s, u) for u in ("alice", "carol")]
        return all(p and WARNED in (p["metadata"].get("annotations") or {}) for p in pods)

    await eventually(warned, 60, "the warnings on alice's and carol's pods")
    dave = await pod_of(k8s, "dave")
    assert dave is not None
    assert WARNED not in (dave["metadata"].get("annotations") or {})

    # The culler writes the Event just after the annotation: wait for it, do not race it.
    warned_pods = [p for p in [await pod_of(k8s, u) for u in ("alice", "carol")] if p]

    async def one_warning_event_each() -> bool:
        return [await warnings_on(k8s, p) for p in warned_pods] == [1, 1]

    await eventually(one_warning_event_each, 30, "a GPUReclaimWarning Event on each warned pod")

    # After the 20 s warning, both are stopped through the hub; the busy one keeps running.
    async def stopped() -> bool:
        return all(hub.server(u) is None for u in ("alice", "carol"))

    await eventually(stopped, 90, "the hub to stop alice and carol")
    assert hub.server("dave") is not None

    async def admitted() -> bool:
        crd = client.CustomObjectsApi(k8s)
        wls = await crd.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", "team-a", "workloads"
        )
        for w in wls["items"]:
            if "train-mig" in w["metadata"]["name"]:
                conds = {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
                return conds.get("Admitted") == "True"
        return False

    await eventually(admitted, 90, "Kueue to admit the Job")
    elapsed = time.monotonic() - t_queued
    print(f"queued -> admitted through the culler: {elapsed:.1f}s")

    async def handed_off() -> bool:
        return "gpuaas_handoff_latency_seconds_count 1.0" in hub.metrics()

    await eventually(handed_off, 30, "the hand-off in the metrics")
    text = hub.metrics()
    assert 'gpuaas_reclaimed_gpu_equivalents_total{team="team-a"}' in text
    assert 'gpuaas_reclaimed_gpu_equivalents_total{team="team-b"}' in text
    assert "alice" not in text
    records = hub.audit()
    reclaimed = {r["user"] for r in records if r.get("action") == "reclaim"}
    assert reclaimed == {"alice", "carol"}
    assert any(r.get("event") == "culler.handoff" and r["result"] == "succeeded" for r in records)
    # The hand-off is kept where a restarted culler finds it.
    async with cluster.api("jupyterhub", "gpuaas") as culler_api:  # the hub may not read it
        kept = await client.CoreV1Api(culler_api).read_namespaced_config_map(
            HANDOFFS_CONFIGMAP, USERS_NS
        )
    assert "train-mig" in kept.data[STATE_KEY]
    assert "handoff-succeeded" in kept.data[STATE_KEY]

    await _restart_queues_behind_the_handoff(hub, k8s, spawns["alice"])


async def _restart_queues_behind_the_handoff(
    hub: CullerHub, k8s: client.ApiClient, options: dict[str, Any]
) -> None:
    """alice starts again while the Job runs on her slice: her start queues behind it and says
    why, and the Job keeps running (the notebooks' queues take back only from lower priorities,
    and a restart after a reclaim has the lowest); once the Job is done, her server starts."""
    r = hub.api("POST", "/users/alice/server", options)
    assert r.status in (201, 202), r
    hub.progress_events("alice", until="rather than stopping it", timeout=60)
    crd = client.CustomObjectsApi(k8s)

    async def restart_tried() -> dict[str, Any] | None:
        pod = await pod_of(k8s, "alice")
        uid = pod["metadata"]["uid"] if pod else ""
        wls = await crd.list_namespaced_custom_object(*KUEUE, USERS_NS, "workloads")
        for w in wls["items"]:
            owners = {o["uid"] for o in w["metadata"].get("ownerReferences", [])}
            conds = {c["type"]: c for c in w.get("status", {}).get("conditions", [])}
            if uid in owners and "QuotaReserved" in conds:
                return dict(conds["QuotaReserved"])
        return None

    tried = await eventually(restart_tried, 30, "Kueue to try alice's restart")
    assert tried["status"] == "False", tried
    assert "preemption" not in tried["message"].lower(), tried  # none asked, none pending
    pod = await pod_of(k8s, "alice")
    assert pod is not None
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "interactive-after-reclaim"
    wls = await crd.list_namespaced_custom_object(*KUEUE, "team-a", "workloads")
    (train,) = [w for w in wls["items"] if "train-mig" in w["metadata"]["name"]]
    conds = {c["type"]: c["status"] for c in train.get("status", {}).get("conditions", [])}
    assert conds.get("Admitted") == "True", conds
    assert conds.get("Evicted") != "True", conds
    hub.wait_ready("alice", timeout=150)  # the Job sleeps 60 s, then frees both slices


async def test_restart_mid_warning_does_not_warn_twice_and_a_snooze_is_honoured(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    # bob (team-a) and dave (team-b): their policy warns 60 s ahead, room for a service restart
    # on a loaded machine before the snooze.
    spawns = {
        "bob": {"team": "team-a", "offering": "local-mig-1g"},
        "dave": {"team": "team-b", "offering": "local-mig-1g"},
    }
    hub.start_all(spawns)
    async with cluster.api("team-a", "bob") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-again"),  # type: ignore[arg-type]
        )

    async def both_warned() -> list[dict[str, Any]] | None:
        pods = [await pod_of(k8s, u) for u in spawns]
        if all(p and WARNED in (p["metadata"].get("annotations") or {}) for p in pods):
            return [p for p in pods if p]
        return None

    bob, dave = await eventually(both_warned, 60, "the warnings")
    warned_at = {p["metadata"]["name"]: p["metadata"]["annotations"][WARNED] for p in (bob, dave)}
    deadline = max(
        datetime.fromisoformat(w.replace("Z", "+00:00")) for w in warned_at.values()
    ) + timedelta(seconds=60)

    # The culler restarts in the middle of the countdown (the hub restarts its service).
    async def serving() -> bool:
        return "gpuaas_reclaim_decisions_total" in hub.metrics()

    # JupyterHub notices a managed service's exit at its next poll (Spawner.poll_interval, 30 s
    # with 10% jitter) and then starts it again: 30 s was a race.
    await restart_service(hub, serving, 60, "the hub to restart the gpuaas service")
    await asyncio.sleep(3)  # a few cycles of the new culler
    for p in (bob, dave):
        now = await pod_of(k8s, p["metadata"]["annotations"]["hub.jupyter.org/username"])
        assert now is not None
        assert now["metadata"]["annotations"].get(WARNED) == warned_at[p["metadata"]["name"]]
        assert await warnings_on(k8s, now) == 1
    assert hub.server("bob") is not None

    # "Keep my GPU" in bob's JupyterLab: through his server to the service.
    status, answer = snooze(hub, "bob")
    left = (deadline - datetime.now(timezone.utc)).total_seconds()
    assert left > 0, f"the restart and the snooze took longer than the 60 s warning ({-left:.0f}s)"
    assert status == 200, answer
    assert answer["allowed"] is True
    assert answer["snoozes_left"] == 0
    status, answer = snooze(hub, "bob")
    assert status == 409
    assert "no snoozes left" in answer["reason"]

    # Past the original deadline: bob is kept, dave alone frees too little, nobody stops.
    await asyncio.sleep(left + 5)
    assert hub.server("bob") is not None
    assert hub.server("dave") is not None
    b = await pod_of(k8s, "bob")
    d = await pod_of(k8s, "dave")
    assert b is not None
    assert d is not None
    assert b["metadata"]["annotations"]["gpuaas.jupyter.org/reclaim-snoozes-used"] == "1"
    assert WARNED not in d["metadata"]["annotations"]  # its warning is withdrawn

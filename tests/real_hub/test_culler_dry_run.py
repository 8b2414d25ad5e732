"""``GPUaaSService.culler_dry_run`` on the real cluster and hub: decisions logged, none acted on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from kubernetes_asyncio import client
from prometheus_client.parser import text_string_to_metric_families

from devcluster.testing import Cluster
from jupyter_gpuaas.core.labels import RECLAIM_OUTLOOK
from tests.support.hub import (
    WARNED,
    CullerHub,
    delete_jobs,
    pod_of,
    run_culler_hub,
    training_job,
    warnings_on,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def culler_hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    with run_culler_hub(cluster, tmp_path_factory.mktemp("culler-dry"), dry_run=True) as hub:
        yield hub


async def test_dry_run_changes_nothing(
    culler_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = culler_hub
    hub.start_all(
        {
            "alice": {"team": "team-a", "offering": "local-mig-1g"},
            "carol": {"team": "team-b", "offering": "local-mig-1g"},
        }
    )
    async with cluster.api("team-a", "alice") as api:
        await client.BatchV1Api(api).create_namespaced_job(
            "team-a",
            training_job("train-dry"),  # type: ignore[arg-type]
        )
    await asyncio.sleep(30)  # past idle_after + warn_before (2 s + 20 s)
    for user in ("alice", "carol"):
        assert hub.server(user) is not None
        pod = await pod_of(k8s, user)
        assert pod is not None
        # no warning or reclaim mark; the queue's outlook may be on a pod that waited a moment
        # in Kueue before its admission: it tells the waiting user, it acts on nothing
        assert not any(
            k.startswith("gpuaas.jupyter.org/reclaim-") and k != RECLAIM_OUTLOOK
            for k in pod["metadata"]["annotations"]
        )
        assert WARNED not in pod["metadata"]["annotations"]
        assert await warnings_on(k8s, pod) == 0
    records = [r for r in hub.audit() if r.get("event") == "culler.decision"]
    would = {r["user"] for r in records if r["action"] == "reclaim"}
    assert would == {"alice", "carol"}
    assert all(r["dry_run"] for r in records)
    # each known team's reclaim counters exist from the start, at 0; a dry run counts none
    reclaims = [
        s
        for family in text_string_to_metric_families(hub.metrics())
        for s in family.samples
        if s.name == "gpuaas_reclaims_total"
    ]
    assert {s.labels["team"] for s in reclaims} >= {"team-a", "team-b"}
    assert all(s.value == 0 for s in reclaims), reclaims
    for user in ("alice", "carol"):
        hub.stop(user)
    await delete_jobs(cluster, k8s)

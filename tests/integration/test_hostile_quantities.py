"""A team member's Job with a quantity of a huge exponent, on the real API server and Kueue.

The API server stores ``cpu: 1e10000000`` (as ``10e9999999``) and Kueue copies it into the
Workload. Every watch cache of the hub and the service reads Workloads through
``core/kueue.py``; exact arithmetic on 10^10000000 blocked their event loops for seconds per
event. Read as the service reads them, the hostile Workload costs what a clean one does, its GPU
request is still seen, and its unreadable cpu request reads as absent, said once in the log.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import (
    KUEUE,
    Cluster,
    clear_jobs,
    create_job,
    labelled_job,
    wait_for,
    workload_of,
)
from jupyter_gpuaas.core.kueue import WorkloadInfo, read_workload

pytestmark = pytest.mark.integration

HUGE = "1e10000000"


@pytest.fixture
async def clean_team_a(cluster: Cluster) -> AsyncIterator[None]:
    await clear_jobs(cluster)
    yield
    await clear_jobs(cluster)


def _with_cpu(job: dict[str, Any], cpu: str) -> dict[str, Any]:
    hostile = copy.deepcopy(job)
    container = hostile["spec"]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = cpu
    return hostile


def _read_all(items: list[dict[str, Any]], rounds: int) -> tuple[float, list[WorkloadInfo]]:
    """Seconds per round of reading every Workload, as each watch event and cycle does."""
    start = time.perf_counter()
    infos: list[WorkloadInfo] = []
    for _ in range(rounds):
        infos = [read_workload(item) for item in items]
    return (time.perf_counter() - start) / rounds, infos


async def test_a_huge_exponent_costs_what_a_clean_quantity_does(
    cluster: Cluster, clean_team_a: None, caplog: pytest.LogCaptureFixture
) -> None:
    async with cluster.api("team-a", "bob") as bob:
        clean = await create_job(bob, "team-a", labelled_job("clean", "bob"))
        hostile = await create_job(bob, "team-a", _with_cpu(labelled_job("huge", "bob"), HUGE))
        stored = hostile["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert stored["cpu"] != "1", "the API server must keep the huge quantity for this test"
        for job in (clean, hostile):
            uid = job["metadata"]["uid"]
            await wait_for("its Workload", partial(workload_of, bob, "team-a", uid))

    async with cluster.api("jupyterhub", "gpuaas") as service:  # as the service reads them
        listed = await client.CustomObjectsApi(service).list_namespaced_custom_object(
            *KUEUE, "team-a", "workloads"
        )
    items: list[dict[str, Any]] = listed["items"]
    by_job = {item["metadata"]["labels"]["kueue.x-k8s.io/job-uid"]: item for item in items}
    clean_items = [by_job[clean["metadata"]["uid"]]]
    hostile_items = [by_job[hostile["metadata"]["uid"]]]

    caplog.set_level(logging.WARNING, logger="jupyter_gpuaas.core.kueue")
    clean_seconds, _ = _read_all(clean_items, rounds=20)
    hostile_seconds, (info,) = _read_all(hostile_items, rounds=20)

    # Before the bound, one read of the hostile Workload took seconds; a clean one takes well
    # under a millisecond. The floor absorbs a loaded machine's noise on so small a figure.
    assert hostile_seconds <= max(2 * clean_seconds, 0.05), (hostile_seconds, clean_seconds)
    assert info.resources.get("nvidia.com/gpu") == 1
    assert "cpu" not in info.resources
    warnings = [r.getMessage() for r in caplog.records if "cpu" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once, however often it is read
    assert "too large" in warnings[0]

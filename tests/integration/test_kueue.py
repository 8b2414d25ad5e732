"""Kueue in the dev cluster: plain pods, Jobs, quotas, borrowing, positions, visibility RBAC.

Quotas used here come from devcluster/manifests/30-cluster-queues.yaml (h100 flavor, GPUs):
notebooks 2 + 2 (never borrow), training 6 + 6, all in one cohort of 16.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.kube import kubectl
from devcluster.testing import (
    Cluster,
    batch,
    borrowed,
    churn_same_name,
    cluster_queues,
    core,
    create_job,
    create_when_free,
    delete_jobs,
    delete_pods,
    has_condition,
    job_manifest,
    pending_workloads,
    queued_pod_manifest,
    still_running,
    wait_for,
    wait_queues_idle,
    workload_of,
)

pytestmark = pytest.mark.integration

USERS_NS = "jupyter-users"


@pytest.fixture
async def idle_queues(cluster: Cluster) -> AsyncIterator[None]:
    """Each test starts and ends with no Jobs, no users' pods and every ClusterQueue idle."""

    async def clean() -> None:
        async with cluster.api("team-a", "alice") as a, cluster.api("team-b", "carol") as b:
            await delete_jobs(a, "team-a")
            await delete_jobs(b, "team-b")
        async with cluster.api("jupyterhub", "hub") as hub:
            await delete_pods(hub, USERS_NS)
        async with cluster.api("jupyterhub", "gpuaas") as reader:
            await wait_queues_idle(reader)

    await clean()
    yield
    await clean()


def notebook_pod(name: str, queue: str = "team-a", gpus: int = 1) -> dict[str, Any]:
    return queued_pod_manifest(
        name,
        queue=queue,
        node_selector={"gpuaas.dev/pool": "h100"},
        gpu={"nvidia.com/gpu": str(gpus)},
    )


async def pod_running(v1: Any, name: str) -> bool:
    pod = await v1.read_namespaced_pod(name, USERS_NS)
    return bool(pod.status.phase == "Running" and pod.status.pod_ip)


@pytest.mark.usefixtures("idle_queues")
async def test_pod_is_gated_then_admitted_and_scheduled(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        created = await v1.create_namespaced_pod(USERS_NS, notebook_pod("nb-gated"))
        # Kueue's webhook gated it and put its finalizer on it
        assert any(
            g.name == "kueue.x-k8s.io/admission" for g in created.spec.scheduling_gates or []
        )
        assert "kueue.x-k8s.io/managed" in (created.metadata.finalizers or [])
        await wait_for("pod Running", lambda: pod_running(v1, "nb-gated"))
        pod = await v1.read_namespaced_pod("nb-gated", USERS_NS)
        assert not pod.spec.scheduling_gates
        assert pod.spec.node_name.startswith("h100-")
        assert pod.spec.node_selector["gpuaas.dev/pool"] == "h100"


@pytest.mark.usefixtures("idle_queues")
async def test_deleted_running_pod_frees_its_name_within_10s(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        await v1.create_namespaced_pod(USERS_NS, notebook_pod("nb-reuse"))
        await wait_for("pod Running", lambda: pod_running(v1, "nb-reuse"))
        first = await v1.read_namespaced_pod("nb-reuse", USERS_NS)
        assert "kueue.x-k8s.io/managed" in (first.metadata.finalizers or [])

        t0 = time.monotonic()
        await v1.delete_namespaced_pod("nb-reuse", USERS_NS)  # default grace period (30 s)
        # the name and the old pod's Workload free (see create_when_free: Kueue's rule)
        await create_when_free(hub, USERS_NS, notebook_pod("nb-reuse"), timeout=10)
        elapsed = time.monotonic() - t0
        assert elapsed < 10
        second = await v1.read_namespaced_pod("nb-reuse", USERS_NS)
        assert second.metadata.uid != first.metadata.uid
        await wait_for(
            "new pod Running", partial(still_running, v1, USERS_NS, "nb-reuse", second.metadata.uid)
        )


# A pod's name reused at once, with Kueue in the loop: quick delete-and-recreate rounds of a
# Kueue-managed pod (the client waiting as create_when_free says); each new pod must run and
# stay itself.
RECREATE_ROUNDS = 30


@pytest.mark.usefixtures("idle_queues")
async def test_pod_recreated_at_once_under_the_same_name_keeps_running(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "hub") as hub:
        uids = await churn_same_name(hub, USERS_NS, notebook_pod("nb-churn"), RECREATE_ROUNDS)
    assert len(set(uids)) == RECREATE_ROUNDS + 1


HOLD = "gpuaas.dev/test-hold"


def admin_kubectl(cluster: Cluster, *args: str) -> str:
    res = kubectl(cluster.info.kubectl, cluster.info.kubeconfig, list(args))
    assert res.returncode == 0, res.stderr
    return str(res.stdout)


KUEUE_POD_FINALIZER = "kueue.x-k8s.io/managed"


@pytest.mark.usefixtures("idle_queues")
async def test_a_terminating_pod_keeps_its_quota_until_it_is_gone(cluster: Cluster) -> None:
    """A pod being deleted holds its GPU until it is gone (a real one for its grace period):
    its quota must stay counted until then, or the next queued pod is admitted onto a GPU still
    in use. Kueue >= 0.18 finishes the Workload at the deletion mark (FinishOrphanedWorkloads,
    off in devcluster/cluster.py). Team A's notebooks hold 2 H100s: the first pod takes both,
    the second waits; the first is deleted but kept terminating by a finalizer of ours."""
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        first = await v1.create_namespaced_pod(USERS_NS, notebook_pod("nb-term", gpus=2))
        await wait_for("first pod Running", lambda: pod_running(v1, "nb-term"))
        hold = json.dumps([{"op": "add", "path": "/metadata/finalizers/-", "value": HOLD}])
        admin_kubectl(cluster, "-n", USERS_NS, "patch", "pod", "nb-term", "--type=json", "-p", hold)
        second = await v1.create_namespaced_pod(USERS_NS, notebook_pod("nb-next", gpus=2))
        waiting = await wait_for(
            "the second pod's Workload", lambda: workload_of(hub, USERS_NS, second.metadata.uid)
        )
        assert not has_condition(waiting, "QuotaReserved")
        try:
            await v1.delete_namespaced_pod("nb-term", USERS_NS, grace_period_seconds=0)

            async def kueue_let_go() -> bool:
                pod = await v1.read_namespaced_pod("nb-term", USERS_NS)
                return KUEUE_POD_FINALIZER not in (pod.metadata.finalizers or [])

            # Kueue has handled the deletion (it drops its finalizer after its Workload's)...
            await wait_for("Kueue to handle the deletion", kueue_let_go, 30)
            held = await workload_of(hub, USERS_NS, first.metadata.uid)
            assert held is not None
            # ...and the terminating pod's Workload still holds the quota.
            assert has_condition(held, "Admitted"), held
            assert not has_condition(held, "Finished"), held["status"]["conditions"]
            still = await workload_of(hub, USERS_NS, second.metadata.uid)
            assert not has_condition(still, "QuotaReserved"), still
        finally:
            admin_kubectl(
                cluster,
                "-n",
                USERS_NS,
                "patch",
                "pod",
                "nb-term",
                "--type=json",
                "-p",
                json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
            )

        async def next_admitted() -> bool:
            return has_condition(await workload_of(hub, USERS_NS, second.metadata.uid), "Admitted")

        await wait_for("the second pod admitted once the first is gone", next_admitted, 30)


@pytest.mark.usefixtures("idle_queues")
async def test_notebook_pods_and_jobs_reach_pods_ready(cluster: Cluster) -> None:
    """WaitForPodsReady is on (Kueue 0.19's default; devcluster/cluster.py writes it out): an
    admitted Workload whose pods never turn Ready is evicted after the timeout. A running
    notebook pod's Workload and a training Job's must therefore reach PodsReady."""
    async with cluster.api("jupyterhub", "hub") as hub:
        v1 = core(hub)
        pod = await v1.create_namespaced_pod(USERS_NS, notebook_pod("nb-ready"))

        async def pod_workload_ready() -> bool:
            return has_condition(await workload_of(hub, USERS_NS, pod.metadata.uid), "PodsReady")

        await wait_for("the notebook's Workload PodsReady", pod_workload_ready, 60)
        assert await pod_running(v1, "nb-ready")
    async with cluster.api("team-a", "alice") as alice:
        job = await create_job(alice, "team-a", job_manifest("ready-job"))
        uid = job["metadata"]["uid"]

        async def job_workload_ready() -> bool:
            return has_condition(await workload_of(alice, "team-a", uid), "PodsReady")

        await wait_for("the Job's Workload PodsReady", job_workload_ready, 60)


async def test_visibility_api_needs_its_role(cluster: Cluster) -> None:
    async with cluster.api("team-a", "bob") as bob:
        with pytest.raises(ApiException) as err:
            await pending_workloads(bob, "team-a", "training")
        assert err.value.status == 403
    async with cluster.api("team-a", "alice") as alice:
        assert await pending_workloads(alice, "team-a", "training") == []
        # her role is bound in team-a only
        with pytest.raises(ApiException) as err:
            await pending_workloads(alice, "team-b", "training")
        assert err.value.status == 403


async def admitted(api: client.ApiClient, ns: str, job: dict[str, Any]) -> dict[str, Any] | None:
    wl = await workload_of(api, ns, job["metadata"]["uid"])
    return wl if has_condition(wl, "Admitted") else None


async def job_pods_running(api: client.ApiClient, ns: str, job: str, count: int) -> bool:
    pods = await core(api).list_namespaced_pod(ns, label_selector=f"job-name={job}")
    return sum(1 for p in pods.items if p.status.phase == "Running") == count


@pytest.mark.usefixtures("idle_queues")
async def test_bigger_job_waits_with_position_while_smaller_is_admitted(cluster: Cluster) -> None:
    async with cluster.api("team-a", "alice") as api:
        # 10 GPUs: team-a's 6 plus 4 borrowed from the idle cohort (16 in all) -> 6 left
        running = await create_job(api, "team-a", job_manifest("big-running", pods=2, gpus=5))
        await wait_for("big-running admitted", lambda: admitted(api, "team-a", running))
        await wait_for(
            "its pods Running", lambda: job_pods_running(api, "team-a", "big-running", 2)
        )
        # 8 GPUs > the 6 left: must wait
        waiting = await create_job(api, "team-a", job_manifest("too-big", pods=2, gpus=4))
        # 2 GPUs fit: admitted although submitted after the waiting one
        small = await create_job(api, "team-a", job_manifest("small", pods=1, gpus=2))
        await wait_for("small admitted", lambda: admitted(api, "team-a", small))
        await wait_for("small's pod Running", lambda: job_pods_running(api, "team-a", "small", 1))

        wl = await workload_of(api, "team-a", waiting["metadata"]["uid"])
        assert wl is not None
        assert not has_condition(wl, "QuotaReserved")

        async def listed() -> list[dict[str, Any]] | None:
            items = await pending_workloads(api, "team-a", "training")
            return items or None

        items = await wait_for("a pending workload in the visibility API", listed)
        assert [i["metadata"]["name"] for i in items] == [wl["metadata"]["name"]]
        assert items[0]["positionInLocalQueue"] == 0
        assert items[0]["positionInClusterQueue"] == 0
        assert items[0]["localQueueName"] == "training"
        job = await batch(api).read_namespaced_job("too-big", "team-a")
        assert job.spec.suspend is True


@pytest.mark.usefixtures("idle_queues")
async def test_training_borrows_from_an_idle_cohort(cluster: Cluster) -> None:
    async with cluster.api("team-b", "carol") as api:
        # team-b-training has 6 GPUs of its own; 10 needs 4 from team A and the notebooks
        job = await create_job(api, "team-b", job_manifest("borrower", pods=2, gpus=5))
        await wait_for("borrower admitted", lambda: admitted(api, "team-b", job))
        await wait_for("its pods Running", lambda: job_pods_running(api, "team-b", "borrower", 2))
    async with cluster.api("jupyterhub", "gpuaas") as reader:

        async def borrowing() -> bool:
            cq = next(
                c
                for c in await cluster_queues(reader)
                if c["metadata"]["name"] == "team-b-training"
            )
            return borrowed(cq, "h100", "nvidia.com/gpu") == "4"

        await wait_for("team-b-training to report 4 borrowed GPUs", borrowing)


@pytest.mark.usefixtures("idle_queues")
async def test_positions_follow_priority_then_submission_order(cluster: Cluster) -> None:
    async with cluster.api("team-b", "carol") as api:
        # take every h100 GPU of the cohort (6 own + 10 borrowed)
        fill = await create_job(api, "team-b", job_manifest("fill", pods=2, gpus=8))
        await wait_for("fill admitted", lambda: admitted(api, "team-b", fill))
        order = [("b1", "batch"), ("b2", "batch"), ("t1", "training"), ("b3", "batch")]
        jobs = {}
        for name, prio in order:
            jobs[name] = await create_job(api, "team-b", job_manifest(name, priority=prio, gpus=1))
            await asyncio.sleep(1.1)  # creation timestamps have a resolution of one second
        names = {}
        for name, job in jobs.items():
            wl = await wait_for(
                f"workload of {name}", partial(workload_of, api, "team-b", job["metadata"]["uid"])
            )
            names[wl["metadata"]["name"]] = name

        async def all_listed() -> list[dict[str, Any]] | None:
            items = await pending_workloads(api, "team-b", "training")
            return items if len(items) == len(order) else None

        items = await wait_for("all four pending in the visibility API", all_listed)
        by_position = sorted(items, key=lambda i: i["positionInLocalQueue"])
        assert [names[i["metadata"]["name"]] for i in by_position] == ["t1", "b1", "b2", "b3"]
        assert [i["positionInLocalQueue"] for i in by_position] == [0, 1, 2, 3]
        assert [i["priority"] for i in by_position] == [500, 100, 100, 100]


@pytest.mark.usefixtures("idle_queues")
async def test_job_runs_for_its_annotated_duration_then_succeeds(cluster: Cluster) -> None:
    async with cluster.api("team-a", "alice") as api:
        t0 = time.monotonic()
        job = await create_job(api, "team-a", job_manifest("short", gpus=1, run_seconds=3))
        await wait_for("short admitted", lambda: admitted(api, "team-a", job))
        await wait_for("its pod Running", lambda: job_pods_running(api, "team-a", "short", 1))
        jobs_api = batch(api)

        async def complete() -> bool:
            j = await jobs_api.read_namespaced_job("short", "team-a")
            return any(
                c.type == "Complete" and c.status == "True" for c in j.status.conditions or []
            )

        await wait_for("Job Complete", complete, timeout=30)
        assert time.monotonic() - t0 >= 3
        wl = await wait_for("workload Finished", lambda: _finished(api, job))
        assert has_condition(wl, "Finished")


async def _finished(api: client.ApiClient, job: dict[str, Any]) -> dict[str, Any] | None:
    wl = await workload_of(api, "team-a", job["metadata"]["uid"])
    return wl if has_condition(wl, "Finished") else None

"""One pool of H100s for training and notebooks (docs/right-sizing.md), on the real cluster.

The pool: local-0's two H100s under HAMi (devcluster/nodes.yaml), flavor ``local-h100``; each
team's notebook queue holds 100 % of nvidia.com/total-gpucores there (one GPU-equivalent, in
shares of the demo catalog), training queues hold 0 and borrow. Training Jobs take a card whole
(all its memory, 100 % compute); notebooks take memory-capped shares. Checked here with the real
kube-apiserver, Kueue and node agent: the quota arithmetic of shares and whole cards in one
flavor as Kueue admits it (random sequences against a model of the cohort's rules), training
borrowing and being preempted when notebooks come back, shares packed onto one card and never
onto a card a Job holds, an admitted Job whose card exists only as scraps kept Pending as HAMi's
scheduler keeps it (``Unschedulable``, ``FilteringFailed``), and a share without its size refused
at admission. HAMi's card decisions are checked without a cluster in test_hami_scheduler.py.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.config import DEMO_CATALOG
from devcluster.nodes import load_nodes
from devcluster.testing import (
    KUEUE,
    Cluster,
    batch,
    cluster_queues,
    core,
    create_job,
    delete_jobs,
    delete_pods,
    has_condition,
    queued_pod_manifest,
    wait_for,
    wait_queues_idle,
    workload_of,
)
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.catalog import Catalog, Offering, build_catalog, load_catalog_file
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_workload
from jupyter_gpuaas.gpu.spec import parse_devices
from tests.support.shared_pool import H100_MIB, whole_card_job

USERS_NS = "jupyter-users"
TRAIN_NS = "team-a"
FLAVOR = "local-h100"
CORES = "nvidia.com/total-gpucores"
# How long a refused Workload must stay refused (Kueue retries a pending one within seconds).
REFUSAL_GRACE_S = 3.0

# --- on the cluster ---------------------------------------------------------------------------


def _catalog() -> Catalog:
    return build_catalog([load_catalog_file(str(DEMO_CATALOG))], default_namespace=USERS_NS)


def share_pod(name: str, offering: Offering, team: str, **notes: str) -> dict[str, Any]:
    """A notebook on a share, shaped as GPUaaSSpawner shapes it (the offering's resources,
    selector, tolerations and annotations), running ``sleep`` on local-0."""
    pod = queued_pod_manifest(
        name,
        queue=team,
        node_selector=offering.node_selector,
        gpu={k: str(v) for k, v in offering.requests(1).items()},
        cpu="100m",
        memory="64Mi",
        tolerations=offering.tolerations,
        annotations={**offering.pod_annotations, **notes},
    )
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    container = pod["spec"]["containers"][0]
    container["command"] = ["sleep", "600"]
    container.pop("args", None)
    return pod


async def _clean(cluster: Cluster) -> None:
    async with cluster.api(TRAIN_NS, "alice") as alice:
        await delete_jobs(alice, TRAIN_NS)
    async with cluster.api("jupyterhub", "hub") as hub:
        await delete_pods(hub, USERS_NS, grace_period_seconds=0)
    async with cluster.api("jupyterhub", "gpuaas") as reader:
        await wait_queues_idle(reader, timeout=90)

    async def no_pods() -> bool:
        async with cluster.api("jupyterhub", "hub") as hub:
            left = (await core(hub).list_namespaced_pod(USERS_NS)).items
        async with cluster.api(TRAIN_NS, "alice") as alice:
            left += (await core(alice).list_namespaced_pod(TRAIN_NS)).items
        return not left

    await wait_for("the pool's pods gone", no_pods, 60)


@pytest.fixture
async def idle_pool(cluster: Cluster) -> AsyncIterator[None]:
    await _clean(cluster)
    yield
    await _clean(cluster)


async def _pod_workload(api: client.ApiClient, uid: str) -> dict[str, Any] | None:
    out = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        *KUEUE, USERS_NS, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={uid}"
    )
    items: list[dict[str, Any]] = out.get("items", [])
    return items[0] if items else None


async def _decision(
    what: str, workload: Callable[[], Awaitable[dict[str, Any] | None]], admit: bool
) -> dict[str, Any]:
    """The Workload once Kueue decided as the model says: admitted (a notebook may first wait
    for the Jobs it preempts), or still not admitted a few scheduling passes later."""
    if admit:

        async def admitted() -> dict[str, Any] | None:
            wl = await workload()
            return wl if has_condition(wl, "Admitted") else None

        return await wait_for(f"{what} admitted", admitted, 60)

    # Kueue does not always record a refusal (QuotaReserved False) on a Workload queued behind
    # one it already refused; what counts is that it is not admitted, here and (as the usage
    # checked after every step shows) later.
    await wait_for(f"{what}'s Workload", workload, 30)
    await asyncio.sleep(REFUSAL_GRACE_S)
    return await wait_for(f"{what}'s Workload", workload, 10)


async def _pool_usage(api: client.ApiClient) -> dict[str, int]:
    """nvidia.com/total-gpucores each ClusterQueue holds on the pool."""
    out = {}
    for obj in await cluster_queues(api):
        info = read_cluster_queue(obj)
        out[info.name] = int(info.usage((FLAVOR, CORES)))
    return out


async def _admitted_jobs(api: client.ApiClient) -> set[str]:
    names = set()
    for job in (await batch(api).list_namespaced_job(TRAIN_NS)).items:
        if has_condition(await workload_of(api, TRAIN_NS, job.metadata.uid), "Admitted"):
            names.add(job.metadata.name)
    return names


async def _card_of(v1: Any, namespace: str, name: str) -> str:
    """The GPU the node agent gave the pod's container: NVIDIA_VISIBLE_DEVICES in the
    environment of its process (local-0 runs it on this machine; its event names the pid)."""
    pid = 0
    uid = (await v1.read_namespaced_pod(name, namespace)).metadata.uid

    async def started() -> bool:
        nonlocal pid
        # By UID: events of an earlier pod of the same name outlive it.
        events = await v1.list_namespaced_event(
            namespace, field_selector=f"involvedObject.uid={uid}"
        )
        for ev in events.items:
            found = re.search(r"\(pid (\d+)\)", ev.message or "")
            if ev.reason == "Started" and found:
                pid = int(found.group(1))
                return True
        return False

    await wait_for(f"{name} started", started, 60)
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    env = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
    return env["NVIDIA_VISIBLE_DEVICES"]


@pytest.mark.integration
@pytest.mark.usefixtures("idle_pool")
@pytest.mark.parametrize("seed", [3, 4])
async def test_shares_and_whole_cards_in_one_quota_as_kueue_admits_them(
    cluster: Cluster, seed: int
) -> None:
    """Random sequences of notebook shares (either team) and whole-card training Jobs, against
    the cohort's rules: a notebook is admitted if its team's own 100 % has room (taking back, by
    preemption, what training borrowed), a Job if the pool has a whole GPU-equivalent free."""
    catalog = _catalog()
    shares = [catalog.offerings["local-h100-quarter"], catalog.offerings["local-h100-half"]]
    rng = random.Random(seed)
    notebooks = {"team-a": 0, "team-b": 0}
    jobs = 0  # whole cards training holds
    async with (
        cluster.api("jupyterhub", "hub") as hub,
        cluster.api(TRAIN_NS, "alice") as alice,
        cluster.api("jupyterhub", "gpuaas") as reader,
    ):
        for step in range(8):
            if rng.random() < 0.35:
                admit = sum(notebooks.values()) + 100 * (jobs + 1) <= 200
                job = await create_job(alice, TRAIN_NS, whole_card_job(f"whole-{step}"))
                uid = job["metadata"]["uid"]

                async def job_wl(uid: str = uid) -> dict[str, Any] | None:
                    return await workload_of(alice, TRAIN_NS, uid)

                wl = await _decision(f"whole-{step}", job_wl, admit)
                if admit:  # a Workload Kueue has not tried yet has nothing counted
                    assert read_workload(wl).counted[CORES] == 100
                assert has_condition(wl, "Admitted") is admit, wl.get("status")
                jobs += admit  # a refused Job stays queued: it must never be admitted later
            else:
                team, offering = rng.choice(list(notebooks)), rng.choice(shares)
                size = offering.cores_percent or 0
                admit = notebooks[team] + size <= 100
                pod = await core(hub).create_namespaced_pod(
                    USERS_NS, share_pod(f"share-{step}", offering, team)
                )

                async def pod_wl(uid: str = pod.metadata.uid) -> dict[str, Any] | None:
                    return await _pod_workload(hub, uid)

                wl = await _decision(f"share-{step}", pod_wl, admit)
                # Kueue counts what the catalog says the share is, in the pool's unit.
                counted = read_workload(wl).counted
                if admit:
                    assert counted[CORES] == offering.quota_requests(1)[CORES] == size
                assert has_condition(wl, "Admitted") is admit, (team, size, wl.get("status"))
                if admit:
                    notebooks[team] += size
                    over = sum(notebooks.values()) + 100 * jobs - 200
                    jobs -= -(-over // 100) if over > 0 else 0  # Jobs preempted to make room
                    assert read_workload(wl).assigned_flavors[CORES] == FLAVOR
                else:
                    await core(hub).delete_namespaced_pod(
                        f"share-{step}", USERS_NS, grace_period_seconds=0
                    )

            expected = {
                "team-a-notebooks": notebooks["team-a"],
                "team-b-notebooks": notebooks["team-b"],
                "team-a-training": 100 * jobs,
                "team-b-training": 0,
            }

            async def settled(expected: dict[str, int] = expected) -> bool:
                usage = await _pool_usage(reader)
                return {q: usage.get(q) for q in expected} == expected and len(
                    await _admitted_jobs(alice)
                ) == expected["team-a-training"] // 100

            await wait_for(f"the pool's usage after step {step}: {expected}", settled, 60)


@pytest.mark.integration
@pytest.mark.usefixtures("idle_pool")
async def test_training_borrows_the_notebooks_cards_and_gives_them_back(cluster: Cluster) -> None:
    catalog = _catalog()
    quarter = catalog.offerings["local-h100-quarter"]
    async with cluster.api("jupyterhub", "hub") as hub, cluster.api(TRAIN_NS, "alice") as alice:
        # No notebook holds the pool: training takes both cards whole, on borrowed quota.
        for name in ("train-1", "train-2"):
            await create_job(alice, TRAIN_NS, whole_card_job(name))
        await wait_for(
            "both Jobs admitted",
            lambda: _has(alice, {"train-1", "train-2"}),
            60,
        )

        # the Job controller creates an admitted Job's pod a moment after Kueue unsuspends it
        async def both_pods() -> bool:
            jobs = {p.metadata.labels.get("job-name") for p in await _pods(alice)}
            return jobs >= {"train-1", "train-2"}

        await wait_for("both Jobs' pods", both_pods, 60)
        pods = {p.metadata.labels["job-name"]: p.metadata.name for p in await _pods(alice)}
        cards = {job: await _card_of(core(alice), TRAIN_NS, pod) for job, pod in pods.items()}
        assert set(cards.values()) == {H100_UUIDS[0], H100_UUIDS[1]}, cards

        # A notebook comes back: Kueue preempts one Job (team-b's notebooks reclaim their
        # quota), which waits; the share lands on the card that Job freed.
        await core(hub).create_namespaced_pod(USERS_NS, share_pod("nb-b", quarter, "team-b"))
        await wait_for("nb-b running", lambda: _running(core(hub), USERS_NS, "nb-b"), 90)
        (kept,) = await _admitted_jobs(alice)
        (evicted,) = {"train-1", "train-2"} - {kept}
        job = await batch(alice).read_namespaced_job(evicted, TRAIN_NS)
        wl = await workload_of(alice, TRAIN_NS, job.metadata.uid)
        assert has_condition(wl, "Evicted") or has_condition(wl, "Preempted"), wl
        assert not has_condition(wl, "Admitted")
        nb_card = await _card_of(core(hub), USERS_NS, "nb-b")
        assert nb_card != cards[kept]

        # A second share is packed onto the same card, never onto the one training holds.
        await core(hub).create_namespaced_pod(USERS_NS, share_pod("nb-a", quarter, "team-a"))
        await wait_for("nb-a running", lambda: _running(core(hub), USERS_NS, "nb-a"), 90)
        assert await _card_of(core(hub), USERS_NS, "nb-a") == nb_card


@pytest.mark.integration
@pytest.mark.usefixtures("idle_pool")
async def test_an_admitted_job_whose_card_is_in_scraps_waits_and_says_why(
    cluster: Cluster,
) -> None:
    catalog = _catalog()
    quarter = catalog.offerings["local-h100-quarter"]
    spread = {"hami.io/gpu-scheduler-policy": "spread"}
    async with cluster.api("jupyterhub", "hub") as hub, cluster.api(TRAIN_NS, "alice") as alice:
        for name, team in (("nb-a", "team-a"), ("nb-b", "team-b")):
            await core(hub).create_namespaced_pod(
                USERS_NS, share_pod(name, quarter, team, **spread)
            )
            await wait_for(f"{name} running", partial(_running, core(hub), USERS_NS, name), 90)
        cards = [await _card_of(core(hub), USERS_NS, name) for name in ("nb-a", "nb-b")]
        assert cards[0] != cards[1]
        # The card each share is on is recorded on its pod as HAMi's scheduler records it.
        for name, card in zip(("nb-a", "nb-b"), cards, strict=True):
            pod = await core(hub).read_namespaced_pod(name, USERS_NS)
            record = pod.metadata.annotations[hami.ALLOCATED]
            assert record == f"{card},NVIDIA,20480,25:;", record
        # 150 % of the pool is free: Kueue admits a whole card, which no card has.
        await create_job(alice, TRAIN_NS, whole_card_job("train"))
        await wait_for("the Job admitted", lambda: _has(alice, {"train"}), 60)

        async def explained() -> Any:
            for pod in await _pods(alice):
                raw = alice.sanitize_for_serialization(pod)
                if hami.unschedulable_reasons(raw):
                    return pod
            return None

        pod = await wait_for("the Job's pod Unschedulable with HAMi's reasons", explained, 60)
        assert pod.status.phase == "Pending"
        assert not pod.spec.node_name
        (cond,) = [c for c in pod.status.conditions if c.type == "PodScheduled"]
        assert cond.reason == "Unschedulable"
        assert "1/3 CardTypeMismatch, 2/3 CardInsufficientMemory" in cond.message, cond.message
        warning = await wait_for(
            "HAMi's FilteringFailed event",
            partial(_event, alice, pod.metadata.uid, "FilteringFailed"),
            30,
        )
        assert warning.type == "Warning"

        # A notebook ends: its card is empty again, and the Job starts on it.
        await core(hub).delete_namespaced_pod("nb-b", USERS_NS, grace_period_seconds=0)
        await wait_for(
            "the Job's pod running",
            lambda: _running(core(alice), TRAIN_NS, pod.metadata.name),
            60,
        )
        placed = await core(alice).read_namespaced_pod(pod.metadata.name, TRAIN_NS)
        assert placed.metadata.annotations[hami.ALLOCATED].endswith(f",{H100_MIB},100:;")
        await wait_for(
            "HAMi's FilteringSucceed event",
            partial(_event, alice, pod.metadata.uid, "FilteringSucceed"),
            30,
        )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("gpu", "words"),
    [
        # A share without its memory: counted as 25 % and no memory, given a whole card's.
        ({"nvidia.com/gpu": "1", "nvidia.com/gpucores": "25"}, "must state its size"),
        # A percentage Kueue does not count: it would wait forever, or slip past the quota.
        (
            {
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem-percentage": "25",
                "nvidia.com/gpucores": "25",
            },
            "does not count nvidia.com/gpumem-percentage",
        ),
        # A card of the pool asked for by count alone: one vGPU slot, no size.
        ({"nvidia.com/gpu": "1"}, "a whole GPU is all of its memory"),
    ],
)
async def test_a_gpu_the_quota_would_not_count_is_refused(
    cluster: Cluster, gpu: dict[str, str], words: str
) -> None:
    async with cluster.api(TRAIN_NS, "alice") as alice:
        with pytest.raises(ApiException) as err:
            await batch(alice).create_namespaced_job(
                TRAIN_NS, whole_card_job("unsized", gpu), dry_run="All"
            )
        assert err.value.status == 422
        assert words in str(err.value.body), err.value.body
        # Sized, the same Job is accepted.
        await batch(alice).create_namespaced_job(TRAIN_NS, whole_card_job("sized"), dry_run="All")
    async with cluster.api("jupyterhub", "hub") as hub:
        pod = share_pod("unsized", _catalog().offerings["local-h100-quarter"], "team-a")
        for part in ("requests", "limits"):
            pod["spec"]["containers"][0]["resources"][part] = dict(gpu)
        with pytest.raises(ApiException) as err:
            await core(hub).create_namespaced_pod(USERS_NS, pod, dry_run="All")
        assert words in str(err.value.body), err.value.body


(_AGENT,) = [n for n in load_nodes() if n.run_by == "agent"]
# The H100s of local-0, as the node agent names them.
H100_UUIDS = tuple(g.uuid for g in parse_devices(_AGENT.simulated_gpus or "") if "H100" in g.name)


async def _event(api: client.ApiClient, uid: str, reason: str) -> Any:
    """The pod's first event of that reason (by UID: an earlier pod's of the same name outlive
    it), or None."""
    events = await core(api).list_namespaced_event(
        TRAIN_NS, field_selector=f"involvedObject.uid={uid}"
    )
    return next((e for e in events.items if e.reason == reason), None)


async def _pods(api: client.ApiClient) -> list[Any]:
    return list((await core(api).list_namespaced_pod(TRAIN_NS)).items)


async def _has(api: client.ApiClient, names: set[str]) -> bool:
    return names <= await _admitted_jobs(api)


async def _running(v1: Any, namespace: str, name: str) -> bool:
    try:
        pod = await v1.read_namespaced_pod(name, namespace)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    if pod.status.phase == "Failed":
        pytest.fail(f"{name} failed: {pod.status.reason}: {pod.status.message}")
    return bool(pod.status.phase == "Running")

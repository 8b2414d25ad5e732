"""HAMi's scheduler as the dev cluster runs it (devcluster/hamiplace.py, hamischeduler.py): which
cards a share gets and why none, decided as HAMi v2.10 decides (pure, no cluster), then on the
cluster: the webhook sends a share to the ``hami-scheduler`` profile, binpack and spread place as
the pod's annotation asks, a share that fits no card stays Pending with kube-scheduler's
``Unschedulable`` condition and HAMi's ``FilteringFailed`` Events, and the node agent gives a
memory-capped pod the limit the scheduler chose."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import hamiplace
from devcluster.gpualloc import hami_cards
from devcluster.hamischeduler import route
from devcluster.nodes import load_nodes
from devcluster.testing import Cluster, core, on_local_node, wait_for
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.gpu.spec import parse_devices

NODE_SPEC = "1xL4-24GB:hami=4,2xH100-80GB:hami=10"
L4, H100_A, H100_B = hami_cards(parse_devices(NODE_SPEC))
H100_MIB = 81920


def share(memory: int, cores: int, name: str = "p", uid: str = "", **notes: str) -> dict[str, Any]:
    limits = {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": str(memory),
        "nvidia.com/gpucores": str(cores),
    }
    return {
        "metadata": {
            "name": name,
            "uid": uid or name,
            "annotations": {"nvidia.com/use-gputype": "H100", **notes},
        },
        "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running"},
    }


def place(held: list[dict[str, Any]], pod: dict[str, Any]) -> hamiplace.Filtered:
    """Filter ``pod`` on one node holding ``held``; a placed pod joins ``held``."""
    devices = hamiplace.node_devices([L4, H100_A, H100_B], held)
    result = hamiplace.filter_pod(pod, {"local-0": devices})
    if result.chosen is not None:
        pod["metadata"]["annotations"][hami.ALLOCATED] = hami.encode_pod_devices(
            result.chosen.containers
        )
        held.append(pod)
    return result


def card_of(result: hamiplace.Filtered) -> str:
    assert result.chosen is not None, result.failed
    ((use,),) = result.chosen.containers
    return use.uuid


# --- HAMi's decisions -------------------------------------------------------------------------


def test_binpack_fills_one_card_and_spread_takes_the_emptiest() -> None:
    held: list[dict[str, Any]] = []
    binpack = {hami.GPU_POLICY: "binpack"}
    first = card_of(place(held, share(20480, 25, "a", **binpack)))
    assert card_of(place(held, share(20480, 25, "b", **binpack))) == first
    assert card_of(place(held, share(20480, 25, "c", **binpack))) == first
    # spread (HAMi's default card policy): the emptier card
    other = card_of(place(held, share(20480, 25, "d")))
    assert other != first
    assert other in (H100_A.uuid, H100_B.uuid)
    assert card_of(place(held, share(20480, 25, "e", **{hami.GPU_POLICY: "spread"}))) == other
    # Ties go to the card registered last, as HAMi walks its sorted cards from the end.
    assert card_of(place([], share(20480, 25, "f"))) == H100_B.uuid


def test_a_whole_card_takes_an_empty_card_and_nothing_joins_it() -> None:
    held: list[dict[str, Any]] = []
    whole = place(held, share(H100_MIB, 100, "train"))
    assert whole.chosen is not None
    ((use,),) = whole.chosen.containers
    assert (use.memory, use.cores) == (H100_MIB, 100)
    quarter = card_of(place(held, share(20480, 25, "nb", **{hami.GPU_POLICY: "binpack"})))
    assert quarter != use.uuid
    # The other card now holds a share: a second whole card fits nowhere.
    refused = place(held, share(H100_MIB, 100, "train-2"))
    assert refused.chosen is None
    assert refused.failed == {"local-0": "1/3 CardTypeMismatch, 2/3 CardInsufficientMemory"}


def test_the_reasons_are_hamis_per_card_counts_in_hamis_order_of_checks() -> None:
    held: list[dict[str, Any]] = []
    place(held, share(20480, 25, "a", **{hami.GPU_POLICY: "spread"}))
    place(held, share(20480, 80, "b", **{hami.GPU_POLICY: "spread"}))
    # memory first: 81920 MiB fit neither card
    assert place(held, share(H100_MIB, 100)).failed["local-0"] == (
        "1/3 CardTypeMismatch, 2/3 CardInsufficientMemory"
    )
    # then cores: 30 % fits only the card with 75 % left
    assert card_of(place(list(held), share(1024, 30))) in (H100_A.uuid, H100_B.uuid)
    assert place(held, share(1024, 76)).failed["local-0"] == (
        "1/3 CardTypeMismatch, 2/3 CardInsufficientCore"
    )
    # more vGPUs than H100s: those that fit are too few; more than the node's cards at all
    many = share(1024, 10)
    many["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "3"
    assert place(held, many).failed["local-0"] == (
        "1/3 CardTypeMismatch, 2/3 AllocatedCardsInsufficientRequest"
    )
    many["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    assert place(held, many).failed["local-0"] == hami.NODE_INSUFFICIENT_DEVICE


def test_slots_and_exclusive_use_and_gpu_types() -> None:
    l4_only = {"nvidia.com/use-gputype": "L4"}
    held: list[dict[str, Any]] = []
    for i in range(4):
        assert card_of(place(held, share(1024, 5, f"s{i}", **l4_only))) == L4.uuid
    assert place(held, share(1024, 5, **l4_only)).failed["local-0"] == (
        "1/3 CardTimeSlicingExhausted, 2/3 CardTypeMismatch"
    )
    nouse = share(1024, 5, **{"nvidia.com/nouse-gputype": "H100"})
    del nouse["metadata"]["annotations"]["nvidia.com/use-gputype"]
    assert place(held, nouse).failed["local-0"] == (
        "1/3 CardTimeSlicingExhausted, 2/3 CardTypeMismatch"
    )
    # 100 % of a card used by a small share: ExclusiveDeviceAllocateConflict, not memory.
    tiny = share(1024, 0, "tiny")
    tiny["metadata"]["annotations"][hami.ALLOCATED] = f"{H100_A.uuid},NVIDIA,1024,0:;"
    on = hamiplace.node_devices([H100_A], [tiny])
    got, reason = hamiplace.fit(on, hamiplace.Request(1, 1024, 101, 100), {}, "spread")
    assert (got, reason) == ([], "1/1 ExclusiveDeviceAllocateConflict")


def test_a_request_by_percentage_or_without_memory_is_sized_per_card() -> None:
    pod = share(0, 10)
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    del limits["nvidia.com/gpumem"]
    assert hamiplace.container_request(pod["spec"]["containers"][0]) == hamiplace.Request(
        1, 0, 100, 10
    )
    ((use,),) = place([], pod).chosen.containers  # type: ignore[union-attr]
    assert use.memory == H100_MIB
    limits["nvidia.com/gpumem-percentage"] = "25"
    ((use,),) = place([], pod).chosen.containers  # type: ignore[union-attr]
    assert use.memory == H100_MIB // 4
    assert (
        hamiplace.container_request({"resources": {"limits": {"nvidia.com/gpucores": "5"}}}) is None
    )


def test_finished_pods_and_the_pod_itself_hold_nothing() -> None:
    held: list[dict[str, Any]] = []
    place(held, share(H100_MIB, 100, "a"))
    place(held, share(H100_MIB, 100, "b"))
    assert place(list(held), share(1024, 1)).chosen is None
    held[0]["status"]["phase"] = "Succeeded"
    assert place(list(held), share(1024, 1)).chosen is not None


def test_the_events_are_worded_as_hamis() -> None:
    held: list[dict[str, Any]] = []
    place(held, share(H100_MIB, 100, "a"))
    place(held, share(H100_MIB, 100, "b"))
    refused = hamiplace.filter_pod(
        share(1024, 1),
        {
            "local-0": hamiplace.node_devices([L4, H100_A, H100_B], held),
            "other": hamiplace.node_devices([H100_A, H100_B], held),
            "cpu-0": None,
        },
    )
    assert refused.failed["cpu-0"] == "node unregistered"
    # One per reason (HAMi walks a map: in no set order), then the summary.
    *per_reason, summary = refused.events(3)
    assert set(per_reason) == {
        ("Warning", "FilteringFailed", "1 nodes CardTypeMismatch(local-0)"),
        ("Warning", "FilteringFailed", "2 nodes CardInsufficientMemory(local-0,other)"),
    }
    assert summary == ("Warning", "FilteringFailed", "no available node, 3 nodes do not meet")
    fits = hamiplace.filter_pod(share(1024, 1), {"local-0": hamiplace.node_devices([H100_A], [])})
    ((etype, reason, message),) = fits.events(1)
    assert (etype, reason) == ("Normal", "FilteringSucceed")
    assert message == "find fit node(local-0), 0 nodes not fit, 1 nodes fit(local-0:0.00)"


def test_binpack_nodes_take_the_fullest_and_spread_the_emptiest() -> None:
    busy = [share(40960, 50, "x")]
    place(busy, share(40960, 50, "y"))
    nodes = {
        "busy": hamiplace.node_devices([H100_A, H100_B], busy),
        "idle": hamiplace.node_devices([H100_A, H100_B], []),
    }
    assert hamiplace.filter_pod(share(1024, 1), nodes).chosen.node == "busy"  # type: ignore[union-attr]
    spread = share(1024, 1, **{hami.NODE_POLICY: "spread"})
    assert hamiplace.filter_pod(spread, nodes).chosen.node == "idle"  # type: ignore[union-attr]


def test_the_webhook_routes_only_pods_asking_for_hamis_own_resources() -> None:
    patch = [{"op": "add", "path": "/spec/schedulerName", "value": "hami-scheduler"}]
    assert route(share(1024, 10)) == patch
    assert (
        route(
            {
                **share(1024, 10),
                "spec": {**share(1024, 10)["spec"], "schedulerName": "default-scheduler"},
            }
        )
        == patch
    )
    whole = {
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    }
    assert route(whole) == []
    other = share(1024, 10)
    other["spec"]["schedulerName"] = "volcano"
    assert route(other) == []


def test_nodes_register_their_hami_cards_as_hamis_device_plugin_does() -> None:
    registered = {
        n.name: hami.read_register(n.manifest()["metadata"]["annotations"]) for n in load_nodes()
    }
    assert [c.count for c in registered["l4-hami-0"]] == [10, 10, 10, 10]
    assert {c.type for c in registered["l4-hami-0"]} == {"NVIDIA L4"}
    assert [c.type for c in registered["local-0"]] == [
        "NVIDIA L4",
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 80GB HBM3",
    ]
    assert registered["h100-0"] == []


# --- on the cluster ---------------------------------------------------------------------------

NS = "jupyter-users"


def cluster_share(name: str, memory: int, cores: int, **notes: str) -> dict[str, Any]:
    """A share of local-0's H100s (no queue: Kueue leaves it alone), running ``sleep``."""
    limits = {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": str(memory),
        "nvidia.com/gpucores": str(cores),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"nvidia.com/use-gputype": "H100", **notes}},
        "spec": {
            "automountServiceAccountToken": False,
            **on_local_node(),
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": "sim",
                    "command": ["sleep", "600"],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi", **limits},
                        "limits": limits,
                    },
                }
            ],
        },
    }


class Shares:
    def __init__(self, v1: Any) -> None:
        self.v1 = v1
        self.names: list[str] = []

    async def create(self, pod: dict[str, Any]) -> Any:
        self.names.append(pod["metadata"]["name"])
        return await self.v1.create_namespaced_pod(NS, pod)

    async def running(self, name: str) -> dict[str, str]:
        """The pod Running; the environment its process got (local-0 runs it here)."""
        pod = await wait_for(f"{name} running", lambda: self._phase(name, "Running"), 60)
        pid = 0

        async def started() -> bool:
            nonlocal pid
            events = await self.v1.list_namespaced_event(
                NS, field_selector=f"involvedObject.uid={pod.metadata.uid}"
            )
            for ev in events.items:
                found = re.search(r"\(pid (\d+)\)", ev.message or "")
                if ev.reason == "Started" and found:
                    pid = int(found.group(1))
                    return True
            return False

        await wait_for(f"{name} started", started, 30)
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return dict(item.decode().split("=", 1) for item in environ if b"=" in item)

    async def _phase(self, name: str, phase: str) -> Any:
        pod = await self.v1.read_namespaced_pod(name, NS)
        if pod.status.phase == "Failed":
            pytest.fail(f"{name} failed: {pod.status.reason}: {pod.status.message}")
        return pod if pod.status.phase == phase else None

    async def events(self, uid: str, reason: str) -> list[Any]:
        found = await self.v1.list_namespaced_event(NS, field_selector=f"involvedObject.uid={uid}")
        return [e for e in found.items if e.reason == reason]


@pytest.fixture
async def shares(cluster: Cluster) -> AsyncIterator[Shares]:
    async with cluster.api("jupyterhub", "hub") as api:
        made = Shares(core(api))
        try:
            yield made
        finally:
            for name in made.names:
                try:
                    await made.v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)
                except ApiException as e:
                    if e.status != 404:
                        raise

            async def gone() -> bool:
                left = {p.metadata.name for p in (await made.v1.list_namespaced_pod(NS)).items}
                return not left & set(made.names)

            await wait_for("the shares gone", gone, 60)


def _card(env: dict[str, str]) -> str:
    return env["NVIDIA_VISIBLE_DEVICES"]


@pytest.mark.integration
async def test_a_memory_capped_share_gets_the_cards_and_limits_the_scheduler_chose(
    shares: Shares,
) -> None:
    created = await shares.create(cluster_share("hami-cap", 20480, 25))
    # HAMi's webhook sent it to HAMi's scheduler, which recorded its choice on the pod.
    assert created.spec.scheduler_name == "hami-scheduler"
    env = await shares.running("hami-cap")
    pod = await shares.v1.read_namespaced_pod("hami-cap", NS)
    notes = pod.metadata.annotations
    ((use,),) = hami.decode_pod_devices(notes[hami.ALLOCATED])
    assert notes[hami.TO_ALLOCATE] == notes[hami.ALLOCATED]
    assert (notes[hami.ASSIGNED_NODE], pod.spec.node_name) == ("local-0", "local-0")
    assert (use.memory, use.cores) == (20480, 25)
    assert (_card(env), env["CUDA_DEVICE_MEMORY_LIMIT_0"], env["CUDA_DEVICE_SM_LIMIT"]) == (
        use.uuid,
        "20480m",
        "25",
    )
    assert notes[hami.BIND_PHASE] == "success"
    assert await shares.events(pod.metadata.uid, "FilteringSucceed")
    assert await shares.events(pod.metadata.uid, "BindingSucceed")


@pytest.mark.integration
async def test_binpack_and_spread_place_as_the_pods_annotation_asks(shares: Shares) -> None:
    binpack = {hami.GPU_POLICY: "binpack"}
    spread = {hami.GPU_POLICY: "spread"}
    await shares.create(cluster_share("hami-b1", 10240, 10, **binpack))
    first = _card(await shares.running("hami-b1"))
    await shares.create(cluster_share("hami-b2", 10240, 10, **binpack))
    assert _card(await shares.running("hami-b2")) == first
    await shares.create(cluster_share("hami-s1", 10240, 10, **spread))
    other = _card(await shares.running("hami-s1"))
    assert other != first


@pytest.mark.integration
async def test_a_share_that_fits_no_card_stays_pending_with_hamis_reasons(shares: Shares) -> None:
    spread = {hami.GPU_POLICY: "spread"}
    for name in ("hami-q1", "hami-q2"):
        await shares.create(cluster_share(name, 20480, 25, **spread))
        await shares.running(name)
    big = await shares.create(cluster_share("hami-whole", H100_MIB, 100))

    async def unschedulable() -> Any:
        pod = await shares.v1.read_namespaced_pod("hami-whole", NS)
        for c in pod.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
                return pod
        return None

    pod = await wait_for("the whole card Unschedulable", unschedulable, 30)
    assert pod.status.phase == "Pending"
    assert not pod.spec.node_name
    (cond,) = [c for c in pod.status.conditions if c.type == "PodScheduled"]
    assert "1/3 CardTypeMismatch, 2/3 CardInsufficientMemory" in cond.message, cond.message
    raw = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": cond.message,
                }
            ],
        }
    }
    assert hami.unschedulable_reasons(raw) == {"CardTypeMismatch": 1, "CardInsufficientMemory": 2}
    warnings = await wait_for(
        "HAMi's FilteringFailed events",
        lambda: shares.events(big.metadata.uid, "FilteringFailed"),
        30,
    )
    messages = {e.message for e in warnings}
    assert "1 nodes CardInsufficientMemory(local-0)" in messages, messages
    assert "no available node, 1 nodes do not meet" in messages, messages
    assert all(e.type == "Warning" for e in warnings)

    # A share ends: its card is empty again, and kube-scheduler tries the pod again.
    await shares.v1.delete_namespaced_pod("hami-q2", NS, grace_period_seconds=0)
    env = await shares.running("hami-whole")
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{H100_MIB}m"

"""The per-GPU view (console/gpus.py, pure): every holding with its node, pool, holder, since,
activity, memory and utilisation; training from admitted Workloads; a team lead's teams only."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from fractions import Fraction
from typing import Any

from gpuaas_service.console.gpus import (
    gpu_rows,
    holding_label,
    memory_cap,
    node_pools,
    pod_card_uuids,
    pod_places,
    read_node,
)
from gpuaas_service.reclaim.decide import Decision, decide
from gpuaas_service.reclaim.idleness import ActivityReport, State
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.activity import Activity
from tests.support.console_samples import MIG, NS, T0, wb, workload


def pod(user: str, node: str, requests: dict[str, str], server: str = "") -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"jupyter-{user}",
            "namespace": NS,
            "annotations": {
                "hub.jupyter.org/username": user,
                "hub.jupyter.org/servername": server,
            },
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "notebook", "resources": {"requests": requests}}],
        },
    }


def plan(*wbs: Any) -> list[Decision]:
    policy = load_policy({"policies": [{"name": "p", "idle_after": "30m"}]})
    return list(decide(list(wbs), [], policy, now=T0).decisions)


def test_holding_labels_and_memory_caps_in_a_persons_units() -> None:
    f = Fraction
    assert holding_label({"nvidia.com/gpu": f(1)}) == "1 GPU"
    assert holding_label({"nvidia.com/gpu": f(2)}) == "2 GPUs"
    assert holding_label({MIG: f(1)}) == "MIG 1g.5gb"
    assert holding_label({"nvidia.com/gpu.shared": f(1)}) == "1 share of a GPU"
    fraction = {"nvidia.com/gpu": f(1), "nvidia.com/gpumem": f(6144), "nvidia.com/gpucores": f(25)}
    assert holding_label(fraction) == "6 GiB, 25% of a GPU"
    assert holding_label({"cpu": f(2)}) == "—"
    assert memory_cap(fraction) == 6 << 30
    assert memory_cap({MIG: f(2)}) == 10 << 30
    assert memory_cap({"nvidia.com/gpu": f(1)}) is None


def test_each_holding_with_its_node_holder_activity_memory_and_utilisation() -> None:
    alice = replace(
        wb("alice", "team-a", State.IDLE, Fraction(1, 7)), holds={("a100-mig", MIG): Fraction(1)}
    )
    bob = wb("bob", "team-b", State.BUSY, Fraction(1), kind="gpu")
    places = pod_places(
        [
            pod("alice", "gpu-node-2", {MIG: "1"}),
            pod("bob", "gpu-node-1", {"nvidia.com/gpu": "1"}),
            {"metadata": {"name": "not-a-server", "annotations": {}}},
        ]
    )
    assert sorted(places) == ["alice", "bob"]
    report = ActivityReport(
        T0, Activity(gpu_memory=3 << 30, gpu_utilization=(("GPU-b0b", 80.0), ("GPU-b1b", 40.0)))
    )
    answer = gpu_rows(
        plan(alice, bob),
        places,
        {"bob": report},
        {"alice": 12.5},
        [],
        now=T0,
    )
    by_holder = {r["holder"]: r for r in answer["devices"]}
    assert [r["holder"] for r in answer["devices"]] == ["bob", "alice"]  # by node
    a, b = by_holder["alice"], by_holder["bob"]
    assert (a["node"], a["device"], a["kind"], a["team"]) == (
        "gpu-node-2",
        "MIG 1g.5gb",
        "mig",
        "team-a",
    )
    assert (a["state"], a["pool"]) == ("idle", ["a100-mig"])
    assert a["idle_since"] == "2026-11-30T11:30:00.000Z"
    assert a["since"] == "2026-11-30T11:00:00.000Z"
    assert a["memory_cap_bytes"] == 5 << 30
    assert a["utilization_percent"] == 12.5  # DCGM's per-pod figure
    assert (b["state"], b["idle_since"], b["device"]) == ("busy", None, "1 GPU")
    assert b["uuids"] == ["GPU-b0b", "GPU-b1b"]
    assert b["utilization_percent"] == 60.0  # the server's own GPUs, averaged
    nodes = {n["node"]: n for n in answer["nodes"]}
    assert nodes["gpu-node-2"] == {
        "node": "gpu-node-2",
        "holdings": 1,
        "idle": 1,
        "pools": ["a100-mig"],
        "gpu_equivalents": "0.14",
        "free_gpu_equivalents": "0",  # no Node objects given: nothing known free
    }
    assert nodes["gpu-node-1"]["gpu_equivalents"] == "1"


def test_training_from_admitted_workloads_and_a_team_leads_view() -> None:
    running = workload("train-run", "team-a", "training", T0 - timedelta(hours=3), 2, admitted=True)
    waiting = workload("train-1", "team-a", "training", T0, 1, admitted=False)
    other = workload("train-b", "team-b", "training", T0 - timedelta(hours=1), 1, admitted=True)
    alice = wb("alice", "team-a", State.BUSY, Fraction(1, 7))
    carol = wb("carol", "team-b", State.IDLE, Fraction(1, 7))
    cpu = wb("dave", "team-a", State.IDLE, Fraction(0), kind="cpu")
    everything = gpu_rows(plan(alice, carol, cpu), {}, {}, {}, [running, waiting, other], now=T0)
    holders = sorted(r["holder"] for r in everything["devices"])
    assert holders == ["alice", "carol", "train-b", "train-run"]  # no CPU server, no queued work
    train = next(r for r in everything["devices"] if r["holder"] == "train-run")
    assert (train["state"], train["team"], train["node"]) == ("training", "team-a", "")
    assert (train["gpu_equivalents"], train["device"]) == ("0.29", "MIG 1g.5gb × 2")
    assert everything["visible_teams"] is None
    lead = gpu_rows(plan(alice, carol), {}, {}, {}, [running, other], now=T0, only=["team-a"])
    assert sorted(r["holder"] for r in lead["devices"]) == ["alice", "train-run"]
    assert {r["team"] for r in lead["devices"]} == {"team-a"}
    assert lead["visible_teams"] == ["team-a"]


def node(name: str, allocatable: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", **allocatable}},
    }


def training_pod(name: str, node_name: str, owner_uid: str, requests: dict[str, str]) -> Any:
    return {
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "Job", "name": "train", "uid": owner_uid}],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        },
        "status": {"phase": "Running"},
    }


FLAVORS = {
    "h100": {"nvidia.com/gpu.product": "H100"},
    "a100-mig": {"nvidia.com/mig.config": "mixed"},
    "default": {},  # matches every node: no pool of its own
}


def test_free_rows_per_node_and_resource_with_their_pool() -> None:
    """h100-0 has 8 GPUs, alice's server holds 1 and a training pod 2: 5 free; the MIG node
    has 7 1g slices, 1 held; a finished pod and a pod on no node hold nothing."""
    nodes = [
        read_node(node("h100-0", {"nvidia.com/gpu": "8"}, **{"nvidia.com/gpu.product": "H100"})),
        read_node(
            node(
                "a100-0",
                {"nvidia.com/mig-1g.5gb": "7", "nvidia.com/mig-3g.20gb": "2"},
                **{"nvidia.com/mig.config": "mixed"},
            )
        ),
        read_node(node("cpu-0", {})),  # no GPUs: no row
    ]
    assert nodes[2] is None
    pods = [
        pod("alice", "h100-0", {"nvidia.com/gpu": "1"}),
        pod("bob", "a100-0", {MIG: "1"}),
        training_pod("train-0", "h100-0", "job-uid", {"nvidia.com/gpu": "2"}),
        {
            **training_pod("done-0", "h100-0", "job-2", {"nvidia.com/gpu": "4"}),
            "status": {"phase": "Succeeded"},
        },
        training_pod("gated-0", "", "job-3", {"nvidia.com/gpu": "4"}),
    ]
    answer = gpu_rows(
        [], {}, {}, {}, [], now=T0, nodes=[n for n in nodes if n], pods=pods, flavor_labels=FLAVORS
    )
    free = {r["key"]: r for r in answer["devices"] if r["state"] == "free"}
    assert sorted(free) == ["a100-0/mig-1g.5gb", "a100-0/mig-3g.20gb", "h100-0/gpu"]
    gpus = free["h100-0/gpu"]
    assert (gpus["device"], gpus["gpu_equivalents"], gpus["pool"]) == ("5 GPUs", "5", ["h100"])
    assert (gpus["kind"], gpus["holder"], gpus["holder_kind"], gpus["team"]) == (
        "gpu",
        "",
        "free",
        "",
    )
    mig = free["a100-0/mig-1g.5gb"]
    assert (mig["device"], mig["gpu_equivalents"], mig["pool"]) == (
        "MIG 1g.5gb × 6",
        "0.86",
        ["a100-mig"],
    )
    assert mig["memory_cap_bytes"] == 6 * (5 << 30)
    summary = {n["node"]: n for n in answer["nodes"]}
    assert summary["h100-0"]["free_gpu_equivalents"] == "5"
    assert summary["a100-0"]["free_gpu_equivalents"] == "1.71"  # 6/7 + 2 x 3/7
    assert summary["h100-0"]["holdings"] == 0  # no plan given: the free rows are not holdings


L4_CARDS = [hami.RegisteredCard(f"GPU-l4-{i}", i, 10, 23034, 100, "NVIDIA L4") for i in range(2)]


def test_each_card_of_a_hami_node_is_a_free_row_from_hamis_annotations() -> None:
    # HAMi's device plugin registers the cards; its scheduler records each pod's.
    raw = node(
        "l4-hami-0",
        {"nvidia.com/gpu": "21", "nvidia.com/gpumem": "99999", "nvidia.com/gpucores": "999"},
    )
    raw["metadata"]["annotations"] = {hami.REGISTER: hami.encode_register(L4_CARDS)}
    hami_node = read_node(raw)
    assert hami_node is not None
    assert hami_node.cards == tuple(L4_CARDS)
    share = pod(
        "alice",
        "l4-hami-0",
        {"nvidia.com/gpu": "2", "nvidia.com/gpumem": "4096", "nvidia.com/gpucores": "25"},
    )
    share["metadata"]["annotations"][hami.ALLOCATED] = (
        "GPU-l4-0,NVIDIA,4096,25:GPU-l4-1,NVIDIA,4096,25:;"
    )
    whole = pod("bob", "l4-hami-0", {"nvidia.com/gpu": "1"})  # a GPU of another device plugin
    rows = {
        r["key"]: r
        for r in gpu_rows([], {}, {}, {}, [], now=T0, nodes=[hami_node], pods=[share, whole])[
            "devices"
        ]
    }
    # The node-wide gpumem/gpucores sums are not read: each card as HAMi's records leave it.
    assert set(rows) == {"l4-hami-0/GPU-l4-0", "l4-hami-0/GPU-l4-1"}
    card = rows["l4-hami-0/GPU-l4-0"]
    assert (card["kind"], card["uuids"], card["gpu_equivalents"]) == (
        "fraction",
        ["GPU-l4-0"],
        "0.75",
    )
    assert card["memory_cap_bytes"] == (23034 - 4096) << 20
    assert card["device"] == "NVIDIA L4: 9 vGPU slots, 75% of its cores"
    # 21 = 2 x 10 slots + 1 whole GPU, which bob holds: no "gpu" row.
    full = pod("carol", "l4-hami-0", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "23034"})
    full["metadata"]["annotations"][hami.ALLOCATED] = "GPU-l4-1,NVIDIA,23034,0:;"
    devices = gpu_rows([], {}, {}, {}, [], now=T0, nodes=[hami_node], pods=[full])["devices"]
    assert {r["key"] for r in devices} == {"l4-hami-0/gpu", "l4-hami-0/GPU-l4-0"}


def test_a_fractions_cards_are_hamis_record_not_what_its_server_reports() -> None:
    share = pod("alice", "local-0", {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4096"})
    share["metadata"]["annotations"][hami.ALLOCATED] = "GPU-h100-1,NVIDIA,4096,0:;"
    assert pod_places([share])["alice"].cards == ("GPU-h100-1",)
    job = training_pod("train-1", "local-0", "job-uid", {"nvidia.com/gpu": "1"})
    job["metadata"]["annotations"] = {hami.ALLOCATED: "GPU-h100-0,NVIDIA,81920,100:;"}
    assert pod_card_uuids([job])["job-uid"] == ["GPU-h100-0"]


def test_a_training_workload_is_placed_on_its_pods_nodes_and_a_team_lead_sees_free_rows() -> None:
    running = replace(
        workload("train-run", "team-a", "training", T0 - timedelta(hours=3), 2, admitted=True),
        owner_kind="Job",
        owner_uid="job-uid",
    )
    pods = [
        training_pod("train-0", "a100-0", "job-uid", {MIG: "1"}),
        training_pod("train-1", "a100-1", "job-uid", {MIG: "1"}),
    ]
    a100 = read_node(node("a100-0", {MIG: "7"}))
    assert a100 is not None
    answer = gpu_rows([], {}, {}, {}, [running], now=T0, only=["team-b"], nodes=[a100], pods=pods)
    # team-b's lead: no team-a training, but what is free (it names nobody)
    assert [(r["node"], r["state"], r["device"]) for r in answer["devices"]] == [
        ("a100-0", "free", "MIG 1g.5gb × 6")
    ]
    everyone = gpu_rows([], {}, {}, {}, [running], now=T0, nodes=[a100], pods=pods)
    train = next(r for r in everyone["devices"] if r["holder_kind"] == "training")
    assert train["node"] == "a100-0, a100-1"


def test_node_reading_and_pools() -> None:
    assert read_node(node("n", {"nvidia.com/gpu": "0"})) is None
    cordoned = {**node("n", {"nvidia.com/gpu": "8"}), "spec": {"unschedulable": True}}
    assert read_node(cordoned) is None
    assert read_node(node("n", {"nvidia.com/gpu": "lots"})) is None
    assert node_pools({"nvidia.com/gpu.product": "H100", "x": "y"}, FLAVORS) == ["h100"]
    assert node_pools({}, FLAVORS) == []


def test_a_free_cards_words_name_the_card_then_what_is_free_of_it() -> None:
    """The words "89.98 GiB and 4 GPU of cores, in 40 vGPU slots" read as nonsense; the
    card comes first, its slots and cores after (its memory: the memory column)."""
    from gpuaas_service.console.gpus import free_card_label

    assert free_card_label("NVIDIA L4", 10, 100) == "NVIDIA L4: 10 vGPU slots, all its cores"
    assert free_card_label("NVIDIA L4", 1, 25) == "NVIDIA L4: 1 vGPU slot, 25% of its cores"
    assert free_card_label("NVIDIA L4", 3, 0) == "NVIDIA L4: 3 vGPU slots, 0% of its cores"

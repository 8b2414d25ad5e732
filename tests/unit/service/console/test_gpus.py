"""The per-GPU view (console/gpus.py, pure): every holding with its node, pool, holder, since,
activity, memory and utilisation; training from admitted Workloads; a team lead's teams only."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from fractions import Fraction
from typing import Any

from gpuaas_service.console.gpus import gpu_rows, holding_label, memory_cap, pod_places
from gpuaas_service.reclaim.decide import Decision, decide
from gpuaas_service.reclaim.idleness import ActivityReport, State
from gpuaas_service.reclaim.policy import load_policy
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

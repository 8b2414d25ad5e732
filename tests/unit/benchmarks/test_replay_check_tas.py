"""The dev-cluster check's TAS window (benchmarks/replay/check.py): the h200 pool alone, the
scripted Jobs as the model runs them with Kueue's Topology Aware Scheduling (which Jobs it
holds for a whole node, and when they are admitted), the real Jobs' shape, the preemption
scenario on that pool, and the comparison row."""

from __future__ import annotations

from typing import Any

from benchmarks.replay.check import (
    TAS,
    _tas_job,
    compare_kueue,
    model_run,
    preemption_scenario,
    tas_organisation,
    tas_window,
    verdict,
)
from benchmarks.replay.run import DEFAULT_POLICY
from benchmarks.replay.sim import Latencies

GPU = ("h200", "nvidia.com/gpu")


def test_the_tas_organisation_is_the_h200_pool_and_the_training_queues() -> None:
    org = tas_organisation()
    assert org.capacity == {GPU: 24}
    assert sorted(org.cluster_queues) == ["team-a-training", "team-b-training"]
    assert all(cq.quotas[GPU].nominal == 12 for cq in org.cluster_queues.values())


def test_the_model_holds_the_whole_node_jobs_for_topology_then_admits_them() -> None:
    """a-whole: quota and no node at 300 s; no quota once b-three takes the fullest node that
    holds it; quota again at 3600 s (a-five ends) but still no node (b-three sits there);
    admitted when b-three ends at 4200 s. b-whole (borrowing, later) gets the next node that
    frees, b-six's at 5430 s."""
    model = model_run(tas_window(), str(DEFAULT_POLICY), Latencies(0.0, 0.0), TAS)
    admitted = {n: a["admitted"] for n, a in model.admissions().items()}
    assert admitted == {
        "a-five": 0.0,
        "b-six": 30.0,
        "a-four": 60.0,
        "a-whole": 4200.0,
        "b-three": 600.0,
        "b-whole": 5430.0,
    }
    assert model.kueue()["topology"] == {"a-whole": 300.0, "b-whole": 3600.0}


def test_the_real_jobs_ask_kueue_for_one_node_of_h200() -> None:
    plan = _tas_job("a-whole", "team-a", 8, 60.0)
    template = plan.body["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "gpuaas.dev/run-seconds": "60.00",
        "kueue.x-k8s.io/podset-required-topology": "kubernetes.io/hostname",
    }
    assert template["spec"]["nodeSelector"] == {"gpuaas.dev/pool": "h200"}
    limits = template["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "8"}


def test_the_preemption_scenario_on_h200_preempts_one_job() -> None:
    model = model_run(preemption_scenario("tas"), str(DEFAULT_POLICY), Latencies(), TAS)
    assert len(model.kueue()["preempted"]) == 1


CAL = {"create→admitted": {"p50": 0.05, "p99": 0.07}}
COMPARISON: dict[str, Any] = {
    "only_model": [],
    "only_real": [],
    "order_agreement": 1.0,
    "waits": {},
}


def test_the_verdict_has_the_tas_row_only_for_a_tas_window() -> None:
    model = {"preempted": {}, "fragmented": {}, "placed": {}, "topology": {"a-whole": 300.0}}
    same = compare_kueue(model, {**model, "topology": {"a-whole": 310.0}}, tolerance_s=60)
    other = compare_kueue(model, {**model, "topology": {}}, tolerance_s=60)
    plain = compare_kueue({k: v for k, v in model.items() if k != "topology"}, {}, tolerance_s=60)

    def rows(kueue: dict[str, Any]) -> dict[str, bool]:
        v = verdict(COMPARISON, None, k=30, cal=CAL, kueue=kueue)
        return {r["check"]: r["holds"] for r in v["rows"]}

    assert rows(same)["Jobs held for a whole node (Kueue TAS)"] is True
    assert rows(other)["Jobs held for a whole node (Kueue TAS)"] is False
    assert "Jobs held for a whole node (Kueue TAS)" not in rows(plain)

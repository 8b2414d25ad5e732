"""HAMi's annotations and a pod's Unschedulable condition as jupyter_gpuaas/core/hami.py reads
and writes them (HAMi v2.10 formats; kube-scheduler's words)."""

from __future__ import annotations

from typing import Any

from jupyter_gpuaas.core import hami

H100_A = hami.RegisteredCard("GPU-h100-a", 1, 10, 81920, 100, "NVIDIA H100 80GB HBM3")
H100_B = hami.RegisteredCard("GPU-h100-b", 2, 10, 81920, 100, "NVIDIA H100 80GB HBM3")


def test_annotations_round_trip_as_hami_encodes_them() -> None:
    uses = [[], [hami.CardUse(H100_A.uuid, 20480, 25), hami.CardUse(H100_B.uuid, 1024, 0)]]
    text = hami.encode_pod_devices(uses)
    assert text == f";{H100_A.uuid},NVIDIA,20480,25:{H100_B.uuid},NVIDIA,1024,0:;"
    assert hami.decode_pod_devices(text) == uses
    register = hami.encode_register([H100_A])
    assert '"type":"NVIDIA H100 80GB HBM3"' in register
    assert '"devmem":81920' in register
    assert hami.read_register({hami.REGISTER: register}) == [H100_A]
    assert hami.read_register({hami.REGISTER: "not json"}) == []


def test_the_unschedulable_condition_carries_hamis_reasons() -> None:
    pod: dict[str, Any] = {
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/7 nodes are available: 1 1/3 CardTypeMismatch, 2/3 "
                    "CardInsufficientMemory, 6 node(s) didn't match Pod's node affinity/selector. "
                    "preemption: 0/7 nodes are available: 1 1/3 CardTypeMismatch, 2/3 "
                    "CardInsufficientMemory, 6 Preemption is not helpful for scheduling.",
                }
            ],
        }
    }
    assert hami.unschedulable_reasons(pod) == {"CardTypeMismatch": 1, "CardInsufficientMemory": 2}
    pod["status"]["conditions"][0]["reason"] = "SchedulingGated"
    assert hami.unschedulable_reasons(pod) == {}


def test_a_pod_holds_the_devices_of_all_its_containers_and_odd_entries_are_skipped() -> None:
    text = f"{H100_A.uuid},NVIDIA,1024,10:bad:;;{H100_B.uuid},NVIDIA,x,1:{H100_B.uuid},NVIDIA,2,3:;"
    pod = {"metadata": {"annotations": {hami.ALLOCATED: text}}}
    assert hami.pod_devices(pod) == [
        hami.CardUse(H100_A.uuid, 1024, 10),
        hami.CardUse(H100_B.uuid, 2, 3),
    ]
    assert hami.pod_devices({"metadata": {}}) == []


def test_a_models_no_room_condition_reads_as_hamis() -> None:
    pod = {"status": {"phase": "Pending", "conditions": [hami.no_room_condition(2)]}}
    assert hami.unschedulable_reasons(pod) == {hami.CARD_INSUFFICIENT_MEMORY: 2}
    running = {"status": {"phase": "Running", "conditions": [hami.no_room_condition(2)]}}
    assert hami.unschedulable_reasons(running) == {}

"""Attribution of NVML's per-process memory to kernels, one row per driver behaviour and case."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from jupyter_gpuaas.gpu.attribution import attribute, merge_processes
from jupyter_gpuaas.gpu.model import Device, GpuProcess, KernelTree

GiB = 1024**3
G0, G1, PARENT, MIG0, MIG1 = "GPU-0", "GPU-1", "GPU-A100", "MIG-0", "MIG-1"
HOST = 10_000_000  # host PIDs: no process of this namespace has them


def gpu(uuid: str, used: float, *, shared: bool = False, read: bool = True) -> Device:
    return Device(
        uuid=uuid,
        index=0,
        name="NVIDIA H100 80GB HBM3",
        memory_total=80 * GiB,
        memory_used=int(used * GiB),
        shared=shared,
        processes_read=read,
    )


def mig_gpu(used: float) -> list[Device]:
    parent = Device(PARENT, 2, "NVIDIA A100-SXM4-40GB", 40 * GiB, int(used * GiB), mig_enabled=True)
    return [
        parent,
        Device(MIG0, 0, "MIG 1g.5gb", 5 * GiB, int(used * GiB), parent_uuid=PARENT),
        Device(MIG1, 1, "MIG 1g.5gb", 5 * GiB, 0, parent_uuid=PARENT),
    ]


def proc(device: str, pid: int, size: float | None) -> GpuProcess:
    return GpuProcess(device, pid, None if size is None else int(size * GiB))


@dataclass
class Case:
    devices: list[Device]
    processes: list[GpuProcess]
    kernels: dict[str, set[int]]
    # kernel -> (by_device in GiB or None, gpu_memory in GiB or None, attribution)
    expected: dict[str, tuple[dict[str, float | None], float | None, str]]
    other: dict[str, float | None]
    # processes of this PID namespace that are not kernels' (a terminal's python, say)
    others_visible: set[int] = field(default_factory=set)


CASES = {
    "565: kernel PID with its memory is exact": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, 100, 2)],
        kernels={"a": {100}},
        expected={"a": ({G0: 2}, 2, "exact")},
        other={G0: 0},
    ),
    "child process (data loader) counts for its kernel": Case(
        devices=[gpu(G0, 3)],
        processes=[proc(G0, 100, 1), proc(G0, 101, 2)],
        kernels={"a": {100, 101}, "b": {200}},
        expected={"a": ({G0: 3}, 3, "exact"), "b": ({}, 0, "none")},
        other={G0: 0},
    ),
    "two kernels on two GPUs, plus overhead that is nobody's": Case(
        devices=[gpu(G0, 2.5), gpu(G1, 4)],
        processes=[proc(G0, 100, 2), proc(G1, 200, 4)],
        kernels={"a": {100}, "b": {200}},
        expected={"a": ({G0: 2}, 2, "exact"), "b": ({G1: 4}, 4, "exact")},
        other={G0: 0.5, G1: 0},
    ),
    "one kernel on two GPUs sums both": Case(
        devices=[gpu(G0, 1), gpu(G1, 3)],
        processes=[proc(G0, 100, 1), proc(G1, 101, 3)],
        kernels={"a": {100, 101}},
        expected={"a": ({G0: 1, G1: 3}, 4, "exact")},
        other={G0: 0, G1: 0},
    ),
    "535.113-560: PID matches, memory reads 0 -> size unknown": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, 100, 0)],
        kernels={"a": {100}, "b": {200}},
        expected={"a": ({G0: None}, None, "size_unknown"), "b": ({}, 0, "none")},
        other={G0: None},
    ),
    "NVML reports no figure (None) -> size unknown": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, 100, None)],
        kernels={"a": {100}},
        expected={"a": ({G0: None}, None, "size_unknown")},
        other={G0: None},
    ),
    "known on one GPU, unknown on another -> unknown in total": Case(
        devices=[gpu(G0, 1), gpu(G1, 2)],
        processes=[proc(G0, 100, 1), proc(G1, 101, 0)],
        kernels={"a": {100, 101}},
        expected={"a": ({G0: 1, G1: None}, None, "size_unknown")},
        other={G0: 0, G1: None},
    ),
    "<=535.104: host PIDs, one kernel, unshared GPU -> sole candidate": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, HOST + 5, 2)],
        kernels={"a": {100}},
        expected={"a": ({G0: 2}, 2, "sole_candidate")},
        other={G0: 0},
    ),
    "<=535.104: host PIDs, two kernels -> other, nobody's": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, HOST + 5, 2)],
        kernels={"a": {100}, "b": {200}},
        expected={"a": ({}, 0, "none"), "b": ({}, 0, "none")},
        other={G0: 2},
    ),
    "<=535.104: host PIDs on a time-shared GPU -> other (maybe another user's)": Case(
        devices=[gpu(G0, 2, shared=True)],
        processes=[proc(G0, HOST + 5, 2)],
        kernels={"a": {100}},
        expected={"a": ({}, 0, "none")},
        other={G0: 2},
    ),
    "PIDs NVML translates elsewhere make unmatched ones someone else's": Case(
        devices=[gpu(G0, 2), gpu(G1, 3)],
        processes=[proc(G0, 100, 2), proc(G1, HOST + 5, 3)],
        kernels={"a": {100}},
        expected={"a": ({G0: 2}, 2, "exact")},
        other={G0: 0, G1: 3},
    ),
    "local process that is no kernel's (a terminal) -> other": Case(
        devices=[gpu(G0, 3)],
        processes=[proc(G0, 300, 3)],
        kernels={"a": {100}},
        expected={"a": ({}, 0, "none")},
        other={G0: 3},
        others_visible={300},
    ),
    "kernel that exited: its lingering PID is other": Case(
        devices=[gpu(G0, 3)],
        processes=[proc(G0, 100, 2), proc(G0, 200, 1)],
        kernels={"b": {200}},  # kernel "a" (pid 100) is gone
        expected={"b": ({G0: 1}, 1, "exact")},
        other={G0: 2},
    ),
    "no kernels at all: everything is other": Case(
        devices=[gpu(G0, 3)],
        processes=[proc(G0, 300, 3)],
        kernels={},
        expected={},
        other={G0: 3},
        others_visible={300},
    ),
    "MIG: memory on the MIG device, parent has no other entry": Case(
        devices=mig_gpu(1),
        processes=[proc(MIG0, 100, 1)],
        kernels={"a": {100}},
        expected={"a": ({MIG0: 1}, 1, "exact")},
        other={MIG0: 0, MIG1: 0},
    ),
    "MIG: processes listed on the parent are ignored (they are on its MIG devices)": Case(
        devices=mig_gpu(1),
        processes=[proc(PARENT, 100, 1), proc(MIG0, 100, 1)],
        kernels={"a": {100}},
        expected={"a": ({MIG0: 1}, 1, "exact")},
        other={MIG0: 0, MIG1: 0},
    ),
    "compute and graphics entries of one process count once": Case(
        devices=[gpu(G0, 2)],
        processes=[proc(G0, 100, 2), proc(G0, 100, 2)],
        kernels={"a": {100}},
        expected={"a": ({G0: 2}, 2, "exact")},
        other={G0: 0},
    ),
    "a kernel started from another kernel owns its own tree": Case(
        devices=[gpu(G0, 3)],
        processes=[proc(G0, 100, 1), proc(G0, 150, 2)],
        kernels={"outer": {100, 150, 151}, "inner": {150, 151}},
        expected={"outer": ({G0: 1}, 1, "exact"), "inner": ({G0: 2}, 2, "exact")},
        other={G0: 0},
    ),
    "process list unreadable: other cannot be split": Case(
        devices=[gpu(G0, 3, read=False)],
        processes=[],
        kernels={"a": {100}},
        expected={"a": ({}, 0, "none")},
        other={G0: None},
    ),
    "device figure read before a process grew: other is clamped at 0": Case(
        devices=[gpu(G0, 1)],
        processes=[proc(G0, 100, 2)],
        kernels={"a": {100}},
        expected={"a": ({G0: 2}, 2, "exact")},
        other={G0: 0},
    ),
}


def _gib(value: float | None) -> int | None:
    return None if value is None else int(value * GiB)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_attribution(case: Case) -> None:
    kernels = [KernelTree(kid, frozenset(pids)) for kid, pids in case.kernels.items()]
    visible = frozenset(
        {pid for pids in case.kernels.values() for pid in pids} | case.others_visible
    )
    result = attribute(case.devices, case.processes, kernels, visible)

    got = {
        kid: (dict(k.by_device), k.gpu_memory, k.attribution) for kid, k in result.kernels.items()
    }
    want = {
        kid: ({d: _gib(v) for d, v in by.items()}, _gib(total), kind)
        for kid, (by, total, kind) in case.expected.items()
    }
    assert got == want
    assert dict(result.other_memory) == {d: _gib(v) for d, v in case.other.items()}


def test_kernels_and_other_add_up_to_used() -> None:
    devices = [gpu(G0, 7), gpu(G1, 5)]
    processes = [proc(G0, 100, 2), proc(G0, 101, 1), proc(G1, 200, 4)]
    kernels = [KernelTree("a", frozenset({100})), KernelTree("b", frozenset({101, 200}))]
    result = attribute(devices, processes, kernels, frozenset({100, 101, 200}))
    for device in devices:
        on_device = [k.by_device.get(device.uuid) or 0 for k in result.kernels.values()]
        assert sum(on_device) + (result.other_memory[device.uuid] or 0) == device.memory_used


@pytest.mark.parametrize(
    ("sizes", "kept"),
    [
        ([None, 2], 2),
        ([2, None], 2),
        ([1, 2], 2),
        ([None, None], None),
    ],
)
def test_merge_prefers_a_known_size(sizes: list[float | None], kept: float | None) -> None:
    merged = merge_processes([proc(G0, 100, s) for s in sizes])
    assert merged == [proc(G0, 100, kept)]

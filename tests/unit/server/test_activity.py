"""The activity decision: idle_since and which utilisation is this server's own."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity import (
    KernelActivity,
    TerminalActivity,
    activity_payload,
    attributable_utilization,
    idle_since,
    total_gpu_memory,
)

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)
STARTED = T0 - timedelta(hours=1)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def kernel(state: str, minutes: int | None, gpu: int | None = 0) -> KernelActivity:
    return KernelActivity("k", state, at(minutes) if minutes is not None else None, 1, gpu)


def device(uuid: str, utilization: int | None, **kw: object) -> Device:
    return Device(uuid, 0, "GPU", 100, 0, utilization=utilization, **kw)  # type: ignore[arg-type]


WHOLE = device("GPU-whole", 50)
SHARED = device("GPU-shared", 90, shared=True)
PARENT = device("GPU-mig-parent", None, mig_enabled=True)
MIG = device("MIG-1", None, parent_uuid="GPU-mig-parent")


def test_only_whole_unshared_gpus_have_attributable_utilization() -> None:
    assert attributable_utilization([WHOLE, SHARED, PARENT, MIG]) == [("GPU-whole", 50)]


@pytest.mark.parametrize(
    ("kernels", "terminals", "utilization", "expected"),
    [
        pytest.param([], [], [], STARTED, id="nothing ran: idle since the server started"),
        pytest.param([kernel("idle", 5)], [], [], at(5), id="one idle kernel"),
        pytest.param(
            [kernel("idle", 5), kernel("idle", 9)],
            [TerminalActivity("1", at(7))],
            [],
            at(9),
            id="latest of kernels and terminals",
        ),
        pytest.param(
            [kernel("idle", 5)],
            [TerminalActivity("1", at(12))],
            [],
            at(12),
            id="a terminal used later",
        ),
        pytest.param([kernel("busy", 5), kernel("idle", 9)], [], [], None, id="a busy kernel"),
        pytest.param([kernel("idle", 5)], [], [("GPU-0", 6)], None, id="GPU above threshold"),
        pytest.param([kernel("idle", 5)], [], [("GPU-0", 5)], at(5), id="GPU at threshold"),
        pytest.param([kernel("starting", None)], [], [], STARTED, id="no activity time yet"),
    ],
)
def test_idle_since(
    kernels: list[KernelActivity],
    terminals: list[TerminalActivity],
    utilization: list[tuple[str, int]],
    expected: datetime | None,
) -> None:
    assert idle_since(kernels, terminals, utilization, 5, STARTED) == expected


@pytest.mark.parametrize(
    ("sizes", "total"),
    [([], 0), ([0, 2, 3], 5), ([2, None], None)],
)
def test_total_gpu_memory(sizes: list[int | None], total: int | None) -> None:
    assert total_gpu_memory([kernel("idle", 0, s) for s in sizes]) == total


def test_busy_shared_gpu_does_not_keep_the_server_busy() -> None:
    payload = activity_payload(
        sampled_at=at(10),
        source="simulated",
        error=None,
        kernels=[kernel("idle", 3, 2048)],
        terminals=[],
        devices=[SHARED, PARENT, MIG, device("GPU-idle", 1)],
        busy_utilization_percent=5,
        started=STARTED,
    )
    assert payload == {
        "sampled_at": "2026-11-30T16:10:00.000Z",
        "source": "simulated",
        "error": None,
        "kernels": [
            {
                "kernel_id": "k",
                "execution_state": "idle",
                "last_activity": "2026-11-30T16:03:00.000Z",
                "connections": 1,
                "gpu_memory": 2048,
            }
        ],
        "terminals": [],
        "gpu_memory": 2048,
        "gpu_utilization": [{"uuid": "GPU-idle", "utilization": 1}],
        "idle_since": "2026-11-30T16:03:00.000Z",
    }

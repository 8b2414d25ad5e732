"""The server's activity payload: which utilisation is this server's own."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from jupyter_gpuaas.core.activity import KernelActivity
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity import activity_payload, attributable_utilization

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

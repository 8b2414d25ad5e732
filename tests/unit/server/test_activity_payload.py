"""The server's activity payload: which utilisation is this server's own."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from jupyter_gpuaas.core.activity import KernelActivity
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity_payload import activity_payload, attributable_utilization

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


class Kernels:
    """jupyter-server's kernel manager, as much of it as the activity reads."""

    def __init__(self, kernels: dict[str, object], models: dict[str, dict[str, object]]) -> None:
        self.kernels, self.models = kernels, models

    def list_kernel_ids(self) -> list[str]:
        return list(self.models)

    def kernel_model(self, kernel_id: str) -> dict[str, object]:
        return self.models[kernel_id]

    def get_kernel(self, kernel_id: str) -> object:
        return self.kernels[kernel_id]


class Terminals:
    def list(self) -> list[dict[str, object]]:
        return [{"name": "1", "last_activity": isoformat(at(-30))}]


def isoformat(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def test_the_latest_activity_is_a_persons_not_the_servers_own_snapshot() -> None:
    """What the reporter watches between reports: the newest kernel or terminal time, where a
    kernel running the server's own snapshot counts as it was before the snapshot."""
    from types import SimpleNamespace

    from jupyter_gpuaas.server.activity_payload import latest_user_activity
    from jupyter_gpuaas.server.kernel_requests import OWN_REQUEST

    saving = SimpleNamespace(**{OWN_REQUEST: at(-20)})  # its user left it 20 min ago
    km = Kernels(
        {"a": SimpleNamespace(), "b": saving},
        {
            "a": {"execution_state": "idle", "last_activity": isoformat(at(-10))},
            "b": {"execution_state": "busy", "last_activity": isoformat(at(0))},
        },
    )
    settings = {"kernel_manager": km, "terminal_manager": Terminals()}
    assert latest_user_activity(settings) == at(-10)
    assert latest_user_activity({"kernel_manager": Kernels({}, {})}) is None
    assert latest_user_activity(
        {"kernel_manager": Kernels({}, {}), "terminal_manager": Terminals()}
    ) == at(-30)

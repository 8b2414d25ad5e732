"""The ``usage`` answer built from plain data (``jupyter_gpuaas.gpu.usage``)."""

from __future__ import annotations

from datetime import datetime, timezone

from jupyter_gpuaas.gpu.attribution import Attribution, KernelGpu
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.gpu.nvml import NvmlRead
from jupyter_gpuaas.gpu.usage import KernelInfo, cap_payload, device_payload, usage_payload

GiB = 1 << 30
WHOLE = Device("GPU-a", 0, "NVIDIA H100 80GB HBM3", 80 * GiB, 10 * GiB, utilization=40)
CAPPED = Device(
    "GPU-b",
    1,
    "NVIDIA H100 80GB HBM3",
    6 * GiB,
    2 * GiB,
    memory_cap=6 * GiB,
    cap_source="CUDA_DEVICE_MEMORY_LIMIT_0",
    compute_cap=25,
)
AT = datetime(2026, 12, 6, 10, 0, 0, 250000, tzinfo=timezone.utc)


def test_a_device_without_a_cap_has_none_and_a_fraction_says_where_its_cap_comes_from() -> None:
    assert cap_payload(WHOLE) is None
    assert device_payload(WHOLE)["cap"] is None
    assert cap_payload(CAPPED) == {
        "memory": 6 * GiB,
        "source": "CUDA_DEVICE_MEMORY_LIMIT_0",
        "enforced_by": "HAMi",
        "cores_percent": 25,
    }
    payload = device_payload(CAPPED)
    assert (payload["uuid"], payload["index"], payload["memory_total"]) == ("GPU-b", 1, 6 * GiB)
    assert (payload["parent_uuid"], payload["mig_profile"], payload["shared"]) == (
        None,
        None,
        False,
    )


def test_each_kernel_has_a_row_with_its_sorted_tree_and_an_unattributed_one_holds_nothing() -> None:
    read = NvmlRead(source="simulated", devices=(WHOLE, CAPPED))
    kernels = [
        KernelInfo("k1", name="python3", path="a.ipynb", session_type="notebook", pid=30),
        KernelInfo("k2", name="python3", execution_state="busy"),
    ]
    attribution = Attribution(
        kernels={"k1": KernelGpu("k1", {"GPU-a": 4 * GiB, "GPU-b": None}, None, "size_unknown")},
        other_memory={"GPU-a": 6 * GiB, "GPU-b": None},
    )
    payload = usage_payload(read, kernels, {"k1": frozenset({31, 30, 7})}, attribution, AT)
    assert payload["source"] == "simulated"
    assert (payload["error"], payload["error_kind"]) == (None, None)
    assert payload["sampled_at"].endswith("Z")
    assert [d["uuid"] for d in payload["devices"]] == ["GPU-a", "GPU-b"]
    first, second = payload["kernels"]
    assert first["pids"] == [7, 30, 31]
    assert first["by_device"] == {"GPU-a": 4 * GiB, "GPU-b": None}
    assert (first["gpu_memory"], first["attribution"]) == (None, "size_unknown")
    assert (first["path"], first["session_type"]) == ("a.ipynb", "notebook")
    # a kernel attribution knows nothing of: no processes, no memory, "none"
    assert second["pids"] == []
    assert (second["gpu_memory"], second["by_device"], second["attribution"]) == (0, {}, "none")
    assert second["execution_state"] == "busy"
    assert payload["other_memory"] == {"GPU-a": 6 * GiB, "GPU-b": None}


def test_an_unavailable_read_carries_its_error_and_no_devices() -> None:
    read = NvmlRead(
        source="unavailable", error="NVML Shared Library Not Found", error_kind="no_driver"
    )
    payload = usage_payload(read, [], {}, Attribution(kernels={}, other_memory={}), AT)
    assert (payload["source"], payload["error_kind"]) == ("unavailable", "no_driver")
    assert payload["error"] == "NVML Shared Library Not Found"
    assert (payload["devices"], payload["kernels"], payload["other_memory"]) == ([], [], {})

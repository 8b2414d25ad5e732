"""Real GPU memory from two kernels, attributed by the server over the real driver.

Runs twice: with the server in this PID namespace, and with it in a new one
(``unshare --pid --fork --mount-proc``), which is how a pod's container sees the driver. What
the driver reports there depends on its version (docs/simulated-gpus.md), so each run first probes
the raw driver from the same namespace, and the server's attribution must follow it. MIG cannot
be switched on from here, so MIG devices are not covered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.gpu_server import Server, unshare_prefix

pytestmark = pytest.mark.gpu

GiB = 1024**3
# Allocate `size` bytes with the CUDA driver API (no framework needed); print this process's PID.
ALLOC = """
import ctypes, os
cuda = ctypes.CDLL("libcuda.so.1")
def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{{what}} failed with CUDA error {{rc}}")
check(cuda.cuInit(0), "cuInit")
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
check(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t({size})), "cuMemAlloc")
print(os.getpid(), flush=True)
"""
# The same in a child process of the kernel (a data-loader worker, say), kept alive.
ALLOC_IN_CHILD = """
import subprocess, sys
_worker = subprocess.Popen(
    [sys.executable, "-c", {code!r} + "\\nimport sys; sys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
)
print(_worker.stdout.readline().strip())
"""
# What the raw driver says about a process of this namespace that holds memory.
PROBE = (
    ALLOC.format(size=256 * 1024**2)
    + """
import json, pynvml
pynvml.nvmlInit()
mine = [p.usedGpuMemory
        for i in range(pynvml.nvmlDeviceGetCount())
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(pynvml.nvmlDeviceGetHandleByIndex(i))
        if p.pid == os.getpid()]
print(json.dumps({"listed": bool(mine), "memory": mine[0] if mine else None}))
"""
)


def driver_behaviour(prefix: list[str]) -> str:
    """The attribution the notes predict from what NVML says about a probe process."""
    out = subprocess.run(
        [*prefix, sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-1]
    probe = json.loads(out)
    if not probe["listed"]:
        return "none"  # host PIDs: nothing matches, and two kernels are no sole candidate
    return "exact" if probe["memory"] else "size_unknown"


def kernel_row(usage: dict[str, Any], kernel_id: str) -> dict[str, Any]:
    [row] = [k for k in usage["kernels"] if k["kernel_id"] == kernel_id]
    result: dict[str, Any] = row
    return result


@pytest.mark.parametrize("namespace", [False, True], ids=["as is", "new PID namespace"])
async def test_two_kernels_real_gpu_memory(
    tmp_path: Path, driver_version: str, namespace: bool
) -> None:
    prefix = unshare_prefix() if namespace else []
    expected = driver_behaviour(prefix)
    print(f"driver {driver_version}, {'new PID namespace' if namespace else 'as is'}: {expected}")
    config = {
        "ServerApp": {"jpserver_extensions": {"jupyter_gpuaas": True}},
        "GPUaaS": {"gpu_source": "nvml", "sample_ttl": 0},
    }
    server = Server(tmp_path, config, prefix)
    await server.start()
    try:
        a = await server.start_session("a.ipynb")
        b = await server.start_session("b.ipynb")
        pid_a = int(await server.execute(a, ALLOC.format(size=GiB)))
        worker = int(
            await server.execute(b, ALLOC_IN_CHILD.format(code=ALLOC.format(size=3 * GiB)))
        )

        def settled(usage: dict[str, Any]) -> bool:
            rows = [kernel_row(usage, a), kernel_row(usage, b)]
            return all(r["attribution"] == expected for r in rows)

        usage = await server.wait_for("gpuaas/api/usage", settled)
        print(json.dumps(usage, indent=1))
        assert usage["source"] == "nvml"
        assert usage["error"] is None
        row_a, row_b = kernel_row(usage, a), kernel_row(usage, b)
        assert pid_a in row_a["pids"]
        assert worker in row_b["pids"]
        assert worker not in row_a["pids"]
        assert (row_a["attribution"], row_b["attribution"]) == (expected, expected)

        held = 4 * GiB
        assert sum(d["memory_used"] for d in usage["devices"] if d["parent_uuid"] is None) >= held
        if expected == "exact":
            # NVML's figure per process includes its CUDA context (a few hundred MiB).
            assert list(row_a["by_device"]) == list(row_b["by_device"])
            size_a, size_b = row_a["gpu_memory"], row_b["gpu_memory"]
            assert size_a >= GiB
            assert size_b >= 3 * GiB
            assert 1.5 * GiB <= size_b - size_a <= 2.5 * GiB
            uuid = next(iter(row_a["by_device"]))
            assert usage["other_memory"][uuid] >= 0
        elif expected == "size_unknown":
            assert (row_a["gpu_memory"], row_b["gpu_memory"]) == (None, None)
            assert set(row_a["by_device"].values()) == {None}
            assert None in usage["other_memory"].values()
        else:
            assert (row_a["gpu_memory"], row_b["gpu_memory"]) == (0, 0)
            assert max(usage["other_memory"].values()) >= held
    finally:
        await server.stop()

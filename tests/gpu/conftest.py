"""GPU tests run only where NVML initialises; elsewhere they are skipped with the reason."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from jupyter_gpuaas.gpu.fake_nvml import uninstall


@pytest.fixture(scope="session")
def driver_version() -> str:
    uninstall()  # the real library, never the simulated one
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        pytest.skip(f"no NVIDIA GPU here: pynvml.nvmlInit() failed: {err}")
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            pytest.skip("NVML works but sees no GPU")
        version = pynvml.nvmlSystemGetDriverVersion()
    finally:
        pynvml.nvmlShutdown()
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        pytest.skip(f"NVML works but the CUDA driver library cannot be loaded: {err}")
    return version.decode() if isinstance(version, bytes) else str(version)

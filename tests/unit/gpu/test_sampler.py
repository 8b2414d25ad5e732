"""The shared sampler: one read for concurrent requests, a short cache, NVML off the loop."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml
from jupyter_gpuaas.gpu.nvml import NvmlRead, NvmlReader
from jupyter_gpuaas.gpu.sampler import Sampler
from jupyter_gpuaas.gpu.spec import GiB, parse_devices
from jupyter_gpuaas.gpu.usage import KernelInfo
from tests.support.clock import FakeClock


class RecordingReader(NvmlReader):
    """The real reader over the fake library, noting which thread each read ran on."""

    def __init__(self, directory: Path) -> None:
        super().__init__(FakeNvml(parse_devices("2xH100-80GB"), directory, refresh=0))
        self.threads: list[str] = []

    def read(self) -> NvmlRead:
        self.threads.append(threading.current_thread().name)
        return super().read()


async def this_process_as_kernel() -> list[KernelInfo]:
    return [KernelInfo("k1", name="python3", execution_state="idle", pid=os.getpid())]


async def test_concurrent_requests_share_one_read(sim_dir: Path) -> None:
    reader = RecordingReader(sim_dir)
    sampler = Sampler(reader, this_process_as_kernel, ttl=0)
    samples = await asyncio.gather(*(sampler.sample() for _ in range(10)))
    assert sampler.samples_taken == 1
    assert all(s is samples[0] for s in samples)
    assert reader.threads == ["gpuaas-sampler_0"]  # never on the event loop's thread
    await sampler.close()


async def test_samples_are_cached_for_the_ttl(sim_dir: Path) -> None:
    clock = FakeClock(0.0)
    sampler = Sampler(RecordingReader(sim_dir), this_process_as_kernel, ttl=1.0, clock=clock)
    first = await sampler.sample()
    clock.now = 0.99
    assert await sampler.sample() is first
    clock.now = 1.0
    assert await sampler.sample() is not first
    assert sampler.samples_taken == 2
    await sampler.close()


async def test_ttl_zero_reads_every_time(sim_dir: Path) -> None:
    sampler = Sampler(RecordingReader(sim_dir), this_process_as_kernel, ttl=0)
    for _ in range(3):
        await sampler.sample()
    assert sampler.samples_taken == 3
    await sampler.close()


async def test_usage_payload_attributes_memory_to_the_kernel(sim_dir: Path) -> None:
    sampler = Sampler(RecordingReader(sim_dir), this_process_as_kernel, ttl=0)
    with simulate.hold("2GiB", device=1):
        usage = (await sampler.sample()).usage
    [kernel] = usage["kernels"]
    gpu1 = usage["devices"][1]["uuid"]
    assert os.getpid() in kernel["pids"]
    assert (kernel["gpu_memory"], kernel["by_device"], kernel["attribution"]) == (
        2 * GiB,
        {gpu1: 2 * GiB},
        "exact",
    )
    assert usage["other_memory"] == {usage["devices"][0]["uuid"]: 0, gpu1: 0}
    assert usage["source"] == "simulated"
    await sampler.close()


async def test_a_failed_sample_is_not_cached(sim_dir: Path) -> None:
    calls = 0

    async def flaky() -> list[KernelInfo]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("kernel manager hiccup")
        return []

    sampler = Sampler(RecordingReader(sim_dir), flaky, ttl=10)
    with pytest.raises(RuntimeError):
        await sampler.sample()
    assert (await sampler.sample()).kernels == ()
    await sampler.close()

"""One sampler per server: NVML and process trees read off the event loop, cached briefly, and
shared by every request (many open tabs cost one read)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.gpu import processes
from jupyter_gpuaas.gpu.attribution import Attribution, attribute
from jupyter_gpuaas.gpu.model import KernelTree
from jupyter_gpuaas.gpu.nvml import NvmlRead, NvmlReader
from jupyter_gpuaas.gpu.usage import KernelInfo, usage_payload


@dataclass(frozen=True)
class Sample:
    taken: float  # monotonic clock, for the cache
    sampled_at: datetime
    read: NvmlRead
    kernels: tuple[KernelInfo, ...]
    trees: Mapping[str, frozenset[int]]
    attribution: Attribution
    usage: api.Usage
    usage_json: str


class Sampler:
    """`kernels` lists the server's kernels (on the event loop: it reads the kernel and session
    managers); NVML and /proc are read on one worker thread. `ttl` seconds: how long a sample
    is served again; with 0 each request samples, but concurrent ones still share one read."""

    def __init__(
        self,
        reader: NvmlReader,
        kernels: Callable[[], Awaitable[Sequence[KernelInfo]]],
        *,
        ttl: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reader = reader
        self.kernels = kernels
        self.ttl = ttl
        self.clock = clock
        self.samples_taken = 0
        self._current: Sample | None = None
        self._inflight: asyncio.Future[Sample] | None = None
        # One thread: NVML calls are serialised and never block the server's event loop.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuaas-sampler")
        self._processes = processes.ProcessTable()  # used on that thread only

    async def sample(self) -> Sample:
        current = self._current
        if current is not None and self.clock() - current.taken < self.ttl:
            return current
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._take())
            self._inflight.add_done_callback(self._finished)
        # shield: a client that goes away must not cancel the read others wait for
        return await asyncio.shield(self._inflight)

    def _finished(self, future: asyncio.Future[Sample]) -> None:
        self._inflight = None
        if not future.cancelled() and future.exception() is None:
            self._current = future.result()

    async def _take(self) -> Sample:
        taken = self.clock()
        infos = tuple(await self.kernels())
        loop = asyncio.get_running_loop()
        sample = await loop.run_in_executor(self._executor, self._read, taken, infos)
        self.samples_taken += 1
        return sample

    def _read(self, taken: float, infos: tuple[KernelInfo, ...]) -> Sample:
        sampled_at = datetime.now(timezone.utc)
        read = self.reader.read()
        parents = self._processes.refresh()
        children = processes.children_map(parents)
        trees = {k.kernel_id: processes.tree(k.pid, children, parents) for k in infos}
        attribution = attribute(
            read.devices,
            read.processes,
            [KernelTree(k.kernel_id, trees[k.kernel_id]) for k in infos],
            frozenset(parents),
        )
        usage = usage_payload(read, infos, trees, attribution, sampled_at)
        return Sample(
            taken=taken,
            sampled_at=sampled_at,
            read=read,
            kernels=infos,
            trees=trees,
            attribution=attribution,
            usage=usage,
            usage_json=json.dumps(usage),
        )

    async def close(self) -> None:
        if self._inflight is not None:
            await asyncio.wait([self._inflight])
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self.reader.close)
        self._executor.shutdown(wait=False)

"""Count a client's Kubernetes API requests from the outside: a small proxy on loopback.

The benchmarks point the gpuaas service (or the culler loop they run in-process) at this proxy
instead of the API server; it passes every request on unchanged (the client's own token, so RBAC
and the audit trail are the ServiceAccount's) and counts it. A watch is one request for as long
as its stream stays open, as it is one for the API server. Nothing in the product is patched.

    with CountingProxy(kubeconfig, tmp / "counted.kubeconfig") as proxy:
        ...  # run the client with proxy.kubeconfig
        proxy.count, proxy.by_request  # totals; by (verb, path without query)
        proxy.log  # each request: (monotonic time, verb, path with query)
"""

from __future__ import annotations

import asyncio
import base64
import collections
import ssl
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

__all__ = ["CountingProxy"]

# hop-by-hop headers (RFC 9110 §7.6.1) and those aiohttp sets itself
_DROP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


class CountingProxy:
    """Plain HTTP on ``127.0.0.1`` → the kubeconfig's HTTPS API server, counting requests."""

    def __init__(self, kubeconfig: Path, out: Path) -> None:
        cfg = yaml.safe_load(kubeconfig.read_text())
        context = next(c["context"] for c in cfg["contexts"] if c["name"] == cfg["current-context"])
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == context["cluster"])
        self.upstream = str(cluster["server"]).rstrip("/")
        self._ssl = ssl.create_default_context(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
        self._cfg = cfg
        self._cluster_name = context["cluster"]
        self.kubeconfig = out
        """A copy of the kubeconfig that reaches the API server through this proxy."""
        self.count = 0
        self.by_request: collections.Counter[tuple[str, str]] = collections.Counter()
        self.log: list[tuple[float, str, str]] = []
        """Every request as it came: (``time.monotonic()``, method, path with its query)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self.port = 0

    # The proxy runs on its own thread and loop: the benchmarks block their own loop at times
    # (urllib calls to the hub), and the client must be answered meanwhile.
    def __enter__(self) -> CountingProxy:
        self._thread = threading.Thread(target=self._run, name="kube-counter", daemon=True)
        self._thread.start()
        if not self._started.wait(30) or not self.port:
            raise RuntimeError("the counting proxy did not start")
        cfg = dict(self._cfg)
        cfg["clusters"] = [
            {"name": self._cluster_name, "cluster": {"server": f"http://127.0.0.1:{self.port}"}}
        ]
        self.kubeconfig.write_text(yaml.safe_dump(cfg, sort_keys=False))
        self.kubeconfig.chmod(0o600)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        finally:
            self._started.set()
            self._loop.close()

    async def _serve(self) -> None:
        import aiohttp
        from aiohttp import web

        self._stop = asyncio.Event()
        connector = aiohttp.TCPConnector(ssl=self._ssl, limit=0)
        # bytes pass as they come: no decompression, no read timeout (watches stay open)
        session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None)
        )

        async def forward(request: web.Request) -> web.StreamResponse:
            self.count += 1
            self.by_request[(request.method, request.path)] += 1
            self.log.append((time.monotonic(), request.method, request.path_qs))
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP}
            body = await request.read()
            async with session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            ) as upstream:
                resp = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for k, v in upstream.headers.items():
                    if k.lower() not in _DROP:
                        resp.headers.add(k, v)
                await resp.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        await resp.write(chunk)
                    await resp.write_eof()
                except ConnectionResetError:
                    pass  # the client went away (a watch it stopped): nothing to pass on
                return resp

        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = int(server.sockets[0].getsockname()[1])
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()
            await session.close()

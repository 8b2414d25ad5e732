"""A real Jupyter Server in a subprocess, for the benchmarks and the GPU tests: start, REST
calls, run code in kernels."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class JupyterServer:
    """`jupyter server` on 127.0.0.1 with its own config, runtime and simulation dirs, run as
    `prefix + [python, -m, jupyter_server, ...]` (a prefix such as `unshare --pid ...` puts it
    in a new PID namespace, as a pod's container sees the driver)."""

    def __init__(self, base: Path, config: dict[str, Any], prefix: Sequence[str] = ()) -> None:
        self.base = base
        self.prefix = list(prefix)
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.sim_dir = base / "sim"
        self.http = AsyncHTTPClient(force_instance=True)
        self.headers = {"Authorization": f"token {self.token}"}
        config_dir = base / "config"
        for d in (config_dir, base / "root", self.sim_dir):
            d.mkdir(parents=True, exist_ok=True)
        (config_dir / "jupyter_server_config.json").write_text(json.dumps(config))
        self.env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(config_dir),
            "JUPYTER_DATA_DIR": str(base / "data"),
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
            "JUPYTER_GPUAAS_SIM_DIR": str(self.sim_dir),
            # the kernels import this checkout's jupyter_gpuaas, installed or not
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p
            ),
        }
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, timeout: float = 120) -> None:
        command = [
            *self.prefix, sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.base / 'root'}",
        ]  # fmt: skip
        log = (self.base / "server.log").open("wb")
        self.process = subprocess.Popen(
            command, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            try:
                await self.get("api/status")
                return
            except (ConnectionError, HTTPClientError, OSError) as err:
                if self.process.poll() is not None or asyncio.get_running_loop().time() > deadline:
                    log_path = self.base / "server.log"
                    raise RuntimeError(f"server did not start; see {log_path}") from err
                await asyncio.sleep(0.3)

    async def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # The whole group (the server shuts its kernels down): with a prefix such as unshare, the
        # server is a child of the process we started.
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), 60)
        except asyncio.TimeoutError:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    async def fetch(self, path: str, **kwargs: Any) -> Any:
        return await self.http.fetch(self.url + path, headers=self.headers, **kwargs)

    async def get(self, path: str) -> Any:
        return json.loads((await self.fetch(path)).body)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        return json.loads((await self.fetch(path, method="POST", body=json.dumps(body))).body)

    async def start_session(self, path: str) -> str:
        """Start a notebook session with a python3 kernel; its kernel id."""
        body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
        return str((await self.post("api/sessions", body))["kernel"]["id"])

    async def wait_for(self, path: str, check: Callable[[Any], bool], timeout: float = 60) -> Any:
        """GET `path` until `check` accepts the payload or `timeout` passes; the last payload."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            payload = await self.get(path)
            if check(payload) or loop.time() > deadline:
                return payload
            await asyncio.sleep(0.5)

    async def execute(self, kernel_id: str, code: str, timeout: float = 120) -> str:
        """Run `code` in a kernel through the server's websocket; its stdout."""
        ws_url = f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"
        ws = await websocket_connect(
            HTTPRequest(ws_url, headers=self.headers, request_timeout=timeout)
        )
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "bench",
                  "session": uuid.uuid4().hex, "version": "5.3"}  # fmt: skip
        content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
        request = {"header": header, "parent_header": {}, "metadata": {}, "content": content,
                   "channel": "shell", "buffers": []}  # fmt: skip
        await ws.write_message(json.dumps(request))
        out: list[str] = []
        # The reply (shell channel) can overtake the output (iopub): done when both the reply
        # and the kernel's "idle" status for this request have arrived.
        replied = idle = False
        try:
            while not (replied and idle):
                raw = await asyncio.wait_for(ws.read_message(), timeout)
                if raw is None:
                    raise RuntimeError("kernel websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if msg["msg_type"] == "stream":
                    out.append(msg["content"]["text"])
                elif msg["msg_type"] == "error":
                    raise RuntimeError("\n".join(msg["content"]["traceback"]))
                elif msg["msg_type"] == "execute_reply":
                    replied = True
                elif msg["msg_type"] == "status":
                    idle = msg["content"]["execution_state"] == "idle"
            return "".join(out)
        finally:
            ws.close()


class KeepAlive:
    """GET requests over one kept-alive HTTP/1.1 connection, as a browser polls: no connection
    setup per request, so the figures are the server's work, not TCP's."""

    def __init__(self, server: JupyterServer) -> None:
        self.server = server
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> bytes:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.server.port)
        assert self.reader is not None
        request = (
            f"GET /{path} HTTP/1.1\r\nHost: 127.0.0.1:{self.server.port}\r\n"
            f"Authorization: token {self.server.token}\r\nConnection: keep-alive\r\n\r\n"
        )
        self.writer.write(request.encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        if status != b"200":
            raise RuntimeError(f"GET {path}: {head.decode(errors='replace')}")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        return await self.reader.readexactly(length)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()
            self.writer = None

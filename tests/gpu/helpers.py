"""A real jupyter server in a subprocess (optionally in a new PID namespace) for the GPU tests."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.websocket import websocket_connect

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`jupyter server` run as `prefix + [python, -m, jupyter_server, ...]`."""

    def __init__(self, base: Path, config: dict[str, Any], prefix: Sequence[str] = ()) -> None:
        self.base, self.prefix = base, list(prefix)
        self.token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.headers = {"Authorization": f"token {self.token}"}
        self.http = AsyncHTTPClient(force_instance=True)
        for d in ("config", "root", "runtime"):
            (base / d).mkdir(parents=True, exist_ok=True)
        (base / "config" / "jupyter_server_config.json").write_text(json.dumps(config))
        self.log = base / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    async def start(self, timeout: float = 120) -> None:
        env = {
            **os.environ,
            "JUPYTER_CONFIG_DIR": str(self.base / "config"),
            "JUPYTER_RUNTIME_DIR": str(self.base / "runtime"),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p
            ),
        }
        command = [
            *self.prefix, sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root",
            "--ServerApp.ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.base / 'root'}",
        ]  # fmt: skip
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await self.get("api/status")
                return
            except (ConnectionError, HTTPClientError, OSError) as err:
                if self.process.poll() is not None or loop.time() > deadline:
                    raise RuntimeError(f"server did not start:\n{self.log.read_text()}") from err
                await asyncio.sleep(0.3)

    async def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        # The whole group: with unshare, the server is the child of the unshare process.
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.to_thread(self.process.wait), 60)
        except asyncio.TimeoutError:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    async def get(self, path: str) -> Any:
        response = await self.http.fetch(self.url + path, headers=self.headers)
        return json.loads(response.body)

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        response = await self.http.fetch(
            self.url + path, method="POST", headers=self.headers, body=json.dumps(body)
        )
        return json.loads(response.body)

    async def start_session(self, path: str) -> str:
        body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
        return str((await self.post("api/sessions", body))["kernel"]["id"])

    async def wait_for(self, path: str, check: Callable[[Any], bool], timeout: float = 60) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            payload = await self.get(path)
            if check(payload) or loop.time() > deadline:
                return payload
            await asyncio.sleep(0.5)

    async def execute(self, kernel_id: str, code: str, timeout: float = 120) -> str:
        """Run code in a kernel through the server's websocket; its stdout."""
        ws_url = f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"
        ws = await websocket_connect(HTTPRequest(ws_url, headers=self.headers))
        msg_id = uuid.uuid4().hex
        header = {"msg_id": msg_id, "msg_type": "execute_request", "username": "test",
                  "session": uuid.uuid4().hex, "version": "5.3"}  # fmt: skip
        content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
        await ws.write_message(
            json.dumps(
                {
                    "header": header,
                    "parent_header": {},
                    "metadata": {},
                    "content": content,
                    "channel": "shell",
                    "buffers": [],
                }
            )
        )
        out: list[str] = []
        try:
            while True:
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
                    return "".join(out)
        finally:
            ws.close()


def unshare_prefix() -> list[str]:
    """The command prefix that runs a program in a new PID namespace, as a pod's container sees
    the driver; skips the test when this machine does not allow it."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a PID namespace here: {probe.stderr.strip()}")
    return prefix

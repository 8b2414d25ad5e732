"""Talking to the server tests' Jupyter server: JSON GETs, polling, sessions, running code."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

Fetch = Callable[..., Awaitable[Any]]


async def get_json(jp_fetch: Fetch, *parts: str) -> Any:
    response = await jp_fetch(*parts)
    assert response.code == 200
    return json.loads(response.body)


async def wait_for(
    jp_fetch: Fetch,
    endpoint: str,
    check: Callable[[Any], bool],
    timeout: float = 60,
) -> Any:
    """Poll gpuaas/api/<endpoint> until `check` holds; the last payload."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        payload = await get_json(jp_fetch, "gpuaas", "api", endpoint)
        if check(payload):
            return payload
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting on {endpoint}; last payload: {payload}")
        await asyncio.sleep(0.2)


async def start_session(jp_fetch: Fetch, path: str) -> str:
    """A notebook session with a new python3 kernel; its kernel id."""
    body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "python3"}}
    response = await jp_fetch("api", "sessions", method="POST", body=json.dumps(body))
    return str(json.loads(response.body)["kernel"]["id"])


async def execute(ws_fetch: Fetch, kernel_id: str, code: str, *, wait: bool = True) -> str:
    """Run code in a kernel through the server's websocket; its stdout. With wait=False,
    return as soon as the kernel says it is busy."""
    ws = await ws_fetch("api", "kernels", kernel_id, "channels")
    msg_id = uuid.uuid4().hex
    request = {
        "header": {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "username": "test",
            "session": uuid.uuid4().hex,
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {"code": code, "silent": False, "store_history": False, "allow_stdin": False},
        "channel": "shell",
        "buffers": [],
    }
    await ws.write_message(json.dumps(request))
    out: list[str] = []
    # The reply (shell channel) can overtake the output (iopub): done when both the reply and
    # the kernel's "idle" status for this request have arrived.
    replied = idle = False
    try:
        while not (replied and idle):
            raw = await asyncio.wait_for(ws.read_message(), 120)
            assert raw is not None, "kernel websocket closed"
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                out.append(content["text"])
            elif kind == "error":
                raise AssertionError("\n".join(content["traceback"]))
            elif kind == "status" and content["execution_state"] == "busy" and not wait:
                return ""
            elif kind == "status":
                idle = content["execution_state"] == "idle"
            elif kind == "execute_reply":
                replied = True
        return "".join(out)
    finally:
        ws.close()

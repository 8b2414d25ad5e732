"""The answers of a real server with the extension, real kernels and simulated GPUs match the
API schema (``jupyter_gpuaas/server/api-schema.json``)."""

from __future__ import annotations

import json

from tests.support.api_schema import schema_errors
from tests.support.jupyter_fetch import Fetch, execute, get_json, start_session, wait_for


async def test_usage_activity_and_queue_answers_match_the_schema(
    jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    kernel = await start_session(jp_fetch, "train.ipynb")
    code = "from jupyter_gpuaas.gpu import simulate\nh = simulate.hold('1GiB', device=0)"
    await execute(jp_ws_fetch, kernel, code)
    terminal = json.loads((await jp_fetch("api", "terminals", method="POST", body="{}")).body)

    usage = await wait_for(jp_fetch, "usage", lambda u: any(k["gpu_memory"] for k in u["kernels"]))
    assert usage["devices"]
    assert schema_errors("usage", usage) == []

    activity = await get_json(jp_fetch, "gpuaas", "api", "activity")
    assert activity["kernels"]
    assert activity["terminals"]
    assert schema_errors("activity", activity) == []

    queue = await get_json(jp_fetch, "gpuaas", "api", "queue")
    assert queue["error_kind"] == "not_configured"  # no gpuaas service for this server
    assert schema_errors("queue", queue) == []
    await jp_fetch("api", "terminals", terminal["name"], method="DELETE")

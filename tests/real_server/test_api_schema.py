"""The answers of a real server with the extension, real kernels and simulated GPUs conform to
the extension's OpenAPI document (``jupyter_gpuaas/server/openapi.json``), checked by
openapi-core: the operation, the status and the body's schema."""

from __future__ import annotations

import json

import pytest
from tornado.httpclient import HTTPClientError

from tests.support.jupyter_fetch import Fetch, execute, start_session, wait_for
from tests.support.openapi import response_errors


async def test_usage_activity_queue_and_reclaim_answers_conform(
    jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    kernel = await start_session(jp_fetch, "train.ipynb")
    code = "from jupyter_gpuaas.gpu import simulate\nh = simulate.hold('1GiB', device=0)"
    await execute(jp_ws_fetch, kernel, code)
    terminal = json.loads((await jp_fetch("api", "terminals", method="POST", body="{}")).body)
    await wait_for(jp_fetch, "usage", lambda u: any(k["gpu_memory"] for k in u["kernels"]))

    answers = {}
    for route in ("usage", "activity", "queue", "reclaim", "reclaim/standing", "jobs/options"):
        response = await jp_fetch("gpuaas", "api", *route.split("/"))
        answers[route] = json.loads(response.body)
        assert response_errors("extension", response) == [], route
    assert answers["usage"]["devices"]
    assert answers["activity"]["kernels"]
    assert answers["activity"]["terminals"]
    # no gpuaas service for this server: each forwarded answer says why
    assert answers["queue"]["error_kind"] == "not_configured"
    assert answers["reclaim"]["warning"] is None
    assert answers["reclaim/standing"]["known"] is False
    await jp_fetch("api", "terminals", terminal["name"], method="DELETE")


async def test_the_kernel_state_answers_and_refusals_conform(jp_fetch: Fetch) -> None:
    kernel = await start_session(jp_fetch, "saved.ipynb")
    info = await jp_fetch("gpuaas", "api", "kernel-state", params={"path": "saved.ipynb"})
    assert json.loads(info.body)["exists"] is False
    assert response_errors("extension", info) == []
    snapshot = await jp_fetch(
        "gpuaas",
        "api",
        "kernel-state",
        "snapshot",
        method="POST",
        body=json.dumps({"kernel_id": kernel}),
    )
    assert response_errors("extension", snapshot) == []
    for parts, method, body in [
        (("kernel-state",), "GET", None),  # no path: 400
        (("kernel-state", "snapshot"), "POST", '{"kernel_id": "nope"}'),  # no such kernel: 404
        (("kernel-state", "restore"), "POST", "{}"),  # no kernel_id or path: 400
    ]:
        with pytest.raises(HTTPClientError) as refused:
            await jp_fetch("gpuaas", "api", *parts, method=method, body=body)
        assert refused.value.code in (400, 404)
        assert refused.value.response is not None
        assert response_errors("extension", refused.value.response) == [], parts


def test_a_drifted_answer_is_caught() -> None:
    """The check itself: a field the document does not have, a status it does not list."""
    from tests.support.openapi import answer_errors

    good = {"kernels": [], "terminals": [], "gpu_memory": 0, "sampled_at": None}
    assert answer_errors("extension", "GET", "/gpuaas/api/usage", 200, json.dumps(good))
    assert answer_errors("extension", "GET", "/user/a/gpuaas/api/usage", 418, b"{}")

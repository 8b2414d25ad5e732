"""The extension in a real jupyter-server with real kernels, over simulated GPUs."""

from __future__ import annotations

import ctypes.util
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpuaas.gpu import simulate
from tests.support.jupyter_fetch import Fetch, execute, get_json, start_session, wait_for

GiB = 1024**3
# Kernel code: start a child process that holds simulated GPU memory; print its PID.
HOLD_IN_CHILD = """
import subprocess, sys
code = (
    "import sys; from jupyter_gpuaas.gpu import simulate; "
    "simulate.hold('{size}', device='{device}'); print('held', flush=True); sys.stdin.read()"
)
child = subprocess.Popen(
    [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
)
assert child.stdout.readline().strip() == "held"
print(child.pid)
"""


def kernel_row(usage: dict[str, Any], kernel_id: str) -> dict[str, Any]:
    rows = [k for k in usage["kernels"] if k["kernel_id"] == kernel_id]
    assert len(rows) == 1, usage["kernels"]
    row: dict[str, Any] = rows[0]
    return row


async def test_memory_in_a_kernel_and_in_a_kernels_child_lands_on_the_right_kernel(
    jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    a = await start_session(jp_fetch, "train.ipynb")
    b = await start_session(jp_fetch, "loader.ipynb")
    await execute(
        jp_ws_fetch,
        a,
        "from jupyter_gpuaas.gpu import simulate\nh = simulate.hold('2GiB', device=0)",
    )
    child = int(await execute(jp_ws_fetch, b, HOLD_IN_CHILD.format(size="3GiB", device="2:1")))

    usage = await wait_for(
        jp_fetch,
        "usage",
        lambda u: kernel_row(u, a)["gpu_memory"] and kernel_row(u, b)["gpu_memory"],
    )
    devices = {(d["index"], d["parent_uuid"] is not None): d for d in usage["devices"]}
    gpu0, mig1 = devices[(0, False)]["uuid"], devices[(1, True)]["uuid"]
    row_a, row_b = kernel_row(usage, a), kernel_row(usage, b)
    assert (row_a["path"], row_a["session_type"], row_a["name"]) == (
        "train.ipynb",
        "notebook",
        "python3",
    )
    assert (row_a["by_device"], row_a["gpu_memory"], row_a["attribution"]) == (
        {gpu0: 2 * GiB},
        2 * GiB,
        "exact",
    )
    assert (row_b["by_device"], row_b["gpu_memory"], row_b["attribution"]) == (
        {mig1: 3 * GiB},
        3 * GiB,
        "exact",
    )
    assert child in row_b["pids"]
    assert child not in row_a["pids"]
    assert devices[(0, False)]["memory_used"] == 2 * GiB
    assert usage["other_memory"][gpu0] == 0
    assert usage["other_memory"][mig1] == 0
    assert usage["source"] == "simulated"
    assert usage["error"] is None

    # Releasing in the kernel frees it; shutting a kernel down removes its row.
    await execute(jp_ws_fetch, a, "h.release()")
    await wait_for(jp_fetch, "usage", lambda u: kernel_row(u, a)["gpu_memory"] == 0)
    await jp_fetch("api", "kernels", b, method="DELETE")
    usage = await wait_for(
        jp_fetch, "usage", lambda u: b not in {k["kernel_id"] for k in u["kernels"]}
    )
    assert [k["kernel_id"] for k in usage["kernels"]] == [a]


@pytest.mark.parametrize("endpoint", ["usage", "activity"])
async def test_unauthenticated_requests_are_refused(jp_fetch: Fetch, endpoint: str) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("gpuaas", "api", endpoint, headers={"Authorization": ""})
    assert refused.value.code == 403


@pytest.mark.parametrize("endpoint", ["usage", "activity"])
async def test_a_wrong_token_is_refused(jp_fetch: Fetch, endpoint: str) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("gpuaas", "api", endpoint, headers={"Authorization": "token nope"})
    assert refused.value.code == 403


@pytest.mark.parametrize(
    ("path", "unknown"),
    [(("reclaim",), {"warning": None}), (("reclaim", "standing"), {"known": False})],
)
async def test_reclaim_answers_outside_jupyterhub_say_why(
    jp_fetch: Fetch, path: tuple[str, ...], unknown: dict[str, Any]
) -> None:
    """No service to ask: the sidebar gets "no warning" / "not known" and the reason."""
    answer = await get_json(jp_fetch, "gpuaas", "api", *path)
    assert answer.pop("error_kind") == "not_configured"
    assert answer.pop("error")
    assert answer == unknown


@pytest.mark.parametrize("endpoint", ["jobs", "resize"])
async def test_a_body_that_is_not_json_is_refused(jp_fetch: Fetch, endpoint: str) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("gpuaas", "api", endpoint, method="POST", body=b"{not json")
    assert refused.value.code == 400
    assert refused.value.response is not None
    assert b"not JSON" in refused.value.response.body


@pytest.mark.parametrize("endpoint", ["jobs", "resize"])
async def test_a_deeply_nested_body_is_a_400_not_a_500(jp_fetch: Fetch, endpoint: str) -> None:
    """Fourth audit, finding 9: json.loads raised RecursionError (a 500) on deep nesting."""
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(HTTPClientError) as refused:
        await jp_fetch("gpuaas", "api", endpoint, method="POST", body=deep)
    assert refused.value.code == 400
    assert refused.value.response is not None
    assert b"nested deeper than" in refused.value.response.body


async def test_polling_does_not_refresh_the_servers_last_activity(
    jp_fetch: Fetch, jp_serverapp: Any
) -> None:
    settings = jp_serverapp.web_app.settings
    long_ago = datetime(2020, 1, 1, tzinfo=timezone.utc)
    settings["api_last_activity"] = long_ago
    before = jp_serverapp.web_app.last_activity()

    for _ in range(3):
        await get_json(jp_fetch, "gpuaas", "api", "usage")
        await get_json(jp_fetch, "gpuaas", "api", "activity")

    assert settings["api_last_activity"] == long_ago
    assert jp_serverapp.web_app.last_activity() == before
    # The check can fail: an ordinary API request does count as activity.
    await jp_fetch("api", "contents")
    assert settings["api_last_activity"] > long_ago


async def test_a_lost_gpu_is_reported_and_the_server_keeps_serving(
    jp_fetch: Fetch, sim_dir: Path
) -> None:
    healthy = await get_json(jp_fetch, "gpuaas", "api", "usage")
    gpu1 = healthy["devices"][1]["uuid"]

    simulate.set_driver(lost=[1])
    usage = await wait_for(jp_fetch, "usage", lambda u: u["error_kind"] == "gpu_lost")
    assert usage["source"] == "simulated"
    assert usage["error"].startswith("GPU 1: the GPU is lost")
    assert gpu1 not in {d["uuid"] for d in usage["devices"]}
    assert len(usage["devices"]) == len(healthy["devices"]) - 1
    assert (await jp_fetch("api", "status")).code == 200
    activity = await get_json(jp_fetch, "gpuaas", "api", "activity")
    assert "GPU 1" in activity["error"]

    simulate.reset_driver()  # the next sample reads it again
    usage = await wait_for(jp_fetch, "usage", lambda u: u["error"] is None)
    assert [d["uuid"] for d in usage["devices"]] == [d["uuid"] for d in healthy["devices"]]


@pytest.mark.parametrize("gpuaas_config", [{"simulated_driver": "no_driver"}])
async def test_no_driver_is_unavailable_with_the_reason(
    jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    kernel = await start_session(jp_fetch, "a.ipynb")
    usage = await get_json(jp_fetch, "gpuaas", "api", "usage")
    assert (usage["source"], usage["error_kind"], usage["devices"]) == (
        "unavailable",
        "no_driver",
        [],
    )
    assert "driver is not loaded" in usage["error"]
    # Kernels are still listed, with nothing attributed.
    row = kernel_row(usage, kernel)
    assert (row["gpu_memory"], row["attribution"]) == (0, "none")
    assert (await jp_fetch("api", "status")).code == 200


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has an NVIDIA driver"
)
@pytest.mark.parametrize("gpuaas_config", [{"gpu_source": "auto"}])
async def test_auto_without_a_driver_says_so(jp_fetch: Fetch) -> None:
    usage = await get_json(jp_fetch, "gpuaas", "api", "usage")
    assert (usage["source"], usage["error_kind"]) == ("unavailable", "no_driver")
    assert "gpu_source = 'simulated'" in usage["error"]


@pytest.mark.parametrize(
    ("gpuaas_config", "counts_as_busy"),
    [
        pytest.param({}, True, id="whole GPU"),
        pytest.param({"simulated_shared": ["0"]}, False, id="time-shared GPU"),
    ],
)
async def test_activity_gpu_utilization_and_busy_kernels(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, counts_as_busy: bool
) -> None:
    kernel = await start_session(jp_fetch, "a.ipynb")
    await execute(
        jp_ws_fetch,
        kernel,
        "from jupyter_gpuaas.gpu import simulate\n"
        "h = simulate.hold('1GiB', device=0, utilization=60)",
    )
    activity = await wait_for(jp_fetch, "activity", lambda a: a["gpu_memory"] == GiB)
    [row] = activity["kernels"]
    assert (row["kernel_id"], row["execution_state"], row["gpu_memory"]) == (kernel, "idle", GiB)
    assert datetime.fromisoformat(row["last_activity"].replace("Z", "+00:00"))
    gpu0_util = [u for u in activity["gpu_utilization"] if u["utilization"] == 60]
    assert bool(gpu0_util) == counts_as_busy
    assert (activity["idle_since"] is None) == counts_as_busy
    # MIG devices never report utilisation of their own
    assert len(activity["gpu_utilization"]) == (2 if counts_as_busy else 1)

    await execute(jp_ws_fetch, kernel, "h.release()")
    activity = await wait_for(jp_fetch, "activity", lambda a: a["gpu_memory"] == 0)
    assert activity["idle_since"] == row_last_activity(activity, kernel)

    # A running cell makes the server busy whatever the GPU does.
    await execute(jp_ws_fetch, kernel, "import time; time.sleep(3)", wait=False)
    activity = await wait_for(
        jp_fetch, "activity", lambda a: a["kernels"][0]["execution_state"] == "busy"
    )
    assert activity["idle_since"] is None
    activity = await wait_for(
        jp_fetch, "activity", lambda a: a["kernels"][0]["execution_state"] == "idle"
    )
    assert activity["idle_since"] == row_last_activity(activity, kernel)


def row_last_activity(activity: dict[str, Any], kernel_id: str) -> str:
    [row] = [k for k in activity["kernels"] if k["kernel_id"] == kernel_id]
    return str(row["last_activity"])


async def test_activity_lists_terminals(jp_fetch: Fetch) -> None:
    response = await jp_fetch("api", "terminals", method="POST", body=json.dumps({}))
    name = json.loads(response.body)["name"]
    activity = await get_json(jp_fetch, "gpuaas", "api", "activity")
    assert [t["name"] for t in activity["terminals"]] == [name]
    assert activity["idle_since"] == activity["terminals"][0]["last_activity"]
    await jp_fetch("api", "terminals", name, method="DELETE")


@pytest.fixture
def driver_left_behind(sim_dir: Path) -> None:
    """A driver behaviour set during an earlier server's session."""
    simulate.set_driver("no_driver", directory=sim_dir)


async def test_a_new_server_starts_with_the_configured_driver(
    driver_left_behind: None, jp_fetch: Fetch
) -> None:
    usage = await get_json(jp_fetch, "gpuaas", "api", "usage")
    assert (usage["source"], usage["error"]) == ("simulated", None)
    assert len(usage["devices"]) == 10

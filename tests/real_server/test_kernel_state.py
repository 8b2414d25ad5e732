"""Kernel state in a real jupyter-server with real ipykernel kernels: a snapshot of one
kernel's variables comes back in a new kernel of the same notebook; busy kernels are left
alone; the routes answer as docs/api.md says."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, state_key
from jupyter_gpuaas.server.kernel_requests import (
    KernelStateSettings,
    StateSizes,
    _ask_kernel,
    _call,
    _outcome_left,
    restore_kernel,
    snapshot_all_kernels,
    snapshot_kernel,
)
from tests.support.api_schema import schema_errors
from tests.support.jupyter_fetch import Fetch, execute, get_json, start_session
from tests.support.openapi import response_errors

BUILD = """
import numpy as np
import pandas as pd
frame = pd.DataFrame({"gpu": ["a", "b"], "hours": [1.5, 2.0]})
array = np.arange(12, dtype="float32").reshape(3, 4)
batches = (i for i in range(3))
def double(x):
    return 2 * x
"""
SETTINGS = KernelStateSettings(directory="~/.jupyter-gpuaas/kernel-state", timeout=60)


async def wait_idle(serverapp: Any, *kernel_ids: str) -> None:
    """Until the server has seen each kernel go idle (its websocket may tell a client first)."""
    km = serverapp.kernel_manager
    for _ in range(200):
        if all(km.kernel_model(k)["execution_state"] == "idle" for k in kernel_ids):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the kernels stayed busy")


async def shut_down(jp_fetch: Fetch, kernel_id: str) -> None:
    await jp_fetch("api", "kernels", kernel_id, method="DELETE")


async def test_a_snapshot_comes_back_in_a_new_kernel_of_the_same_notebook(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, BUILD)
    await wait_idle(jp_serverapp, kernel)

    [outcome] = await snapshot_all_kernels(jp_serverapp, SETTINGS, deadline_s=60)

    assert outcome.kernel_id == kernel
    assert outcome.notebook == "train.ipynb"
    assert outcome.outcome == "kept_with_losses", outcome
    assert [(v.name, v.reason) for v in outcome.lost] == [("batches", "a generator")]
    assert outcome.bytes > 0
    assert outcome.saved_at is not None
    saved = list((jp_home_dir / ".jupyter-gpuaas" / "kernel-state").iterdir())
    assert {p.stat().st_mode & 0o777 for p in saved} == {0o600}
    assert KernelStateOutcome.from_json(outcome.to_json()) == outcome

    await shut_down(jp_fetch, kernel)
    new = await start_session(jp_fetch, "train.ipynb")
    km = jp_serverapp.kernel_manager
    answer = await restore_kernel(km, new, "train.ipynb", SETTINGS, force=False)
    assert answer["status"] == "restored", answer
    assert set(answer["restored"]) == {"np", "pd", "frame", "array", "double"}
    assert answer["not_restored"] == [{"name": "batches", "reason": "a generator"}]
    shown = await execute(
        jp_ws_fetch,
        new,
        "print(frame.hours.sum(), array.dtype, array.shape, double(21), np.__name__)",
    )
    assert shown.split() == ["3.5", "float32", "(3,", "4)", "42", "numpy"]

    # The kernel has run a cell now: a second restore leaves it alone.
    again = await restore_kernel(km, new, "train.ipynb", SETTINGS, force=False)
    assert again["status"] == "skipped"


async def test_a_busy_kernel_is_never_snapshotted(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    idle = await start_session(jp_fetch, "idle.ipynb")
    busy = await start_session(jp_fetch, "busy.ipynb")
    await execute(jp_ws_fetch, idle, "x = 1")
    await execute(jp_ws_fetch, busy, "y = 2")
    await wait_idle(jp_serverapp, idle, busy)
    running = asyncio.ensure_future(execute(jp_ws_fetch, busy, "import time; time.sleep(8)"))
    km = jp_serverapp.kernel_manager
    for _ in range(100):
        if km.kernel_model(busy)["execution_state"] == "busy":
            break
        await asyncio.sleep(0.05)

    outcomes = {
        o.kernel_id: o for o in await snapshot_all_kernels(jp_serverapp, SETTINGS, deadline_s=30)
    }

    assert outcomes[busy].outcome == "skipped_busy"
    assert outcomes[busy].notebook == "busy.ipynb"
    assert outcomes[idle].outcome == "kept"
    folder = jp_home_dir / ".jupyter-gpuaas" / "kernel-state"
    assert [p.name.startswith("idle.ipynb-") for p in folder.glob("*.json")] == [True]
    await running


async def post(jp_fetch: Fetch, endpoint: str, body: dict[str, Any]) -> Any:
    response = await jp_fetch(
        "gpuaas", "api", "kernel-state", *endpoint.split("/"), method="POST", body=json.dumps(body)
    )
    assert response.code == 200
    return json.loads(response.body)


async def get_info(jp_fetch: Fetch, path: str) -> Any:
    response = await jp_fetch("gpuaas", "api", "kernel-state", params={"path": path})
    return json.loads(response.body)


async def test_the_routes_save_describe_and_restore_and_answer_as_the_schema_says(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    kernel = await start_session(jp_fetch, "dir/train.ipynb")
    await execute(jp_ws_fetch, kernel, BUILD)
    await wait_idle(jp_serverapp, kernel)

    saved = await post(jp_fetch, "snapshot", {"kernel_id": kernel})
    assert schema_errors("kernel_state_snapshot", saved) == []
    [outcome] = saved["outcomes"]
    assert (outcome["notebook"], outcome["outcome"]) == ("dir/train.ipynb", "kept_with_losses")
    assert saved["summary"] == "its variables were saved, except “batches” (a generator)"

    info = await get_info(jp_fetch, "dir/train.ipynb")
    assert schema_errors("kernel_state_info", info) == []
    assert info["exists"] is True
    assert set(info["variables"]) == {"np", "pd", "frame", "array", "double"}
    assert info["lost"] == [{"name": "batches", "reason": "a generator"}]
    nothing = await get_info(jp_fetch, "other.ipynb")
    assert (nothing["exists"], nothing["variables"]) == (False, [])

    await shut_down(jp_fetch, kernel)
    new = await start_session(jp_fetch, "dir/train.ipynb")
    answer = await post(jp_fetch, "restore", {"kernel_id": new, "path": "dir/train.ipynb"})
    assert schema_errors("kernel_state_restore", answer) == []
    assert answer["status"] == "restored"
    assert answer["not_restored"] == [{"name": "batches", "reason": "a generator"}]
    assert "frame" in answer["restored"]


async def test_a_foreign_snapshot_is_refused_and_the_kernel_is_unharmed(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, "secret = 42")
    await wait_idle(jp_serverapp, kernel)
    await post(jp_fetch, "snapshot", {"kernel_id": kernel})
    [manifest] = (jp_home_dir / ".jupyter-gpuaas" / "kernel-state").glob("*.json")
    fields = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**fields, "owner_uid": fields["owner_uid"] + 1}))
    await shut_down(jp_fetch, kernel)

    new = await start_session(jp_fetch, "train.ipynb")
    answer = await post(jp_fetch, "restore", {"kernel_id": new, "path": "train.ipynb"})
    assert answer["status"] == "refused"
    assert "only your own snapshots are loaded" in answer["message"]
    assert schema_errors("kernel_state_restore", answer) == []
    shown = await execute(jp_ws_fetch, new, "print('secret' in globals())")
    assert shown.strip() == "False"


@pytest.mark.parametrize(
    ("endpoint", "body", "code"),
    [
        ("restore", {"path": "a.ipynb"}, 400),
        ("restore", {"kernel_id": "k"}, 400),
        ("restore", {"kernel_id": "no-such-kernel", "path": "a.ipynb"}, 404),
        ("snapshot", {"kernel_id": "no-such-kernel"}, 404),
    ],
)
async def test_a_bad_request_says_what_to_send(
    jp_fetch: Fetch, endpoint: str, body: dict[str, Any], code: int
) -> None:
    with pytest.raises(HTTPClientError) as refused:
        await post(jp_fetch, endpoint, body)
    assert refused.value.code == code


SLOW = """
import time
class Slow:
    def __reduce__(self):
        time.sleep(6)
        return (Slow, ())
slow = Slow()
small = [1, 2, 3]
"""
GPU_IN_KERNEL = """
import sys, types
sys.modules.setdefault("cupy", types.ModuleType("cupy"))
"""
"""As in a kernel that holds a GPU library: its objects are pickled in the kernel's pause, before
the fork (a child of a CUDA process must not touch them), so a slow object keeps the kernel
itself busy."""


async def test_the_server_waits_no_longer_than_its_bound(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """A kernel stuck saving one object (it cannot be cut off mid-object) is reported failed at
    the bound, whether the kernel pickles it (a GPU process) or its background writer does;
    the server does not wait for it."""
    for setup, error in (
        (GPU_IN_KERNEL, "the kernel did not answer within "),
        ("", "the kernel's writer did not finish within "),
    ):
        kernel = await start_session(jp_fetch, f"slow{len(setup)}.ipynb")
        await execute(jp_ws_fetch, kernel, SLOW + setup)
        await wait_idle(jp_serverapp, kernel)
        loop = asyncio.get_running_loop()
        started = loop.time()

        outcome = await snapshot_kernel(
            jp_serverapp.kernel_manager, kernel, "slow.ipynb", SETTINGS, deadline_s=4
        )

        waited = loop.time() - started
        assert outcome.outcome == "failed"
        assert outcome.error.startswith(error), outcome
        assert waited < 5.0, waited  # the object takes 6 s
        await shut_down(jp_fetch, kernel)


async def test_two_requests_to_one_kernel_at_once_are_both_answered(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """A restore (the notebook just opened) and a snapshot (the user's "Save variables now",
    or a reclaim) asked of the same kernel at once each get their own answer: each request
    talks to the kernel on a connection of its own (the kernel routes its replies by the
    connection's identity, and hands an identity over to its newest connection)."""
    settings = KernelStateSettings(timeout=20, restore_timeout=20)
    kernel = await start_session(jp_fetch, "both.ipynb")
    await execute(jp_ws_fetch, kernel, "kept = 1")
    await wait_idle(jp_serverapp, kernel)
    km = jp_serverapp.kernel_manager

    restored, saved, saved_again = await asyncio.gather(
        restore_kernel(km, kernel, "both.ipynb", settings, force=True),
        snapshot_kernel(km, kernel, "both.ipynb", settings, deadline_s=20),
        snapshot_kernel(km, kernel, "both.ipynb", settings, deadline_s=20),
        return_exceptions=True,
    )

    # The restore answers whichever of the three the kernel runs first: nothing saved yet,
    # or the snapshot just written.
    assert isinstance(restored, dict), restored
    assert restored["status"] in ("none", "restored"), restored
    assert isinstance(saved, KernelStateOutcome), saved
    assert saved.outcome == "kept", saved
    assert isinstance(saved_again, KernelStateOutcome), saved_again
    assert saved_again.outcome == "kept", saved_again


async def _saving(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, notebook: str
) -> tuple[Any, str, float, asyncio.Future[Any]]:
    """A kernel with state, saving it (busy) under a 60 s bound: its manager, its id, when the
    snapshot was asked (the loop's clock) and the snapshot under way."""
    kernel = await start_session(jp_fetch, notebook)
    await execute(jp_ws_fetch, kernel, SLOW + GPU_IN_KERNEL)
    await wait_idle(jp_serverapp, kernel)
    km = jp_serverapp.kernel_manager
    started = asyncio.get_running_loop().time()
    saving = asyncio.ensure_future(snapshot_kernel(km, kernel, notebook, SETTINGS, deadline_s=60))
    while km.kernel_model(kernel)["execution_state"] != "busy":  # it is saving
        await asyncio.sleep(0.05)
    return km, kernel, started, saving


async def test_a_kernel_that_dies_while_it_saves_is_said_at_once(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """A kernel that dies while it works never answers: the snapshot fails saying so, without
    waiting out its whole bound."""
    km, kernel, started, saving = await _saving(jp_fetch, jp_ws_fetch, jp_serverapp, "died.ipynb")
    await km.get_kernel(kernel).signal_kernel(signal.SIGKILL)

    outcome = await saving

    assert outcome.outcome == "failed", outcome
    # Jupyter's auto-restarter may bring the killed kernel back before the server looks again
    # (seen on a loaded machine): then it was restarted before it answered, as true a reason.
    assert outcome.error == "the kernel stopped before it answered" or outcome.error.startswith(
        "the kernel restarted before it answered"
    ), outcome
    assert asyncio.get_running_loop().time() - started < 30  # the bound is 60 s


async def test_a_kernel_restarted_while_it_saves_is_said_at_once_and_starts_clean(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """A kernel restarted while a request waits on it (the user's "Restart kernel") never
    answers it: the request fails saying so, and nothing asked of the old process is done to
    the new one."""
    km, kernel, started, saving = await _saving(
        jp_fetch, jp_ws_fetch, jp_serverapp, "restarted.ipynb"
    )
    await km.restart_kernel(kernel, now=True)

    outcome = await saving

    assert outcome.outcome == "failed", outcome
    assert outcome.error.startswith("the kernel restarted before it answered"), outcome
    assert asyncio.get_running_loop().time() - started < 30  # the bound is 60 s
    shown = await execute(jp_ws_fetch, kernel, "print('slow' in globals())")
    assert shown.strip() == "False"


SLOW_TO_SAVE = """
class SlowToSave:
    def __getstate__(self):
        import time
        time.sleep(1.5)
        return {}
slow = SlowToSave()
"""


async def test_a_snapshot_is_not_activity_while_it_runs_nor_after_it(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """The reclaim loop puts a reclaim off when a busy report arrives after its decision; the
    snapshot it asks for first must not be that report, nor move the server's idle clock."""
    kernel = await start_session(jp_fetch, "slow-to-save.ipynb")
    await execute(jp_ws_fetch, kernel, SLOW_TO_SAVE + GPU_IN_KERNEL)
    await wait_idle(jp_serverapp, kernel)
    km = jp_serverapp.kernel_manager
    before = await get_json(jp_fetch, "gpuaas", "api", "activity")
    server_before = km.last_kernel_activity
    raw_states: list[str] = []
    reports: list[dict[str, Any]] = []

    async def watch() -> None:
        while True:
            raw_states.append(km.kernel_model(kernel)["execution_state"])
            reports.append(await get_json(jp_fetch, "gpuaas", "api", "activity"))
            await asyncio.sleep(0.1)

    watcher = asyncio.ensure_future(watch())
    try:
        outcome = await snapshot_kernel(km, kernel, "slow-to-save.ipynb", SETTINGS, deadline_s=60)
    finally:
        watcher.cancel()
    assert outcome.outcome == "kept", outcome
    assert "busy" in raw_states  # jupyter-server saw the snapshot's request as activity...
    # ...the report never did: its kernel idle, as active as before, the server idle as before
    assert {r["kernels"][0]["execution_state"] for r in reports} == {"idle"}
    assert {r["kernels"][0]["last_activity"] for r in reports} == {
        before["kernels"][0]["last_activity"]
    }
    assert {r["idle_since"] for r in reports} == {before["idle_since"]}
    # jupyter-server's own marks are set back once the kernel's "idle" follows its answer
    for _ in range(200):
        if km.last_kernel_activity == server_before:
            break
        await asyncio.sleep(0.05)
    after = await get_json(jp_fetch, "gpuaas", "api", "activity")
    assert after["kernels"][0]["last_activity"] == before["kernels"][0]["last_activity"]
    assert after["idle_since"] == before["idle_since"]
    assert km.last_kernel_activity == server_before  # what JupyterHub and idle cullers read
    # The check can fail: the user's own cell is activity.
    await execute(jp_ws_fetch, kernel, "y = 2")
    await wait_idle(jp_serverapp, kernel)
    again = await get_json(jp_fetch, "gpuaas", "api", "activity")
    assert again["kernels"][0]["last_activity"] > before["kernels"][0]["last_activity"]
    assert km.last_kernel_activity > server_before


HELD_BY_THE_WRITER = """
import os, time
import numpy as np
class Held:
    def __reduce__(self):
        while not os.path.exists({release!r}):
            time.sleep(0.01)
        return (str, ("released",))
arrays = [np.ones(1 << 22) for _ in range(8)]  # 256 MiB
held = Held()
"""


async def test_the_kernel_pauses_for_a_view_of_its_variables_not_for_the_writing(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    """In a real kernel: its answer to the snapshot request says how long it paused (its
    variables' view and the fork), and it runs its user's cells while its writer still writes;
    the snapshot is kept once the writer is done."""
    release = jp_home_dir / "release"
    kernel = await start_session(jp_fetch, "paused.ipynb")
    await execute(jp_ws_fetch, kernel, HELD_BY_THE_WRITER.format(release=str(release)))
    await wait_idle(jp_serverapp, kernel)
    km = jp_serverapp.kernel_manager
    saving = asyncio.ensure_future(
        snapshot_kernel(km, kernel, "paused.ipynb", SETTINGS, deadline_s=60)
    )
    folder = jp_home_dir / ".jupyter-gpuaas" / "kernel-state"
    while not list(folder.glob(f".{state_key('paused.ipynb', '')}.*.tmp")):  # writing
        await asyncio.sleep(0.02)

    shown = await execute(jp_ws_fetch, kernel, "arrays[0][0] = 7; print(arrays[0][0], len(arrays))")

    assert shown.strip() == "7.0 8"  # the user's cell ran while the writer waits
    assert not saving.done()
    release.touch()
    outcome = await saving
    assert outcome.outcome == "kept", outcome
    assert outcome.bytes >= 8 << 25
    await shut_down(jp_fetch, kernel)
    new = await start_session(jp_fetch, "paused.ipynb")
    answer = await restore_kernel(km, new, "paused.ipynb", SETTINGS, force=False)
    assert sorted(answer["restored"]) == ["Held", "arrays", "held", "np", "os", "time"], answer
    shown = await execute(jp_ws_fetch, new, "print(arrays[0][0], held)")
    assert shown.strip() == "1.0 released"  # as it was when the kernel went on


async def test_the_kernels_pause_is_measured_and_answered(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    """The kernel's own answer to the snapshot request (what the server logs) names its pause;
    the outcome comes from the writer's file, which the server removes once read."""
    kernel = await start_session(jp_fetch, "measured.ipynb")
    await execute(jp_ws_fetch, kernel, "import numpy as np\nx = np.ones(1 << 20)")
    await wait_idle(jp_serverapp, kernel)
    km = jp_serverapp.kernel_manager
    request = {
        "directory": SETTINGS.directory,
        "key": "measured",
        "notebook": "measured.ipynb",
        "kernel_id": kernel,
        "max_bytes": 1 << 30,
        "reserve_bytes": 0,
        "deadline": time.time() + 60,
    }
    expression = _call("jupyter_gpuaas.kernel.snapshot", "snapshot_request", request)

    answer = json.loads(await _ask_kernel(km, kernel, expression, 60))

    assert set(answer) == {"writing", "paused_s"}
    assert 0 < answer["paused_s"] < 60
    folder = jp_home_dir / ".jupyter-gpuaas" / "kernel-state"
    outcome = await _outcome_left(SETTINGS, answer["writing"], 60)
    assert outcome.outcome == "kept", outcome
    assert not (folder / answer["writing"]).exists()


async def test_the_kernels_estimate_their_state_for_the_report_idle_ones_only(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """What the activity report says of the kernels' state size: each idle kernel's own
    estimate (its variables' sizes, nothing pickled), reused for a while."""
    km = jp_serverapp.kernel_manager
    kernel = await start_session(jp_fetch, "sized.ipynb")
    await execute(
        jp_ws_fetch, kernel, "import numpy as np\nx = np.ones(1 << 20)\nb = (i for i in [])"
    )
    await wait_idle(jp_serverapp, kernel)
    sizes = StateSizes()

    total = await sizes.total(km)

    assert 8 << 20 <= total < 9 << 20  # the array's 8 MiB and a little; the generator nothing
    await execute(jp_ws_fetch, kernel, "y = np.ones(1 << 21)")
    await wait_idle(jp_serverapp, kernel)
    assert await sizes.total(km) == total  # asked again only after ESTIMATE_EVERY
    assert await StateSizes().total(km) >= 24 << 20


async def test_the_sidebar_is_told_what_a_reclaim_would_keep_and_how_long_it_would_take(
    jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any, jp_home_dir: Path
) -> None:
    """``GET gpuaas/api/kernel-state/estimate``: each idle kernel's own estimate with its
    notebook, the total and the save time, the variables never kept named; nothing saved."""
    kernel = await start_session(jp_fetch, "estimated.ipynb")
    await execute(
        jp_ws_fetch, kernel, "import numpy as np\nx = np.ones(1 << 20)\nb = (i for i in [])"
    )
    await wait_idle(jp_serverapp, kernel)

    response = await jp_fetch("gpuaas", "api", "kernel-state", "estimate")

    assert response_errors("extension", response) == []
    answer = json.loads(response.body)
    assert answer["keeps"] is True
    (row,) = [k for k in answer["kernels"] if k["kernel_id"] == kernel]
    assert row["path"] == "estimated.ipynb"
    assert 8 << 20 <= row["bytes"] < 9 << 20  # the array's 8 MiB and a little
    assert row["variables"] == 2  # np and x
    assert row["not_kept"] == [{"name": "b", "reason": "a generator"}]
    assert answer["bytes"] >= row["bytes"]
    assert 0.5 <= answer["seconds"] < 1.0  # 0.5 s and 8 MiB at 400 MB/s
    state_dir = jp_home_dir / ".jupyter-gpuaas" / "kernel-state"
    assert not list(state_dir.glob("estimated*"))  # nothing was saved

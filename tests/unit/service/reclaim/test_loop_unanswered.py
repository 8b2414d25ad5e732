"""Servers that say they keep kernel state and never answer the snapshot request:
each stop waits ``snapshot_timeout`` for the answer, then goes on, on every Python the package
supports. On 3.10 ``asyncio.wait_for`` raises ``asyncio.TimeoutError``, which is not the builtin
``TimeoutError`` before 3.11: caught as the builtin only, the wait ended the cycle at the first
such stop, so nobody was stopped (max-age servers included), cycle after cycle."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from jupyter_gpuaas.core.activity import read_kernel_state_mark
from jupyter_gpuaas.core.labels import RECLAIMED_KERNEL_STATE
from tests.support.service_samples import iso
from tests.support.service_world import POLICY, T0, World, busy, idle

# real time, the only real wait here: how long each stop waits for the answer that never comes
UNANSWERED = timedelta(seconds=0.02)
ALL = [("alice", ""), ("alice", "busy"), ("bob", "")]


def silent_world() -> World:
    """Team A's world with ``max_age`` 1 h: alice and bob idle (a Job wants their slices),
    alice/busy busy but running for 2 h. All three keep kernel state and never answer."""
    policy: dict[str, Any] = copy.deepcopy(dict(POLICY))
    policy["policies"][0]["max_age"] = "1h"
    w = World(policy)
    started = iso(T0 - timedelta(hours=2))
    w.hub.servers[("alice", "busy")]["started"] = started
    pod = w.kube.pods["jupyter-alice-busy"]
    pod["metadata"]["creationTimestamp"] = pod["status"]["startTime"] = started
    w.policy = replace(w.policy, snapshot_timeout=UNANSWERED)
    w.loop.set_policies(w.policy)
    return w


def report_keeping_state(w: World) -> None:
    """This moment's reports, as the servers send them: each says it keeps kernel state."""
    for (user, server), payload in {
        ("alice", ""): idle(T0),
        ("bob", ""): idle(T0),
        ("alice", "busy"): busy(T0),
    }.items():
        w.store.record(user, server, {**payload, "keeps_kernel_state": True}, w.now)


async def test_a_cycle_stops_every_silent_server_past_the_wait_idle_and_max_age_alike() -> None:
    w = silent_world()
    report_keeping_state(w)
    await w.loop.cycle()  # all three warned: two for the Job, one for its age
    assert w.hub.stopped == []
    w.now += timedelta(seconds=31)
    report_keeping_state(w)
    plan = await asyncio.wait_for(w.loop.cycle(), 5)
    assert plan is not None
    assert sorted(w.hub.stopped) == ALL
    assert {d.code for d in plan.decisions} >= {"max-age"}
    assert w.loop.state.failures == 0
    for name in ("jupyter-alice", "jupyter-bob", "jupyter-alice-busy"):
        annotations = w.kube.pods[name]["metadata"]["annotations"]
        mark = read_kernel_state_mark(annotations[RECLAIMED_KERNEL_STATE])
        assert mark is not None
        assert mark.error.startswith("no answer within snapshot_timeout"), mark.error


async def test_the_running_loop_goes_on_cycling_and_stops_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the service's loop, its pauses on the world's clock: each one moves the clock on by the
    # pause asked for and the servers report again, as they would meanwhile
    w = silent_world()
    pauses: list[float] = []
    enough = asyncio.Event()

    async def pause(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 5:
            enough.set()
            await asyncio.Event().wait()  # until the stop below
        w.now += timedelta(seconds=seconds)
        report_keeping_state(w)

    w.loop.sleep = pause
    report_keeping_state(w)
    w.loop.task = asyncio.ensure_future(w.loop.run())
    await asyncio.wait_for(enough.wait(), 5)
    assert await w.loop.stop(grace=5) is True
    assert sorted(w.hub.stopped) == ALL
    assert "culler cycle failed" not in caplog.text
    assert w.loop.state.failures == 0
    assert pauses == [w.settings.interval] * 5  # no back-off: no cycle failed
    assert w.loop.task.done()
    assert not w.loop.task.cancelled()
    assert w.loop.task.exception() is None

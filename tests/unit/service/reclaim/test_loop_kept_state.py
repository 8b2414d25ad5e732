"""The reclaim loop's stop step with kernel state, over the small world of
tests/support/service_world.py: a server that keeps state is asked for a snapshot before it is
stopped, the stop waits for the answer at most ``snapshot_timeout``, and each kernel's outcome
is recorded in the audit, the metrics, the console's journal and the mark the return notice is
worded from."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from gpuaas_service.reclaim.activity_store import REPORT_NEAR_STOP
from gpuaas_service.reclaim.loop import STOPPING
from gpuaas_service.web.reclaim import report_answer
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import (
    KernelStateReport,
    kernel_state_json,
    read_kernel_state_mark,
    snapshot_request_of,
)
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable
from jupyter_gpuaas.core.labels import RECLAIMED_AT, RECLAIMED_KERNEL_STATE
from tests.support.api_schema import schema_errors
from tests.support.service_world import T0, World, busy, idle, warning_of

KEPT = {
    "alice": KernelStateOutcome(
        "k1",
        "train.ipynb",
        "kept_with_losses",
        lost=(LostVariable("batches", "a generator"),),
        bytes=4096,
        seconds=0.4,
        saved_at=T0,
    ),
    "bob": KernelStateOutcome("k1", "eval.ipynb", "kept", bytes=100, seconds=0.1, saved_at=T0),
}


def keeping(w: World, *users: str) -> None:
    """This cycle's reports: ``users`` keep kernel state; the rest as the world has them."""
    w.report()
    for user in users:
        w.store.record(user, "", {**idle(T0), "keeps_kernel_state": True}, w.now)


async def cycle(w: World, after: float, *users: str) -> Any:
    w.now += timedelta(seconds=after)
    keeping(w, *users)
    return await w.loop.cycle()


async def answer(w: World, user: str, outcome: KernelStateOutcome) -> api.ServiceReportAnswer:
    """Play the server: report until the answer carries a snapshot request, then report the
    outcome, as the reporter does. Returns the answer that asked. Fails (instead of waiting
    for ever) when no request came within 30 s of real time: the cycle ended without one."""
    give_up = time.monotonic() + 30
    while True:
        asked = report_answer(
            w.now, w.loop.warning_for(user, ""), asks=w.loop.report_asks(user, "", w.now)
        )
        request = snapshot_request_of(asked)
        if request is not None:
            break
        assert time.monotonic() < give_up, f"{user}'s server was never asked for a snapshot"
        await asyncio.sleep(0.005)
    state = kernel_state_json(KernelStateReport(request.requested_at, (outcome,)))
    payload = {**idle(T0), "keeps_kernel_state": True, "kernel_state": state}
    w.store.record(user, "", payload, w.now)
    return asked


def audit_lines(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.audit"]
    return [r for r in lines if r.get("event") == event]


async def test_the_stop_asks_for_a_snapshot_waits_for_it_and_records_each_kernel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = World()
    await cycle(w, 0, "alice", "bob")  # warned
    # near the stop, a server that keeps state is asked to report often
    w.now += timedelta(seconds=20)
    asks = w.loop.report_asks("alice", "", w.now)
    assert asks == {"report_again_in": REPORT_NEAR_STOP}
    assert w.loop.report_asks("alice", "busy", w.now) == {}  # keeps no state: nothing asked

    servers = [asyncio.ensure_future(answer(w, u, KEPT[u])) for u in ("alice", "bob")]
    await asyncio.wait_for(cycle(w, 11, "alice", "bob"), 5)
    asked = await asyncio.gather(*servers)
    for a in asked:
        assert not schema_errors("service_report_answer", a), schema_errors(
            "service_report_answer", a
        )
        assert a["snapshot"]["reason"] == "reclaim"
        assert 0 < a["snapshot"]["deadline_seconds"] <= 58

    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    ann = w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert RECLAIMED_AT in ann
    mark = read_kernel_state_mark(ann[RECLAIMED_KERNEL_STATE])
    assert mark is not None
    assert mark.outcomes == (KEPT["alice"],)
    assert w.store.snapshot_ask("alice") is None  # the ask ends with the stop

    (alice,) = [r for r in audit_lines(caplog, "culler.kernel-state") if r["user"] == "alice"]
    assert alice["result"] == "kept_with_losses"
    assert alice["kernels"][0]["lost"] == [{"name": "batches", "reason": "a generator"}]

    text = w.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_kernel_states_total{outcome="kept_with_losses"} 1.0' in text
    assert 'gpuaas_kernel_states_total{outcome="kept"} 1.0' in text
    assert 'gpuaas_reclaim_states_total{result="kept_with_losses"} 1.0' in text
    assert 'gpuaas_reclaim_states_total{result="kept"} 1.0' in text
    assert 'gpuaas_reclaim_states_total{result="interrupted"} 0.0' in text

    rows = {
        e["user"]: e for e in w.record.journal.recent(timedelta(days=1)) if e["event"] == "reclaim"
    }
    assert rows["alice"]["result"] == "state kept with losses"
    assert "its variables were saved, except “batches” (a generator)" in rows["alice"]["reason"]
    assert rows["bob"]["result"] == "state kept"
    for row in rows.values():  # what the console's journal shows
        assert schema_errors("service_console_event", row) == []


async def test_no_answer_stops_the_servers_at_the_bound_and_counts_them_interrupted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = World()
    w.policy = replace(w.policy, snapshot_timeout=timedelta(seconds=0.3))
    w.loop.set_policies(w.policy)
    await cycle(w, 0, "alice", "bob")
    started = time.monotonic()
    await asyncio.wait_for(cycle(w, 31, "alice", "bob"), 5)
    took = time.monotonic() - started
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    assert 0.25 <= took < 0.55  # both stops waited together, once
    text = w.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_reclaim_states_total{result="interrupted"} 2.0' in text
    mark = read_kernel_state_mark(
        w.kube.pods["jupyter-bob"]["metadata"]["annotations"][RECLAIMED_KERNEL_STATE]
    )
    assert mark is not None
    assert mark.error.startswith("no answer within snapshot_timeout")
    (bob,) = [r for r in audit_lines(caplog, "culler.kernel-state") if r["user"] == "bob"]
    assert (bob["answered"], bob["result"]) == (False, "interrupted")


async def test_a_snooze_while_the_stop_waits_keeps_the_server_and_its_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # alice comes back while her server saves its kernels: she keeps it, and bob, of the same
    # demand batch, is kept too (half a batch frees quota that admits nothing)
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = World()
    await cycle(w, 0, "alice", "bob")

    async def alice_comes_back() -> None:
        while w.store.snapshot_ask("alice") is None:
            await asyncio.sleep(0.005)
        result = await w.loop.snooze("alice", "")
        assert result.allowed, result.reason

    back = asyncio.ensure_future(alice_comes_back())
    bob = asyncio.ensure_future(answer(w, "bob", KEPT["bob"]))
    await asyncio.wait_for(cycle(w, 31, "alice", "bob"), 5)
    await asyncio.gather(back, bob)
    assert w.hub.stopped == []
    assert w.store.snapshot_ask("alice") is None
    assert w.store.snapshot_ask("bob") is None
    reasons = {r["user"]: r["reason"] for r in audit_lines(caplog, "culler.put-off")}
    assert reasons == {
        "alice": "kept by its user after this cycle's decision",
        "bob": "kept by the user of alice (same batch) after this cycle's decision",
    }


async def test_a_busy_report_as_the_answer_puts_the_stop_off() -> None:
    # the snapshot found a cell running (skipped_busy): the report that says so is busy
    w = World()
    await cycle(w, 0, "alice", "bob")

    async def alice_busy() -> None:
        while w.store.snapshot_ask("alice") is None:
            await asyncio.sleep(0.005)
        ask = w.store.snapshot_ask("alice")
        assert ask is not None
        w.now += timedelta(seconds=1)
        skipped = KernelStateOutcome("k1", "train.ipynb", "skipped_busy")
        state = kernel_state_json(KernelStateReport(ask.requested_at, (skipped,)))
        w.store.record(
            "alice", "", {**busy(T0), "keeps_kernel_state": True, "kernel_state": state}, w.now
        )

    servers = [
        asyncio.ensure_future(alice_busy()),
        asyncio.ensure_future(answer(w, "bob", KEPT["bob"])),
    ]
    await asyncio.wait_for(cycle(w, 31, "alice", "bob"), 5)
    await asyncio.gather(*servers)
    assert w.hub.stopped == [("bob", "")]


async def test_a_sigterm_during_the_snapshot_wait_puts_the_stops_off_within_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Fifth audit, finding 6: snapshot_timeout (60 s) outlasts shutdown_grace (20 s); the grace then
    # cancelled the cycle mid-wait, and a stop that had begun kept its marks on a running pod.
    # A stopping service begins no stop: the wait ends at once and the stops are put off.
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = World()
    w.policy = replace(w.policy, snapshot_timeout=timedelta(seconds=60))
    w.loop.set_policies(w.policy)
    await cycle(w, 0, "alice", "bob")
    w.loop.task = asyncio.ensure_future(cycle(w, 31, "alice", "bob"))
    while w.store.snapshot_ask("alice") is None:  # asked, now waiting for the answers
        await asyncio.sleep(0.005)
    assert await asyncio.wait_for(w.loop.stop(grace=2), 5) is True  # not cancelled
    assert w.hub.stopped == []
    for user in ("alice", "bob"):
        assert RECLAIMED_AT not in w.kube.pods[f"jupyter-{user}"]["metadata"]["annotations"]
        assert w.store.snapshot_ask(user) is None
    put_off = {r["user"]: r["reason"] for r in audit_lines(caplog, "culler.put-off")}
    assert put_off == dict.fromkeys(("alice", "bob"), STOPPING)


async def test_a_server_that_keeps_no_state_is_not_asked_and_stops_at_once() -> None:
    w = World()
    await w.cycle()
    started = time.monotonic()
    await asyncio.wait_for(w.cycle(after=31), 5)
    assert time.monotonic() - started < 1
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    assert RECLAIMED_KERNEL_STATE not in w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    text = w.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_reclaim_states_total{result="interrupted"} 2.0' in text
    rows = [e for e in w.record.journal.recent(timedelta(days=1)) if e["event"] == "reclaim"]
    assert {e["result"] for e in rows} == {""}


async def test_snapshot_timeout_zero_asks_nothing() -> None:
    w = World()
    w.policy = replace(w.policy, snapshot_timeout=timedelta(0))
    w.loop.set_policies(w.policy)
    await cycle(w, 0, "alice", "bob")
    assert w.loop.report_asks("alice", "", w.now) == {}
    await asyncio.wait_for(cycle(w, 31, "alice", "bob"), 5)
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    assert RECLAIMED_KERNEL_STATE not in w.kube.pods["jupyter-alice"]["metadata"]["annotations"]


async def test_the_warning_says_whether_the_stop_saves_the_variables() -> None:
    """The sidebar words what a stop loses from the warning: saved and back where
    the server keeps kernel state and the policy gives a snapshot time; lost otherwise."""
    w = World()
    await cycle(w, 0, "alice")
    assert warning_of(w.loop, "alice")["keeps_kernel_state"] is True
    assert warning_of(w.loop, "bob")["keeps_kernel_state"] is False
    assert w.loop.warning_for("alice", "busy")["warning"] is None
    assert schema_errors("service_reclaim", w.loop.warning_for("alice", "")) == []
    w.policy = replace(w.policy, snapshot_timeout=timedelta(0))
    w.loop.set_policies(w.policy)
    assert warning_of(w.loop, "alice")["keeps_kernel_state"] is False

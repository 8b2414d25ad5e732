"""The reclaim's wait for a server's snapshot follows the state its kernels hold:
the policy's ``snapshot_per_gib`` on top of ``snapshot_timeout``, read from the size the
server's activity report says (``kernel_state_bytes``), and the ask the stop step makes."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from gpuaas_service.reclaim.policy import PolicyError, load_policy, snapshot_wait
from gpuaas_service.web.reclaim import report_answer
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import (
    KernelStateReport,
    ReportError,
    activity_json,
    kernel_state_json,
    parse_activity,
    snapshot_request_of,
)
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome
from tests.support.service_samples import idle_report
from tests.support.service_world import T0, World, idle

GiB = 1 << 30


def one() -> dict[str, Any]:
    return {"policies": [{"name": "p", "idle_after": "30m"}]}


def test_the_wait_per_gib_defaults_to_5s_and_can_be_set_or_turned_off() -> None:
    assert load_policy(one()).snapshot_per_gib == timedelta(seconds=5)
    assert load_policy({"snapshot_per_gib": "12s", **one()}).snapshot_per_gib == timedelta(
        seconds=12
    )
    assert load_policy({"snapshot_per_gib": 0, **one()}).snapshot_per_gib == timedelta(0)


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("1h", "snapshot_per_gib: 1h is longer than the whole wait may be (10m)"),
        ("-5s", "snapshot_per_gib:"),
        ("fast", "snapshot_per_gib:"),
    ],
)
def test_a_wait_per_gib_that_cannot_be_is_refused_at_its_field(value: str, said: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy({"snapshot_per_gib": value, **one()})
    assert said in str(refused.value)


@pytest.mark.parametrize(
    ("policy", "state", "seconds"),
    [
        ({}, None, 60),  # a server that says nothing of its size: the base wait
        ({}, 0, 60),
        ({}, 20 * GiB, 160),  # 60 s + 20 x 5 s
        ({}, GiB // 2, 62.5),
        ({"snapshot_per_gib": "10s"}, 3 * GiB, 90),
        ({"snapshot_per_gib": 0}, 20 * GiB, 60),
        ({}, 1000 * GiB, 600),  # at most 10 minutes
        ({"snapshot_timeout": 0}, 20 * GiB, 0),  # snapshots off: nothing to wait for
    ],
)
def test_the_wait_is_the_base_and_so_much_per_gib_at_most_10_minutes(
    policy: dict[str, Any], state: int | None, seconds: float
) -> None:
    policies = load_policy({**policy, **one()})
    assert snapshot_wait(policies, state) == timedelta(seconds=seconds)


def test_the_report_says_the_state_size_and_it_is_checked() -> None:
    report = {**idle_report(T0), "keeps_kernel_state": True, "kernel_state_bytes": 3 * GiB}
    activity = parse_activity(report)
    assert activity.kernel_state_bytes == 3 * GiB
    assert activity_json(activity)["kernel_state_bytes"] == 3 * GiB
    assert parse_activity(idle_report(T0)).kernel_state_bytes is None
    for bad in (-1, "3 GiB", True, 1.5):
        with pytest.raises(ReportError) as refused:
            parse_activity({**report, "kernel_state_bytes": bad})
        assert [e.path for e in refused.value.errors] == ["kernel_state_bytes"]


async def test_the_stop_waits_for_a_large_state_in_proportion() -> None:
    w = World()
    big = {**idle(T0), "keeps_kernel_state": True, "kernel_state_bytes": 20 * GiB}

    async def cycle(after: float) -> Any:
        w.now += timedelta(seconds=after)
        w.report()
        w.store.record("alice", "", big, w.now)
        return await w.loop.cycle()

    async def answer() -> api.ServiceReportAnswer:
        give_up = time.monotonic() + 30
        while True:
            asked = report_answer(
                w.now, w.loop.warning_for("alice", ""), asks=w.loop.report_asks("alice", "", w.now)
            )
            request = snapshot_request_of(asked)
            if request is not None:
                break
            assert time.monotonic() < give_up, "alice's server was never asked for a snapshot"
            await asyncio.sleep(0.005)
        outcome = KernelStateOutcome("k1", "train.ipynb", "kept", bytes=20 * GiB, saved_at=T0)
        state = kernel_state_json(KernelStateReport(request.requested_at, (outcome,)))
        w.store.record("alice", "", {**big, "kernel_state": state}, w.now)
        return asked

    await cycle(0)  # warned
    server = asyncio.ensure_future(answer())
    await asyncio.wait_for(cycle(31), 5)
    asked = await server
    # 60 s + 20 GiB x 5 s, less what the cycle took before it asked
    assert 150 < asked["snapshot"]["deadline_seconds"] <= 160
    assert ("alice", "") in w.hub.stopped

"""Idleness from the activity payload: busy / idle since T / unknown, per kind of GPU."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas_service.reclaim.idleness import ActivityReport, Idleness, State, judge
from jupyter_gpuaas.core.activity import (
    BUSY_EXECUTION_STATES,
    Activity,
    KernelActivity,
    TerminalActivity,
    parse_activity,
)
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity_payload import activity_payload
from tests.support.service_world import T0, World, busy

NOW = datetime(2026, 11, 30, 16, 40, tzinfo=timezone.utc)
STARTED = NOW - timedelta(hours=8)
STALE = timedelta(minutes=10)


def ago(**kw: float) -> datetime:
    return NOW - timedelta(**kw)


def report(received_at: datetime | None = None, **kw: Any) -> ActivityReport:
    received = received_at if received_at is not None else ago(minutes=1)
    return ActivityReport(received, Activity(**{"source": "nvml", **kw}))


def kernel(
    state: str = "idle", last: datetime | None = None, memory: int | None = 0
) -> KernelActivity:
    return KernelActivity("k1", state, last if last is not None else ago(hours=2), 1, memory)


def verdict(rep: ActivityReport | None, kind: str = "gpu", **kw: Any) -> Idleness:
    args: dict[str, Any] = {
        "kind": kind,
        "started_at": STARTED,
        "now": NOW,
        "stale_after": STALE,
        "busy_utilization_percent": 10.0,
    }
    return judge(rep, **{**args, **kw})


CASES: list[tuple[str, ActivityReport | None, str, dict[str, Any], State, datetime]] = [
    # id, report, kind, extra judge args, expected state, expected last_active
    ("no report yet", None, "gpu", {}, State.UNKNOWN, STARTED),
    ("idle kernel", report(kernels=(kernel(),)), "gpu", {}, State.IDLE, ago(hours=2)),
    ("busy kernel", report(kernels=(kernel("busy"),)), "gpu", {}, State.BUSY, ago(minutes=1)),
    (
        "starting kernel is not busy: its start is its last activity",
        report(kernels=(kernel("starting", ago(minutes=3)),)),
        "mig",
        {},
        State.IDLE,
        ago(minutes=3),
    ),
    (
        "dead kernel is not activity",
        report(kernels=(kernel("dead"),)),
        "gpu",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "terminal activity counts",
        report(kernels=(kernel(),), terminals=(TerminalActivity("1", ago(minutes=20)),)),
        "gpu",
        {},
        State.IDLE,
        ago(minutes=20),
    ),
    ("nothing open: idle since start", report(), "gpu", {}, State.IDLE, STARTED),
    (
        "server's own idle_since counts",
        report(idle_since=ago(hours=1)),
        "gpu",
        {},
        State.IDLE,
        ago(hours=1),
    ),
    (
        "whole GPU above threshold",
        report(kernels=(kernel(),), gpu_utilization=(("GPU-1", 37.0),)),
        "gpu",
        {},
        State.BUSY,
        ago(minutes=1),
    ),
    (
        "whole GPU at threshold is not busy",
        report(kernels=(kernel(),), gpu_utilization=(("GPU-1", 10.0),)),
        "gpu",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "policy threshold applies",
        report(kernels=(kernel(),), gpu_utilization=(("GPU-1", 37.0),)),
        "gpu",
        {"busy_utilization_percent": 50.0},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "MIG utilisation never counts",
        report(kernels=(kernel(),), gpu_utilization=(("MIG-1", 99.0),)),
        "mig",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "time-shared utilisation never counts",
        report(kernels=(kernel(),), gpu_utilization=(("GPU-1", 99.0),)),
        "shared",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "per-pod (DCGM) utilisation counts on MIG",
        report(kernels=(kernel(),)),
        "mig",
        {"pod_utilization": 60.0},
        State.BUSY,
        ago(minutes=1),
    ),
    (
        "per-pod utilisation never counts on a time-shared GPU",
        report(kernels=(kernel(),)),
        "shared",
        {"pod_utilization": 60.0},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "GPU memory held is not activity",
        report(kernels=(kernel(memory=8 << 30),), gpu_memory=8 << 30),
        "mig",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "NVML error on a GPU offering: unknown, not idle",
        report(kernels=(kernel(),), error="GPU is lost"),
        "gpu",
        {},
        State.UNKNOWN,
        ago(hours=2),
    ),
    (
        "NVML unavailable on MIG: unknown",
        report(kernels=(kernel(),), source="unavailable", error="no driver"),
        "mig",
        {},
        State.UNKNOWN,
        ago(hours=2),
    ),
    (
        "NVML error on a CPU offering does not matter",
        report(kernels=(kernel(),), source="unavailable", error="no driver"),
        "cpu",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "a busy kernel beats an NVML error",
        report(kernels=(kernel("busy"),), error="GPU is lost"),
        "gpu",
        {},
        State.BUSY,
        ago(minutes=1),
    ),
    (
        "stale report: unknown",
        report(received_at=ago(minutes=11), kernels=(kernel(),)),
        "gpu",
        {},
        State.UNKNOWN,
        ago(hours=2),
    ),
    (
        "stale busy report: unknown, active when it arrived",
        report(received_at=ago(minutes=30), kernels=(kernel("busy"),)),
        "gpu",
        {},
        State.UNKNOWN,
        ago(minutes=30),
    ),
    (
        "report exactly stale_after old is still fresh",
        report(received_at=ago(minutes=10), kernels=(kernel(),)),
        "gpu",
        {},
        State.IDLE,
        ago(hours=2),
    ),
    (
        "times in the future are clamped to now",
        report(
            received_at=NOW + timedelta(minutes=5), kernels=(kernel(last=NOW + timedelta(hours=1)),)
        ),
        "gpu",
        {},
        State.IDLE,
        NOW,
    ),
]


@pytest.mark.parametrize(
    ("rep", "kind", "extra", "state", "last_active"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_judge(
    rep: ActivityReport | None,
    kind: str,
    extra: dict[str, Any],
    state: State,
    last_active: datetime,
) -> None:
    v = verdict(rep, kind, **extra)
    assert v.state is state, v.reason
    assert v.last_active == last_active
    assert v.reason
    assert (v.unknown_since is not None) == (state is State.UNKNOWN)


def test_reasons_say_why() -> None:
    assert verdict(None).reason == "no activity report since the server started"
    stale = verdict(report(received_at=ago(minutes=25)))
    assert stale.reason == "no activity report for 25m (expected at least every 10m)"
    assert stale.unknown_since == ago(minutes=25)
    assert "GPU is lost" in verdict(report(error="GPU is lost")).reason
    busy = verdict(report(gpu_utilization=(("GPU-8a1f0000000000", 37.0),)))
    assert busy.reason == "GPU GPU-8a1f0000 at 37% (busy above 10%)"


def test_busy_then_idle_report_keeps_the_busy_time() -> None:
    """A GPU busy at the last report is not idle since an older kernel activity."""
    first = verdict(
        report(received_at=ago(minutes=6), kernels=(kernel(),), gpu_utilization=(("GPU-1", 90.0),))
    )
    assert first.state is State.BUSY
    second = verdict(report(kernels=(kernel(),)), previous=first)
    assert second.state is State.IDLE
    assert second.last_active == ago(minutes=6)
    assert second.idle_for(NOW) == timedelta(minutes=6)


def test_unknown_since_carries_over_and_resets() -> None:
    first = verdict(report(error="GPU is lost"), now=ago(minutes=30))
    assert first.unknown_since == ago(minutes=30)
    second = verdict(report(error="GPU is lost"), previous=first)
    assert second.unknown_since == ago(minutes=30)
    assert second.unknown_for(NOW) == timedelta(minutes=30)
    third = verdict(report(kernels=(kernel(),)), previous=second)
    assert third.state is State.IDLE
    assert third.unknown_since is None


def test_a_service_restart_is_no_activity_of_the_server() -> None:
    """Restarted 2 min ago, the service has no report yet: unknown since then. The report that
    comes next says idle for 2 h: idle since then, not since the service's restart (a warning
    given before the restart stands)."""
    restarted = ago(minutes=2)
    waiting = verdict(None, now=ago(minutes=1), listening_since=restarted)
    assert (waiting.state, waiting.unknown_since) == (State.UNKNOWN, restarted)
    back = verdict(report(kernels=(kernel(),)), previous=waiting, listening_since=restarted)
    assert back.state is State.IDLE
    assert back.last_active == ago(hours=2)


# --------------------------------------------------------------------------- the payload


API_EXAMPLE = {
    "sampled_at": "2026-11-30T16:39:00.000Z",
    "source": "nvml",
    "error": None,
    "kernels": [
        {
            "kernel_id": "3f1c",
            "execution_state": "idle",
            "last_activity": "2026-11-30T15:00:00.000Z",
            "connections": 1,
            "gpu_memory": 0,
        }
    ],
    "terminals": [{"name": "1", "last_activity": "2026-11-30T15:30:00.000Z"}],
    "gpu_memory": 0,
    "gpu_utilization": [{"uuid": "GPU-1", "utilization": 0}],
    "idle_since": "2026-11-30T15:30:00.000Z",
    "something_new": "ignored",
}


def test_parse_the_documented_payload() -> None:
    rep = ActivityReport(ago(minutes=1), parse_activity(API_EXAMPLE))
    assert rep.activity.kernels[0].last_activity == datetime(
        2026, 11, 30, 15, 0, tzinfo=timezone.utc
    )
    assert rep.activity.terminals[0].name == "1"
    assert rep.activity.gpu_utilization == (("GPU-1", 0.0),)
    v = verdict(rep)
    assert v.state is State.IDLE
    assert v.last_active == datetime(2026, 11, 30, 15, 30, tzinfo=timezone.utc)


def test_agrees_with_the_extension_payload() -> None:
    """What the server extension builds, the culler reads to the same idle_since."""
    kernels = [KernelActivity("k", "idle", ago(hours=3), 0, 0)]
    terminals = [TerminalActivity("1", ago(hours=2))]
    devices = [
        Device("GPU-1", 0, "H100", 80 << 30, 1 << 30, utilization=5),
        Device("GPU-2", 1, "L4", 24 << 30, 1 << 30, utilization=95, shared=True),
    ]
    payload = activity_payload(
        sampled_at=ago(minutes=1),
        source="nvml",
        error=None,
        kernels=kernels,
        terminals=terminals,
        devices=devices,
        busy_utilization_percent=10,
        started=STARTED,
    )
    v = verdict(ActivityReport(ago(minutes=1), parse_activity(payload)))
    assert v.state is State.IDLE  # the shared GPU's 95% is not this server's
    assert v.last_active == ago(hours=2)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.sampled_from(["idle", "busy", "starting", "dead", None]), max_size=3),
    st.lists(st.floats(min_value=0, max_value=100), max_size=2),
    st.sampled_from(["gpu", "mig", "shared", "cpu"]),
    st.integers(min_value=0, max_value=30),
    st.booleans(),
)
def test_never_idle_while_busy_or_unsure(
    states: list[str | None], utils: list[float], kind: str, age_min: int, nvml_error: bool
) -> None:
    rep = report(
        received_at=ago(minutes=age_min),
        kernels=tuple(KernelActivity(f"k{i}", s, ago(hours=1), 0, 0) for i, s in enumerate(states)),
        gpu_utilization=tuple((f"GPU-{i}", u) for i, u in enumerate(utils)),
        error="GPU is lost" if nvml_error else None,
    )
    v = verdict(rep, kind)
    if v.state is State.IDLE:
        assert not any(s in BUSY_EXECUTION_STATES for s in states)
        assert kind != "gpu" or all(u <= 10 for u in utils)
        assert age_min <= 10
        assert not nvml_error or kind == "cpu"
    assert STARTED <= v.last_active <= NOW


def test_a_fractions_last_kernel_from_hami_is_activity() -> None:
    """HAMi's vGPU monitor (on the node) says when the fraction last ran a kernel."""
    quiet = report(kernels=(kernel(last=ago(hours=2)),))
    # from the reports: idle since the kernel's last activity two hours ago ...
    assert verdict(quiet, "fraction").last_active == ago(hours=2)
    # ... but HAMi saw a kernel 5 minutes ago: idle since then, never earlier
    seen = verdict(quiet, "fraction", pod_last_kernel=300.0)
    assert (seen.state, seen.last_active) == (State.IDLE, ago(minutes=5))
    # an older figure never makes it idler than the reports say
    old = verdict(report(kernels=(kernel(last=ago(minutes=1)),)), "fraction", pod_last_kernel=9e3)
    assert old.last_active == ago(minutes=1)
    # it counts for fractions only (on a whole GPU the DCGM figure does)
    assert verdict(quiet, "gpu", pod_last_kernel=300.0).last_active == ago(hours=2)


def test_busy_signal_gpu_trusts_hamis_last_kernel_over_the_report() -> None:
    forged = report(kernels=(kernel("busy"),))  # the user's own server says busy
    idle = verdict(forged, "fraction", pod_last_kernel=3600.0, trust_pod_utilization=True)
    assert (idle.state, idle.last_active) == (State.IDLE, ago(hours=1))
    assert "last kernel 1h ago (HAMi's vGPU monitor)" in idle.reason
    busy = verdict(None, "fraction", pod_last_kernel=12.0, trust_pod_utilization=True)
    assert busy.state is State.BUSY
    # no HAMi sample (no kernel ever ran): the report decides
    assert verdict(forged, "fraction", trust_pod_utilization=True).state is State.BUSY


def test_busy_signal_gpu_trusts_the_pod_figure_over_the_report() -> None:
    report = World().store.record("alice", "", busy(T0), T0)  # a kernel "busy" forever
    now = T0 + timedelta(hours=2)
    args: dict[str, Any] = dict(
        kind="mig",
        started_at=T0,
        now=now,
        stale_after=timedelta(minutes=5),
        busy_utilization_percent=10,
    )
    assert judge(report, **args, pod_utilization=0.0).state is State.UNKNOWN  # stale: as before
    fresh = World().store.record("alice", "", busy(now), now)
    assert judge(fresh, **args, pod_utilization=0.0).state is State.BUSY  # reports trusted
    verdict = judge(fresh, **args, pod_utilization=0.0, trust_pod_utilization=True)
    assert verdict.state is State.IDLE
    assert verdict.idle_for(now) == timedelta(hours=2)  # GPU unused since the start
    assert "busy_signal: gpu" in verdict.reason
    assert judge(fresh, **args, pod_utilization=55.0, trust_pod_utilization=True).state is (
        State.BUSY
    )

"""The reporter's side of "reclaim keeps state", over a stand-in for its one
client of the service: it says it keeps state, answers each snapshot request once and at once,
reports an error when the snapshot cannot run, and reports sooner when asked."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import parse_activity
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.kernel_state import KernelStateOutcome
from jupyter_gpuaas.server.reporter import MIN_DELAY, Reporter
from jupyter_gpuaas.server.service_client import ServiceAnswer, ServiceClient

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)
REQUEST = {"requested_at": isoformat_z(T0), "deadline_seconds": 40.0, "reason": "reclaim"}


class Service(ServiceClient):
    """Answers each report with the next of ``answers`` (the last one again when they run out)
    and keeps what it was sent."""

    def __init__(self, answers: list[dict[str, Any]]) -> None:
        super().__init__(url="http://service", token="t")
        object.__setattr__(self, "answers", answers)
        object.__setattr__(self, "bodies", [])

    async def request(self, path: str, **kw: Any) -> ServiceAnswer:
        self.bodies.append(kw["body"])  # type: ignore[attr-defined]
        answers = self.answers  # type: ignore[attr-defined]
        return ServiceAnswer(200, answers.pop(0) if len(answers) > 1 else answers[0])


async def activity() -> api.Activity:
    return {
        "sampled_at": isoformat_z(T0),
        "source": "simulated",
        "error": None,
        "kernels": [],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": isoformat_z(T0),
    }


def kept(seconds_given: list[float]) -> Any:
    async def snapshot(seconds: float) -> list[KernelStateOutcome]:
        seconds_given.append(seconds)
        return [KernelStateOutcome("k1", "train.ipynb", "kept", bytes=10)]

    return snapshot


async def test_a_request_is_answered_at_once_and_only_once() -> None:
    given: list[float] = []
    service = Service([{"accepted": True, "snapshot": REQUEST}])
    reporter = Reporter(activity, service, 60, snapshot=kept(given))
    assert await reporter.report_once()
    assert given == [40.0]
    first, answer = service.bodies  # type: ignore[attr-defined]
    assert first["keeps_kernel_state"] is True
    assert "kernel_state" not in first
    state = parse_activity(answer, now=T0).kernel_state
    assert state is not None
    assert state.outcomes[0].outcome == "kept"
    assert isoformat_z(state.requested_at) == REQUEST["requested_at"]
    # the service still shows the request until its stop step ends: not answered again
    assert await reporter.report_once()
    assert given == [40.0]
    assert reporter.snapshots == 1
    assert "kernel_state" not in service.bodies[-1]  # type: ignore[attr-defined]


async def test_a_snapshot_that_cannot_run_is_reported_as_an_error() -> None:
    async def broken(seconds: float) -> list[KernelStateOutcome]:
        raise OSError("No space left on device")

    service = Service([{"accepted": True, "snapshot": REQUEST}])
    reporter = Reporter(activity, service, 60, snapshot=broken)
    assert await reporter.report_once()
    state = parse_activity(service.bodies[-1], now=T0).kernel_state  # type: ignore[attr-defined]
    assert state is not None
    assert state.error == "the snapshot could not run: No space left on device"


async def test_a_server_that_keeps_no_state_says_nothing_and_ignores_requests() -> None:
    service = Service([{"accepted": True, "snapshot": REQUEST}])
    reporter = Reporter(activity, service, 60)
    assert await reporter.report_once()
    (body,) = service.bodies  # type: ignore[attr-defined]
    assert "keeps_kernel_state" not in body


def test_the_next_report_comes_sooner_when_asked() -> None:
    reporter = Reporter(activity, Service([{}]), 60)
    assert reporter.next_delay(True, 60) == 60
    reporter.last_answer = {"report_again_in": 10.0}
    assert reporter.next_delay(True, 60) == 10.0
    reporter.last_answer = {"report_again_in": 600}
    assert reporter.next_delay(True, 60) == 60
    for odd in (0, -5, float("nan"), "soon", True):
        reporter.last_answer = {"report_again_in": odd}
        assert reporter.next_delay(True, 60) in (MIN_DELAY, 60)
    assert reporter.next_delay(False, 10.0) == 20.0  # a failure backs off from the last wait


async def test_a_server_that_keeps_state_says_how_large_its_kernels_state_is() -> None:
    async def size() -> int:
        return 3 << 30

    async def fails() -> int:
        raise RuntimeError("a kernel did not answer")

    service = Service([{"accepted": True}])
    assert await Reporter(activity, service, 60, snapshot=kept([]), state_size=size).report_once()
    assert parse_activity(service.bodies[-1], now=T0).kernel_state_bytes == 3 << 30  # type: ignore[attr-defined]
    # an estimate that fails leaves the size unsaid (the service waits its base time)
    assert await Reporter(activity, service, 60, snapshot=kept([]), state_size=fails).report_once()
    assert "kernel_state_bytes" not in service.bodies[-1]  # type: ignore[attr-defined]
    assert service.bodies[-1]["keeps_kernel_state"] is True  # type: ignore[attr-defined]


class Activity:
    """A person's latest activity in the server, as the watch reads it."""

    def __init__(self) -> None:
        self.latest: datetime | None = None

    def __call__(self) -> datetime | None:
        return self.latest


async def test_a_person_back_after_a_quiet_spell_is_reported_at_once() -> None:
    """carol ran a cell 2 min after the last report: the report goes within the watch's step,
    not at the end of the interval, so no warning is decided by the report from before."""
    import asyncio

    latest = Activity()
    latest.latest = T0
    service = Service([{"accepted": True}])
    reporter = Reporter(activity, service, 60, latest_activity=latest, watch_interval=0.01)
    assert await reporter.report_once()
    assert not reporter.came_back()
    latest.latest = T0 + timedelta(seconds=30)  # within an interval of what was reported
    assert not reporter.came_back()
    latest.latest = T0 + timedelta(seconds=120)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(reporter.wait(3600), 5)
    assert loop.time() - started < 5  # woke early, not after the hour
    assert reporter.early == 1
    assert await reporter.report_once()
    assert not reporter.came_back()  # the report carried it


async def test_a_server_with_no_activity_yet_reports_its_first_cell_at_once() -> None:
    latest = Activity()
    reporter = Reporter(
        activity, Service([{"accepted": True}]), 60, latest_activity=latest, watch_interval=0.01
    )
    assert await reporter.report_once()
    assert not reporter.came_back()  # nothing yet
    latest.latest = T0
    assert reporter.came_back()


async def test_without_a_watch_the_wait_is_the_interval() -> None:
    reporter = Reporter(activity, Service([{"accepted": True}]), 60)
    assert not reporter.came_back()
    reporter.watch_interval = 0.01
    assert not reporter.came_back()  # nothing to watch

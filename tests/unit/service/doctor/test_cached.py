"""The console's doctor checks, run once per ``ttl`` (``gpuaas_service.doctor.cached``)."""

from __future__ import annotations

import asyncio

from gpuaas_service.doctor.cached import CachedChecks
from gpuaas_service.doctor.checks import Check, Status
from tests.support.clock import FakeClock


class Doctor:
    """Counts its runs; each run's checks say which run it was."""

    def __init__(self, status: Status = "ok") -> None:
        self.runs = 0
        self.status: Status = status
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self) -> list[Check]:
        self.runs += 1
        await self.release.wait()
        return [
            Check("kueue.version", "ok", "0.19.2"),
            Check("hub.scopes", self.status, f"run {self.runs}", fix="grant read:servers"),
        ]


async def test_an_answer_is_kept_for_its_ttl_then_run_again() -> None:
    doctor, clock = Doctor(), FakeClock()
    checks = CachedChecks(doctor, ttl=60, clock=clock)
    first = await checks()
    assert doctor.runs == 1
    assert first["ok"] is True
    assert first["checks"][1] == {
        "name": "hub.scopes",
        "status": "ok",
        "detail": "run 1",
        "fix": "grant read:servers",
    }
    clock.advance(59.9)
    assert await checks() is first
    assert doctor.runs == 1
    clock.advance(0.1)
    again = await checks()
    assert doctor.runs == 2
    assert again["checks"][1]["detail"] == "run 2"


async def test_fresh_runs_again_at_once_and_a_failing_check_makes_it_not_ok() -> None:
    doctor, clock = Doctor(status="missing"), FakeClock()
    checks = CachedChecks(doctor, ttl=60, clock=clock)
    await checks()
    answer = await checks(fresh=True)
    assert doctor.runs == 2
    assert answer["ok"] is False
    assert answer["checked_at"].endswith("+00:00")


async def test_callers_meanwhile_wait_for_the_same_run() -> None:
    doctor, clock = Doctor(), FakeClock()
    doctor.release.clear()
    checks = CachedChecks(doctor, ttl=60, clock=clock)
    waiting = [asyncio.ensure_future(checks()) for _ in range(5)]
    await asyncio.sleep(0)
    assert doctor.runs == 1
    doctor.release.set()
    answers = await asyncio.gather(*waiting)
    assert doctor.runs == 1
    assert all(a is answers[0] for a in answers)

"""The replay's gpuaas policies are the project's decision code: the reclaim loop's decide()
is what acts, a change in the policy file changes the outcome, and skipping quiet cycles
changes nothing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay import brain
from benchmarks.replay.metrics import summarize
from benchmarks.replay.policies import Gpuaas
from benchmarks.replay.run import DEFAULT_CATALOG, DEFAULT_POLICY, Task, make_trace, simulate
from benchmarks.replay.sim import Simulation
from benchmarks.replay.world import load_organisation

SHORT: dict[str, Any] = {"days": 0.5, "burn_in_h": 1.0}


def test_the_reclaim_loop_calls_the_projects_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    loop_module = sys.modules[brain.ReclaimLoop.__module__]
    real = loop_module.decide
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(loop_module, "decide", counting)
    result = simulate(Task("gpuaas", 1, **SHORT), check=True)
    assert result.cycles > 0
    assert len(calls) >= result.cycles  # at least one decide() per cycle (more when it re-asks)


def test_a_change_in_the_policy_file_changes_the_outcome(tmp_path: Path) -> None:
    eager = tmp_path / "eager.yaml"
    eager.write_text(
        DEFAULT_POLICY.read_text(encoding="utf-8")
        .replace("idle_after: 30m", "idle_after: 5m")
        .replace("warn_before: 15m", "warn_before: 0s"),
        encoding="utf-8",
    )
    shipped = summarize(simulate(Task("gpuaas", 1, **SHORT)))
    changed = summarize(simulate(Task("gpuaas", 1, policy_file=str(eager), **SHORT)))
    assert changed["reclaims_per_100h"] > shipped["reclaims_per_100h"]
    assert changed["warnings"] == 0 < shipped["warnings"]  # warn_before 0: reclaimed at once


def test_skipping_quiet_cycles_changes_nothing() -> None:
    task = Task("gpuaas", 2, **SHORT)
    org = load_organisation()
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    outcomes = []
    for skip in (True, False):
        policy = Gpuaas(brain.load_policy_file(str(DEFAULT_POLICY)), skip_quiet=skip)
        result = Simulation(make_trace(task), org, catalog, policy).run()
        outcomes.append(
            (
                [(r["t"], r["session"], r["code"]) for r in result.reclaims],
                result.warnings,
                [w for _t, w, _a in result.spawn_waits],
            )
        )
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("policy", ["static", "idle-10", "gpuaas-fractional", "oracle"])
def test_every_policy_stays_within_capacity_and_quota(policy: str) -> None:
    result = simulate(Task(policy, 3, **SHORT), check=True)
    figures = summarize(result)
    assert 0 <= figures["busy_share"] <= figures["allocation_share"] <= 1

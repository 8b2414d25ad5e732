"""The replay's gpuaas policies are the project's decision code: the reclaim loop's decide()
is what acts, a change in the policy file changes the outcome, and skipping quiet cycles
changes nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay import brain
from benchmarks.replay.ladder_report import page_command
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
        .replace("idle_after_when_kept: 15m", "idle_after_when_kept: 5m")
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


def test_some_users_take_fractions_the_same_users_under_every_policy() -> None:
    task = Task("static", 1, **SHORT)
    org = load_organisation()
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    trace = make_trace(task)
    picks = []
    for share in (0.0, 0.5, 0.5, 1.0):
        sim = Simulation(trace, org, catalog, Gpuaas(brain.load_policy_file(str(DEFAULT_POLICY))))
        sim.fractions = share
        takers = {s.user for s in trace.sessions if sim.takes_fractions(s)}
        picks.append((takers, {s.name: sim.choose_offering(s).slug for s in trace.sessions}))
    users = {s.user for s in trace.sessions}
    assert picks[0][0] == set()
    assert picks[3][0] == users
    assert picks[1] == picks[2]  # a draw per user and seed: the same for every policy
    assert 0.25 * len(users) < len(picks[1][0]) < 0.75 * len(users)
    kinds = {
        share: {catalog.offerings[slug].kind for slug in chosen.values()}
        for share, (_t, chosen) in zip((0.0, 0.5, 0.5, 1.0), picks, strict=True)
    }
    assert "fraction" in kinds[0.5]
    assert "fraction" in kinds[1.0]
    # Who takes no fractions takes a fraction only where their team has no whole GPU or MIG
    # slice with the memory they need (team B: no H100 offering).
    for session in trace.sessions:
        slug = picks[0][1][session.name]
        if catalog.offerings[slug].kind in ("fraction", "shared"):
            assert session.team == "team-b"
            assert session.gpu_memory_gib > 5


def test_a_fraction_holds_a_quarter_gpu_equivalent_and_is_judged_by_its_policy(
    tmp_path: Path,
) -> None:
    task = Task("gpuaas-fractional", 1, **SHORT)
    result = simulate(task, check=True)
    quarters = [a for a in result.allocations if a.flavor == "l4-hami"]
    assert quarters, "no session took a HAMi fraction"
    assert {a.gpu_equivalents for a in quarters} <= {0.25, 0.5}

    def on_fractions(r: dict[str, Any]) -> bool:
        return brain.load_catalog(str(DEFAULT_CATALOG)).offerings[r["offering"]].kind == "fraction"

    # Without a rule for kind "fraction" no fraction is ever reclaimed; with one, some are.
    shipped = DEFAULT_POLICY.read_text(encoding="utf-8")
    assert "kinds: [mig, shared, fraction]" in shipped
    unruled = tmp_path / "no-fractions.yaml"
    unruled.write_text(shipped.replace("[mig, shared, fraction]", "[mig, shared]"), "utf-8")
    kept = simulate(Task("gpuaas-fractional", 1, policy_file=str(unruled), **SHORT), check=True)
    assert not [r for r in kept.reclaims if on_fractions(r)]
    ruled = tmp_path / "fractions.yaml"
    ruled.write_text(
        shipped.replace("[mig, shared, fraction]", "[mig, shared]")
        + "  - name: fractions\n    match: {kinds: [fraction]}\n"
        "    idle_after: 10m\n    reclaim: always\n",
        encoding="utf-8",
    )
    changed = simulate(Task("gpuaas-fractional", 1, policy_file=str(ruled), **SHORT), check=True)
    assert [r for r in changed.reclaims if on_fractions(r)]


@pytest.mark.parametrize("policy", ["static", "idle-10", "gpuaas-fractional", "oracle"])
def test_every_policy_stays_within_capacity_and_quota(policy: str) -> None:
    result = simulate(Task(policy, 3, **SHORT), check=True)
    figures = summarize(result)
    assert 0 <= figures["busy_share"] <= figures["allocation_share"] <= 1


def test_the_page_names_its_command_without_the_worker_count() -> None:
    assert page_command([]) == "python -m benchmarks replay"
    assert page_command(["--workers", "2"]) == "python -m benchmarks replay"
    assert page_command(["--seeds", "3", "--workers=2", "--days", "1"]) == (
        "python -m benchmarks replay --seeds 3 --days 1"
    )
    assert page_command(["--json", "/tmp/x.json", "--quick", "--json=y"]) == (
        "python -m benchmarks replay --quick"
    )


def test_memoised_readers_change_no_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay's workers remember the reclaim loop's parsed Workloads and quantities
    (brain.memoise_readers): a reclaim rung's run gives the same figures with and without."""
    from benchmarks.replay import capacity

    for module, name, original in brain.reader_originals():
        monkeypatch.setattr(module, name, original)
    monkeypatch.setattr(brain, "_memoised", False)
    run = capacity.RunSpec(org="dgx-4", rung="L3", gpus=18, seed=2, days=0.25, burn_in_h=12.0)
    plain = capacity.run_one(run)
    assert plain["reclaims_per_100h"] > 0, "the loop reclaimed nothing: the check would be empty"
    brain.memoise_readers()
    assert all(getattr(m, n) is not f for m, n, f in brain.reader_originals())
    same = json.dumps(capacity.run_one(run), sort_keys=True, default=str)  # nan == nan
    assert same == json.dumps(plain, sort_keys=True, default=str)


def test_runs_in_the_calling_process_give_the_readers_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo remembers a Workload by identity; the service's own tests change Workloads in
    place, so a replay run in the test process must not leave the memo behind."""
    from benchmarks.replay import capacity

    for module, name, original in brain.reader_originals():
        monkeypatch.setattr(module, name, original)
    monkeypatch.setattr(brain, "_memoised", False)
    monkeypatch.setattr(capacity, "_DONE", {})
    seen: list[bool] = []

    def run_one(run: capacity.RunSpec) -> dict[str, object]:
        seen.append(all(getattr(m, n) is not f for m, n, f in brain.reader_originals()))
        return {"gpus": run.gpus}

    monkeypatch.setattr(capacity, "run_one", run_one)
    run = capacity.RunSpec(org="dgx-4", rung="L3", gpus=18, seed=5, days=0.25, burn_in_h=12.0)
    assert capacity.run_many([run], workers=1)[0]["gpus"] == 18
    assert seen == [True], "the run did not use the memoised readers"
    assert all(getattr(m, n) is f for m, n, f in brain.reader_originals())

"""Effective capacity: the search finds the smallest size meeting every level, the bootstrap is
paired over the seeds, every figure printed for a run is recomputed from its events alone, and
the command runs the ladder in quick mode."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay import capacity, ladder, recompute
from benchmarks.replay.capacity import Levels, RunSpec, Search, _Bisection, crossing, grid_sizes
from benchmarks.replay.cli import main

LEVELS = Levels()


def _runs(wait: float, interrupted: float = 0.0, n: int = 1) -> list[dict[str, Any]]:
    return [
        {"wait_p90_min": wait, "spawn_wait_p90_min": 1.0, "interrupted_per_100h": interrupted}
    ] * n


def test_the_crossing_interpolates_between_the_last_failing_and_first_meeting_size() -> None:
    assert crossing([(40, 0.5), (20, 2.0), (30, 1.5)]) == pytest.approx(30 + 10 * 0.5 / 1.0)
    assert crossing([(20, 0.9), (30, 0.5)]) == 20  # meets at the smallest size run
    assert math.isinf(crossing([(20, 3.0), (30, 1.2)]))


def test_the_search_finds_the_levels_and_the_interruption_level_only_adds() -> None:
    grid = grid_sizes(32)
    assert grid[0] == 16
    assert grid[-1] == 128

    def outcome(g: int) -> dict[float, list[dict[str, Any]]]:
        # Training meets from 40 GPUs on; sessions are interrupted too often below 51.
        return {0.5: _runs(30 * 40 / g, interrupted=6.0 if g < 51 else 2.0)}

    search = Search("x")
    bisection = _Bisection(grid, [LEVELS.limits(interruptions=False), LEVELS.limits()])
    probes = []
    while (i := bisection.next(search, grid.index(32))) is not None:
        probes.append(grid[i])
        search.sizes[grid[i]] = outcome(grid[i])
    assert len(probes) == len(set(probes)) < len(grid) // 2  # bisected, never run twice
    assert search.capacity(LEVELS.limits(interruptions=False)) == pytest.approx(40.0)
    assert search.meeting_size(LEVELS.limits()) == 51
    assert 45 < search.capacity(LEVELS.limits()) <= 51


def test_the_best_split_is_chosen_per_size() -> None:
    by_split = {0.25: _runs(50.0), 0.5: _runs(20.0)}
    assert capacity.ratio(by_split, LEVELS.limits()) == pytest.approx(20 / 30)
    search = Search("B1", {32: by_split})
    assert search.best_split(32, LEVELS.limits()) == 0.5


def test_the_bootstrap_is_paired_over_the_seeds() -> None:
    """Two rungs whose capacity moves with the seed in step: every resample gives the same
    multiplier, so the interval is a point; unpaired it would spread."""
    seeds = 10
    waits = [20.0 + 3 * k for k in range(seeds)]

    def search(factor: float) -> Search:
        return Search(
            "x",
            {
                g: {
                    0.5: [{**_runs(w * 32 * factor / g)[0], "seed": k} for k, w in enumerate(waits)]
                }
                for g in (16, 20, 26, 32, 40, 51, 64, 80, 102, 128)
            },
        )

    searches = {"B1": search(2.0), "L1": search(1.0)}
    (m,) = [
        x for x in capacity.bootstrap(searches, ["B1"], seeds, LEVELS.limits()) if x.rung == "L1"
    ]
    assert m.value == pytest.approx(2.0, rel=0.15)
    assert m.high - m.low < 0.2


@pytest.mark.parametrize("rung", ["B0", "B1i", "L1g", "L2", "L1p", "L4t"])
def test_every_figure_is_recomputed_from_the_events_alone(rung: str) -> None:
    """Every printed figure, the large-Job ones too (the GPU-hour-weighted mean, the 8-GPU
    Jobs' p90, the Jobs never started); the TAS rungs' as the others'."""
    out = io.StringIO()
    run = RunSpec(org="dgx-4", rung=rung, gpus=24, seed=5, days=0.5, burn_in_h=12.0)
    figures = capacity.run_one(run, out)
    again = recompute.figures(recompute.read(out.getvalue().splitlines()))
    for key, value in again.items():
        # Event times are rounded to the millisecond: a GPU-hour figure moves by ~1e-6.
        assert value == pytest.approx(float(figures[key]), rel=1e-5, abs=1e-9, nan_ok=True), key
    events = recompute.read(out.getvalue().splitlines())
    assert events[0]["rung"] == rung
    assert events[0]["seed"] == 5
    if rung == "L2":  # Jobs that waited for whole cards, and a kernel that went up a size
        kinds = {e["event"] for e in events}
        assert {"unplaceable", "placed", "way_up"} <= kinds


def test_the_unplaceable_jobs_count_the_measured_window_only() -> None:
    """Like every other figure: Jobs admitted onto scraps during the burn-in are not the
    measured day's (L2 at 20 GPUs, seed 5: three of its five are in the burn-in)."""
    out = io.StringIO()
    run = RunSpec(org="dgx-4", rung="L2", gpus=20, seed=5, days=0.5, burn_in_h=12.0)
    figures = capacity.run_one(run, out)
    events = recompute.read(out.getvalue().splitlines())
    lo, hi = events[0]["burn_in_s"], events[0]["end_s"]
    waits = [e for e in events if e["event"] == "unplaceable" and e["kind"] == "training"]
    assert any(e["t"] < lo for e in waits)
    assert figures["jobs_unplaceable"] == sum(1 for e in waits if lo <= e["t"] < hi) > 0
    again = recompute.figures(events)
    assert again["unplaced_job_gpu_h"] == pytest.approx(figures["unplaced_job_gpu_h"], rel=1e-6)


def test_events_replay_a_rung_on_the_split_the_page_sized_it_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.replay import ladder_report

    record = tmp_path / "page-splits.json"
    record.write_text(
        json.dumps({"org": "dgx-4", "l1c_timeout_min": 120, "splits": {"B1": {"20": 0.375}}}),
        encoding="utf-8",
    )
    monkeypatch.setattr(ladder_report, "PAGE_SPLITS", record)
    path = tmp_path / "run.jsonl"
    argv = ["--org", "dgx-4", "--events", str(path), "--rung", "B1", "--seed", "3", "--quick"]
    assert main([*argv, "--size", "20"]) == 0
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert (first["rung"], first["gpus_size"], first["split"]) == ("B1", 20, 0.375)
    assert "split 0.375: the page's for B1 at 20 GPUs" in capsys.readouterr().out
    assert main([*argv, "--size", "20", "--split", "0.625"]) == 0
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["split"] == 0.625


def test_the_quick_ladder_runs_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ladder.json"
    argv = ["--quick", "--seed", "1,2", "--rungs", "B1,L1,L2", "--splits", "0.25,0.5"]
    assert main([*argv, "--no-docs", "--json", str(out), "--workers", "1"]) == 0
    printed = capsys.readouterr().out
    assert "Effective capacity" in printed
    assert "| L2 | L1 + need-sized shares, advised and packed |" in printed
    assert "× against B1 [95%]" in printed
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["seeds"] == [1, 2]
    assert set(data["searches"]) == {"B1", "L1", "L2"}
    # B1, and L1: without L1c it is the best open stack.
    assert {m["baseline"] for m in data["multipliers"]} == {"B1", "L1"}
    assert "× against the best open stack (L1) [95%]" in printed


def test_events_of_any_rung_size_and_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "run.jsonl"
    argv = ["--events", str(path), "--rung", "B2", "--size", "20", "--seed", "9137", "--quick"]
    assert main(argv) == 0
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert (first["rung"], first["gpus_size"], first["seed"]) == ("B2", 20, 9137)
    printed = capsys.readouterr().out
    assert "| training wait p90 (min) |" in printed
    assert main(["--org", "no-such-org", "--quick", "--no-docs"]) == 2


def test_the_sensitivity_sweep_moves_one_demand_figure_at_a_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.replay import ladder_report

    monkeypatch.setattr(
        ladder_report,
        "SWEEP",
        (("gpu_memory_median_gib", "median GPU-memory need (GiB)", (16.0,)),),
    )
    argv = ["--quick", "--seed", "1", "--rungs", "B1,L2", "--splits", "0.375", "--sweep"]
    assert main([*argv, "--no-docs", "--workers", "1", "--resamples", "20"]) == 0
    printed = capsys.readouterr().out
    sweep = printed.split("Sensitivity:")[1]
    assert "| demand | B1 GPUs | L2 GPUs | L2 × against B1 |" in sweep
    assert "| median GPU-memory need (GiB) 16 (else 8) |" in sweep


def test_the_culler_frontier_moves_the_cullers_knobs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.replay import ladder, ladder_report
    from benchmarks.replay.policies import IdleCuller

    culler = ladder.policy(ladder.RUNGS["L1i"], "", 30.0)
    assert isinstance(culler, IdleCuller)
    assert culler.timeout_s == 1800.0
    monkeypatch.setattr(ladder_report, "FRONTIER_IDLE_MIN", (30.0,))
    monkeypatch.setattr(
        ladder_report,
        "FRONTIER_GPUAAS",
        (("warn_before 0s", (("warn_before: 15m", "warn_before: 0s"),)),),
    )
    argv = ["--quick", "--seed", "1", "--rungs", "L1", "--frontier", "--no-docs"]
    assert main([*argv, "--workers", "1", "--resamples", "20"]) == 0
    frontier = capsys.readouterr().out.split("The culler frontier:")[1]
    assert "| idle-culler, timeout 30 min | " in frontier
    assert "| gpuaas, warn_before 0s | " in frontier
    monkeypatch.setattr(ladder_report, "FRONTIER_GPUAAS", (("typo", (("warn_befor: 15m", "x"),)),))
    with pytest.raises(ValueError, match="the policy file has no 'warn_befor: 15m'"):
        main([*argv, "--workers", "1"])


def test_the_dual_finds_the_largest_demand_a_fixed_cluster_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same bisection, along demand: runs whose training wait grows with the demand
    (limit 30 min crossed at 1.5×) give 1.5× on the organisation's own cluster, every run at
    that size with users per GPU and training load scaled alike."""
    seen: list[RunSpec] = []

    def fake_runs(runs: list[RunSpec], workers: int) -> list[dict[str, Any]]:
        out = []
        for run in runs:
            seen.append(run)
            scale = dict(run.demand)["training_offered_load"] / 0.7
            out.append(
                {**_runs(20.0 * scale)[0], "rung": run.rung, "split": run.split, "seed": run.seed}
            )
        return out

    monkeypatch.setattr(capacity, "run_many", fake_runs)
    base = RunSpec(org="dgx-4", rung="L2", gpus=0, seed=1)
    searches = capacity.search_demand(
        base, ["L2"], [1, 2], capacity.SearchSettings(LEVELS, [0.5], 1)
    )
    served = capacity.key_demand(searches["L2"].capacity(LEVELS.limits()))
    assert served == pytest.approx(1.5, rel=0.02)
    assert {r.gpus for r in seen} == {32}
    for run in seen:
        demand = dict(run.demand)
        assert demand["users_per_gpu"] / 1.0 == pytest.approx(demand["training_offered_load"] / 0.7)
    low, high = capacity.interval(searches["L2"], 2, LEVELS.limits(), resamples=50)
    assert capacity.key_demand(high) == pytest.approx(served)  # every seed alike: a point
    assert capacity.key_demand(low) == pytest.approx(served)


def _probe_all(
    bisection: _Bisection, grid: list[int], outcome: Any, start: int
) -> tuple[list[int], Search]:
    search = Search("x")
    probes = []
    while (i := bisection.next(search, start)) is not None:
        probes.append(grid[i])
        search.sizes[grid[i]] = outcome(grid[i])
    return probes, search


def test_a_right_guess_closes_the_bracket_in_three_sizes() -> None:
    """From a guess the search gallops: the guess meets, one step down fails, and the size
    above is run for the bootstrap; the capacity is the bisection's."""
    grid = grid_sizes(32)

    def outcome(g: int) -> dict[float, list[dict[str, Any]]]:
        return {0.5: _runs(30 * 38 / g)}

    phases = [LEVELS.limits(interruptions=False), LEVELS.limits()]
    guessed, search = _probe_all(_Bisection(grid, phases, grid.index(40)), grid, outcome, 6)
    assert guessed == [40, 36, 45]
    bisected, again = _probe_all(_Bisection(grid, phases), grid, outcome, 6)
    assert len(bisected) > len(guessed)
    assert search.capacity(LEVELS.limits()) == pytest.approx(again.capacity(LEVELS.limits()))
    far, _ = _probe_all(_Bisection(grid, phases, grid.index(102)), grid, outcome, 6)
    assert far[:4] == [102, 90, 72, 45]  # 1, 2, 4 grid steps down while it meets
    assert {36, 40} <= set(far)  # then the bracket, bisected


def test_no_size_meeting_the_interruption_level_costs_one_size() -> None:
    """An idle-culler interrupts at the same rate on any size: once the training and spawn
    levels are met, the top of the grid is run, fails, and the search stops."""
    grid = grid_sizes(32)

    def outcome(g: int) -> dict[float, list[dict[str, Any]]]:
        return {0.5: _runs(30 * 38 / g, interrupted=11.0)}

    phases = [LEVELS.limits(interruptions=False), LEVELS.limits()]
    probes, search = _probe_all(_Bisection(grid, phases, grid.index(40)), grid, outcome, 6)
    assert probes == [40, 36, 128, 45]
    assert math.isinf(search.capacity(LEVELS.limits()))
    assert search.capacity(LEVELS.limits(interruptions=False)) == pytest.approx(38.0, rel=0.01)


def test_a_rung_starts_from_its_parent_on_the_split_chosen_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B1i waits for B1's first phase, starts from B1's size and keeps B1's best split there
    (the partition chosen best for B1), where B1 ran every split."""
    seen: list[RunSpec] = []

    def fake_runs(runs: list[RunSpec], workers: int) -> list[dict[str, Any]]:
        out = []
        for run in runs:
            seen.append(run)
            # The 0.375 split serves best; every split meets from some size on.
            wait = 30 * 50 / run.gpus * (1.0 if run.split == 0.375 else 1.3)
            out.append({**_runs(wait)[0], "rung": run.rung, "split": run.split, "seed": run.seed})
        return out

    monkeypatch.setattr(capacity, "run_many", fake_runs)
    base = RunSpec(org="dgx-4", rung="B1", gpus=0, seed=1)
    searches = capacity.search_all(
        base, ["B1", "B1i"], [1, 2], capacity.SearchSettings(LEVELS, [0.25, 0.375, 0.5], 1)
    )
    assert {r.split for r in seen if r.rung == "B1"} == {0.25, 0.375, 0.5}
    assert {r.split for r in seen if r.rung == "B1i"} == {0.375}
    first_b1i = next(r for r in seen if r.rung == "B1i")
    assert first_b1i.gpus == searches["B1"].meeting_size(LEVELS.limits())
    assert searches["B1i"].capacity(LEVELS.limits()) == pytest.approx(50.0, rel=0.01)


def test_the_best_open_stack_is_the_idle_culler_timeout_needing_the_fewest_gpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """L1c searches L1 + jupyterhub-idle-culler at every timeout of the grid on every level
    and takes the one that needs the fewest GPUs: a short timeout needs few GPUs but
    interrupts beyond the level at every size; a long one meets it on more GPUs."""
    seen: list[RunSpec] = []

    def fake_runs(runs: list[RunSpec], workers: int) -> list[dict[str, Any]]:
        out = []
        for run in runs:
            seen.append(run)
            t = run.idle_timeout_min
            wait = 30 * (20 + t / 10) / run.gpus  # a longer timeout holds more GPUs
            interrupted = 600 / t  # and interrupts fewer sessions, whatever the size
            out.append(
                {**_runs(wait, interrupted)[0], "rung": run.rung, "split": run.split,
                 "seed": run.seed}
            )  # fmt: skip
        return out

    monkeypatch.setattr(capacity, "run_many", fake_runs)
    base = RunSpec(org="dgx-4", rung="L1c", gpus=0, seed=1)
    settings = capacity.SearchSettings(LEVELS, [0.5], 1, 50, {"L1c": 0.5})
    best = capacity.search_best_open(base, [1, 2], settings, guess=32.0)
    assert set(best.searches) == set(ladder.OPEN_TIMEOUTS_MIN)
    assert {r.idle_timeout_min for r in seen} == set(ladder.OPEN_TIMEOUTS_MIN)
    assert {r.split for r in seen} == {0.5}
    # 600/t <= 5 from 120 min on; 120 needs the fewest GPUs of those (32 at 20 + 12).
    assert best.chosen == 120.0
    assert math.isinf(best.searches[90.0].capacity(LEVELS.limits()))
    assert best.searches[120.0].capacity(LEVELS.limits()) == pytest.approx(32.0, rel=0.02)
    # Its runs are L1i's at the same timeout: made once for both.
    l1c = RunSpec(org="dgx-4", rung="L1c", gpus=32, seed=7, idle_timeout_min=120.0)
    assert capacity.run_key(l1c) == capacity.run_key(replace(l1c, rung="L1i"))


def test_every_cohort_chooses_its_split_as_b1_does_and_its_children_keep_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """B2 and L1 run every split at each size they search and take the best there, as B1
    does (each baseline at its best); L1g, L1 + a culler, keeps L1's split at L1's size.
    The sweep, the dual and the frontier, which do not search L1, give L1g that split."""
    seen: list[RunSpec] = []
    best = {"B1": 0.375, "B2": 0.25, "L1": 0.25}

    def fake_runs(runs: list[RunSpec], workers: int) -> list[dict[str, Any]]:
        out = []
        for run in runs:
            seen.append(run)
            good = run.split == best.get(run.rung, 0.25)
            wait = 30 * 40 / run.gpus * (1.0 if good else 1.4)
            out.append({**_runs(wait)[0], "rung": run.rung, "split": run.split, "seed": run.seed})
        return out

    monkeypatch.setattr(capacity, "run_many", fake_runs)
    base = RunSpec(org="dgx-4", rung="B1", gpus=0, seed=1)
    splits = [0.25, 0.375, 0.5]
    searches = capacity.search_all(
        base, ["B1", "B2", "L1", "L1g"], [1, 2], capacity.SearchSettings(LEVELS, splits, 1)
    )
    for rung in ("B1", "B2", "L1"):
        sizes = {r.gpus for r in seen if r.rung == rung}
        for g in sizes:  # every split at every size searched
            assert {r.split for r in seen if r.rung == rung and r.gpus == g} == set(splits)
        size = searches[rung].meeting_size(LEVELS.limits())
        assert size is not None
        assert searches[rung].best_split(size, LEVELS.limits()) == best[rung]
        assert searches[rung].capacity(LEVELS.limits()) == pytest.approx(40.0, rel=0.01)
    assert {r.split for r in seen if r.rung == "L1g"} == {0.25}
    kept = capacity.chosen_splits(searches)
    assert kept == {"L1g": 0.25}
    seen.clear()
    capacity.search_all(
        base, ["B1", "L1g"], [1], capacity.SearchSettings(LEVELS, splits, 1, inherited=kept)
    )
    assert {r.split for r in seen if r.rung == "B1"} == set(splits)
    assert {r.split for r in seen if r.rung == "L1g"} == {0.25}
    assert capacity.splits_of("L1g", splits, {}) == tuple(splits)  # no parent, none kept
    assert capacity.splits_of("L1g", (), {}) == (0.5,)
    assert capacity.splits_of("B0", splits, {}) == (0.5,)  # no split: reservations


def test_a_run_is_made_once_for_every_search_that_asks_for_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frontier's idle-culler at 60 min is the ladder's L1i, a policy file changes
    nothing on a rung without gpuaas, and the dual's demand × 1 is the organisation's."""
    made: list[RunSpec] = []

    def fake_one(run: RunSpec, events: Any = None) -> dict[str, Any]:
        made.append(run)
        return {"rung": run.rung, "split": run.split, "seed": run.seed, "gpus_size": run.gpus}

    monkeypatch.setattr(capacity, "run_one", fake_one)
    monkeypatch.setattr(capacity, "_DONE", {})
    l1i = RunSpec(org="dgx-4", rung="L1i", gpus=32, seed=7)
    same = [
        l1i,
        RunSpec(org="dgx-4", rung="L1i", gpus=32, seed=7, policy_file="/elsewhere.yaml"),
        RunSpec(
            org="dgx-4",
            rung="L1i",
            gpus=32,
            seed=7,
            demand=(("users_per_gpu", 1.0), ("training_offered_load", 0.7)),
        ),
    ]
    other = [
        RunSpec(org="dgx-4", rung="L1i", gpus=32, seed=7, idle_timeout_min=30.0),
        RunSpec(org="dgx-4", rung="L1g", gpus=32, seed=7, policy_file="/elsewhere.yaml"),
        RunSpec(org="dgx-4", rung="L1g", gpus=32, seed=7),
    ]
    results = capacity.run_many([*same, *other], workers=1)
    assert len(made) == 4
    assert [r["seed"] for r in results] == [7] * 6
    capacity.run_many(same, workers=1)
    assert len(made) == 4


def test_the_search_covers_the_crossings_of_the_bootstrap_resamples() -> None:
    """Seeds that disagree: a resample of the slow seeds still fails at the largest size the
    bracket needs, so the search runs sizes above it until every resample crosses (or the
    cap); without the resamples it stops at the bracket."""
    grid = grid_sizes(32)
    factors = [1.0, 1.0, 1.0, 1.6]

    def outcome(g: int) -> dict[float, list[dict[str, Any]]]:
        return {0.5: [{**_runs(30 * 36 * f / g)[0], "seed": k} for k, f in enumerate(factors)]}

    phases = [LEVELS.limits(interruptions=False), LEVELS.limits()]
    plain, _ = _probe_all(_Bisection(grid, phases, grid.index(40)), grid, outcome, 6)
    picks = capacity.resample_picks(len(factors), 200)
    covered, search = _probe_all(_Bisection(grid, phases, grid.index(40), picks), grid, outcome, 6)
    assert set(plain) < set(covered)
    assert max(covered) > max(plain)
    worst = max(30 * 36 * 1.6 / g for g in [max(covered)])  # all seeds slow: ratio at the top run
    assert worst <= 30 or len(set(covered) - set(plain)) >= capacity.COVER_STEPS
    low, high = capacity.interval(search, len(factors), LEVELS.limits(), resamples=200)
    assert math.isfinite(high)
    assert low <= search.capacity(LEVELS.limits()) <= high


def test_the_page_is_written_with_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole page is generated: its tables and, beside it, the SVG figures it links (the
    ladder, the multipliers, the sensitivity to users per GPU and to memory need)."""
    from benchmarks.replay import ladder_report

    page = tmp_path / "replay.md"
    monkeypatch.setattr(ladder_report, "DOCS", page)
    monkeypatch.setattr(ladder_report, "PAGE_SPLITS", tmp_path / "page-splits.json")
    monkeypatch.setattr(ladder_report, "FIGURES", tmp_path / "replay")
    monkeypatch.setattr(
        ladder_report,
        "SWEEP",
        (
            ("users_per_gpu", "notebook users per GPU", (2.0,)),
            ("gpu_memory_median_gib", "median GPU-memory need (GiB)", (16.0,)),
        ),
    )
    argv = ["--quick", "--seed", "1,2", "--rungs", "L1c,L2", "--sweep"]
    assert main([*argv, "--workers", "1", "--resamples", "20"]) == 0
    text = page.read_text(encoding="utf-8")
    assert "(The culler frontier: not run)" in text  # --quick leaves it out
    for name in ("ladder", "multipliers", "users", "memory"):
        assert f"](replay/{name}.svg)" in text
        svg = (tmp_path / "replay" / f"{name}.svg").read_text(encoding="utf-8")
        assert svg.startswith("<svg ")
    assert "{figure_" not in text
    # Which split each rung got: L1c and L2, their parent not searched, chose their own.
    (row,) = [line for line in text.splitlines() if line.startswith("| notebook share")]
    cells = row.split("|")[2:-1]
    assert len(cells) == 2
    assert all("★" in cell for cell in cells)
    speed = text.split("## Speed")[1]
    # --quick --sweep: the whole sweep, no model rows (the header says the same).
    assert "the whole sensitivity sweep at 2 seeds" in " ".join(speed.split())
    header = " ".join(text.split("## The organisation")[0].split())
    assert "and those of L1c's other 2 idle-culler timeouts and the whole sensitivity sweep:" in (
        header
    )
    assert "20 seeds" in speed  # whether they could take 20 within the budget


def _setting(label: str, gpus: int, interrupted: float) -> Any:
    """A frontier point whose search meets the training level from ``gpus`` on, the same on
    4 seeds."""
    from benchmarks.replay.ladder_report import FrontierPoint

    sizes = {g: {0.5: _runs(30.0 * gpus / g, interrupted, n=4)} for g in (26, 29, 32, 36, 40)}
    search = Search(label, sizes)
    limits = LEVELS.limits(interruptions=False)
    culler = label.partition(",")[0]
    return FrontierPoint(label, culler, search, search.capacity(limits), interrupted)


def test_the_frontier_says_where_the_shipped_policy_stands_and_what_dominates_it() -> None:
    from benchmarks.replay.ladder_report import frontier_reading

    limits = LEVELS.limits(interruptions=False)
    level = LEVELS.interrupted_per_100h

    def read(*points: Any) -> str:
        return frontier_reading(points, level, limits, 4, 200)

    idle_30 = _setting("idle-culler, timeout 30 min", 29, 28.0)
    idle_240 = _setting("idle-culler, timeout 240 min", 36, 0.2)
    shipped = _setting("gpuaas, as shipped", 32, 1.5)
    eager = _setting("gpuaas, warn_before 0s", 36, 10.0)

    text = read(idle_30, idle_240, shipped)
    assert "the fewest GPUs: **gpuaas, as shipped**" in text
    assert "The shipped policy is that setting." in text
    assert "No gpuaas setting is dominated" in text

    cheaper = _setting("idle-culler, timeout 120 min", 29, 2.5)
    text = read(cheaper, shipped)
    assert "the fewest GPUs: **idle-culler, timeout 120 min**" in text
    assert "The shipped policy needs 1.10× [1.10–1.10] its GPUs" in text
    assert "a reason to change the default" in text
    assert "No gpuaas setting is dominated" in text  # fewer GPUs, but more interruptions

    text = read(idle_30, eager, _setting("gpuaas, as shipped", 36, 6.0))
    assert "No setting meets the interruption level" in text
    assert "No gpuaas setting is dominated" in text  # 30 min: fewer GPUs, more interruptions
    text = read(_setting("idle-culler, timeout 60 min", 29, 9.0), eager, idle_240)
    assert "Dominated by an idle-culler setting: gpuaas, warn_before 0s by" in text
    assert "its default must change" not in text  # no shipped setting in this frontier
    text = read(idle_240, _setting("gpuaas, as shipped", 32, 7.0))
    assert "**its default must change**" in text


def _rung(name: str, gpus: int, interrupted: float = 0.0, **figures: float) -> Search:
    """A search whose rung meets the training level from ``gpus`` on, the same on 4 seeds,
    interrupting ``interrupted`` sessions per 100 session-h at every size."""
    run = {
        "wait_p90_min": 0.0,
        "spawn_wait_p90_min": 1.0,
        "interrupted_per_100h": interrupted,
        "advice_oversize": 0.0,
        "jobs_unplaceable": 0.0,
        "unplaced_job_gpu_h": 0.0,
        "share_slowdown": 0.0,
        **figures,
    }
    sizes = {
        g: {0.5: [{**run, "wait_p90_min": 30.0 * gpus / g}] * 4}
        for g in (26, 29, 32, 36, 40, 45, 51, 64, 72, 80, 90)
    }
    return Search(name, sizes)


def test_the_goals_say_whether_l4_meets_them_and_name_the_cost_responsible() -> None:
    from benchmarks.replay.ladder_report import ModelResult, ModelRow, goals_section

    def goals(searches: dict[str, Search], models: Sequence[ModelResult] = ()) -> str:
        full = capacity.bootstrap(searches, ["B0", "L1c"], 4, LEVELS.limits(), resamples=200)
        return goals_section(searches, full, [], LEVELS, models)

    ladder_ = {
        "B0": _rung("B0", 64),
        "L1": _rung("L1", 36),
        "L1c": _rung("L1c", 32, 3.0),
        "L3": _rung("L3", 29, 2.0),
        "Lb": _rung("Lb", 22),
        "F0": _rung("F0", 20),
    }
    met = goals({**ladder_, "L4": _rung("L4", 26, 0.5)})
    assert (
        "| ≥ 1.2× against the best open stack (L1c), lower bound ≥ 1.1 | **1.23×** [1.23–1.23] |"
        " **1.10×**" in met
    )
    assert "| ≥ 2.3× against B0 | **2.46×** [2.46–2.46] |" in met
    assert (
        "| ≤ 1 session per 100 session-h losing its state (at its size) | 0.50 | 2.00 | yes |"
        in (met)
    )
    assert "Every goal is met." in met

    def row(label: str, value: float, lost: float) -> ModelResult:
        m = capacity.Multiplier("L4", "L1c", value, value - 0.05, value + 0.05)
        return ModelResult(ModelRow(label, "L4", ()), _rung("L4", 26), m, lost)

    l4 = _rung("L4", 29, 2.0)
    short = goals(
        {**ladder_, "L4": l4},
        [
            row("snapshot and restore free (0 s)", 1.25, 2.0),
            row("state unsaveable for 0% of sessions", 1.12, 0.3),
        ],
    )
    assert (
        "| ≥ 1.2× against the best open stack (L1c), lower bound ≥ 1.1 | **1.10×** [1.10–1.10]"
        in short
    )
    assert "**no**" in short
    assert "**the costs these model rows remove** (snapshot and restore free (0 s)" in short
    assert "**the sessions whose state cannot be saved** (assumed 10%)" in short
    assert "with state unsaveable for 0% of sessions it is 0.30 per 100 session-h" in short

    bound = goals({**ladder_, "Lb": _rung("Lb", 30), "L4": l4})
    assert "Against L1c: **the notebook side's bound**" in bound
    floor = goals({**ladder_, "F0": _rung("F0", 30), "L4": l4})
    assert "Against L1c: **training's own demand**" in floor
    gap = goals({**ladder_, "L4": l4})
    assert "Against L1c: **what separates L4 from the bound**: L4 closes 70% of the way" in gap
    assert "the bound (Lb) 100%" in gap  # F0 and Lb both meet at the smallest size run


def test_the_headline_is_against_the_better_of_l1_and_l1c() -> None:
    """The best open stack is whichever of L1 and L1c needs fewer GPUs on every level: where
    the culler costs GPUs (L1 meets at 32, L1c at 36), the goals, the multiplier table and the
    open-stack section are against L1, with L1's paired interval; L1c where it is the better."""
    from benchmarks.replay.ladder_report import (
        baselines,
        best_open_rung,
        goals_section,
        multiplier_table,
        open_choice,
    )

    searches = {
        "B0": _rung("B0", 64),
        "L1": _rung("L1", 32),
        "L1c": _rung("L1c", 36),
        "L4": _rung("L4", 26),
    }
    full = LEVELS.limits()
    assert best_open_rung(searches, full) == "L1"
    assert baselines("L1") == ("B0", "B1", "B1o", "L1")
    ms = capacity.bootstrap(searches, baselines("L1"), 4, full, resamples=200)
    goals = goals_section(searches, ms, [], LEVELS)
    assert "| ≥ 1.2× against the best open stack (L1), lower bound ≥ 1.1 | **1.23×**" in goals
    table = multiplier_table(searches, ms, "L1")
    assert "× against the best open stack (L1) [95%]" in table
    assert "against L1c" not in table
    choice = open_choice(searches, LEVELS, 4, 200)
    assert "**The best open stack is L1**" in choice
    assert "L1 32.0, L1c 36.0" in choice
    assert "L1 against L1c: **1.12×** [1.12–1.12]" in choice
    # The other way round, and a tie goes to L1 (no culler to run).
    assert best_open_rung({**searches, "L1c": _rung("L1c", 29)}, full) == "L1c"
    assert best_open_rung({**searches, "L1c": _rung("L1c", 32)}, full) == "L1"
    assert best_open_rung({"B0": searches["B0"]}, full) is None


def test_the_page_header_says_what_the_command_ran() -> None:
    """The header names only the parts the command ran: the default runs the organisation
    family, not the model rows, the sweep, the frontier or the dual; --quick only the ladder."""
    from benchmarks.replay.cli import parse
    from benchmarks.replay.ladder_report import ran_line

    default = ran_line(parse([]), 2450, 0)
    assert default == (
        "2450 replays of the rungs as searched, and those of the organisation family's"
        " searches (notebook-heavy, balanced, training-bound)"
    )
    for part in ("frontier", "dual", "model", "sweep"):
        assert part not in default
    assert "the model's sensitivity rows" in ran_line(parse(["--models"]), 9, 0)
    assert ran_line(parse(["--quick"]), 90, 0) == "90 replays of the rungs as searched"
    both = ran_line(parse(["--quick", "--frontier", "--dual"]), 90, 3)
    assert both.endswith("L1c's other 2 idle-culler timeouts, the dual and the culler frontier")
    one = ran_line(parse(["--quick", "--family", "notebook-heavy"]), 90, 0)
    assert one.endswith("and those of the organisation family's searches (notebook-heavy)")


def test_the_page_header_says_how_it_was_generated() -> None:
    """Seeds, days, burn-in, splits, refinement and the intervals' resamples, where the page
    begins; --quick says what it leaves out."""
    from benchmarks.replay.cli import parse
    from benchmarks.replay.ladder_report import quick_note

    note = quick_note(parse(["--seeds", "6"]), list(range(1, 7)))
    assert "6 seeds (seeds 1-6), each 1 measured day after a 24 h burn-in" in note
    assert "refined to one GPU" in note
    assert "95% bootstrap" in note
    assert "2000 resamples" in note
    assert "--quick" not in note
    args = parse(["--quick"])
    args.days, args.burn_in_h, args.resamples = 0.5, 12.0, 200
    quick = quick_note(args, [1, 2, 3])
    assert quick.startswith("\n**Generated with `--quick`**: 3 seeds (seeds 1-3), each 0.5")
    assert "not refined" in quick


def test_the_replay_chooses_the_advice_rule_that_needs_fewer_gpus() -> None:
    """L4 advises from the need on the ladder; its model row with the largest peak × 1.25
    needs more GPUs here: the page chooses the need, with the paired interval; the other way
    round it chooses the peak."""
    from benchmarks.replay.ladder_report import (
        PEAK_ADVICE,
        ModelResult,
        ModelRow,
        advice_choice,
    )
    from benchmarks.replay.sim import KeptState

    def peak(gpus: int) -> ModelResult:
        search = _rung("L4", gpus, 0.4, advice_oversize=2.9, ways_up_per_100h=0.1)
        return ModelResult(ModelRow(PEAK_ADVICE, "L4", ()), search, None, 0.4)

    ladder_ = {"L4": _rung("L4", 29, 0.5, advice_oversize=1.4, ways_up_per_100h=2.0)}
    need = advice_choice(ladder_, [peak(32)], LEVELS, KeptState(), 200)
    assert "| from the need | 29.0 | 1.40 | 2.00 | 0.50 |" in need
    assert "| from the largest peak | 32.0 | 2.90 | 0.10 | 0.40 |" in need
    assert "The replay chooses the advice **from the need**" in need
    assert "**1.10×** [1.10–1.10] (4 seeds)." in need  # the peak's GPUs ÷ the need's
    worse = advice_choice(ladder_, [peak(26)], LEVELS, KeptState(), 200)
    assert "The replay chooses the advice **from the largest peak**" in worse
    assert "(not run" in advice_choice(ladder_, [], LEVELS, KeptState(), 200)


def test_the_duals_multipliers_divide_demands_served_rung_by_baseline() -> None:
    """L2 serves 1× the organisation's demand, B1 0.5×: L2 serves 2× B1's. Where a resample of
    B1 serves less than the grid's least demand, the interval has no upper end (∞), never a
    negative or zero one."""

    def served(name: str, up_to: Sequence[float]) -> Search:
        sizes = {
            capacity.demand_key(x): {
                0.5: [{**_runs(30.0 * x / d)[0], "seed": i} for i, d in enumerate(up_to)]
            }
            for x in capacity.DEMAND_GRID
        }
        return Search(name, sizes)

    limits = LEVELS.limits()
    both = {"L2": served("L2", [1.0] * 4), "B1": served("B1", [0.5] * 4)}
    (m,) = [
        m
        for m in capacity.bootstrap(both, ["B1"], 4, limits, measure=capacity.per_demand)
        if m.rung == "L2"
    ]
    assert m.value == pytest.approx(2.0, rel=0.01)
    assert [m.low, m.high] == pytest.approx([2.0, 2.0], rel=0.01)

    short = {"L2": both["L2"], "B1": served("B1", [0.5, 0.5, 0.5, 0.1])}  # seed 4: < 0.4×
    (m,) = [
        m
        for m in capacity.bootstrap(short, ["B1"], 4, limits, measure=capacity.per_demand)
        if m.rung == "L2"
    ]
    assert m.low == pytest.approx(2.0, rel=0.01)
    assert math.isinf(m.high)
    assert m.high > 0
    from benchmarks.replay.ladder_report import _multiplier

    assert _multiplier(replace(m, value=2.1)) == "**2.10×** [2.00–∞]"

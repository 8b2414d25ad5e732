"""The organisation family's page: every day counted (per-seed capacities, the median day's
multiplier and share of the way to the floor, the worst day), the best open stack and the
product chosen on every level, and the goals said met or missed."""

from __future__ import annotations

import math

import pytest

from benchmarks.replay import family
from benchmarks.replay.capacity import Levels, Search
from benchmarks.replay.organisations import load

SIZES = range(10, 61)


def _search(rung: str, needs: list[float], *, starving: list[float] | None = None) -> Search:
    """A rung whose day k meets the levels from ``needs[k]`` GPUs (the p90 falls as 1/g²);
    with ``starving``, its GPU-hour-weighted mean meets them only from those sizes."""
    search = Search(rung)
    for g in SIZES:
        runs = []
        for k, need in enumerate(needs):
            weighted = 30.0 * ((starving[k] if starving else need) / g) ** 2
            runs.append(
                {
                    "seed": k + 1,
                    "wait_p90_min": 30.0 * (need / g) ** 2,
                    "wait_gpu_hour_weighted_mean_min": weighted,
                    "jobs_never_admitted": 0,
                }
            )
        search.sizes[g] = {0.5: runs}
    return search


def _result(org: str, searches: dict[str, Search]) -> family.OrgResult:
    return family.OrgResult(
        org,
        load(org).description,
        searches,
        [1, 2, 3],
        day_demand={1: (400.0, 100.0), 2: (700.0, 90.0), 3: (380.0, 110.0)},
    )


def test_every_day_counts_the_median_and_the_worst() -> None:
    limits = Levels().limits()
    searches = {
        "L1": _search("L1", [40.0, 50.0, 30.0]),
        "L4": _search("L4", [20.0, 45.0, 20.0]),
        "F0": _search("F0", [16.0, 44.0, 14.0]),
    }
    result = _result("balanced", searches)
    assert family.per_seed(searches["L4"], 3, limits) == pytest.approx([20, 45, 20], abs=0.1)
    day = family.days(result, "L1", "L4", limits, resamples=200)
    # Per day L1 ÷ L4: 2.0, 1.11, 1.5: the median day is 1.5.
    assert day.median_multiplier == pytest.approx(1.5, abs=0.01)
    assert day.low <= day.median_multiplier <= day.high
    # Of the way to the floor: 20/24, 5/6, 10/16: the median 0.83.
    assert day.median_way == pytest.approx(5 / 6, abs=0.01)
    assert day.worst_seed == 2
    assert day.worst_product == pytest.approx(45, abs=0.1)
    assert day.worst_floor == pytest.approx(44, abs=0.1)


def test_a_stack_that_starves_large_jobs_is_not_the_best_open_stack() -> None:
    """L1t meets the p90 on fewer GPUs than L1, but its large Jobs wait: on every level (the
    large-Job level included) L1 is the best open stack."""
    limits = Levels().limits()
    searches = {
        "L1": _search("L1", [40.0, 40.0, 40.0]),
        "L1t": _search("L1t", [30.0, 30.0, 30.0], starving=[50.0, 50.0, 50.0]),
    }
    assert family.best_of(searches, family.OPEN_STACKS, limits) == "L1"
    p90_only = {k: v for k, v in limits.items() if k != "wait_gpu_hour_weighted_mean_min"}
    assert family.best_of(searches, family.OPEN_STACKS, p90_only) == "L1t"


def test_the_page_names_the_worst_day_and_says_each_goal_met_or_missed() -> None:
    searches = {
        "B0": _search("B0", [60.0, 60.0, 60.0]),
        "L1": _search("L1", [40.0, 50.0, 30.0]),
        "L4": _search("L4", [20.0, 45.0, 20.0]),
        "F0": _search("F0", [16.0, 44.0, 14.0]),
    }
    text = family.family_section([_result("notebook-heavy", searches)], Levels(), 200)
    assert "**The worst day** is seed 2" in text
    assert "700 GPU-hours that day against a median of 400" in text
    assert "| 2 (worst) |" in text
    # L1 ÷ L4 on all days is 40 ÷ 28.3: far below 2.5×, and B0 ÷ L4 below 5×.
    goals = text.split("##### The family's goals")[1]
    assert goals.count("**no**") == 3  # 2.5× the open stack, 5× B0, 85% of the way
    assert "(The diagnosis: the product meets the levels at no size run.)" in text


def test_a_day_beyond_the_sizes_run_is_shown_as_such() -> None:
    search = _search("L4", [20.0, 80.0, 9.0])
    values = family.per_seed(search, 3, Levels().limits())
    assert math.isinf(values[1])
    assert family._cap_cell(search, values[1]) == "> 60"
    assert family._cap_cell(search, values[2]) == "≤ 10"


def test_a_missed_day_goal_says_the_ceiling_and_what_binds() -> None:
    """Training-bound: the product's median day is below 1.15× the open stack, and training
    alone is itself only ~1.1× it: the page says so (the most any notebook-side lever could
    reach) and names what binds; the worst day is a goal row with its figures."""
    searches = {
        "B0": _search("B0", [60.0, 60.0, 60.0]),
        "L1": _search("L1", [40.0, 50.0, 30.0]),
        "L4": _search("L4", [38.0, 47.0, 29.0]),
        "F0": _search("F0", [36.0, 45.0, 27.0]),
    }
    text = family.family_section([_result("training-bound", searches)], Levels(), 200)
    goals = text.split("##### The family's goals")[1]
    row = next(line for line in goals.splitlines() if "≥ 1.15×" in line)
    assert row.endswith("| **no** |")
    assert "training alone (F0) is only 1.11× L1 on the median day" in row
    assert "what binds: training wait p90" in row
    worst = next(line for line in goals.splitlines() if "worst day named" in line)
    assert "seed 2: L4 47.0 GPUs, L1 50.0, training alone (F0) 45.0" in worst


def test_the_diagnosis_is_recomputed_from_the_events_alone() -> None:
    """The page's diagnosis of a run (GPU-hours by what holds the cards) comes back from its
    events file: a TAS rung at a size where Jobs wait for a node."""
    import io

    from benchmarks.replay import capacity, recompute
    from benchmarks.replay.capacity import RunSpec
    from benchmarks.replay.sim import HOLDINGS

    run = RunSpec(org="dgx-4", rung="L1t", gpus=24, seed=5, days=0.5, burn_in_h=12.0)
    page = family.diagnose_run(run)
    out = io.StringIO()
    capacity.simulate_run(run, events=out)
    again = recompute.diagnosis(recompute.read(out.getvalue().splitlines()))
    assert page["free_job_waits"] > 0
    assert page["training"] > 0
    for k in HOLDINGS:
        assert again[k] == pytest.approx(page[k], rel=1e-6, abs=1e-6), k
    # Every card's every hour is held by something: the capacity × the window.
    assert sum(again.values()) == pytest.approx(24 * 12.0, rel=1e-6)


def test_a_lever_sets_idle_after_when_kept_in_every_policy() -> None:
    from benchmarks.replay import levers
    from benchmarks.replay.run import DEFAULT_POLICY

    text = levers.policy_text(DEFAULT_POLICY.read_text(encoding="utf-8"), "5m")
    values = [
        line.split(":", 1)[1].split("#")[0].strip()
        for line in text.splitlines()
        if line.strip().startswith("idle_after_when_kept:")
    ]
    idle_afters = [line for line in text.splitlines() if line.strip().startswith("idle_after:")]
    assert values == ["5m"] * len(idle_afters)
    assert text.startswith("snapshot_timeout: 0s")


def test_the_page_says_which_lever_suits_the_organisation() -> None:
    """A variant that meets one GPU below needs fewer GPUs and becomes the setting; one that
    changes nothing is said to change nothing; binpack is named as the only packing modelled."""
    from benchmarks.replay.levers import LeverResult

    searches = {
        "B0": _search("B0", [60.0, 60.0, 60.0]),
        "L1": _search("L1", [40.0, 50.0, 30.0]),
        "L4t": _search("L4t", [20.0, 45.0, 20.0]),
    }
    result = _result("balanced", searches)
    result.lever_seeds = 3
    below = {"wait_p90_min": 20.0, "wait_gpu_hour_weighted_mean_min": 25.0}
    result.levers = [
        LeverResult("idle_after_when_kept: 5m", 30, True, True, below),
        LeverResult("idle_after_when_kept: 30m", 30, False, True, below),
        LeverResult("advice from the largest of the last peaks × 1.25", 30, False, False, below),
    ]
    text = family.family_section([result], Levels(), 200)
    assert "| idle_after_when_kept: 5m | 20.0 / 25.0 / – | fewer GPUs" in text
    assert "| idle_after_when_kept: 30m |" in text
    assert "changes nothing at one GPU's resolution" in text
    assert "more GPUs: misses a level at the product's size" in text
    assert "the policy file sets `idle_after_when_kept: 5m`" in text
    assert "advises from the typical need (as shipped)" in text
    assert "packed `binpack`" in text
    # Where the shipped product also meets one GPU below on these seeds, a variant that meets
    # there gains nothing: it is not chosen.
    result.levers = [
        LeverResult("as shipped", 30, True, True, below, True, True),
        LeverResult("idle_after_when_kept: 5m", 30, True, True, below, True, True),
    ]
    text = family.family_section([result], Levels(), 200)
    assert "| idle_after_when_kept: 5m | 20.0 / 25.0 / – | changes nothing" in text
    assert "`idle_after_when_kept: 15m` (as shipped: no variant tried needs fewer GPUs)" in text

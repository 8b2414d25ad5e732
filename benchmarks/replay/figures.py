"""The replay page's figures, from the searches the page's tables come from: the ladder
(each rung's effective capacity and its multipliers against B0 and the best open stack, with
their 95% intervals), the culler frontier, and the sensitivity to users per GPU and to memory
need.

Each figure is an SVG file the page links (``docs/images/replay/``), written by :mod:`.plots`."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import capacity, ladder, plots
from .capacity import Levels, Multiplier, Search
from .metrics import mean_ci
from .plots import Point, Series

FIGURE_BASELINES = ("B0", "L1c")
"""The multipliers figure's baselines unless the caller names them (the page: B0 and the best
open stack, whichever of L1 and L1c it is)."""


@dataclass(frozen=True)
class Frontier:
    """One culler setting of the frontier: its label, which culler, its search."""

    label: str
    culler: str
    """``idle-culler`` or ``gpuaas``."""
    search: Search


def capacity_point(search: Search, seeds: int, levels: Levels, resamples: int) -> Point:
    """A rung's effective capacity with its bootstrap interval: on all levels, else (hollow)
    on the training and spawn levels alone."""
    for limits, hollow in ((levels.limits(), False), (levels.limits(interruptions=False), True)):
        value = search.capacity(limits)
        if math.isfinite(value):
            low, high = capacity.interval(search, seeds, limits, resamples=resamples)
            return Point(value, low, high, hollow=hollow)
    return Point(math.nan, math.nan, math.nan)


def _multiplier_point(strict: Multiplier | None, relaxed: Multiplier | None) -> Point:
    for m, hollow in ((strict, False), (relaxed, True)):
        if m is not None and math.isfinite(m.value) and m.value > 0:
            return Point(m.value, m.low, m.high, hollow=hollow)
    return Point(math.nan, math.nan, math.nan)


def ladder_figures(
    searches: Mapping[str, Search],
    multipliers: Sequence[Multiplier],
    relaxed: Sequence[Multiplier],
    seeds: int,
    levels: Levels,
    resamples: int,
    baselines: Sequence[str] = FIGURE_BASELINES,
) -> dict[str, str]:
    hollow_note = (
        "open marker: meets the training and spawn levels only (no size run meets the"
        " interruption level)"
    )
    rungs = list(searches)
    caps = [
        (
            f"{r}  {ladder.RUNGS[r].text}",
            [capacity_point(searches[r], seeds, levels, resamples)],
        )
        for r in rungs
    ]
    out = {
        "ladder": plots.intervals(
            "Effective capacity per rung (95% bootstrap interval)",
            "GPUs of the training pools meeting the service levels",
            caps,
            ["effective capacity"],
            note=hollow_note,
        )
    }
    strict = {(m.rung, m.baseline): m for m in multipliers}
    loose = {(m.rung, m.baseline): m for m in relaxed}
    bases = [b for b in baselines if b in searches]
    if bases:
        rows = [
            (r, [_multiplier_point(strict.get((r, b)), loose.get((r, b))) for b in bases])
            for r in rungs
        ]
        out["multipliers"] = plots.intervals(
            "Multipliers (paired bootstrap 95% interval)",
            "× fewer GPUs than the baseline",
            rows,
            [f"against {b}" for b in bases],
            reference=1.0,
            note=hollow_note,
        )
    return out


def frontier_figure(
    settings: Sequence[Frontier], seeds: int, levels: Levels, resamples: int
) -> str:
    """Capacity (training and spawn levels) against the sessions interrupted at that size,
    one series per culler."""
    relaxed = Levels(levels.training_p90_min, levels.spawn_p90_min, math.inf)
    limits = relaxed.limits()
    series: list[Series] = []
    errors: list[list[Point]] = []
    for culler in sorted({s.culler for s in settings}, key=lambda c: c != "idle-culler"):
        xs: list[float] = []
        points: list[Point] = []
        x_err: list[Point] = []
        for s in (s for s in settings if s.culler == culler):
            size = s.search.meeting_size(limits)
            if size is None:
                continue
            runs = s.search.sizes[size][s.search.best_split(size, limits)]
            mean, half = mean_ci(float(x["interrupted_per_100h"]) for x in runs)
            half = 0.0 if math.isnan(half) else half
            cap = capacity_point(s.search, seeds, relaxed, resamples)
            xs.append(mean)
            points.append(Point(cap.value, cap.low, cap.high, label=s.label))
            x_err.append(Point(mean, max(0.0, mean - half), mean + half))
        series.append(Series(culler, xs, points))
        errors.append(x_err)
    return plots.xy(
        "The culler frontier on L1",
        "active sessions interrupted per 100 session-hours (at the capacity size)",
        "GPUs meeting training + spawn levels",
        series,
        x_errors=errors,
        labels=True,
        note="lower left is better; bars: 95% intervals (capacity: bootstrap; interruptions:"
        " over the seeds)",
    )


def sensitivity_figure(
    title: str,
    axis: str,
    points: Sequence[tuple[float, Mapping[str, Search], int]],
    levels: Levels,
    resamples: int,
) -> str:
    """Each rung's capacity (training and spawn levels) along one demand figure: ``points``
    are (the figure's value, the searches there, their seeds)."""
    relaxed = Levels(levels.training_p90_min, levels.spawn_p90_min, math.inf)
    ordered = sorted(points, key=lambda p: p[0])
    rungs = list(ordered[0][1]) if ordered else []
    series = [
        Series(
            r,
            [value for value, _s, _n in ordered],
            [capacity_point(s[r], n, relaxed, resamples) for _v, s, n in ordered],
        )
        for r in rungs
    ]
    return plots.xy(
        title,
        axis,
        "GPUs meeting training + spawn levels",
        series,
        note="bars: paired bootstrap 95% intervals over the seeds",
    )

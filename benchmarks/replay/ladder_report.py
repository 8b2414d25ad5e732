"""``python -m benchmarks replay --org NAME``: the ladder's effective capacity, its multipliers
with paired bootstrap intervals, each rung at its own service-level size, and the page."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import resource
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import brain, capacity, family, figures, ladder
from .capacity import Levels, Multiplier, RunSpec, Search
from .metrics import mean_ci
from .organisations import OrgSpec
from .sim import (
    RESTORE_REQUEST_S,
    RESTORE_S_PER_GIB,
    SAVE_S_PER_GIB,
    STATE_GIB,
    KeptState,
)
from .trace import PARAMETERS, TRACE_VERSION
from .world import REPO

DOCS = REPO / "docs" / "replay.md"
FIGURES = REPO / "docs" / "images" / "replay"
"""The page's SVG figures, written with it (every ``*.svg`` there is the page's)."""
TEMPLATE = Path(__file__).with_name("ladder.md.in")
PAGE_SPLITS = Path(__file__).with_name("page-splits.json")
"""The split each rung ran at each size the page's searches ran, written with the page, so
that ``--events --rung R --size N`` replays a rung as the page sized it."""
PARTITIONS = ("B0", "B1", "B1o")
"""The multipliers' baselines besides the best open stack: per-user reservations and the two
partitions (per team and organisation-wide)."""
OPEN_STACKS = ("L1", "L1c", "L1t", "L1s", "L1p")
"""The rungs the best open stack is chosen from: Kueue's org-wide cohort alone, and with
jupyterhub-idle-culler at its best timeout."""
OPEN = "open"
"""A goal's baseline that stands for the best open stack (:func:`best_open_rung`)."""
DEFAULT_SEEDS = 5
"""The seeds (measured days) by default: the family's product runs (the product's own loop
every 30 s of two simulated days, 5-25 s of CPU each on a cluster too small for its demand)
take one organisation about 10 min of CPU at 6 seeds, so that the three organisations on 10
seeds would take the command far beyond its 20-min budget on the project's 2 cores; the
intervals say how few the days are. ``--seeds 10`` for narrower ones."""
DEFAULT_LEVER_SEEDS = 3
"""The seeds each organisation's product tries its levers on (its dearest runs)."""
QUICK = {"seeds": 3, "days": 0.5, "burn_in_h": 12.0, "resamples": 200}
QUICK_TIMEOUTS_MIN = (60.0, 120.0, 240.0)
"""``--quick``'s idle-culler timeouts for L1c (the grid's every other point); ``--quick`` also
leaves the brackets unrefined."""
SWEEP: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("users_per_gpu", "notebook users per GPU", (0.5, 2.0, 3.0)),
    ("gpu_memory_median_gib", "median GPU-memory need (GiB)", (4.0, 16.0)),
    ("training_offered_load", "training offered load", (0.4, 0.9)),
    ("gpu_memory_within_user", "within-user share of the need's spread", (0.0, 1.0)),
)
"""The sensitivity sweep (``--sweep``): each figure moved alone from the organisation's."""
DEFAULT_SWEEP: tuple[str, ...] = ()
"""The rows the default command sweeps (all with ``--sweep``): none, to keep it within its
time budget with the organisation family on the shared machine."""
SWEEP_RUNGS = ("B1", "L1i", "L2")
DUAL_RUNGS = ("B1", "L1i", "L2", "L3")
"""The rungs of the dual (the demand a fixed cluster serves); the first two are its baselines."""
FRONTIER_IDLE_MIN = (30.0, 60.0, 120.0, 240.0)
"""jupyterhub-idle-culler timeouts on the culler frontier (L1i)."""
FRONTIER_GPUAAS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("as shipped", ()),
    ("idle_after 10m", (("idle_after: 30m", "idle_after: 10m"),)),
    ("warn_before 0s", (("warn_before: 15m", "warn_before: 0s"),)),
    (
        "idle_after 10m, warn_before 0s",
        (("idle_after: 30m", "idle_after: 10m"), ("warn_before: 15m", "warn_before: 0s")),
    ),
)
"""gpuaas policy variants on the culler frontier (L1g): the policy file with these edits."""
"""``--quick``: for tests and a first look (a few minutes at most on two cores)."""

AT_SIZE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("allocation_share", "allocated", "pct"),
    ("busy_share", "busy (GPU work ÷ capacity)", "pct"),
    ("wait_p90_min", "training wait p90 (min)", "num"),
    ("wait_gpu_hour_weighted_mean_min", "training wait, GPU-hour-weighted mean (min)", "num"),
    ("spawn_wait_p90_min", "notebook spawn wait p90 (min)", "num"),
    ("interrupted_per_100h", "active sessions interrupted (state lost) per 100 session-h", "num"),
    ("moved_per_100h", "(L4) sessions moved with their state per 100 session-h", "num"),
    ("restore_wait_p90_min", "(L4) restore wait p90 (min)", "num"),
    ("share_slowdown", "burst slowdown on shares (extra ÷ burst time)", "pct"),
    ("advice_oversize", "advised share ÷ the share the need fits (memory)", "num"),
    ("ways_up_per_100h", "ways up (kernel beyond its cap) per 100 session-h", "num"),
    ("jobs_unplaceable", "Jobs admitted on quota but unplaceable (no whole free card)", "num"),
    ("unplaced_job_gpu_h", "GPU-hours of quota held by unplaceable Jobs", "num"),
)


def add_arguments(ap: argparse.ArgumentParser) -> None:
    g = ap.add_argument_group("the ladder (every --org but sample)")
    g.add_argument(
        "--rungs",
        default=",".join(family.FAMILY_RUNGS),
        help=f"comma-separated, of: {', '.join(ladder.RUNGS)} (default the family's:"
        f" {','.join(family.FAMILY_RUNGS)}; the others cost the default command's time budget)",
    )
    g.add_argument(
        "--burn-in-h",
        type=float,
        default=None,
        help="hours replayed before the measured window (default 24 for the ladder: training"
        " Jobs run up to 24 h; 6 for sample)",
    )
    g.add_argument(
        "--splits",
        default=",".join(f"{s:g}" for s in ladder.DEFAULT_SPLITS),
        help="notebook shares of each team's GPUs (nominal quota, in a cohort) that B1, B1o, B2"
        " and L1 choose their best from, at each size; B1i keeps B1's, the rungs built on L1"
        " keep L1's (default " + ",".join(f"{s:g}" for s in ladder.DEFAULT_SPLITS) + ")",
    )
    g.add_argument(
        "--users-per-gpu",
        type=float,
        help="notebook users per GPU of the training pools (default: the organisation's)",
    )
    g.add_argument(
        "--training-load",
        type=float,
        help="daytime training offered load ÷ the training pools' GPUs (default: the"
        " organisation's)",
    )
    g.add_argument(
        "--memory-median",
        type=float,
        help="median GPU-memory need of a session, GiB (lognormal; default: the organisation's;"
        " an assumption until measured)",
    )
    g.add_argument(
        "--memory-within",
        type=float,
        help="the within-user share of the need's spread, 0-1 (0: a user's needs repeat; 1:"
        " drawn afresh each session; default: the organisation's, an assumption)",
    )
    g.add_argument(
        "--unsaveable",
        type=float,
        default=KeptState().unsaveable,
        help="L4: the share of sessions whose kernel state cannot be saved (an assumption;"
        f" default {KeptState().unsaveable:g}; the model rows sweep 0-0.5)",
    )
    g.add_argument(
        "--snapshot-s",
        type=float,
        default=KeptState().snapshot_s,
        help="L4: seconds a server takes to save its kernels' state before it stops (the GPU"
        f" is freed this much later; default {KeptState().snapshot_s:g}, an assumption)",
    )
    g.add_argument(
        "--restore-s",
        type=float,
        default=KeptState().restore_s,
        help="L4: seconds the new server takes to restore the state before the user goes on"
        f" (default {KeptState().restore_s:g}, an assumption)",
    )
    g.add_argument(
        "--restore-p90-min",
        type=float,
        default=2.0,
        help="service level: the wait from a user's return (or move) to their state back, p90"
        " (L4; default 2)",
    )
    g.add_argument(
        "--models",
        action="store_true",
        help="run the model's sensitivity rows (HAMi's throttling, the share of unsaveable"
        " sessions, the snapshot and restore costs, the advice rule; not by default: they need"
        " L2, L3 and L4 in --rungs and time beyond the default command's budget)",
    )
    g.add_argument(
        "--no-models", action="store_true", help="skip the model's sensitivity rows (the default)"
    )
    g.add_argument(
        "--spawn-p90-min", type=float, default=5.0, help="service level: spawn wait p90 (min)"
    )
    g.add_argument(
        "--max-interrupted",
        type=float,
        default=5.0,
        help="service level: active sessions interrupted per 100 session-hours (default 5:"
        " about once a week for four hours of notebook sessions a day)",
    )
    g.add_argument(
        "--checkpoint-min",
        type=float,
        default=15.0,
        help="training Jobs checkpoint this often; a preemption loses the time since the last"
        " one (0: a preempted Job starts over)",
    )
    g.add_argument(
        "--rung",
        default="L1",
        help="with --events: the rung of the one run (default L1)",
    )
    g.add_argument(
        "--size",
        type=int,
        help="with --events: the training pools' GPUs of the one run (default: the organisation's)",
    )
    g.add_argument(
        "--split",
        type=float,
        help="with --events: the notebook share of the one run (default: the split the page's"
        " search ran that rung on at that size, from benchmarks/replay/page-splits.json)",
    )
    g.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the seeds")
    g.add_argument(
        "--sweep",
        action="store_true",
        help="run the whole sensitivity sweep, even with --quick: the capacity of "
        + ", ".join(SWEEP_RUNGS)
        + " with users per GPU, memory need, training load and the need's within-user"
        " spread moved one at a time (not by default, to keep the default command within its"
        " time budget; --no-sweep: none)",
    )
    g.add_argument(
        "--sweep-seeds",
        type=int,
        default=5,
        help="seeds of each point of the sweep, of the dual, of the culler frontier and of"
        " the model's sensitivity rows (the first this many of the ladder's; default 5)",
    )
    g.add_argument(
        "--frontier",
        action="store_true",
        help="run the culler frontier (not by default, to keep the default command near its"
        " time budget; L1c's timeout table has the idle-culler's side): capacity against"
        " interrupted sessions for idle-culler's timeout and gpuaas's idle_after and"
        " warn_before",
    )
    g.add_argument("--no-frontier", action="store_true", help="skip the culler frontier")
    g.add_argument(
        "--dual",
        action="store_true",
        help="run the dual (not by default, to keep the default command within its time"
        " budget): the largest demand (users per GPU and training load × a factor) that "
        + ", ".join(DUAL_RUNGS)
        + " serve within the service levels on the organisation's own cluster",
    )
    g.add_argument("--no-dual", action="store_true", help="skip the dual (the default)")
    g.add_argument(
        "--quick",
        action="store_true",
        help="3 seeds, half-day window after 12 h, 200 resamples: for tests and a first look"
        " (no family section unless --family names its organisations)",
    )
    g.add_argument(
        "--family",
        default=None,
        help="comma-separated organisations of the family section, each searched on"
        " --family-rungs (default " + ",".join(family.FAMILY) + "; with --quick none;"
        " 'none' skips it)",
    )
    g.add_argument(
        "--lever-seeds",
        type=int,
        default=None,
        help="seeds (the first this many) on which each organisation's product tries its levers"
        " at its size and one GPU below (idle_after_when_kept, the advice rule; 0: none;"
        f" default {DEFAULT_LEVER_SEEDS}; with --quick none unless given)",
    )
    g.add_argument(
        "--family-rungs",
        default=",".join(family.FAMILY_RUNGS),
        help="the family's rungs (default " + ",".join(family.FAMILY_RUNGS) + ")",
    )


def _split_list(text: str) -> list[float]:
    return [float(s) for s in text.split(",") if s.strip()]


def _demand(args: argparse.Namespace) -> tuple[tuple[str, float], ...]:
    changes = {
        "users_per_gpu": args.users_per_gpu,
        "training_offered_load": args.training_load,
        "gpu_memory_median_gib": args.memory_median,
        "gpu_memory_within_user": args.memory_within,
    }
    return tuple((k, float(v)) for k, v in changes.items() if v is not None)


def _fmt(value: float, kind: str, half: float = math.nan) -> str:
    if math.isnan(value):
        return "–"
    if math.isinf(value):
        return "none"
    if kind == "pct":
        text = f"{100 * value:.0f}%"
        return text if math.isnan(half) else f"{text} ± {100 * half:.0f}"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    text = f"{value:.{digits}f}"
    return text if math.isnan(half) else f"{text} ± {half:.{digits}f}"


def _multiplier(m: Multiplier | None) -> str:
    if m is None or math.isnan(m.value):
        return "–"
    if math.isinf(m.value) or m.value == 0:
        return "– (one side meets at no size run)"
    return f"**{m.value:.2f}×** [{_bound(m.low)}–{_bound(m.high)}]"


def _bound(x: float) -> str:
    """An interval's end; ∞ where a resample's other side meets at no size (or, in the dual,
    serves less than the grid's least demand)."""
    return "∞" if math.isinf(x) else f"{x:.2f}"


def best_open_rung(searches: Mapping[str, Search], limits: Mapping[str, float]) -> str | None:
    """The best open stack: of L1 (the cohort, no culler), L1c (with jupyterhub-idle-culler
    at its best timeout), L1t (with Kueue's TAS), L1s (TAS and StrictFIFO training queues) and
    L1p (TAS, large Jobs first), the one that needs the fewest GPUs while meeting ``limits``
    (the first on a tie: fewer parts to run); None where none ran. Chosen on the point
    estimates."""
    present = [r for r in OPEN_STACKS if r in searches]
    if not present:
        return None

    def need(rung: str) -> float:
        got = searches[rung].capacity(limits)
        return math.inf if math.isnan(got) else got

    return min(present, key=lambda r: (need(r), OPEN_STACKS.index(r)))


def baselines(open_rung: str | None) -> tuple[str, ...]:
    """The multipliers' baselines: the partitions, then the best open stack (where run)."""
    return PARTITIONS + ((open_rung,) if open_rung else ())


def open_name(open_rung: str) -> str:
    """How the page names the best open stack: "the best open stack (L1)"."""
    return f"the best open stack ({open_rung})"


def open_choice(searches: Mapping[str, Search], levels: Levels, seeds: int, resamples: int) -> str:
    """Which of L1 and L1c is the best open stack, their GPUs on every level and the paired
    interval of the other against it."""
    full = levels.limits()
    chosen = best_open_rung(searches, full)
    if chosen is None:
        return "(L1 and L1c not run: `--rungs`)"
    present = [r for r in OPEN_STACKS if r in searches]
    needs = ", ".join(f"{r} {_fmt(searches[r].capacity(full), 'num')}" for r in present)
    text = (
        f"**The best open stack is {chosen}**, the one of {' and '.join(present)} that needs"
        f" the fewer GPUs while meeting every level ({needs}; chosen on the point estimates):"
        " the headline's multipliers and the goals are against it."
    )
    other = next((r for r in present if r != chosen), None)
    if other is None:
        return text
    (m,) = [
        x
        for x in capacity.bootstrap(
            {chosen: searches[chosen], other: searches[other]},
            [other],
            seeds,
            full,
            resamples=resamples,
        )
        if x.rung == chosen
    ]
    return text + f" {chosen} against {other}: {_multiplier(m)}."


def capacity_table(
    searches: Mapping[str, Search], levels: Levels, spec: OrgSpec
) -> tuple[str, dict[str, float], dict[str, float]]:
    full = levels.limits()
    relaxed = levels.limits(interruptions=False)
    caps = {r: s.capacity(full) for r, s in searches.items()}
    caps_relaxed = {r: s.capacity(relaxed) for r, s in searches.items()}
    lines = [
        "| rung | what | GPUs meeting all levels | GPUs meeting training + spawn levels |"
        " of the way from L1 to the floor (F0) |",
        "|---|---|---|---|---|",
    ]
    for r in searches:
        lines.append(
            f"| {r} | {ladder.RUNGS[r].text} | {_fmt(caps[r], 'num')} |"
            f" {_fmt(caps_relaxed[r], 'num')} | {_way(caps, r)} |"
        )
    del spec
    return "\n".join(lines), caps, caps_relaxed


def way_to_floor(caps: Mapping[str, float], rung: str) -> float:
    """The share of the way from L1's effective capacity to the training-alone floor (F0's)
    that ``rung`` closes (nan where one is missing or infinite)."""
    top, floor, got = caps.get("L1", math.nan), caps.get("F0", math.nan), caps.get(rung, math.nan)
    if not all(math.isfinite(x) for x in (top, floor, got)) or top <= floor:
        return math.nan
    return (top - got) / (top - floor)


def _way(caps: Mapping[str, float], rung: str) -> str:
    x = way_to_floor(caps, rung)
    return "–" if math.isnan(x) else f"{100 * x:.0f}%"


def bounds_line(searches: Mapping[str, Search], levels: Levels) -> str:
    """The two bounds in one sentence: training alone, and a GPU only while a cell runs."""
    full = levels.limits()
    parts = []
    if "F0" in searches:
        parts.append(
            f"the training-alone floor (F0: the notebook sessions removed) is"
            f" **{_fmt(searches['F0'].capacity(full), 'num')}** GPUs"
        )
    if "Lb" in searches:
        parts.append(
            f"the bound of any notebook-side lever (Lb: a GPU only while a cell runs, no"
            f" restore cost) **{_fmt(searches['Lb'].capacity(full), 'num')}**"
        )
    if not parts:
        return "(the bounds F0 and Lb not run: `--rungs`)"
    return "Bounds: " + "; ".join(parts) + "."


def resolution_table(
    searches: Mapping[str, Search], levels: Levels, seeds: int, resamples: int
) -> str:
    """The rungs in order of effective capacity (every level), each against the next: the
    paired bootstrap interval of their ratio, and whether these seeds tell them apart (the
    interval leaves out 1)."""
    full = levels.limits()
    caps = {r: s.capacity(full) for r, s in searches.items()}
    ranked = sorted((r for r in caps if math.isfinite(caps[r])), key=lambda r: -caps[r])
    lines = [
        "| rung | next (fewer GPUs) | GPUs | × [95%] | told apart |",
        "|---|---|---|---|---|",
    ]
    for a, b in itertools.pairwise(ranked):
        (m,) = [
            m
            for m in capacity.bootstrap(
                {a: searches[a], b: searches[b]}, [a], seeds, full, resamples=resamples
            )
            if m.rung == b
        ]
        apart = "yes" if m.low > 1.0 or m.high < 1.0 else "**no**: within the seeds' noise"
        lines.append(
            f"| {a} | {b} | {_fmt(caps[a], 'num')} → {_fmt(caps[b], 'num')} |"
            f" {_multiplier(m)} | {apart} |"
        )
    return "\n".join(lines)


def multiplier_table(
    searches: Mapping[str, Search], multipliers: Sequence[Multiplier], open_rung: str | None
) -> str:
    bases = [b for b in baselines(open_rung) if b in searches]
    by = {(m.rung, m.baseline): m for m in multipliers}
    heads = [open_name(b) if b == open_rung else b for b in bases]
    lines = [
        "| rung | " + " | ".join(f"× against {b} [95%]" for b in heads) + " |",
        "|---" * (len(bases) + 1) + "|",
    ]
    for r in searches:
        lines.append(f"| {r} | " + " | ".join(_multiplier(by.get((r, b))) for b in bases) + " |")
    return "\n".join(lines)


def at_size_table(searches: Mapping[str, Search], levels: Levels) -> str:
    """Each rung at the smallest size run that meets all levels (else the training and spawn
    levels), with the split chosen there: mean ± 95% over the seeds."""
    full = levels.limits()
    sizes = {r: own_size(s, levels) for r, s in searches.items()}
    present = list(searches)
    head = [
        f"{r} @ {sizes[r][0]}{sizes[r][1]}" if sizes[r][0] is not None else f"{r} (none)"
        for r in present
    ]
    lines = ["| figure | " + " | ".join(head) + " |", "|---" * (len(present) + 1) + "|"]
    lines.append(
        "| notebook share of each team's GPUs (★ chosen best there, else kept from the parent)"
        " | " + " | ".join(_split_cell(searches[r], sizes[r][0], full) for r in present) + " |"
    )
    for key, label, kind in AT_SIZE_ROWS:
        cells = []
        for r in present:
            g = sizes[r][0]
            if g is None:
                cells.append("–")
                continue
            mean, half = mean_ci(float(x[key]) for x in _runs_at(searches[r], g, levels))
            cells.append(_fmt(mean, kind, half))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append(
        "\n† meets the training and spawn levels only (no size run meets the interruption level)."
    )
    return "\n".join(lines)


def own_size(search: Search, levels: Levels) -> tuple[int | None, str]:
    """A rung's own service-level size: the smallest run that meets all levels, else (marked
    †) the training and spawn levels; None where none does."""
    g = search.meeting_size(levels.limits())
    if g is not None:
        return g, ""
    return search.meeting_size(levels.limits(interruptions=False)), " †"


def _runs_at(search: Search, size: int, levels: Levels) -> list[dict[str, Any]]:
    """The seeds' runs at ``size`` on the split best there."""
    return search.sizes[size][search.best_split(size, levels.limits())]


def _mean_at_own_size(search: Search, levels: Levels, key: str) -> float:
    size, _mark = own_size(search, levels)
    if size is None:
        return math.nan
    return mean_ci(float(x[key]) for x in _runs_at(search, size, levels))[0]


@dataclass(frozen=True)
class Goal:
    """A multiplier goal: ``rung`` against ``baseline`` at least ``point`` on the point
    estimate and, where given, ``low`` at the interval's lower bound."""

    rung: str
    baseline: str
    point: float
    low: float | None = None


GOALS = (Goal("L4", OPEN, 1.2, 1.1), Goal("L4", "B0", 2.3))
"""The goals set for L4 (measured, not tuned): against the best open stack and B0."""
STATE_LOST_GOAL = 1.0
"""At most this many sessions per 100 session-hours lose their kernel state (L4)."""


@dataclass(frozen=True)
class ModelRow:
    """A sensitivity row of the model (not of the demand): a rung searched again with some
    of its run's settings changed."""

    label: str
    rung: str
    changes: tuple[tuple[str, Any], ...]


def model_rows(kept: KeptState) -> tuple[ModelRow, ...]:
    """HAMi's throttling, the share of sessions whose state cannot be saved (0-50%), and the
    snapshot and restore costs."""
    return (
        ModelRow("HAMi throttles a share always", "L3", (("throttle", "always"),)),
        ModelRow("HAMi throttles a share always", "L4", (("throttle", "always"),)),
        *(
            ModelRow(
                f"state unsaveable for {100 * u:g}% of sessions",
                "L4",
                (("kept", replace(kept, unsaveable=u)),),
            )
            for u in UNSAVEABLE_SWEEP
            if u != kept.unsaveable
        ),
        ModelRow(
            "snapshot and restore free (0 s)",
            "L4",
            (("kept", replace(kept, snapshot_s=0.0, restore_s=0.0)),),
        ),
        ModelRow(
            PEAK_ADVICE,
            "L4",
            (("kept", replace(kept, advice_from_need=not kept.advice_from_need)),),
        ),
    )


PEAK_ADVICE = "advice from the largest of the last peaks × 1.25 (L3's rule)"
"""The model row of L4 with the other advice rule (the issue asks the replay to choose)."""


UNSAVEABLE_SWEEP = (0.0, 0.25, 0.5)


@dataclass
class ModelResult:
    row: ModelRow
    search: Search
    multiplier: Multiplier | None
    """Against the best open stack (paired bootstrap on the same seeds)."""
    lost: float
    """Sessions losing state per 100 session-h at its own size."""


def model_table(
    base: RunSpec,
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    searches: Mapping[str, Search],
) -> tuple[str, list[ModelResult]]:
    """Each :func:`model_rows` row: the rung's effective capacity on every level with that
    model, its multiplier against the best open stack (the ladder's, on the same seeds) and
    the sessions that lose their state at its size."""
    levels = settings.levels
    full = levels.limits()
    open_rung = best_open_rung(searches, full)
    guesses = {
        r: searches[r].capacity(levels.limits(interruptions=False))
        for r in ("L3", "L4")
        if r in searches
    }
    guesses = {r: g for r, g in guesses.items() if math.isfinite(g)}
    out: list[ModelResult] = []
    lines = [
        f"| model | rung | GPUs meeting all levels | × against {open_rung or '–'} [95%] | state"
        " lost per 100 session-h at its size | restore wait p90 (min) |",
        "|---|---|---|---|---|---|",
    ]
    for row in model_rows(base.kept):
        if row.rung not in searches:
            continue
        point = replace(base, **dict(row.changes))
        search = capacity.search_all(point, [row.rung], seeds, settings, guesses=guesses)[row.rung]
        m = None
        if open_rung is not None:
            both = {open_rung: _first_seeds(searches[open_rung], len(seeds)), row.rung: search}
            (m,) = [
                x
                for x in capacity.bootstrap(
                    both, [open_rung], len(seeds), full, resamples=settings.resamples
                )
                if x.rung == row.rung
            ]
        size, _mark = own_size(search, levels)
        lost = restore = math.nan
        if size is not None:
            lost = mean_ci(
                float(x["interrupted_per_100h"]) for x in _runs_at(search, size, levels)
            )[0]
            restore = mean_ci(
                float(x.get("restore_wait_p90_min", 0.0)) for x in _runs_at(search, size, levels)
            )[0]
        out.append(ModelResult(row, search, m, lost))
        lines.append(
            f"| {row.label} | {row.rung} | {_fmt(search.capacity(full), 'num')} |"
            f" {_multiplier(m)} | {_fmt(lost, 'num')} | {_fmt(restore, 'num')} |"
        )
    return "\n".join(lines), out


def advice_choice(
    searches: Mapping[str, Search],
    models: Sequence[ModelResult],
    levels: Levels,
    kept: KeptState,
    resamples: int,
) -> str:
    """Which size-advice rule the replay chooses for L4: from the need (the median of the last
    peaks × the headroom) or from the largest (L3's, the form's today): the one that needs
    fewer GPUs on every level, with the paired interval of the two on the model rows' seeds,
    and each rule's advised share ÷ the share the need fits, ways up and lost sessions."""
    row = next((r for r in models if r.row.label == PEAK_ADVICE), None)
    if row is None or "L4" not in searches:
        return "(not run: the model rows or L4 left out)"
    seeds = len(next(iter(next(iter(row.search.sizes.values())).values())))
    full = levels.limits()
    ladder_l4 = _first_seeds(searches["L4"], seeds)
    need_name = "from the need" if kept.advice_from_need else "from the largest peak"
    peak_name = "from the largest peak" if kept.advice_from_need else "from the need"
    (m,) = [
        x
        for x in capacity.bootstrap(
            {"other": row.search, "ladder": ladder_l4}, ["other"], seeds, full, resamples=resamples
        )
        if x.rung == "ladder"
    ]
    lines = [
        "| L4's advice | GPUs meeting all levels | advised ÷ need-fit share | ways up per 100"
        " session-h | state lost per 100 session-h |",
        "|---|---|---|---|---|",
    ]
    caps = {}
    for name, search in ((need_name, ladder_l4), (peak_name, row.search)):
        caps[name] = search.capacity(full)
        cells = [_fmt(caps[name], "num")]
        for key in ("advice_oversize", "ways_up_per_100h", "interrupted_per_100h"):
            cells.append(_fmt(_mean_at_own_size(search, levels, key), "num"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    finite = {k: v for k, v in caps.items() if math.isfinite(v)}
    if not finite:
        verdict = "Neither rule meets every level at a size run: the replay chooses none."
    else:
        best = min(finite, key=lambda k: finite[k])
        told = m.low > 1.0 or m.high < 1.0
        verdict = (
            f"The replay chooses the advice **{best}**: the ladder's rule against the other,"
            f" {_multiplier(m)} ({seeds} seeds)"
            + (
                "."
                if told
                else "; the seeds cannot tell the two apart, so the choice rests on the point"
                " estimates."
            )
        )
    return "\n".join(lines) + "\n\n" + verdict


def _first_seeds(search: Search, n: int) -> Search:
    """``search`` on its first ``n`` seeds (the model rows run the sweep's seeds)."""
    return Search(
        search.rung,
        {g: {s: runs[:n] for s, runs in by.items()} for g, by in search.sizes.items()},
    )


def goals_section(
    searches: Mapping[str, Search],
    multipliers: Sequence[Multiplier],
    relaxed: Sequence[Multiplier],
    levels: Levels,
    models: Sequence[ModelResult] = (),
    kept: KeptState | None = None,
) -> str:
    """Whether L4 meets the goals set for it (against the best open stack and B0, and the sessions
    that lose their state), L3's figures beside it; where a goal is missed, which cost is
    responsible, from the page's own figures: the floor and the bound, the model rows (the
    sessions whose state cannot be saved, the snapshot and restore costs, HAMi's throttling),
    the advice and the placement."""
    del relaxed
    rung = "L4" if "L4" in searches else "L3"
    if rung not in searches:
        return "(L3 and L4 not run: `--rungs`)"
    full = {(m.rung, m.baseline): m for m in multipliers}
    lost = {r: _mean_at_own_size(s, levels, "interrupted_per_100h") for r, s in searches.items()}
    lines, missed = _goal_rows(searches, full, levels, rung)
    lost_met = lost[rung] <= STATE_LOST_GOAL
    lines.append(
        f"| ≤ {STATE_LOST_GOAL:g} session per 100 session-h losing its state (at its size) |"
        f" {_fmt(lost[rung], 'num')} | {_fmt(lost.get('L3', math.nan), 'num')} |"
        f" {'yes' if lost_met else '**no**'} |"
    )
    out = ["\n".join(lines), ""]
    if not missed and lost_met:
        return out[0] + "\n\nEvery goal is met."
    caps = {r: s.capacity(levels.limits()) for r, s in searches.items()}
    why = [
        _why_missed(goal, base, rung, full, searches, caps, levels, models) for goal, base in missed
    ]
    if not lost_met:
        why.append(_why_state_lost(rung, lost[rung], models, kept))
    out.append("Which cost is responsible, from the figures of this page:\n")
    out += [f"- {w}" for w in why] or ["- (no single figure names it)"]
    return "\n".join(out)


def _goal_rows(
    searches: Mapping[str, Search],
    full: Mapping[tuple[str, str], Multiplier],
    levels: Levels,
    rung: str,
) -> tuple[list[str], list[tuple[Goal, str]]]:
    """The goals table's multiplier rows, and the goals missed with the baseline each is
    against (the best open stack resolved to its rung)."""
    lines = [
        f"| goal for {rung} | {rung} measured [95%] | L3 (shipped) [95%] | met |",
        "|---|---|---|---|",
    ]
    open_rung = best_open_rung(searches, levels.limits())
    missed: list[tuple[Goal, str]] = []
    for goal in GOALS:
        baseline = open_rung if goal.baseline == OPEN else goal.baseline
        if baseline is None or baseline not in searches:
            continue
        named = open_name(baseline) if goal.baseline == OPEN else baseline
        m = full.get((rung, baseline))
        met = _goal_met(goal, m)
        if not met:
            missed.append((goal, baseline))
        text = f"≥ {goal.point:g}× against {named}" + (
            f", lower bound ≥ {goal.low:g}" if goal.low is not None else ""
        )
        lines.append(
            f"| {text} | {_multiplier(m)} | {_multiplier(full.get(('L3', baseline)))} |"
            f" {'yes' if met else '**no**'} |"
        )
    return lines, missed


def _goal_met(goal: Goal, m: Multiplier | None) -> bool:
    return (
        m is not None
        and math.isfinite(m.value)
        and m.value >= goal.point
        and (goal.low is None or m.low >= goal.low)
    )


def _why_missed(
    goal: Goal,
    base: str,
    rung: str,
    full: Mapping[tuple[str, str], Multiplier],
    searches: Mapping[str, Search],
    caps: Mapping[str, float],
    levels: Levels,
    models: Sequence[ModelResult],
) -> str:
    """The cost responsible for a missed multiplier goal: training's own demand (the floor
    misses it), the notebook side's bound (Lb misses it), the costs a model row removes, else
    what separates the rung from the bound."""
    floor = full.get(("F0", base))
    bound = full.get(("Lb", base))
    if floor is not None and math.isfinite(floor.value) and floor.value < goal.point:
        return (
            f"Against {base}: **training's own demand**. Even with no notebook at all (F0)"
            f" the multiplier is {_multiplier(floor)}: the goal asks for more than removing"
            " every notebook session would give."
        )
    if bound is not None and math.isfinite(bound.value) and bound.value < goal.point:
        return (
            f"Against {base}: **the notebook side's bound**. A GPU held only while a cell"
            f" runs (Lb, no restore cost) gives {_multiplier(bound)}: no notebook-side lever"
            " reaches the goal here; the rest is training's."
        )
    costs = [
        r
        for r in models
        if r.row.rung == rung
        and r.multiplier is not None
        and math.isfinite(r.multiplier.value)
        and r.multiplier.value >= goal.point
    ]
    if costs:
        named = "; ".join(f"{r.row.label}: {_multiplier(r.multiplier)}" for r in costs)
        return f"Against {base}: **the costs these model rows remove** ({named}) would meet it."
    return (
        f"Against {base}: **what separates {rung} from the bound**: "
        + "; ".join(_gap_parts(rung, searches, caps, levels))
        + ". No single model row closes it."
    )


def _gap_parts(
    rung: str, searches: Mapping[str, Search], caps: Mapping[str, float], levels: Levels
) -> list[str]:
    """What separates ``rung`` from the bound, each cost the page measures that it pays."""
    way_l4, way_lb = way_to_floor(caps, rung), way_to_floor(caps, "Lb")
    parts = [
        f"{rung} closes {_pct(way_l4)} of the way from L1 to the floor, the bound (Lb)"
        f" {_pct(way_lb)}"
    ]
    oversize = _mean_at_own_size(searches[rung], levels, "advice_oversize")
    if oversize > 1.0:
        parts.append(f"its advised share is {oversize:.2f}× the share the need fits")
    slowdown = _mean_at_own_size(searches[rung], levels, "share_slowdown")
    if slowdown > 0:
        parts.append(f"bursts on shares run {100 * slowdown:.0f}% longer (HAMi's limit)")
    unplaceable = _mean_at_own_size(searches[rung], levels, "jobs_unplaceable")
    if unplaceable > 0:
        parts.append(f"{unplaceable:.1f} Jobs a day wait for whole cards on one node")
    return parts


def _why_state_lost(
    rung: str, lost: float, models: Sequence[ModelResult], kept: KeptState | None
) -> str:
    """Why too many sessions lose their state: on L4, the sessions whose state cannot be
    saved where a model row with fewer of them meets the goal; else the rung's own count."""
    clean = [
        r
        for r in models
        if r.row.rung == rung and r.lost <= STATE_LOST_GOAL and "unsaveable" in r.row.label
    ]
    if rung == "L4" and clean:
        return (
            f"Sessions losing state: **the sessions whose state cannot be saved** (assumed"
            f" {100 * (kept or KeptState()).unsaveable:g}%): with {clean[0].row.label} it is"
            f" {_fmt(clean[0].lost, 'num')} per 100 session-h."
        )
    return (
        f"Sessions losing state: {rung} loses {_fmt(lost, 'num')} per 100"
        " session-h (reclaims and ways up of sessions whose state is not kept)."
    )


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{100 * x:.0f}%"


def best_open_stack(
    base: RunSpec,
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    searched: Mapping[str, Search],
    timeouts: Sequence[float] = ladder.OPEN_TIMEOUTS_MIN,
) -> capacity.OpenStack:
    """L1c over the timeout grid, from L1's size and on L1's split there (as L1i)."""
    levels = settings.levels
    guess = None
    inherited = dict(settings.inherited)
    if "L1" in searched:
        size = searched["L1"].meeting_size(levels.limits(interruptions=False))
        if size is not None:
            guess = float(size)
            inherited["L1c"] = searched["L1"].best_split(size, levels.limits(interruptions=False))
    return capacity.search_best_open(
        base, seeds, replace(settings, inherited=inherited), guess=guess, timeouts=timeouts
    )


def open_stack_table(open_stack: capacity.OpenStack | None, levels: Levels) -> str:
    """Each jupyterhub-idle-culler timeout on L1: its GPUs on every level and on the training
    and spawn levels, and the sessions it interrupts at its size; the one chosen for L1c."""
    if open_stack is None:
        return "(L1c not run: `--rungs`)"
    full, relaxed = levels.limits(), levels.limits(interruptions=False)
    lines = [
        "| idle-culler timeout on L1 | GPUs meeting all levels | GPUs meeting training + spawn"
        " levels | interrupted per 100 session-h at the training + spawn size |",
        "|---|---|---|---|",
    ]
    for t, search in open_stack.searches.items():
        size = search.meeting_size(relaxed)
        cell = "–"
        if size is not None:
            runs = _runs_at(search, size, replace(levels, interrupted_per_100h=math.inf))
            mean, half = mean_ci(float(x["interrupted_per_100h"]) for x in runs)
            cell = _fmt(mean, "num", half) + f" @ {size}"
        star = " ★" if t == open_stack.chosen else ""
        lines.append(
            f"| {t:g} min{star} | {_fmt(search.capacity(full), 'num')} |"
            f" {_fmt(search.capacity(relaxed), 'num')} | {cell} |"
        )
    if open_stack.chosen is None:
        lines.append(
            "\nNo timeout meets every level at any size run: L1c is shown at the shortest."
        )
    else:
        lines.append(
            f"\n★ L1c: the {open_stack.chosen:g} min timeout (the fewest"
            " GPUs meeting every level; chosen on the point estimates, so its intervals below"
            " leave the choice out)."
        )
    return "\n".join(lines)


def _split_cell(search: Search, size: int | None, limits: Mapping[str, float]) -> str:
    """The notebook share of a rung at ``size``: ★ where it was chosen there from several,
    else the one it ran (its parent's); – for B0, whose reservations are per user."""
    if size is None or not ladder.RUNGS[search.rung].split_chosen:
        return "–"
    split = search.best_split(size, limits)
    return f"{split:g} ★" if len(search.sizes[size]) > 1 else f"{split:g}"


def sweep_table(
    base: RunSpec,
    spec: OrgSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    guesses: Mapping[str, float] | None = None,
    rows: Sequence[tuple[str, str, tuple[float, ...]]] = SWEEP,
) -> tuple[str, dict[str, list[tuple[float, dict[str, Search]]]]]:
    """Effective capacity of ``rung_names`` with one demand figure moved at a time, and the
    last rung's multipliers against the first and the second (paired bootstrap), on the
    training and spawn levels: of the sweep's rungs only an idle-culler interrupts sessions,
    at a rate no cluster size changes, so that level would only rule its rung out."""
    settings = replace(settings, levels=replace(settings.levels, interrupted_per_100h=math.inf))
    full = settings.levels.limits()
    last = rung_names[-1]
    bases = [b for b in rung_names[:2] if b != last]
    head = [f"{r} GPUs" for r in rung_names] + [f"{last} × against {b}" for b in bases]
    lines = ["| demand | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    d = spec.demand.__dict__
    swept: dict[str, list[tuple[float, dict[str, Search]]]] = {}
    for key, label, values in rows:
        for value in values:
            point = replace(base, demand=(*base.demand, (key, value)))
            searches = capacity.search_all(point, rung_names, seeds, settings, guesses=guesses)
            by = {
                m.baseline: m
                for m in capacity.bootstrap(
                    searches, bases, len(seeds), full, resamples=settings.resamples
                )
                if m.rung == last
            }
            cells = [_fmt(searches[r].capacity(full), "num") for r in rung_names]
            cells += [_multiplier(by.get(b)) for b in bases]
            lines.append(f"| {label} {value:g} (else {d[key]:g}) | " + " | ".join(cells) + " |")
            swept.setdefault(key, []).append((value, searches))
    return "\n".join(lines), swept


def dual_table(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
) -> str:
    """The dual: on the organisation's own cluster, the largest demand (× the organisation's:
    notebook users per GPU and training load alike) each rung serves within the levels (all
    of them, and the training and spawn levels alone), with a paired bootstrap interval over
    the seeds, and its multiplier against the first two rungs."""
    searches = capacity.search_demand(base, rung_names, seeds, settings)
    levels, resamples = settings.levels, settings.resamples
    bases = list(rung_names[:2])
    head = ["demand served [95%]"] + [f"× against {b} [95%]" for b in bases]
    lines = [
        "| rung | levels | " + " | ".join(head) + " |",
        "|---|---" + "|---" * len(head) + "|",
    ]
    for title, limits in (
        ("all", levels.limits()),
        ("training + spawn", levels.limits(interruptions=False)),
    ):
        served = capacity.bootstrap(
            searches, bases, len(seeds), limits, resamples=resamples, measure=capacity.per_demand
        )
        by = {(m.rung, m.baseline): m for m in served}
        for r in rung_names:
            point = capacity.key_demand(searches[r].capacity(limits))
            low, high = capacity.interval(searches[r], len(seeds), limits, resamples=resamples)
            cells = [
                f"{_demand_fmt(point)} [{_demand_fmt(capacity.key_demand(high))}–"
                f"{_demand_fmt(capacity.key_demand(low))}]"
            ]
            cells += [_multiplier(by.get((r, b))) for b in bases]
            lines.append(f"| {r} | {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _demand_fmt(x: float) -> str:
    if math.isinf(x) and x < 0:
        return f"< {capacity.DEMAND_GRID[0]:g}×"
    if x >= capacity.DEMAND_GRID[-1]:
        return f"≥ {capacity.DEMAND_GRID[-1]:g}×"
    return f"{x:.2f}×"


def frontier_table(
    base: RunSpec,
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    directory: Path,
    guesses: Mapping[str, float] | None = None,
) -> tuple[str, list[figures.Frontier]]:
    """Each culler setting on L1: its effective capacity on the training and spawn levels, and
    the sessions it interrupts (and the spawn wait) at the smallest size run that meets them
    (on the ladder's split for its rung, ``inherited``, else the best of ``splits``)."""
    relaxed = replace(settings.levels, interrupted_per_100h=math.inf)
    limits = relaxed.limits()
    shipped = Path(base.policy_file).read_text(encoding="utf-8")
    variants: list[tuple[str, RunSpec, str]] = [
        (f"idle-culler, timeout {t:g} min", replace(base, idle_timeout_min=t), "L1i")
        for t in FRONTIER_IDLE_MIN
    ]
    for i, (label, edits) in enumerate(FRONTIER_GPUAAS):
        if not edits:  # the shipped file itself: the ladder's own runs
            variants.append((f"gpuaas, {label}", base, "L1g"))
            continue
        text = shipped
        for old, new in edits:
            if old not in text:
                raise ValueError(f"the policy file has no {old!r} to change for {label!r}")
            text = text.replace(old, new)
        path = directory / f"policy-{i}.yaml"
        path.write_text(text, encoding="utf-8")
        variants.append((f"gpuaas, {label}", replace(base, policy_file=str(path)), "L1g"))
    lines = [
        "| culler on L1 | GPUs meeting training + spawn levels | at that size: interrupted per"
        " 100 session-h | spawn wait p90 (min) |",
        "|---|---|---|---|",
    ]
    frontiers: list[figures.Frontier] = []
    points: list[FrontierPoint] = []
    search_settings = replace(settings, levels=relaxed)
    for label, point, rung in variants:
        search = capacity.search_all(point, [rung], seeds, search_settings, guesses=guesses)[rung]
        culler, _sep, knob = label.partition(", ")
        frontiers.append(figures.Frontier(knob.removeprefix("timeout "), culler, search))
        size = search.meeting_size(limits)
        cells = [_fmt(search.capacity(limits), "num")]
        interrupted = math.nan
        for key in ("interrupted_per_100h", "spawn_wait_p90_min"):
            if size is None:
                cells.append("–")
                continue
            mean, half = mean_ci(float(x[key]) for x in _runs_at(search, size, relaxed))
            cells.append(_fmt(mean, "num", half) + f" @ {size}")
            if key == "interrupted_per_100h":
                interrupted = mean
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        points.append(FrontierPoint(label, culler, search, search.capacity(limits), interrupted))
    reading = frontier_reading(
        points, settings.levels.interrupted_per_100h, limits, len(seeds), settings.resamples
    )
    return "\n".join(lines) + "\n\n" + reading, frontiers


@dataclass(frozen=True)
class FrontierPoint:
    """A culler setting's place on the frontier (point estimates over the seeds)."""

    label: str
    culler: str
    search: Search
    gpus: float
    """Its effective capacity on the training and spawn levels (``inf``: none run meets)."""
    interrupted: float
    """Active sessions interrupted per 100 session-hours at that size (``nan``: no size)."""


def frontier_reading(
    points: Sequence[FrontierPoint],
    level: float,
    limits: Mapping[str, float],
    seeds: int,
    resamples: int,
) -> str:
    """What the frontier says, in words: which settings meet the interruption level and which
    of them needs the fewest GPUs, where the shipped policy stands (its GPUs against that
    setting's, with a paired bootstrap interval: the frontier's searches run the same seeds),
    and every gpuaas setting an idle-culler setting dominates (as few GPUs or fewer and as few
    interruptions or fewer, one of them strictly), on the point estimates."""
    shipped = next((p for p in points if p.label == "gpuaas, as shipped"), None)
    meeting = [
        p for p in points if math.isfinite(p.gpus) and p.interrupted <= level
    ]  # nan never meets
    out: list[str] = []
    if meeting:
        best = min(meeting, key=lambda p: (p.gpus, p.interrupted))
        names = ", ".join(f"{p.label} ({p.gpus:.1f} GPUs)" for p in meeting)
        out.append(
            f"Settings that meet the interruption level too (≤ {level:g} per 100 session-h at"
            f" their size): {names}; the fewest GPUs: **{best.label}**."
        )
        if shipped is not None and shipped is not best:
            if shipped in meeting:
                (m,) = [
                    m
                    for m in capacity.bootstrap(
                        {"best": best.search, "shipped": shipped.search},
                        ["shipped"],
                        seeds,
                        limits,
                        resamples=resamples,
                    )
                    if m.rung == "best"
                ]
                told = (
                    "no difference these seeds can tell"
                    if m.low <= 1.0 <= m.high
                    else "a reason to change the default"
                )
                out.append(
                    f"The shipped policy needs {m.value:.2f}× [{_bound(m.low)}–"
                    f"{_bound(m.high)}] its GPUs ({shipped.interrupted:.2g} interruptions per"
                    f" 100 session-h against {best.interrupted:.2g}): {told}."
                )
            else:
                out.append(
                    f"The shipped policy does not meet the interruption level"
                    f" ({shipped.interrupted:.2g} per 100 session-h): **its default must change**."
                )
        elif shipped is not None:
            out.append("The shipped policy is that setting.")
    else:
        out.append(f"No setting meets the interruption level (≤ {level:g} per 100 session-h).")
    dominated = []
    for g in (p for p in points if p.culler == "gpuaas"):
        for i in (p for p in points if p.culler == "idle-culler"):
            if (
                i.gpus <= g.gpus
                and i.interrupted <= g.interrupted
                and (i.gpus < g.gpus or i.interrupted < g.interrupted)
            ):
                dominated.append(
                    f"{g.label} by {i.label} ({i.gpus:.1f} GPUs and {i.interrupted:.2g}"
                    f" interruptions against {g.gpus:.1f} and {g.interrupted:.2g})"
                )
                break
    if dominated:
        out.append("Dominated by an idle-culler setting: " + "; ".join(dominated) + ".")
    else:
        out.append(
            "No gpuaas setting is dominated by an idle-culler setting (none of those needs as"
            " few GPUs or fewer while interrupting as few sessions or fewer)."
        )
    return " ".join(out)


def search_table(searches: Mapping[str, Search], levels: Levels) -> str:
    full = levels.limits()
    lines = ["| rung | sizes run (GPUs: ratio to the levels, ≤ 1 meets) |", "|---|---|"]
    for r, s in searches.items():
        points = ", ".join(f"{g}: {x:.2f}" for g, x in s.points(full))
        lines.append(f"| {r} | {points} |")
    return "\n".join(lines)


def _parameters() -> str:
    lines = ["| parameter | value | source |", "|---|---|---|"]
    for name, p in PARAMETERS.items():
        value = p.value
        text = json.dumps(value) if not isinstance(value, float) else f"{value:g}"
        lines.append(f"| `{name}` | {text} | {p.source} |")
    return "\n".join(lines)


def run_events(args: argparse.Namespace, base: RunSpec, seeds: Sequence[int]) -> int:
    spec = capacity.spec_of(base)
    run = RunSpec(
        **{
            **base.__dict__,
            "rung": args.rung,
            "gpus": args.size or spec.training_gpus,
            "seed": seeds[0],
        }
    )
    if run.rung not in ladder.RUNGS:
        print(f"no such rung: {run.rung}; have {', '.join(ladder.RUNGS)}")
        return 2
    split, note = page_split(args, spec, run.rung, run.gpus)
    run = replace(run, split=split)
    if run.rung == "L1c":
        run = replace(run, idle_timeout_min=_page_timeout(spec))
    print(note)
    started = time.perf_counter()
    with open(args.events, "w", encoding="utf-8") as f:
        figures = capacity.run_one(run, f)
    print(
        f"events of {spec.name} {run.rung} at {run.gpus} GPUs, seed {run.seed}"
        f" → {args.events} ({time.perf_counter() - started:.1f} s)"
    )
    lines = ["| figure | value |", "|---|---|"]
    for key, label, kind in AT_SIZE_ROWS:
        lines.append(f"| {label} | {_fmt(float(figures[key]), kind)} |")
    print("\n".join(lines))
    return 0


def page_split(args: argparse.Namespace, spec: OrgSpec, rung: str, size: int) -> tuple[float, str]:
    """The split of ``--events``'s one run: ``--split``, else the one the page's search ran
    ``rung`` on at ``size`` (its best there, or its parent's), else at the nearest size the
    page ran; and a line that says which."""
    if args.split is not None:
        return args.split, f"split {args.split:g} (--split)"
    if not ladder.RUNGS[rung].split_chosen:
        return ladder.COHORT_NOTEBOOK_SHARE, "no split (per-user reservations)"
    record = _page_record()
    sizes = record.get("splits", {}).get(rung, {}) if record.get("org") == spec.name else {}
    if not sizes:
        return ladder.COHORT_NOTEBOOK_SHARE, (
            f"split {ladder.COHORT_NOTEBOOK_SHARE:g}: the page did not run {rung} on {spec.name}"
            " (give --split)"
        )
    if str(size) in sizes:
        split = float(sizes[str(size)])
        return split, f"split {split:g}: the page's for {rung} at {size} GPUs"
    near = min(sizes, key=lambda g: abs(int(g) - size))
    split = float(sizes[near])
    return split, f"split {split:g}: the page's for {rung} at {near} GPUs, the nearest it ran"


def _page_record() -> dict[str, Any]:
    try:
        data = json.loads(PAGE_SPLITS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _page_timeout(spec: OrgSpec) -> float:
    """The idle-culler timeout the page chose for L1c (60 min where it has none)."""
    record = _page_record()
    chosen = record.get("l1c_timeout_min") if record.get("org") == spec.name else None
    return float(chosen) if chosen else 60.0


def page_record(
    spec: OrgSpec, searches: Mapping[str, Search], levels: Levels, chosen: float | None
) -> dict[str, Any]:
    """What :data:`PAGE_SPLITS` keeps: each rung's split at each size run (the best there on
    every level), and L1c's timeout."""
    full = levels.limits()
    return {
        "org": spec.name,
        "l1c_timeout_min": chosen,
        "splits": {
            r: {str(g): s.best_split(g, full) for g in sorted(s.sizes)}
            for r, s in searches.items()
            if ladder.RUNGS[r].split_chosen
        },
    }


def sweep_rows(args: argparse.Namespace) -> tuple[tuple[str, str, tuple[float, ...]], ...]:
    """The sensitivity sweep's rows the command runs: all with ``--sweep``, none with
    ``--quick`` or ``--no-sweep``, else :data:`DEFAULT_SWEEP`'s (none)."""
    if args.sweep:
        return SWEEP
    if args.quick or args.no_sweep:
        return ()
    return tuple(r for r in SWEEP if r[0] in DEFAULT_SWEEP)


def runs_models(args: argparse.Namespace) -> bool:
    """Whether the command runs the model's sensitivity rows: only with ``--models`` (they
    need L2, L3 and L4, beyond the default command's time budget with the family)."""
    return bool(args.models and not args.no_models)


def runs_dual(args: argparse.Namespace) -> bool:
    return bool(args.dual and not args.no_dual)


def runs_frontier(args: argparse.Namespace) -> bool:
    return bool(args.frontier and not args.no_frontier)


def beyond_the_ladder(args: argparse.Namespace) -> list[str]:
    """What the command runs besides the ladder's searches, as the page names it."""
    parts = []
    if runs_models(args):
        parts.append("the model's sensitivity rows")
    rows = sweep_rows(args)
    if rows == SWEEP:
        parts.append("the whole sensitivity sweep")
    elif rows:
        parts.append("the sensitivity sweep's " + ", ".join(label for _k, label, _v in rows))
    if runs_dual(args):
        parts.append("the dual")
    if runs_frontier(args):
        parts.append("the culler frontier")
    orgs = family_orgs(args)
    if orgs:
        parts.append(f"the organisation family's searches ({', '.join(orgs)})")
    return parts


def _listed(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ran_line(args: argparse.Namespace, runs: int, open_timeouts: int) -> str:
    """The page header's account of what the command ran: the rungs' replays as searched, and
    those of L1c's other timeouts and of each part beyond the ladder it ran."""
    parts = beyond_the_ladder(args)
    if open_timeouts > 1:
        parts.insert(0, f"L1c's other {open_timeouts - 1} idle-culler timeouts")
    besides = f", and those of {_listed(parts)}" if parts else ""
    return f"{runs} replays of the rungs as searched{besides}"


def beyond_line(args: argparse.Namespace, sweep_seeds: int) -> str:
    """The parts beyond the ladder the command ran, for the page's speed section: those on
    the sweep's seeds say so (the family runs on all the seeds)."""
    family_part = [p for p in beyond_the_ladder(args) if p.startswith("the organisation family")]
    swept = [p for p in beyond_the_ladder(args) if p not in family_part]
    parts = ([_listed(swept) + f" at {sweep_seeds} seeds"] if swept else []) + family_part
    return _listed(parts) if parts else "nothing beyond the ladder"


def _beyond_the_ladder(
    args: argparse.Namespace,
    base: RunSpec,
    spec: OrgSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    levels: Levels,
    splits: Sequence[float],
    searches: Mapping[str, Search],
    sections: dict[str, str],
) -> dict[str, str]:
    """The sensitivity sweep, the dual and the culler frontier (each unless skipped): their
    tables into ``sections``; their figures returned."""
    workers = args.workers or capacity.default_workers()
    relaxed_limits = levels.limits(interruptions=False)
    # The sweep's and the frontier's searches start from the ladder's sizes.
    guesses = {r: s.capacity(relaxed_limits) for r, s in searches.items()}
    guesses = {r: g for r, g in guesses.items() if math.isfinite(g)}
    # A rung whose parent they do not search keeps the split the ladder gave it.
    settings = capacity.SearchSettings(
        levels, splits, workers, args.resamples, capacity.chosen_splits(searches)
    )
    svgs: dict[str, str] = {}
    sweep_seeds = seeds[: args.sweep_seeds]
    rows = sweep_rows(args)
    if rows:
        sweep_rungs = [r for r in SWEEP_RUNGS if r in rung_names]
        sections["sweep"], swept = sweep_table(
            base, spec, sweep_rungs, sweep_seeds, settings, guesses, rows
        )
        svgs |= _sensitivity_figures(
            spec, searches, seeds, len(sweep_seeds), swept, levels, args.resamples
        )
    else:
        sections["sweep"] = "(not run: it runs with `--sweep`)"
    if runs_dual(args):
        sections["dual"] = dual_table(
            base, [r for r in DUAL_RUNGS if r in rung_names], seeds[: args.sweep_seeds], settings
        )
    else:
        sections["dual"] = "(not run: it runs with `--dual`)"
    if runs_frontier(args):
        with tempfile.TemporaryDirectory(prefix="replay-frontier-") as tmp:
            sections["frontier"], frontiers = frontier_table(
                base, sweep_seeds, settings, Path(tmp), guesses
            )
        svgs["frontier"] = figures.frontier_figure(
            frontiers, len(sweep_seeds), levels, args.resamples
        )
    else:
        sections["frontier"] = "(not run: it runs with `--frontier`)"
    return svgs


def _models(
    args: argparse.Namespace,
    base: RunSpec,
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    searches: Mapping[str, Search],
) -> tuple[str, list[ModelResult]]:
    """The model's sensitivity rows (unless skipped), on the sweep's seeds, each rung on the
    split the ladder gave it."""
    if not runs_models(args):
        return "(not run: they run with `--models`)", []
    inherited = capacity.chosen_splits(searches)
    return model_table(
        base, seeds[: args.sweep_seeds], replace(settings, inherited=inherited), searches
    )


def main(args: argparse.Namespace, argv: Sequence[str]) -> int:
    _apply_quick(args)
    seeds = args.seed or list(range(1, (args.seeds or DEFAULT_SEEDS) + 1))
    rung_names = [r.strip() for r in args.rungs.split(",") if r.strip()]
    try:
        ladder.rungs(rung_names)
    except ValueError as e:
        print(e)
        return 2
    base = _base_run(args, rung_names[0], seeds[0])
    spec = capacity.spec_of(base)
    if args.events:
        return run_events(args, base, seeds)
    levels = Levels(
        args.target_p90_min, args.spawn_p90_min, args.max_interrupted, args.restore_p90_min
    )
    splits = _split_list(args.splits)
    workers = args.workers or capacity.default_workers()
    started = time.perf_counter()
    cpu0 = time.process_time()
    load0 = os.getloadavg()[0]
    settings = capacity.SearchSettings(
        levels, splits, workers, args.resamples, progress=lambda line: print(line, flush=True)
    )
    searches, open_stack = _search_ladder(args, base, rung_names, seeds, settings)
    runs = sum(len(v) for s in searches.values() for by in s.sizes.values() for v in by.values())
    ladder_wall = time.perf_counter() - started
    open_rung = best_open_rung(searches, levels.limits())
    multipliers = capacity.bootstrap(
        searches, baselines(open_rung), len(seeds), levels.limits(), resamples=args.resamples
    )
    relaxed = capacity.bootstrap(
        searches,
        baselines(open_rung),
        len(seeds),
        levels.limits(interruptions=False),
        resamples=args.resamples,
    )
    cap_table, _caps, _relaxed = capacity_table(searches, levels, spec)
    sections_models, models = _models(args, base, seeds, settings, searches)
    sections = {
        "models": sections_models,
        "bounds": bounds_line(searches, levels),
        "resolution": resolution_table(searches, levels, len(seeds), args.resamples),
        "open_stack": open_stack_table(open_stack, levels)
        + "\n\n"
        + open_choice(searches, levels, len(seeds), args.resamples),
        "capacity": cap_table,
        "multipliers": multiplier_table(searches, multipliers, open_rung),
        "multipliers_relaxed": multiplier_table(searches, relaxed, open_rung),
        "at_size": at_size_table(searches, levels),
        "goals": goals_section(searches, multipliers, relaxed, levels, models, base.kept),
        "advice": advice_choice(searches, models, levels, base.kept, args.resamples),
        "search": search_table(searches, levels),
    }
    svgs = figures.ladder_figures(
        searches,
        multipliers,
        relaxed,
        len(seeds),
        levels,
        args.resamples,
        ("B0", *([open_rung] if open_rung else [])),
    )
    svgs |= _beyond_the_ladder(
        args, base, spec, rung_names, seeds, levels, splits, searches, sections
    )
    sections["family"] = _family(args, base, seeds, settings, levels)
    capacity.close_pool()  # its workers' CPU time counts once they have ended
    wall = time.perf_counter() - started  # the whole command, the sweep included
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu0 + children.ru_utime + children.ru_stime
    print(
        f"\n{spec.name}: {runs} runs ({len(rung_names)} rungs × {len(seeds)} seeds × the sizes"
        f" searched; the sweep's besides) in {wall:.0f} s wall, {cpu:.0f} s CPU, {workers}"
        " workers"
    )
    _print_sections(sections)
    if args.json:
        _write_json(Path(args.json), spec, seeds, levels, searches, multipliers, relaxed)
    if args.no_docs:
        return 0
    _write_figures(svgs)
    sections = {**sections, **_figure_links(svgs)}
    PAGE_SPLITS.write_text(
        json.dumps(
            page_record(spec, searches, levels, open_stack.chosen if open_stack else None),
            indent=1,
            sort_keys=True,
        )
        + "\n",
        encoding="utf-8",
    )
    sections["load"] = f"{load0:.1f} and {os.getloadavg()[0]:.1f}"
    DOCS.write_text(
        render(
            args,
            argv,
            spec,
            seeds,
            levels,
            sections,
            runs,
            wall,
            cpu,
            ladder_wall,
            len(open_stack.searches) if open_stack else 0,
        ),
        encoding="utf-8",
    )
    print(f"\nwrote {DOCS} and its {len(svgs)} figures in {FIGURES}")
    return 0


def family_orgs(args: argparse.Namespace) -> list[str]:
    """The family section's organisations: ``--family`` (``none``: none), else all of
    :data:`.family.FAMILY` (``--quick``: none; ``--quick --family notebook-heavy`` for one)."""
    if args.family is None:
        return [] if args.quick else list(family.FAMILY)
    return [o.strip() for o in args.family.split(",") if o.strip() and o.strip() != "none"]


def _family(
    args: argparse.Namespace,
    base: RunSpec,
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
    levels: Levels,
) -> str:
    """The family section (:mod:`.family`): each organisation searched on the family's rungs
    (the organisation's own demand: ``--users-per-gpu`` and the like are the ladder's)."""
    orgs = family_orgs(args)
    if not orgs:
        return "(not run: `--family none`)"
    rungs = [r.strip() for r in args.family_rungs.split(",") if r.strip()]
    results = []
    for org in orgs:
        print(f"the family: {org}", flush=True)
        results.append(
            family.search_org(
                replace(base, demand=()),
                org,
                rungs,
                seeds,
                settings,
                refine=not args.quick,
                lever_seeds=lever_seeds(args),
            )
        )
    return family.family_section(results, levels, args.resamples)


def lever_seeds(args: argparse.Namespace) -> int:
    """``--lever-seeds``, else :data:`DEFAULT_LEVER_SEEDS` (``--quick``: 0)."""
    if args.lever_seeds is not None:
        return int(args.lever_seeds)
    return 0 if args.quick else DEFAULT_LEVER_SEEDS


def _apply_quick(args: argparse.Namespace) -> None:
    """``--quick``: :data:`QUICK`'s seeds, window, burn-in (unless given) and resamples."""
    if args.quick:
        args.seeds = QUICK["seeds"]
        args.days = QUICK["days"]
        args.burn_in_h = args.burn_in_h or QUICK["burn_in_h"]
        args.resamples = QUICK["resamples"]


def _base_run(args: argparse.Namespace, rung: str, seed: int) -> RunSpec:
    """The run every search varies (its rung, size, split and seed), from the arguments."""
    return RunSpec(
        org=args.org,
        rung=rung,
        gpus=0,
        seed=seed,
        days=args.days,
        burn_in_h=args.burn_in_h if args.burn_in_h is not None else 24.0,
        policy_file=args.policy_file,
        demand=_demand(args),
        checkpoint_min=args.checkpoint_min,
        kept=KeptState(args.snapshot_s, args.restore_s, args.unsaveable),
    )


def _search_ladder(
    args: argparse.Namespace,
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    settings: capacity.SearchSettings,
) -> tuple[dict[str, Search], capacity.OpenStack | None]:
    """Every rung's search (L1c's over its timeouts), refined near each crossing unless
    ``--quick``."""
    searched = capacity.search_all(base, [r for r in rung_names if r != "L1c"], seeds, settings)
    open_stack = None
    if "L1c" in rung_names:
        timeouts = QUICK_TIMEOUTS_MIN if args.quick else ladder.OPEN_TIMEOUTS_MIN
        open_stack = best_open_stack(base, seeds, settings, searched, timeouts)
        searched["L1c"] = open_stack.searches[open_stack.chosen or ladder.OPEN_TIMEOUTS_MIN[0]]
    searches = {r: searched[r] for r in rung_names}
    timeout = open_stack.chosen if open_stack and open_stack.chosen else None
    if not args.quick:
        capacity.refine(
            base,
            searches,
            seeds,
            settings,
            {"L1c": replace(base, idle_timeout_min=timeout)} if timeout else None,
        )
    return searches, open_stack


PRINTED_SECTIONS = (
    ("The organisation family", "family"),
    ("The best open stack", "open_stack"),
    ("Effective capacity", "capacity"),
    ("Bounds", "bounds"),
    ("Telling the rungs apart", "resolution"),
    ("The model's sensitivity", "models"),
    ("Multipliers, all service levels", "multipliers"),
    ("Multipliers, training and spawn levels only", "multipliers_relaxed"),
    ("Each rung at its own service-level size", "at_size"),
    ("The goals", "goals"),
    ("The size advice's rule", "advice"),
    ("Sizes searched", "search"),
    ("Sensitivity", "sweep"),
    ("The dual: the demand the organisation's cluster serves", "dual"),
    ("The culler frontier", "frontier"),
)
"""The sections the command prints, in order: (title, key of the page's sections)."""


def _print_sections(sections: Mapping[str, str]) -> None:
    for title, key in PRINTED_SECTIONS:
        print(f"\n{title}:\n{sections[key]}")


def _write_json(
    path: Path,
    spec: OrgSpec,
    seeds: Sequence[int],
    levels: Levels,
    searches: Mapping[str, Search],
    multipliers: Sequence[Multiplier],
    relaxed: Sequence[Multiplier],
) -> None:
    """``--json``: every search's runs and the multipliers."""
    path.write_text(
        json.dumps(
            {
                "org": spec.name,
                "seeds": seeds,
                "levels": levels.__dict__,
                "searches": {r: s.sizes for r, s in searches.items()},
                "multipliers": [m.__dict__ for m in multipliers],
                "multipliers_relaxed": [m.__dict__ for m in relaxed],
            },
            default=str,
        ),
        encoding="utf-8",
    )


def _write_figures(svgs: Mapping[str, str]) -> None:
    """The page's figures, replacing every old one."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    for old in FIGURES.glob("*.svg"):
        old.unlink()
    for name, svg in svgs.items():
        (FIGURES / f"{name}.svg").write_text(svg, encoding="utf-8")


FIGURE_TITLES = {
    "ladder": "Effective capacity per rung",
    "multipliers": "Multipliers against B0 and the best open stack",
    "frontier": "The culler frontier",
    "users": "Sensitivity to notebook users per GPU",
    "memory": "Sensitivity to the memory need",
}


def _figure_links(svgs: Mapping[str, str]) -> dict[str, str]:
    """The page's image links, by template field (``figure_<name>``); a figure not drawn
    (its part not run) is said so."""
    where = Path(os.path.relpath(FIGURES, DOCS.parent)).as_posix()
    out = {}
    for name, title in FIGURE_TITLES.items():
        out[f"figure_{name}"] = (
            f"![{title}]({where}/{name}.svg)" if name in svgs else f"({title}: not run)"
        )
    return out


def _sensitivity_figures(
    spec: OrgSpec,
    searches: Mapping[str, Search],
    seeds: Sequence[int],
    sweep_seeds: int,
    swept: Mapping[str, list[tuple[float, dict[str, Search]]]],
    levels: Levels,
    resamples: int,
) -> dict[str, str]:
    """Users per GPU and memory need: the sweep's points and the ladder's own (the
    organisation's figure, all the ladder's seeds)."""
    out = {}
    for name, key, axis in (
        ("users", "users_per_gpu", "notebook users per GPU of the training pools"),
        ("memory", "gpu_memory_median_gib", "median GPU-memory need of a session (GiB)"),
    ):
        if key not in swept:
            continue
        rungs = list(swept[key][0][1])
        own = (float(spec.demand.__dict__[key]), {r: searches[r] for r in rungs}, len(seeds))
        points = [own] + [(v, s, sweep_seeds) for v, s in swept[key]]
        out[name] = figures.sensitivity_figure(
            f"{FIGURE_TITLES[name]} (the others as the organisation states them)",
            axis,
            points,
            levels,
            resamples,
        )
    return out


KEPT_COSTS_SOURCE = (
    f"from `python -m benchmarks snapshot` (docs/benchmarks.md, 2026-12-06: the slowest"
    f" measured {SAVE_S_PER_GIB:g} s per GiB saved, {RESTORE_S_PER_GIB:g} s per GiB restored and a"
    f" {RESTORE_REQUEST_S:g} s restore request) for an assumed {STATE_GIB:g} GiB of state per"
    " session"
)
"""Where L4's default snapshot and restore costs come from."""
BUDGET_MIN = 20.0
"""The default command's budget on this project's 2-core machine (minutes of wall time)."""
WEEK = Path(__file__).with_name("week.md")
"""The 1,000-GPU week's figures, measured by its own command (not the one that writes the
page) and written down by hand; read when the page is rendered."""


def _workers(n: int) -> str:
    return f"{n} worker process" + ("" if n == 1 else "es")


def _sweep_budget(wall: float, ladder_wall: float, sweep_seeds: int) -> str:
    """Whether the sweep, the dual and the frontier could take 20 seeds within the budget:
    their runs scale with the seeds, so 20 would take their time × 20 ÷ ``sweep_seeds``."""
    if sweep_seeds >= 20:
        return ""
    rest = wall - ladder_wall
    estimate = (ladder_wall + rest * 20 / sweep_seeds) / 60
    if estimate > BUDGET_MIN:
        return (
            f" They keep {sweep_seeds} seeds (`--sweep-seeds`): with 20 their runs would double"
            f" and the command take about {estimate:.0f} min, beyond the {BUDGET_MIN:g} min the"
            " default replay is allowed on this machine; their intervals are the wider for it."
        )
    return (
        f" With 20 seeds for them (`--sweep-seeds 20`) the command would take about"
        f" {estimate:.0f} min, within the {BUDGET_MIN:g} min budget."
    )


def render(
    args: argparse.Namespace,
    argv: Sequence[str],
    spec: OrgSpec,
    seeds: Sequence[int],
    levels: Levels,
    sections: Mapping[str, str],
    runs: int,
    wall: float,
    cpu: float,
    ladder_wall: float = math.nan,
    open_timeouts: int = 0,
) -> str:
    from .check import RESULTS, check_section

    check = (
        check_section(json.loads(RESULTS.read_text(encoding="utf-8")))
        if RESULTS.exists()
        else "(no check run yet: `python -m benchmarks replay-check`)"
    )

    users = spec.users()
    teams = ", ".join(f"{t.name} ({users[t.name]} notebook users)" for t in spec.teams)
    pools = "; ".join(
        f"{p.name}: {p.nodes:g} × {p.gpus_per_node} GPUs of {p.gpu_memory_gib:g} GiB"
        + (f" in MIG {p.mig.profile} ({p.mig.per_gpu} per GPU, notebooks only)" if p.mig else "")
        for p in spec.pools
    )
    rungs = "\n".join(f"| {r.name} | {r.text} |" for r in ladder.RUNGS.values())
    d = spec.demand
    return TEMPLATE.read_text(encoding="utf-8").format(
        command=page_command(list(argv)),
        org=spec.name,
        org_description=spec.description,
        pools=pools,
        teams=teams,
        users_per_gpu=f"{d.users_per_gpu:g}",
        training_load=f"{d.training_offered_load:g}",
        memory_median=f"{d.gpu_memory_median_gib:g}",
        memory_sigma=f"{d.gpu_memory_sigma:g}",
        memory_within=f"{d.gpu_memory_within_user:g}",
        seeds=len(seeds),
        days=f"{args.days:g}",
        burn_in=f"{args.burn_in_h if args.burn_in_h is not None else 24:g}",
        training_p90=f"{levels.training_p90_min:g}",
        spawn_p90=f"{levels.spawn_p90_min:g}",
        interrupted=f"{levels.interrupted_per_100h:g}",
        checkpoint=f"{args.checkpoint_min:g}",
        training_gpus=spec.training_gpus,
        dual_grid=f"{capacity.DEMAND_GRID[0]:g}-{capacity.DEMAND_GRID[-1]:g}×",
        sessions_kept=brain.SESSIONS_KEPT,
        headroom=f"{brain.DEFAULT_HEADROOM:g}",
        rungs=rungs,
        splits=", ".join(f"{x:g}" for x in _split_list(args.splits)),
        open_timeouts=", ".join(f"{t:g}" for t in ladder.OPEN_TIMEOUTS_MIN),
        restore_p90=f"{levels.restore_p90_min:g}",
        unsaveable=f"{100 * args.unsaveable:g}",
        snapshot_s=f"{args.snapshot_s:g}",
        restore_s=f"{args.restore_s:g}",
        kept_costs_source=KEPT_COSTS_SOURCE,
        kept_idle_after=ladder.KEPT_IDLE_AFTER,
        gpus_per_node=", ".join(sorted({str(p.gpus_per_node) for p in spec.training_pools})),
        runs=runs,
        ran=ran_line(args, runs, open_timeouts),
        beyond=beyond_line(args, min(args.sweep_seeds, len(seeds))),
        wall=f"{wall / 60:.1f}",
        cpu=f"{cpu / 60:.1f}",
        ladder_wall=f"{ladder_wall / 60:.1f}",
        rest_wall=f"{(wall - ladder_wall) / 60:.1f}",
        workers=_workers(args.workers or capacity.default_workers()),
        sweep_budget=(
            _sweep_budget(wall, ladder_wall, min(args.sweep_seeds, len(seeds)))
            if sweep_rows(args) or runs_models(args) or runs_dual(args) or runs_frontier(args)
            else ""
        ),
        week=(
            WEEK.read_text(encoding="utf-8").strip()
            if WEEK.exists()
            else "(the 1,000-GPU week: not measured)"
        ),
        resamples=args.resamples,
        version=TRACE_VERSION,
        parameters=_parameters(),
        check=check,
        sweep_seeds=min(args.sweep_seeds, len(seeds)),
        quick_note=quick_note(args, seeds),
        **sections,
    )


def quick_note(args: argparse.Namespace, seeds: Sequence[int]) -> str:
    """How the page was generated, said where it begins: the seeds, days, burn-in, splits,
    refinement and intervals; with ``--quick`` also what it leaves out."""
    splits = ", ".join(f"{x:g}" for x in _split_list(args.splits))
    seed_text = (
        f"seeds {seeds[0]}-{seeds[-1]}"
        if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds)))
        else "seeds " + ", ".join(str(x) for x in seeds)
    )
    burn_in = args.burn_in_h if args.burn_in_h is not None else 24.0
    how = (
        f"{len(seeds)} seeds ({seed_text}), each {args.days:g} measured day after a"
        f" {burn_in:g} h burn-in, replayed alike on every rung, size and organisation; the"
        f" notebook share of the quota chosen at each size from {splits} (`--splits`);"
        + (
            " the searches' brackets not refined to one GPU"
            if args.quick
            else " each search's bracket refined to one GPU"
        )
        + f"; every interval a 95% bootstrap over the seeds ({args.resamples} resamples, paired:"
        " the same resample for both rungs of a multiplier), so it is as wide as the days"
        " differ and the seeds are few"
    )
    if not args.quick:
        return f"\n**How it was generated**: {how}.\n"
    return (
        f"\n**Generated with `--quick`**: {how}; no model rows or sweep, one organisation unless"
        " `--family` names more: a first look, with wide intervals; the default command writes"
        " the page in full.\n"
    )


def page_command(argv: Sequence[str]) -> str:
    """The command that wrote the page, without ``--workers`` and ``--json`` (they change no
    figure, and the JSON file's path is the writer's)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--workers", "--json"):
            skip = True
        elif not arg.startswith(("--workers=", "--json=")):
            kept.append(arg)
    return " ".join(["python -m benchmarks replay", *kept])

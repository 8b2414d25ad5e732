"""``python -m benchmarks replay --org NAME``: the ladder's effective capacity, its multipliers
with paired bootstrap intervals, each rung at its own service-level size, and the page."""

from __future__ import annotations

import argparse
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

from . import brain, capacity, figures, ladder
from .capacity import Levels, Multiplier, RunSpec, Search
from .metrics import mean_ci
from .organisations import OrgSpec
from .trace import PARAMETERS, TRACE_VERSION
from .world import REPO

DOCS = REPO / "docs" / "replay.md"
FIGURES = REPO / "docs" / "images" / "replay"
"""The page's SVG figures, written with it (every ``*.svg`` there is the page's)."""
TEMPLATE = Path(__file__).with_name("ladder.md.in")
BASELINES = ("B1", "B2", "L1i")
QUICK = {"seeds": 3, "days": 0.5, "burn_in_h": 12.0, "resamples": 200}
SWEEP: tuple[tuple[str, str, tuple[float, ...]], ...] = (
    ("users_per_gpu", "notebook users per GPU", (0.5, 2.0, 3.0)),
    ("gpu_memory_median_gib", "median GPU-memory need (GiB)", (4.0, 16.0)),
    ("training_offered_load", "training offered load", (0.4, 0.9)),
)
"""The sensitivity sweep (``--sweep``): each figure moved alone from the organisation's."""
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
    ("interrupted_per_100h", "active sessions interrupted per 100 session-h", "num"),
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
        default=",".join(ladder.RUNGS),
        help=f"comma-separated, of: {', '.join(ladder.RUNGS)} (default all)",
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
        help="notebook shares of each team's GPUs (nominal quota, in a cohort) that B1, B2 and"
        " L1 choose their best from, at each size; B1i keeps B1's, the rungs built on L1 keep"
        " L1's (default 0.25,0.375,0.5)",
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
    g.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the seeds")
    g.add_argument(
        "--sweep",
        action="store_true",
        help="run the sensitivity sweep even with --quick (it runs by default, unless"
        " --no-sweep): the capacity of "
        + ", ".join(SWEEP_RUNGS)
        + " with users per GPU, memory need and training load moved one at a time",
    )
    g.add_argument(
        "--sweep-seeds",
        type=int,
        default=20,
        help="seeds of each point of the sweep, of the dual and of the culler frontier (the"
        " first this many of the ladder's)",
    )
    g.add_argument(
        "--frontier",
        action="store_true",
        help="run the culler frontier even with --quick (it runs by default, unless"
        " --no-frontier): capacity against interrupted sessions for idle-culler's timeout and"
        " gpuaas's idle_after and warn_before",
    )
    g.add_argument("--no-frontier", action="store_true", help="skip the culler frontier")
    g.add_argument(
        "--dual",
        action="store_true",
        help="run the dual even with --quick (it runs by default, unless --no-dual): the"
        " largest demand (users per GPU and training load × a factor) that "
        + ", ".join(DUAL_RUNGS)
        + " serve within the service levels on the organisation's own cluster",
    )
    g.add_argument("--no-dual", action="store_true", help="skip the dual")
    g.add_argument(
        "--quick",
        action="store_true",
        help="3 seeds, half-day window after 12 h, 200 resamples: for tests and a first look",
    )


def _split_list(text: str) -> list[float]:
    return [float(s) for s in text.split(",") if s.strip()]


def _demand(args: argparse.Namespace) -> tuple[tuple[str, float], ...]:
    changes = {
        "users_per_gpu": args.users_per_gpu,
        "training_offered_load": args.training_load,
        "gpu_memory_median_gib": args.memory_median,
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


def capacity_table(
    searches: Mapping[str, Search], levels: Levels, spec: OrgSpec
) -> tuple[str, dict[str, float], dict[str, float]]:
    full = levels.limits()
    relaxed = levels.limits(interruptions=False)
    caps = {r: s.capacity(full) for r, s in searches.items()}
    caps_relaxed = {r: s.capacity(relaxed) for r, s in searches.items()}
    lines = [
        "| rung | what | GPUs meeting all levels | GPUs meeting training + spawn levels |",
        "|---|---|---|---|",
    ]
    for r in searches:
        lines.append(
            f"| {r} | {ladder.RUNGS[r].text} | {_fmt(caps[r], 'num')} |"
            f" {_fmt(caps_relaxed[r], 'num')} |"
        )
    del spec
    return "\n".join(lines), caps, caps_relaxed


def multiplier_table(searches: Mapping[str, Search], multipliers: Sequence[Multiplier]) -> str:
    bases = [b for b in BASELINES if b in searches]
    by = {(m.rung, m.baseline): m for m in multipliers}
    lines = [
        "| rung | " + " | ".join(f"× against {b} [95%]" for b in bases) + " |",
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


GOALS = (("B1", 2.0, False), ("L1i", 1.3, True))
"""The goals for the shipped configuration (L3): its multiplier's interval lower bound against
each baseline (with every service level, the interruption level among them), and against the
other culler, L1i, at no more interrupted sessions than it."""


def goals_section(
    searches: Mapping[str, Search],
    multipliers: Sequence[Multiplier],
    relaxed: Sequence[Multiplier],
    levels: Levels,
) -> str:
    """Whether the shipped configuration (L3: need-sized shares with gpuaas) meets the goals,
    and where it falls short, what is missing, from the figures the page shows: the bound of
    the lever (L2o), the advice's size against the need, the Jobs admitted onto scraps."""
    if "L3" not in searches:
        return "(L3 not run: `--rungs`)"
    full = {(m.rung, m.baseline): m for m in multipliers}
    loose = {(m.rung, m.baseline): m for m in relaxed}

    def against(rung: str, base: str) -> tuple[Multiplier | None, bool]:
        """The multiplier on every level, else (True) on the training and spawn levels."""
        m = full.get((rung, base))
        if m is not None and math.isfinite(m.value) and m.value > 0:
            return m, False
        return loose.get((rung, base)), True

    interrupted = {
        r: _mean_at_own_size(s, levels, "interrupted_per_100h") for r, s in searches.items()
    }
    lines = [
        "| goal for L3 (shipped) | measured [95%] | interrupted per 100 session-h, L3 / baseline"
        " | met |",
        "|---|---|---|---|",
    ]
    short: list[tuple[str, float]] = []
    for base, goal, no_more in GOALS:
        if base not in searches:
            continue
        m, relaxed_only = against("L3", base)
        note = (
            " (training and spawn levels: one side meets the interruption level at no size)"
            if relaxed_only
            else ""
        )
        fewer = not no_more or interrupted["L3"] <= interrupted[base]
        met = m is not None and m.low >= goal and fewer
        if not met:
            short.append((base, goal))
        lines.append(
            f"| ≥ {goal:g}× against {base} at the lower bound"
            + (", no more interruptions" if no_more else "")
            + f" | {_multiplier(m)}{note} | {interrupted['L3']:.2g} / {interrupted[base]:.2g}"
            f" | {'yes' if met else '**no**'} |"
        )
    if not short:
        return "\n".join(lines) + "\n\nBoth goals are met."
    out = ["\n".join(lines), ""]
    why: list[str] = []
    if "L2o" in searches:
        bound = [(base, goal, against("L2o", base)[0]) for base, goal in short]
        beyond = [f"{b} {_multiplier(m)}" for b, goal, m in bound if m and m.high < goal]
        if beyond:
            why.append(
                "**The lever's bound falls short too** (L2o, every session on the share its own"
                f" need fits and shares packed perfectly: {'; '.join(beyond)}): on this"
                " organisation need-sized shares cannot reach the goal even done perfectly; the"
                " GPUs left are what training's own demand needs at its service level."
            )
    oversize = _mean_at_own_size(searches["L3"], levels, "advice_oversize")
    if oversize > 1.5:
        why.append(
            f"**Advice closer to the need**: L3's advised share is {oversize:.2f}× the share"
            " each session's need fits (the largest of a user's recent peaks × the headroom,"
            " when needs vary from session to session); a share sized from the session's own"
            " peak as it runs (a way down as well as up) would close part of the gap to L2o."
        )
    unplaceable = _mean_at_own_size(searches["L3"], levels, "jobs_unplaceable")
    held = _mean_at_own_size(searches["L3"], levels, "unplaced_job_gpu_h")
    if unplaceable > 0:
        why.append(
            f"**Placement that keeps whole cards free**: {unplaceable:.1f} Jobs a day at L3's"
            f" size are admitted on quota that exists only as scraps of several cards and wait,"
            f" holding {held:.1f} GPU-hours of quota (Kueue admits on quota only); packing the"
            " shares onto the fewest cards as they are placed, or Kueue's topology-aware"
            " scheduling, would keep them from being admitted onto scraps."
        )
    if any(b == "L1i" for b, _g in short):
        ours, theirs = interrupted["L3"], interrupted["L1i"]
        if ours > theirs:
            why.append(
                f"**Fewer interruptions**: L3 interrupts {ours:.2g} active sessions per 100"
                f" session-h, L1i {theirs:.2g}; warning earlier or reclaiming only for queued"
                " work would trade GPUs for fewer (the culler frontier below)."
            )
        else:
            why.append(
                f"L1i's GPUs are paid for in interrupted sessions ({theirs:.2g} per 100"
                f" session-h against L3's {ours:.2g}): its multiplier is on the training and"
                " spawn levels, where the idle-culler's interruptions cost nothing."
            )
    out.append("What is missing, from the figures of this page:\n")
    out += [f"- {w}" for w in why] or ["- (no single figure names it)"]
    return "\n".join(out)


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
    for key, label, values in SWEEP:
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
    if args.sweep or not (args.quick or args.no_sweep):
        sweep_rungs = [r for r in SWEEP_RUNGS if r in rung_names]
        sections["sweep"], swept = sweep_table(
            base, spec, sweep_rungs, sweep_seeds, settings, guesses
        )
        svgs |= _sensitivity_figures(
            spec, searches, seeds, len(sweep_seeds), swept, levels, args.resamples
        )
    else:
        sections["sweep"] = "(not run: `--no-sweep` or `--quick`)"
    if args.dual or not (args.quick or args.no_dual):
        sections["dual"] = dual_table(
            base, [r for r in DUAL_RUNGS if r in rung_names], seeds[: args.sweep_seeds], settings
        )
    else:
        sections["dual"] = "(not run: `--no-dual` or `--quick`)"
    if args.frontier or not (args.quick or args.no_frontier):
        with tempfile.TemporaryDirectory(prefix="replay-frontier-") as tmp:
            sections["frontier"], frontiers = frontier_table(
                base, sweep_seeds, settings, Path(tmp), guesses
            )
        svgs["frontier"] = figures.frontier_figure(
            frontiers, len(sweep_seeds), levels, args.resamples
        )
    else:
        sections["frontier"] = "(not run: `--no-frontier` or `--quick`)"
    return svgs


def main(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.quick:
        args.seeds = QUICK["seeds"]
        args.days = QUICK["days"]
        args.burn_in_h = args.burn_in_h or QUICK["burn_in_h"]
        args.resamples = QUICK["resamples"]
    seeds = args.seed or list(range(1, (args.seeds or 20) + 1))
    rung_names = [r.strip() for r in args.rungs.split(",") if r.strip()]
    try:
        ladder.rungs(rung_names)
    except ValueError as e:
        print(e)
        return 2
    base = RunSpec(
        org=args.org,
        rung=rung_names[0],
        gpus=0,
        seed=seeds[0],
        days=args.days,
        burn_in_h=args.burn_in_h if args.burn_in_h is not None else 24.0,
        policy_file=args.policy_file,
        demand=_demand(args),
        checkpoint_min=args.checkpoint_min,
    )
    spec = capacity.spec_of(base)
    if args.events:
        return run_events(args, base, seeds)
    levels = Levels(args.target_p90_min, args.spawn_p90_min, args.max_interrupted)
    splits = _split_list(args.splits)
    workers = args.workers or capacity.default_workers()
    started = time.perf_counter()
    cpu0 = time.process_time()
    searches = capacity.search_all(
        base,
        rung_names,
        seeds,
        capacity.SearchSettings(
            levels,
            splits,
            workers,
            args.resamples,
            progress=lambda line: print(line, flush=True),
        ),
    )
    runs = sum(len(v) for s in searches.values() for by in s.sizes.values() for v in by.values())
    wall = ladder_wall = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu0 + children.ru_utime + children.ru_stime
    multipliers = capacity.bootstrap(
        searches, BASELINES, len(seeds), levels.limits(), resamples=args.resamples
    )
    relaxed = capacity.bootstrap(
        searches,
        BASELINES,
        len(seeds),
        levels.limits(interruptions=False),
        resamples=args.resamples,
    )
    cap_table, _caps, _relaxed = capacity_table(searches, levels, spec)
    sections = {
        "capacity": cap_table,
        "multipliers": multiplier_table(searches, multipliers),
        "multipliers_relaxed": multiplier_table(searches, relaxed),
        "at_size": at_size_table(searches, levels),
        "goals": goals_section(searches, multipliers, relaxed, levels),
        "search": search_table(searches, levels),
    }
    svgs = figures.ladder_figures(
        searches, multipliers, relaxed, len(seeds), levels, args.resamples
    )
    svgs |= _beyond_the_ladder(
        args, base, spec, rung_names, seeds, levels, splits, searches, sections
    )
    capacity.close_pool()  # its workers' CPU time counts once they have ended
    wall = time.perf_counter() - started  # the whole command, the sweep included
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - cpu0 + children.ru_utime + children.ru_stime
    print(
        f"\n{spec.name}: {runs} runs ({len(rung_names)} rungs × {len(seeds)} seeds × the sizes"
        f" searched; the sweep's besides) in {wall:.0f} s wall, {cpu:.0f} s CPU, {workers}"
        " workers"
    )
    for title, key in (
        ("Effective capacity", "capacity"),
        ("Multipliers, all service levels", "multipliers"),
        ("Multipliers, training and spawn levels only", "multipliers_relaxed"),
        ("Each rung at its own service-level size", "at_size"),
        ("The goals", "goals"),
        ("Sizes searched", "search"),
        ("Sensitivity", "sweep"),
        ("The dual: the demand the organisation's cluster serves", "dual"),
        ("The culler frontier", "frontier"),
    ):
        print(f"\n{title}:\n{sections[key]}")
    if args.json:
        Path(args.json).write_text(
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
    if args.no_docs:
        return 0
    FIGURES.mkdir(parents=True, exist_ok=True)
    for old in FIGURES.glob("*.svg"):
        old.unlink()
    for name, svg in svgs.items():
        (FIGURES / f"{name}.svg").write_text(svg, encoding="utf-8")
    sections = {**sections, **_figure_links(svgs)}
    DOCS.write_text(
        render(args, argv, spec, seeds, levels, sections, runs, wall, cpu, ladder_wall),
        encoding="utf-8",
    )
    print(f"\nwrote {DOCS} and its {len(svgs)} figures in {FIGURES}")
    return 0


FIGURE_TITLES = {
    "ladder": "Effective capacity per rung",
    "multipliers": "Multipliers against B1 and L1i",
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
) -> str:
    from .check import RESULTS, check_section
    from .cli import page_command

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
        runs=runs,
        wall=f"{wall / 60:.1f}",
        cpu=f"{cpu / 60:.1f}",
        ladder_wall=f"{ladder_wall / 60:.1f}",
        rest_wall=f"{(wall - ladder_wall) / 60:.1f}",
        workers=_workers(args.workers or capacity.default_workers()),
        sweep_budget=_sweep_budget(wall, ladder_wall, min(args.sweep_seeds, len(seeds))),
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
        **sections,
    )

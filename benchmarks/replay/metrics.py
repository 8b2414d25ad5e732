"""The figures of one run (:func:`summarize`) and their mean and 95% interval over seeds."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sim import Result
from .trace import DAY, HOUR

BIN_S = 15 * 60.0
SIZES = (1, 2, 4, 8)

# Two-sided 95% Student t quantiles by degrees of freedom (standard table values).
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    30: 2.042,
}


def t95(df: int) -> float:
    if df <= 0:
        return float("nan")
    best = max(k for k in _T95 if k <= df) if df < 30 else 30
    return _T95[best] if df <= 30 else 1.96


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0-100); NaN for no values."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def summarize(result: Result) -> dict[str, Any]:
    """Every figure of docs/replay.md for one run, plus the series the plots draw."""
    trace = result.trace
    lo, hi = trace.burn_in_s, trace.end_s
    capacity = float(result.org.gpu_equivalents)
    usage = _usage(result, lo, hi)
    waits = _training_waits(result, lo, hi)
    held = capacity * (hi - lo)
    norm = capacity * BIN_S * ((hi - lo) / DAY)
    return {
        "policy": result.policy,
        "seed": result.seed,
        "gpus": result.org.physical_gpus,
        "capacity_gpu_equivalents": capacity,
        "allocation_share": usage.allocated / held,
        "training_allocation_share": usage.allocated_training / held,
        "busy_share": usage.busy / held,
        **_wait_figures(waits),
        **_session_figures(result, lo, hi),
        "handoff_p50_s": percentile(result.handoffs, 50),
        "handoff_p90_s": percentile(result.handoffs, 90),
        "warnings": result.warnings,
        "snoozes": result.snoozes,
        "session_hours": _session_hours(result),
        "cycles": result.cycles,
        "events": result.counters.get("events", 0),
        "wait_samples_min": sorted(w / 60 for w in waits.all),
        "allocated_by_bin": [x / norm for x in usage.allocated_by_bin],
        "busy_by_bin": [x / norm for x in usage.busy_by_bin],
    }


@dataclass
class _Usage:
    """GPU-equivalent-seconds allocated (all, training) and busy in the measured window, and
    both by time-of-day bin."""

    allocated: float = 0.0
    allocated_training: float = 0.0
    busy: float = 0.0
    allocated_by_bin: list[float] = field(default_factory=lambda: [0.0] * int(DAY // BIN_S))
    busy_by_bin: list[float] = field(default_factory=lambda: [0.0] * int(DAY // BIN_S))


def _add_to_bins(
    series: list[float], start: float, end: float, weight: float, lo: float, hi: float
) -> None:
    """``weight`` × the seconds of [start, end) inside [lo, hi), into each time-of-day bin."""
    t = max(start, lo)
    end = min(end, hi)
    while t < end:
        b = int(((t - lo) % DAY) // BIN_S)
        edge = lo + (math.floor((t - lo) / BIN_S) + 1) * BIN_S
        step = min(end, edge) - t
        series[b] += weight * step
        t += step


def _usage(result: Result, lo: float, hi: float) -> _Usage:
    out = _Usage()
    for a in result.allocations:
        end = a.end if a.end is not None else hi
        out.allocated += _overlap(a.start, end, lo, hi) * a.gpu_equivalents
        if a.kind == "training":
            out.allocated_training += _overlap(a.start, end, lo, hi) * a.gpu_equivalents
        _add_to_bins(out.allocated_by_bin, a.start, end, a.gpu_equivalents, lo, hi)
    for c in result.computes:
        out.busy += _overlap(c.start, c.end, lo, hi) * c.utilization * c.gpu_equivalents
        _add_to_bins(out.busy_by_bin, c.start, c.end, c.utilization * c.gpu_equivalents, lo, hi)
    return out


@dataclass
class _Waits:
    """The training Jobs submitted in the window: their waits (all, and by GPUs), completion
    times, the GPU-hour-weighted wait's parts, those never admitted, and the GPU-seconds of
    the Jobs that finished in the window."""

    by_size: dict[int, list[float]] = field(default_factory=lambda: {s: [] for s in SIZES})
    all: list[float] = field(default_factory=list)
    jct: list[float] = field(default_factory=list)
    never: int = 0
    weighted_wait: float = 0.0
    weights: float = 0.0
    completed_gpu_s: float = 0.0


def _training_waits(result: Result, lo: float, hi: float) -> _Waits:
    out = _Waits()
    for record in result.jobs:
        job = record.job
        if not lo <= job.submit_s < hi:
            continue
        if record.first_admitted is not None:
            wait = record.first_admitted - job.submit_s
        else:
            wait = hi - job.submit_s  # still queued at the end: a lower bound
            out.never += 1
        out.by_size.setdefault(job.gpus, []).append(wait)
        out.all.append(wait)
        out.weighted_wait += wait * job.gpus * job.duration_s
        out.weights += job.gpus * job.duration_s
        if record.finished is not None:
            out.jct.append(record.finished - job.submit_s)
    for record in result.jobs:
        if record.finished is not None and lo <= record.finished < hi:
            out.completed_gpu_s += record.job.gpus * record.job.duration_s
    return out


def _wait_figures(w: _Waits) -> dict[str, Any]:
    return {
        "wait_p50_min": percentile(w.all, 50) / 60,
        "wait_p90_min": percentile(w.all, 90) / 60,
        "wait_p99_min": percentile(w.all, 99) / 60,
        **{f"wait_p90_min_{s}gpu": percentile(w.by_size.get(s, []), 90) / 60 for s in SIZES},
        **{f"wait_p50_min_{s}gpu": percentile(w.by_size.get(s, []), 50) / 60 for s in SIZES},
        **{f"wait_p99_min_{s}gpu": percentile(w.by_size.get(s, []), 99) / 60 for s in SIZES},
        "wait_gpu_hour_weighted_mean_min": w.weighted_wait / w.weights / 60 if w.weights else 0.0,
        "jobs": len(w.all),
        "jobs_never_admitted": w.never,
        "jct_mean_h": (statistics.fmean(w.jct) / HOUR) if w.jct else float("nan"),
        "training_gpu_hours_completed": w.completed_gpu_s / HOUR,
    }


def _session_hours(result: Result) -> float:
    return max(result.session_seconds / HOUR, 1e-9)


def _ratio(counters: Mapping[str, float], top: str, bottom: str) -> float:
    """counters[top] ÷ counters[bottom], 0 where the bottom is none."""
    return counters.get(top, 0.0) / counters[bottom] if counters.get(bottom) else 0.0


def _session_figures(result: Result, lo: float, hi: float) -> dict[str, Any]:
    """Spawns, shares, unplaceable Jobs, ways up, reclaims and restores in the window."""
    # Spawns still waiting at the end count with their wait so far (a lower bound).
    spawns = [*result.spawn_waits, *result.unserved_spawns]
    spawn = [w for requested, w, _again in spawns if lo <= requested < hi]
    respawn = [w for requested, w, again in result.spawn_waits if again and lo <= requested < hi]
    reclaims = [r for r in result.reclaims if lo <= r["t"] < hi]
    restore = [w for back, w in result.restore_waits if lo <= back < hi]
    per100 = 100 / _session_hours(result)
    ways_up = sum(1 for t in result.ways_up if lo <= t < hi)
    ways_up_lost = sum(1 for t in result.ways_up_lost if lo <= t < hi)
    return {
        "spawn_wait_mean_min": (statistics.fmean(spawn) / 60) if spawn else 0.0,
        "spawn_wait_p90_min": percentile(spawn, 90) / 60 if spawn else 0.0,
        "spawns_unserved": sum(1 for r, _w, _a in result.unserved_spawns if lo <= r < hi),
        "share_slowdown": _ratio(result.counters, "share_slowdown_s", "share_burst_s"),
        "jobs_unplaceable": sum(1 for since, _u, _g in result.unplaced_jobs if lo <= since < hi),
        "unplaced_job_gpu_h": sum(
            _overlap(since, until, lo, hi) * gpus for since, until, gpus in result.unplaced_jobs
        )
        / HOUR,
        "notebooks_unplaceable": result.counters.get("unplaceable_notebooks", 0),
        "advice_oversize": _ratio(result.counters, "advised_gib", "need_sized_gib"),
        "ways_up_per_100h": ways_up * per100,
        "respawns": len(respawn),
        "reclaims_per_100h": len(reclaims) * per100,
        # A kernel that hits its share's cap loses its work as a reclaimed server does, unless
        # its state is kept (L4): an active session interrupted is one that lost its state.
        "interrupted_per_100h": (sum(1 for r in reclaims if r["interrupted"]) + ways_up_lost)
        * per100,
        "moved_per_100h": (sum(1 for r in reclaims if r.get("moved")) + ways_up - ways_up_lost)
        * per100,
        "restore_wait_p90_min": percentile(restore, 90) / 60 if restore else 0.0,
        "lost_user_h_per_100h": result.lost_user_s / HOUR * per100,
    }


def mean_ci(values: Iterable[float]) -> tuple[float, float]:
    """Mean and half-width of its 95% t interval (NaN values dropped)."""
    xs = [v for v in values if not math.isnan(v)]
    if not xs:
        return float("nan"), float("nan")
    if len(xs) == 1:
        return xs[0], float("nan")
    return statistics.fmean(xs), t95(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))


def paired_difference(
    runs: Sequence[Mapping[str, Any]], policy: str, baseline: str, key: str
) -> tuple[float, float]:
    """Mean and 95% half-width of ``policy − baseline`` on the same seeds."""
    by_seed = {(r["policy"], r["seed"]): r for r in runs}
    diffs = [
        by_seed[(policy, seed)][key] - by_seed[(baseline, seed)][key]
        for (p, seed) in by_seed
        if p == policy and (baseline, seed) in by_seed
    ]
    return mean_ci(diffs)

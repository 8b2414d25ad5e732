"""Effective capacity: the smallest cluster on which a rung meets every service level at once,
and the multipliers between rungs with a paired bootstrap interval over the seeds.

Service levels (:class:`Levels`), each on the mean over the seeds of a run's figure:

- training wait p90 ≤ 30 min (the GPU-hour-weighted mean wait is reported beside it);
- notebook spawn wait p90 ≤ 5 min (spawns still waiting at the end count with their wait
  so far);
- active sessions interrupted (a server stopped while its user comes back to it) ≤ 5 per 100
  session-hours: about once a week for someone with four hours of notebook sessions a day.

A size's *ratio* is the largest of figure ÷ limit; it meets the levels when the ratio is ≤ 1.
Sizes are whole GPUs of the training pools on a geometric grid around the organisation's own
size; the search bisects the grid (the ratio falls as the cluster grows) and interpolates the
ratio linearly between the last size that fails and the first that meets. The bootstrap
resamples the seeds (the same resample for both rungs of a multiplier: the traces are paired)
and repeats the interpolation on the sizes the search ran.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from . import ladder
from .metrics import summarize
from .organisations import OrgSpec, load
from .run import DEFAULT_POLICY
from .sim import Simulation

GRID = (
    0.5, 0.56, 0.63, 0.71, 0.8, 0.9, 1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.25, 2.5, 2.8, 3.2,
    3.6, 4.0,
)  # fmt: skip
"""Cluster sizes searched, × the organisation's training GPUs (about 12% apart)."""


@dataclass(frozen=True)
class Levels:
    training_p90_min: float = 30.0
    spawn_p90_min: float = 5.0
    interrupted_per_100h: float = 5.0

    def limits(self, *, interruptions: bool = True) -> dict[str, float]:
        out = {"wait_p90_min": self.training_p90_min, "spawn_wait_p90_min": self.spawn_p90_min}
        if interruptions:
            out["interrupted_per_100h"] = self.interrupted_per_100h
        return out


@dataclass(frozen=True)
class RunSpec:
    """One replay: an organisation's rung at a size, on one seed's trace."""

    org: str
    """``--org``'s value (a name of orgs/ or a file), read again in each worker."""
    rung: str
    gpus: int
    seed: int
    split: float = ladder.COHORT_NOTEBOOK_SHARE
    days: float = 1.0
    burn_in_h: float = 24.0
    policy_file: str = str(DEFAULT_POLICY)
    demand: tuple[tuple[str, float], ...] = ()
    """Demand figures changed from the file's (the sensitivity sweeps)."""
    checkpoint_min: float = 15.0
    idle_timeout_min: float = 60.0
    """jupyterhub-idle-culler's timeout on the idle-culler rungs (the frontier moves it)."""


def spec_of(run: RunSpec) -> OrgSpec:
    spec = _load(run.org)
    return spec.with_demand(**dict(run.demand)) if run.demand else spec


_SPECS: dict[str, OrgSpec] = {}


def _load(org: str) -> OrgSpec:
    if org not in _SPECS:
        _SPECS[org] = load(org)
    return _SPECS[org]


def reserved_gpu_equivalents(world: ladder.World, rung: ladder.Rung) -> float:
    """B0's per-user reservations: its notebook quota, held all the time."""
    if rung.structure != "reserved":
        return 0.0
    return float(
        sum(
            q.nominal
            for cq in world.org.cluster_queues.values()
            if cq.name.endswith("-notebooks")
            for (_f, r), q in cq.quotas.items()
            if r == "nvidia.com/gpu"
        )
    )


def simulate_run(run: RunSpec, events: Any = None) -> Any:
    spec = spec_of(run)
    rung = ladder.RUNGS[run.rung]
    world = ladder.world(spec, run.rung, run.gpus, run.split)
    trace = ladder.trace(spec, run.seed, days=run.days, burn_in_h=run.burn_in_h)
    return Simulation(
        trace,
        world.org,
        world.catalog,
        ladder.policy(rung, run.policy_file, run.idle_timeout_min),
        fractions=world.fractions,
        events=events,
        checkpoint_s=run.checkpoint_min * 60 if run.checkpoint_min > 0 else None,
        share_steps=ladder.SHARE_STEPS if rung.placed else None,
        advice=rung.placed,
        history=ladder.warm_history(spec, trace) if rung.placed else None,
        run_info={
            "org": spec.name,
            "rung": run.rung,
            "gpus_size": run.gpus,
            "split": run.split,
            "reserved_gpu_equivalents": reserved_gpu_equivalents(world, rung),
        },
    ).run()


def run_one(run: RunSpec, events: Any = None) -> dict[str, Any]:
    """The run's figures (:func:`.metrics.summarize`), with what it was; reserved GPUs (B0)
    count as allocated all the time, as a reservation holds them."""
    result = simulate_run(run, events)
    figures = summarize(result)
    rung = ladder.RUNGS[run.rung]
    if rung.structure == "reserved":
        world = ladder.world(spec_of(run), run.rung, run.gpus, run.split)
        figures["allocation_share"] = figures[
            "training_allocation_share"
        ] + reserved_gpu_equivalents(world, rung) / float(result.org.gpu_equivalents)
    for key in ("wait_samples_min", "allocated_by_bin", "busy_by_bin"):
        figures.pop(key, None)
    figures.update(rung=run.rung, gpus_size=run.gpus, split=run.split, seed=run.seed)
    return figures


def run_many(runs: Sequence[RunSpec], workers: int) -> list[dict[str, Any]]:
    if workers <= 1 or len(runs) <= 1:
        return [run_one(r) for r in runs]
    with ProcessPoolExecutor(min(workers, len(runs))) as pool:
        return list(pool.map(run_one, runs, chunksize=1))


Figures = Mapping[int, Mapping[float, Sequence[Mapping[str, Any]]]]
"""Size → split → the runs of every seed, in seed order."""


def ratio(
    runs_by_split: Mapping[float, Sequence[Mapping[str, Any]]],
    limits: Mapping[str, float],
    pick: Sequence[int] | None = None,
) -> float:
    """The size's ratio: the largest mean figure ÷ limit, over the seeds ``pick`` (indices;
    default all), for the best split."""
    best = math.inf
    for runs in runs_by_split.values():
        chosen = [runs[i] for i in pick] if pick is not None else list(runs)
        worst = 0.0
        for key, limit in limits.items():
            values = [float(r[key]) for r in chosen]
            mean = sum(values) / len(values)
            worst = max(worst, mean / limit if limit > 0 else math.inf)
        best = min(best, worst)
    return best


def crossing(points: Sequence[tuple[int, float]]) -> float:
    """The size where the ratio falls to 1, interpolated between the probed sizes (sorted);
    the smallest probed size if it already meets; inf if none does."""
    points = sorted(points)
    for i, (g, r) in enumerate(points):
        if r <= 1.0:
            if i == 0:
                return float(g)
            g0, r0 = points[i - 1]
            return g0 + (g - g0) * (r0 - 1.0) / (r0 - r) if r0 != r else float(g)
    return math.inf


@dataclass
class Search:
    """The capacity search of one rung: the sizes it ran and their runs."""

    rung: str
    sizes: dict[int, dict[float, list[dict[str, Any]]]] = field(default_factory=dict)

    def points(
        self, limits: Mapping[str, float], pick: Sequence[int] | None = None
    ) -> list[tuple[int, float]]:
        return [(g, ratio(by_split, limits, pick)) for g, by_split in sorted(self.sizes.items())]

    def capacity(self, limits: Mapping[str, float], pick: Sequence[int] | None = None) -> float:
        return crossing(self.points(limits, pick))

    def meeting_size(self, limits: Mapping[str, float]) -> int | None:
        """The smallest size run that meets the levels."""
        for g, r in self.points(limits):
            if r <= 1.0:
                return g
        return None

    def best_split(self, size: int, limits: Mapping[str, float]) -> float:
        by_split = self.sizes[size]
        return min(by_split, key=lambda s: ratio({s: by_split[s]}, limits))


def grid_sizes(reference: int) -> list[int]:
    return sorted({max(1, round(k * reference)) for k in GRID})


class _Bisection:
    """One rung's search over the grid: first for the training and spawn levels (they fall as
    the cluster grows), then, from the size found, for all levels (the interruption level
    only adds to them); then the size above each bracket, so that a bootstrap resample that
    needs one more step finds it."""

    def __init__(self, grid: Sequence[int], phases: Sequence[Mapping[str, float]]) -> None:
        self.grid = grid
        self.phases = list(phases)
        self.phase = 0
        self.lo, self.hi = 0, len(grid) - 1
        """Grid indices still open: every size below ``lo`` fails, ``hi`` meets (or is the
        top of the grid, not run yet)."""
        self.found: list[int] = []
        self.extras: list[int] | None = None

    def next(self, search: Search, start: int) -> int | None:
        """The next grid index to run, or None when done."""
        run = search.sizes
        while self.phase < len(self.phases):
            limits = self.phases[self.phase]
            if not run:
                return start
            for j in range(self.lo, self.hi + 1):  # what was run already narrows the range
                if self.grid[j] in run:
                    if ratio(run[self.grid[j]], limits) <= 1.0:
                        self.hi = j
                        break
                    self.lo = j + 1
            if self.lo < self.hi:
                i = (self.lo + self.hi) // 2
            elif self.lo == self.hi and self.grid[self.hi] not in run:
                i = self.hi  # the top of the grid, not run yet
            else:
                meets = self.lo == self.hi and ratio(run[self.grid[self.hi]], limits) <= 1.0
                self.found.append(self.hi if meets else len(self.grid))
                self.phase += 1
                self.lo, self.hi = min(self.found[-1], len(self.grid) - 1), len(self.grid) - 1
                if not meets:
                    self.phase = len(self.phases)  # no size meets: none meets all either
                continue
            if self.grid[i] not in run:
                return i
            if ratio(run[self.grid[i]], limits) <= 1.0:
                self.hi = i
            else:
                self.lo = i + 1
        if self.extras is None:
            self.extras = sorted(
                {f + 1 for f in self.found if f + 1 < len(self.grid)}
                | {f - 1 for f in self.found if 0 < f < len(self.grid)}
            )
        while self.extras:
            i = self.extras.pop(0)
            if self.grid[i] not in run:
                return i
        return None


def search_all(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    *,
    levels: Levels,
    splits: Sequence[float],
    workers: int,
    progress: Callable[[str], None] = lambda _s: None,
) -> dict[str, Search]:
    """Search every rung's effective capacity at once (each round runs one size per rung
    still searching, all seeds and splits, in one batch of worker processes)."""
    reference = spec_of(base).training_gpus
    grid = grid_sizes(reference)
    start = grid.index(min(grid, key=lambda g: abs(g - reference)))
    return _search(
        base,
        rung_names,
        seeds,
        grid,
        start,
        lambda run, g: replace(run, gpus=g),
        levels=levels,
        splits=splits,
        workers=workers,
        progress=progress,
        what=lambda g: f"{g} GPUs",
    )


DEMAND_GRID = (
    0.4, 0.5, 0.56, 0.63, 0.71, 0.8, 0.9, 1.0, 1.12, 1.25, 1.4, 1.6, 1.8, 2.0, 2.25, 2.5, 2.8,
    3.2, 3.6, 4.0,
)  # fmt: skip
"""Demand searched by the dual, × the organisation's (about 12% apart)."""


def demand_key(scale: float) -> int:
    """The dual's grid key of a demand scale: the search's keys grow as the ratio falls (the
    cluster's size does), so a demand is keyed by its negative, in thousandths."""
    return -round(scale * 1000)


def key_demand(key: float) -> float:
    """The demand scale of a key (or of a key interpolated between two); ``-inf`` when no
    demand searched meets the levels."""
    return -key / 1000


def scaled_demand(spec: OrgSpec, scale: float) -> tuple[tuple[str, float], ...]:
    """The organisation's demand × ``scale``: notebook users per GPU and training offered load
    alike (the memory need per session stays as it is)."""
    d = spec.demand
    return (
        ("users_per_gpu", d.users_per_gpu * scale),
        ("training_offered_load", d.training_offered_load * scale),
    )


def search_demand(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    *,
    levels: Levels,
    splits: Sequence[float],
    workers: int,
    gpus: int | None = None,
    progress: Callable[[str], None] = lambda _s: None,
) -> dict[str, Search]:
    """The dual of :func:`search_all`: on a cluster of ``gpus`` training GPUs (default the
    organisation's own), the largest demand (:func:`scaled_demand`) each rung serves within the
    levels. The searches are keyed by :func:`demand_key`: their ``capacity`` is a key, which
    :func:`key_demand` turns back into the demand served."""
    spec = spec_of(base)
    size = gpus or spec.training_gpus
    grid = sorted(demand_key(x) for x in DEMAND_GRID)
    start = grid.index(demand_key(1.0))

    def at(run: RunSpec, key: int) -> RunSpec:
        demand = dict(run.demand) | dict(scaled_demand(spec, key_demand(key)))
        return replace(run, gpus=size, demand=tuple(demand.items()))

    return _search(
        base,
        rung_names,
        seeds,
        grid,
        start,
        at,
        levels=levels,
        splits=splits,
        workers=workers,
        progress=progress,
        what=lambda k: f"{key_demand(k):g}× demand",
    )


def _search(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    grid: Sequence[int],
    start: int,
    at: Callable[[RunSpec, int], RunSpec],
    *,
    levels: Levels,
    splits: Sequence[float],
    workers: int,
    progress: Callable[[str], None],
    what: Callable[[int], str],
) -> dict[str, Search]:
    """Bisect ``grid`` (keys along which the ratio falls) for every rung at once; ``at`` makes
    a rung's run at a key."""
    searches = {r: Search(r) for r in rung_names}
    phases = [levels.limits(interruptions=False), levels.limits()]
    bisections = {r: _Bisection(grid, phases) for r in rung_names}
    while True:
        pending = {
            r: i for r in rung_names if (i := bisections[r].next(searches[r], start)) is not None
        }
        if not pending:
            return searches
        batch: list[tuple[int, RunSpec]] = []
        for r, i in pending.items():
            rung = ladder.RUNGS[r]
            for split in splits if rung.split_chosen else (ladder.COHORT_NOTEBOOK_SHARE,):
                batch += [
                    (grid[i], at(replace(base, rung=r, seed=s, split=split), grid[i]))
                    for s in seeds
                ]
        progress(
            f"  {len(batch)} runs: "
            + ", ".join(f"{r} at {what(grid[i])}" for r, i in sorted(pending.items()))
        )
        results = run_many([run for _key, run in batch], workers)
        for (key, _run), res in zip(batch, results, strict=True):
            by_split = searches[res["rung"]].sizes.setdefault(key, {})
            by_split.setdefault(res["split"], []).append(res)
        for search in searches.values():
            for by_split in search.sizes.values():
                for runs in by_split.values():
                    runs.sort(key=lambda x: seeds.index(x["seed"]))


def interval(
    search: Search,
    seeds: int,
    limits: Mapping[str, float],
    *,
    resamples: int = 2000,
    seed: int = 20261203,
) -> tuple[float, float]:
    """A 95% bootstrap interval of ``search``'s capacity (its key) over the seeds."""
    rng = random.Random(seed)
    picks = [[rng.randrange(seeds) for _ in range(seeds)] for _ in range(resamples)]
    values = sorted(search.capacity(limits, p) for p in picks)
    return values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1))]


@dataclass(frozen=True)
class Multiplier:
    rung: str
    baseline: str
    value: float
    low: float
    high: float


def bootstrap(
    searches: Mapping[str, Search],
    baselines: Iterable[str],
    seeds: int,
    limits: Mapping[str, float],
    *,
    resamples: int = 2000,
    seed: int = 20261203,
) -> list[Multiplier]:
    """Each rung's multiplier against each baseline (baseline capacity ÷ the rung's), with a
    paired bootstrap 95% interval over the seeds."""
    rng = random.Random(seed)
    picks = [[rng.randrange(seeds) for _ in range(seeds)] for _ in range(resamples)]
    caps = {r: [s.capacity(limits, p) for p in picks] for r, s in searches.items()}
    point = {r: s.capacity(limits) for r, s in searches.items()}
    out = []
    for base in baselines:
        if base not in searches:
            continue
        for r in searches:
            ratios = sorted(
                q
                for b, x in zip(caps[base], caps[r], strict=True)
                if not math.isnan(q := _divide(b, x))
            )
            if not ratios:
                ratios = [math.nan]
            out.append(
                Multiplier(
                    r,
                    base,
                    _divide(point[base], point[r]),
                    ratios[int(0.025 * (len(ratios) - 1))],
                    ratios[int(0.975 * (len(ratios) - 1))],
                )
            )
    return out


def _divide(a: float, b: float) -> float:
    if math.isinf(a) and math.isinf(b):
        return math.nan
    if math.isinf(b):
        return 0.0
    return a / b if b else math.inf


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))

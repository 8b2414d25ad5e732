"""Effective capacity: the smallest cluster on which a rung meets every service level at once,
and the multipliers between rungs with a paired bootstrap interval over the seeds.

Service levels (:class:`Levels`), each on the mean over the seeds of a run's figure:

- training wait p90 ≤ 30 min, Jobs counted alike (three in four are 1-GPU Jobs);
- the large-Job level: the training wait's GPU-hour-weighted mean ≤ 30 min (each Job
  weighted by the GPU-hours it asks, Jobs never started counting with their wait so far), so
  that a rung cannot meet the p90 by starving the 8-GPU Jobs;
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

import atexit
import functools
import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from . import brain, ladder
from .metrics import summarize
from .organisations import OrgSpec, load
from .run import DEFAULT_POLICY
from .sim import KeptState, Simulation

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
    restore_p90_min: float = 2.0
    """(L4) the wait from a user's return (or move) to their kernel state back, p90: the
    other rungs restore nothing (their users re-run the notebook: an interruption)."""
    large_job_wait_min: float = 30.0
    """The large-Job level: the training wait's GPU-hour-weighted mean (each Job weighted by
    the GPU-hours it asks; Jobs never started count with their wait so far). Chosen over the
    8-GPU Jobs' p90 because it counts every size by what it asks and is not a percentile of
    a handful of Jobs a day (5% of Jobs ask 8 GPUs: 23% of the GPU-hours asked, sizes and
    durations being drawn apart)."""

    def limits(self, *, interruptions: bool = True) -> dict[str, float]:
        out = {
            "wait_p90_min": self.training_p90_min,
            "wait_gpu_hour_weighted_mean_min": self.large_job_wait_min,
            "spawn_wait_p90_min": self.spawn_p90_min,
            "restore_wait_p90_min": self.restore_p90_min,
        }
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
    throttle: str = "contended"
    """HAMi's compute limit on the shares rungs: ``contended`` (its default: only while
    another container on the card is busy) or ``always`` (a sensitivity)."""
    kept: KeptState = field(default_factory=KeptState)
    """L4's costs and the share of sessions whose state cannot be saved."""


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


@functools.lru_cache(maxsize=64)
def _trace(spec: OrgSpec, seed: int, days: float, burn_in_h: float) -> Any:
    """A seed's trace, made once per worker process: every rung and size replays it."""
    return ladder.trace(spec, seed, days=days, burn_in_h=burn_in_h)


def simulate_run(run: RunSpec, events: Any = None, diagnose: bool = False) -> Any:
    spec = spec_of(run)
    rung = ladder.RUNGS[run.rung]
    world = ladder.world(spec, run.rung, run.gpus, run.split)
    trace = _trace(spec, run.seed, run.days, run.burn_in_h)
    if not rung.notebooks:  # the training-alone floor
        trace = replace(trace, sessions=())
    return Simulation(
        trace,
        world.org,
        world.catalog,
        ladder.policy(rung, run.policy_file, run.idle_timeout_min),
        fractions=world.fractions,
        events=events,
        checkpoint_s=run.checkpoint_min * 60 if run.checkpoint_min > 0 else None,
        share_steps=ladder.SHARE_STEPS if rung.shares else None,
        advice=rung.placed,
        history=ladder.warm_history(spec, trace) if rung.placed else None,
        throttle=run.throttle,
        kept=run.kept if rung.kept else None,
        cards_per_node=cards_per_node(spec),
        tas=rung.tas_modes,
        diagnose=diagnose or events is not None,  # an events file carries the cards' state
        run_info={
            "org": spec.name,
            "rung": run.rung,
            "gpus_size": run.gpus,
            "split": run.split,
            "reserved_gpu_equivalents": reserved_gpu_equivalents(world, rung),
        },
    ).run()


def cards_per_node(spec: OrgSpec) -> dict[str, int]:
    """The GPUs of a node of each training pool (its flavor): the scheduler places a pod's
    GPUs on one node, on every rung."""
    return {p.name: p.gpus_per_node for p in spec.training_pools}


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


def run_key(run: RunSpec) -> tuple[Any, ...]:
    """What decides a run's figures: the same key, the same figures (the demand as the
    organisation it makes, a knob only on the rungs it acts on)."""
    rung = ladder.RUNGS[run.rung]
    return (
        spec_of(run),
        SAME_RUNS.get(run.rung, run.rung),
        run.gpus,
        run.seed,
        run.split if rung.split_chosen else None,
        run.days,
        run.burn_in_h,
        run.policy_file if rung.culler == "gpuaas" else None,
        run.idle_timeout_min if rung.culler in ("idle-60", "idle-best") else None,
        run.checkpoint_min,
        run.throttle if rung.shares else None,
        run.kept if rung.kept else None,
    )


SAME_RUNS = {"L1c": "L1i"}
"""Rungs whose runs are another's (L1c at a timeout is L1i at it), so that a
run is made once whichever rung asks for it."""

_DONE: dict[tuple[Any, ...], dict[str, Any]] = {}
"""Every run's figures by :func:`run_key`: the sweep, the dual and the frontier reuse the
ladder's runs where they are the same."""
_POOL: list[tuple[int, ProcessPoolExecutor]] = []


def _pool(workers: int) -> ProcessPoolExecutor:
    """One pool of worker processes for the whole command (each keeps its traces)."""
    if _POOL and _POOL[0][0] != workers:
        close_pool()
    if not _POOL:
        _POOL.append((workers, ProcessPoolExecutor(workers, initializer=brain.memoise_readers)))
    return _POOL[0][1]


@atexit.register
def close_pool() -> None:
    while _POOL:
        _POOL.pop()[1].shutdown()


def _cost(run: RunSpec) -> int:
    """A run's rough cost rank (the reclaim loop's rungs the dearest), so that a batch starts
    with its longest runs and ends without one worker left alone on a long one."""
    rung = ladder.RUNGS[run.rung]
    return 2 * (rung.culler == "gpuaas") + rung.placed + rung.kept


def run_many(runs: Sequence[RunSpec], workers: int) -> list[dict[str, Any]]:
    keys = [run_key(r) for r in runs]
    todo: dict[tuple[Any, ...], RunSpec] = {}
    for key, run in zip(keys, runs, strict=True):
        if key not in _DONE:
            todo.setdefault(key, run)
    order = sorted(todo, key=lambda k: -_cost(todo[k]))
    if workers <= 1 or len(order) <= 1:
        with brain.memoised_readers():
            results = [run_one(todo[k]) for k in order]
    else:
        results = list(_pool(workers).map(run_one, [todo[k] for k in order], chunksize=1))
    _DONE.update(zip(order, results, strict=True))
    return [{**_DONE[k], "split": r.split, "rung": r.rung} for k, r in zip(keys, runs, strict=True)]


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
            values = [float(r.get(key, 0.0)) for r in chosen]  # none: nothing to wait for
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


COVER_STEPS = 3
"""Sizes a search adds at most, each way, for bootstrap resamples that cross beyond its
sizes (a resample that still fails at the largest size run has no crossing: its capacity is
infinite, and an interval that reaches it says so; one that already meets at the smallest
takes the smallest)."""
RESAMPLES = 2000
BOOTSTRAP_SEED = 20261203


def resample_picks(
    seeds: int, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> list[list[int]]:
    """The bootstrap's resamples of ``seeds`` seeds (indices), the same for every rung."""
    rng = random.Random(seed)
    return [[rng.randrange(seeds) for _ in range(seeds)] for _ in range(resamples)]


class _Bisection:
    """One rung's search over the grid: first for the training and spawn levels (they fall as
    the cluster grows), then, from the size found, for all levels (the interruption level
    only adds to them); then the size above each bracket, so that a bootstrap resample that
    needs one more step finds it.

    Without a guess the first phase bisects the whole grid from ``start``. With one (the
    size a related search found: the parent rung's, the organisation's own demand's) it
    gallops from the guess, 1, 2, 4, ... grid steps up while the size fails or down while it
    meets, and bisects the bracket found: three sizes when the guess is right. The second
    phase starts from the first's size; if that fails the interruption level it runs the top
    of the grid next (an idle-culler interrupts at the same rate on any cluster size, so no
    size meets), and bisects only if the top meets."""

    def __init__(
        self,
        grid: Sequence[int],
        phases: Sequence[Mapping[str, float]],
        guess: int | None = None,
        picks: Sequence[Sequence[int]] = (),
    ) -> None:
        self.grid = grid
        self.picks = picks
        """The bootstrap's resamples (seed indices), whose crossings the sizes run cover."""
        self.covered_up = self.covered_down = 0
        self.phases = list(phases)
        self.phase = 0
        self.guess = guess
        """A grid index to gallop from, or None to bisect from the start."""
        self.found: list[int] = []
        """Per phase done, the grid index of the smallest size that meets (len(grid): none)."""
        self.extras: list[int] | None = None

    def _bounds(self, search: Search, limits: Mapping[str, float]) -> tuple[int, int | None]:
        """The largest grid index run that fails (-1: none) and the smallest that meets."""
        fails, meets = -1, None
        for j, g in enumerate(self.grid):
            if g in search.sizes:
                if ratio(search.sizes[g], limits) <= 1.0:
                    meets = j if meets is None else meets
                else:
                    fails = j
        if meets is not None and fails > meets:  # not monotone (noise): trust the larger size
            later = [
                j
                for j, g in enumerate(self.grid)
                if j > fails and g in search.sizes and ratio(search.sizes[g], limits) <= 1.0
            ]
            meets = later[0] if later else None
        return fails, meets

    def _probe(self, fails: int, meets: int | None, anchor: int, gallop: bool) -> int | None:
        """The next index of a phase, or None when its bracket is closed."""
        top = len(self.grid) - 1
        if meets is None:
            if fails >= top:
                return None
            if fails < 0:
                return anchor
            if not gallop:
                return (fails + 1 + top) // 2 if fails + 1 < top else top
            return min(top, fails + max(1, fails - anchor + 1))
        if meets - fails <= 1:
            return None
        if fails < 0:
            if meets == 0:
                return None
            if not gallop:
                return meets // 2 if meets > 1 else 0
            return max(0, meets - max(1, anchor - meets + 1))
        return (fails + meets) // 2

    def next(self, search: Search, start: int) -> int | None:
        """The next grid index to run, or None when done."""
        run = search.sizes
        top = len(self.grid) - 1
        while self.phase < len(self.phases):
            limits = self.phases[self.phase]
            fails, meets = self._bounds(search, limits)
            if self.phase == 0:
                anchor = start if self.guess is None else self.guess
                i = self._probe(fails, meets, anchor, gallop=self.guess is not None)
            else:
                anchor = self.found[0]
                if meets is None and fails < top and self.grid[top] not in run:
                    i = top  # does any size meet the interruption level?
                else:
                    i = self._probe(fails, meets, anchor, gallop=False)
            if i is not None and self.grid[i] not in run:
                return i
            self.found.append(meets if meets is not None else len(self.grid))
            self.phase += 1
            if meets is None:
                self.phase = len(self.phases)  # no size meets: none meets all either
        if self.extras is None:
            self.extras = sorted(
                {f + 1 for f in self.found if f + 1 < len(self.grid)}
                | {f - 1 for f in self.found if 0 < f < len(self.grid)}
            )
        while self.extras:
            i = self.extras.pop(0)
            if self.grid[i] not in run:
                return i
        return self._cover(search)

    def _cover(self, search: Search) -> int | None:
        """One more size where a bootstrap resample (``picks``) has its crossing beyond the
        sizes run: above the largest if some resample still fails there, below the smallest
        if some already meets there; at most :data:`COVER_STEPS` each way."""
        run = sorted(self.grid.index(g) for g in search.sizes)
        top = len(self.grid) - 1
        for limits, found in zip(self.phases, self.found, strict=False):
            if found >= len(self.grid) or not self.picks:
                continue
            hi, lo, sizes = run[-1], run[0], search.sizes
            up = hi < top and self.covered_up < COVER_STEPS
            if up and any(ratio(sizes[self.grid[hi]], limits, p) > 1.0 for p in self.picks):
                self.covered_up += 1
                return hi + 1
            down = lo > 0 and self.covered_down < COVER_STEPS
            if down and any(ratio(sizes[self.grid[lo]], limits, p) <= 1.0 for p in self.picks):
                self.covered_down += 1
                return lo - 1
        return None


def _quiet(_line: str) -> None:
    pass


@dataclass(frozen=True)
class SearchSettings:
    """How a capacity search runs, the same for the ladder, the sweep, the dual and the
    frontier (each may change ``levels``)."""

    levels: Levels
    """The service levels a size (or a demand) must meet."""
    splits: Sequence[float]
    """The notebook/training splits a rung that chooses its split runs at each size."""
    workers: int
    """Worker processes the runs are spread over."""
    resamples: int = RESAMPLES
    """Bootstrap resamples whose crossings the search makes sure it has run."""
    inherited: Mapping[str, float] = field(default_factory=dict)
    """Rungs that run one split only, this one (the ladder's, for a rung whose parent is not
    searched here)."""
    progress: Callable[[str], None] = _quiet
    """Where a line per batch of runs goes."""


def search_all(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    settings: SearchSettings,
    *,
    guesses: Mapping[str, float] | None = None,
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
        settings,
        what=lambda g: f"{g} GPUs",
        guesses=guesses,
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


def per_demand(key: float) -> float:
    """1 ÷ the demand a dual search's key serves (``inf`` when it serves less than the grid's
    least), so that :func:`bootstrap` divides served demands the right way round: rung ÷
    baseline, unbounded above against a baseline that serves less than the grid."""
    served = key_demand(key)
    return 1.0 / served if math.isfinite(served) and served > 0 else math.inf


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
    settings: SearchSettings,
    *,
    gpus: int | None = None,
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
        settings,
        what=lambda k: f"{key_demand(k):g}× demand",
        guesses=dict.fromkeys(rung_names, float(demand_key(1.0))),
    )


PARENTS = {
    "B1i": "B1",
    "L1i": "L1",
    "L1c": "L1",
    "L4": "L1",
    "L1g": "L1",
    "L2": "L1",
    "L3": "L1",
    "L2o": "L1",
    "Lb": "L1",
    "F0": "L1",
    "L4t": "L1t",
    "L4s": "L1s",
    "F0t": "L1t",
    "F0s": "L1s",
    "L4p": "L1p",
    "F0p": "L1p",
}
"""The rung whose size a rung's search starts from (it adds one mechanism to it), and whose
split it keeps: the one chosen best for the parent at the parent's size (B1i keeps the
partition chosen for B1; the rungs built on L1 the notebook quota chosen for L1)."""


def _nearest(grid: Sequence[int], key: float) -> int:
    return min(range(len(grid)), key=lambda i: abs(grid[i] - key))


def _begin(
    r: str,
    grid: Sequence[int],
    phases: Sequence[Mapping[str, float]],
    guesses: Mapping[str, float],
    searches: Mapping[str, Search],
    bisections: dict[str, _Bisection],
    split_of: dict[str, tuple[float, ...]],
    picks: Sequence[Sequence[int]],
    inherited: Mapping[str, float],
) -> bool:
    """Whether ``r``'s search has begun; it begins (a bisection in ``bisections``) once its
    parent's first phase has ended, from the parent's size and with the split chosen for the
    parent there (unless ``inherited`` gives it one)."""
    if r in bisections:
        return True
    parent = PARENTS.get(r)
    guess = _nearest(grid, guesses[r]) if guesses.get(r) is not None else None
    if parent is not None and parent in searches and r not in guesses:
        if parent not in bisections or not bisections[parent].found:
            return False
        found = bisections[parent].found[0]
        if found < len(grid):
            guess = found
            if ladder.RUNGS[r].split_chosen and r not in inherited:
                split_of[r] = (searches[parent].best_split(grid[found], phases[0]),)
    bisections[r] = _Bisection(grid, phases, guess, picks)
    return True


def splits_of(
    rung: str, splits: Sequence[float], inherited: Mapping[str, float]
) -> tuple[float, ...]:
    """The splits a search runs ``rung`` on (before a parent hands it its own)."""
    if rung in inherited:
        return (inherited[rung],)
    if ladder.RUNGS[rung].split_chosen and splits:
        return tuple(splits)
    return (ladder.COHORT_NOTEBOOK_SHARE,)


def chosen_splits(searches: Mapping[str, Search]) -> dict[str, float]:
    """The split of each rung of ``searches`` that kept its parent's (one split at every
    size run): what the sweep, the dual and the frontier give it where its parent is not
    searched."""
    out = {}
    for r, search in searches.items():
        used = {s for by_split in search.sizes.values() for s in by_split}
        if r in PARENTS and ladder.RUNGS[r].split_chosen and len(used) == 1:
            out[r] = used.pop()
    return out


def _search(
    base: RunSpec,
    rung_names: Sequence[str],
    seeds: Sequence[int],
    grid: Sequence[int],
    start: int,
    at: Callable[[RunSpec, int], RunSpec],
    settings: SearchSettings,
    *,
    what: Callable[[int], str],
    guesses: Mapping[str, float] | None = None,
) -> dict[str, Search]:
    """Bisect ``grid`` (keys along which the ratio falls) for every rung at once; ``at`` makes
    a rung's run at a key. A rung of :data:`PARENTS` whose parent is searched too waits for
    the parent's first phase and gallops from its size (the partitions: on the parent's
    split there); a rung of ``guesses`` gallops from that key; the others bisect from
    ``start``. A rung that chooses its split runs every one of ``splits`` at each key, but
    a rung of ``inherited`` only its split there, and a child only its parent's."""
    searches = {r: Search(r) for r in rung_names}
    levels, inherited = settings.levels, settings.inherited
    phases = [levels.limits(interruptions=False), levels.limits()]
    guesses = guesses or {}
    bisections: dict[str, _Bisection] = {}
    picks = resample_picks(len(seeds), settings.resamples)
    split_of = {r: splits_of(r, settings.splits, inherited) for r in rung_names}

    while True:
        pending = {
            r: i
            for r in rung_names
            if _begin(r, grid, phases, guesses, searches, bisections, split_of, picks, inherited)
            and (i := bisections[r].next(searches[r], start)) is not None
        }
        if not pending:
            if all(r in bisections for r in rung_names):
                return searches
            continue  # a parent just finished: its children begin
        batch: list[tuple[int, RunSpec]] = []
        for r, i in pending.items():
            for split in split_of[r]:
                batch += [
                    (grid[i], at(replace(base, rung=r, seed=s, split=split), grid[i]))
                    for s in seeds
                ]
        settings.progress(
            f"  {len(batch)} runs: "
            + ", ".join(f"{r} at {what(grid[i])}" for r, i in sorted(pending.items()))
        )
        results = run_many([run for _key, run in batch], settings.workers)
        for (key, _run), res in zip(batch, results, strict=True):
            by_split = searches[res["rung"]].sizes.setdefault(key, {})
            by_split.setdefault(res["split"], []).append(res)
        for search in searches.values():
            for by_split in search.sizes.values():
                for runs in by_split.values():
                    runs.sort(key=lambda x: seeds.index(x["seed"]))


@dataclass(frozen=True)
class OpenStack:
    """L1c's choice: each timeout's search, and the timeout chosen."""

    searches: dict[float, Search]
    """jupyterhub-idle-culler's timeout (minutes) → L1c's search at it."""
    chosen: float | None
    """The timeout needing the fewest GPUs while meeting every level (None: none does)."""


def search_best_open(
    base: RunSpec,
    seeds: Sequence[int],
    settings: SearchSettings,
    *,
    guess: float | None = None,
    timeouts: Sequence[float] = ladder.OPEN_TIMEOUTS_MIN,
) -> OpenStack:
    """L1c: L1 + jupyterhub-idle-culler at each of ``timeouts``, searched
    for its effective capacity on every level (from ``guess``, on the split ``inherited``
    gives L1c); the timeout chosen is the one that needs the fewest GPUs (the shorter on a
    tie). The choice is made on the point estimates; the intervals of L1c's multipliers are
    the chosen timeout's (they leave out the choice itself)."""
    full = settings.levels.limits()
    out: dict[float, Search] = {}
    for t in timeouts:
        point = replace(base, idle_timeout_min=t)
        guesses = {"L1c": guess} if guess is not None and math.isfinite(guess) else None
        out[t] = search_all(point, ["L1c"], seeds, settings, guesses=guesses)["L1c"]
    finite = [t for t in timeouts if math.isfinite(out[t].capacity(full))]
    chosen = min(finite, key=lambda t: (out[t].capacity(full), t)) if finite else None
    return OpenStack(out, chosen)


def refine(
    base: RunSpec,
    searches: Mapping[str, Search],
    seeds: Sequence[int],
    settings: SearchSettings,
    runs: Mapping[str, RunSpec] | None = None,
) -> None:
    """Run every whole size between each search's bracket (the last size that fails and the
    first that meets, on every level, else on the training and spawn levels), on the splits
    best at its ends, so that its crossing is interpolated over one GPU rather than a grid
    step (about 12%): rungs a GPU apart can then be told apart, where the seeds allow.
    ``runs``: a rung's own run (L1c: its timeout), else ``base``."""
    batch: list[tuple[str, int, RunSpec]] = []
    for r, search in searches.items():
        bracket = _bracket(search, settings.levels)
        if bracket is None:
            continue
        low, high, limits = bracket
        splits = sorted({s for by in search.sizes.values() for s in by})
        if len(splits) > 1:  # a rung that chooses: the splits best at the bracket's ends
            splits = sorted({search.best_split(low, limits), search.best_split(high, limits)})
        point = (runs or {}).get(r, base)
        batch += [
            (r, g, replace(point, rung=r, gpus=g, seed=s, split=split))
            for g in range(low + 1, high)
            if g not in search.sizes
            for split in splits
            for s in seeds
        ]
    if not batch:
        return
    settings.progress(f"  {len(batch)} runs: the brackets refined to one GPU")
    results = run_many([run for _r, _g, run in batch], settings.workers)
    for (r, g, _run), res in zip(batch, results, strict=True):
        searches[r].sizes.setdefault(g, {}).setdefault(res["split"], []).append(res)
    order = list(seeds)
    for search in searches.values():
        for by_split in search.sizes.values():
            for got in by_split.values():
                got.sort(key=lambda x: order.index(x["seed"]))


def _bracket(search: Search, levels: Levels) -> tuple[int, int, Mapping[str, float]] | None:
    """The last size run that fails and the first that meets, on every level, else (none
    meets there) on the training and spawn levels, with those levels; None where no size
    meets or the smallest run already does."""
    for limits in (levels.limits(), levels.limits(interruptions=False)):
        points = search.points(limits)
        meets = [g for g, x in points if x <= 1.0]
        if not meets:
            continue
        below = [g for g, _x in points if g < meets[0]]
        return (below[-1], meets[0], limits) if below else None
    return None


def interval(
    search: Search,
    seeds: int,
    limits: Mapping[str, float],
    *,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """A 95% bootstrap interval of ``search``'s capacity (its key) over the seeds."""
    picks = resample_picks(seeds, resamples, seed)
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
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    measure: Callable[[float], float] = float,
) -> list[Multiplier]:
    """Each rung's multiplier against each baseline (baseline capacity ÷ the rung's), with a
    paired bootstrap 95% interval over the seeds. ``measure`` turns a search's capacity (its
    key) into the figure divided, smaller the better (:func:`per_demand` for the dual)."""
    picks = resample_picks(seeds, resamples, seed)
    caps = {r: [measure(s.capacity(limits, p)) for p in picks] for r, s in searches.items()}
    point = {r: measure(s.capacity(limits)) for r, s in searches.items()}
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

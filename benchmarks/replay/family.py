"""The organisation family: what each kind of platform team gets, every day and every Job size
counted.

For each organisation of :data:`FAMILY` (``benchmarks/replay/orgs/``) the rungs of
:data:`FAMILY_RUNGS` are searched for their effective capacity on every service level, the
large-Job level included (:class:`.capacity.Levels`), and the page gives:

- **the best open stack**: the one of :data:`OPEN_STACKS` (Kueue's org-wide cohort; with
  Topology Aware Scheduling; with TAS and ``StrictFIFO`` training queues, or with TAS and
  large Jobs first: the settings a platform team turns on so that large Jobs are not
  overtaken) that needs the fewest GPUs while meeting every level; **the product**: the
  best of :data:`PRODUCTS` the same way; the
  headline is the product against the best open stack and against per-user reservations
  (B0), with the paired bootstrap interval over the seeds;
- **every day**: each rung's capacity on each seed alone (a seed is one measured day), the
  median day's multiplier with its bootstrap interval, the share of the way from the best
  open stack to training alone (the floor with the same stack: :data:`FLOORS`) that the
  product closes on the median day, and the worst day: the seed on which the product needs
  the most GPUs, its training and notebook demand, and its floor (no notebook-side lever
  can go below it that day);
- **the diagnosis** at the product's size: the GPU-hours of the day by what holds the cards
  (:data:`.sim.HOLDINGS`), and which level binds just below that size;
- **the goals** set for the family, met or missed, measured and not tuned.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from . import capacity, ladder
from .capacity import Levels, RunSpec, Search, SearchSettings
from .levers import LeverResult, try_levers
from .sim import HOLDINGS
from .trace import HOUR

FAMILY = ("notebook-heavy", "balanced", "training-bound")
"""The organisations of the page's family, each named for whom it describes."""
OPEN_STACKS = ("L1", "L1t", "L1s", "L1p")
"""The open stacks the best is chosen from (L1c, the idle-culler's, is the ladder's: its
timeouts multiply the runs, and on dgx-4 it needed more GPUs than L1)."""
PRODUCTS = ("L4", "L4t", "L4p")
"""The product as shipped with kernel state kept, without and with TAS for its Jobs, and with
large Jobs first (of these, the ones searched)."""
DEFAULT_PRODUCTS = ("L4t", "L4p")
"""The products the default command searches: L4 without TAS needed more GPUs than L4t in
every organisation of the --quick page (25.4 against 18.7, 22.9 against 17.0, 28.8 against
27.2), and the product's runs are the command's dearest (``--family-rungs`` adds it)."""
FLOORS = {"L1": "F0", "L1t": "F0t", "L1s": "F0s", "L1p": "F0p"}
"""Each open stack's training-alone floor: the same queues with no notebook."""
FAMILY_RUNGS = ("B0", *OPEN_STACKS, *DEFAULT_PRODUCTS, *FLOORS.values())
"""The family's rungs by default (and the ladder's: its organisation is one of the family's,
so that its searches are the family's own runs)."""
HOLDING_NAMES = {
    "training": "training Jobs",
    "notebook_burst": "notebooks in a GPU burst",
    "notebook_idle": "notebooks idle (between bursts, away)",
    "free_whole": "free: whole cards",
    "free_scraps": "free: scraps of cards (beside shares)",
    "free_job_waits": "free while a training Job waits for a node",
}
LEVEL_NAMES = {
    "wait_p90_min": "training wait p90",
    "wait_gpu_hour_weighted_mean_min": "the large-Job level (GPU-hour-weighted mean wait)",
    "spawn_wait_p90_min": "spawn wait p90",
    "interrupted_per_100h": "interruptions",
    "restore_wait_p90_min": "restore wait p90",
}


@dataclass(frozen=True)
class Goal:
    text: str
    measured: str
    met: bool | None
    """None: not measured (a rung missing, or no size run meets)."""


@dataclass
class OrgResult:
    """One organisation's searches and what the page derives from them."""

    org: str
    description: str
    searches: dict[str, Search]
    seeds: list[int]
    diagnosis: dict[str, float] = field(default_factory=dict)
    """GPU-hours of the measured day (mean over the seeds) by :data:`HOLDING_NAMES`."""
    diagnosis_size: int | None = None
    day_demand: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Seed → (training GPU-hours submitted in the measured window, notebook session-hours)."""
    levers: list[LeverResult] = field(default_factory=list)
    """The product's levers tried at its size (:mod:`.levers`)."""
    lever_seeds: int = 0


def best_of(
    searches: Mapping[str, Search], names: Sequence[str], limits: Mapping[str, float]
) -> str | None:
    """Of ``names`` searched, the one needing the fewest GPUs on ``limits`` (the first on a
    tie); None where none ran."""
    present = [r for r in names if r in searches]
    if not present:
        return None

    def need(r: str) -> float:
        got = searches[r].capacity(limits)
        return math.inf if math.isnan(got) else got

    return min(present, key=lambda r: (need(r), names.index(r)))


def per_seed(search: Search, seeds: int, limits: Mapping[str, float]) -> list[float]:
    """The rung's capacity on each seed alone (one measured day each)."""
    return [search.capacity(limits, [i]) for i in range(seeds)]


def _ratio(a: float, b: float) -> float:
    if math.isinf(a) and math.isinf(b):
        return math.nan
    if math.isinf(b):
        return 0.0
    return a / b if b else math.inf


def _way(open_: float, product: float, floor: float) -> float:
    """The share of the way from the open stack to its floor that the product closes."""
    if not all(math.isfinite(x) for x in (open_, product, floor)) or open_ <= floor:
        return math.nan
    return (open_ - product) / (open_ - floor)


def _median(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


@dataclass(frozen=True)
class Day:
    """The median day and the worst day of one organisation."""

    median_multiplier: float
    low: float
    high: float
    median_way: float
    worst_seed: int
    worst_product: float
    worst_floor: float
    worst_open: float
    median_ceiling: float = math.nan
    """The median day's open stack ÷ its floor (training alone): the most any notebook-side
    lever could multiply that day."""


def days(
    result: OrgResult, open_rung: str, product: str, limits: Mapping[str, float], resamples: int
) -> Day:
    """The median day's multiplier (open ÷ product, per seed) with a bootstrap interval over
    the seeds, the median day's share of the way to the floor, and the worst day."""
    n = len(result.seeds)
    opens = per_seed(result.searches[open_rung], n, limits)
    prods = per_seed(result.searches[product], n, limits)
    floor_rung = FLOORS[open_rung]
    floors = (
        per_seed(result.searches[floor_rung], n, limits)
        if floor_rung in result.searches
        else [math.nan] * n
    )
    ratios = [_ratio(o, p) for o, p in zip(opens, prods, strict=True)]
    picks = capacity.resample_picks(n, resamples)
    medians = sorted(m for p in picks if not math.isnan(m := _median([ratios[i] for i in p]))) or [
        math.nan
    ]
    ways = [_way(o, p, f) for o, p, f in zip(opens, prods, floors, strict=True)]
    worst = max(range(n), key=lambda i: (prods[i], -i))
    return Day(
        _median(ratios),
        medians[int(0.025 * (len(medians) - 1))],
        medians[int(0.975 * (len(medians) - 1))],
        _median(ways),
        result.seeds[worst],
        prods[worst],
        floors[worst],
        opens[worst],
        _median([_ratio(o, f) for o, f in zip(opens, floors, strict=True)]),
    )


def binding(search: Search, limits: Mapping[str, float], size: int | None) -> str:
    """The level furthest beyond its limit at the largest size run below ``size`` (what
    binds there), with its figure."""
    below = [g for g in search.sizes if size is not None and g < size]
    if not below:
        return "–"
    g = max(below)
    by_split = search.sizes[g]
    runs = min(by_split.values(), key=lambda rs: capacity.ratio({0.0: rs}, limits))
    worst, key = 0.0, ""
    for k, limit in limits.items():
        mean = statistics.fmean(float(r.get(k, 0.0)) for r in runs)
        if limit > 0 and mean / limit > worst:
            worst, key = mean / limit, k
    if not key:
        return "–"
    mean = statistics.fmean(float(r.get(key, 0.0)) for r in runs)
    return f"{LEVEL_NAMES.get(key, key)}: {mean:.1f} against {limits[key]:g} at {g} GPUs"


def diagnose_run(run: RunSpec) -> dict[str, float]:
    """One diagnosis run: GPU-hours of its measured window by what held the cards."""
    result = capacity.simulate_run(run, diagnose=True)
    return {k: v / HOUR for k, v in result.holdings.items()}


def diagnose(
    base: RunSpec, search: Search, size: int, limits: Mapping[str, float], workers: int
) -> dict[str, float]:
    """The product's cards at ``size`` (its split there), mean over the seeds, per day."""
    runs = search.sizes[size]
    split = min(runs, key=lambda s: capacity.ratio({s: runs[s]}, limits))
    todo = [
        replace(base, rung=search.rung, gpus=size, seed=r["seed"], split=split) for r in runs[split]
    ]
    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(workers) as pool:
            got = list(pool.map(diagnose_run, todo))
    else:
        got = [diagnose_run(r) for r in todo]
    per_day = 1.0 / max(base.days, 1e-9)
    return {k: statistics.fmean(g[k] for g in got) * per_day for k in HOLDINGS}


def day_demand(base: RunSpec, seeds: Sequence[int]) -> dict[int, tuple[float, float]]:
    """Each seed's measured-window demand: training GPU-hours submitted, notebook
    session-hours started (from the trace alone)."""
    spec = capacity.spec_of(base)
    out = {}
    for s in seeds:
        trace = capacity._trace(spec, s, base.days, base.burn_in_h)
        lo, hi = trace.burn_in_s, trace.end_s
        training = sum(j.gpus * j.duration_s for j in trace.jobs if lo <= j.submit_s < hi)
        notebooks = sum(x.length_s for x in trace.sessions if lo <= x.start_s < hi)
        out[s] = (training / HOUR, notebooks / HOUR)
    return out


def search_org(
    base: RunSpec,
    org: str,
    rungs: Sequence[str],
    seeds: Sequence[int],
    settings: SearchSettings,
    *,
    refine: bool,
    lever_seeds: int = 0,
) -> OrgResult:
    """One organisation's searches, its days' demand and its diagnosis at the product's size."""
    point = replace(base, org=org)
    searches = capacity.search_all(point, list(rungs), seeds, settings)
    if refine:
        capacity.refine(point, searches, seeds, settings)
    spec = capacity.spec_of(point)
    out = OrgResult(spec.name, spec.description, searches, list(seeds))
    out.day_demand = day_demand(point, seeds)
    full = settings.levels.limits()
    product = best_of(searches, PRODUCTS, full)
    if product is not None:
        size = searches[product].meeting_size(full)
        if size is not None:
            out.diagnosis_size = size
            out.diagnosis = diagnose(point, searches[product], size, full, settings.workers)
            if lever_seeds and ladder.RUNGS[product].kept:
                out.lever_seeds = min(lever_seeds, len(seeds))
                out.levers = try_levers(
                    point, searches[product], size, seeds[: out.lever_seeds], full, settings.workers
                )
    return out


def _num(x: float, digits: int = 1) -> str:
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}f}"


def _cap_cell(search: Search, value: float) -> str:
    """A seed's capacity: a figure, or beyond the sizes run (``> largest``) / at or below the
    smallest (``≤ smallest``)."""
    sizes = sorted(search.sizes)
    if math.isinf(value):
        return f"> {sizes[-1]}" if sizes else "–"
    if sizes and value == sizes[0]:
        return f"≤ {value:.0f}"
    return _num(value)


def _mult(m: capacity.Multiplier | None) -> str:
    if m is None or math.isnan(m.value):
        return "–"
    return f"**{m.value:.2f}×** [{_num(m.low, 2)}–{_num(m.high, 2)}]"


def org_section(result: OrgResult, levels: Levels, resamples: int) -> tuple[str, list[Goal]]:
    """One organisation's part of the page, and its goals."""
    full = levels.limits()
    s = result.searches
    n = len(result.seeds)
    open_rung = best_of(s, OPEN_STACKS, full)
    product = best_of(s, PRODUCTS, full)
    lines = [f"#### `{result.org}`: {result.description}", ""]
    caps = {r: s[r].capacity(full) for r in s}
    lines += [
        "| rung | what | GPUs meeting every level, large-Job level included | on the training p90 "
        "alone (Jobs counted, not weighted) | Jobs submitted in the day and not started by its"
        " end, at that size |",
        "|---|---|---|---|---|",
    ]
    p90_only = {k: v for k, v in full.items() if k not in ("wait_gpu_hour_weighted_mean_min",)}
    for r in s:
        size = s[r].meeting_size(full)
        never = "–"
        if size is not None:
            runs = min(s[r].sizes[size].values(), key=lambda rs: capacity.ratio({0.0: rs}, full))
            never = _num(statistics.fmean(float(x.get("jobs_never_admitted", 0)) for x in runs))
        mark = " ★" if r in (open_rung, product) else ""
        lines.append(
            f"| {r}{mark} | {capacity_text(r)} | {_num(caps[r])} | {_num(s[r].capacity(p90_only))}"
            f" | {never} |"
        )
    lines += [
        "",
        f"★ the best open stack (**{open_rung or '–'}**) and the product (**{product or '–'}**),"
        " each the one of its candidates needing the fewest GPUs on every level (point"
        " estimates). A rung that meets the p90 while its large Jobs starve needs more GPUs in"
        " the first column than in the second.",
        "",
    ]
    goals: list[Goal] = []
    if open_rung is None or product is None:
        return "\n".join(lines), goals
    mults = capacity.bootstrap(
        {r: s[r] for r in (open_rung, product, "B0") if r in s},
        [b for b in (open_rung, "B0") if b in s],
        n,
        full,
        resamples=resamples,
    )
    against = {m.baseline: m for m in mults if m.rung == product}
    day = days(result, open_rung, product, full, resamples)
    lines += [
        f"**Headline**: {product} needs {_num(caps[product])} GPUs, the best open stack"
        f" ({open_rung}) {_num(caps[open_rung])}: {_mult(against.get(open_rung))} against it,"
        f" {_mult(against.get('B0'))} against per-user reservations (B0,"
        f" {_num(caps.get('B0', math.nan))}). On the median day {product} needs"
        f" **{_num(day.median_multiplier, 2)}×** [{_num(day.low, 2)}–{_num(day.high, 2)}] fewer"
        f" GPUs than {open_rung} and closes **{_pct(day.median_way)}** of the way from"
        f" {open_rung} to training alone ({FLOORS[open_rung]}).",
        "",
        "Every day (a seed is one measured day): each rung's GPUs meeting every level on that"
        " day alone.",
        "",
        "| seed | " + " | ".join(s) + " | training GPU-h submitted | notebook session-h |",
        "|---|" + "---|" * (len(s) + 2),
    ]
    seeds_caps = {r: per_seed(s[r], n, full) for r in s}
    for i, seed in enumerate(result.seeds):
        train, nb = result.day_demand.get(seed, (math.nan, math.nan))
        cells = " | ".join(_cap_cell(s[r], seeds_caps[r][i]) for r in s)
        mark = " (worst)" if seed == day.worst_seed else ""
        lines.append(f"| {seed}{mark} | {cells} | {_num(train, 0)} | {_num(nb, 0)} |")
    train_days = [result.day_demand[x][0] for x in result.seeds if x in result.day_demand]
    worst_train = result.day_demand.get(day.worst_seed, (math.nan, math.nan))[0]
    floor = FLOORS[open_rung]
    floor_cell = _cap_cell(s[floor], day.worst_floor) if floor in s else "–"
    lines += [
        "",
        f"**The worst day** is seed {day.worst_seed}: {product} needs"
        f" {_cap_cell(s[product], day.worst_product)} GPUs, {open_rung}"
        f" {_cap_cell(s[open_rung], day.worst_open)}. Training submits"
        f" {_num(worst_train, 0)} GPU-hours that day against a median of"
        f" {_num(_median(train_days), 0)}; with no notebook at all ({FLOORS[open_rung]}) it"
        f" still needs {floor_cell}"
        " GPUs: that is what no notebook-side lever can go below on that day.",
        "",
    ]
    lines += _diagnosis_lines(result, product, full)
    lines += _lever_lines(result, product)
    why = binding(s[product], full, s[product].meeting_size(full))
    goals += _org_goals(result.org, product, open_rung, against, day, why)
    goals.append(
        Goal(
            f"{result.org}: the worst day named, with what no notebook-side lever can do",
            f"seed {day.worst_seed}: {product} {_cap_cell(s[product], day.worst_product)} GPUs,"
            f" {open_rung} {_cap_cell(s[open_rung], day.worst_open)}, training alone"
            f" ({floor}) {floor_cell}",
            True,
        )
    )
    return "\n".join(lines), goals


def capacity_text(rung: str) -> str:
    from .ladder import RUNGS

    return RUNGS[rung].text


def _pct(x: float) -> str:
    return "–" if math.isnan(x) else f"{100 * x:.0f}%"


def _diagnosis_lines(result: OrgResult, product: str, limits: Mapping[str, float]) -> list[str]:
    if not result.diagnosis or result.diagnosis_size is None:
        return ["(The diagnosis: the product meets the levels at no size run.)", ""]
    total = sum(result.diagnosis.values())
    lines = [
        f"**The diagnosis** at the product's size ({product} at {result.diagnosis_size} GPUs,"
        " the smallest size run meeting every level; mean over the seeds): the GPU-hours of"
        f" the day ({_num(total, 0)}) by what holds the cards.",
        "",
        "| held by | GPU-h a day | share |",
        "|---|---|---|",
    ]
    for k in HOLDINGS:
        v = result.diagnosis.get(k, 0.0)
        lines.append(
            f"| {HOLDING_NAMES[k]} | {_num(v, 0)} | {_pct(v / total if total else math.nan)} |"
        )
    lines += [
        "",
        "What binds just below that size: "
        + binding(result.searches[product], limits, result.diagnosis_size)
        + ".",
        "",
    ]
    return lines


def _lever_lines(result: OrgResult, product: str) -> list[str]:
    """The product's levers at its size, and the settings the page recommends for an
    organisation like this one."""
    if not result.levers:
        return ["(The product's levers: not tried: `--lever-seeds 0`, or no size meets.)", ""]
    size = result.levers[0].size
    lines = [
        f"**The product's levers** ({product} at {size} GPUs and one below, on the first"
        f" {result.lever_seeds} seeds; each variant changes one setting of the shipped"
        f" policy file, `idle_after_when_kept: {ladder.KEPT_IDLE_AFTER}`, or of the spawn form's"
        " advice, from the typical need):",
        "",
        f"| variant | at {size - 1} GPUs: training p90 / large-Job level / interrupted per"
        " 100 h | verdict |",
        "|---|---|---|",
    ]
    for r in result.levers:
        f = r.figures_below
        lines.append(
            f"| {r.lever} | {_num(f.get('wait_p90_min', math.nan))} /"
            f" {_num(f.get('wait_gpu_hour_weighted_mean_min', math.nan))} /"
            f" {_num(f.get('interrupted_per_100h', math.nan), 2)} | {r.verdict} |"
        )
    better = [r for r in result.levers if r.better]
    idle = next((r.lever for r in better if r.lever.startswith("idle_after_when_kept")), None)
    advice = next((r.lever for r in better if r.lever.startswith("advice")), None)
    lines += [
        "",
        "For an organisation like this one, the policy file sets"
        f" `{idle or 'idle_after_when_kept: ' + ladder.KEPT_IDLE_AFTER}`"
        + ("" if idle else " (as shipped: no variant tried needs fewer GPUs)")
        + "; the spawn form advises "
        + ("from the largest peak × 1.25" if advice else "from the typical need (as shipped)")
        + "; shares are packed `binpack` (HAMi's node and GPU scheduler policy, the only one the"
        " replay models: a spread policy is not tried).",
        "",
    ]
    return lines


def _org_goals(
    org: str,
    product: str,
    open_rung: str,
    against: Mapping[str, capacity.Multiplier],
    day: Day,
    binds: str = "–",
) -> list[Goal]:
    """The goals set for the family, for ``org``; a missed one says what binds (the level just below
    the product's size) and, for the days, the most any notebook-side lever could reach."""
    goals = []
    if org == "notebook-heavy":
        m = against.get(open_rung)
        goals.append(
            Goal(
                f"{org}: the product ≥ 2.5× the best open stack, lower bound ≥ 2.2",
                f"{product} {_mult(m)} against {open_rung}",
                None if m is None else (m.value >= 2.5 and m.low >= 2.2),
            )
        )
        b = against.get("B0")
        goals.append(
            Goal(
                f"{org}: the product ≥ 5× per-user reservations (B0)",
                f"{product} {_mult(b)}",
                None if b is None else b.value >= 5.0,
            )
        )
    met_way = None if math.isnan(day.median_way) else day.median_way >= 0.85
    goals.append(
        Goal(
            f"{org}: the median day closes ≥ 85% of the way from the best open stack to"
            " training alone",
            f"{_pct(day.median_way)} ({product} from {open_rung} to {FLOORS[open_rung]})"
            + ("" if met_way is not False else f"; what binds: {binds}"),
            met_way,
        )
    )
    if org == "training-bound":
        met = None if math.isnan(day.median_multiplier) else day.median_multiplier >= 1.15
        goals.append(
            Goal(
                f"{org}: the median day ≥ 1.15× the best open stack",
                f"**{_num(day.median_multiplier, 2)}×** [{_num(day.low, 2)}–{_num(day.high, 2)}]"
                + (
                    ""
                    if met is not False
                    else f"; training alone ({FLOORS[open_rung]}) is only"
                    f" {_num(day.median_ceiling, 2)}× {open_rung} on the median day (the most"
                    f" any notebook-side lever could reach); what binds: {binds}"
                ),
                met,
            )
        )
    return goals


def family_section(results: Sequence[OrgResult], levels: Levels, resamples: int) -> str:
    """The page's family section: each organisation's part, then the goals."""
    parts: list[str] = []
    goals: list[Goal] = []
    for r in results:
        text, got = org_section(r, levels, resamples)
        parts.append(text)
        goals += got
    table = ["| goal | measured | met |", "|---|---|---|"]
    for g in goals:
        met = "not measured" if g.met is None else ("yes" if g.met else "**no**")
        table.append(f"| {g.text} | {g.measured} | {met} |")
    return "\n".join(parts) + "\n\n##### The family's goals\n\n" + "\n".join(table)


def holdings_sum(holdings: Mapping[str, Any]) -> float:
    """Every GPU-hour of the window, whatever holds it (a check: it is the capacity × hours)."""
    return float(sum(holdings.values()))

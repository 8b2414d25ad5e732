"""``python -m benchmarks replay``: the utilisation replay.

On a realistic organisation (``--org training-bound``, the default; any file of
benchmarks/replay/orgs/ or a path) it runs the ladder of what teams run, the organisation
family (notebook-heavy, balanced, training-bound) on the family's rungs, and writes
docs/replay.md:

    python -m benchmarks replay                      # the family's rungs and orgs, the page
    python -m benchmarks replay --org dgx-4 --rungs B0,B1,L1,L1c,L1g,L2,L3,L4,F0 --models
    python -m benchmarks replay --org dgx-8 --rungs B1,L1i,L1g,L2,L3 --no-docs
    python -m benchmarks replay --quick --no-docs    # 3 seeds, half a day, one org: a first look
    python -m benchmarks replay --users-per-gpu 2 --memory-median 16 --no-docs
    python -m benchmarks replay --events run.jsonl --rung L2 --size 28 --seed 9137

On the dev cluster's sample organisation (``--org sample``, the functional fixture) it compares
the culler policies on it, as the dev-cluster check replays them:

    python -m benchmarks replay --org sample --seeds 3 --no-sweep
    python -m benchmarks replay --org sample --policies gpuaas --seeds 1 --days 7 --scale 35.7 \
        --no-sweep --fractions 0                     # the 1,000-GPU week (1,142 GPUs)
    python -m benchmarks replay --org sample --policies idle-10 --seed 9137 --events ev.jsonl
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import ladder_report, organisations
from .metrics import summarize
from .report import (
    FRACTIONS_SUFFIX,
    differences,
    fraction_gains,
    smallest_meeting,
    table,
)
from .run import DEFAULT_CATALOG, DEFAULT_POLICY, POLICIES, Task, run_all, simulate

SWEEP_SCALES = (0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25)
SWEEP_POLICIES = ("static", "gpuaas", "gpuaas-fractional")
FRACTION_POLICIES = ("static", "idle-60", "idle-10", "gpuaas")
"""The policies of the fractional scenario (some users on fractions, the others not)."""


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--org",
        default="training-bound",
        help="the organisation: a name of benchmarks/replay/orgs/ ("
        + ", ".join(organisations.available()[1:])
        + "), a path to such a file, or 'sample' (the dev cluster's; the policy comparison)"
        " (default training-bound, the family's: the ladder's searches are the family's)",
    )
    ap.add_argument(
        "--seeds", type=int, default=None, help="seeds 1..N (default 5; 5 for --org sample)"
    )
    ap.add_argument(
        "--seed",
        type=seed_list,
        help="these seeds instead of 1..N: a comma-separated list of integers (e.g. 9137,12)",
    )
    ap.add_argument(
        "--days", type=float, default=1.0, help="measured days after the burn-in (--burn-in-h)"
    )
    ap.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="cluster and demand × this (1 = the sample organisation: 32 physical GPUs, 16 of"
        " them H100s; quotas and pools are rounded down)",
    )
    ap.add_argument(
        "--policies", default=",".join(POLICIES), help=f"comma-separated, of: {', '.join(POLICIES)}"
    )
    ap.add_argument(
        "--policy-file",
        default=str(DEFAULT_POLICY),
        help="the culler's policy file for gpuaas and gpuaas-fractional",
    )
    ap.add_argument("--catalog", default=str(DEFAULT_CATALOG), help="the spawner's catalog file")
    ap.add_argument(
        "--fractions",
        type=float,
        default=0.5,
        help="the fractional scenario: this share of notebook users take fractional offerings"
        " (HAMi memory-capped or time-sliced) where one holds their memory need, under"
        f" {', '.join(FRACTION_POLICIES)}; 0 skips it (default 0.5)",
    )
    ap.add_argument(
        "--no-sweep",
        action="store_true",
        help="skip the sweep (--org sample: its capacity sweep; the ladder: its sensitivity sweep)",
    )
    ap.add_argument(
        "--target-p90-min",
        type=float,
        default=30.0,
        help="p90 training-wait target of the capacity sweep (minutes)",
    )
    ap.add_argument(
        "--events",
        help="write every event of ONE run (the first of --policies, the first seed) as JSON"
        " lines to this file, and print that run's table",
    )
    ap.add_argument("--workers", type=int, default=0, help="processes (default: CPU count)")
    ap.add_argument(
        "--no-docs",
        action="store_true",
        help="print only; leave docs/replay.md as it is (--org sample always prints only)",
    )
    ap.add_argument("--json", help="also write every run's figures to this JSON file")
    ladder_report.add_arguments(ap)
    return ap.parse_args(argv)


def seed_list(text: str) -> list[int]:
    """``9137,12`` → [9137, 12] (argparse type of ``--seed``)."""
    try:
        seeds = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seed given")
    return seeds


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.org != organisations.SAMPLE:
        try:
            return ladder_report.main(args, argv)
        except organisations.OrganisationError as e:
            print(e)
            return 2
    return sample_main(args)


def sample_main(args: argparse.Namespace) -> int:
    """``--org sample``: the culler policies compared on the dev cluster's organisation."""
    args.seeds = args.seeds or 5
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        print(f"no such policy: {', '.join(unknown)}; have {', '.join(POLICIES)}")
        return 2
    common: dict[str, Any] = dict(
        days=args.days,
        policy_file=args.policy_file,
        catalog=args.catalog,
        burn_in_h=6.0 if args.burn_in_h is None else args.burn_in_h,
    )
    seeds = args.seed or list(range(1, args.seeds + 1))
    if args.events:
        return _sample_events(args, policies[0], seeds[0], common)
    tasks = [
        Task(p, s, scale=args.scale, demand=args.scale, **common) for p in policies for s in seeds
    ]
    workers = args.workers or None
    started = time.perf_counter()
    runs = run_all(tasks, workers)
    main_s = time.perf_counter() - started
    print(
        f"{len(tasks)} runs ({len(policies)} policies × {len(seeds)} seeds, {args.days:g} day,"
        f" scale {args.scale:g}) in {main_s:.1f} s; peak RSS"
        f" {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (this process)"
    )
    print(table(runs, policies))
    if "static" in policies and len(policies) > 1:
        print()
        print(differences(runs, policies))
    fractional = _fraction_scenario(args, policies, seeds, common, runs, workers)
    sweep = [] if args.no_sweep else _capacity_sweep(args, policies, seeds, common, runs, workers)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"runs": runs, "fractional": fractional, "sweep": sweep}, default=str)
        )
    return 0


def _sample_events(args: argparse.Namespace, policy: str, seed: int, common: dict[str, Any]) -> int:
    """``--events``: one run's every event to the file, and its table."""
    started = time.perf_counter()
    task = Task(policy, seed, scale=args.scale, demand=args.scale, **common)
    with open(args.events, "w", encoding="utf-8") as f:
        result = simulate(task, events=f)
    print(
        f"events of {task.policy}, seed {task.seed} → {args.events}"
        f" ({time.perf_counter() - started:.1f} s)"
    )
    print(table([summarize(result)], [task.policy]))
    return 0


def _fraction_scenario(
    args: argparse.Namespace,
    policies: Sequence[str],
    seeds: Sequence[int],
    common: dict[str, Any],
    runs: list[dict[str, Any]],
    workers: int | None,
) -> list[dict[str, Any]]:
    """The fractional scenario's runs (some users on fractions), printed with their gains."""
    scenario = [p for p in FRACTION_POLICIES if p in policies]
    if args.fractions <= 0 or not scenario:
        return []
    started = time.perf_counter()
    fractional = run_all(
        [
            Task(p, s, scale=args.scale, demand=args.scale, fractions=args.fractions, **common)
            for p in scenario
            for s in seeds
        ],
        workers,
    )
    fractions_s = time.perf_counter() - started
    for r in fractional:
        r["policy"] += FRACTIONS_SUFFIX
    print(
        f"\nfractional scenario ({len(fractional)} runs, {100 * args.fractions:g}% of users"
        f" take fractions) in {fractions_s:.1f} s:"
    )
    print(table(fractional, [p + FRACTIONS_SUFFIX for p in scenario]))
    print()
    print(fraction_gains(runs + fractional, scenario))
    return fractional


def _capacity_sweep(
    args: argparse.Namespace,
    policies: Sequence[str],
    seeds: Sequence[int],
    common: dict[str, Any],
    runs: list[dict[str, Any]],
    workers: int | None,
) -> list[dict[str, Any]]:
    """The capacity sweep's runs (the cluster scaled, the demand not), printed with each
    policy's smallest cluster meeting the p90 wait target and its multiplier."""
    swept = [p for p in SWEEP_POLICIES if p in policies]
    sweep_tasks = [
        Task(p, s, scale=k * args.scale, demand=args.scale, **common)
        for p in swept
        for s in seeds
        for k in SWEEP_SCALES
        if k != 1.0
    ]
    started = time.perf_counter()
    sweep = run_all(sweep_tasks, workers) + [r for r in runs if r["policy"] in swept]
    sweep_s = time.perf_counter() - started
    sizes: dict[str, float | None] = {}
    for p in swept:
        sizes[p], _curve = smallest_meeting(sweep, p, args.target_p90_min)
    base = sizes.get("static")
    multipliers: dict[str, float | None] = {}
    for p in swept:
        got = sizes.get(p)
        multipliers[p] = base / got if base and got else None
    print(
        f"\ncapacity sweep ({len(sweep_tasks)} more runs) in {sweep_s:.1f} s; smallest"
        f" cluster meeting p90 wait ≤ {args.target_p90_min:g} min:"
    )
    for p in swept:
        got = sizes[p]
        print(
            f"  {p}: {got:.1f} GPUs" if got else f"  {p}: none of the sizes swept",
            f"→ multiplier {multipliers[p]:.2f}" if multipliers.get(p) else "",
        )
    return sweep

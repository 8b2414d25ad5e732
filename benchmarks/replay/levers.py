"""The product's levers, per organisation: variant runs of the product at
its own size and one GPU below, each with one setting of the policy file or of the spawn form
changed, so that the page can say which setting suits an organisation like this one.

Each variant is compared with the product as shipped on the same seeds and sizes (its own
runs, from its search): a variant that meets every level one GPU below where the shipped one
does not needs fewer GPUs; one that misses a level at the product's size where the shipped
one meets needs more; otherwise it changes nothing at this resolution (one GPU, these
seeds), and the page says so. Share packing is not a
variant: HAMi's ``binpack`` node and GPU policy is what every rung places shares with
(:mod:`.placement`), and no other policy is modelled.
"""

from __future__ import annotations

import re
import statistics
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from . import capacity, ladder
from .capacity import RunSpec, Search

IDLE_AFTER_WHEN_KEPT = ("5m", "30m")
"""``idle_after_when_kept`` values tried beside the shipped one
(:data:`.ladder.KEPT_IDLE_AFTER`)."""


@dataclass(frozen=True)
class Lever:
    name: str
    """What the variant sets, as the policy file or the spawn form says it."""
    idle_after_when_kept: str | None = None
    advice_from_need: bool | None = None


LEVERS = (
    *(Lever(f"idle_after_when_kept: {v}", idle_after_when_kept=v) for v in IDLE_AFTER_WHEN_KEPT),
    Lever("advice from the largest of the last peaks × 1.25", advice_from_need=False),
)


def policy_text(text: str, idle_after_when_kept: str) -> str:
    """The policy file ``text`` with every policy's ``idle_after_when_kept`` set to this."""
    text = re.sub(
        r"^(\s*idle_after_when_kept:\s*)\S+", rf"\g<1>{idle_after_when_kept}", text, flags=re.M
    )
    return ladder.kept_policy_text(text, idle_after_when_kept)


def variant_run(base: RunSpec, lever: Lever, folder: Path) -> RunSpec:
    """``base`` (a kept-state rung's run) with the lever's setting."""
    run = base
    if lever.idle_after_when_kept is not None:
        path = folder / f"policy-kept-{lever.idle_after_when_kept}.yaml"
        if not path.exists():
            source = Path(base.policy_file).read_text(encoding="utf-8")
            path.write_text(policy_text(source, lever.idle_after_when_kept), encoding="utf-8")
        run = replace(run, policy_file=str(path))
    if lever.advice_from_need is not None:
        run = replace(run, kept=replace(run.kept, advice_from_need=lever.advice_from_need))
    return run


SHIPPED = "as shipped"


@dataclass(frozen=True)
class LeverResult:
    lever: str
    size: int
    meets_below: bool
    """Meets every level one GPU below the product's size (on the lever seeds)."""
    meets_at: bool
    """Meets every level at the product's size (on the lever seeds)."""
    figures_below: dict[str, float]
    """Mean figures one GPU below (the levels'), for the page."""
    shipped_below: bool = False
    """The product as shipped meets every level one GPU below, on the same seeds."""
    shipped_at: bool = True
    """The product as shipped meets every level at its size, on the same seeds."""

    @property
    def verdict(self) -> str:
        if self.lever == SHIPPED:
            return "the product as shipped, on the same seeds"
        if self.meets_below and not self.shipped_below:
            return "fewer GPUs: meets every level one GPU below, where the shipped one does not"
        if self.shipped_at and not self.meets_at:
            return "more GPUs: misses a level at the product's size, where the shipped one meets"
        return "changes nothing at one GPU's resolution on these seeds"

    @property
    def better(self) -> bool:
        return self.lever != SHIPPED and self.meets_below and not self.shipped_below


def _means(runs: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, float]:
    return {k: statistics.fmean(float(r.get(k, 0.0)) for r in runs) for k in keys}


def try_levers(
    base: RunSpec,
    search: Search,
    size: int,
    seeds: Sequence[int],
    limits: Mapping[str, float],
    workers: int,
    levers: Sequence[Lever] = LEVERS,
) -> list[LeverResult]:
    """Each lever's variant of ``search``'s rung at ``size`` (the product's, meeting every
    level) and ``size`` − 1, on the split the product ran there, over ``seeds`` (the first of
    the search's), after the product as shipped on the same seeds (its own runs)."""
    split_at = search.best_split(size, limits)
    below = size - 1
    split_below = search.best_split(below, limits) if below in search.sizes else split_at
    pick = list(range(len(seeds)))

    def shipped(g: int, split: float) -> list[dict[str, Any]] | None:
        runs = search.sizes.get(g, {}).get(split)
        return [dict(runs[i]) for i in pick] if runs and len(runs) >= len(seeds) else None

    at0, under0 = shipped(size, split_at), shipped(below, split_below)
    if at0 is None or under0 is None:  # the shipped product's runs there: made as the variants'
        base_runs = [
            replace(base, rung=search.rung, gpus=g, seed=s, split=split)
            for g, split in ((size, split_at), (below, split_below))
            for s in seeds
        ]
        got0 = capacity.run_many(base_runs, workers)
        at0, under0 = got0[: len(seeds)], got0[len(seeds) :]
    shipped_at = capacity.ratio({0.0: at0}, limits) <= 1.0
    shipped_below = capacity.ratio({0.0: under0}, limits) <= 1.0
    out = [
        LeverResult(
            SHIPPED,
            size,
            shipped_below,
            shipped_at,
            _means(under0, list(limits)),
            shipped_below,
            shipped_at,
        )
    ]
    with tempfile.TemporaryDirectory(prefix="replay-levers-") as tmp:
        for lever in levers:
            runs = [
                variant_run(
                    replace(base, rung=search.rung, gpus=g, seed=s, split=split),
                    lever,
                    Path(tmp),
                )
                for g, split in ((size, split_at), (below, split_below))
                for s in seeds
            ]
            got = capacity.run_many(runs, workers)
            at, under = got[: len(seeds)], got[len(seeds) :]
            out.append(
                LeverResult(
                    lever.name,
                    size,
                    capacity.ratio({0.0: under}, limits) <= 1.0,
                    capacity.ratio({0.0: at}, limits) <= 1.0,
                    _means(under, list(limits)),
                    shipped_below,
                    shipped_at,
                )
            )
    return out

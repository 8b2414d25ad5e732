"""Placement: the cards that what Kueue admitted on quota actually runs on.

Kueue admits on quota only. On the shares rungs, notebooks take memory-capped shares of the
same cards whole-GPU training Jobs run on, and one quota counts both in GPU-equivalents, so
quota is not placement: a Job of n GPUs can be admitted while the free quota exists only as
scraps of shares on several cards. The scheduler (HAMi's, on the real cluster) then leaves its
pods pending, holding the quota, until n cards are wholly free.

This module is that scheduler's part, pure and card by card:

- a share of ``k`` steps (tenths of a card) goes on the **fullest card that still holds it**
  (best fit; HAMi's ``binpack`` node and GPU policy): shares gather on few cards, and whole
  cards stay whole for training as long as they can;
- a whole-GPU workload of ``n`` GPUs takes ``n`` cards with nothing on them, on any node (the
  other rungs place nothing either: node-level fit is left out of the replay alike);
- what cannot be placed waits, holding its quota; every release tries the waiting ones again,
  by priority, then by admission (the scheduler's queue).

Written for the replay (the product places nothing itself; the dev cluster's node agent
assigns GPUs by its own rule, see devcluster/gpualloc.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

CORES_PER_CARD = 100
"""HAMi's ``gpucores`` of one whole card."""


def best_fit(free: Sequence[int], need: int) -> int | None:
    """The card (index into ``free``, each card's free steps) that takes a share of ``need``
    steps: the fullest that still holds it, the first of equals; ``None`` when none holds it."""
    best: int | None = None
    for i, f in enumerate(free):
        if need <= f and (best is None or f < free[best]):
            best = i
    return best


def whole_cards(free: Sequence[int], steps: int, n: int) -> list[int] | None:
    """``n`` cards with nothing on them (``free == steps``), the first ones; ``None`` when
    fewer are wholly free."""
    empty = [i for i, f in enumerate(free) if f == steps]
    return empty[:n] if len(empty) >= n else None


@dataclass
class Cards:
    """The cards of one pool: what each has free, in steps, and who holds what."""

    steps: int
    free: list[int]
    holders: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Workload key → (card, steps) it holds."""

    @classmethod
    def empty(cls, cards: int, steps: int) -> Cards:
        return cls(steps, [steps] * cards)

    def place(self, key: str, *, share_steps: int = 0, whole: int = 0) -> bool:
        """Put ``key`` on cards: a share of ``share_steps`` (best fit) or ``whole`` whole
        cards; ``False`` (and nothing held) when it does not fit now."""
        if whole:
            chosen = whole_cards(self.free, self.steps, whole)
            if chosen is None:
                return False
            held = [(i, self.steps) for i in chosen]
        else:
            card = best_fit(self.free, share_steps)
            if card is None:
                return False
            held = [(card, share_steps)]
        for i, n in held:
            self.free[i] -= n
        self.holders[key] = held
        return True

    def release(self, key: str) -> bool:
        """``key``'s cards are free again; whether it held any."""
        held = self.holders.pop(key, None)
        for i, n in held or ():
            self.free[i] += n
        return held is not None

    @property
    def whole_free(self) -> int:
        return sum(1 for f in self.free if f == self.steps)

    @property
    def used_cards(self) -> int:
        return sum(1 for f in self.free if f < self.steps)


@dataclass
class Placement:
    """Every shared pool's cards: the flavors where shares and whole GPUs meet."""

    pools: dict[str, Cards]

    @classmethod
    def for_capacity(cls, capacity: Mapping[tuple[str, str], int], steps: int) -> Placement | None:
        """The cards of each flavor that Kueue counts in ``nvidia.com/total-gpucores`` (a pool
        of shares: its cores ÷ 100 cards); ``None`` when there is none (nothing to place)."""
        pools = {
            flavor: Cards.empty(n // CORES_PER_CARD, steps)
            for (flavor, resource), n in capacity.items()
            if resource == "nvidia.com/total-gpucores" and n >= CORES_PER_CARD
        }
        return cls(pools) if pools else None

    def place(self, key: str, flavor: str | None, requests: Mapping[str, int], kind: str) -> bool:
        """Place a workload admitted in ``flavor`` that counts ``requests``: a training Job
        takes whole cards (its ``total-gpucores`` ÷ 100), a notebook a share of its cores'
        steps. A flavor without cards places at once."""
        cards = self.pools.get(flavor or "")
        if cards is None:
            return True
        cores = requests.get("nvidia.com/total-gpucores", 0)
        if kind == "training":
            return cards.place(key, whole=max(1, cores // CORES_PER_CARD))
        steps = max(1, -(-cores * cards.steps // CORES_PER_CARD))
        return cards.place(key, share_steps=steps)

    def release(self, key: str) -> bool:
        return any(cards.release(key) for cards in self.pools.values())

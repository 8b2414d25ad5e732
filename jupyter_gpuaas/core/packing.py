"""Which card of a pool a memory-capped share (or a whole card) goes to (pure).

A pool of whole GPUs that serves both training (a whole card each) and notebooks (HAMi shares: a
memory cap and a compute percentage on one card) is counted by Kueue as one quota, but quota is
not placement: a whole card is only free when no share sits on it. So shares are packed onto as
few cards as possible: each goes to the *fullest* card it still fits on (best fit: the least
memory left after placing it), which keeps the other cards empty for whole-GPU work.

A whole card is the share that asks for all of a card's memory and 100 % of its compute; it fits
only an empty card, and no share fits beside it. The utilisation replay models this pool with it
(HAMi's binpack, simplified); the dev cluster places as HAMi itself does
(``devcluster/hamiplace.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

__all__ = [
    "Card",
    "Share",
    "best_fit",
    "explain_no_fit",
    "fits",
    "fits_empty",
    "place",
    "whole",
]

FULL_CORES = 100

Policy = Literal["binpack", "spread"]


@dataclass(frozen=True)
class Card:
    """One GPU of the pool and what its shares already hold (memory in one unit throughout,
    e.g. MiB; compute in percent of the card; ``slots``: HAMi's vGPUs per card)."""

    index: int
    memory: int
    slots: int = 10
    used_memory: int = 0
    used_cores: int = 0
    used_slots: int = 0
    model: str = ""

    @property
    def free_memory(self) -> int:
        return self.memory - self.used_memory

    @property
    def free_cores(self) -> int:
        return FULL_CORES - self.used_cores

    @property
    def empty(self) -> bool:
        return self.used_slots == 0


@dataclass(frozen=True)
class Share:
    """What one vGPU asks for: its memory cap and its compute percentage (0: not limited)."""

    memory: int
    cores: int = 0


def whole(card: Card) -> Share:
    """The share that is the whole card: all its memory, all its compute."""
    return Share(card.memory, FULL_CORES)


def fits(card: Card, share: Share) -> bool:
    """The share fits beside what the card holds (memory, compute and a free vGPU slot). A card
    held whole has no compute left, so nothing with a compute share fits beside it."""
    return (
        card.used_slots < card.slots
        and share.memory <= card.free_memory
        and share.cores <= card.free_cores
        and not (share.cores == 0 and card.used_cores >= FULL_CORES)
    )


def fits_empty(card: Card, share: Share) -> bool:
    """The share would fit this card if nothing were on it."""
    return fits(replace(card, used_memory=0, used_cores=0, used_slots=0), share)


def best_fit(cards: Iterable[Card], share: Share, policy: Policy = "binpack") -> Card | None:
    """The card the share goes to, or None when no card has room now.

    ``binpack`` (the default): the fullest card it fits, i.e. the least memory left after placing
    it, then the least compute left, then the lowest index; this keeps whole cards free.
    ``spread``: the card with the most memory free (HAMi's per-pod alternative)."""
    room = [c for c in cards if fits(c, share)]
    if not room:
        return None
    if policy == "spread":
        return min(room, key=lambda c: (-c.free_memory, c.index))
    return min(
        room,
        key=lambda c: (c.free_memory - share.memory, c.free_cores - share.cores, c.index),
    )


def place(card: Card, share: Share) -> Card:
    """The card with the share on it."""
    return replace(
        card,
        used_memory=card.used_memory + share.memory,
        used_cores=card.used_cores + share.cores,
        used_slots=card.used_slots + 1,
    )


def explain_no_fit(cards: Sequence[Card], share: Share, unit: str = "MiB") -> str:
    """Why a share that some card could hold has no card now, in words for a person: what the
    pool has free in all, and that it is in pieces on cards others hold."""
    free_memory = sum(c.free_memory for c in cards if c.used_cores < FULL_CORES)
    free_cores = sum(c.free_cores for c in cards)
    held = ", ".join(
        f"card {c.index}: {c.free_memory} {unit} and {c.free_cores} % free" for c in cards
    )
    return (
        f"no single GPU has {share.memory} {unit} and {share.cores} % compute free; the pool has "
        f"{free_memory} {unit} and {free_cores} % free in all, split over cards that others' "
        f"work holds ({held}). It starts when a card frees up"
    )

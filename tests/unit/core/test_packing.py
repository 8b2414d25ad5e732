"""Packing memory-capped shares onto the cards of a pool that training also takes whole."""

from __future__ import annotations

import random

import pytest

from jupyter_gpuaas.core.packing import (
    Card,
    Share,
    best_fit,
    explain_no_fit,
    fits,
    fits_empty,
    place,
    whole,
)

H100 = 81920  # MiB
QUARTER = Share(20480, 25)
HALF = Share(40960, 50)


def pool(n: int = 2) -> list[Card]:
    return [Card(i, H100) for i in range(n)]


def put(cards: list[Card], share: Share, policy: str = "binpack") -> int:
    card = best_fit(cards, share, policy)  # type: ignore[arg-type]
    assert card is not None
    cards[card.index] = place(card, share)
    return card.index


def test_shares_fill_one_card_before_the_next() -> None:
    cards = pool(3)
    assert [put(cards, QUARTER) for _ in range(6)] == [0, 0, 0, 0, 1, 1]
    assert cards[2].empty


def test_best_fit_picks_the_fullest_card_that_still_fits() -> None:
    cards = pool(3)
    cards[0] = place(cards[0], HALF)
    cards[0] = place(cards[0], QUARTER)  # 75 % used
    cards[1] = place(cards[1], HALF)  # 50 % used
    # A half fits only card 1 (card 0 has a quarter left) and not the empty card 2.
    assert put(cards, HALF) == 1
    # A quarter goes to card 0, the fullest.
    assert put(cards, QUARTER) == 0


def test_spread_takes_the_emptiest_card() -> None:
    cards = pool(2)
    cards[0] = place(cards[0], QUARTER)
    assert put(cards, QUARTER, "spread") == 1


def test_a_whole_card_fits_only_an_empty_card_and_nothing_joins_it() -> None:
    cards = pool(2)
    cards[0] = place(cards[0], Share(1024, 1))
    assert best_fit(cards, whole(cards[1])) == cards[1]
    cards[1] = place(cards[1], whole(cards[1]))
    assert not fits(cards[1], QUARTER)
    assert not fits(cards[1], Share(1024, 0))  # no compute share: still not beside a whole card
    assert best_fit(cards, whole(cards[0])) is None


def test_scraps_are_told_apart_from_never() -> None:
    cards = [place(place(c, HALF), QUARTER) for c in pool(2)]
    # 50 % free in all (a quarter on each card), but no card for a whole GPU.
    share = whole(cards[0])
    assert best_fit(cards, share) is None
    assert all(fits_empty(c, share) for c in cards)
    text = explain_no_fit(cards, share)
    assert "no single GPU has 81920 MiB and 100 % compute free" in text
    assert "40960 MiB and 50 % free in all" in text
    assert "card 0: 20480 MiB and 25 % free" in text
    # Larger than any card: never fits, not even empty.
    assert not fits_empty(cards[0], Share(H100 + 1, 10))


def test_vgpu_slots_bound_a_card() -> None:
    card = Card(0, H100, slots=2)
    card = place(place(card, Share(1, 1)), Share(1, 1))
    assert not fits(card, Share(1, 1))


@pytest.mark.parametrize("seed", range(20))
def test_packing_never_leaves_more_partly_used_cards_than_needed(seed: int) -> None:
    """Whatever the order, after placing quarters and halves, at most one card is partly used
    for each size mix that cannot share a card: the used cards hold the shares in ceil(sum)
    cards, so the cards left empty are as many as the pool can spare."""
    rng = random.Random(seed)
    cards = pool(8)
    total = 0
    for _ in range(rng.randrange(1, 20)):
        share = rng.choice([QUARTER, HALF])
        if best_fit(cards, share) is None:
            break
        put(cards, share)
        total += share.cores
    used = [c for c in cards if not c.empty]
    # Quarters and halves tile a card exactly; best fit never opens a card while one has room.
    assert len(used) == -(-total // 100)
    assert all(c.used_cores <= 100 and c.used_memory <= c.memory for c in cards)

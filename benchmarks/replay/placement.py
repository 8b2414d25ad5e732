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
- a whole-GPU workload of ``n`` GPUs takes ``n`` cards with nothing on them **on one node**,
  as the scheduler places a pod (a pod's GPUs are on its node): the node that holds it with
  the fewest whole cards free (binpack), so that whole nodes stay free for the largest Jobs;
- on every rung: the whole-GPU rungs' pools are cards too (a card a step), so that an 8-GPU
  Job admitted on quota spread over several nodes waits there as it does on the shares rungs;
- what cannot be placed waits, holding its quota; every release tries the waiting ones again,
  by priority, then by admission (the scheduler's queue).

The card chosen is the project's own packing decision (:mod:`jupyter_gpuaas.core.packing`,
which the dev cluster's node agent uses too); this module keeps the pool's cards and who holds
what. It also shows the culler what a cluster shows it: each holder's cards as HAMi records them
on its pod (:meth:`Placement.annotations`), and the training Jobs' pods, placed or waiting for
whole cards with the node agent's reason (:meth:`Placement.job_pods`), so that the culler frees
a card of idle shares for an admitted Job that waits, as it does on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpuaas.core.hami import no_room_condition

from .brain import HAMI_ALLOCATED, packing

CORES_PER_CARD = 100
"""HAMi's ``gpucores`` of one whole card."""
SLOTS_PER_CARD = 10
"""HAMi's vGPUs per card (``deviceSplitCount``)."""


def _card(index: int, steps: int, free: int, shares: int) -> packing.Card:
    """A card as the packing decision sees it: memory in steps, compute in percent (a share's
    compute is its memory's fraction of the card), HAMi's vGPU slots."""
    used = steps - free
    return packing.Card(
        index=index,
        memory=steps,
        slots=SLOTS_PER_CARD,
        used_memory=used,
        used_cores=used * CORES_PER_CARD // steps,
        used_slots=shares,
    )


@dataclass
class Cards:
    """The cards of one pool: what each has free, in steps, and who holds what."""

    steps: int
    free: list[int]
    per_node: int = 0
    """Cards per node (0: one node holds them all); card ``i`` is on node ``i // per_node``."""
    holders: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    """Workload key → (card, steps) it holds."""
    shares: list[int] = field(default_factory=list)
    """vGPU slots taken on each card (a whole card takes one)."""

    @classmethod
    def empty(cls, cards: int, steps: int, per_node: int = 0) -> Cards:
        return cls(steps, [steps] * cards, per_node, shares=[0] * cards)

    def node(self, card: int) -> int:
        return card // self.per_node if self.per_node else 0

    def _whole_on_one_node(self, n: int) -> list[int] | None:
        """``n`` wholly free cards of one node: the node that holds them with the fewest
        whole cards free (binpack; then the lowest), its lowest cards; None if none can."""
        by_node: dict[int, list[int]] = {}
        for i, f in enumerate(self.free):
            if f == self.steps:
                by_node.setdefault(self.node(i), []).append(i)
        room = [(len(cards), node) for node, cards in by_node.items() if len(cards) >= n]
        if not room:
            return None
        _count, node = min(room)
        return by_node[node][:n]

    def _cards(self) -> list[packing.Card]:
        return [_card(i, self.steps, f, self.shares[i]) for i, f in enumerate(self.free)]

    def place(self, key: str, *, share_steps: int = 0, whole: int = 0) -> bool:
        """Put ``key`` on cards: a share of ``share_steps`` on the card
        :func:`jupyter_gpuaas.core.packing.best_fit` picks, or ``whole`` cards with nothing on
        them; ``False`` (and nothing held) when it does not fit now."""
        held: list[tuple[int, int]] = []
        if whole:
            chosen = self._whole_on_one_node(whole)
            if chosen is None:
                return False
            held = [(i, self.steps) for i in chosen]
            for i, n in held:
                self.free[i] -= n
                self.shares[i] += 1
            self.holders[key] = held
            return True
        cards = self._cards()
        wanted = [packing.Share(share_steps, share_steps * CORES_PER_CARD // self.steps)]
        for share in wanted:
            card = packing.best_fit(cards, share)
            if card is None:
                return False
            cards[card.index] = packing.place(card, share)
            held.append((card.index, share.memory))
        for i, n in held:
            self.free[i] -= n
            self.shares[i] += 1
        self.holders[key] = held
        return True

    def release(self, key: str) -> bool:
        """``key``'s cards are free again; whether it held any."""
        held = self.holders.pop(key, None)
        for i, n in held or ():
            self.free[i] += n
            self.shares[i] -= 1
        return held is not None

    @property
    def whole_free(self) -> int:
        return sum(1 for f in self.free if f == self.steps)


@dataclass
class Placement:
    """Every shared pool's cards: the flavors where shares and whole GPUs meet."""

    pools: dict[str, Cards]

    @classmethod
    def for_capacity(
        cls,
        capacity: Mapping[tuple[str, str], int],
        steps: int,
        per_node: Mapping[str, int] | None = None,
    ) -> Placement | None:
        """The cards of each flavor that Kueue counts in ``nvidia.com/total-gpucores`` (a pool
        of shares: its cores ÷ 100 cards, of ``steps`` each), and, with ``per_node`` (cards per
        node of each flavor), of each whole-GPU flavor (``nvidia.com/gpu``: a card a step);
        ``None`` when there is none (nothing to place)."""
        nodes = per_node or {}
        pools = {
            flavor: Cards.empty(n // CORES_PER_CARD, steps, nodes.get(flavor, 0))
            for (flavor, resource), n in capacity.items()
            if resource == "nvidia.com/total-gpucores" and n >= CORES_PER_CARD
        }
        for (flavor, resource), n in capacity.items():
            if resource == "nvidia.com/gpu" and flavor in nodes and flavor not in pools and n:
                pools[flavor] = Cards.empty(n, 1, nodes[flavor])
        return cls(pools) if pools else None

    def place(self, key: str, flavor: str | None, requests: Mapping[str, int], kind: str) -> bool:
        """Place a workload admitted in ``flavor`` that counts ``requests``: a training Job
        takes whole cards (its ``total-gpucores`` ÷ 100), a notebook a share of its cores'
        steps. A flavor without cards places at once."""
        cards = self.pools.get(flavor or "")
        if cards is None:
            return True
        if cards.steps == 1:  # whole GPUs: a training Job's n on one node, a notebook's one
            return cards.place(key, whole=max(1, requests.get("nvidia.com/gpu", 1)))
        cores = requests.get("nvidia.com/total-gpucores", 0)
        if kind == "training":
            return cards.place(key, whole=max(1, cores // CORES_PER_CARD))
        steps = max(1, -(-cores * cards.steps // CORES_PER_CARD))
        return cards.place(key, share_steps=steps)

    def release(self, key: str) -> bool:
        return any(cards.release(key) for cards in self.pools.values())

    def annotations(self, key: str) -> dict[str, str]:
        """HAMi's record of ``key``'s cards, as on its pod (empty: it holds none)."""
        for flavor, cards in self.pools.items():
            held = cards.holders.get(key)
            if held and cards.steps > 1:  # HAMi records shares; whole GPUs are the plugin's
                cores = [n * CORES_PER_CARD // cards.steps for _i, n in held]
                text = "".join(
                    f"{flavor}-card-{i},GPU,{n},{c}:" for (i, n), c in zip(held, cores, strict=True)
                )
                return {HAMI_ALLOCATED: text + ";"}
        return {}

    def job_pods(self, placed: Iterable[Any], waiting: Iterable[Any]) -> list[dict[str, Any]]:
        """The pods of admitted training workloads (:class:`.world.Workload`) of the pools:
        ``placed`` on their cards (those not on cards are skipped), ``waiting`` for them."""
        out = []
        shared = {f for f, c in self.pools.items() if c.steps > 1}
        for wl, pending in [*((w, False) for w in placed), *((w, True) for w in waiting)]:
            if wl.kind != "training" or wl.flavor not in shared:
                continue  # HAMi schedules the shared pools only: whole GPUs are not its
            if not pending and not any(wl.key in c.holders for c in self.pools.values()):
                continue
            cards = max(1, wl.requests.get("nvidia.com/total-gpucores", 0) // CORES_PER_CARD)
            gpu = {"nvidia.com/gpu": str(cards), "nvidia.com/gpucores": str(CORES_PER_CARD)}
            status: dict[str, Any] = {"phase": "Pending" if pending else "Running"}
            if pending:
                pool = self.pools.get(wl.flavor or "")
                status["conditions"] = [no_room_condition(len(pool.free) if pool else 1)]
            out.append(
                {
                    "metadata": {
                        "name": wl.name,
                        "namespace": wl.namespace,
                        "uid": f"{wl.uid}-pod",
                        "ownerReferences": [
                            {"kind": "Job", "name": wl.name, "uid": wl.uid, "controller": True}
                        ],
                        "annotations": self.annotations(wl.key),
                    },
                    "spec": {"containers": [{"name": "train", "resources": {"limits": gpu}}]},
                    "status": status,
                }
            )
        return out

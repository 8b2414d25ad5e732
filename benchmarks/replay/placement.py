"""Placement: the cards that what Kueue admitted on quota actually runs on.

Kueue admits on quota only. On the shares rungs, notebooks take memory-capped shares of the
same cards whole-GPU training Jobs run on, and one quota counts both in GPU-equivalents, so
quota is not placement: a Job of n GPUs can be admitted while the free quota exists only as
scraps of shares on several cards. The scheduler (HAMi's, on the real cluster) then leaves its
pods pending, holding the quota, until n cards are wholly free.

This module is that scheduler's part, pure and card by card:

- a share of ``k`` steps (tenths of a card) goes on the **fullest node** with a card that
  holds it (HAMi's ``binpack`` node policy, its default: ``ComputeDefaultScore``), there on the
  **fullest card that still holds it** (best fit; HAMi's ``binpack`` GPU policy): shares gather
  on few cards of few nodes, and whole cards and nodes stay whole for training as long as they
  can;
- a whole-GPU workload of ``n`` GPUs takes ``n`` cards with nothing on them **on one node**,
  as the scheduler places a pod (a pod's GPUs are on its node): the node that holds it with
  the fewest whole cards free (binpack), so that whole nodes stay free for the largest Jobs;
- on every rung: the whole-GPU rungs' pools are cards too (a card a step), so that an 8-GPU
  Job admitted on quota spread over several nodes waits there as it does on the shares rungs;
- what cannot be placed waits, holding its quota; every release tries the waiting ones again,
  by priority, then by admission (the scheduler's queue).

With Kueue's Topology Aware Scheduling (TAS, :func:`tas_assign`) on a rung, Kueue itself
chooses the nodes at admission (v0.19.2, ``pkg/cache/scheduler/tas_flavor_snapshot.go``): a
workload it cannot give a topology is not admitted and holds nothing (see docs/replay.md).

The card chosen is the project's own packing decision (:mod:`jupyter_gpuaas.core.packing`,
which the dev cluster's node agent uses too); this module keeps the pool's cards and who holds
what. It also shows the culler what a cluster shows it: each holder's cards as HAMi records them
on its pod (:meth:`Placement.annotations`), and the training Jobs' pods, placed or waiting for
whole cards with the node agent's reason (:meth:`Placement.job_pods`), so that the culler frees
a card of idle shares for an admitted Job that waits, as it does on a cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpuaas.core.hami import no_room_condition

from .brain import HAMI_ALLOCATED, packing

CORES_PER_CARD = 100
"""HAMi's ``gpucores`` of one whole card."""
SLOTS_PER_CARD = 10
"""HAMi's vGPUs per card (``deviceSplitCount``)."""


TAS_MODES = ("required", "preferred", "unconstrained")
"""A pod set's topology request at the node level (``kubernetes.io/hostname``):
``kueue.x-k8s.io/podset-required-topology``, ``...-preferred-topology`` or
``...-unconstrained-topology`` (what Kueue implies for a workload without one, on a TAS flavor)."""


def _best_fit(counts: Sequence[int], needed: int, order: Sequence[int]) -> int:
    """Kueue's ``findBestFitDomainBy``: of the domains in ``order``, the first with the
    smallest count that still holds ``needed``; the first of ``order`` when none does."""
    best, best_count = order[0], None
    for d in order:
        if counts[d] >= needed and (best_count is None or counts[d] < best_count):
            best, best_count = d, counts[d]
    return best


def tas_assign(
    free: Sequence[int], pods: int, per_pod: int, mode: str = "required"
) -> dict[int, int] | None:
    """Kueue 0.19's TAS assignment of a pod set of ``pods`` pods of ``per_pod`` GPUs on nodes
    with ``free`` GPUs free each, in a two-level topology (one block holding every node, then
    ``kubernetes.io/hostname``): node → pods, or None when Kueue finds no assignment (then it
    does not admit the workload). From ``pkg/cache/scheduler/tas_flavor_snapshot.go``:

    - ``required`` and ``preferred`` use the BestFit profile: nodes sorted by the pods each
      still holds (descending), then by name (``sortedDomains``); when the first holds every
      pod, the pod set goes on one node, the first with the **fewest** pods' room that holds
      them all (``findBestFitDomainForSlices``). Otherwise ``required`` fails, and
      ``preferred`` climbs to the block and spreads: greedily over the nodes in that order,
      the last node chosen best-fit (``findLevelWithFitDomains``,
      ``updateCountsToMinimumGeneric``);
    - ``unconstrained`` (also what Kueue implies for a pod set without a request on a TAS
      flavor) uses LeastFreeCapacity (``TASProfileMixed``, beta and on since 0.15): nodes
      sorted by room ascending, the first that holds every pod, else greedily from the
      least free;
    - a spread fails only when the block cannot hold them all.
    """
    if mode not in TAS_MODES:
        raise ValueError(f"unknown topology request {mode!r}")
    room = [f // per_pod if per_pod else pods for f in free]
    if not room or sum(room) < pods:
        return None
    if mode == "unconstrained":
        order = sorted(range(len(room)), key=lambda d: (room[d], d))
        for d in order:
            if room[d] >= pods:
                return {d: pods}
        return _spread(room, pods, order, best_fit=False)
    order = sorted(range(len(room)), key=lambda d: (-room[d], d))
    if room[order[0]] >= pods:
        return {_best_fit(room, pods, order): pods}
    if mode == "required":
        return None
    return _spread(room, pods, order, best_fit=True)


def _spread(
    room: Sequence[int], pods: int, order: Sequence[int], *, best_fit: bool
) -> dict[int, int]:
    """``pods`` over the nodes in ``order`` (the block holds them all), each node's room
    taken whole; with ``best_fit``, the last node the best fit of those left."""
    out: dict[int, int] = {}
    left = pods
    for i, d in enumerate(order):
        if room[d] >= left:
            last = _best_fit(room, left, order[i:]) if best_fit else d
            out[last] = left
            return out
        if room[d]:
            out[d] = room[d]
            left -= room[d]
    raise AssertionError("the block holds them all")


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

    def _whole_tas(self, pods: int, per_pod: int, mode: str) -> list[int] | None:
        """The wholly free cards Kueue's TAS (:func:`tas_assign`) assigns a pod set of
        ``pods`` pods of ``per_pod`` cards: each node's lowest free cards (the device plugin's
        pick within the node TAS chose); None when TAS finds no assignment."""
        nodes = max(1, -(-len(self.free) // self.per_node)) if self.per_node else 1
        whole: list[list[int]] = [[] for _ in range(nodes)]
        for i, f in enumerate(self.free):
            if f == self.steps:
                whole[self.node(i)].append(i)
        assigned = tas_assign([len(c) for c in whole], pods, per_pod, mode)
        if assigned is None:
            return None
        return [i for node, n in sorted(assigned.items()) for i in whole[node][: n * per_pod]]

    def fits_tas_without(self, gone: Iterable[str], whole: int, mode: str, pods: int = 1) -> bool:
        """Whether TAS would assign ``whole`` cards in ``pods`` pods were ``gone``'s
        holders' cards free (a preemption's simulation)."""
        free = list(self.free)
        for key in gone:
            for i, n in self.holders.get(key, ()):
                free[i] += n
        nodes = max(1, -(-len(free) // self.per_node)) if self.per_node else 1
        counts = [0] * nodes
        for i, f in enumerate(free):
            if f == self.steps:
                counts[self.node(i)] += 1
        per_pod = whole // pods if whole % pods == 0 else whole
        return tas_assign(counts, pods if whole % pods == 0 else 1, per_pod, mode) is not None

    def _cards(self) -> list[packing.Card]:
        return [_card(i, self.steps, f, self.shares[i]) for i, f in enumerate(self.free)]

    def _fullest_node(
        self, cards: Sequence[packing.Card], share: packing.Share
    ) -> list[packing.Card]:
        """The cards of the node HAMi's scheduler gives a share (its node policy ``binpack``,
        the default): of the nodes with a card that holds it, the fullest before placing it
        (``ComputeDefaultScore``: vGPU slots, cores and memory used, each over the node's;
        ties to the first node), so that shares keep off emptied nodes, which stay whole for
        the largest Jobs. Its card on that node is the product's :func:`packing.best_fit`."""
        by_node: dict[int, list[packing.Card]] = {}
        for card in cards:
            by_node.setdefault(self.node(card.index), []).append(card)

        def score(node: list[packing.Card]) -> float:
            return (
                sum(c.used_slots for c in node) / sum(c.slots for c in node)
                + sum(c.used_cores for c in node) / (CORES_PER_CARD * len(node))
                + sum(c.used_memory for c in node) / sum(c.memory for c in node)
            )

        fitting = [
            (score(node), -n, node)
            for n, node in by_node.items()
            if any(packing.fits(c, share) for c in node)
        ]
        return max(fitting, key=lambda t: t[:2])[2] if fitting else []

    def place(
        self, key: str, *, share_steps: int = 0, whole: int = 0, tas: str = "", pods: int = 1
    ) -> bool:
        """Put ``key`` on cards: a share of ``share_steps`` on the card
        :func:`jupyter_gpuaas.core.packing.best_fit` picks, or ``whole`` cards with nothing on
        them (with ``tas``, the topology request of Kueue's TAS, in ``pods`` pods of
        ``whole // pods`` cards, on the nodes :func:`tas_assign` gives them; else one pod on
        one node); ``False`` (and nothing held) when it does not fit now."""
        held: list[tuple[int, int]] = []
        if whole:
            chosen = (
                self._whole_tas(pods, whole // pods, tas) if tas else self._whole_on_one_node(whole)
            )
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
            card = packing.best_fit(self._fullest_node(cards, share), share)
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

    def place(
        self,
        key: str,
        flavor: str | None,
        requests: Mapping[str, int],
        kind: str,
        *,
        tas: str = "",
        pods: int = 1,
    ) -> bool:
        """Place a workload admitted in ``flavor`` that counts ``requests``: a training Job
        takes whole cards (its ``total-gpucores`` ÷ 100), a notebook a share of its cores'
        steps; with ``tas`` (a topology request), whole cards where Kueue's TAS assigns its
        ``pods`` pods. A flavor without cards places at once."""
        cards = self.pools.get(flavor or "")
        if cards is None:
            return True
        if cards.steps == 1:  # whole GPUs: a training Job's n on one node, a notebook's one
            n = max(1, requests.get("nvidia.com/gpu", 1))
            return cards.place(key, whole=n, tas=tas, pods=pods if n % pods == 0 else 1)
        cores = requests.get("nvidia.com/total-gpucores", 0)
        if kind == "training":
            n = max(1, cores // CORES_PER_CARD)
            return cards.place(key, whole=n, tas=tas, pods=pods if n % pods == 0 else 1)
        steps = max(1, -(-cores * cards.steps // CORES_PER_CARD))
        return cards.place(key, share_steps=steps)

    def release(self, key: str) -> bool:
        return any(cards.release(key) for cards in self.pools.values())

    def fits_tas_without(
        self,
        gone: Iterable[str],
        flavor: str | None,
        requests: Mapping[str, int],
        kind: str,
        *,
        tas: str,
    ) -> bool:
        """Whether a workload admitted in ``flavor`` that counts ``requests`` would find nodes
        under TAS were ``gone``'s cards free (notebook shares: not TAS's; they fit)."""
        cards = self.pools.get(flavor or "")
        if cards is None:
            return True
        if cards.steps == 1:
            n = max(1, requests.get("nvidia.com/gpu", 1))
        elif kind == "training":
            n = max(1, requests.get("nvidia.com/total-gpucores", 0) // CORES_PER_CARD)
        else:
            return True
        return cards.fits_tas_without(gone, n, tas)

    def holds(self, key: str) -> bool:
        """Whether ``key`` is on cards."""
        return any(key in cards.holders for cards in self.pools.values())

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

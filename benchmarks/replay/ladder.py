"""The ladder of what teams run, every rung on the same paired traces of one organisation.

A rung is a queue structure (how Kueue's quotas are laid out), what stops idle notebooks, and
whether notebooks take whole GPUs or need-sized shares of the GPUs training uses:

====  =========================================================================================
B0    week-long per-user whole-GPU reservations (a notebook quota of one GPU per user) + a
      training partition; nothing is lent
B1    per-queue static partitions: per team a notebook queue and a training queue, no cohort
      (the notebook share of each team's GPUs is chosen best for B1 from ``--splits``)
B1o   one organisation-wide partition: one notebook queue and one training queue for every
      team together, no cohort (the split chosen best, as B1's)
B1i   B1 + jupyterhub-idle-culler (z2jh: 60 min timeout, every 10 min)
B2    per-team Kueue cohorts: a team's training borrows what its own notebooks leave
L1    one org-wide cohort: training borrows what any notebook or other team leaves; notebooks
      take their quota back by preempting borrowers (the product's sample organisation)
L1i   L1 + jupyterhub-idle-culler (60 min): z2jh's default
L1c   L1 + jupyterhub-idle-culler at the timeout (of :data:`OPEN_TIMEOUTS_MIN`) that needs the
      fewest GPUs while meeting every service level (:func:`.capacity.search_best_open`);
      the better of L1 and L1c is the best open stack, the headline's baseline
L1g   L1 + jupyter-gpuaas as shipped (its policy file; the product's own reclaim loop decides)
L2    L1 with notebooks on need-sized shares of the training GPUs under one quota in
      GPU-equivalents, as the product ships them: each user takes the share the spawn form
      preselects (the product's advice, :func:`jupyter_gpuaas.core.sizing.advise`, from the
      peaks of their recent sessions), shares packed onto the fullest card that holds them of
      the fullest node that has one (HAMi's binpack), a whole-GPU Job placed only on wholly
      free cards (:mod:`.placement`); a kernel beyond its
      cap takes the way up to the share that holds it
L3    L2 + jupyter-gpuaas as shipped
L4    L3 + kernel state kept: servers save their kernels' state before a reclaim or a way up
      and the new server restores it (docs/kernel-state.md); the reclaim loop holds them to
      ``idle_after_when_kept`` (:data:`KEPT_IDLE_AFTER`), the form advises from the typical
      need, a share of sessions cannot be saved (:class:`.sim.KeptState`)
Lb    the bound of any notebook-side lever: L1 with a notebook holding a whole GPU only while
      a cell runs on it (NotebookOS's "GPU only during cell execution"), no restore cost
F0    the training-alone floor: L1 with the notebook sessions removed (what training's own
      demand needs at its service level)
L2o   L2 idealised: every session on the share its own need fits (no advice),
      placed on cards and nodes as L2's are: what the advice costs (it took quota as
      placement until it ran below the training-alone floor, which no rung can)
====  =========================================================================================

Every rung but B0 splits each team's GPUs between a notebook queue and a training queue (in a
cohort: nominal quota, the notebooks' lent to training while unused). B1, B2 and L1 each choose
their split best per size from ``--splits``, as B1 does; a rung that adds one mechanism to
another (B1i to B1; L1i, L1g, L2, L3 and L2o to L1) keeps the split chosen for the other at
the other's own size, as a team adds a culler or shares to the queues it has.

The cluster is sized in GPUs of its training pools (``gpus``); a MIG pool, where the
organisation has one, stays as it is. Demand (users, training Jobs) is the organisation's as
given, whatever the size, so that a smaller cluster replays the same people.

Shares are memory-capped in steps of a tenth of the card (8 GiB of an 80 GB H100): a session
takes the smallest that holds its memory need, and its compute share is the same tenth
(HAMi's ``gpucores``), so a burst at utilisation u on share g runs max(1, u/g) times longer.
"""

from __future__ import annotations

import atexit
import functools
import math
import os
import random
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import brain
from .organisations import OrgSpec, Pool
from .policies import Gpuaas, IdleCuller, Oracle, Static
from .sim import NOTEBOOK_NAMESPACE, Policy
from .trace import Trace, generate, need_gib, user_level
from .world import Organisation, build_organisation

SHARE_STEPS = 10
"""Shares are tenths of a card (memory and compute alike)."""
VGPUS_PER_GPU = 10
"""HAMi's default ``deviceSplitCount``: vGPU slots a card offers in the shared pool."""
NOTEBOOK_PRIORITY = 1000
TRAINING_PRIORITY = 500
DEFAULT_SPLITS = (0.25, 0.375, 0.5, 0.625, 0.75)
"""Notebook share of each team's GPUs (its nominal quota, in a cohort) that the rungs with a
split choose from (per size, the best; a rung that adds one mechanism to another keeps the
other's)."""
DEFAULT_SHARE = SHARE_STEPS // 2
"""The share (in steps) a team's admin preselects for users with no measured session: half a
card (an assumption; the product's advice takes over after one session)."""
OPEN_TIMEOUTS_MIN = (30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0)
"""jupyterhub-idle-culler timeouts L1c is chosen from (minutes)."""
COHORT_NOTEBOOK_SHARE = 0.5
"""The notebook share of a run that names none (a search with no ``--splits``; the sample's
check windows)."""

TRANSFORMATIONS = [
    {
        "input": "nvidia.com/gpumem",
        "strategy": "Replace",
        "multiplyBy": "nvidia.com/gpu",
        "outputs": {"nvidia.com/total-gpumem": "1"},
    },
    {
        "input": "nvidia.com/gpucores",
        "strategy": "Replace",
        "multiplyBy": "nvidia.com/gpu",
        "outputs": {"nvidia.com/total-gpucores": "1"},
    },
]
"""Kueue's resource transformations for HAMi shares, as the product's catalog states them."""


@dataclass(frozen=True)
class Rung:
    name: str
    structure: str
    """``reserved``, ``partitions``, ``org-partitions``, ``team-cohorts`` or ``org-cohort``."""
    culler: str
    """``none``, ``idle-60`` (jupyterhub-idle-culler, 60 min unless the run says otherwise),
    ``idle-best`` (it, at the best of :data:`OPEN_TIMEOUTS_MIN`) or ``gpuaas``."""
    shares: bool
    text: str
    placed: bool = False
    """Shares sized by the product's advice (``False`` on a shares rung: idealised, each
    session on the share its own need fits). Every rung places on cards and nodes."""
    kept: bool = False
    """Kernel state kept through stops (L4)."""
    notebooks: bool = True
    """Whether the trace's notebook sessions are replayed (F0: training alone)."""
    tas: str = ""
    """Kueue's Topology Aware Scheduling on the training pools: ``all`` (Jobs and notebooks:
    the whole-GPU rungs, where TAS sees a notebook's card as a node's GPU), ``training``
    (Jobs only: the shares rungs, whose shares HAMi places), or off."""
    strict: bool = False
    """The training ClusterQueues queue ``StrictFIFO`` (a large Job at the head is not
    overtaken by smaller ones of its queue), else ``BestEffortFIFO``."""
    large_first: bool = False
    """Large Jobs (a node's GPUs) in a WorkloadPriorityClass above the other Jobs', and the
    training ClusterQueues preempting lower priorities within (``withinClusterQueue:
    LowerPriority``): with TAS a large Job that finds no node evicts small Jobs (which
    checkpoint) to get one."""

    @property
    def tas_modes(self) -> dict[str, str]:
        """Workload kind → the topology request its pods carry (a Job's one pod on one node:
        ``required`` at ``kubernetes.io/hostname``; a notebook ``unconstrained``, as Kueue
        implies for a pod without one on a TAS flavor)."""
        if self.tas == "all":
            return {"training": "required", "notebook": "unconstrained"}
        if self.tas == "training":
            return {"training": "required"}
        return {}

    @property
    def split_chosen(self) -> bool:
        """Whether the rung splits each team's GPUs between a notebook and a training queue,
        the split chosen best per size: the partitions and the cohorts (whose notebook quota is
        lent to training while unused), not B0's per-user reservations."""
        return self.structure != "reserved"


RUNGS: dict[str, Rung] = {
    r.name: r
    for r in (
        Rung("B0", "reserved", "none", False, "per-user whole-GPU reservations + training"),
        Rung("B1", "partitions", "none", False, "per-queue static partitions"),
        Rung("B1o", "org-partitions", "none", False, "one org-wide notebook and training queue"),
        Rung("B1i", "partitions", "idle-60", False, "B1 + idle-culler 60 min"),
        Rung("B2", "team-cohorts", "none", False, "per-team Kueue cohorts"),
        Rung("L1", "org-cohort", "none", False, "org-wide Kueue cohort"),
        Rung("L1i", "org-cohort", "idle-60", False, "L1 + idle-culler 60 min"),
        Rung("L1c", "org-cohort", "idle-best", False, "L1 + idle-culler at its best timeout"),
        Rung("L1g", "org-cohort", "gpuaas", False, "L1 + gpuaas as shipped"),
        Rung("L2", "org-cohort", "none", True, "L1 + need-sized shares, advised and packed", True),
        Rung("L3", "org-cohort", "gpuaas", True, "L2 + gpuaas as shipped", True),
        Rung(
            "L4",
            "org-cohort",
            "gpuaas",
            True,
            "L3 + kernel state kept through reclaims and ways up",
            True,
            True,
        ),
        Rung("L2o", "org-cohort", "none", True, "L2 idealised: each session on its need's share"),
        Rung("Lb", "org-cohort", "oracle", False, "bound: a GPU only while a cell runs"),
        Rung("F0", "org-cohort", "none", False, "floor: training alone", notebooks=False),
        Rung("L1t", "org-cohort", "none", False, "L1 + Kueue TAS (Jobs and notebooks)", tas="all"),
        Rung(
            "L1s",
            "org-cohort",
            "none",
            False,
            "L1t + StrictFIFO training queues",
            tas="all",
            strict=True,
        ),
        Rung(
            "L4t",
            "org-cohort",
            "gpuaas",
            True,
            "L4 + Kueue TAS for Jobs",
            True,
            True,
            tas="training",
        ),
        Rung(
            "L4s",
            "org-cohort",
            "gpuaas",
            True,
            "L4t + StrictFIFO training queues",
            True,
            True,
            tas="training",
            strict=True,
        ),
        Rung(
            "L1p",
            "org-cohort",
            "none",
            False,
            "L1t + large Jobs first (priority, preemption within queues)",
            tas="all",
            large_first=True,
        ),
        Rung(
            "L4p",
            "org-cohort",
            "gpuaas",
            True,
            "L4t + large Jobs first",
            True,
            True,
            tas="training",
            large_first=True,
        ),
        Rung("F0t", "org-cohort", "none", False, "floor with TAS", notebooks=False, tas="all"),
        Rung(
            "F0p",
            "org-cohort",
            "none",
            False,
            "floor with TAS, large Jobs first",
            notebooks=False,
            tas="all",
            large_first=True,
        ),
        Rung(
            "F0s",
            "org-cohort",
            "none",
            False,
            "floor with TAS and StrictFIFO",
            notebooks=False,
            tas="all",
            strict=True,
        ),
    )
}


@dataclass(frozen=True)
class World:
    org: Organisation
    catalog: brain.Catalog
    fractions: float
    """The share of users who take fractional offerings (1 on the shares rungs)."""


def sized(spec: OrgSpec, gpus: int) -> tuple[Pool, ...]:
    """The organisation's pools with its training pools holding ``gpus`` GPUs in all (split
    over them as the file splits them); MIG pools as they are."""
    reference = spec.training_gpus
    out = []
    left = gpus
    training = spec.training_pools
    for pool in spec.pools:
        if pool.mig is not None:
            out.append(pool)
            continue
        share = left if pool is training[-1] else math.floor(gpus * pool.gpus / reference)
        left -= share
        nodes = share / pool.gpus_per_node
        out.append(Pool(pool.name, nodes, pool.gpus_per_node, pool.gpu_memory_gib))
    return tuple(out)


def _resources(shares: bool) -> list[str]:
    if shares:
        return ["nvidia.com/gpu", "nvidia.com/total-gpumem", "nvidia.com/total-gpucores"]
    return ["nvidia.com/gpu"]


def _quota(pool: Pool, gpus: int, shares: bool) -> dict[str, int]:
    """What ``gpus`` GPUs of ``pool`` are in Kueue's resources (a MIG pool: ``gpus`` slices)."""
    if pool.mig is not None:
        return {pool.mig.resource: gpus}
    if shares:
        return {
            "nvidia.com/gpu": VGPUS_PER_GPU * gpus,
            "nvidia.com/total-gpumem": _mib(pool.gpu_memory_gib) * gpus,
            "nvidia.com/total-gpucores": 100 * gpus,
        }
    return {"nvidia.com/gpu": gpus}


def _mib(gib: float) -> int:
    return round(gib * 1024)


def _cluster_queue(
    name: str,
    team: str,
    kind: str,
    cohort: str | None,
    flavors: Mapping[str, Mapping[str, int]],
    *,
    lends_only: bool,
    strict: bool = False,
    within: str = "Never",
) -> dict[str, Any]:
    covered = sorted({r for quota in flavors.values() for r in quota})
    spec: dict[str, Any] = {
        "queueingStrategy": "StrictFIFO" if strict else "BestEffortFIFO",
        "namespaceSelector": {},
        "preemption": {
            "reclaimWithinCohort": "Any" if cohort else "Never",
            "borrowWithinCohort": {"policy": "Never"},
            "withinClusterQueue": within,
        },
        "resourceGroups": [
            {
                "coveredResources": covered,
                "flavors": [
                    {
                        "name": flavor,
                        "resources": [
                            {
                                "name": r,
                                "nominalQuota": quota.get(r, 0),
                                **({"borrowingLimit": 0} if lends_only or not cohort else {}),
                            }
                            for r in covered
                        ],
                    }
                    for flavor, quota in flavors.items()
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"gpuaas.dev/team": team, "gpuaas.dev/kind": kind}},
        "spec": spec,
    }


def manifests(
    spec: OrgSpec, rung: Rung, gpus: int, notebook_share: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Kueue's objects and the node pools of ``spec`` at ``gpus`` training GPUs on ``rung``."""
    pools = sized(spec, gpus)
    docs: list[dict[str, Any]] = [
        {"kind": "WorkloadPriorityClass", "metadata": {"name": "interactive"}, "value": 1000},
        {"kind": "WorkloadPriorityClass", "metadata": {"name": "training"}, "value": 500},
    ]
    if rung.large_first:  # below the notebooks, above the other Jobs
        docs.append(
            {"kind": "WorkloadPriorityClass", "metadata": {"name": "training-large"}, "value": 600}
        )
    for pool in pools:
        docs.append(
            {
                "kind": "ResourceFlavor",
                "metadata": {"name": pool.name},
                "spec": {"nodeLabels": {"gpuaas.dev/pool": pool.name}},
            }
        )
    notebooks, training = _team_quotas(spec, pools, rung, notebook_share)
    cohorts = _cohorts(spec, rung)
    for cohort in sorted({c for c in cohorts.values() if c}):
        docs.append({"kind": "Cohort", "metadata": {"name": cohort}, "spec": {}})
    if rung.structure == "org-partitions":
        return docs + _org_partitions(spec, pools, notebook_share), _node_pools(pools, rung)
    for t in spec.teams:
        docs += _team_queues(
            t.name,
            cohorts[t.name],
            notebooks[t.name],
            training[t.name],
            strict=rung.strict,
            within="LowerPriority" if rung.large_first else "Never",
        )
    return docs, _node_pools(pools, rung)


Quotas = dict[str, dict[str, dict[str, int]]]
"""team → pool → Kueue resource → nominal quota."""


def _team_quotas(
    spec: OrgSpec, pools: Sequence[Pool], rung: Rung, notebook_share: float
) -> tuple[Quotas, Quotas]:
    """Each team's notebook and training quota in each pool: a MIG pool is all notebooks'
    (none on B0); B0 holds one GPU per notebook user, the others ``notebook_share`` of the
    team's GPUs (rounded down)."""
    users = spec.users()
    notebooks: Quotas = {t.name: {} for t in spec.teams}
    training: Quotas = {t.name: {} for t in spec.teams}
    for pool in pools:
        split = spec.team_quota(pool, pool.units)
        for team, team_gpus in split.items():
            if pool.mig is not None:
                if rung.structure != "reserved":
                    notebooks[team][pool.name] = _quota(pool, team_gpus, rung.shares)
                continue
            if rung.structure == "reserved":
                held = min(users[team], team_gpus)
            else:
                held = math.floor(team_gpus * notebook_share + 1e-9)
            notebooks[team][pool.name] = _quota(pool, held, rung.shares)
            training[team][pool.name] = _quota(pool, team_gpus - held, rung.shares)
    return notebooks, training


def _cohorts(spec: OrgSpec, rung: Rung) -> dict[str, str | None]:
    """Each team's cohort: the organisation's, its own, or none (partitions)."""
    if rung.structure == "org-cohort":
        return {t.name: "org" for t in spec.teams}
    if rung.structure == "team-cohorts":
        return {t.name: t.name for t in spec.teams}
    return {t.name: None for t in spec.teams}


def _team_queues(
    team: str,
    cohort: str | None,
    notebooks: dict[str, dict[str, int]],
    training: dict[str, dict[str, int]],
    *,
    strict: bool = False,
    within: str = "Never",
) -> list[dict[str, Any]]:
    """A team's notebook and training ClusterQueues and the LocalQueues pointing at them
    (``within``: the training queues' ``withinClusterQueue`` preemption)."""
    return [
        _cluster_queue(f"{team}-notebooks", team, "notebooks", cohort, notebooks, lends_only=True),
        _cluster_queue(
            f"{team}-training",
            team,
            "training",
            cohort,
            training,
            lends_only=False,
            strict=strict,
            within=within,
        ),
        {
            "kind": "LocalQueue",
            "metadata": {"name": team, "namespace": NOTEBOOK_NAMESPACE},
            "spec": {"clusterQueue": f"{team}-notebooks"},
        },
        {
            "kind": "LocalQueue",
            "metadata": {"name": "training", "namespace": team},
            "spec": {"clusterQueue": f"{team}-training"},
        },
    ]


def _org_partitions(
    spec: OrgSpec, pools: Sequence[Pool], notebook_share: float
) -> list[dict[str, Any]]:
    """B1o's queues: one notebook ClusterQueue and one training ClusterQueue for the whole
    organisation (``notebook_share`` of every pool's GPUs to notebooks), no cohort; every
    team's local queues point at them."""
    notebooks: dict[str, dict[str, int]] = {}
    training: dict[str, dict[str, int]] = {}
    for pool in pools:
        if pool.mig is not None:
            notebooks[pool.name] = _quota(pool, pool.units, False)
            continue
        held = math.floor(pool.units * notebook_share + 1e-9)
        notebooks[pool.name] = _quota(pool, held, False)
        training[pool.name] = _quota(pool, pool.units - held, False)
    docs = [
        _cluster_queue("org-notebooks", "org", "notebooks", None, notebooks, lends_only=True),
        _cluster_queue("org-training", "org", "training", None, training, lends_only=False),
    ]
    for t in spec.teams:
        docs.append(
            {
                "kind": "LocalQueue",
                "metadata": {"name": t.name, "namespace": NOTEBOOK_NAMESPACE},
                "spec": {"clusterQueue": "org-notebooks"},
            }
        )
        docs.append(
            {
                "kind": "LocalQueue",
                "metadata": {"name": "training", "namespace": t.name},
                "spec": {"clusterQueue": "org-training"},
            }
        )
    return docs


def _node_pools(pools: Sequence[Pool], rung: Rung) -> list[dict[str, Any]]:
    node_pools = []
    for pool in pools:
        if pool.mig is not None:
            capacity = {pool.mig.resource: str(pool.gpus_per_node * pool.mig.per_gpu)}
        elif rung.shares:
            capacity = {
                "nvidia.com/gpu": str(VGPUS_PER_GPU * pool.gpus_per_node),
                "nvidia.com/gpumem": str(_mib(pool.gpu_memory_gib) * pool.gpus_per_node),
                "nvidia.com/gpucores": str(100 * pool.gpus_per_node),
            }
        else:
            capacity = {"nvidia.com/gpu": str(pool.gpus_per_node)}
        node_pools.append(
            {
                "name": pool.name,
                "count": pool.nodes,
                "labels": {
                    "gpuaas.dev/pool": pool.name,
                    "nvidia.com/gpu.count": str(pool.gpus_per_node),
                },
                "capacity": capacity,
            }
        )
    return node_pools


def catalog_data(spec: OrgSpec, rung: Rung) -> dict[str, Any]:
    """The spawner's catalog for ``rung``: a whole GPU of each training pool (the shares
    rungs: need-sized shares of it instead), a slice of each MIG pool; every team may use all."""
    offerings: list[dict[str, Any]] = []
    for pool in spec.pools:
        selector = {"gpuaas.dev/pool": pool.name}
        if pool.mig is not None:
            offerings.append(
                {
                    "slug": f"{pool.name}-{pool.mig.profile.replace('.', '-')}",
                    "display_name": f"MIG {pool.mig.profile}",
                    "kind": "mig",
                    "resources": {pool.mig.resource: 1},
                    "flavor": pool.name,
                    "node_selector": selector,
                    "gpu_memory": f"{pool.mig.memory_gib:g}Gi",
                    "gpu_equivalents": f"1/{pool.mig.per_gpu}",
                }
            )
        elif rung.shares:
            step = pool.gpu_memory_gib / SHARE_STEPS
            for k in range(1, SHARE_STEPS + 1):
                offerings.append(
                    {
                        "slug": f"{pool.name}-share-{k}",
                        "display_name": f"{k * step:g} GiB share of a {pool.name}",
                        "kind": "fraction",
                        "flavor": pool.name,
                        "node_selector": selector,
                        "gpu_memory": f"{pool.gpu_memory_gib:g}Gi",
                        "memory_cap": f"{_mib(k * step)}Mi",
                        "cores_percent": 100 * k // SHARE_STEPS,
                        "gpu_equivalents": f"{k}/{SHARE_STEPS}",
                    }
                )
        else:
            offerings.append(
                {
                    "slug": pool.name,
                    "display_name": f"whole {pool.name}",
                    "kind": "gpu",
                    "resources": {"nvidia.com/gpu": 1},
                    "flavor": pool.name,
                    "node_selector": selector,
                    "gpu_memory": f"{pool.gpu_memory_gib:g}Gi",
                }
            )
    if rung.structure == "reserved":
        offerings = [o for o in offerings if o["kind"] == "gpu"]
    slugs = [o["slug"] for o in offerings]
    default = {}
    if rung.shares:  # what a user with no measured session gets preselected
        default = {"default_offering": f"{spec.training_pools[0].name}-share-{DEFAULT_SHARE}"}
    return {
        "offerings": offerings,
        "resource_transformations": TRANSFORMATIONS,
        "tenants": [
            {
                "name": t.name,
                "groups": [t.name],
                "local_queue": t.name,
                "offerings": slugs,
                **default,
            }
            for t in spec.teams
        ],
    }


@functools.lru_cache(maxsize=64)
def world(spec: OrgSpec, rung_name: str, gpus: int, notebook_share: float) -> World:
    rung = RUNGS[rung_name]
    source = brain.CatalogSource(f"{spec.name}/{rung.name}: ", catalog_data(spec, rung))
    catalog = brain.build_catalog([source])
    docs, pools = manifests(spec, rung, gpus, notebook_share)
    per_gpu = _quota(spec.training_pools[0], 1, rung.shares)
    training = (
        {
            "nvidia.com/total-gpucores": per_gpu["nvidia.com/total-gpucores"],
            "nvidia.com/total-gpumem": per_gpu["nvidia.com/total-gpumem"],
            "nvidia.com/gpu": 1,
        }
        if rung.shares
        else {"nvidia.com/gpu": 1}
    )
    org = build_organisation(
        docs, pools, transformations=catalog.transformations, training_requests=training
    )
    return World(org, catalog, 1.0 if rung.shares else 0.0)


KEPT_IDLE_AFTER = "15m"
"""L4's ``idle_after_when_kept`` in every policy of the shipped file (docs/culler.md's example)."""


def _same_policy(lines: list[str], at: int, indent: str) -> list[str]:
    """The lines around line ``at`` indented at least ``indent``, up to a blank or a less
    indented line: the other keys of the mapping it is in."""

    def inner(line: str) -> bool:
        return line.startswith(indent) and bool(line.strip())

    start = at
    while start > 0 and inner(lines[start - 1]):
        start -= 1
    end = at
    while end + 1 < len(lines) and inner(lines[end + 1]):
        end += 1
    return lines[start : end + 1]


def kept_policy_text(text: str, idle_after_when_kept: str = KEPT_IDLE_AFTER) -> str:
    """The policy file for L4: ``text`` with ``idle_after_when_kept`` after every
    ``idle_after`` (same indent) of a policy that sets none (the shipped file's own value
    stands), and ``snapshot_timeout: 0s``: the replay models the
    snapshot's time itself (:class:`.sim.KeptState`), so the loop does not wait for a server's
    answer in wall-clock time."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        kept_already = any(
            other.startswith(f"{indent}idle_after_when_kept:")
            for other in _same_policy(lines, i, indent)
        )
        if stripped.startswith("idle_after:") and not kept_already:
            out.append(f"{indent}idle_after_when_kept: {idle_after_when_kept}")
    if not any(line.startswith("snapshot_timeout:") for line in out):
        out.insert(0, "snapshot_timeout: 0s")
    return "\n".join(out) + "\n"


@functools.lru_cache(maxsize=8)
def _kept_policy_file(policy_file: str) -> str:
    """:func:`kept_policy_text` of ``policy_file``, written once per process."""
    text = kept_policy_text(Path(policy_file).read_text(encoding="utf-8"))
    with tempfile.NamedTemporaryFile(
        "w", suffix=".yaml", prefix="replay-kept-", delete=False, encoding="utf-8"
    ) as f:
        f.write(text)
    atexit.register(os.unlink, f.name)
    return f.name


def policy(rung: Rung, policy_file: str, idle_timeout_min: float = 60.0) -> Policy:
    """What stops idle notebooks on ``rung``: gpuaas with ``policy_file``, jupyterhub-idle-culler
    with ``idle_timeout_min`` (z2jh's 60 by default; every 10 min), or nothing."""
    if rung.culler in ("idle-60", "idle-best"):
        return IdleCuller(idle_timeout_min * 60.0, 600.0, rung.name)
    if rung.culler == "oracle":
        bound = Oracle()
        bound.name = rung.name
        return bound
    if rung.culler == "gpuaas":
        path = _kept_policy_file(policy_file) if rung.kept else policy_file
        return Gpuaas(brain.load_policy_file(path), name=rung.name)
    p = Static()
    p.name = rung.name
    return p


def trace(spec: OrgSpec, seed: int, *, days: float, burn_in_h: float) -> Trace:
    """The paired trace of ``seed``: the same for every rung and every size."""
    weights = {t.name: t.weight for t in spec.teams}
    return generate(
        seed,
        teams=[t.name for t in spec.teams],
        training_gpus=spec.training_gpus,
        days=days,
        burn_in_s=burn_in_h * 3600,
        users_per_team=spec.users(),
        offered_load=spec.demand.training_offered_load,
        team_weights=weights,
        gpu_memory=(
            spec.demand.gpu_memory_median_gib,
            spec.demand.gpu_memory_sigma,
            spec.demand.gpu_memory_within_user,
        ),
    )


def warm_history(spec: OrgSpec, trace: Trace) -> brain.PeakHistory:
    """The peaks the service holds for every user of ``trace`` when it begins: the sessions
    they had before it (as many as it keeps), their needs drawn as the trace's own are,
    around the user's own level (:func:`.trace.need_gib`; a draw per user and seed, the same
    on every rung).
    Without it, a day's replay would advise from one or two sessions, where a service that
    has run for weeks advises from :data:`~jupyter_gpuaas.core.sizing.SESSIONS_KEPT`."""
    d = spec.demand
    peaks = {}
    for user in sorted({s.user for s in trace.sessions}):
        rng = random.Random(f"history/{trace.seed}/{user}")
        level = user_level(trace.seed, user)
        gib = [
            need_gib(
                d.gpu_memory_median_gib,
                d.gpu_memory_sigma,
                d.gpu_memory_within_user,
                level,
                rng.gauss(0.0, 1.0),
            )
            for _ in range(brain.SESSIONS_KEPT)
        ]
        peaks[user] = tuple(math.ceil(g * 1024) for g in gib)
    return brain.PeakHistory(peaks)


def rungs(names: Sequence[str]) -> list[Rung]:
    unknown = [n for n in names if n not in RUNGS]
    if unknown:
        raise ValueError(f"no such rung: {', '.join(unknown)}; have {', '.join(RUNGS)}")
    return [RUNGS[n] for n in names]

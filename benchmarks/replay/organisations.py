"""Organisations as data: the node pools, the teams and the demand of one organisation, read
from a YAML file of ``benchmarks/replay/orgs/`` (``--org NAME``) or any path (``--org FILE``).

A file states what a platform team knows about its cluster and its people::

    name: dgx-4
    description: Four DGX-class nodes, three teams.
    pools:
      - name: h100            # a ResourceFlavor of its own; training runs here
        nodes: 4
        gpus_per_node: 8
        gpu_memory_gib: 80
      - name: mig             # optional: a node in MIG mode, for notebooks only
        nodes: 1
        gpus_per_node: 8
        gpu_memory_gib: 80
        mig: {profile: 1g.10gb, per_gpu: 7, memory_gib: 10}
    teams:
      - name: team-a
        weight: 2             # its share of the quota, of the notebook users and of training
        quota: {h100: 16}     # optional: its GPUs (slices on a MIG pool) per pool
      - name: team-b
    demand:
      users_per_gpu: 1.0            # notebook users per GPU of the training pools
      training_offered_load: 0.7    # daytime training demand / the training pools' GPUs
      gpu_memory_median_gib: 8      # a session's GPU-memory need: lognormal (assumed)
      gpu_memory_sigma: 1.0

Every problem is reported at once with its field path (``teams[1].quota.h100: ...``), as the
project's configuration is; quotas that add up to more than a pool holds are refused.
The queue structure (partitions, cohorts, shares) is not in the file: it is what the ladder
varies (:mod:`.ladder`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from jupyter_gpuaas.core.fields import (
    SLUG_RE,
    FieldErrors,
    did_you_mean,
    key_path,
    object_items,
    read_int,
    read_mapping,
    read_number,
    read_str,
    unknown_keys,
)

ORGS = Path(__file__).resolve().parent / "orgs"
SAMPLE = "sample"
"""The dev cluster's sample organisation (devcluster/nodes.yaml and manifests/): the
functional fixture, read by :func:`.world.load_organisation`, not by this module."""


class OrganisationError(ValueError):
    """An organisation file with problems; ``problems`` lists each with its field path."""

    def __init__(self, origin: str, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(f"{origin}: " + "; ".join(problems))


@dataclass(frozen=True)
class MigLayout:
    profile: str
    """The MIG profile every GPU of the pool is cut into (``1g.10gb``)."""
    per_gpu: int
    memory_gib: float

    @property
    def resource(self) -> str:
        return f"nvidia.com/mig-{self.profile}"


@dataclass(frozen=True)
class Pool:
    name: str
    nodes: float
    gpus_per_node: int
    gpu_memory_gib: float
    mig: MigLayout | None = None

    @property
    def gpus(self) -> int:
        return math.floor(self.nodes * self.gpus_per_node + 1e-9)

    @property
    def units(self) -> int:
        """What its quota is counted in: GPUs, or MIG slices."""
        return self.gpus * (self.mig.per_gpu if self.mig else 1)


@dataclass(frozen=True)
class Team:
    name: str
    weight: float = 1.0
    quota: tuple[tuple[str, int], ...] = ()
    """(pool, the team's GPUs, MIG slices on a MIG pool) as the file states them; pools not
    named are split by weight. (A tuple: an organisation is hashable, to cache what is built
    from it.)"""


@dataclass(frozen=True)
class Demand:
    users_per_gpu: float = 1.0
    training_offered_load: float = 0.7
    gpu_memory_median_gib: float = 8.0
    gpu_memory_sigma: float = 1.0
    gpu_memory_within_user: float = 0.5
    """The within-user share of the need's spread (:func:`.trace.need_gib`): 0, a user's
    needs repeat; 1, each session's is drawn afresh (assumed; swept)."""


@dataclass(frozen=True)
class OrgSpec:
    name: str
    description: str
    pools: tuple[Pool, ...]
    teams: tuple[Team, ...]
    demand: Demand
    source: str = ""

    @property
    def training_pools(self) -> tuple[Pool, ...]:
        return tuple(p for p in self.pools if p.mig is None)

    @property
    def training_gpus(self) -> int:
        return sum(p.gpus for p in self.training_pools)

    @property
    def physical_gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    def team_quota(self, pool: Pool, units: int | None = None) -> dict[str, int]:
        """Each team's share of ``units`` of ``pool`` (default: all of it): as the file states
        it (scaled with the pool when ``units`` differs), the rest by weight; whole units
        handed out by largest remainder, so that the quotas add up to the pool (to what the
        stated quotas scale to, when every team states one): no GPU is in no queue."""
        total = pool.units if units is None else units
        stated = {
            t.name: dict(t.quota)[pool.name]
            for t in self.teams
            if dict(t.quota).get(pool.name) is not None
        }
        scale = total / pool.units if pool.units else 0.0
        exact = {name: n * scale for name, n in stated.items()}
        rest = max(0.0, total - sum(exact.values()))
        others = [t for t in self.teams if t.name not in stated]
        weight = sum(t.weight for t in others)
        for t in others:
            exact[t.name] = rest * t.weight / weight if weight else 0.0
        target = total if others else math.floor(sum(exact.values()) + 1e-9)
        out = largest_remainder(exact, min(total, target))
        return {t.name: out[t.name] for t in self.teams}

    def users(self) -> dict[str, int]:
        """Notebook users per team: users_per_gpu × the training pools' GPUs, by weight."""
        total = self.demand.users_per_gpu * self.training_gpus
        weight = sum(t.weight for t in self.teams)
        return {t.name: max(1, round(total * t.weight / weight)) for t in self.teams}

    def with_demand(self, **changes: float) -> OrgSpec:
        """The same organisation with some demand figures changed (the sensitivity sweeps)."""
        d = self.demand
        return OrgSpec(
            self.name,
            self.description,
            self.pools,
            self.teams,
            Demand(**{**d.__dict__, **changes}),
            self.source,
        )


def largest_remainder(exact: Mapping[str, float], total: int) -> dict[str, int]:
    """Whole numbers that add up to ``total``, each the floor of its ``exact`` share or one
    more: the units left after the floors go to the largest fractional parts (ties: in the
    order given), Hamilton's apportionment."""
    floors = {k: math.floor(v + 1e-9) for k, v in exact.items()}
    left = total - sum(floors.values())
    order = sorted(exact, key=lambda k: -(exact[k] + 1e-9 - floors[k]))
    for k in order[: max(0, left)]:
        floors[k] += 1
    return floors


_TOP = ("name", "description", "pools", "teams", "demand")
_POOL = ("name", "nodes", "gpus_per_node", "gpu_memory_gib", "mig")
_MIG = ("profile", "per_gpu", "memory_gib")
_TEAM = ("name", "weight", "quota")
_DEMAND = (
    "users_per_gpu",
    "training_offered_load",
    "gpu_memory_median_gib",
    "gpu_memory_sigma",
    "gpu_memory_within_user",
)


def read_organisation(data: Any, origin: str = "") -> OrgSpec:
    """Check an organisation (the parsed YAML) and build it; :class:`OrganisationError` lists
    every problem with its field path."""
    errs = FieldErrors()
    if not isinstance(data, Mapping):
        raise OrganisationError(origin, ["the file must be a mapping (name, pools, teams, ...)"])
    unknown_keys(errs, "", data, _TOP)
    name = read_str(errs, "", data, "name", required=True, pattern=SLUG_RE, what="a slug") or ""
    description = read_str(errs, "", data, "description", default="") or ""
    pools = _read_pools(errs, data)
    by_pool = {p.name: p for p in pools}
    teams, stated = _read_teams(errs, data, by_pool)
    _check_quota_sums(errs, by_pool, stated)
    demand = _read_demand(errs, data)
    if len(errs):
        raise OrganisationError(origin, [str(e) for e in errs.items])
    return OrgSpec(name, description, tuple(pools), tuple(teams), demand, origin)


def _read_pools(errs: FieldErrors, data: Mapping[str, Any]) -> list[Pool]:
    """The ``pools``: at least one, one of whole GPUs among them, each name once."""
    pools: list[Pool] = []
    for path, raw in object_items(data.get("pools"), "pools", errs.add):
        pool = _read_pool(errs, path, raw)
        if pool is not None:
            if pool.name in {p.name for p in pools}:
                errs.add(key_path(path, "name"), f"pool {pool.name!r} is defined twice")
            pools.append(pool)
    if not pools and "pools" in data:
        errs.add("pools", "must name at least one pool")
    elif "pools" not in data:
        errs.add("pools", "required: the organisation's node pools")
    if pools and not any(p.mig is None for p in pools):
        errs.add("pools", "needs at least one pool of whole GPUs (training runs there)")
    return pools


def _read_pool(errs: FieldErrors, path: str, raw: Mapping[str, Any]) -> Pool | None:
    unknown_keys(errs, path, raw, _POOL)
    pname = read_str(errs, path, raw, "name", required=True, pattern=SLUG_RE, what="a slug")
    nodes = read_number(errs, path, raw, "nodes", default=None, above=0)
    per_node = read_int(errs, path, raw, "gpus_per_node", default=8, minimum=1, maximum=64)
    memory = read_number(errs, path, raw, "gpu_memory_gib", default=80.0, above=0)
    if nodes is None and "nodes" not in raw:
        errs.add(key_path(path, "nodes"), "required: how many nodes the pool has")
    mig = None
    mig_raw = read_mapping(errs, path, raw, "mig")
    if mig_raw is not None:
        mig = _read_mig(errs, key_path(path, "mig"), mig_raw)
    if pname and nodes and per_node and memory:
        return Pool(pname, nodes, per_node, memory, mig)
    return None


def _read_mig(errs: FieldErrors, mpath: str, mig_raw: Mapping[str, Any]) -> MigLayout | None:
    unknown_keys(errs, mpath, mig_raw, _MIG)
    profile = read_str(errs, mpath, mig_raw, "profile", required=True)
    per_gpu = read_int(errs, mpath, mig_raw, "per_gpu", default=7, minimum=1, maximum=7)
    mem = read_number(errs, mpath, mig_raw, "memory_gib", default=None, above=0)
    if mem is None and "memory_gib" not in mig_raw:
        errs.add(key_path(mpath, "memory_gib"), "required: a slice's GPU memory")
    if profile and per_gpu and mem:
        return MigLayout(profile, per_gpu, mem)
    return None


Stated = dict[str, list[tuple[str, int]]]
"""Pool → (field path, GPUs) of every team's stated quota, to check the sums."""


def _read_teams(
    errs: FieldErrors, data: Mapping[str, Any], by_pool: Mapping[str, Pool]
) -> tuple[list[Team], Stated]:
    """The ``teams`` (at least one, each name once) and the quotas they state, by pool."""
    teams: list[Team] = []
    stated: Stated = {}
    for path, raw in object_items(data.get("teams"), "teams", errs.add):
        unknown_keys(errs, path, raw, _TEAM)
        tname = read_str(errs, path, raw, "name", required=True, pattern=SLUG_RE, what="a slug")
        weight = read_number(errs, path, raw, "weight", default=1.0, above=0)
        quota = _read_quota(errs, path, raw, by_pool, stated)
        if tname and weight:
            if tname in {t.name for t in teams}:
                errs.add(key_path(path, "name"), f"team {tname!r} is defined twice")
            teams.append(Team(tname, weight, tuple(quota.items())))
    if not teams:
        errs.add("teams", "must name at least one team")
    return teams, stated


def _read_quota(
    errs: FieldErrors,
    path: str,
    raw: Mapping[str, Any],
    by_pool: Mapping[str, Pool],
    stated: Stated,
) -> dict[str, int]:
    """A team's ``quota``: pool → whole GPUs (slices on a MIG pool), each also noted in
    ``stated``."""
    quota: dict[str, int] = {}
    for qpath, pool_name, value in _entries(errs, path, raw, "quota"):
        if pool_name not in by_pool:
            errs.add(qpath, f"no such pool{did_you_mean(str(pool_name), by_pool)}")
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            errs.add(qpath, "must be a whole number of GPUs (MIG slices on a MIG pool), >= 0")
            continue
        quota[str(pool_name)] = value
        stated.setdefault(str(pool_name), []).append((qpath, value))
    return quota


def _check_quota_sums(errs: FieldErrors, by_pool: Mapping[str, Pool], stated: Stated) -> None:
    """The teams' stated quotas on a pool add up to no more than it holds (the first quota
    beyond it is named)."""
    for pool_name, entries in stated.items():
        pool = by_pool[pool_name]
        total = 0
        for qpath, value in entries:
            total += value
            if total > pool.units:
                what = "MIG slices" if pool.mig else "GPUs"
                errs.add(
                    qpath,
                    f"team quotas on pool {pool_name!r} add up to {total} {what}, beyond the"
                    f" pool's {pool.units} ({pool.nodes:g} nodes × {pool.gpus_per_node} GPUs"
                    + (f" × {pool.mig.per_gpu} slices" if pool.mig else "")
                    + ")",
                )
                break


def _read_demand(errs: FieldErrors, data: Mapping[str, Any]) -> Demand:
    """The organisation's ``demand`` (each figure defaulted from :class:`Demand`)."""
    demand = Demand()
    raw_demand = read_mapping(errs, "", data, "demand")
    if raw_demand is not None:
        unknown_keys(errs, "demand", raw_demand, _DEMAND)
        d = Demand()
        demand = Demand(
            users_per_gpu=read_number(
                errs, "demand", raw_demand, "users_per_gpu", default=d.users_per_gpu, above=0
            )
            or d.users_per_gpu,
            training_offered_load=read_number(
                errs,
                "demand",
                raw_demand,
                "training_offered_load",
                default=d.training_offered_load,
                above=0,
                maximum=2,
            )
            or d.training_offered_load,
            gpu_memory_median_gib=read_number(
                errs,
                "demand",
                raw_demand,
                "gpu_memory_median_gib",
                default=d.gpu_memory_median_gib,
                above=0,
            )
            or d.gpu_memory_median_gib,
            gpu_memory_sigma=read_number(
                errs,
                "demand",
                raw_demand,
                "gpu_memory_sigma",
                default=d.gpu_memory_sigma,
                minimum=0,
            )
            or 0.0,
            gpu_memory_within_user=read_number(
                errs,
                "demand",
                raw_demand,
                "gpu_memory_within_user",
                default=d.gpu_memory_within_user,
                minimum=0,
                maximum=1,
            )
            or 0.0,
        )
    return demand


def _entries(errs: FieldErrors, base: str, data: Mapping[str, Any], key: str) -> list[Any]:
    raw = read_mapping(errs, base, data, key) or {}
    path = key_path(base, key)
    return [(key_path(path, str(k)), k, v) for k, v in raw.items()]


def available() -> list[str]:
    """The organisations shipped in ``orgs/``, and ``sample``."""
    return [SAMPLE, *sorted(p.stem for p in ORGS.glob("*.yaml"))]


def load(name_or_file: str) -> OrgSpec:
    """``--org``: a name of ``orgs/`` (``dgx-4``) or a path to a file."""
    path = Path(name_or_file)
    if not path.suffix and not path.exists():
        path = ORGS / f"{name_or_file}.yaml"
        if not path.exists():
            names = available()
            raise OrganisationError(
                name_or_file, [f"no such organisation{did_you_mean(name_or_file, names)}"]
            )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise OrganisationError(str(path), [f"cannot read the file: {e.strerror}"]) from e
    except yaml.YAMLError as e:
        raise OrganisationError(str(path), [f"not valid YAML: {e}"]) from e
    return read_organisation(data, str(path))

"""Running one (policy, seed, cluster size) replay, alone or many in worker processes."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from . import brain
from .metrics import summarize
from .policies import Gpuaas, IdleCuller, Oracle, Static
from .sim import Policy, Result, Simulation
from .trace import PARAMETERS, Trace, generate
from .world import REPO, Organisation, load_organisation

DEFAULT_POLICY = REPO / "culler" / "examples" / "policy.yaml"
DEFAULT_CATALOG = REPO / "spawner" / "demo-catalog.yaml"

POLICIES: dict[str, str] = {
    "static": "(a) static: a notebook keeps its GPU until its session ends",
    "idle-60": "(b) jupyterhub-idle-culler, timeout 60 min, every 10 min (z2jh's defaults)",
    "idle-10": "(b) jupyterhub-idle-culler, timeout 10 min, every 5 min (its own defaults)",
    "gpuaas": "(c) jupyter-gpuaas, the policy file (demand-aware, warning, snooze)",
    "gpuaas-fractional": "(d) (c) with fractional offerings where the catalog has them",
    "oracle": "(e) oracle: a GPU only during bursts, no restore cost",
}


@dataclass(frozen=True)
class Task:
    policy: str
    seed: int
    scale: float = 1.0
    """Cluster size relative to the sample organisation (pools and quotas)."""
    demand: float = 1.0
    """Demand relative to the reference (users and training jobs)."""
    days: float = 1.0
    policy_file: str = str(DEFAULT_POLICY)
    catalog: str = str(DEFAULT_CATALOG)
    manifests: str = str(REPO / "devcluster" / "manifests")
    nodes: str = str(REPO / "devcluster" / "nodes.yaml")
    burn_in_h: float = 6.0
    fractions: float = 0.0
    """The share of notebook users who take fractional offerings (the fractional scenario;
    (d) ``gpuaas-fractional`` is every user)."""


def make_policy(name: str, policy_file: str) -> tuple[Policy, bool]:
    """The policy object and whether users take fractional offerings."""
    if name == "static":
        return Static(), False
    if name == "idle-60":
        return IdleCuller(3600.0, 600.0, name), False
    if name == "idle-10":
        return IdleCuller(600.0, 300.0, name), False
    if name in ("gpuaas", "gpuaas-fractional"):
        return Gpuaas(brain.load_policy_file(policy_file), name=name), name.endswith("fractional")
    if name == "oracle":
        return Oracle(), False
    raise ValueError(f"no such policy {name!r}; have {', '.join(POLICIES)}")


def organisation(task: Task, *, scale: float | None = None) -> Organisation:
    return load_organisation(
        manifests=Path(task.manifests),
        nodes=Path(task.nodes),
        scale=task.scale if scale is None else scale,
        transformations=brain.load_catalog(task.catalog).transformations,
    )


def training_gpus(org: Organisation) -> int:
    """The training pool the arrival rate is sized against: the capacity of the flavors where
    the training queues have whole-GPU quota (the h100 pool, 2 nodes × 8, in the sample)."""
    flavors = {
        f
        for cq in org.cluster_queues.values()
        for (f, r), q in cq.quotas.items()
        if r == "nvidia.com/gpu" and q.nominal > 0 and "training" in cq.name
    }
    return sum(n for (f, r), n in org.capacity.items() if f in flavors and r == "nvidia.com/gpu")


def make_trace(task: Task) -> Trace:
    reference = organisation(task, scale=task.demand)
    teams = sorted({ns for ns, lq in reference.local_queues if lq == "training"})
    users = max(1, round(PARAMETERS["users_per_team"].value * task.demand))
    return generate(
        task.seed,
        teams=teams,
        training_gpus=training_gpus(reference),
        days=task.days,
        burn_in_s=task.burn_in_h * 3600,
        users_per_team=users,
    )


def simulate(task: Task, *, events: IO[str] | None = None, check: bool = False) -> Result:
    logging.getLogger("gpuaas").setLevel(logging.WARNING)
    org = organisation(task)
    catalog = brain.load_catalog(task.catalog)
    policy, fractional = make_policy(task.policy, task.policy_file)
    trace = make_trace(task)
    return Simulation(
        trace,
        org,
        catalog,
        policy,
        fractions=1.0 if fractional else task.fractions,
        events=events,
        check_invariants=check,
    ).run()


def run_task(task: Task) -> dict[str, Any]:
    summary = summarize(simulate(task))
    summary["scale"] = task.scale
    summary["fractions"] = task.fractions
    return summary


def run_all(tasks: Sequence[Task], workers: int | None = None) -> list[dict[str, Any]]:
    workers = workers or min(len(tasks), os.cpu_count() or 1)
    if workers <= 1:
        return [run_task(t) for t in tasks]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(run_task, tasks, chunksize=1))

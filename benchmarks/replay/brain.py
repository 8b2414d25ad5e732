"""The one module of the replay that imports the project's code (the merge changes it here).

Everything the simulated world asks of the project goes through these names: the culler's
policy loading, its reclaim loop (which gathers the inputs with :mod:`gpuaas_culler.gather`,
judges idleness with :mod:`gpuaas_culler.idleness` and decides with
:func:`gpuaas_culler.decide.decide`), "Keep my GPU" (:func:`gpuaas_culler.decide.snooze`
through the loop), the catalog loader and the Kueue object readers. Nothing here decides
anything: the replay calls the project's code with a simulated clock.
"""

from __future__ import annotations

from gpuaas_culler.activity_store import ActivityStore
from gpuaas_culler.decide import Action, Plan
from gpuaas_culler.gather import RECLAIMED_AT, SNOOZED_UNTIL, SNOOZES_USED, WARNED_AT, PodRef
from gpuaas_culler.loop import Metrics, ReclaimLoop, Settings
from gpuaas_culler.policy import PolicySet, load_policy_file, parse_duration
from gpuaas_culler.queue import (
    HUB_SERVERNAME_ANNOTATION,
    HUB_USERNAME_ANNOTATION,
    OFFERING_LABEL,
    TEAM_LABEL,
    gpu_equivalents,
)

from jupyter_gpuaas.catalog import Catalog, Offering, build_catalog, load_catalog_file
from jupyter_gpuaas.headroom import QueueState
from jupyter_gpuaas.kueue import (
    QUEUE_NAME_LABEL,
    ClusterQueueInfo,
    kueue_value,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
    read_workload,
)

__all__ = [
    "HUB_SERVERNAME_ANNOTATION",
    "HUB_USERNAME_ANNOTATION",
    "OFFERING_LABEL",
    "QUEUE_NAME_LABEL",
    "RECLAIMED_AT",
    "SNOOZED_UNTIL",
    "SNOOZES_USED",
    "TEAM_LABEL",
    "WARNED_AT",
    "Action",
    "ActivityStore",
    "Catalog",
    "ClusterQueueInfo",
    "Metrics",
    "Offering",
    "Plan",
    "PodRef",
    "PolicySet",
    "QueueState",
    "ReclaimLoop",
    "Settings",
    "build_catalog",
    "gpu_equivalents",
    "kueue_value",
    "load_catalog",
    "load_policy_file",
    "parse_duration",
    "read_cluster_queue",
    "read_cohort",
    "read_local_queue",
    "read_workload",
]


def load_catalog(path: str) -> Catalog:
    """The admin catalog file, read and checked as the spawner reads it."""
    return build_catalog([load_catalog_file(path)])

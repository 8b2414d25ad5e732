"""The one module of the replay that imports the project's code.

Everything the simulated world asks of the project goes through these names: the culler's
policy loading, its reclaim loop (which gathers the inputs with
:mod:`gpuaas_service.reclaim.gather`, judges idleness with :mod:`gpuaas_service.reclaim.idleness`
and decides with :func:`gpuaas_service.reclaim.decide.decide`), "Keep my GPU"
(:func:`gpuaas_service.reclaim.decide.snooze` through the loop), the catalog loader and the Kueue
object readers, the spawn form's size advice (:func:`jupyter_gpuaas.core.sizing.advise`), and
the culler's rule for which flavors' taints a workload's pods tolerate (as Kueue assigns
flavors), and the names of the placement signal the culler reads from pods (HAMi's record of a
pod's cards, the status reason of a pod that waits for whole cards). Nothing here decides
anything: the replay calls the project's code with a simulated clock.
"""

from __future__ import annotations

from gpuaas_service.clients.kubernetes import KubeClient
from gpuaas_service.metrics import Metrics
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action, Plan
from gpuaas_service.reclaim.gather import HAMI_ALLOCATED, flavor_tolerated, waits_for_room
from gpuaas_service.reclaim.loop import ReclaimLoop, Settings
from gpuaas_service.reclaim.policy import PolicySet, load_policy_file
from jupyter_gpuaas.core import packing
from jupyter_gpuaas.core.catalog import (
    Catalog,
    CatalogSource,
    Offering,
    build_catalog,
    load_catalog_file,
)
from jupyter_gpuaas.core.durations import parse_duration
from jupyter_gpuaas.core.gpu_equivalents import resource_gpu_equivalents
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    QUEUE_NAME_LABEL,
    ClusterQueueInfo,
    ResourceTransformation,
    kueue_value,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
    read_workload,
)
from jupyter_gpuaas.core.labels import (
    HUB_SERVERNAME_ANNOTATION,
    HUB_USERNAME_ANNOTATION,
    OFFERING_LABEL,
    RECLAIMED_AT,
    SNOOZED_UNTIL,
    SNOOZES_USED,
    TEAM_LABEL,
    WARNED_AT,
)
from jupyter_gpuaas.core.sizing import (
    DEFAULT_HEADROOM,
    SESSIONS_KEPT,
    PeakHistory,
    advise,
    record_peak,
)
from jupyter_gpuaas.hub.watch import WatchedKueueView

__all__ = [
    "DEFAULT_HEADROOM",
    "HAMI_ALLOCATED",
    "HUB_SERVERNAME_ANNOTATION",
    "HUB_USERNAME_ANNOTATION",
    "OFFERING_LABEL",
    "QUEUE_NAME_LABEL",
    "RECLAIMED_AT",
    "SESSIONS_KEPT",
    "SNOOZED_UNTIL",
    "SNOOZES_USED",
    "TEAM_LABEL",
    "WARNED_AT",
    "Action",
    "ActivityStore",
    "Catalog",
    "CatalogSource",
    "ClusterQueueInfo",
    "KubeClient",
    "Metrics",
    "Offering",
    "PeakHistory",
    "Plan",
    "PodRef",
    "PolicySet",
    "QueueState",
    "ReclaimLoop",
    "ResourceTransformation",
    "Settings",
    "WatchedKueueView",
    "advise",
    "build_catalog",
    "flavor_tolerated",
    "kueue_value",
    "load_catalog",
    "load_policy_file",
    "packing",
    "parse_duration",
    "read_cluster_queue",
    "read_cohort",
    "read_local_queue",
    "read_workload",
    "record_peak",
    "resource_gpu_equivalents",
    "waits_for_room",
]


def load_catalog(path: str) -> Catalog:
    """The admin catalog file, read and checked as the spawner reads it."""
    return build_catalog([load_catalog_file(path)])

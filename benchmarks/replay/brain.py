"""The one module of the replay that imports the project's code.

Everything the simulated world asks of the project goes through these names: the culler's
policy loading, its reclaim loop (which gathers the inputs with
:mod:`gpuaas_service.reclaim.inputs`, judges idleness with :mod:`gpuaas_service.reclaim.idleness`
and decides with :func:`gpuaas_service.reclaim.decide.decide`), "Keep my GPU"
(:func:`gpuaas_service.reclaim.decide.snooze` through the loop), the catalog loader and the Kueue
object readers, the spawn form's size advice (:func:`jupyter_gpuaas.core.sizing.advise`), and
the culler's rule for which flavors' taints a workload's pods tolerate (as Kueue assigns
flavors), and the names of the placement signal the culler reads from pods (HAMi's record of a
pod's cards, the status reason of a pod that waits for whole cards). Nothing here decides
anything: the replay calls the project's code with a simulated clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from gpuaas_service.clients.kubernetes import KubeClient
from gpuaas_service.metrics import Metrics
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action, Plan
from gpuaas_service.reclaim.inputs import HAMI_ALLOCATED, flavor_tolerated, waits_for_room
from gpuaas_service.reclaim.loop import Feeds, ReclaimLoop, Settings
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
    parse_quantity,
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
from jupyter_gpuaas.hub.kueue_watch import WatchedKueueView

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
    "Feeds",
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


_READ_WORKLOAD = read_workload
_PARSE_QUANTITY = parse_quantity
"""The project's own readers, kept before :func:`memoise_readers` replaces them."""


def load_catalog(path: str) -> Catalog:
    """The admin catalog file, read and checked as the spawner reads it."""
    return build_catalog([load_catalog_file(path)])


_MEMO_LIMIT = 100_000
"""Entries a memo of :func:`memoise_readers` keeps before it starts over."""
_memoised = False


def reader_originals() -> list[tuple[Any, str, Any]]:
    """(module, name, the project's own function) for each reader :func:`memoise_readers`
    replaces (the tests put them back)."""
    from gpuaas_service.reclaim import inputs as _inputs
    from gpuaas_service.reclaim import loop as _loop
    from jupyter_gpuaas.core import kueue as _kueue

    return [
        (_inputs, "read_workload", _READ_WORKLOAD),
        (_loop, "read_workload", _READ_WORKLOAD),
        (_inputs, "parse_quantity", _PARSE_QUANTITY),
        (_kueue, "parse_quantity", _PARSE_QUANTITY),
    ]


def memoise_readers() -> None:
    """Make the reclaim loop's readers remember what they read, in this process (the replay's
    worker processes): the loop re-parses every pending Workload and every quantity at each
    30-s cycle, a good part of a reclaim rung's run. Both readers are pure, so their answers
    are the same; only the replay's cost changes (a test checks a run's figures do not). A
    Workload object is remembered by identity (the replay's world hands the same object out
    until the Workload changes, and never changes one it handed out; the memo holds the
    object, so its identity is not reused), a quantity by its type and value."""
    global _memoised
    if _memoised:
        return
    _memoised = True
    workloads: dict[int, tuple[object, Any]] = {}

    def read_workload_memo(obj: Any) -> Any:
        hit = workloads.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        info = _READ_WORKLOAD(obj)
        if len(workloads) >= _MEMO_LIMIT:
            workloads.clear()
        workloads[id(obj)] = (obj, info)
        return info

    quantities: dict[tuple[type, object], Any] = {}

    def parse_quantity_memo(value: object) -> Any:
        if not isinstance(value, str | int) or isinstance(value, bool):
            return _PARSE_QUANTITY(value)  # floats, and errors as the original says them
        key = (type(value), value)
        got = quantities.get(key)
        if got is None:
            got = _PARSE_QUANTITY(value)  # raises as the original does: nothing remembered
            if len(quantities) >= _MEMO_LIMIT:
                quantities.clear()
            quantities[key] = got
        return got

    memo = {"read_workload": read_workload_memo, "parse_quantity": parse_quantity_memo}
    for module, name, _original in reader_originals():
        setattr(module, name, memo[name])


def restore_readers() -> None:
    """Put the project's own readers back where :func:`memoise_readers` replaced them."""
    global _memoised
    for module, name, original in reader_originals():
        setattr(module, name, original)
    _memoised = False


@contextmanager
def memoised_readers() -> Iterator[None]:
    """:func:`memoise_readers` for a block of the calling process, which gets the project's own
    readers back after it: the memo remembers a Workload by identity, and code outside the
    replay (the service's unit tests) may change one in place."""
    already = _memoised
    memoise_readers()
    try:
        yield
    finally:
        if not already:
            restore_readers()

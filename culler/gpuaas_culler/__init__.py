"""gpuaas-culler: reclaim idle GPU workbenches for queued work, under admin policies.

The decision core is pure — :mod:`.policy` (the policy file), :mod:`.idleness` (is a server
busy, idle or unknown), :mod:`.decide` (what to warn, reclaim or leave alone, and for which
queued workload), :mod:`.explain` (the text of ``--explain``) — and is tested without a hub,
a cluster or a GPU. :mod:`.cli` is the ``gpuaas-culler`` console script.
"""

from __future__ import annotations

from gpuaas_culler.reclaim.decide import (
    Action,
    Decision,
    HandOffRecord,
    HandOffStatus,
    Need,
    PendingWorkload,
    Plan,
    Target,
    Workbench,
    assess_handoff,
    decide,
    snooze,
)
from gpuaas_culler.reclaim.idleness import ActivityReport, Idleness, State, judge
from gpuaas_culler.reclaim.policy import (
    Match,
    Policy,
    PolicyError,
    PolicySet,
    load_policy,
    load_policy_file,
)

__all__ = [
    "Action",
    "ActivityReport",
    "Decision",
    "HandOffRecord",
    "HandOffStatus",
    "Idleness",
    "Match",
    "Need",
    "PendingWorkload",
    "Plan",
    "Policy",
    "PolicyError",
    "PolicySet",
    "State",
    "Target",
    "Workbench",
    "assess_handoff",
    "decide",
    "judge",
    "load_policy",
    "load_policy_file",
    "snooze",
]

"""Where one server stands with the culler, for its own sidebar (pure).

The answer of ``GET api/reclaim/standing`` (the server's own token): the policy that applies
(its rule in plain fields), the server's activity and the culler's next step for it, from the
loop's last plan — the same row the console shows. The sidebar words it
(``labextension/src/reclaimModel.ts``): "idle for 12 min; reclaimed after 30 min idle when
queued work needs it; no queued work needs it now". For a server that keeps its kernels'
state, ``snapshot_wait_seconds`` is how long a reclaim now would wait for its snapshot (the
policy's, for the size its last report said): the sidebar says whether its kernels' save fits.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from gpuaas_service.console.aggregates import plan_row
from gpuaas_service.reclaim.decide import Plan
from gpuaas_service.reclaim.policy import Policy, PolicySet, snapshot_wait
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = ["policy_fields", "standing"]


def _secs(value: Any) -> int | None:
    return int(value.total_seconds()) if value is not None else None


def policy_fields(policy: Policy, *, keeps_state: bool = False) -> api.ServicePolicyFields:
    """The policy's rule in plain fields; ``idle_after_seconds`` is the one a server that keeps
    its kernels' state is held to where ``keeps_state`` (``idle_after_when_kept``)."""
    return {
        "name": policy.name,
        "idle_after_seconds": int(policy.idle_threshold(keeps_state).total_seconds()),
        "reclaim": policy.reclaim,
        "max_idle_seconds": _secs(policy.max_idle),
        "max_age_seconds": _secs(policy.max_age),
        "warn_before_seconds": int(policy.warn_before.total_seconds()),
        "max_snoozes": policy.max_snoozes,
        "dry_run": policy.dry_run,
    }


def standing(
    plan: Plan | None,
    policies: PolicySet,
    key: str,
    *,
    now: datetime,
    state_bytes: int | None = None,
) -> api.ServiceStanding:
    """``{"known": false}`` until a cycle has seen the server. ``state_bytes``: what its last
    activity report said its kernels' state would take (``kernel_state_bytes``)."""
    decision = next((d for d in (plan.decisions if plan else ()) if d.workbench.key == key), None)
    if plan is None or decision is None:
        return {"known": False, "now": isoformat_z(now), "reclaim_on": bool(policies.policies)}
    wb = decision.workbench
    policy = policies.policy_for(
        team=wb.team, kind=wb.kind, offering=wb.offering, user=wb.user, groups=wb.groups
    )
    row = plan_row(decision, plan.now)
    return {
        "known": True,
        "now": isoformat_z(now),
        "decided_at": isoformat_z(plan.now),
        "reclaim_on": bool(policies.policies),
        "policy": policy_fields(policy, keeps_state=wb.keeps_state)
        if policy is not None and decision.policy
        else None,
        "kind": row["kind"],
        "activity": row["activity"],
        "signal": row["signal"],
        "idle_seconds": row["idle_seconds"],
        "unknown_seconds": row["unknown_seconds"],
        "action": row["action"],
        "code": row["code"],
        # The user's version of the reason (another team's work is named by its team only; so
        # no hand-off workload's name either).
        "reason": decision.told,
        "reclaim_at": row["reclaim_at"],
        "dry_run": row["dry_run"],
        "snapshot_wait_seconds": _secs(snapshot_wait(policies, state_bytes))
        if wb.keeps_state and policies.snapshot_timeout > timedelta(0)
        else None,
    }

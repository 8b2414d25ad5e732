"""The console's policy preview: a pasted policy, checked with field paths, then decided on the
live state (pure; nothing is changed, the policy in force stays).

The live state is the last complete cycle's inputs as a snapshot
(:func:`gpuaas_service.reclaim.explain_input.dump_snapshot`): the same reader and the same
:func:`~gpuaas_service.reclaim.decide.decide` as ``gpuaas-admin --explain`` — the pasted
policy's own ``report_stale_after`` and ``busy_utilization_percent`` judge the activity again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpuaas_service import api_types as service_api
from gpuaas_service.console.aggregates import plan_rows, summary
from gpuaas_service.reclaim.decide import Plan, decide
from gpuaas_service.reclaim.explain import explain_policies
from gpuaas_service.reclaim.explain_input import SnapshotError, load_snapshot
from gpuaas_service.reclaim.policy import PolicyError, PolicySet, load_policy
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.parsing import ParseError, load_yaml

__all__ = ["PreviewError", "parse_policy_text", "plan_of_snapshot", "preview"]

MAX_POLICY_BYTES = 64 * 1024
MAX_POLICY_VALUES = 10_000
"""A pasted policy's values with aliases expanded (a policy of 20 rules has a few hundred)."""


MAX_PROBLEMS = 50
"""The most problems a preview's answer lists (the rest are counted), ..."""
MAX_PROBLEM_CHARS = 300
"""... and the most characters of each one's message: the answer stays small whatever the
pasted text holds."""


class PreviewError(ValueError):
    """The pasted policy is not usable: its problems with their field paths, at most
    :data:`MAX_PROBLEMS` of them, each message cut to :data:`MAX_PROBLEM_CHARS`."""

    def __init__(self, errors: list[dict[str, str]]) -> None:
        super().__init__(f"{len(errors)} problem(s) in the pasted policy")
        shown: list[api.ServiceFieldError] = [
            {"path": e["path"][:MAX_PROBLEM_CHARS], "message": _cut(e["message"])}
            for e in errors[:MAX_PROBLEMS]
        ]
        if len(errors) > MAX_PROBLEMS:
            more = len(errors) - MAX_PROBLEMS
            shown.append({"path": "(text)", "message": f"and {more} more problem(s)"})
        self.errors = shown

    def as_json(self) -> service_api.ServicePreviewRefused:
        """``POST api/console/preview``'s ``400``."""
        return {"status": 400, "valid": False, "message": str(self), "errors": self.errors}


def _cut(message: str) -> str:
    return message if len(message) <= MAX_PROBLEM_CHARS else message[:MAX_PROBLEM_CHARS] + "…"


def parse_policy_text(text: str, *, known_teams: Iterable[str] | None = None) -> PolicySet:
    """YAML text → a :class:`PolicySet`, or :class:`PreviewError` listing every problem.

    The text is parsed within bounds (core/parsing.py: its size, nesting, and at most
    :data:`MAX_POLICY_VALUES` values and four times its size in text with aliases expanded),
    and the problems are bounded (:class:`PreviewError`), so neither the check nor the answer
    can grow beyond what a policy needs.
    """
    try:
        data = load_yaml(
            text, path="(text)", max_bytes=MAX_POLICY_BYTES, max_nodes=MAX_POLICY_VALUES
        )
    except ParseError as e:
        raise PreviewError([{"path": e.path, "message": e.message}]) from None
    try:
        return load_policy(
            data,
            origin="pasted policy",
            known_teams=list(known_teams) if known_teams is not None else None,
        )
    except PolicyError as e:
        raise PreviewError([{"path": x.path, "message": x.message} for x in e.errors]) from e


def plan_of_snapshot(
    snapshot: Mapping[str, Any], policies: PolicySet, *, dry_run: bool = False
) -> Plan:
    """What ``--explain`` decides for this snapshot under ``policies``."""
    snap = load_snapshot(snapshot, policies)
    return decide(
        snap.workbenches,
        snap.pending,
        policies,
        now=snap.now,
        handoffs=snap.handoffs,
        dry_run=dry_run,
        waits=snap.waits,
    )


def preview(
    snapshot: Mapping[str, Any],
    text: str,
    current: Plan | None,
    *,
    dry_run: bool = False,
    teams: Iterable[str] | None = None,
) -> service_api.ServicePolicyPreview:
    """The answer of ``POST api/console/preview`` (raises :class:`PreviewError`)."""
    policies = parse_policy_text(text)
    try:
        plan = plan_of_snapshot(snapshot, policies, dry_run=dry_run)
    except SnapshotError as e:  # the service's own snapshot: a bug, said as such
        raise PreviewError(
            [{"path": f"(live state) {x.path}", "message": x.message} for x in e.errors]
        ) from e
    allowed = list(teams) if teams is not None else None
    rows = plan_rows(plan, teams=allowed)
    in_force = {r["key"]: r for r in plan_rows(current, teams=allowed)} if current else {}
    changed: list[service_api.ServicePreviewChange] = [
        {"key": r["key"], "now": in_force[r["key"]]["action"], "preview": r["action"]}
        for r in rows
        if r["key"] in in_force and in_force[r["key"]]["action"] != r["action"]
    ]
    return {
        "valid": True,
        "policy": explain_policies(policies),
        "at": isoformat_z(plan.now),  # the snapshot's clock, where it gives one
        "summary": summary(plan, teams=allowed),
        "summary_in_force": summary(current, teams=allowed) if current else None,
        "changed": changed,
        "workbenches": rows,
    }

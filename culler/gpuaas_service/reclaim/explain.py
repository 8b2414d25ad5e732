"""Plain-text rendering of a :class:`~.decide.Plan` for ``gpuaas-admin --explain`` (pure)."""

from __future__ import annotations

from fractions import Fraction

from gpuaas_service.reclaim.decide import Action, Decision, PlacementTarget, Plan, Target
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.policy import PolicySet
from jupyter_gpuaas.core.durations import format_duration, isoformat_z
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents

__all__ = ["explain", "explain_policies"]

_VERB = {
    Action.WARN: "WARN",
    Action.WAIT: "WAIT",
    Action.RECLAIM: "RECLAIM",
    Action.CLEAR_WARNING: "UNWARN",
    Action.SKIP: "skip",
}


def explain(plan: Plan, *, source: str = "") -> str:
    """What the culler would do now with each workbench and each queue head, and why."""
    now = plan.now
    lines = [
        f"gpuaas-admin --explain at {isoformat_z(now)}"
        + (f" (inputs: {source})" if source else ""),
        "",
    ]
    if plan.targets:
        lines.append(f"Queued work ({len(plan.targets)} queue head(s)):")
        lines += [_target_line(t) for t in plan.targets]
    else:
        lines.append("Queued work: nothing pending that workbenches could make room for.")
    if plan.placements:
        lines.append("")
        lines.append(f"Admitted work waiting for whole cards ({len(plan.placements)}):")
        lines += [_placement_line(p) for p in plan.placements]
    lines.append("")
    if not plan.decisions:
        lines.append("Workbenches: none.")
    else:
        lines.append(f"Workbenches ({len(plan.decisions)}):")
        width = max(len(d.workbench.key) for d in plan.decisions)
        for d in plan.decisions:
            lines += _decision_lines(d, plan, width)
    lines.append("")
    lines.append(_summary(plan))
    return "\n".join(lines) + "\n"


def _target_line(t: Target) -> str:
    wl = t.workload
    head = (
        f"  {wl.key}  (ClusterQueue {wl.cluster_queue}, position {wl.position + 1},"
        f" priority {wl.priority})"
    )
    dry = " [dry run]" if t.dry_run else ""
    return f"{head}\n      {t.status}{dry}: {t.reason}"


def _placement_line(p: PlacementTarget) -> str:
    wait = p.wait
    where = f" on {wait.node}" if wait.node else ""
    head = (
        f"  {wait.key}  ({wait.cards} whole {wait.gpu_type}{'s' if wait.cards > 1 else ''}"
        f" in {wait.flavor}{where}, ClusterQueue {wait.cluster_queue or '-'},"
        f" priority {wait.priority})"
    )
    dry = " [dry run]" if p.dry_run else ""
    return f"{head}\n      {p.status}{dry}: {p.reason}"


def _activity(d: Decision, plan: Plan) -> str:
    idle = d.workbench.idleness
    if idle.state is State.BUSY:
        return "busy"
    if idle.state is State.UNKNOWN:
        return f"unknown {format_duration(idle.unknown_for(plan.now))}"
    return f"idle {format_duration(idle.idle_for(plan.now))}"


def _decision_lines(d: Decision, plan: Plan, width: int) -> list[str]:
    wb = d.workbench
    what = wb.offering or wb.kind
    if wb.gpu_equivalents:
        what += f" ({format_gpu_equivalents(wb.gpu_equivalents)} GPU)"
    verb = _VERB[d.action] + (" (dry run)" if d.dry_run and d.action is not Action.SKIP else "")
    policy = f"policy {d.policy}" if d.policy else "no policy"
    first = (
        f"  {verb:<17} {wb.key:<{width}}  {what}, team {wb.team or '-'}, {_activity(d, plan)},"
        f" {policy}"
    )
    rule = f" [{d.rule}]" if d.rule else ""
    detail = f"      {d.code}{rule}: {d.reason}"
    if d.action in (Action.WARN, Action.WAIT) and d.snoozes_left is not None:
        detail += f" ({d.snoozes_left} snooze(s) left)"
    if d.action in (Action.WARN, Action.WAIT, Action.RECLAIM) and wb.idleness.gpu_memory != 0:
        held = wb.idleness.gpu_memory
        size = "GPU memory of unknown size" if held is None else f"{_bytes(held)} of GPU memory"
        kept = "saved before the stop" if wb.keeps_state else "lost with the kernel state"
        detail += f"; its kernels hold {size}, {kept}"
    return [first, detail]


def _summary(plan: Plan) -> str:
    counts = {a: 0 for a in Action}
    freed = Fraction(0)
    for d in plan.decisions:
        counts[d.action] += 1
        if d.action is Action.RECLAIM:
            freed += d.workbench.gpu_equivalents
    dry = sum(1 for d in plan.decisions if d.dry_run and d.action is not Action.SKIP)
    text = (
        f"Summary: reclaim {counts[Action.RECLAIM]} ({format_gpu_equivalents(freed)}"
        f" GPU-equivalents), warn {counts[Action.WARN]}, waiting {counts[Action.WAIT]},"
        f" warnings withdrawn {counts[Action.CLEAR_WARNING]}, left alone {counts[Action.SKIP]}."
    )
    if dry:
        text += f" {dry} of these are dry-run decisions: recorded, not carried out."
    return text


def _bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def explain_policies(policies: PolicySet) -> str:
    """The ``--check-policy`` report for a valid policy."""
    n = len(policies.policies)
    lines = [f"policy OK: {n} {'policy' if n == 1 else 'policies'}"]
    for i, p in enumerate(policies.policies):
        lines.append(f"  policies[{i}] {p.name}: {p.describe()}")
    extras = []
    if policies.exempt_users or policies.exempt_groups:
        names = sorted(policies.exempt_users) + [
            f"group {g}" for g in sorted(policies.exempt_groups)
        ]
        extras.append(f"exempt: {', '.join(names)}")
    extras.append(f"unknown after {format_duration(policies.report_stale_after)} without a report")
    extras.append(f"hand-off must be admitted within {format_duration(policies.handoff_timeout)}")
    if policies.dry_run:
        extras.append("dry run: nothing is carried out")
    if policies.notify is not None:
        extras.append(
            f"warnings and reclaims posted to {policies.notify.webhook}"
            f" (timeout {format_duration(policies.notify.timeout)})"
        )
    lines.append("  " + "; ".join(extras))
    return "\n".join(lines) + "\n"

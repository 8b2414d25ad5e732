"""Prometheus metrics of the gpuaas service's culler (``GET {prefix}metrics``).

A labelled counter has no series until a label set is first used; a series that appears at 1
is not growth to Prometheus' ``increase()`` and ``rate()``, so a team's first reclaim would be
missed. :meth:`Metrics.know_teams` creates every per-team series at 0 as soon as the team is
known (its LocalQueue or namespace), before anything is counted for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jupyter_gpuaas.core.kernel_state import OUTCOMES

__all__ = [
    "HANDOFF_RESULTS",
    "KERNEL_OUTCOMES",
    "OFFERING_KINDS",
    "RECLAIM_CODES",
    "RECLAIM_STATE_RESULTS",
    "Metrics",
]

RECLAIM_CODES = ("demand", "max-idle", "max-age", "always")
"""The codes of the culler's reclaim decisions (reclaim/decide.py): the ``code`` label of
``gpuaas_reclaims_total``."""
OFFERING_KINDS = ("gpu", "mig", "shared", "fraction")
"""The offering kinds that hold GPUs: the ``kind`` label of the showback counters."""
HANDOFF_RESULTS = ("succeeded", "failed")
"""The results of a hand-off: the ``result`` label of ``gpuaas_handoffs_total``."""
KERNEL_OUTCOMES = OUTCOMES
"""What a snapshot before a stop kept of one kernel (``jupyter_gpuaas.core.kernel_state``): the
``outcome`` label of ``gpuaas_kernel_states_total``."""
RECLAIM_STATE_RESULTS = ("kept", "kept_with_losses", "interrupted")
"""What a reclaim kept of its session (``reclaim/kept_state.py``): the ``result`` label of
``gpuaas_reclaim_states_total``."""


class Metrics:
    """Prometheus metrics of the culler (no user names as labels)."""

    def __init__(self, registry: Any = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.reclaimed = Counter(
            "gpuaas_reclaimed_gpu_equivalents",
            "GPU-equivalents freed by stopping idle workbenches, by team",
            ["team"],
            registry=r,
        )
        self.reclaims = Counter(
            "gpuaas_reclaims",
            "Workbenches stopped by the culler, by team and cause",
            ["team", "code"],
            registry=r,
        )
        self.warnings = Counter(
            "gpuaas_reclaim_warnings", "Reclaim warnings given, by team", ["team"], registry=r
        )
        self.decisions = Counter(
            "gpuaas_reclaim_decisions",
            "Decisions made, by action and code",
            ["action", "code"],
            registry=r,
        )
        self.idle_gpu_hours = Counter(
            "gpuaas_idle_gpu_hours",
            "GPU-equivalent hours held by idle workbenches, by team",
            ["team"],
            registry=r,
        )
        self.handoff_latency = Histogram(
            "gpuaas_handoff_latency_seconds",
            "From the reclaim to the admission of the queued workload it was for",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
            registry=r,
        )
        self.handoffs = Counter("gpuaas_handoffs", "Hand-offs by result", ["result"], registry=r)
        for result in HANDOFF_RESULTS:
            self.handoffs.labels(result)
        self.kernel_states = Counter(
            "gpuaas_kernel_states",
            "Kernels of reclaimed servers by what the snapshot before the stop kept of them",
            ["outcome"],
            registry=r,
        )
        for outcome in KERNEL_OUTCOMES:
            self.kernel_states.labels(outcome)
        self.reclaim_states = Counter(
            "gpuaas_reclaim_states",
            "Reclaims by what they kept of the session: kept, kept_with_losses, or interrupted"
            " (a kernel's state lost, no snapshot answer within snapshot_timeout, or a server"
            " that does not keep state)",
            ["result"],
            registry=r,
        )
        for result in RECLAIM_STATE_RESULTS:
            self.reclaim_states.labels(result)
        self.cycle_errors = Counter(
            "gpuaas_reclaim_cycle_errors",
            "Cycles that read nothing usable and acted on nothing",
            ["source"],
            registry=r,
        )
        self.policy_valid = Gauge(
            "gpuaas_policy_valid",
            "1: the policy file as it is now is in force; 0: it is invalid (the last good"
            " policy, or none, is in force; the log and api/health say why)",
            registry=r,
        )
        self.policy_reloads = Counter(
            "gpuaas_policy_reloads",
            "Policy file (re)loads, by result (loaded, invalid)",
            ["result"],
            registry=r,
        )
        self.requests_refused = Counter(
            "gpuaas_service_requests_refused",
            "Requests answered 429 (a caller over its rate limit), by endpoint; endpoint"
            ' "connections": connections refused 503 over max_unidentified_connections',
            ["endpoint"],
            registry=r,
        )
        self.cycle_seconds = Gauge(
            "gpuaas_reclaim_cycle_seconds", "Duration of the last complete cycle", registry=r
        )
        self.last_cycle = Gauge(
            "gpuaas_reclaim_last_cycle_timestamp_seconds",
            "When the last complete cycle decided (Unix time; 0: none yet)",
            registry=r,
        )
        # The console's showback (docs/console.md): per team and offering kind, no user names.
        team_kind = ["team", "kind"]
        self.gpu_allocated = Gauge(
            "gpuaas_gpu_equivalents_allocated",
            "GPU-equivalents held by running workbenches now",
            team_kind,
            registry=r,
        )
        self.gpu_busy = Gauge(
            "gpuaas_gpu_equivalents_busy",
            "GPU-equivalents held by workbenches judged busy now",
            team_kind,
            registry=r,
        )
        self.gpu_idle = Gauge(
            "gpuaas_gpu_equivalents_idle",
            "GPU-equivalents held by workbenches judged idle now",
            team_kind,
            registry=r,
        )
        self.gpu_allocated_seconds = Counter(
            "gpuaas_gpu_equivalent_allocated_seconds",
            "GPU-equivalent seconds held by workbenches",
            team_kind,
            registry=r,
        )
        self.gpu_busy_seconds = Counter(
            "gpuaas_gpu_equivalent_busy_seconds",
            "GPU-equivalent seconds held by busy workbenches",
            team_kind,
            registry=r,
        )
        self.gpu_idle_seconds = Counter(
            "gpuaas_gpu_equivalent_idle_seconds",
            "GPU-equivalent seconds held by idle workbenches",
            team_kind,
            registry=r,
        )
        self.queued_gpu = Gauge(
            "gpuaas_queued_gpu_equivalents",
            "GPU-equivalents asked for by the team's pending Workloads",
            ["team"],
            registry=r,
        )
        self.queued_workloads = Gauge(
            "gpuaas_queued_workloads", "The team's pending GPU Workloads", ["team"], registry=r
        )
        self.oldest_wait = Gauge(
            "gpuaas_queue_oldest_wait_seconds",
            "How long the team's oldest pending GPU Workload has waited",
            ["team"],
            registry=r,
        )
        self.failed_starts = Counter(
            "gpuaas_failed_starts",
            "Workbench pods admitted by Kueue that ended (deleted or failed) without ever being"
            " ready, by team",
            ["team"],
            registry=r,
        )
        self._teams: set[str] = set()
        """The teams whose series exist (:meth:`know_teams`)."""

    def know_teams(self, teams: Iterable[str]) -> None:
        """Create the per-team counters of ``teams`` at 0, for the teams not seen before (so
        that ``increase()`` sees their first count)."""
        for team in teams:
            if team in self._teams:
                continue
            self._teams.add(team)
            for counter in (self.reclaimed, self.warnings, self.idle_gpu_hours, self.failed_starts):
                counter.labels(team)
            for code in RECLAIM_CODES:
                self.reclaims.labels(team, code)
            for kind in OFFERING_KINDS:
                for seconds in (
                    self.gpu_allocated_seconds,
                    self.gpu_busy_seconds,
                    self.gpu_idle_seconds,
                ):
                    seconds.labels(team, kind)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST

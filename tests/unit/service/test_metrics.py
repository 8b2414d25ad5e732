"""The per-team counters exist at 0 once a team is known, so Prometheus' increase() sees a
team's first reclaim, warning or failed start (metrics.py)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from gpuaas_service.metrics import HANDOFF_RESULTS, OFFERING_KINDS, RECLAIM_CODES, Metrics


def _samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = m.exposition()[0].decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_known_teams_counters_are_exposed_at_zero_before_anything_is_counted() -> None:
    m = Metrics()
    assert not any(labels for (name, labels) in _samples(m) if name.endswith("reclaims_total"))
    m.know_teams(["team-a", "team-b"])
    samples = _samples(m)
    for team in ("team-a", "team-b"):
        for name in (
            "gpuaas_reclaimed_gpu_equivalents_total",
            "gpuaas_reclaim_warnings_total",
            "gpuaas_idle_gpu_hours_total",
            "gpuaas_failed_starts_total",
        ):
            assert samples[(name, (("team", team),))] == 0.0, name
        for code in RECLAIM_CODES:
            key = ("gpuaas_reclaims_total", (("code", code), ("team", team)))
            assert samples[key] == 0.0
        for kind in OFFERING_KINDS:
            for name in ("allocated", "busy", "idle"):
                key = (
                    f"gpuaas_gpu_equivalent_{name}_seconds_total",
                    (("kind", kind), ("team", team)),
                )
                assert samples[key] == 0.0


def test_a_count_after_know_teams_is_growth_from_zero_and_a_team_is_created_once() -> None:
    m = Metrics()
    m.know_teams(["team-a"])
    m.reclaims.labels("team-a", "demand").inc()
    m.know_teams(["team-a", "team-c"])  # known again: its count stays
    samples = _samples(m)
    assert samples[("gpuaas_reclaims_total", (("code", "demand"), ("team", "team-a")))] == 1
    assert samples[("gpuaas_reclaims_total", (("code", "demand"), ("team", "team-c")))] == 0


def test_handoff_results_are_exposed_at_zero_from_the_start() -> None:
    samples = _samples(Metrics())
    for result in HANDOFF_RESULTS:
        assert samples[("gpuaas_handoffs_total", (("result", result),))] == 0.0

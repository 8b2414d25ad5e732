"""Organisations as data: the shipped files load, a file with quotas beyond its pools (or any
other mistake) is refused with every problem at its field path, and the trace follows the
organisation's demand."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay import capacity, ladder
from benchmarks.replay.organisations import (
    ORGS,
    OrganisationError,
    available,
    load,
    read_organisation,
)


def _org(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "two-nodes",
        "pools": [{"name": "h100", "nodes": 2, "gpus_per_node": 8, "gpu_memory_gib": 80}],
        "teams": [{"name": "team-a"}, {"name": "team-b"}],
    }
    data.update(changes)
    return data


def _problems(data: Any) -> list[str]:
    with pytest.raises(OrganisationError) as caught:
        read_organisation(data, "test.yaml")
    return caught.value.problems


@pytest.mark.parametrize(
    ("name", "gpus", "teams"), [("dgx-4", 32, 2), ("dgx-8", 64, 3), ("dgx-16", 128, 4)]
)
def test_the_shipped_dgx_organisations(name: str, gpus: int, teams: int) -> None:
    spec = load(name)
    assert spec.training_gpus == gpus
    assert len(spec.teams) == teams
    assert all(p.gpus_per_node == 8 and p.gpu_memory_gib == 80 for p in spec.pools)
    assert sum(spec.users().values()) == pytest.approx(spec.demand.users_per_gpu * gpus, abs=2)


def test_the_mig_organisation_keeps_its_mig_node_for_notebooks() -> None:
    spec = load("dgx-8-mig")
    (mig,) = [p for p in spec.pools if p.mig is not None]
    assert mig.units == 8 * 7
    assert spec.physical_gpus == 72
    assert spec.training_gpus == 64
    org = ladder.world(spec, "L1", 64, 0.5).org
    assert org.capacity[("mig", "nvidia.com/mig-1g.10gb")] == 56
    training_flavors = {
        f
        for cq in org.cluster_queues.values()
        if cq.name.endswith("-training")
        for f, _ in cq.quotas
    }
    assert "mig" not in training_flavors


def test_every_file_of_orgs_is_listed_and_loads() -> None:
    names = available()
    assert names[0] == "sample"
    assert set(names[1:]) == {p.stem for p in ORGS.glob("*.yaml")}
    for name in names[1:]:
        assert load(name).name == name
        assert load(str(ORGS / f"{name}.yaml")).name == name  # --org FILE


def test_quotas_beyond_a_pool_are_refused_at_their_field_path() -> None:
    problems = _problems(
        _org(
            teams=[
                {"name": "team-a", "quota": {"h100": 10}},
                {"name": "team-b", "quota": {"h100": 7}},
            ]
        )
    )
    assert problems == [
        "teams[1].quota.h100: team quotas on pool 'h100' add up to 17 GPUs, beyond the pool's 16"
        " (2 nodes × 8 GPUs)"
    ]


def test_every_problem_is_listed_at_once_with_a_did_you_mean() -> None:
    problems = _problems(
        _org(
            pools=[{"name": "h100", "gpus_per_node": 8, "gpu_memry_gib": 80}],
            teams=[{"name": "Team A", "quota": {"h10": 2}}],
            demand={"users_per_gpu": "many", "training_load": 0.5},
        )
    )
    assert "pools[0].gpu_memry_gib: unknown field (did you mean 'gpu_memory_gib'?)" in problems
    assert "pools[0].nodes: required: how many nodes the pool has" in problems
    assert "teams[0].quota.h10: no such pool" in problems  # no pool was valid to suggest
    assert any(p.startswith("teams[0].name: ") for p in problems)
    assert any(p.startswith("demand.users_per_gpu: ") for p in problems)
    assert any(p.startswith("demand.training_load: unknown field") for p in problems)
    assert "teams: must name at least one team" in problems


def test_a_misspelt_pool_in_a_quota_gets_a_suggestion() -> None:
    problems = _problems(_org(teams=[{"name": "team-a", "quota": {"h10": 2}}]))
    assert problems == ["teams[0].quota.h10: no such pool (did you mean 'h100'?)"]


def test_an_unknown_organisation_name_gets_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(OrganisationError, match=r"no such organisation \(did you mean 'dgx-4'\?\)"):
        load("dgx-44")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(OrganisationError, match="not valid YAML"):
        load(str(bad))


def test_team_quotas_as_stated_the_rest_by_weight_by_largest_remainder() -> None:
    spec = read_organisation(
        _org(
            pools=[{"name": "h100", "nodes": 3, "gpus_per_node": 8}],
            teams=[
                {"name": "team-a", "quota": {"h100": 10}},
                {"name": "team-b", "weight": 2},
                {"name": "team-c"},
            ],
        )
    )
    (pool,) = spec.pools
    # 14 by weight 2:1 is 9.33 and 4.67: the unit left goes to the larger remainder.
    assert spec.team_quota(pool) == {"team-a": 10, "team-b": 9, "team-c": 5}
    half = spec.team_quota(pool, 12)  # a smaller cluster: the stated quota scales with it
    assert half == {"team-a": 5, "team-b": 5, "team-c": 2}


@pytest.mark.parametrize("org", ["dgx-4", "dgx-8", "dgx-16", "dgx-8-mig"])
def test_team_quotas_add_up_to_the_pool_at_every_size_of_the_grid(org: str) -> None:
    """No GPU is in the pool and in no ClusterQueue: at every size the search may run, the
    teams' quotas (and the queues' nominal quotas) add up to what the pools hold."""
    spec = load(org)
    for gpus in capacity.grid_sizes(spec.training_gpus):
        for pool in ladder.sized(spec, gpus):
            assert sum(spec.team_quota(pool).values()) == pool.units, (org, gpus, pool)
        docs, _pools = ladder.manifests(spec, ladder.RUNGS["B1"], gpus, 0.375)
        nominal = sum(
            r["nominalQuota"]
            for d in docs
            if d["kind"] == "ClusterQueue"
            for g in d["spec"]["resourceGroups"]
            for f in g["flavors"]
            if not f["name"].startswith("mig")
            for r in f["resources"]
        )
        assert nominal == gpus, (org, gpus)


def test_the_trace_follows_the_organisations_demand() -> None:
    spec = load("dgx-4").with_demand(users_per_gpu=2.0, gpu_memory_median_gib=12.0)
    trace = ladder.trace(spec, 3, days=1.0, burn_in_h=24.0)
    users = {s.user for s in trace.sessions}
    assert 0.8 * 64 <= len(users) <= 64
    median = statistics.median(s.gpu_memory_gib for s in trace.sessions)
    assert 12.0 / 1.3 < median < 12.0 * 1.3
    heavier = load("dgx-4").with_demand(training_offered_load=0.9)
    lighter = load("dgx-4").with_demand(training_offered_load=0.45)
    jobs = [len(ladder.trace(s, 3, days=1.0, burn_in_h=24.0).jobs) for s in (heavier, lighter)]
    assert 1.6 < jobs[0] / jobs[1] < 2.4


@pytest.mark.parametrize(
    ("name", "users_per_gpu", "training_load"),
    [("notebook-heavy", 3.0, 0.35), ("balanced", 2.0, 0.5), ("training-bound", 1.0, 0.7)],
)
def test_the_family_organisations(name: str, users_per_gpu: float, training_load: float) -> None:
    """The family of the page: nodes of 8 cards, the demand each is named for."""
    from benchmarks.replay.family import FAMILY

    assert name in FAMILY
    spec = load(name)
    assert all(p.gpus_per_node == 8 for p in spec.pools)
    assert spec.demand.users_per_gpu == users_per_gpu
    assert spec.demand.training_offered_load == training_load
    assert "assumed" in (ORGS / f"{name}.yaml").read_text(encoding="utf-8")

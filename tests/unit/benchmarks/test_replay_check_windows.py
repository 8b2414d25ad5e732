"""The dev-cluster check's windows per kind of rung: choosing the cohort-preemption window, the
shares window on local-0's H100 pool as the model runs it, the Kueue comparison (preemptions,
Jobs pending on scraps, their placement), the tolerances as data, and the page's section."""

from __future__ import annotations

import math
from typing import Any

import pytest

from benchmarks.replay import brain
from benchmarks.replay.check import (
    SHARES,
    TOLERANCES,
    _card_job,
    check_section,
    compare_kueue,
    first_window_with,
    model_run,
    notebook_body,
    shares_organisation,
    shares_window,
    verdict,
)
from benchmarks.replay.run import DEFAULT_CATALOG, DEFAULT_POLICY
from benchmarks.replay.sim import Latencies

CORES = ("local-h100", "nvidia.com/total-gpucores")


def test_the_first_candidate_window_with_what_it_is_for_is_chosen() -> None:
    assert first_window_with([(10.5, 0), (11.5, 2), (12.5, 5)]) == 11.5
    assert first_window_with([(10.5, 1), (11.5, 2)], minimum=2) == 11.5
    assert first_window_with([(10.5, 0), (11.5, 0)]) is None
    assert first_window_with([]) is None


def test_the_shares_organisation_is_the_h100_pool_alone() -> None:
    org = shares_organisation()
    assert org.capacity[CORES] == 200  # two H100s
    assert {f for f, _r in org.capacity} == {"local-h100"}
    assert org.nominal("team-a-notebooks", CORES) == 100
    assert org.nominal("team-b-notebooks", CORES) == 100
    assert org.nominal("team-a-training", CORES) == 0
    assert org.borrowing_limit("team-a-training", CORES) is None  # borrows freely
    assert next(iter(org.training_requests)) == "nvidia.com/total-gpucores"


@pytest.fixture(scope="module")
def shares_model() -> Any:
    return model_run(shares_window(), str(DEFAULT_POLICY), Latencies(10.0, 20.0), SHARES)


def test_the_shares_window_preempts_pends_on_scraps_and_places_after_the_reclaim(
    shares_model: Any,
) -> None:
    kueue = shares_model.kueue()
    decisions = shares_model.decisions()
    # Each team's notebooks come back: both borrowing Jobs are preempted, the later one first.
    assert list(kueue["preempted"]) == ["train-b", "train-a"]
    # A share ends: a card's quota is free but no card is: one Job admitted pends on scraps...
    (pending,) = kueue["fragmented"]
    # ...until the idle share is reclaimed for it (warned first), and it is placed.
    (reclaimed,) = decisions["reclaimed"]
    assert decisions["targets"][reclaimed] == pending
    assert decisions["warned"][reclaimed] + 15 * 60 <= decisions["reclaimed"][reclaimed]
    assert kueue["placed"][pending] >= decisions["reclaimed"][reclaimed]
    assert kueue["placed"][pending] < shares_window().days * 86400  # within the window
    # Every notebook took a quarter of an H100 of the pool.
    offerings = {s.offering.slug for s in shares_model.sim.sessions.values()}
    assert offerings == {"local-h100-quarter"}


def test_the_real_runs_workloads_are_shaped_for_the_pool(shares_model: Any) -> None:
    job = _card_job("train-a", "team-a", 1, 120.0).body
    spec = job["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    assert container["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "81920",
        "nvidia.com/gpucores": "100",
    }
    assert container["command"] == ["sleep", "120"]
    assert spec["nodeSelector"] == {"gpuaas.dev/pool": "local"}
    assert {t["key"] for t in spec["tolerations"]} == {
        "gpuaas.dev/local-node",
        "gpuaas.dev/h100-pool",
    }
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    state = next(iter(shares_model.sim.sessions.values()))
    pod = notebook_body("pod-x", state.session, state.offering, catalog)
    assert pod["metadata"]["annotations"]["nvidia.com/use-gputype"] == "H100"
    assert pod["spec"]["containers"][0]["command"][0] == "sleep"  # the node agent runs it
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpucores"] == "25"


def _kueue(**over: Any) -> dict[str, dict[str, float]]:
    d = {
        "preempted": {"train-b": 300.0, "train-a": 900.0},
        "fragmented": {"train-b": 1560.0},
        "placed": {"train-b": 5480.0},
    }
    d.update(over)
    return d


def test_kueue_decisions_agree_within_the_tolerance_and_not_beyond() -> None:
    same = compare_kueue(_kueue(), _kueue(placed={"train-b": 5500.0}), tolerance_s=60)
    assert all(same[w]["holds"] for w in ("preempted", "fragmented", "placed"))
    assert same["placed"]["deltas_s"] == {"train-b": 20.0}
    late = compare_kueue(_kueue(), _kueue(placed={"train-b": 5600.0}), tolerance_s=60)
    assert not late["placed"]["holds"]
    other = compare_kueue(_kueue(), _kueue(preempted={"train-b": 310.0}), tolerance_s=60)
    assert not other["preempted"]["holds"]
    assert other["preempted"]["real"] == ["train-b"]
    assert other["preempted"]["real_s"] == {"train-b": 310.0}
    # Preemption times are not compared, only which workloads.
    shifted = compare_kueue(
        _kueue(), _kueue(preempted={"train-b": 900.0, "train-a": 300.0}), tolerance_s=1
    )
    assert shifted["preempted"]["holds"]
    none = compare_kueue(_kueue(), _kueue(fragmented={}, placed={}), tolerance_s=60)
    assert not none["fragmented"]["holds"]
    assert not none["placed"]["holds"]


def _comparison(order: float) -> dict[str, Any]:
    return {
        "only_model": [],
        "only_real": [],
        "order_agreement": order,
        "waits": {
            "training": {"model_p50": 0.0, "real_p50": 20.0, "model_p90": 100.0, "real_p90": 110.0}
        },
    }


def test_the_verdict_takes_its_tolerances_from_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    cal = {"create→admitted": {"p99": 0.5}}
    kueue = compare_kueue(_kueue(), _kueue(), tolerance_s=60)
    v = verdict(_comparison(0.85), None, k=30, cal=cal, kueue=kueue)
    rows = {r["check"]: r for r in v["rows"]}
    assert not rows["admission order (pairs)"]["holds"]  # 85 % < 90 %
    assert rows["workloads preempted"]["holds"]
    assert rows["Jobs pending on scraps (Unschedulable)"]["holds"]
    assert rows["those Jobs placed, and when"]["tolerance"] == "same; ± 60 s"
    monkeypatch.setitem(TOLERANCES, "order_agreement", 0.8)
    monkeypatch.setitem(TOLERANCES, "allowance_p99s", 1.0)
    v = verdict(_comparison(0.85), None, k=30, cal=cal, kueue=kueue)
    rows = {r["check"]: r for r in v["rows"]}
    assert rows["admission order (pairs)"] == {
        "check": "admission order (pairs)",
        "tolerance": "≥ 80%",
        "holds": True,
    }
    assert v["allowance_s"] == 15.0
    assert not rows["training wait p50"]["holds"]  # 20 s > max(15 s, 2 s)
    assert v["all_hold"] is False


def _run(k: float, kueue: dict[str, Any]) -> dict[str, Any]:
    comparison = {
        "workloads": 7,
        "admitted_both": 7,
        "only_model": [],
        "only_real": [],
        "pairs": 21,
        "order_agreement": 1.0,
        "waits": {
            "training": {"model_p50": 0.0, "real_p50": 1.0, "model_p90": 60.0, "real_p90": 61.0},
            "notebook": {
                "model_p50": 0.0,
                "real_p50": math.nan,
                "model_p90": 0.0,
                "real_p90": 2.0,
            },
        },
    }
    none: dict[str, Any] = {"deltas_s": {}, "model_s": {}, "holds": True}
    decisions = {
        "tolerance_s": 60.0,
        "warned": none,
        "reclaimed": none,
        "targets": {"model": {}, "real": {}, "holds": True},
        "handoffs": {"model": {}, "real": {}},
    }
    cal = {"create→admitted": {"p99": 0.2}}
    return {
        "k": k,
        "wall_s": 200.0,
        "comparison": comparison,
        "decisions": decisions,
        "kueue": kueue,
        "verdict": verdict(comparison, decisions, k=k, cal=cal, kueue=kueue),
        "reports": {"sent": 10, "refused": 0, "errors": 0},
    }


def test_the_page_shows_one_section_per_window() -> None:
    cal = {
        n: {"n": 10, "p50": 0.1, "p99": 0.5, "max": 0.5}
        for n in ("create→admitted", "admitted→Running", "create→Running", "delete→next admitted")
    }
    model = {
        "warnings": 1,
        "reclaims": 1,
        "handoffs": 0,
        "preemptions": 2,
        "snoozes": 0,
        "pending_on_scraps": 1,
    }
    kueue = compare_kueue(_kueue(), _kueue(placed={"train-b": 5500.0}), tolerance_s=60)
    figures = {
        "seed": 1,
        "load_before": [3.0, 2.0, 1.0],
        "calibration": cal,
        "k": 30.0,
        "windows": [
            {
                "kind": "cohort",
                "start_h": 10.5,
                "hours": 2.0,
                "carried_every_s": 63.0,
                "jobs": 28,
                "sessions": 14,
                "model": {**model, "pending_on_scraps": 0},
                "runs": [_run(30.0, compare_kueue(_kueue(), _kueue(), tolerance_s=60))],
            },
            {
                "kind": "shares",
                "start_h": 0.0,
                "hours": 1.75,
                "carried_every_s": None,
                "jobs": 2,
                "sessions": 5,
                "model": model,
                "runs": [{**_run(30.0, kueue), "load": [14.3, 14.9, 10.8]}],
            },
        ],
    }
    text = check_section(figures)
    # The machine's load when each run ended, where the runs recorded it.
    assert text.count("| load average (1 min) at the run's end |") == 1
    assert "| load average (1 min) at the run's end | – | 14.3 |" in text
    assert "**Cohort preemption**: window 10.5 h + 2 h of seed 1" in text
    assert "**Shares on the training GPUs** (1.75 h" in text
    assert "1 Job(s) pending on scraps" in text
    assert text.count("| check | k = 30 |") == 2
    assert "| `train-b` placed on a freed card (real − model) | 5480 s | +20 s |" in text
    assert "| preempted | `train-a`, `train-b` | `train-a`, `train-b` |" in text
    assert "| workloads preempted | same: holds |" in text
    assert "\n\n\n" not in text


def test_the_hub_stand_in_names_each_servers_own_token_as_the_service_asks() -> None:
    """The service knows a server's own token by the hub's id for it (JupyterHub 5): the id
    the stand-in gives with the token's owner is the one its token list notes for that
    server's start."""
    from benchmarks.replay.service import HubStandIn, Server
    from gpuaas_service.web.servers import issued_token_id

    async def stop(pod: str) -> None:
        return None

    hub = HubStandIn(stop, lambda mono: "2026-01-05T10:00:00.000000Z")
    for user, name in (("bob", "s1"), ("bob", "s2"), ("amy", "s1")):
        hub.add(Server(user, name, "team-a", f"pod-{user}-{name}-1", 0.0))
    bob = hub.servers[("bob", "s2")]
    who = hub.by_token(bob.token)
    assert who is not None
    assert who["name"] == "bob"
    model = hub.user_model("bob")
    assert model is not None
    running = model["servers"]["s2"]
    assert running["url"] == "/user/bob/s2/"
    tokens = hub.tokens("bob")
    assert len(tokens) == 2
    assert issued_token_id(tokens, running["url"], running["started"]) == who["token_id"]
    service = hub.by_token(hub.service_token)
    assert service is not None
    assert "read:tokens" in service["scopes"]
    assert hub.by_token("nobody") is None


def test_a_placement_reclaim_for_a_jobs_pod_is_for_that_job() -> None:
    from benchmarks.replay.check import target_of

    jobs = ["train-a", "train-b", "job-00075"]
    assert target_of("team-a/train-a-b58pq", jobs) == "train-a"  # the pending pod's name
    assert target_of("team-a/job-job-00075-1a2b3", jobs) == "job-00075"  # a Workload
    assert target_of("jupyter-users/pod-pod-bob-s1-1-ed837", jobs) == "pod-bob-s1-1"
    assert target_of("team-a/train-ab-b58pq", jobs) == "train-ab-b58pq"  # not a Job's pod
    assert target_of("", jobs) == ""

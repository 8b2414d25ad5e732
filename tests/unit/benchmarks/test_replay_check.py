"""The dev-cluster check's pure parts: the loaded window, the compressed policy, the hub
stand-in the real service talks to, the model's decisions and their comparison. (The check
itself, ``python -m benchmarks replay-check``, is a benchmark on the dev cluster.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay import brain
from benchmarks.replay.check import (
    compare_decisions,
    model_run,
    scaled_policy,
    verdict,
    window_trace,
)
from benchmarks.replay.policies import Static, activity_payload
from benchmarks.replay.run import DEFAULT_POLICY, Task, make_trace
from benchmarks.replay.service import HubStandIn, Server
from benchmarks.replay.sim import SessionState
from jupyter_gpuaas.core.api_documents import request_bodies

HOUR = 3600.0


@pytest.fixture(scope="module")
def trace() -> Any:
    return make_trace(Task("static", 1))


def test_a_loaded_window_carries_the_work_under_way(trace: Any) -> None:
    start = trace.burn_in_s + 10.5 * HOUR
    empty = window_trace(trace, start, 2 * HOUR)
    loaded = window_trace(trace, start, 2 * HOUR, carry_every_s=63.0)
    assert len(loaded.jobs) > len(empty.jobs)
    assert len(loaded.sessions) > len(empty.sessions)
    under_way = [j for j in trace.jobs if j.submit_s < start < j.submit_s + j.duration_s]
    carried = sorted(j.submit_s for j in loaded.jobs if j.name in {u.name for u in under_way})
    open_sessions = [s for s in trace.sessions if s.start_s < start < s.start_s + s.length_s]
    at = sorted(s.start_s for s in loaded.sessions if s.name in {o.name for o in open_sessions})
    # One every 63 s from 0, in the order they started; the rest keep their times.
    assert sorted(carried + at) == [63.0 * i for i in range(len(under_way) + len(open_sessions))]
    for job in under_way:
        (got,) = [j for j in loaded.jobs if j.name == job.name]
        assert got.duration_s == pytest.approx(max(60.0, job.submit_s + job.duration_s - start))
    for s in open_sessions:
        (kept,) = [x for x in loaded.sessions if x.name == s.name]
        assert all(iv.start_s >= 0 and iv.end_s > iv.start_s for iv in kept.intervals)
        gone = start + kept.start_s - s.start_s
        assert kept.length_s == pytest.approx(s.length_s - gone)
        assert len(kept.intervals) == sum(1 for iv in s.intervals if iv.end_s > gone)
    # Deterministic.
    assert window_trace(trace, start, 2 * HOUR, carry_every_s=63.0) == loaded


def test_the_compressed_policy_is_the_admins_with_durations_divided_by_k(tmp_path: Path) -> None:
    text = DEFAULT_POLICY.read_text(encoding="utf-8")
    original = brain.load_policy_file(str(DEFAULT_POLICY))
    compressed_text = scaled_policy(text, 1 / 30)
    path = tmp_path / "compressed.yaml"
    path.write_text(compressed_text, encoding="utf-8")
    compressed = brain.load_policy_file(str(path))
    for a, b in zip(original.policies, compressed.policies, strict=True):
        assert a.name == b.name
        assert a.reclaim == b.reclaim
        assert b.idle_after * 30 == a.idle_after
        assert b.warn_before * 30 == a.warn_before
        assert (b.max_idle is None) == (a.max_idle is None)
        if a.max_idle is not None and b.max_idle is not None:
            assert b.max_idle * 30 == a.max_idle
        assert b.max_snoozes == a.max_snoozes
    assert "busy_utilization_percent: 10" in compressed_text  # numbers stay as they are


def test_the_hub_stand_in_answers_as_the_hub_for_tokens_users_and_stops() -> None:
    stopped: list[str] = []

    async def stop_pod(name: str) -> None:
        stopped.append(name)

    hub = HubStandIn(stop_pod, lambda mono: "2026-01-05T10:00:00.000000Z")
    server = Server("team-a-user01", "s-1", "team-a", "pod-team-a-user01-s-1-1", created=0.0)
    hub.add(server)
    me = hub.by_token(server.token)
    assert me is not None
    assert me["name"] == "team-a-user01"
    assert "access:servers!server=team-a-user01/s-1" in me["scopes"]
    assert hub.by_token("nobody") is None
    service = hub.by_token(hub.service_token)
    assert service is not None
    assert service["kind"] == "service"
    assert "delete:servers" in service["scopes"]
    assert "list:users" not in service["scopes"]
    model = hub.user_model("team-a-user01")
    assert model is not None
    assert model["groups"] == ["team-a"]
    assert model["servers"]["s-1"]["ready"] is False  # not started yet
    server.ready_at = 0.0
    assert hub.user_model("team-a-user01")["servers"]["s-1"]["ready"] is True  # type: ignore[index]

    async def http() -> list[tuple[int, Any]]:
        from tornado.httpclient import AsyncHTTPClient, HTTPClientError

        from benchmarks.replay.check import _free_port

        port = _free_port()
        listening = hub.make_app().listen(port, "127.0.0.1")
        client = AsyncHTTPClient()
        out: list[tuple[int, Any]] = []
        base = f"http://127.0.0.1:{port}/hub/api"
        asks = [
            ("GET", "/user", server.token),
            ("GET", "/users/team-a-user01", server.token),  # a server may not read users
            ("GET", "/users/team-a-user01", hub.service_token),
            ("GET", "/groups", hub.service_token),
            ("DELETE", "/users/team-a-user01/servers/s-1", server.token),
            ("DELETE", "/users/team-a-user01/servers/s-1", hub.service_token),
            ("DELETE", "/users/team-a-user01/servers/s-1", hub.service_token),
        ]
        for method, path, token in asks:
            try:
                r = await client.fetch(
                    base + path, method=method, headers={"Authorization": f"token {token}"}
                )
                out.append((r.code, json.loads(r.body) if r.body else None))
            except HTTPClientError as e:
                out.append((e.code, None))
        listening.stop()
        return out

    answers = asyncio.run(http())
    assert [code for code, _ in answers] == [200, 403, 200, 200, 403, 202, 404]
    assert answers[0][1]["name"] == "team-a-user01"
    assert answers[3][1]["items"] == [{"name": "team-a", "users": ["team-a-user01"]}]
    assert stopped == ["pod-team-a-user01-s-1-1"]
    assert [s[1:] for s in hub.stops] == [("team-a-user01", "s-1", "pod-team-a-user01-s-1-1")]


def test_the_model_of_the_check_window_warns_reclaims_and_hands_off(trace: Any) -> None:
    window = window_trace(trace, trace.burn_in_s + 10.5 * HOUR, 2 * HOUR, carry_every_s=63.0)
    model = model_run(window, str(DEFAULT_POLICY))
    d = model.decisions()
    assert d["reclaimed"], "the window is chosen to have reclaims"
    assert set(d["reclaimed"]) <= set(d["warned"])
    for pod, t in d["reclaimed"].items():
        assert t >= d["warned"][pod] + 15 * 60  # warn_before 15m in the policy file
        assert d["targets"][pod], "every reclaim is for a queued workload"
    assert set(d["handoffs"]) == {d["targets"][p] for p in d["reclaimed"]}
    admissions = model.admissions()
    assert all(a["admitted"] >= a["submitted"] for a in admissions.values())
    # The users' activity is kept whole for the real run to replay: from their first cell.
    for s in model.sim.sessions.values():
        if s.realised:
            first = s.session.intervals[0]
            assert s.realised[0][0] >= s.session.start_s + first.start_s
            assert len([r for r in s.realised if r[2] != "restore"]) == s.next_interval


def test_activity_payload_follows_the_clock_given(trace: Any) -> None:
    from datetime import datetime, timedelta, timezone

    session = trace.sessions[0]
    catalog = brain.load_catalog(str(DEFAULT_POLICY.parents[2] / "spawner" / "demo-catalog.yaml"))
    offering = next(iter(catalog.offerings.values()))
    state = SessionState(session, offering)
    state.ready_at = 100.0
    state.realised = [(100.0, 160.0, "cpu", 0.0), (400.0, 700.0, "gpu", 0.5)]
    base = datetime(2026, 1, 5, tzinfo=timezone.utc)
    at_k = activity_payload(state, 500.0, lambda t: base + timedelta(seconds=t / 30))
    assert at_k["kernels"][0]["execution_state"] == "busy"
    assert at_k["sampled_at"] == "2026-01-05T00:00:16.666667Z"
    idle = activity_payload(state, 800.0, lambda t: base + timedelta(seconds=t))
    assert idle["kernels"][0]["execution_state"] == "idle"
    assert idle["kernels"][0]["last_activity"] == "2026-01-05T00:11:40.000000Z"  # 700 s
    assert (at_k["idle_since"], idle["idle_since"]) == (None, "2026-01-05T00:11:40.000000Z")
    # what the dev-cluster check posts is a report the service takes (its OpenAPI document)
    bodies = request_bodies("service")
    assert bodies.errors("postActivity", at_k) == bodies.errors("postActivity", idle) == ([], 0)


def _decisions(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "warned": {"pod-a-1": 1000.0, "pod-b-1": 3000.0},
        "reclaimed": {"pod-a-1": 1900.0},
        "targets": {"pod-a-1": "pod-c-1"},
        "handoffs": {"pod-c-1": 0.0},
    }
    d.update(over)
    return d


def test_decisions_agree_within_the_tolerance_and_not_beyond() -> None:
    same = compare_decisions(_decisions(), _decisions(), tolerance_s=60)
    assert same["warned"]["holds"]
    assert same["reclaimed"]["holds"]
    assert same["targets"]["holds"]
    late = _decisions(reclaimed={"pod-a-1": 1990.0})
    got = compare_decisions(_decisions(), late, tolerance_s=60)
    assert not got["reclaimed"]["holds"]
    assert got["reclaimed"]["max_abs_delta_s"] == 90.0
    other = compare_decisions(
        _decisions(), _decisions(targets={"pod-a-1": "job-9"}), tolerance_s=60
    )
    assert not other["targets"]["holds"]
    missing = compare_decisions(
        _decisions(), _decisions(warned={"pod-a-1": 1000.0}), tolerance_s=60
    )
    assert missing["warned"]["only_model"] == ["pod-b-1"]
    assert not missing["warned"]["holds"]


def test_verdict_states_each_tolerance() -> None:
    cal = {"create→admitted": {"p99": 0.5}}
    comparison = {
        "only_model": [],
        "only_real": [],
        "order_agreement": 0.95,
        "waits": {
            "training": {"model_p50": 0.0, "real_p50": 20.0, "model_p90": 100.0, "real_p90": 140.0}
        },
    }
    v = verdict(comparison, None, k=30, cal=cal)
    rows = {r["check"]: r for r in v["rows"]}
    assert v["allowance_s"] == 30.0
    assert rows["training wait p50"]["holds"]  # 20 s ≤ 30 s
    assert not rows["training wait p90"]["holds"]  # 40 s > max(30 s, 14 s)
    assert not v["all_hold"]
    # A window whose preemptions vary 0.7 s over their p50 allows 2 × 30 × 0.7 s: a wait
    # through a slower preemption than the model's p50 is no model error.
    wide = verdict(comparison, None, k=30, cal=cal, preemption={"p50": 1.2, "p99": 1.9})
    assert wide["allowance_s"] == pytest.approx(42.0)
    assert wide["all_hold"]
    # A narrower preemption path than the admission's own p99 changes nothing.
    narrow = verdict(comparison, None, k=30, cal=cal, preemption={"p50": 1.2, "p99": 1.3})
    assert narrow["allowance_s"] == 30.0


def test_kueue_workload_names_compare_with_the_models() -> None:
    from benchmarks.replay.check import owner_of

    assert owner_of("jupyter-users/pod-pod-team-a-user09-s-00013-1-ed837") == (
        "pod-team-a-user09-s-00013-1"
    )
    assert owner_of("team-a/job-job-00087-1a2b3") == "job-00087"
    assert owner_of("pod-team-a-user15-s-00019-2") == "pod-team-a-user15-s-00019-2"


def test_freed_quota_admits_the_next_workload_only_after_the_release_latency() -> None:
    """The model fix the check found: a pod's end frees its quota ``release_s`` later, and a
    Job runs from ``start_s`` after its admission (both 0: the model as it was)."""
    from benchmarks.replay.run import DEFAULT_CATALOG, organisation
    from benchmarks.replay.sim import Latencies, Simulation
    from benchmarks.replay.trace import Trace, TrainingJob

    jobs = tuple(
        TrainingJob(f"job-{i}", "team-a", float(i), 12, 100.0, False, 0.5) for i in range(2)
    )
    trace = Trace(1, 1, 1 / 24, 0.0, ("team-a", "team-b"), jobs, ())
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    firsts = {}
    for lat in (Latencies(0.0, 0.0), Latencies(2.0, 5.0)):
        org = organisation(Task("static", 1))
        sim = Simulation(trace, org, catalog, Static(), latencies=lat, check_invariants=True)
        sim.run()
        firsts[lat] = [sim.jobs[f"team-a/job-{i}"].first_admitted for i in range(2)]
        ended = sim.jobs["team-a/job-0"].finished
        assert ended == pytest.approx(lat.start_s + 100.0)
    # 12 GPUs each: the h100 pool (16) holds one at a time; the second waits for the first.
    assert firsts[Latencies(0.0, 0.0)] == [0.0, 100.0]
    assert firsts[Latencies(2.0, 5.0)] == [0.0, pytest.approx(107.0)]  # 2 + 100 + 5


def _first_admissions(jobs: tuple[Any, ...], lat: Any) -> dict[str, float | None]:
    from benchmarks.replay.run import DEFAULT_CATALOG, organisation
    from benchmarks.replay.sim import Simulation
    from benchmarks.replay.trace import Trace

    trace = Trace(1, 1, 1 / 24, 0.0, ("team-a", "team-b"), jobs, ())
    catalog = brain.load_catalog(str(DEFAULT_CATALOG))
    org = organisation(Task("static", 1))
    sim = Simulation(trace, org, catalog, Static(), latencies=lat, check_invariants=True)
    sim.run()
    return {j.name: sim.jobs[f"team-a/{j.name}"].first_admitted for j in jobs}


def test_a_job_created_before_kueue_requeues_the_parked_ones_takes_the_freed_quota() -> None:
    """The k-dependence the check found (training wait p50 221 s model, 172 s real at k = 30):
    a Job whose pods end is complete a Job-controller sync (1 s) later, and Kueue requeues the
    workloads parked as inadmissible only after its 1 s batch; a workload created meanwhile
    is admitted at once. The model held the freed quota from everyone instead."""
    from benchmarks.replay.sim import Latencies
    from benchmarks.replay.trace import TrainingJob

    jobs = (
        TrainingJob("big", "team-a", 0.0, 16, 100.0, False, 0.5),  # the whole h100 pool
        TrainingJob("parked", "team-a", 1.0, 12, 100.0, False, 0.5),  # parked: no room
        TrainingJob("fresh", "team-a", 140.0, 8, 100.0, False, 0.5),  # after the release
    )
    got = _first_admissions(jobs, Latencies(0.0, 1.0, finish_s=30.0, requeue_s=30.0))
    # big ends at 100, complete at 130, its quota free at 131; the parked Job is a head
    # again at 161, after fresh took 8 of the 16 at 140; it gets room when fresh's quota is
    # free (240 + 31) and Kueue requeues it (+ 30).
    assert got == {"big": 0.0, "fresh": 140.0, "parked": pytest.approx(301.0)}
    # Requeued with the release (the model before): the parked Job first, fresh waits.
    before = _first_admissions(jobs, Latencies(0.0, 31.0))
    assert before == {"big": 0.0, "parked": 131.0, "fresh": pytest.approx(262.0)}


def test_an_evicted_jobs_quota_is_free_after_the_job_controllers_sync() -> None:
    """A notebook that preempts a Job waits for the Job's pods to be gone for Kueue: the Job
    controller's sync (``finish_s``) and the release (``release_s``), not the requeue batch (a
    preemptor is not parked). On the cluster: 35 s at k = 30 (the shares window)."""
    from benchmarks.replay.check import SHARES, model_run, shares_window
    from benchmarks.replay.sim import Latencies

    window = shares_window()
    lat = Latencies(start_s=2.0, release_s=7.0, finish_s=27.0, requeue_s=27.0)
    admissions = model_run(window, str(DEFAULT_POLICY), lat, SHARES).admissions()
    bob = admissions["pod-bob-s1-1"]  # team B's first share: preempts a borrowing Job
    assert bob["admitted"] - bob["submitted"] == pytest.approx(27.0 + 7.0)
    bea = admissions["pod-bea-s4-1"]  # within the quota the preemptions freed: at once
    assert bea["admitted"] == bea["submitted"]


def test_a_preemptor_also_waits_for_the_eviction() -> None:
    """The shares window's gap on the cluster (notebook wait p90 33.0 s model, 36.8 s real at
    k = 30): Kueue's decision and the victim's eviction (its Job suspended, its pod deleted and
    stopped on its node) come before the Job controller's sync. ``evict_s`` holds the victim's
    quota that much longer; a workload that preempts nothing does not wait for it."""
    from benchmarks.replay.check import SHARES, model_run, shares_window
    from benchmarks.replay.sim import Latencies

    lat = Latencies(start_s=2.0, release_s=7.0, finish_s=27.0, requeue_s=27.0, evict_s=4.0)
    admissions = model_run(shares_window(), str(DEFAULT_POLICY), lat, SHARES).admissions()
    bob = admissions["pod-bob-s1-1"]
    assert bob["admitted"] - bob["submitted"] == pytest.approx(4.0 + 27.0 + 7.0)
    bea = admissions["pod-bea-s4-1"]
    assert bea["admitted"] == bea["submitted"]


@pytest.mark.parametrize("kind", ["cohort", "shares"])
def test_the_preemption_scenario_is_one_preemption_in_the_model_too(kind: str) -> None:
    """The calibration's preemption path stands for the model's: in its scenario the model
    preempts one Job for the last arrival, which waits exactly the eviction, the Job
    controller's sync and the release."""
    from benchmarks.replay.check import (
        COHORT,
        SHARES,
        model_run,
        preemption_scenario,
        scenario_plans,
    )
    from benchmarks.replay.sim import Latencies

    scene = SHARES if kind == "shares" else COHORT
    scenario = preemption_scenario(kind)
    lat = Latencies(start_s=2.0, release_s=7.0, finish_s=27.0, requeue_s=27.0, evict_s=4.0)
    model = model_run(scenario, str(DEFAULT_POLICY), lat, scene)
    assert len(model.kueue()["preempted"]) == 1
    admissions = model.admissions()
    last = max(admissions, key=lambda n: admissions[n]["submitted"])
    assert admissions[last]["admitted"] - admissions[last]["submitted"] == pytest.approx(38.0)
    others = [a for n, a in admissions.items() if n != last]
    assert all(a["admitted"] == a["submitted"] == 0.0 for a in others)
    plans = scenario_plans(scenario, model, scene, "3")
    assert len(plans) == len(admissions)
    assert plans[-1].name.startswith(last.rsplit("-", 1)[0])  # the same arrival, renamed
    assert all(p.name.endswith("-3") for p in plans)


def test_the_models_latencies_at_k_are_k_times_the_measured_and_the_fixed_periods() -> None:
    from benchmarks.replay.check import compressed_latencies
    from benchmarks.replay.sim import Latencies

    cal = {"admitted→Running": {"p50": 0.06}, "delete→next admitted": {"p50": 1.08}}
    for k in (15.0, 30.0, 60.0):
        lat = compressed_latencies(cal, k)
        assert lat.start_s == pytest.approx(k * 0.06)
        assert lat.release_s == pytest.approx(k * 0.08)  # the rest of 1.08 s: Kueue's batch
        assert (lat.finish_s, lat.requeue_s) == (k * 1.0, k * 1.0)
        assert lat.evict_s == 0.0  # no preemption path measured
        assert isinstance(lat, Latencies)
        # A preemptor measured at 1.2 s: 1 s the Job controller's sync, 0.08 s the release,
        # the rest the eviction.
        lat = compressed_latencies(cal, k, preemption_p50=1.2)
        assert lat.evict_s == pytest.approx(k * 0.12)
        assert lat.evict_s + lat.finish_s + lat.release_s == pytest.approx(k * 1.2)
    assert compressed_latencies(cal, 30.0, preemption_p50=0.9).evict_s == 0.0
    # A release faster than Kueue's batch (a noisy calibration) is no negative latency.
    fast = {"admitted→Running": {"p50": 0.06}, "delete→next admitted": {"p50": 0.5}}
    assert compressed_latencies(fast, 30.0).release_s == 0.0


def test_benchmark_options_keep_their_hyphens(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    import benchmarks.__main__ as entry

    seen: list[list[str]] = []

    class Fake:
        @staticmethod
        def main(argv: list[str]) -> int:
            seen.append(argv)
            return 0

    real = importlib.import_module
    monkeypatch.setattr(
        importlib,
        "import_module",
        lambda name: Fake if name == "benchmarks.bench_replay_check" else real(name),
    )
    assert entry.main(["replay-check", "--policy-file", "/etc/my-policy.yaml", "--also-k", ""]) == 0
    assert seen == [["--policy-file", "/etc/my-policy.yaml", "--also-k", ""]]


@pytest.fixture(scope="module")
def window_model(trace: Any) -> Any:
    window = window_trace(trace, trace.burn_in_s + 10.5 * HOUR, 2 * HOUR, carry_every_s=63.0)
    return window, model_run(window, str(DEFAULT_POLICY))


def test_the_reclaim_script_is_the_windows_jobs_and_the_models_users_in_time_order(
    window_model: Any,
) -> None:
    from benchmarks.replay.check import COHORT, RUN_SECONDS, ReclaimRun, reclaim_script

    window, model = window_model
    script = reclaim_script(window, model, 30.0, COHORT)
    creates = [s for s in script if s.what == "create"]
    assert sorted(s.item.name for s in creates) == sorted(j.name for j in window.jobs)
    for step in creates:
        (job,) = [j for j in window.jobs if j.name == step.item.name]
        assert step.at == job.submit_s
        annotations = step.item.body["spec"]["template"]["metadata"]["annotations"]
        assert annotations[RUN_SECONDS] == f"{job.duration_s / 30.0:.2f}"  # run time ÷ k
    users = [e for e in model.events if e["event"] in ("spawn", "session_end", "snooze")]
    assert [s.item for s in script if s.what != "create"] == sorted(users, key=lambda e: e["t"])
    assert [(s.at, s.order) for s in script] == sorted((s.at, s.order) for s in script)
    spawned = {e["workload"].split("/", 1)[1] for e in users if e["event"] == "spawn"}
    assert ReclaimRun.names(script) == {j.name for j in window.jobs} | spawned


def test_the_reclaim_runs_results_are_in_trace_seconds(window_model: Any) -> None:
    from types import SimpleNamespace

    from benchmarks.replay.check import COHORT, ReclaimRun, reclaim_script

    window, model = window_model
    job = window.jobs[0].name
    real: Any = SimpleNamespace(
        created={job: 101.0, "not-in-the-window": 101.0},
        admitted={job: 102.0},
        warned={"pod-a": 103.0},
        preempted={job: 104.0, "other": 104.0},
        fragmented={},
        placed={},
        topology={},
    )
    run = ReclaimRun(real, window, model, 30.0)
    run.t0 = 100.0
    run.hub.stops.append((105.0, "user-a", "s-1", "pod-a"))
    audit: list[dict[str, Any]] = [
        {
            "event": "culler.decision",
            "action": "reclaim",
            "user": "user-a",
            "server": "s-1",
            "handoff": f"{window.jobs[1].team}/job-{window.jobs[1].name}-1a2b3",
        },
        {
            "event": "culler.decision",
            "action": "reclaim",
            "dry_run": True,
            "user": "user-a",
            "server": "s-1",
            "handoff": "ignored",
        },
        {
            "event": "culler.handoff",
            "result": "succeeded",
            "latency_seconds": 1.5,
            "workload": "jupyter-users/pod-pod-a-0f0f0",
        },
        {
            "event": "culler.handoff",
            "result": "failed",
            "latency_seconds": 9.0,
            "workload": "jupyter-users/pod-pod-b-0f0f0",
        },
    ]
    out = run.results(reclaim_script(window, model, 30.0, COHORT), audit)
    assert out["admissions"] == {job: {"submitted": 30.0, "admitted": 60.0}}
    assert out["decisions"] == {
        "warned": {"pod-a": 90.0},
        "reclaimed": {"pod-a": 150.0},
        "targets": {"pod-a": window.jobs[1].name},
        "handoffs": {"pod-a": 45.0},  # 1.5 s × k
    }
    assert out["kueue"] == {
        "preempted": {job: 120.0},
        "fragmented": {},
        "placed": {},
        "topology": {},
    }
    assert out["audit_records"] == 4


def test_the_windows_checked_are_the_kinds_asked_for(trace: Any) -> None:
    from benchmarks.replay.check import (
        COHORT,
        SHARES,
        choose_windows,
        first_window_with,
        parse,
    )

    cal = {"admitted→Running": {"p50": 0.06}, "delete→next admitted": {"p50": 1.08}}
    both = parse(["--candidates", "2"])
    windows, counts = asyncio.run(choose_windows(trace, both, 30.0, cal))
    assert [h for h, _n in counts] == [10.5, 11.5]
    chosen = first_window_with(counts)
    assert chosen is not None, "a candidate in which the model preempts"
    assert [(w[0], w[1], w[2]) for w in windows] == [
        (COHORT, chosen, 2 * HOUR),
        (SHARES, 0.0, 1.75 * HOUR),
    ]
    assert windows[0][3] == window_trace(
        trace, trace.burn_in_s + chosen * HOUR, 2 * HOUR, carry_every_s=63.0
    )
    shares, _ = asyncio.run(
        choose_windows(trace, parse(["--candidates", "2", "--kinds", "shares"]), 30.0, cal)
    )
    assert [w[0] for w in shares] == [SHARES]

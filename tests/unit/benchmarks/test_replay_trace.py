"""The replay's trace generator: deterministic per seed, and its documented distributions."""

from __future__ import annotations

import math
import statistics
from statistics import NormalDist

import pytest

from benchmarks.replay import ladder
from benchmarks.replay.metrics import percentile
from benchmarks.replay.organisations import load
from benchmarks.replay.trace import HOUR, PARAMETERS, clock_hour, generate

TEAMS = ("team-a", "team-b")


def test_same_seed_same_trace_and_other_seeds_differ() -> None:
    a = generate(7, teams=TEAMS, training_gpus=16)
    b = generate(7, teams=TEAMS, training_gpus=16)
    c = generate(8, teams=TEAMS, training_gpus=16)
    assert a == b
    assert a.jobs != c.jobs


def test_training_sizes_durations_and_failures_follow_the_table() -> None:
    trace = generate(1, teams=TEAMS, training_gpus=160, days=5)
    jobs = trace.jobs
    assert len(jobs) > 1500
    sizes = PARAMETERS["train_sizes"].value
    for gpus, p in sizes.items():
        share = sum(j.gpus == gpus for j in jobs) / len(jobs)
        assert abs(share - p) < 0.03, (gpus, share, p)
    # Jobs that run to the end keep the lognormal (median 874 s, σ 2.46) truncated to
    # [1 min, 24 h]: its median within 10%.
    whole = [j.duration_s for j in jobs if not j.fails]
    mu = math.log(PARAMETERS["train_duration_log_median_s"].value)
    sigma = PARAMETERS["train_duration_sigma"].value
    normal = NormalDist()
    low = normal.cdf((math.log(PARAMETERS["train_duration_min_s"].value) - mu) / sigma)
    high = normal.cdf((math.log(PARAMETERS["train_duration_max_s"].value) - mu) / sigma)
    expected = math.exp(mu + sigma * normal.inv_cdf((low + high) / 2))
    assert abs(statistics.median(whole) / expected - 1) < 0.1
    assert max(j.duration_s for j in jobs) <= PARAMETERS["train_duration_max_s"].value
    failed = sum(j.fails for j in jobs) / len(jobs)
    assert abs(failed - PARAMETERS["train_stop_early"].value) < 0.04


def test_arrivals_follow_the_day_rhythm() -> None:
    trace = generate(2, teams=TEAMS, training_gpus=160, days=5)
    night = sum(1 for j in trace.jobs if clock_hour(trace, j.submit_s) < 6)
    late_morning = sum(1 for j in trace.jobs if 9 <= clock_hour(trace, j.submit_s) < 12)
    rhythm = PARAMETERS["train_hourly_rhythm"].value
    expected = sum(rhythm[9:12]) / sum(rhythm[0:6]) * 6 / 3  # per hour ratio x hours
    assert abs((late_morning / night) / (expected * 3 / 6) - 1) < 0.25


def test_sessions_bursts_and_utilisation() -> None:
    trace = generate(3, teams=TEAMS, training_gpus=16, days=5, users_per_team=40)
    sessions = trace.sessions
    # First sessions start 08-18 h; second ones after a break of about 4 h.
    hours = [clock_hour(trace, s.start_s) for s in sessions]
    assert sum(8 <= h < 18 for h in hours) / len(hours) > 0.8
    assert not any(3 <= h < 8 for h in hours)
    lengths = [s.length_s for s in sessions]
    assert 2 * HOUR < statistics.median(lengths) < 3.6 * HOUR  # median 3 h, cut by the window
    gpu_cells = [i for s in sessions for i in s.intervals if i.kind == "gpu"]
    whole = [i.end_s - i.start_s for i in gpu_cells]
    # The Sensei fit (median 5 min, σ 1.448) without events under 1 min: its median within
    # 15% (the session's end cuts some bursts short).
    normal = NormalDist()
    mu, sigma = math.log(PARAMETERS["burst_log_median_s"].value), PARAMETERS["burst_sigma"].value
    low = normal.cdf((math.log(PARAMETERS["burst_min_s"].value) - mu) / sigma)
    expected = math.exp(mu + sigma * normal.inv_cdf((low + 1) / 2))
    assert abs(percentile(whole, 50) / expected - 1) < 0.15
    zero = sum(i.utilization == 0 for i in gpu_cells) / len(gpu_cells)
    assert abs(zero - PARAMETERS["utilization_zero"].value) < 0.03
    assert abs(percentile([i.utilization for i in gpu_cells], 50) - 0.5) < 0.05
    busy = [sum(i.end_s - i.start_s for i in s.gpu_bursts) / s.length_s for s in sessions]
    assert 0.05 <= statistics.fmean(busy) <= 0.40  # the note's 5-40%
    assert any(i.kind == "cpu" for s in sessions for i in s.intervals)
    assert any(i.kind == "terminal" for s in sessions for i in s.intervals)
    assert not any(math.isnan(s.gpu_memory_gib) for s in sessions)


@pytest.mark.parametrize("within", [0.0, 0.5, 1.0])
def test_the_need_model_reproduces_its_stated_spread(within: float) -> None:
    """Needs around a per-user level: in log space the sessions of one user spread by w σ, the
    users' levels by √(1 − w²) σ, and all sessions by σ around the median, whatever w."""
    spec = load("dgx-4").with_demand(users_per_gpu=4.0, gpu_memory_within_user=within)
    sigma = spec.demand.gpu_memory_sigma
    trace = ladder.trace(spec, 11, days=6.0, burn_in_h=24.0)
    logs: dict[str, list[float]] = {}
    for s in trace.sessions:
        logs.setdefault(s.user, []).append(math.log(s.gpu_memory_gib / 8.0))
    every = [x for xs in logs.values() for x in xs]
    assert statistics.pstdev(every) == pytest.approx(sigma, abs=0.12)
    assert abs(statistics.fmean(every)) < 0.15
    within_sd = math.sqrt(
        statistics.fmean(statistics.variance(xs) for xs in logs.values() if len(xs) > 2)
    )
    assert within_sd == pytest.approx(within * sigma, abs=0.1)
    levels = [statistics.fmean(xs) for xs in logs.values() if len(xs) > 2]
    # The spread of a user's mean: the levels' plus what their own sessions add.
    n = statistics.fmean(len(xs) for xs in logs.values() if len(xs) > 2)
    between = math.sqrt(max(0.0, statistics.variance(levels) - (within * sigma) ** 2 / n))
    assert between == pytest.approx(math.sqrt(1 - within**2) * sigma, abs=0.15)
    history = ladder.warm_history(spec, trace)  # the service's history: the same model
    user = trace.sessions[0].user
    peaks = [math.log(p / 1024 / 8.0) for p in history.peaks[user]]
    if within == 0.0:
        assert max(peaks) - min(peaks) < 0.01
        assert peaks[0] == pytest.approx(logs[user][0], abs=0.01)

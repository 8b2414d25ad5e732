"""The seeded trace generator: training jobs and notebook sessions for a simulated day (or week).

Every distribution's parameters are in :data:`PARAMETERS` with the source they come from
(docs/replay.md prints that table); the generator reads nothing else. The same seed and the
same :data:`TRACE_VERSION` give the same trace, on any machine (``random.Random`` only).

Times are seconds from the trace's start, which is midnight of day 0; the first
``burn_in_s`` seconds warm the cluster up and are not measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

TRACE_VERSION = 1
HOUR = 3600.0
DAY = 24 * HOUR
MINUTE = 60.0


@dataclass(frozen=True)
class Parameter:
    value: Any
    source: str


PARAMETERS: dict[str, Parameter] = {
    # -- training jobs
    "train_sizes": Parameter(
        {1: 0.75, 2: 0.10, 4: 0.10, 8: 0.05},
        "P(1/2/4/8 GPUs): an inference from Philly, Helios and Acme (median 1 GPU everywhere;"
        " Philly mean 1.93, this gives 1.75); Joulie uses .80/.10/.07/.03",
    ),
    "train_duration_log_median_s": Parameter(
        874.0, "Philly median GPU-job duration 874 s (AcmeTrace data/cluster_summary.csv)"
    ),
    "train_duration_sigma": Parameter(
        2.46,
        "σ = √(2 ln(mean/median)) with Philly mean 18,006 s / median 874 s (checked: 2.46)",
    ),
    "train_duration_max_s": Parameter(24 * HOUR, "truncated at 24 h (assumption)"),
    "train_duration_min_s": Parameter(60.0, "events under 1 min dropped, as the Sensei generator"),
    "train_stop_early": Parameter(
        0.395,
        "Philly failed 30.5% + cancelled 9.0% (AcmeTrace cluster_summary.csv); such a job stops"
        " at a uniform fraction of its drawn duration",
    ),
    "train_hourly_rhythm": Parameter(
        (0.7,) * 6
        + (0.8, 0.9, 1.0, 1.1, 1.2, 1.2, 1.1, 1.1, 1.1, 1.0, 1.0, 1.0)
        + (0.9, 0.9, 0.8, 0.8, 0.7, 0.7),
        "hourly multipliers ≈0.7 at night to 1.2 late morning (inference; Helios"
        " Earth allocated share 62% at 09:00 to 70% at midnight shows the rhythm is mild)",
    ),
    "train_daytime_offered_load": Parameter(
        0.95,
        "daytime (09-18 h) offered load ÷ the training pool (the h100 pool): the middle of"
        " 0.8-1.1, an inference: without queueing a reclaim shows nothing",
    ),
    "train_utilization_mean": Parameter(
        0.455,
        "a training GPU's GPU_UTIL averaged over its life: the mean of the per-minute"
        " distribution below (Philly's hardware average is quoted as ≈52%)",
    ),
    # -- notebook sessions
    "users_per_team": Parameter(
        16, "assumption (sized so the notebook queues are busy but not saturated); sweepable"
    ),
    "session_days_per_user": Parameter(0.9, "assumption: a user opens a session most workdays"),
    "second_session": Parameter(
        0.3, "assumption: users who come back after a break for a second session that day"
    ),
    "session_start_hours": Parameter(
        (8.0, 18.0), "sessions start 08:00-18:00 (inference: working hours)"
    ),
    "session_length_log_median_s": Parameter(
        3 * HOUR, "median session ≈3 h (inference; sweep 1-8 h)"
    ),
    "session_length_sigma": Parameter(0.8, "assumption (lognormal spread); capped at 12 h"),
    "session_length_max_s": Parameter(12 * HOUR, "assumption"),
    "burst_log_median_s": Parameter(
        5 * MINUTE,
        "Sensei notebook GPU events p50 5 min (NotebookOS-Dashboard sensei_june_60sec.csv,"
        " Adobe's June 2021 events)",
    ),
    "burst_sigma": Parameter(
        1.448,
        "fit to the Sensei p50 5 min / p90 32 min: σ = ln(32/5)/1.2816; gives p75 13 min"
        " (Sensei 11) and p99 145 min (Sensei 1,021: the real tail is heavier). Dropping"
        " bursts under 1 min moves the drawn median to ≈6 min",
    ),
    "burst_min_s": Parameter(60.0, "Sensei events under 1 minute are dropped"),
    "gap_log_median_s": Parameter(
        20 * MINUTE,
        "assumption chosen so a session's GPU-busy fraction falls in 5-40% (inference from"
        " NotebookOS); checked in the tests",
    ),
    "gap_sigma": Parameter(1.2, "assumption (heavy-tailed idle gaps, NotebookOS: sporadic use)"),
    "break_after_s": Parameter(
        30 * MINUTE, "a gap this long is a break: the user is away, no kernel or terminal activity"
    ),
    "cell_every_s": Parameter(
        4 * MINUTE,
        "assumption: while working between GPU bursts, a short CPU-only cell starts on average"
        " this often (kernel activity is a stream denser than the GPU bursts)",
    ),
    "cell_log_median_s": Parameter(20.0, "assumption: short interactive cells"),
    "cell_sigma": Parameter(1.0, "assumption"),
    "terminal_share": Parameter(0.3, "assumption: sessions with a terminal in use"),
    "utilization_zero": Parameter(
        0.30,
        "share of busy GPU samples at 0% (Philly ≈32%, Seren ≈31%, Kalos ≈34%: CDFs of the"
        " AcmeTrace artifact): a burst with utilisation 0 is a cell busy without using the GPU",
    ),
    "utilization_nonzero": Parameter(
        (0.3, 1.0),
        "uniform on the rest, so that the median is ≈0.5 (Philly's median ≈49%)",
    ),
    "gpu_memory_log_median_gib": Parameter(
        8.0,
        "assumption (no public source): a session's GPU memory need, lognormal median 8 GiB; it"
        " picks the offering (see docs/replay.md)",
    ),
    "gpu_memory_sigma": Parameter(1.0, "assumption"),
    "gpu_memory_within_user": Parameter(
        0.5,
        "assumption (no public source): the within-user share w of the need's spread: a"
        " user's sessions need their own level × lognormal(w σ), the levels spread by"
        " √(1 − w²) σ, so that every session's need is lognormal(median, σ) whatever w"
        " (0: a user's needs repeat; 1: drawn afresh each session); swept",
    ),
    "weekend_factor": Parameter(
        0.3, "assumption: weekend days carry this share of a weekday's sessions and jobs"
    ),
}


def _p(name: str) -> Any:
    return PARAMETERS[name].value


@dataclass(frozen=True)
class TrainingJob:
    name: str
    team: str
    submit_s: float
    gpus: int
    duration_s: float
    """Running time if it is never preempted (already shortened for a failure)."""
    fails: bool
    utilization: float


@dataclass(frozen=True)
class Interval:
    start_s: float
    """Seconds from the session's start."""
    end_s: float
    kind: str
    """``gpu`` (a kernel cell that may use the GPU), ``cpu`` (a short cell, no GPU) or
    ``terminal``."""
    utilization: float = 0.0


@dataclass(frozen=True)
class Session:
    name: str
    user: str
    team: str
    start_s: float
    length_s: float
    gpu_memory_gib: float
    intervals: tuple[Interval, ...] = field(default_factory=tuple)

    @property
    def gpu_bursts(self) -> tuple[Interval, ...]:
        return tuple(i for i in self.intervals if i.kind == "gpu" and i.utilization > 0)


@dataclass(frozen=True)
class Trace:
    seed: int
    version: int
    days: float
    burn_in_s: float
    teams: tuple[str, ...]
    jobs: tuple[TrainingJob, ...]
    sessions: tuple[Session, ...]

    @property
    def end_s(self) -> float:
        return self.burn_in_s + self.days * DAY


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma))


def _bounded_lognormal(
    rng: random.Random, median: float, sigma: float, low: float, high: float
) -> float:
    """Redrawn until within [low, high]: a truncated lognormal."""
    for _ in range(1000):
        x = _lognormal(rng, median, sigma)
        if low <= x <= high:
            return x
    return min(max(median, low), high)


def user_level(seed: int, user: str) -> float:
    """A user's need level, as a standard normal draw: the same on every rung and size (its
    own stream, so that the trace's other draws do not move with it)."""
    return random.Random(f"need-level/{seed}/{user}").gauss(0.0, 1.0)


def need_gib(median: float, sigma: float, within: float, level: float, draw: float) -> float:
    """A session's GPU-memory need: ``median`` × exp(σ (√(1 − w²) ``level`` + w ``draw``)),
    ``level`` the user's and ``draw`` the session's standard normal draws, w = ``within``:
    lognormal(median, σ) over users and sessions alike, whatever w."""
    w = min(1.0, max(0.0, within))
    return median * math.exp(sigma * (math.sqrt(1.0 - w * w) * level + w * draw))


def burst_utilization(rng: random.Random) -> float:
    if rng.random() < _p("utilization_zero"):
        return 0.0
    low, high = _p("utilization_nonzero")
    return rng.uniform(low, high)


def truncated_lognormal_mean(median: float, sigma: float, low: float, high: float) -> float:
    """E[X | low ≤ X ≤ high] for X lognormal(ln median, sigma) (closed form)."""
    mu = math.log(median)

    def phi(x: float) -> float:
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    a, b = (math.log(low) - mu) / sigma, (math.log(high) - mu) / sigma
    mass = phi(b) - phi(a)
    return math.exp(mu + sigma**2 / 2) * (phi(b - sigma) - phi(a - sigma)) / mass


def mean_job_gpu_seconds() -> float:
    """E[GPUs × running time] of one training job under :data:`PARAMETERS`."""
    sizes: dict[int, float] = _p("train_sizes")
    mean_gpus = sum(g * p for g, p in sizes.items())
    duration = truncated_lognormal_mean(
        _p("train_duration_log_median_s"),
        _p("train_duration_sigma"),
        _p("train_duration_min_s"),
        _p("train_duration_max_s"),
    )
    early: float = _p("train_stop_early")
    return float(mean_gpus * duration * (1 - early / 2))


def day_factor(day: int) -> float:
    return _p("weekend_factor") if day % 7 in (5, 6) else 1.0


def _training(
    rng: random.Random,
    teams: Sequence[str],
    training_gpus: int,
    start: float,
    end: float,
    offered_load: float,
    team_weights: Sequence[float] | None,
) -> list[TrainingJob]:
    rhythm: Sequence[float] = _p("train_hourly_rhythm")
    daytime = sum(rhythm[9:18]) / 9
    per_second = offered_load * training_gpus / mean_job_gpu_seconds()
    peak = per_second / daytime * max(rhythm)
    sizes: dict[int, float] = _p("train_sizes")
    jobs: list[TrainingJob] = []
    t = start
    # Thinning (Lewis-Shedler) for the non-homogeneous Poisson arrivals.
    while True:
        t += rng.expovariate(peak)
        if t >= end:
            return jobs
        hour = int(t // HOUR) % 24
        rate = per_second / daytime * rhythm[hour] * day_factor(int(t // DAY))
        if rng.random() * peak > rate:
            continue
        gpus = rng.choices(list(sizes), weights=list(sizes.values()))[0]
        duration = _bounded_lognormal(
            rng,
            _p("train_duration_log_median_s"),
            _p("train_duration_sigma"),
            _p("train_duration_min_s"),
            _p("train_duration_max_s"),
        )
        fails = rng.random() < _p("train_stop_early")
        if fails:
            duration = max(_p("train_duration_min_s"), duration * rng.random())
        jobs.append(
            TrainingJob(
                name=f"job-{len(jobs):05d}",
                team=(
                    rng.choices(list(teams), weights=team_weights)[0]
                    if team_weights
                    else rng.choice(list(teams))
                ),
                submit_s=t,
                gpus=gpus,
                duration_s=duration,
                fails=fails,
                utilization=_p("train_utilization_mean"),
            )
        )


def _activity(rng: random.Random, length: float, terminal: bool) -> tuple[Interval, ...]:
    """GPU bursts separated by gaps; short CPU cells (and terminal use) while working."""
    out: list[Interval] = []
    t = rng.uniform(0, 5 * MINUTE)  # the notebook opens, the user starts working
    while t < length:
        burst = _bounded_lognormal(
            rng, _p("burst_log_median_s"), _p("burst_sigma"), _p("burst_min_s"), length
        )
        end = min(t + burst, length)
        out.append(Interval(t, end, "gpu", burst_utilization(rng)))
        gap = _lognormal(rng, _p("gap_log_median_s"), _p("gap_sigma"))
        working = gap < _p("break_after_s")
        nxt = end + gap
        if working:
            c = end + rng.expovariate(1 / _p("cell_every_s"))
            while c < min(nxt, length):
                d = _lognormal(rng, _p("cell_log_median_s"), _p("cell_sigma"))
                c_end = min(c + d, nxt, length)
                kind = "terminal" if terminal and rng.random() < 0.3 else "cpu"
                out.append(Interval(c, c_end, kind))
                c = c_end + rng.expovariate(1 / _p("cell_every_s"))
        t = nxt
    return tuple(out)


def _sessions(
    rng: random.Random,
    teams: Sequence[str],
    users: Mapping[str, int],
    days: int,
    start: float,
    end: float,
    memory: tuple[float, float, float],
    seed: int,
) -> list[Session]:
    out: list[Session] = []
    first, last = _p("session_start_hours")
    for team in teams:
        for u in range(users[team]):
            user = f"{team}-user{u:02d}"
            level = user_level(seed, user)
            for day in range(days):
                if rng.random() > _p("session_days_per_user") * day_factor(day):
                    continue
                starts = [day * DAY + rng.uniform(first, last) * HOUR]
                if rng.random() < _p("second_session"):
                    starts.append(starts[0] + _lognormal(rng, 4 * HOUR, 0.3))
                previous_end = 0.0
                for s in sorted(starts):
                    s = max(s, previous_end + 15 * MINUTE)
                    if s - day * DAY > 22 * HOUR:
                        continue  # nobody starts a session after 22:00
                    if not start <= s < end:
                        continue
                    length = _bounded_lognormal(
                        rng,
                        _p("session_length_log_median_s"),
                        _p("session_length_sigma"),
                        15 * MINUTE,
                        _p("session_length_max_s"),
                    )
                    length = min(length, end - s)
                    previous_end = s + length
                    out.append(
                        Session(
                            name=f"s-{len(out):05d}",
                            user=user,
                            team=team,
                            start_s=s,
                            length_s=length,
                            gpu_memory_gib=need_gib(
                                memory[0], memory[1], memory[2], level, rng.gauss(0.0, 1.0)
                            ),
                            intervals=_activity(rng, length, rng.random() < _p("terminal_share")),
                        )
                    )
    out.sort(key=lambda s: (s.start_s, s.name))
    return out


def generate(
    seed: int,
    *,
    teams: Sequence[str],
    training_gpus: int,
    days: float = 1.0,
    burn_in_s: float = 6 * HOUR,
    users_per_team: int | Mapping[str, int] | None = None,
    offered_load: float | None = None,
    team_weights: Mapping[str, float] | None = None,
    gpu_memory: tuple[float, float] | tuple[float, float, float] | None = None,
) -> Trace:
    """The trace for ``seed``: jobs sized to ``training_gpus`` (the training queues' nominal
    GPUs of the *reference* cluster, so a capacity sweep replays the same demand).

    The rest default to :data:`PARAMETERS`: ``users_per_team`` (one number for every team, or
    per team), ``offered_load`` (daytime training demand ÷ ``training_gpus``), ``team_weights``
    (how training Jobs are spread over the teams; default evenly), ``gpu_memory`` (a session's
    GPU-memory need: lognormal median GiB, sigma and the within-user share of the spread,
    :func:`need_gib`)."""
    rng = random.Random(f"gpuaas-replay/{TRACE_VERSION}/{seed}")
    # The measured window starts at midnight after the burn-in: day 0 starts at -burn_in.
    end = burn_in_s + days * DAY
    whole_days = math.ceil(days) + 1
    shift = DAY - burn_in_s  # trace time t is clock time t + shift (burn-in from 18:00)
    load = _p("train_daytime_offered_load") if offered_load is None else offered_load
    weights = [team_weights[t] for t in teams] if team_weights else None
    jobs = _training(rng, teams, training_gpus, shift, end + shift, load, weights)
    count = _p("users_per_team") if users_per_team is None else users_per_team
    users = dict(count) if isinstance(count, Mapping) else dict.fromkeys(teams, int(count))
    given = gpu_memory or (_p("gpu_memory_log_median_gib"), _p("gpu_memory_sigma"))
    within = given[2] if len(given) > 2 else 1.0  # the sample organisation: drawn afresh
    memory = (given[0], given[1], within)
    sessions = _sessions(rng, teams, users, whole_days, shift, end + shift, memory, seed)
    return Trace(
        seed=seed,
        version=TRACE_VERSION,
        days=days,
        burn_in_s=burn_in_s,
        teams=tuple(teams),
        jobs=tuple(TrainingJob(**{**j.__dict__, "submit_s": j.submit_s - shift}) for j in jobs),
        sessions=tuple(Session(**{**s.__dict__, "start_s": s.start_s - shift}) for s in sessions),
    )


def clock_hour(trace: Trace, t: float) -> float:
    """Hour of the day (0-24) of trace time ``t``."""
    return ((t + DAY - trace.burn_in_s) % DAY) / HOUR

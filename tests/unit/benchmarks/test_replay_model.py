"""The replay's model fixes: a preemptor's quota is reserved until it is admitted, scaling
never gives Kueue more quota than GPUs, every session ends in the events, reclaims carry their
decision, and the command line takes any seeds."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from benchmarks.replay.cli import SWEEP_SCALES, main, parse
from benchmarks.replay.run import Task, simulate
from benchmarks.replay.world import (
    DEFAULT_MANIFESTS,
    Kueue,
    Workload,
    load_organisation,
    quota_beyond_pools,
)

H100 = ("h100", "nvidia.com/gpu")
SHORT: dict[str, Any] = {"days": 0.5, "burn_in_h": 1.0}


def _job(key: str, cq: str, gpus: int, now: float, *, notebook: bool = False) -> Workload:
    namespace, _, _name = key.partition("/")
    return Workload(
        key=key,
        namespace=namespace,
        local_queue=cq.rsplit("-", 1)[0] if notebook else "training",
        cluster_queue=cq,
        priority=1000 if notebook else 500,
        priority_class="interactive" if notebook else "training",
        created=now,
        resource="nvidia.com/gpu",
        amount=gpus,
        kind="notebook" if notebook else "training",
        owner=key,
        node_selector={"gpuaas.dev/pool": "h100"} if notebook else {},
    )


def _settle(kueue: Kueue, now: float, rounds: int = 20) -> tuple[list[str], list[str]]:
    """Scheduling cycles as the simulator runs them: the victims' pods go before the next."""
    admitted: list[str] = []
    evicted: list[str] = []
    for i in range(rounds):
        got, gone = kueue.schedule(now + i)
        admitted += [w.key for w in got]
        evicted += [w.key for w in gone]
        assert kueue.over_capacity() == []
        for v in gone:
            kueue.finish_eviction(v.key, now + i + 0.5)
    return admitted, evicted


def test_a_preemptor_keeps_what_its_victims_free_and_is_admitted_after_one_round() -> None:
    """Team B's 4-GPU job reclaims its nominal quota: one GPU is free, three borrowers go. The
    borrowers queued behind must not take the free GPU nor the freed ones (before, the preemptor
    was one GPU short each round and evicted a borrower every cycle, for ever)."""
    org = load_organisation()
    kueue = Kueue(org)
    total = org.capacity[H100]
    for n in range(total - 1):
        kueue.submit(_job(f"team-a/a{n:02d}", "team-a-training", 1, float(n)))
    kueue.schedule(20.0)
    for n in range(5):  # more of team A's borrowers wait behind
        kueue.submit(_job(f"team-a/q{n}", "team-a-training", 1, 30.0 + n))
    big = _job("team-b/big", "team-b-training", 4, 40.0)
    assert org.nominal("team-b-training", H100) >= 4
    kueue.submit(big)
    admitted, evicted = _settle(kueue, 50.0)
    assert big.key in admitted
    assert len(evicted) == 3
    assert kueue.used("team-b-training", H100) == 4
    assert kueue.reservations == {}


def test_two_notebooks_reclaiming_from_three_borrowers_do_not_loop() -> None:
    org = load_organisation()
    kueue = Kueue(org)
    total = org.capacity[H100]
    # Team A's training borrows all the H100s in 2-GPU jobs but one GPU, more of it queued.
    n = 0
    while kueue.used("team-a-training", H100) + 2 <= total - 1:
        kueue.submit(_job(f"team-a/a{n:02d}", "team-a-training", 2, float(n)))
        kueue.schedule(float(n))
        n += 1
    kueue.submit(_job("team-a/one", "team-a-training", 1, 99.0))
    for m in range(4):
        kueue.submit(_job(f"team-a/q{m}", "team-a-training", 2, 100.0 + m))
    kueue.schedule(105.0)
    notebooks = [
        _job("jupyter-users/nb-a1", "team-a-notebooks", 1, 110.0, notebook=True),
        _job("jupyter-users/nb-a2", "team-a-notebooks", 1, 110.5, notebook=True),
    ]
    for wl in notebooks:
        kueue.submit(wl)
    admitted, evicted = _settle(kueue, 120.0, rounds=40)
    assert {w.key for w in notebooks} <= set(admitted)
    assert len(evicted) <= 2  # each notebook needs at most one borrower gone
    assert kueue.reservations == {}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_preemptions_per_day_stay_bounded(seed: int) -> None:
    """Seed 2 of the sample day evicted 3,216 times before the reservation (5-18 otherwise)."""
    for scale in (0.75, 1.0):
        out = io.StringIO()
        simulate(Task("static", seed, scale=scale), events=out, check=True)
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        preemptions = sum(e["event"] == "preemption" for e in events)
        assert preemptions < 60, (scale, preemptions)


@pytest.mark.parametrize("scale", sorted({*SWEEP_SCALES, 0.3, 1.1, 2.5, 35.7}))
def test_scaling_keeps_every_quota_within_its_scaled_pool(scale: float) -> None:
    org = load_organisation(scale=scale)
    assert quota_beyond_pools(org.capacity, org.cluster_queues) == []
    quota = sum(org.nominal(cq, H100) for cq in org.cluster_queues)
    assert quota <= org.capacity[H100] <= 16 * scale  # rounded down, never up


def test_an_organisation_with_quota_beyond_its_pools_is_refused(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    shutil.copytree(DEFAULT_MANIFESTS, manifests)
    queues = manifests / "30-cluster-queues.yaml"
    text = queues.read_text(encoding="utf-8")
    marker = "            - name: nvidia.com/gpu\n              nominalQuota: 2\n"
    assert marker in text
    queues.write_text(
        text.replace(marker, marker.replace("nominalQuota: 2", "nominalQuota: 9"), 1), "utf-8"
    )
    beyond = r"h100 nvidia\.com/gpu: quota 2[3-9] beyond the pool's 16"
    with pytest.raises(ValueError, match=beyond):
        load_organisation(manifests=manifests)


def _events(policy: str, seed: int = 1, **task: Any) -> tuple[Any, list[dict[str, Any]]]:
    out = io.StringIO()
    result = simulate(Task(policy, seed, **(task or SHORT)), events=out)
    return result, [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.mark.parametrize("policy", ["static", "idle-10", "gpuaas"])
def test_every_session_ends_once_in_the_events(policy: str) -> None:
    result, events = _events(policy)
    started = {s.name for s in result.trace.sessions if s.start_s < result.trace.end_s}
    ends = [e for e in events if e["event"] == "session_end"]
    assert sorted(e["session"] for e in ends) == sorted(started)
    assert {e["reason"] for e in ends} <= {"ended", "trace_end"}
    if policy == "idle-10":  # some sessions end reclaimed, away from their server
        assert any(e["phase"] == "gone" for e in ends)
    assert events[0]["event"] == "run"
    assert (events[0]["policy"], events[0]["seed"]) == (policy, 1)


def test_reclaim_events_carry_the_decisions_code_and_handoff() -> None:
    result, events = _events("gpuaas", days=1.0)
    reclaims = [e for e in events if e["event"] == "reclaim"]
    assert reclaims
    assert len(reclaims) == len(result.reclaims)
    assert all(e["code"] for e in reclaims)
    # A reclaim for demand names the queued workload it hands its GPU to.
    assert all(e["handoff"] for e in reclaims if e["code"] == "demand")
    assert any(e["code"] == "demand" for e in reclaims)
    assert [e["code"] for e in reclaims] == [r["code"] for r in result.reclaims]
    _r, culled = _events("idle-10")
    assert {e["code"] for e in culled if e["event"] == "reclaim"} == {"idle-culler"}


def test_any_list_of_seeds_and_events_of_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse(["--seed", "9137,12"]).seed == [9137, 12]
    with pytest.raises(SystemExit):
        parse(["--seed", "9137,x"])
    path = tmp_path / "events.jsonl"
    argv = ["--org", "sample", "--events", str(path), "--seed", "7", "--policies", "idle-10"]
    argv += ["--days", "0.25"]
    assert main(argv) == 0
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert (first["policy"], first["seed"]) == ("idle-10", 7)
    printed = capsys.readouterr().out
    assert "| figure | idle-10 |" in printed
    assert "training wait p90 (min)" in printed


def test_the_scale_help_names_the_sample_organisations_gpus() -> None:
    org = load_organisation()
    assert org.physical_gpus == 32
    import benchmarks.replay.cli as cli

    source = Path(cli.__file__).read_text(encoding="utf-8")
    assert "32 physical GPUs" in source

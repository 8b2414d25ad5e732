"""The runners' logs kept in memory (jobs/logs.py): each its tail, all of them within a total,
and none kept past its age: 400 Jobs' logs no longer hold 100 MiB until a restart."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gpuaas_service.jobs.logs import MAX_LOG, RunnerLogs

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


def test_400_jobs_logs_stay_within_the_total_the_longest_silent_going_first() -> None:
    logs = RunnerLogs(max_total=8 * MAX_LOG)
    for i in range(400):
        logs.put(f"team-a/nb-{i}", "x" * (2 * MAX_LOG), T0 + timedelta(seconds=i))
    assert logs.total <= 8 * MAX_LOG
    assert len(logs) == 8
    assert logs.get("team-a/nb-399", T0 + timedelta(seconds=400)) == "x" * MAX_LOG  # its tail
    assert logs.get("team-a/nb-0", T0 + timedelta(seconds=400)) is None


def test_a_log_not_updated_for_keep_for_is_dropped() -> None:
    logs = RunnerLogs(keep_for=timedelta(hours=1))
    logs.put("team-a/old", "done\n", T0)
    logs.put("team-a/running", "epoch 1\n", T0 + timedelta(minutes=50))
    later = T0 + timedelta(minutes=61)
    assert logs.get("team-a/old", later) is None
    assert logs.get("team-a/running", later) == "epoch 1\n"
    assert logs.total == len("epoch 1\n")


def test_a_new_tail_replaces_the_old_and_a_cancel_drops_it() -> None:
    logs = RunnerLogs(max_each=4)
    logs.put("team-a/nb", "abcdef", T0)
    logs.put("team-a/nb", "ghijkl", T0)
    assert logs.get("team-a/nb", T0) == "ijkl"
    assert logs.total == 4
    logs.drop("team-a/nb")
    assert (logs.get("team-a/nb", T0), logs.total) == (None, 0)

"""The console's aggregates (pure): each team's quota against use, borrowed and lent, queued
work and today's hours; the plan's rows, which say what ``--explain`` prints."""

from __future__ import annotations

import json
from datetime import timedelta
from fractions import Fraction

import pytest

from gpuaas_service import cli
from gpuaas_service.console.aggregates import (
    plan_rows,
    queued_work,
    readable_amount,
    summary,
    teams,
)
from gpuaas_service.console.ledger import Usage
from gpuaas_service.console.preview import (
    plan_of_snapshot,
)
from gpuaas_service.reclaim.decide import decide
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.policy import load_policy, load_policy_file
from tests.support.console_samples import EXAMPLES, NS, T0, org, wb, workload


def test_teams_quota_use_borrowed_lent_queue_and_today() -> None:
    state = org()
    wls = [
        workload("train-1", "team-a", "training", T0 - timedelta(minutes=40), 2, admitted=False),
        workload("train-0", "team-a", "training", T0 - timedelta(hours=2), 1, admitted=False),
        workload("train-run", "team-a", "training", T0 - timedelta(hours=3), 2, admitted=True),
        workload("nb-carol", NS, "team-b", T0 - timedelta(minutes=5), 1, admitted=False),
    ]
    plan = decide(
        [
            wb("alice", "team-a", State.IDLE, Fraction(1, 7)),
            wb("bob", "team-a", State.BUSY, Fraction(1, 7)),
            wb("dave", "team-b", State.UNKNOWN, Fraction(1, 7)),
        ],
        [],
        load_policy({"policies": [{"name": "p", "idle_after": "30m"}]}),
        now=T0,
    )
    today = {"team-a": Usage(allocated=7200, busy=3600, idle=1800)}
    listed = teams(
        state,
        plan,
        wls,
        today,
        notebook_namespace=NS,
        now=T0,
        reclaims={"team-a": 2},
        failed_starts={"team-b": 1},
    )
    rows = {t["team"]: t for t in listed}
    assert sorted(rows) == ["team-a", "team-b"]
    a, b = rows["team-a"], rows["team-b"]
    assert a["cluster_queues"] == ["team-a-notebooks", "team-a-training"]
    (fa,) = a["flavors"]
    assert {k: fa[k] for k in ("nominal", "notebooks", "training", "borrowed", "lent")} == {
        "nominal": 4,
        "notebooks": 3,
        "training": 2,
        "borrowed": 1,
        "lent": 0,
    }
    (fb,) = b["flavors"]
    assert (fb["nominal"], fb["notebooks"], fb["borrowed"], fb["lent"]) == (2, 0, 0, 1)
    assert a["queued"] == {
        "workloads": 2,
        "gpu_equivalents": "0.43",  # 3 x 1/7
        "oldest_wait_seconds": 7200,
        "waiting_for_a_whole_node": 0,
    }
    assert b["queued"]["workloads"] == 1
    assert b["queued"]["oldest_wait_seconds"] == 300
    assert a["now"] == {
        "servers": 2,
        "allocated": "0.29",
        "busy": "0.14",
        "idle": "0.14",
        "unknown": "0",
    }
    assert a["today"] == {
        "allocated_hours": 2.0,
        "busy_hours": 1.0,
        "idle_hours": 0.5,
        "reclaims": 2,
        "failed_starts": 0,
    }
    assert b["today"] == {
        "allocated_hours": 0.0,
        "busy_hours": 0.0,
        "idle_hours": 0.0,
        "reclaims": 0,
        "failed_starts": 1,
    }
    only = teams(state, plan, wls, today, notebook_namespace=NS, now=T0, only=["team-b"])
    assert [t["team"] for t in only] == ["team-b"]
    assert queued_work(wls, state, NS)["team-a"].count == 2


def test_a_server_waiting_for_its_gpu_holds_nothing_now() -> None:
    """bob's server waits in the queue (its pod is on no node): the team holds only alice's."""
    from dataclasses import replace

    queued = replace(wb("bob", "team-a", State.UNKNOWN, Fraction(1, 7)), phase="starting")
    plan = decide(
        [wb("alice", "team-a", State.IDLE, Fraction(1, 7)), queued],
        [],
        load_policy({"policies": [{"name": "p", "idle_after": "30m"}]}),
        now=T0,
    )
    (a,) = (
        t
        for t in teams(org(), plan, [], {}, notebook_namespace=NS, now=T0, on_node={"alice"})
        if t["team"] == "team-a"
    )
    assert a["now"] == {
        "servers": 1,
        "allocated": "0.14",
        "busy": "0",
        "idle": "0.14",
        "unknown": "0",
    }


# --------------------------------------------------------------------------- plan rows = --explain


def test_plan_rows_are_what_explain_prints_for_the_same_snapshot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    policy, snapshot = EXAMPLES / "policy.yaml", EXAMPLES / "snapshot.json"
    assert (
        cli.main(["--explain", "--json", "--policy", str(policy), "--snapshot", str(snapshot)]) == 0
    )
    explained = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    plan = plan_of_snapshot(json.loads(snapshot.read_text()), load_policy_file(str(policy)))
    rows = [dict(r) for r in plan_rows(plan)]  # by any key
    keys = ("action", "code", "reason", "policy", "team", "offering", "dry_run", "handoff")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: e[k] for k in keys} for e in explained]
    assert [r["idle_seconds"] or 0 for r in rows] == [
        e["idle_seconds"] if e["activity"] == "idle" else 0 for e in explained
    ]
    assert {r["action"] for r in rows} >= {"warn", "skip"}, "a scenario with something to do"
    assert summary(plan)["warn"] == sum(1 for e in explained if e["action"] == "warn")


@pytest.mark.parametrize(
    ("resource", "value", "shown"),
    [
        ("nvidia.com/total-gpumem", 22528, "22 GiB"),
        ("nvidia.com/gpumem", 512, "512 MiB"),
        ("nvidia.com/total-gpucores", 150, "150% of a GPU"),
        ("nvidia.com/gpu", 1, "1 GPU"),
        ("nvidia.com/gpu", 2, "2 GPUs"),
        ("nvidia.com/gpu.shared", 3, "3 shares"),
        ("nvidia.com/mig-1g.5gb", 2, "2 × MIG 1g.5gb"),
    ],
)
def test_quota_amounts_in_the_units_a_person_reads(resource: str, value: int, shown: str) -> None:
    assert readable_amount(resource, value) == shown


def test_quota_rows_say_whether_anything_is_in_use_and_their_gpu_equivalents() -> None:
    rows = {t["team"]: t for t in teams(org(), None, [], {}, notebook_namespace=NS, now=T0)}
    (fa,) = rows["team-a"]["flavors"]
    (fb,) = rows["team-b"]["flavors"]
    assert fa["in_use"] is True
    assert fa["readable"]["nominal"] == "4 × MIG 1g.5gb"
    assert fa["gpu_eq"]["nominal"] == "0.57"  # 4 x 1/7
    assert (fb["in_use"], fb["readable"]["lent"]) == (True, "1 × MIG 1g.5gb")  # lends 1


def test_queued_work_counts_the_jobs_waiting_for_a_whole_node() -> None:
    """Kueue's Topology Aware Scheduling holds one of team A's two queued Jobs back: its quota
    is there, no node has room (Kueue v0.19.2's words); the other waits for quota."""
    from dataclasses import replace

    from jupyter_gpuaas.core.kueue import Condition

    no_room = (
        "couldn't assign flavors to pod set main: topology \"gpu-racks\" doesn't allow to fit any"
        " of 1 pod(s)"
    )
    held = workload("train-8", "team-a", "training", T0 - timedelta(minutes=9), 8, admitted=False)
    held = replace(
        held,
        required_topology="kubernetes.io/hostname",
        conditions={"QuotaReserved": Condition("QuotaReserved", False, "Pending", no_room)},
    )
    short = workload("train-1", "team-a", "training", T0 - timedelta(minutes=3), 1, admitted=False)
    queued = queued_work([held, short], org(), NS)["team-a"]
    assert (queued.count, queued.whole_node) == (2, 1)

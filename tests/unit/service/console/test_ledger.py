"""The GPU-hour ledger (pure): hours by team, split at midnight, exported per user."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.console.answers import export_csv, export_rows
from gpuaas_service.console.journal import Entry
from gpuaas_service.console.ledger import DayKey, Ledger, holds_its_gpu, servers_on_nodes
from gpuaas_service.reclaim.decide import Workbench
from gpuaas_service.reclaim.idleness import State
from tests.support.console_samples import T0, wb

LEDGER_CASES = [
    # (name, workbenches, [cycle times], team -> (allocated, busy, idle) hours)
    (
        "one busy GPU for an hour in 6 cycles",
        [wb("a", "team-a", State.BUSY, Fraction(1), kind="gpu")],
        [T0 + timedelta(minutes=10 * i) for i in range(7)],
        {"team-a": (1.0, 1.0, 0.0)},
    ),
    (
        "two idle 1/7 slices and an unknown one, 30 min",
        [
            wb("a", "team-a", State.IDLE, Fraction(1, 7)),
            wb("b", "team-a", State.IDLE, Fraction(1, 7)),
            wb("c", "team-b", State.UNKNOWN, Fraction(1, 7)),
        ],
        [T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=30)][:2]
        + [T0 + timedelta(minutes=10 + 5 * i) for i in range(5)],
        {"team-a": (2 / 7 * 0.5, 0.0, 2 / 7 * 0.5), "team-b": (0.5 / 7, 0.0, 0.0)},
    ),
    (
        "a gap longer than max_gap (10 min) is not counted",
        [wb("a", "team-a", State.IDLE, Fraction(1), kind="gpu")],
        [T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=45), T0 + timedelta(minutes=50)],
        {"team-a": (10 / 60, 0.0, 10 / 60)},
    ),
    (
        "CPU-only servers hold no GPU time",
        [wb("a", "team-a", State.IDLE, Fraction(0), kind="cpu")],
        [T0, T0 + timedelta(minutes=5)],
        {},
    ),
]


@pytest.mark.parametrize(
    ("workbenches", "times", "expected"),
    [c[1:] for c in LEDGER_CASES],
    ids=[c[0] for c in LEDGER_CASES],
)
def test_ledger_hours_by_team(
    workbenches: list[Workbench],
    times: list[datetime],
    expected: dict[str, tuple[float, float, float]],
) -> None:
    ledger = Ledger()
    for t in times:
        ledger.add(workbenches, t)
    got = {
        team: (u.allocated / 3600, u.busy / 3600, u.idle / 3600)
        for team, u in ledger.by_team(T0.date()).items()
    }
    assert got.keys() == expected.keys()
    for team, values in expected.items():
        assert got[team] == pytest.approx(values), team


def test_ledger_splits_at_midnight_and_exports_per_user() -> None:
    ledger = Ledger()
    late = datetime(2026, 11, 30, 23, 55, tzinfo=timezone.utc)
    busy = wb("alice", "team-a", State.BUSY, Fraction(1), kind="gpu")
    idle = wb("bob", "team-a", State.IDLE, Fraction(1, 7))
    ledger.add([busy, idle], late)
    ledger.add([busy, idle], late + timedelta(minutes=10))
    first, second = ledger.by_team(date(2026, 11, 30)), ledger.by_team(date(2026, 12, 1))
    assert first["team-a"].allocated == pytest.approx(300 + 300 / 7)
    assert second["team-a"].allocated == pytest.approx(300 + 300 / 7)
    rows = export_rows(ledger, date(2026, 12, 1))
    assert [(r["user"], r["offering"], r["busy_hours"], r["idle_hours"]) for r in rows] == [
        ("alice", "off-gpu", round(300 / 3600, 4), 0.0),
        ("bob", "off-mig", 0.0, round(300 / 7 / 3600, 4)),
    ]
    assert export_rows(ledger, date(2026, 12, 1), only=["team-b"]) == []
    text = export_csv(rows)
    assert text.splitlines()[0] == (
        "day,team,user,offering,kind,allocated_hours,busy_hours,idle_hours,unknown_hours,reclaims,"
        "failed_starts,waiting_hours"
    )
    assert text.splitlines()[1] == (
        "2026-12-01,team-a,alice,off-gpu,gpu,0.0833,0.0833,0.0,0.0,0,0,0.0"
    )


def test_unknown_hours_make_the_columns_add_up_and_reclaims_count_per_row() -> None:
    """An hour on a whole GPU: 20 min busy, 20 idle, 20 with no report (unknown); carol's
    1/7 slice was reclaimed twice that day (a dry run and yesterday's reclaim do not count)."""
    ledger = Ledger()
    states = [State.BUSY] * 2 + [State.IDLE] * 2 + [State.UNKNOWN] * 2
    ledger.add([wb("alice", "team-a", states[0], Fraction(1), kind="gpu")], T0)
    for i, state in enumerate(states, start=1):
        on_gpu = wb("alice", "team-a", state, Fraction(1), kind="gpu")
        on_slice = wb("carol", "team-b", State.IDLE, Fraction(1, 7))
        ledger.add([on_gpu, on_slice], T0 + timedelta(minutes=10 * i))
    day = T0.date()
    journal = [
        Entry(event="reclaim", at=T0, user="carol", team="team-b", offering="off-mig"),
        Entry(event="reclaim", at=T0, user="carol", team="team-b", offering="off-mig"),
        Entry(
            event="reclaim", at=T0, user="carol", team="team-b", offering="off-mig", dry_run=True
        ),
        Entry(event="warn", at=T0, user="alice", team="team-a", offering="off-gpu"),
        Entry(
            event="reclaim",
            at=T0 - timedelta(days=1),
            user="alice",
            team="team-a",
            offering="off-gpu",
        ),
        # reclaimed, but no hours counted for dave today: a row with his reclaim only
        Entry(event="reclaim", at=T0, user="dave", team="team-b", offering="off-mig"),
    ]
    rows = {r["user"]: r for r in export_rows(ledger, day, journal=journal)}
    alice = rows["alice"]
    assert alice["allocated_hours"] == 1.0
    assert (alice["busy_hours"], alice["idle_hours"]) == pytest.approx((1 / 3, 1 / 3), abs=1e-4)
    assert alice["unknown_hours"] == pytest.approx(1 / 3, abs=1e-4)
    for row in rows.values():
        total = row["busy_hours"] + row["idle_hours"] + row["unknown_hours"]
        assert total == pytest.approx(row["allocated_hours"], abs=1e-9), row
    assert (rows["alice"]["reclaims"], rows["carol"]["reclaims"]) == (0, 2)
    assert rows["carol"]["unknown_hours"] == 0.0
    assert rows["dave"] == {
        "day": day.isoformat(),
        "team": "team-b",
        "user": "dave",
        "offering": "off-mig",
        "kind": "",
        "allocated_hours": 0.0,
        "busy_hours": 0.0,
        "idle_hours": 0.0,
        "unknown_hours": 0.0,
        "reclaims": 1,
        "failed_starts": 0,
        "waiting_hours": 0.0,
    }
    # a team lead's export: their team's rows and reclaims only
    lead = export_rows(ledger, day, only=["team-a"], journal=journal)
    assert [r["user"] for r in lead] == ["alice"]


def test_failed_starts_count_per_day_and_row_and_make_a_row_of_their_own() -> None:
    """carol's slice failed to start twice today, once yesterday; erin's once today, with no
    hours held (she has a row of her own); a team lead sees their team's only."""
    ledger = Ledger()
    ledger.add([wb("carol", "team-b", State.IDLE, Fraction(1, 7))], T0)
    ledger.add([wb("carol", "team-b", State.IDLE, Fraction(1, 7))], T0 + timedelta(minutes=6))
    ledger.failed_start("team-b", "carol", "off-mig", T0)
    ledger.failed_start("team-b", "carol", "off-mig", T0 + timedelta(minutes=1))
    ledger.failed_start("team-b", "carol", "off-mig", T0 - timedelta(days=1))
    ledger.failed_start("team-a", "erin", "off-gpu", T0)
    rows = {r["user"]: r for r in export_rows(ledger, T0.date())}
    assert rows["carol"]["failed_starts"] == 2
    assert rows["carol"]["allocated_hours"] == pytest.approx(0.1 / 7, abs=1e-4)
    assert {k: rows["erin"][k] for k in ("team", "kind", "allocated_hours", "failed_starts")} == {
        "team": "team-a",
        "kind": "",
        "allocated_hours": 0.0,
        "failed_starts": 1,
    }
    assert ledger.failed_starts_by_team(T0.date()) == {"team-b": 2, "team-a": 1}
    assert [r["user"] for r in export_rows(ledger, T0.date(), only=["team-a"])] == ["erin"]
    yesterday = export_rows(ledger, T0.date() - timedelta(days=1))
    assert [(r["user"], r["failed_starts"]) for r in yesterday] == [("carol", 1)]


def test_failed_starts_are_kept_for_keep_days_only() -> None:
    ledger = Ledger(keep_days=2)
    for days in (3, 2, 1, 0):
        ledger.failed_start("team-a", "erin", "off-gpu", T0 - timedelta(days=days))
    assert sorted(ledger.failed_starts) == [T0.date() - timedelta(days=1), T0.date()]


def _pod(
    user: str, *, node: str = "", phase: str = "Running", gated: bool = False
) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node} if node else {}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    return {
        "metadata": {"name": f"jupyter-{user}", "annotations": {"hub.jupyter.org/username": user}},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_servers_on_nodes_are_the_pods_bound_to_a_node_that_have_not_ended() -> None:
    pods = [
        _pod("alice", node="local-0"),
        _pod("bob", phase="Pending", gated=True),  # in Kueue's queue
        _pod("carol", phase="Pending"),  # admitted, waiting for a free node
        _pod("dave", node="local-0", phase="Pending"),  # on its node, starting
        _pod("erin", node="local-0", phase="Succeeded"),  # exited: its GPU is free
        {"metadata": {"name": "not-a-server"}, "spec": {"nodeName": "local-0"}},
    ]
    assert servers_on_nodes(pods) == {"alice", "dave"}


HELD_CASES = [
    # (name, phase, admitted by Kueue, on_node, held)
    ("running", "running", True, frozenset[str](), True),
    ("queued, pods read", "starting", False, frozenset[str](), False),
    ("admitted, waiting for a node", "starting", True, frozenset[str](), False),
    ("on its node, starting", "starting", True, frozenset({"a"}), True),
    ("queued, pods not read", "starting", False, None, False),
    ("admitted, pods not read", "starting", True, None, True),
]


@pytest.mark.parametrize(
    ("phase", "admitted", "on_node", "held"),
    [c[1:] for c in HELD_CASES],
    ids=[c[0] for c in HELD_CASES],
)
def test_a_workbench_holds_its_gpu_when_it_runs_or_is_on_its_node(
    phase: str, admitted: bool, on_node: frozenset[str] | None, held: bool
) -> None:
    holds = {("local", "nvidia.com/mig-1g.10gb"): Fraction(1)} if admitted else {}
    server = replace(wb("a", "team-a", State.UNKNOWN, Fraction(1, 7)), phase=phase, holds=holds)
    assert holds_its_gpu(server, on_node) is held


def test_time_in_the_queue_is_never_billed_and_is_a_column_of_its_own() -> None:
    """Bob never got a GPU, yet the export billed him his time in the queue. An hour
    in 6 cycles: bob's 1/7 slice waits in the queue throughout, alice's runs; carol cancels her
    queued start (her pod is stopping): nothing counts for her."""
    alice = wb("alice", "team-a", State.BUSY, Fraction(1, 7))
    bob = replace(wb("bob", "team-a", State.UNKNOWN, Fraction(1, 7)), phase="starting")
    carol = replace(wb("carol", "team-a", State.UNKNOWN, Fraction(1, 7)), phase="stopping")
    ledger = Ledger()
    for i in range(7):
        ledger.add([alice, bob, carol], T0 + timedelta(minutes=10 * i), frozenset({"alice"}))
        if i:
            assert ledger.last_added[DayKey("team-a", "bob", "off-mig", "mig")].allocated == 0
    rows = {r["user"]: dict(r) for r in export_rows(ledger, T0.date())}  # by any key
    assert sorted(rows) == ["alice", "bob"]
    billed = ("allocated_hours", "busy_hours", "idle_hours", "unknown_hours")
    assert [rows["bob"][k] for k in billed] == [0.0, 0.0, 0.0, 0.0]
    assert rows["bob"]["waiting_hours"] == pytest.approx(1 / 7, abs=1e-4)
    assert rows["alice"]["allocated_hours"] == pytest.approx(1 / 7, abs=1e-4)
    assert rows["alice"]["waiting_hours"] == 0.0
    assert ledger.by_team(T0.date())["team-a"].allocated == pytest.approx(3600 / 7)
    header = export_csv(list(rows.values())).splitlines()[0].split(",")
    assert header[-1] == "waiting_hours"

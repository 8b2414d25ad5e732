"""The console's pure parts: GPU-hour ledger, team aggregates, plan rows against --explain, the
snapshot dump, the policy preview, the sidebar's standing and the scope check (table tests)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date, datetime, timedelta, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from gpuaas_service import cli
from gpuaas_service.console.aggregates import plan_rows, queued_work, summary, teams
from gpuaas_service.console.journal import Entry, Journal
from gpuaas_service.console.ledger import Ledger, Usage
from gpuaas_service.console.preview import (
    PreviewError,
    parse_policy_text,
    plan_of_snapshot,
    preview,
)
from gpuaas_service.console.standing import standing
from gpuaas_service.console.state import export_csv, export_rows
from gpuaas_service.reclaim.decide import Action, Workbench, decide
from gpuaas_service.reclaim.idleness import ActivityReport, Idleness, State
from gpuaas_service.reclaim.policy import load_policy, load_policy_file
from gpuaas_service.reclaim.snapshot import dump_snapshot, load_snapshot
from gpuaas_service.web.console import console_access
from jupyter_gpuaas.core.activity import parse_activity
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_local_queue, read_workload

EXAMPLES = Path(__file__).resolve().parents[3] / "culler" / "examples"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MIG = "nvidia.com/mig-1g.5gb"
NS = "jupyter-users"


def wb(user: str, team: str, state: State, ge: Fraction, *, kind: str = "mig") -> Workbench:
    return Workbench(
        user=user,
        team=team,
        kind=kind,
        offering=f"off-{kind}",
        gpu_equivalents=ge,
        started_at=T0 - timedelta(hours=1),
        idleness=Idleness(state, T0 - timedelta(minutes=30), "test"),
    )


# --------------------------------------------------------------------------- ledger


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
        "day,team,user,offering,kind,allocated_hours,busy_hours,idle_hours"
    )
    assert text.splitlines()[1].startswith("2026-12-01,team-a,alice,off-gpu,gpu,0.0833,0.0833,0")


# --------------------------------------------------------------------------- teams


def cq(name: str, cohort: str, nominal: int, used: int) -> Any:
    return read_cluster_queue(
        {
            "metadata": {"name": name},
            "spec": {
                "cohortName": cohort,
                "resourceGroups": [
                    {
                        "coveredResources": [MIG],
                        "flavors": [
                            {"name": "local", "resources": [{"name": MIG, "nominalQuota": nominal}]}
                        ],
                    }
                ],
            },
            "status": {
                "flavorsReservation": [
                    {"name": "local", "resources": [{"name": MIG, "total": used}]}
                ]
            },
        }
    )


def lq(name: str, namespace: str, cluster_queue: str) -> Any:
    return read_local_queue(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def org() -> QueueState:
    """team-a: notebooks 4 (3 used) + training 0 (using 2: 1 from its notebooks, 1 borrowed);
    team-b: notebooks 2 (none used), lending; one cohort tree 'gpuaas'."""
    cqs = [
        cq("team-a-notebooks", "gpuaas", 4, 3),
        cq("team-a-training", "gpuaas", 0, 2),
        cq("team-b-notebooks", "gpuaas", 2, 0),
    ]
    lqs = [
        lq("team-a", NS, "team-a-notebooks"),
        lq("training", "team-a", "team-a-training"),
        lq("team-b", NS, "team-b-notebooks"),
    ]
    return QueueState(
        cluster_queues={c.name: c for c in cqs},
        local_queues={(q.namespace, q.name): q for q in lqs},
    )


def workload(name: str, ns: str, queue: str, created: datetime, mig: int, admitted: bool) -> Any:
    conditions = (
        [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
        if admitted
        else [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]
    )
    return read_workload(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "uid": f"uid-{name}",
                "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "labels": {"kueue.x-k8s.io/queue-name": queue},
            },
            "spec": {
                "queueName": queue,
                "active": True,
                "podSets": [
                    {
                        "name": "main",
                        "count": mig,
                        "template": {
                            "spec": {
                                "containers": [{"name": "c", "resources": {"requests": {MIG: "1"}}}]
                            }
                        },
                    }
                ],
            },
            "status": {"conditions": conditions},
        }
    )


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
    rows = {t["team"]: t for t in teams(state, plan, wls, today, notebook_namespace=NS, now=T0)}
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
    assert a["today"] == {"allocated_hours": 2.0, "busy_hours": 1.0, "idle_hours": 0.5}
    assert b["today"] == {"allocated_hours": 0.0, "busy_hours": 0.0, "idle_hours": 0.0}
    only = teams(state, plan, wls, today, notebook_namespace=NS, now=T0, only=["team-b"])
    assert [t["team"] for t in only] == ["team-b"]
    assert queued_work(wls, state, NS)["team-a"].count == 2


# --------------------------------------------------------------------------- plan = --explain


def test_plan_rows_are_what_explain_prints_for_the_same_snapshot(
    capsys: pytest.CaptureFixture[str],
) -> None:
    policy, snapshot = EXAMPLES / "policy.yaml", EXAMPLES / "snapshot.json"
    assert (
        cli.main(["--explain", "--json", "--policy", str(policy), "--snapshot", str(snapshot)]) == 0
    )
    explained = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    plan = plan_of_snapshot(json.loads(snapshot.read_text()), load_policy_file(str(policy)))
    rows = plan_rows(plan)
    keys = ("action", "code", "reason", "policy", "team", "offering", "dry_run", "handoff")
    assert [{k: r[k] for k in keys} for r in rows] == [{k: e[k] for k in keys} for e in explained]
    assert [r["idle_seconds"] or 0 for r in rows] == [
        e["idle_seconds"] if e["activity"] == "idle" else 0 for e in explained
    ]
    assert {r["action"] for r in rows} >= {"warn", "skip"}, "a scenario with something to do"
    assert summary(plan)["warn"] == sum(1 for e in explained if e["action"] == "warn")


def test_dump_snapshot_gives_back_the_same_plan() -> None:
    """What the live console serves for --explain: the loop's inputs, dumped and read again."""
    policies = load_policy_file(str(EXAMPLES / "policy.yaml"))
    data = json.loads((EXAMPLES / "snapshot.json").read_text())
    snap = load_snapshot(data, policies)
    plan = decide(snap.workbenches, snap.pending, policies, now=snap.now, handoffs=snap.handoffs)
    reports = {
        w["user"]: ActivityReport(
            datetime.fromisoformat(w["activity_received_at"].replace("Z", "+00:00")),
            parse_activity(w["activity"]),
        )
        for w in data["workbenches"]
        if w.get("activity")
    }
    # as the loop holds them: a warning with its deadline and reason on the pod
    warned = [
        replace(
            d.workbench,
            warned_at=snap.now - timedelta(minutes=1),
            warned_deadline=snap.now + timedelta(minutes=14),
            warned_reason="told",
        )
        if d.action is Action.WARN
        else d.workbench
        for d in plan.decisions
    ]
    plan = decide(warned, snap.pending, policies, now=snap.now, handoffs=snap.handoffs)
    dumped = dump_snapshot(
        plan.now, warned, snap.pending, snap.handoffs, reports=reports, pod_utilization={}
    )
    again = plan_of_snapshot(json.loads(json.dumps(dumped)), policies)
    assert plan_rows(again) == plan_rows(plan)
    assert any(r["action"] == "wait" for r in plan_rows(again))


# --------------------------------------------------------------------------- preview


def test_preview_lists_every_problem_with_its_field_path() -> None:
    text = (
        "policies:\n  - name: x\n    idle_after: soon\n    reclaim: sometimes\n  - idle_after: 1h\n"
    )
    with pytest.raises(PreviewError) as e:
        parse_policy_text(text)
    paths = [x["path"] for x in e.value.errors]
    assert paths == ["policies[0].idle_after", "policies[0].reclaim", "policies[1].name"]
    with pytest.raises(PreviewError) as e:
        parse_policy_text("policies: [\n")
    assert e.value.errors[0]["path"] == "(text)"
    with pytest.raises(PreviewError):
        parse_policy_text("x" * (64 * 1024 + 1))


def test_preview_with_a_shorter_idle_after_shows_more_reclaims() -> None:
    # In force: MIG notebooks idle after 3h (alice is idle 3h35m, bob 2h10m: too few for the
    # queued job, which needs two). Pasted: the example's 1h: both are warned.
    example = (EXAMPLES / "policy.yaml").read_text()
    longer = example.replace("idle_after: 1h", "idle_after: 3h")
    data = json.loads((EXAMPLES / "snapshot.json").read_text())
    current = plan_of_snapshot(data, parse_policy_text(longer))
    answer = preview(data, example, current)
    busier = answer["summary"]["warn"] + answer["summary"]["reclaim"]
    before = answer["summary_in_force"]["warn"] + answer["summary_in_force"]["reclaim"]
    assert busier > before, (answer["summary"], answer["summary_in_force"])
    assert {c["key"]: (c["now"], c["preview"]) for c in answer["changed"]} == {
        "alice": ("skip", "warn"),
        "bob": ("skip", "warn"),
    }
    same = preview(data, longer, current)
    assert same["changed"] == []
    assert same["summary"] == same["summary_in_force"]


# --------------------------------------------------------------------------- standing, scope


def test_standing_of_an_idle_server_with_no_queued_work() -> None:
    policies = load_policy({"policies": [{"name": "mig", "idle_after": "30m"}]})
    alice = wb("alice", "team-a", State.IDLE, Fraction(1, 7))
    alice = replace(alice, idleness=Idleness(State.IDLE, T0 - timedelta(minutes=12), "no kernel"))
    plan = decide([alice], [], policies, now=T0)
    got = standing(plan, policies, "alice", now=T0)
    assert got["known"]
    assert got["activity"] == "idle"
    assert got["idle_seconds"] == 720
    assert got["policy"]["name"] == "mig"
    assert got["policy"]["idle_after_seconds"] == 1800
    assert got["policy"]["reclaim"] == "when-queued"
    assert (got["action"], got["code"]) == ("skip", "not-idle-yet")
    assert standing(plan, policies, "bob", now=T0)["known"] is False
    assert standing(None, policies, "alice", now=T0)["known"] is False


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        (["custom:gpuaas:console"], None),
        (["custom:gpuaas:console!group=team-a", "self"], {"team-a"}),
        (
            ["custom:gpuaas:console!group=team-a", "custom:gpuaas:console!group=team-b"],
            {"team-a", "team-b"},
        ),
        (["custom:gpuaas:console!group=team-a", "custom:gpuaas:console"], None),
        (["access:services!service=gpuaas", "self"], False),
        (["custom:gpuaas:console!user=alice"], False),
        (["custom:gpuaas:consoles"], False),
        (None, False),
    ],
)
def test_console_access_from_scopes(scopes: Any, expected: Any) -> None:
    assert console_access(scopes) == expected


def test_journal_regret_within_the_window() -> None:
    j = Journal()
    j.record(Entry(event="reclaim", at=T0, user="alice"))
    j.record(Entry(event="reclaim", at=T0, user="bob"))
    j.record(Entry(event="warn", at=T0, user="carol"))
    later = wb("alice", "team-a", State.BUSY, Fraction(1, 7))
    later = replace(later, started_at=T0 + timedelta(minutes=20))
    bob = wb("bob", "team-a", State.BUSY, Fraction(1, 7))
    bob = replace(bob, started_at=T0 + timedelta(hours=3))
    j.observe([later])
    j.observe([bob])
    hour = timedelta(hours=1)
    assert j.regret(hour) == {"reclaims": 2, "returned_within_window": 1, "window_seconds": 3600.0}
    rows = {(e["event"], e["user"]): e for e in j.recent(hour)}
    assert rows[("reclaim", "alice")]["returned_after_seconds"] == 1200
    assert rows[("reclaim", "alice")]["regret"] is True
    assert rows[("reclaim", "bob")]["regret"] is False
    with pytest.raises(ValueError, match="unknown journal event"):
        j.record(Entry(event="nap", at=T0))


# --------------------------------------------------------------------------- cached answers


class _View:
    """The Kueue view's reads the console makes (a fixed state; ``generation`` as the watch's)."""

    def __init__(self, state: QueueState, workloads: dict[str, list[Any]]) -> None:
        self.state = state
        self.objects = workloads
        self.generation = 0
        self.reads = 0

    def queue_state(self) -> QueueState:
        return self.state

    def workloads(self, namespace: str) -> list[Any]:
        self.reads += 1
        return self.objects.get(namespace, [])


def console_of(plan: Any, *, ticks: list[float]) -> tuple[Any, _View]:
    from gpuaas_service.console.state import ConsoleState
    from gpuaas_service.reclaim.loop import ReclaimLoop

    policies = load_policy_file(str(EXAMPLES / "policy.yaml"))
    loop = ReclaimLoop(hub=None, kube=None, view=None, policies=policies, clock=lambda: T0)  # type: ignore[arg-type]
    loop.last_plan = plan
    view = _View(org(), {})
    console = ConsoleState(
        loop,
        view,  # type: ignore[arg-type]
        notebook_namespace=NS,
        job_namespaces=["team-a"],
        regret_window=timedelta(hours=1),
        ttl=2.0,
        monotonic=lambda: ticks[0],
    )
    return console, view


def two_team_plan() -> Any:
    policies = load_policy_file(str(EXAMPLES / "policy.yaml"))
    wbs = [
        wb("alice", "team-a", State.IDLE, Fraction(1, 7)),
        wb("bob", "team-b", State.BUSY, Fraction(1, 7)),
        wb("cleo", "team-a", State.BUSY, Fraction(1), kind="gpu"),
    ]
    return decide(wbs, [], policies, now=T0)


def test_console_answer_is_serialised_once_per_build_and_its_rows_once_per_plan() -> None:
    import gzip

    ticks = [100.0]
    plan = two_team_plan()
    console, view = console_of(plan, ticks=ticks)
    console.refresh()  # what the loop's listener does after a cycle
    assert (console.builds, console.row_builds) == (1, 1)
    first = console.answer_json()
    # the bytes are the answer, and the gzipped bytes the same
    assert json.loads(first) == json.loads(json.dumps(console.answer()))
    assert gzip.decompress(console.answer_gzip()) == first
    assert {w["key"] for w in json.loads(first)["workbenches"]} == {"alice", "bob", "cleo"}
    # within the ttl: the same bytes, nothing built or serialised again
    ticks[0] += 1.9
    assert console.answer_json() is first
    assert (console.builds, console.row_builds, view.reads) == (1, 1, 2)
    # past the ttl: the answer is built again, the rows (one plan) are not
    ticks[0] += 0.2
    again = console.answer_json()
    assert again is not first
    assert (console.builds, console.row_builds) == (2, 1)
    assert view.reads == 2, "the Workloads are read again only after the view changed"
    view.generation += 1
    ticks[0] += 2.1
    console.answer_json()
    assert view.reads == 4
    # a new plan (the next cycle): rows and answer at once, whatever the ttl
    plan2 = decide([plan.decisions[0].workbench], [], console.loop.policies, now=T0)
    console.loop.last_plan = plan2
    assert [w["key"] for w in json.loads(console.answer_json())["workbenches"]] == ["alice"]
    assert (console.builds, console.row_builds) == (4, 2)


def test_console_answer_for_some_teams_only() -> None:
    ticks = [0.0]
    console, _ = console_of(two_team_plan(), ticks=ticks)
    body = json.loads(console.answer_json({"team-a"}))
    assert body["visible_teams"] == ["team-a"]
    assert {w["team"] for w in body["workbenches"]} == {"team-a"}
    assert [t["team"] for t in body["teams"]] == ["team-a"]
    assert sum(body["summary"].values()) == 2
    assert body["regret"] is None
    assert json.loads(console.answer_json())["visible_teams"] is None
    assert sum(json.loads(console.answer_json())["summary"].values()) == 3
    assert body == console.answer(["team-a"])
    assert console.answer_json(["team-a"]) is console.answer_json({"team-a"})


def test_console_keeps_a_bounded_number_of_team_sets() -> None:
    from gpuaas_service.console import state

    ticks = [0.0]
    console, _ = console_of(two_team_plan(), ticks=ticks)
    for i in range(state.KEEP_VARIANTS + 10):
        assert json.loads(console.answer_json({f"t{i}"}))["workbenches"] == []
    built = console._built
    assert built is not None
    assert len(built.encoded) <= state.KEEP_VARIANTS + 1  # + every team's (never dropped)
    assert len(built.rows.encoded) <= state.KEEP_VARIANTS + 1
    assert json.loads(console.answer_json({"team-b"}))["workbenches"][0]["user"] == "bob"

"""The console's answers from memory: built once per cycle and per set of teams, served as bytes."""

from __future__ import annotations

import json
from datetime import timedelta
from fractions import Fraction
from typing import Any

from gpuaas_service.reclaim.decide import decide
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.policy import load_policy_file
from jupyter_gpuaas.core.headroom import QueueState
from tests.support.console_samples import (
    EXAMPLES,
    NS,
    T0,
    a100_mig_node,
    org,
    pod_holding,
    wb,
)


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
    from gpuaas_service.console.answers import ConsoleState
    from gpuaas_service.reclaim.loop import ReclaimLoop

    policies = load_policy_file(str(EXAMPLES / "policy.yaml"))
    loop = ReclaimLoop(hub=None, kube=None, view=None, policies=policies, clock=lambda: T0)  # type: ignore[arg-type]
    loop._set_state(last_plan=plan)
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
    plan2 = decide([plan.decisions[0].workbench], [], console.loop.state.policies, now=T0)
    console.loop._set_state(last_plan=plan2)
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
    from gpuaas_service.console import answers as state

    ticks = [0.0]
    console, _ = console_of(two_team_plan(), ticks=ticks)
    for i in range(state.KEEP_VARIANTS + 10):
        assert json.loads(console.answer_json({f"t{i}"}))["workbenches"] == []
    built = console._built
    assert built is not None
    assert len(built.encoded) <= state.KEEP_VARIANTS + 1  # + every team's (never dropped)
    assert len(built.rows.encoded) <= state.KEEP_VARIANTS + 1
    assert json.loads(console.answer_json({"team-b"}))["workbenches"][0]["user"] == "bob"


def test_the_showback_csv_escapes_cells_a_spreadsheet_would_run_as_formulas() -> None:
    """A user or team named like a formula is written with a leading apostrophe (OWASP), so a
    spreadsheet shows it as text; numbers and plain names are unchanged."""
    import csv
    import io

    from gpuaas_service.console.answers import export_csv

    names = ['=HYPERLINK("http://x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "alice"]
    rows = [
        {
            "day": "2026-11-30",
            "team": "team-a",
            "user": name,
            "offering": "mig-1g",
            "kind": "mig",
            "allocated_hours": 1.5,
            "busy_hours": 1.0,
            "idle_hours": 0.5,
        }
        for name in names
    ]
    rows[0]["team"] = "=cmd|' /C calc'!A0"
    read = list(csv.DictReader(io.StringIO(export_csv(rows))))
    assert [r["user"] for r in read] == ["'" + n for n in names[:-1]] + ["alice"]
    assert read[0]["team"] == "'=cmd|' /C calc'!A0"
    assert read[1]["team"] == "team-a"
    assert read[0]["allocated_hours"] == "1.5"


def test_the_showback_csv_quotes_line_breaks_and_neutralises_a_formula_on_every_line() -> None:
    """JupyterHub's default username check accepts ``alice\\r=hyperlink(...)``: the cell is
    quoted (CR as well as LF), and no line of the file, nor any row a CSV reader reads back,
    starts with a formula."""
    import csv
    import io

    from gpuaas_service.console.answers import FORMULA_STARTS, export_csv

    users = ['alice\r=HYPERLINK("http://x")', "bob\n+1+1", "carol\r\n@SUM(A1)", "dave\r\r-1"]
    rows = [{"day": "2026-11-30", "team": "team-a", "user": u, "offering": "o"} for u in users]
    text = export_csv(rows)
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        assert not line.startswith(FORMULA_STARTS), repr(line)
    read = list(csv.reader(io.StringIO(text, newline="")))
    assert len(read) == 1 + len(users)  # each cell's line breaks stayed inside its quotes
    for row in read:
        for cell in row:
            for line in cell.replace("\r", "\n").split("\n"):
                assert not line.startswith(FORMULA_STARTS), repr(cell)
    assert [r[2] for r in read[1:]] == [
        'alice\r\'=HYPERLINK("http://x")',
        "bob\n'+1+1",
        "carol\r\n'@SUM(A1)",
        "dave\r'\r'-1",
    ]


def test_a_team_leads_console_names_no_other_teams_work() -> None:
    """alice (team-a) warned for team-b's queued Job, and for a team-b notebook: team-a's lead
    sees the rows and events with that work named by its team only; the full console names it."""
    from dataclasses import replace

    from gpuaas_service.reclaim.decide import Action, Plan
    from gpuaas_service.reclaim.events import LoopEvent

    plan = two_team_plan()
    alice = plan.decisions[0]
    job, notebook = "team-b/train-secret-project", f"{NS}/jupyter-bob-secret"
    warned = replace(
        alice,
        action=Action.WARN,
        reason=f"queued {job} needs what it holds (1 slice)",
        handoff=job,
    )
    console, _ = console_of(Plan(T0, (warned, *plan.decisions[1:])), ticks=[0.0])
    for key in (job, notebook):
        console.happened(
            LoopEvent(
                kind="reclaim",
                at=T0,
                workbench=alice.workbench,
                reason=f"queued {key} needs what it holds",
                workload=key,
            )
        )
    lead = console.answer_json({"team-a"})
    assert b"secret" not in lead
    body = json.loads(lead)
    row = next(w for w in body["workbenches"] if w["key"] == "alice")
    assert row["reason"] == "queued work of team team-b needs what it holds (1 slice)"
    assert row["handoff"] is None
    assert {e["workload"] for e in body["events"]} == {"work of team team-b", "work of team ?"}
    full = console.answer_json()
    assert job.encode() in full
    assert notebook.encode() in full


def test_each_cycle_creates_the_counters_of_every_team_with_a_queue_at_zero() -> None:
    from gpuaas_service.console.answers import update_metrics

    console, _ = console_of(two_team_plan(), ticks=[0.0])
    update_metrics(console)
    text = console.loop.metrics.exposition()[0].decode()
    # team-b has a LocalQueue and nothing reclaimed: its series are there, at 0
    assert 'gpuaas_reclaims_total{code="demand",team="team-b"} 0.0' in text
    assert 'gpuaas_failed_starts_total{team="team-a"} 0.0' in text


def test_a_failed_start_is_counted_in_the_ledger_the_metrics_and_the_teams_today() -> None:
    from gpuaas_service.console.answers import export_rows
    from jupyter_gpuaas.core.labels import HUB_USERNAME_ANNOTATION, TEAM_LABEL

    console, _ = console_of(two_team_plan(), ticks=[0.0])
    admitted = {
        "metadata": {
            "name": "jupyter-erin",
            "uid": "u-erin",
            "labels": {TEAM_LABEL: "team-b"},
            "annotations": {HUB_USERNAME_ANNOTATION: "erin"},
        },
        "spec": {"nodeName": "gpu-node-1"},
        "status": {"phase": "Pending"},
    }
    listed: list[list[dict[str, Any]] | None] = [None]
    console.pods = lambda: listed[0]
    console.count_failed_starts(T0)  # not listed yet: nothing seen
    listed[0] = [admitted]
    console.count_failed_starts(T0)
    listed[0] = []  # deleted without ever being Ready
    console.count_failed_starts(T0 + timedelta(minutes=1))
    text = console.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_failed_starts_total{team="team-b"} 1.0' in text
    (row,) = export_rows(console.record.ledger, T0.date(), only=["team-b"])
    assert (row["user"], row["failed_starts"]) == ("erin", 1)
    b = next(t for t in console.answer()["teams"] if t["team"] == "team-b")
    assert b["today"]["failed_starts"] == 1


def test_the_sizing_answer_advises_mig_nodes_to_administrators_only() -> None:
    console, _ = console_of(two_team_plan(), ticks=[0.0])
    console.nodes = lambda: [a100_mig_node("local-0", "all-1g.5gb")]
    console.pods = lambda: []
    console.job_pods = lambda: [pod_holding("nvidia.com/mig-3g.20gb", "local-0")]

    (row,) = console.fit()["mig"]
    assert (row["node"], row["now"], row["demand"]) == ("local-0", "all-1g.5gb", {"3g.20gb": 1})
    assert row["advised"] != "all-1g.5gb"  # seven 1g slices serve no 3g.20gb
    assert "kubectl label node local-0 nvidia.com/mig.config=" in row["line"]
    assert "mig" not in console.fit(only=["team-a"])  # a team lead sees no cluster nodes


def _raw_workload(name: str, ns: str, *, admitted: bool, owner: str) -> dict[str, Any]:
    """A Workload object as the watch holds it: one MIG 1g.5gb slice, owned by Job ``owner``."""
    conditions = (
        [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}]
        if admitted
        else [{"type": "QuotaReserved", "status": "False", "reason": "Pending"}]
    )
    requests = {"nvidia.com/mig-1g.5gb": "1"}
    status: dict[str, Any] = {"conditions": conditions}
    if admitted:
        status["admission"] = {
            "clusterQueue": "a-training",
            "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/mig-1g.5gb": "a100-mig"}, "count": 1}
            ],
        }
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "creationTimestamp": "2026-01-05T09:00:00Z",
            "labels": {"kueue.x-k8s.io/queue-name": "training"},
            "ownerReferences": [{"kind": "Job", "name": owner, "uid": f"job-{owner}"}],
        },
        "spec": {
            "queueName": "training",
            "active": True,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}
                    },
                }
            ],
        },
        "status": status,
    }


def test_every_gpu_and_the_queued_counts_are_of_the_cycles_moment() -> None:
    """The Workloads were read live while the Jobs' pods were the cycle's, so a
    Job admitted since the cycle read its pods was on node "not known" and its MIG slice free;
    and "What is queued" counted live beside a plan of the cycle. Everything is now of the
    cycle's reading, and the answer says when that was."""
    from gpuaas_service.reclaim.events import CycleInputs

    plan = two_team_plan()
    console, view = console_of(plan, ticks=[0.0])
    running = _raw_workload("job-train", "team-a", admitted=True, owner="train")
    queued = _raw_workload("job-next", "team-a", admitted=False, owner="next")
    job_pod = pod_holding("nvidia.com/mig-1g.5gb", "local-0")
    job_pod["metadata"] = {"name": "train-x", "uid": "pod-train-x"}
    job_pod["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "train", "uid": "job-train"}]
    console.loop._set_state(
        last_inputs=CycleInputs(
            pending=(),
            handoffs=(),
            reports={},
            pod_utilization={},
            dry_run=False,
            queue_state=org(),
            workloads=(running, queued),
            pods=(),
            job_pods=(job_pod,),
        )
    )
    # the live caches have moved on since: the Job finished and its pod is gone
    view.objects = {}
    console.nodes = lambda: [a100_mig_node("local-0", "all-1g.5gb")]
    console.pods = lambda: []
    console.job_pods = lambda: []

    gpus = console.gpus()
    assert gpus["as_of"] == "2026-11-30T12:00:00.000Z"  # the plan's, T0
    (training,) = [r for r in gpus["devices"] if r["holder_kind"] == "training"]
    assert training["node"] == "local-0"
    (free,) = [r for r in gpus["devices"] if r["state"] == "free"]
    assert (free["node"], free["device"]) == ("local-0", "MIG 1g.5gb × 6")
    team_a = next(t for t in console.answer()["teams"] if t["team"] == "team-a")
    assert team_a["queued"]["workloads"] == 1

"""What a queued server waits for (queue/outlook.py): the pure outlook from a reclaim plan, and
the listener that writes it on the waiting pod only when it changed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.model.pods import PodRef
from gpuaas_service.queue.outlook import MAX_HOLDERS, OutlookWriter, RunningJob, outlook
from gpuaas_service.reclaim.decide import Need, PendingWorkload, Workbench, decide
from gpuaas_service.reclaim.events import CycleInputs, CycleResult
from gpuaas_service.reclaim.idleness import Idleness, State
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import ADMISSION_GATE, WorkloadInfo
from jupyter_gpuaas.core.labels import HUB_USERNAME_ANNOTATION, RECLAIM_OUTLOOK

NOW = datetime(2026, 12, 3, 17, 0, tzinfo=timezone.utc)
NS = "jupyter-users"
MIG = ("a100-mig", "nvidia.com/mig-1g.5gb")
GPU = ("h100", "nvidia.com/gpu")
M = timedelta(minutes=1)
POLICY = load_policy(
    {"policies": [{"name": "p", "idle_after": "5m", "warn_before": "2m", "max_snoozes": 1}]}
)


def server(
    user: str,
    *,
    team: str = "team-a",
    idle: timedelta | None = 10 * M,
    holds: tuple[str, str] = MIG,
    cq: str = "team-a-notebooks",
    cohorts: tuple[str, ...] = ("gpuaas",),
    warned: timedelta | None = None,
) -> Workbench:
    state = State.IDLE if idle is not None else State.BUSY
    return Workbench(
        user=user,
        team=team,
        groups=(team,),
        kind="mig",
        holds={holds: Fraction(1)},
        cluster_queue=cq,
        cohorts=cohorts,
        started_at=NOW - 8 * 60 * M,
        idleness=Idleness(state, NOW - (idle or timedelta(0)), "quiet"),
        warned_at=NOW - warned if warned is not None else None,
    )


def waiting(user_queue: str = "team-a", amount: int = 1) -> PendingWorkload:
    return PendingWorkload(
        name="pod-jupyter-erin-1a2b3",
        namespace=NS,
        cluster_queue="team-a-notebooks",
        cohorts=("gpuaas",),
        needs=(
            Need(
                resource=MIG[1],
                amount=Fraction(amount),
                flavors=(MIG[0],),
                free={MIG[0]: Fraction(0)},
            ),
        ),
        local_queue=user_queue,
        team="team-a",
    )


def at(delta: timedelta) -> str:
    return (NOW + delta).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_an_idle_teammate_being_freed_for_it_with_when() -> None:
    wl = waiting()
    plan = decide([server("alice", idle=10 * M)], [wl], POLICY, now=NOW)
    got = outlook(wl, user="erin", plan=plan)
    assert got == {
        "holders": [
            {
                "kind": "server",
                "team": "team-a",
                "yours": False,
                "state": "idle",
                "idle_since": at(-10 * M),
                "freed_at": at(2 * M),
            }
        ],
        "more": 0,
        "freed_at": at(2 * M),
    }


# id, servers, jobs, the waiting user, expected holders as (kind, team, state, freed?), freed_at?
CASES: list[tuple[str, list[Workbench], list[RunningJob], str, list[tuple[Any, ...]], bool]] = [
    (
        "busy servers hold it: named, nothing is freed",
        [server("alice", idle=None), server("carol", team="team-b", cq="team-b-notebooks", idle=M)],
        [],
        "erin",
        [("server", "team-b", "idle", False), ("server", "team-a", "busy", False)],
        False,
    ),
    (
        "a training Job of team B in the cohort, and the user's own other server",
        [server("erin", idle=None)],
        [
            RunningJob(
                team="team-b",
                cluster_queue="team-b-training",
                cohorts=("gpuaas",),
                holds={MIG: Fraction(1)},
            )
        ],
        "erin",
        [("server", "team-a", "busy", False, True), ("job", "team-b")],
        False,
    ),
    (
        "what holds other resources or lies outside the cohort is not named",
        [server("alice", holds=GPU), server("bob", cq="elsewhere", cohorts=())],
        [RunningJob(team="team-c", cluster_queue="team-c", holds={MIG: Fraction(1)})],
        "erin",
        [],
        False,
    ),
    (
        "the one being freed comes first, then the longest idle",
        [server("alice", idle=6 * M), server("bob", idle=50 * M, warned=M)],
        [],
        "erin",
        [("server", "team-a", "idle", True), ("server", "team-a", "idle", False)],
        True,
    ),
]


@pytest.mark.parametrize(
    ("servers", "jobs", "user", "expected", "freed"),
    [row[1:] for row in CASES],
    ids=[row[0] for row in CASES],
)
def test_holders(
    servers: list[Workbench],
    jobs: list[RunningJob],
    user: str,
    expected: list[tuple[Any, ...]],
    freed: bool,
) -> None:
    wl = waiting()
    got = outlook(wl, user=user, plan=decide(servers, [wl], POLICY, now=NOW), jobs=jobs)
    shown: list[tuple[Any, ...]] = []
    for h in got["holders"]:
        if h["kind"] == "job":
            shown.append(("job", h["team"]))
        else:
            row = (h["kind"], h["team"], h["state"], h["freed_at"] is not None)
            shown.append((*row, True) if h["yours"] else row)
    assert shown == expected
    assert (got["freed_at"] is not None) is freed
    assert all("user" not in h for h in got["holders"])  # nobody else is named


def test_many_holders_are_counted_not_listed() -> None:
    wl = waiting()
    servers = [server(f"u{i}", idle=None) for i in range(MAX_HOLDERS + 3)]
    got = outlook(wl, user="erin", plan=decide(servers, [wl], POLICY, now=NOW))
    assert len(got["holders"]) == MAX_HOLDERS
    assert got["more"] == 3


def test_a_dry_run_frees_nothing() -> None:
    wl = waiting()
    plan = decide([server("alice")], [wl], POLICY, now=NOW, dry_run=True)
    got = outlook(wl, user="erin", plan=plan)
    assert got["freed_at"] is None
    assert got["holders"][0]["freed_at"] is None


# --------------------------------------------------------------------------- the writer


class Kube:
    def __init__(self, fail: bool = False) -> None:
        self.patches: list[tuple[str, dict[str, str | None]]] = []
        self.fail = fail

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        if self.fail:
            raise OSError("the API server is away")
        self.patches.append((pod.name, dict(annotations)))


class View:
    def __init__(self, workload: str) -> None:
        self.workload = workload

    def queue_state(self) -> QueueState:
        return QueueState()

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        return []

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        if pod_uid != "uid-erin":
            return None
        return WorkloadInfo(
            name=self.workload,
            namespace=namespace,
            uid="w1",
            queue_name="team-a",
            priority=None,
            priority_class="",
            created=None,
            owner_kind="Pod",
            owner_name=pod_name,
            owner_uid=pod_uid,
            job_uid="",
            active=True,
        )


def gated_pod(name: str, uid: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "annotations": {HUB_USERNAME_ANNOTATION: "erin", **(annotations or {})},
        },
        "spec": {"schedulingGates": [{"name": ADMISSION_GATE}]},
    }


def result(servers: list[Workbench], wl: PendingWorkload, now: datetime = NOW) -> CycleResult:
    plan = decide(servers, [wl], POLICY, now=now)
    return CycleResult(now, plan, CycleInputs((wl,), (), {}, {}, False))


async def test_the_writer_annotates_the_waiting_pod_once_per_change() -> None:
    wl = waiting()
    pods = [gated_pod("jupyter-erin", "uid-erin"), gated_pod("jupyter-other", "uid-other")]
    kube = Kube()
    writer = OutlookWriter(kube, View(wl.name), lambda: pods, notebook_namespace=NS)
    await writer.cycle_completed(result([server("alice")], wl))
    assert [name for name, _ in kube.patches] == ["jupyter-erin"]
    written = json.loads(kube.patches[0][1][RECLAIM_OUTLOOK] or "")
    assert written["freed_at"] == at(2 * M)
    # The next cycle, the same plan a minute on: the same text, nothing written.
    alice = replace(server("alice"), warned_at=NOW)
    await writer.cycle_completed(result([alice], wl, NOW + M))
    assert len(kube.patches) == 1
    # alice becomes busy: her warning goes, the outlook changes.
    await writer.cycle_completed(result([server("alice", idle=None)], wl, NOW + 2 * M))
    assert len(kube.patches) == 2
    assert json.loads(kube.patches[1][1][RECLAIM_OUTLOOK] or "")["freed_at"] is None


async def test_a_failed_write_is_tried_again_and_pods_not_listed_yet_are_skipped() -> None:
    wl = waiting()
    pods = [gated_pod("jupyter-erin", "uid-erin")]
    kube = Kube(fail=True)
    writer = OutlookWriter(kube, View(wl.name), lambda: pods, notebook_namespace=NS)
    await writer.cycle_completed(result([server("alice")], wl))
    kube.fail = False
    await writer.cycle_completed(result([server("alice")], wl))
    assert len(kube.patches) == 1
    unlisted = OutlookWriter(Kube(), View(wl.name), lambda: None, notebook_namespace=NS)
    await unlisted.cycle_completed(result([server("alice")], wl))  # no error, nothing written

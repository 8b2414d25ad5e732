"""The reclaim loop and its input builders, with in-memory stand-ins for the hub, the pods and
the Kueue caches (our own collaborators' interfaces; the real ones are in tests/hub)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.clients.hub import HubError
from gpuaas_service.clients.persisted import PersistedState
from gpuaas_service.console.journal import (
    JOURNAL_CONFIGMAP,
    Entry,
    journal_from_text,
    journal_to_text,
)
from gpuaas_service.console.record import ConsoleRecord
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action, HandOffRecord
from gpuaas_service.reclaim.gather import (
    as_the_hub_sees_them,
    pending_workloads,
    workbenches,
)
from gpuaas_service.reclaim.handoffs import (
    HANDOFFS_CONFIGMAP,
    handoffs_from_text,
    handoffs_to_text,
)
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.loop import ReclaimLoop, Settings
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    PendingWorkloadInfo,
    WorkloadInfo,
    read_local_queue,
    read_workload,
)
from jupyter_gpuaas.core.labels import (
    RECLAIM_DEADLINE,
    RECLAIM_REASON,
    RECLAIMED_AT,
    SNOOZES_USED,
    WARNED_AT,
)
from tests.unit.service import world_samples as world
from tests.unit.service.world_samples import NS, iso

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MIG = "nvidia.com/mig-1g.5gb"


def cluster_queue(name: str, nominal: int, used: int) -> dict[str, Any]:
    return world.cluster_queue(name, {("local", MIG): nominal}, {("local", MIG): used})


def queue_state(notebooks_used: int = 3) -> QueueState:
    return world.team_a_queues(
        cluster_queue("team-a-notebooks", 3, notebooks_used),
        cluster_queue("team-a-training", 0, 0),
    )


def pod(user: str, server: str = "", uid: str = "") -> dict[str, Any]:
    return world.workbench_pod(
        user,
        server=server,
        uid=uid,
        offering="local-mig-1g",
        kind="mig",
        requests={MIG: "1", "cpu": "1"},
        limits={MIG: "1"},
        created=T0,
    )


def job_workload(
    name: str = "train", count: int = 2, admitted: datetime | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if admitted is not None:
        status = {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(admitted)},
                {"type": "Admitted", "status": "True", "lastTransitionTime": iso(admitted)},
            ]
        }
    return world.job_workload_object(
        name, requests={MIG: "1"}, count=count, created=T0, status=status
    )


def idle(at: datetime) -> dict[str, Any]:
    return world.idle_report(at)


def busy(at: datetime) -> dict[str, Any]:
    payload = idle(at)
    payload["kernels"][0]["execution_state"] = "busy"
    payload["idle_since"] = None
    return payload


class FakeHub:
    def __init__(self, servers: list[tuple[str, str]]) -> None:
        self.servers = {
            s: {"name": s[1], "ready": True, "pending": None, "started": iso(T0)} for s in servers
        }
        self.groups: dict[str, list[str]] = {}
        self.stopped: list[tuple[str, str]] = []
        self.down = False
        self.calls = 0
        self.asked: list[str] = []

    async def user(self, name: str) -> dict[str, Any] | None:
        self.calls += 1
        self.asked.append(name)
        if self.down:
            raise HubError(f"GET /users/{name}: connection refused")
        servers = {s: m for (u, s), m in self.servers.items() if u == name}
        if not servers:
            return None
        return {"name": name, "groups": self.groups.get(name, ["team-a"]), "servers": servers}

    async def group_members(self) -> dict[str, list[str]]:
        self.calls += 1
        if self.down:
            raise HubError("GET /groups: connection refused")
        return self.groups

    async def stop_server(self, user: str, server: str) -> int:
        self.stopped.append((user, server))
        self.servers.pop((user, server), None)
        return 202


class FakeKube:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.events: list[tuple[str, str, str]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.configmaps: dict[tuple[str, str], str] = {}
        self.configmaps_down = False
        self.down = False

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        if self.down:
            raise OSError("apiserver unreachable")
        copied: list[dict[str, Any]] = json.loads(json.dumps(list(self.pods.values())))
        return copied

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        self.patches.append((pod.name, dict(annotations)))
        ann = self.pods[pod.name]["metadata"]["annotations"]
        for k, v in annotations.items():
            if v is None:
                ann.pop(k, None)
            else:
                ann[k] = v

    async def event(
        self, pod: PodRef, reason: str, message: str, type_: str, *, at: datetime
    ) -> None:
        self.events.append((pod.name, reason, type_))

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]:
        return {}

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        return {"local": {"gpuaas.dev/pool": "local"}}

    async def read_state(self, namespace: str, name: str) -> str | None:
        if self.down or self.configmaps_down:
            raise OSError("configmaps: forbidden")
        return self.configmaps.get((namespace, name))

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        if self.down or self.configmaps_down:
            raise OSError("configmaps: forbidden")
        self.configmaps[(namespace, name)] = text


class FakeView:
    def __init__(
        self, state: QueueState, workloads: list[dict[str, Any]], pods: list[dict[str, Any]]
    ) -> None:
        self.state = state
        self.jobs = workloads
        self.pod_workloads = {
            p["metadata"]["uid"]: read_workload(
                {
                    "metadata": {"name": "pod-" + p["metadata"]["name"], "namespace": NS},
                    "status": {
                        "admission": {
                            "clusterQueue": "team-a-notebooks",
                            "podSetAssignments": [{"name": "main", "flavors": {MIG: "local"}}],
                        }
                    },
                }
            )
            for p in pods
        }

    def queue_state(self) -> QueueState:
        return self.state

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        return [w for w in self.jobs if w["metadata"]["namespace"] == namespace]

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        return self.pod_workloads.get(pod_uid)

    def pending_items(self, namespace: str, local_queue: str) -> list[PendingWorkloadInfo] | None:
        return None


POLICY = {
    "report_stale_after": "5m",
    "handoff_timeout": "1m",
    "policies": [
        {
            "name": "team-a",
            "match": {"teams": ["team-a"]},
            "idle_after": "10s",
            "warn_before": "30s",
            "max_snoozes": 1,
            "snooze_for": "1h",
        }
    ],
}


class World:
    """Team A: alice and bob idle on one MIG slice each, alice/busy busy; a Job needs 2 slices."""

    def __init__(self, policy: Mapping[str, Any] = POLICY, dry_run: bool = False) -> None:
        self.now = T0 + timedelta(seconds=60)
        keys = [("alice", ""), ("bob", ""), ("alice", "busy")]
        self.pods = [pod(u, s) for u, s in keys]
        self.hub = FakeHub(keys)
        self.kube = FakeKube(self.pods)
        self.jobs = [job_workload()]
        self.view = FakeView(queue_state(), self.jobs, self.pods)
        self.store = ActivityStore()
        self.policy = load_policy(policy)
        self.settings = Settings(
            job_namespaces=("team-a",), interval=10, max_backoff=80, dry_run=dry_run
        )
        self.loop = self.new_loop()

    def new_loop(self) -> ReclaimLoop:
        """A loop with the console's record listening, as the service runs them (a restart:
        both start with nothing in memory)."""
        loop = ReclaimLoop(
            hub=self.hub,
            kube=self.kube,
            view=self.view,
            policies=self.policy,
            store=self.store,
            settings=self.settings,
            clock=lambda: self.now,
        )
        journal = PersistedState(self.kube, NS, JOURNAL_CONFIGMAP, owner="console", what="journal")
        self.record = ConsoleRecord(journal)
        loop.listeners.append(self.record)
        return loop

    def add_idle(self, user: str) -> None:
        """Another idle MIG notebook of team A, running and reporting."""
        self.hub.servers[(user, "")] = {"name": "", "ready": True, "started": iso(T0)}
        self.kube.pods[f"jupyter-{user}"] = pod(user)
        self.view.pod_workloads.update(FakeView(self.view.state, [], [pod(user)]).pod_workloads)
        self.store.record(user, "", idle(T0), self.now)

    def report(self) -> None:
        self.store.record("alice", "", idle(T0), self.now)
        self.store.record("bob", "", idle(T0), self.now)
        self.store.record("alice", "busy", busy(T0), self.now)

    async def cycle(self, after: float = 0) -> Any:
        self.now += timedelta(seconds=after)
        self.report()
        return await self.loop.cycle()


# --------------------------------------------------------------------------- gather


def test_workbenches_join_pods_workloads_and_reports() -> None:
    w = World()
    w.report()
    starting = pod("bob")
    starting["status"] = {"phase": "Pending"}
    no_user = pod("nobody")
    del no_user["metadata"]["annotations"]["hub.jupyter.org/username"]
    wbs, refs = workbenches(
        [w.pods[0], starting, w.pods[2], no_user],
        w.view.state,
        w.store,
        w.policy,
        now=w.now,
        workload_for_pod=w.view.workload_for_pod,
        groups={"alice": ["team-a", "on-call"]},
    )
    by = {wb.key: wb for wb in wbs}
    assert set(by) == {"alice", "alice/busy", "bob"}
    alice = by["alice"]
    assert alice.holds == {("local", MIG): Fraction(1)}
    assert alice.kind == "mig"
    assert alice.team == "team-a"
    assert alice.offering == "local-mig-1g"
    assert alice.cluster_queue == "team-a-notebooks"
    assert alice.cohorts == ("gpuaas",)
    assert alice.gpu_equivalents == Fraction(1, 7)
    assert alice.groups == ("team-a", "on-call")
    assert alice.phase == "running"
    assert alice.idleness.state is State.IDLE
    assert by["alice/busy"].idleness.state is State.BUSY
    assert by["bob"].phase == "starting"
    assert by["bob"].groups == ()
    assert refs["alice/busy"] == PodRef(NS, "jupyter-alice-busy", "uid-jupyter-alice-busy")


def test_the_hub_has_the_last_word_on_phase_groups_and_whether_a_server_is_active() -> None:
    w = World()
    w.report()
    wbs, _ = workbenches(
        w.pods,
        w.view.state,
        w.store,
        w.policy,
        now=w.now,
        workload_for_pod=w.view.workload_for_pod,
    )
    started = T0 + timedelta(seconds=5)
    users: dict[str, dict[str, Any] | None] = {
        "alice": {
            "name": "alice",
            "groups": ["ops"],
            "servers": {"": {"ready": False, "pending": "spawn", "started": iso(started)}},
        },
        "bob": None,  # no such user any more: his pod is not a workbench
    }
    by = {wb.key: wb for wb in as_the_hub_sees_them(wbs, users)}
    assert set(by) == {"alice"}  # bob is gone; alice's "busy" is not active in the hub
    assert by["alice"].phase == "starting"
    assert by["alice"].groups == ("ops",)
    assert by["alice"].started_at == started
    users["alice"] = {"name": "alice", "servers": {"": {"ready": True, "pending": "stop"}}}
    (alice,) = [wb for wb in as_the_hub_sees_them(wbs, users) if wb.key == "alice"]
    assert alice.phase == "stopping"
    assert alice.groups == ()  # the hub did not say: what the cycle knew stays
    users["alice"] = {"name": "alice", "servers": {"": {"ready": True, "pending": None}}}
    (alice,) = [wb for wb in as_the_hub_sees_them(wbs, users) if wb.key == "alice"]
    assert alice.phase == "running"


def test_pending_workloads_lack_what_the_cohort_cannot_lend() -> None:
    state = queue_state(notebooks_used=3)
    (wl,) = pending_workloads([job_workload(), job_workload("done", admitted=T0)], state)
    assert wl.key == "team-a/train"
    assert wl.cluster_queue == "team-a-training"
    assert wl.cohorts == ("gpuaas",)
    assert wl.priority == 100
    assert wl.position == 0
    (need,) = wl.needs
    assert need.resource == MIG
    assert need.amount == 2
    assert need.flavors == ("local",)
    assert need.free == {"local": 0}
    # a flavor whose node labels contradict the pods' nodeSelector is not one it can get
    job = job_workload()
    job["spec"]["podSets"][0]["template"]["spec"]["nodeSelector"] = {"gpuaas.dev/pool": "other"}
    local = {"local": {"gpuaas.dev/pool": "local"}}
    assert pending_workloads([job], state, flavor_labels=local) == []
    assert len(pending_workloads([job_workload()], state, flavor_labels=local)) == 1
    (freer,) = pending_workloads([job_workload()], queue_state(notebooks_used=2))
    assert freer.needs[0].free == {"local": 1}


# --------------------------------------------------------------------------- the loop


async def test_warn_then_reclaim_the_two_idle_ones_and_verify_the_handoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = World()
    plan = await w.cycle()
    assert {d.workbench.key for d in plan.with_action(Action.WARN)} == {"alice", "bob"}
    assert w.kube.pods["jupyter-alice"]["metadata"]["annotations"][WARNED_AT].startswith(
        "2026-11-30T12:01:00"
    )
    assert WARNED_AT not in w.kube.pods["jupyter-alice-busy"]["metadata"]["annotations"]
    assert sorted(e[:2] for e in w.kube.events) == [
        ("jupyter-alice", "GPUReclaimWarning"),
        ("jupyter-bob", "GPUReclaimWarning"),
    ]
    answer = w.loop.warning_for("alice", "")
    assert answer["warning"]["seconds_left"] == 30
    assert answer["warning"]["snoozes_left"] == 1
    assert w.loop.warning_for("alice", "busy")["warning"] is None

    plan = await w.cycle(after=10)
    assert {d.workbench.key for d in plan.with_action(Action.WAIT)} == {"alice", "bob"}
    assert not w.hub.stopped
    assert len(w.kube.events) == 2
    assert w.loop.warning_for("bob", "")["warning"]["saving"] is False
    w.now += timedelta(seconds=6)
    assert w.loop.warning_for("bob", "")["warning"]["saving"] is True  # 15 s before: save

    plan = await w.cycle(after=15)
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    assert ("alice", "busy") not in w.hub.stopped
    assert RECLAIMED_AT in w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert sum(1 for e in w.kube.events if e[1] == "GPUReclaimed") == 2
    assert len(w.kube.pods) == 3  # pods are never deleted by the culler

    # Kueue admits the Job 4 s after the reclaim: a hand-off, with its latency.
    w.jobs[0].update(job_workload(admitted=w.now + timedelta(seconds=4)))
    await w.cycle(after=10)
    text = w.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_culler_reclaimed_gpu_equivalents_total{team="team-a"} 0.2857' in text
    assert "gpuaas_culler_handoff_latency_seconds_count 1.0" in text
    assert 'gpuaas_culler_handoffs_total{result="succeeded"} 1.0' in text
    assert 'gpuaas_culler_idle_gpu_hours_total{team="team-a"}' in text
    assert "alice" not in text
    assert "bob" not in text
    records = [
        json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.audit"
    ]
    reclaims = [r for r in records if r.get("action") == "reclaim"]
    assert {r["user"] for r in reclaims} == {"alice", "bob"}
    assert all(r["handoff"] == "team-a/train" for r in reclaims)
    handoff = [r for r in records if r["event"] == "culler.handoff"]
    assert handoff
    assert handoff[0]["result"] == "succeeded"
    assert handoff[0]["latency_seconds"] == 4.0
    # The journal's hand-off names the queued work's team, so that team's lead sees it.
    (journaled,) = [
        e for e in w.record.journal.recent(timedelta(days=1)) if e["event"] == "handoff"
    ]
    assert (journaled["team"], journaled["workload"]) == ("team-a", "team-a/train")


async def test_a_restarted_culler_neither_warns_twice_nor_restarts_the_countdown() -> None:
    w = World()
    await w.cycle()
    first = w.kube.pods["jupyter-alice"]["metadata"]["annotations"][WARNED_AT]
    w.loop = w.new_loop()
    w.store = ActivityStore()  # the service's memory is gone too
    w.loop.store = w.store
    w.now += timedelta(seconds=1)
    plan = await w.loop.cycle()  # no reports yet: unknown, the warning stays
    assert plan is not None
    assert {d.code for d in plan.decisions} == {"unknown"}
    assert w.kube.pods["jupyter-alice"]["metadata"]["annotations"][WARNED_AT] == first
    plan = await w.cycle(after=5)
    assert not plan.with_action(Action.WARN)
    assert {d.workbench.key for d in plan.with_action(Action.WAIT)} == {"alice", "bob"}
    assert w.kube.pods["jupyter-alice"]["metadata"]["annotations"][WARNED_AT] == first
    assert len(w.kube.events) == 2
    await w.cycle(after=26)  # 31 s after the first warning
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]


async def test_dry_run_changes_nothing() -> None:
    w = World(dry_run=True)
    actions = []
    for _ in range(3):
        plan = await w.cycle(after=20)
        assert all(d.dry_run for d in plan.decisions)
        actions.append(sorted(d.action.value for d in plan.decisions))
    # what it would do, in memory only: warn, wait, then reclaim the pair
    assert actions == [
        ["skip", "warn", "warn"],
        ["skip", "wait", "wait"],
        ["reclaim", "reclaim", "skip"],
    ]
    assert not w.hub.stopped
    assert not w.kube.patches
    assert not w.kube.events
    assert w.loop.warning_for("alice", "")["warning"] is None


async def test_a_snooze_is_honoured_once() -> None:
    w = World()
    await w.cycle()
    result = await w.loop.snooze("alice", "")
    assert result.allowed
    assert result.snoozes_left == 0
    ann = w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert ann[SNOOZES_USED] == "1"
    assert WARNED_AT not in ann
    assert w.loop.warning_for("alice", "")["warning"] is None
    again = await w.loop.snooze("alice", "")
    assert not again.allowed
    assert "no snoozes left" in again.reason
    plan = await w.cycle(after=40)
    # alice is kept; bob alone cannot free the 2 slices: nothing is stopped
    assert not w.hub.stopped
    codes = {d.workbench.key: d.code for d in plan.decisions}
    assert codes["alice"] == "snoozed"
    assert (await w.loop.snooze("carol", "")).allowed is False


async def test_hub_or_apiserver_down_acts_on_nothing_and_backs_off() -> None:
    w = World()
    w.hub.down = True
    assert await w.cycle() is None
    assert w.loop.next_delay() == 20
    w.hub.down = False
    w.kube.down = True
    assert await w.cycle() is None
    assert w.loop.next_delay() == 40
    assert await w.cycle() is None
    assert await w.cycle() is None
    assert w.loop.next_delay() == 80  # max_backoff
    assert not w.kube.patches
    assert not w.hub.stopped
    w.kube.down = False
    assert await w.cycle() is not None
    assert w.loop.next_delay() == 10
    text = w.loop.metrics.exposition()[0].decode()
    assert 'gpuaas_culler_cycle_errors_total{source="kubernetes"} 3.0' in text


async def test_unsynced_kueue_caches_act_on_nothing() -> None:
    w = World()
    w.view.state = QueueState(synced=False)
    assert await w.cycle() is None
    assert w.hub.calls == 0
    assert not w.kube.patches


async def test_a_busy_kernel_clears_the_warning() -> None:
    w = World()
    await w.cycle()
    w.now += timedelta(seconds=5)
    w.store.record("alice", "", busy(T0), w.now)
    w.store.record("bob", "", idle(T0), w.now)
    w.store.record("alice", "busy", busy(T0), w.now)
    plan = await w.loop.cycle()
    assert plan is not None
    assert {d.workbench.key: d.action for d in plan.decisions}["alice"] is Action.CLEAR_WARNING
    assert WARNED_AT not in w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert w.loop.warning_for("alice", "")["warning"] is None


async def reclaimed_for_the_job() -> World:
    """alice and bob warned, then stopped for the Job: a hand-off under way."""
    w = World()
    await w.cycle()
    await w.cycle(after=31)
    assert len(w.hub.stopped) == 2
    return w


async def test_a_failed_handoff_stops_reclaiming_for_that_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = await reclaimed_for_the_job()
    # Something else took the quota: the Job is still pending after handoff_timeout (1m).
    w.add_idle("carol")
    plan = await w.loop.cycle()
    await w.cycle(after=61)
    w.store.record("carol", "", idle(T0), w.now)
    plan = await w.loop.cycle()
    assert plan is not None
    (target,) = plan.targets
    assert target.status == "blocked"
    assert "not admitted within 1m" in target.reason
    records = [
        json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.audit"
    ]
    assert any(r["event"] == "culler.handoff" and r["result"] == "failed" for r in records)


async def test_a_restarted_culler_keeps_its_handoff_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.audit")
    w = await reclaimed_for_the_job()
    await w.cycle(after=61)  # the Job is still pending past handoff_timeout: failed
    records = w.kube.configmaps[(NS, HANDOFFS_CONFIGMAP)]
    assert '"workload": "team-a/train"' in records
    assert "handoff-failed" in records

    caplog.clear()
    w.loop = w.new_loop()  # a restart: nothing in memory
    w.add_idle("carol")
    plan = await w.cycle(after=1)
    assert plan is not None
    (target,) = plan.targets
    assert target.status == "blocked"  # still: the record survived the restart
    assert not plan.with_action(Action.WARN)
    audits = [json.loads(r.getMessage()) for r in caplog.records]
    assert not [a for a in audits if a.get("event") == "culler.handoff"]  # not recorded twice


async def test_unreadable_or_unusable_handoff_records() -> None:
    w = World()
    w.kube.configmaps[(NS, HANDOFFS_CONFIGMAP)] = "{not json"
    plan = await w.cycle()
    assert plan is not None  # unusable: started without them, and said so in the log
    assert len(w.kube.patches) == 2  # alice and bob warned
    w.loop = w.new_loop()
    w.kube.configmaps_down = True
    assert await w.cycle(after=31) is None  # unreadable: acts on nothing, though it is time
    assert w.loop.last_error == "kubernetes: reading the hand-off records"
    assert len(w.kube.patches) == 2
    assert not w.hub.stopped
    w.kube.configmaps_down = False
    await w.cycle(after=1)  # read now; but a restarted service first tells them "saving"
    assert not w.hub.stopped
    assert w.loop.warning_for("alice", "")["warning"]["saving"] is True
    await w.cycle(after=16)  # save_lead later: alice and bob are stopped for the Job
    assert len(w.hub.stopped) == 2
    assert '"workload": "team-a/train"' in w.kube.configmaps[(NS, HANDOFFS_CONFIGMAP)]


def test_handoff_records_round_trip() -> None:
    records = {
        "team-a-training": HandOffRecord(
            workload="team-a/train",
            cluster_queue="team-a-training",
            reclaimed_at=T0,
            admitted_at=T0 + timedelta(seconds=12),
            team="team-a",
        )
    }
    marks = {("team-a/train", "handoff-succeeded"), ("team-a/other", "handoff-failed")}
    back, reported = handoffs_from_text(handoffs_to_text(records, marks))
    assert back == records
    assert reported == {("team-a/train", "handoff-succeeded")}
    with pytest.raises(ValueError, match="incomplete"):
        handoffs_from_text('{"version": 1, "handoffs": [{"workload": "x"}]}')
    # a record kept before teams were recorded still reads, without a team
    old = handoffs_to_text(records, marks).replace(', "team": "team-a"', "")
    assert handoffs_from_text(old)[0]["team-a-training"].team == ""


async def test_a_handoff_whose_workload_is_gone_blocks_nothing() -> None:
    w = await reclaimed_for_the_job()
    assert w.loop.handoffs
    w.jobs.clear()  # the Job was deleted before it was seen admitted
    await w.cycle(after=1)
    assert not w.loop.handoffs


async def test_a_cycle_asks_the_hub_only_about_the_servers_it_would_act_on() -> None:
    w = World()
    w.jobs.clear()  # nothing queued: idle as they are, nobody is warned
    assert await w.cycle() is not None
    assert w.hub.calls == 0
    w.jobs.append(job_workload())
    w.hub.servers[("bob", "")]["pending"] = "stop"  # the hub is stopping bob's already
    plan = await w.cycle()
    assert plan is not None
    assert sorted(w.hub.asked) == ["alice", "bob"]  # not once per server, not alice's twice
    codes = {d.workbench.key: (d.action, d.code) for d in plan.decisions}
    assert codes["bob"][0] is Action.SKIP
    assert codes["alice"][0] is not Action.WARN  # alone she frees too little for the Job
    assert not w.kube.patches


async def test_a_policy_naming_groups_reads_them_from_the_hub() -> None:
    policy = {
        **POLICY,
        "exempt": {"groups": ["on-call"]},
    }
    w = World(policy)
    w.hub.groups = {"bob": ["team-a", "on-call"]}
    plan = await w.cycle()
    assert plan is not None
    codes = {d.workbench.key: d.code for d in plan.decisions}
    assert codes["bob"] == "exempt"
    assert not plan.with_action(Action.WARN)  # alice alone frees too little


async def test_hub_client_asks_for_users_and_pages_of_groups_and_stops_servers() -> None:
    import socket

    from tornado import web

    from gpuaas_service.clients.hub import HubClient

    seen: list[str] = []
    groups = [{"name": f"g{i}", "users": ["u0", f"u{i}"]} for i in range(1, 6)]

    class Groups(web.RequestHandler):
        def get(self) -> None:
            seen.append(self.request.uri or "")
            assert self.request.headers["Authorization"] == "token culler-token"
            assert "jupyterhub-pagination" in self.request.headers["Accept"]
            offset = int(self.get_argument("offset"))
            limit = int(self.get_argument("limit"))
            nxt = offset + limit
            self.finish(
                {
                    "items": groups[offset:nxt],
                    "_pagination": {
                        "offset": offset,
                        "limit": limit,
                        "total": len(groups),
                        "next": {"offset": nxt, "limit": limit} if nxt < len(groups) else None,
                    },
                }
            )

    class User(web.RequestHandler):
        def get(self, name: str) -> None:
            seen.append(f"GET {name}")
            if name != "u1":
                raise web.HTTPError(404)
            self.finish({"name": name, "servers": {"": {"ready": True}}})

    class Server(web.RequestHandler):
        def delete(self, user: str, name: str = "") -> None:
            seen.append(f"DELETE {user}/{name}")
            self.set_status(202 if user != "gone" else 400)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = web.Application(
        [
            (r"/hub/api/groups", Groups),
            (r"/hub/api/users/([^/]+)", User),
            (r"/hub/api/users/([^/]+)/server", Server),
            (r"/hub/api/users/([^/]+)/servers/([^/]*)", Server),
        ]
    )
    server = app.listen(port, "127.0.0.1")
    try:
        hub = HubClient(f"http://127.0.0.1:{port}/hub/api", "culler-token")
        hub.page_size = 2
        members = await hub.group_members()
        assert members["u0"] == ["g1", "g2", "g3", "g4", "g5"]
        assert members["u3"] == ["g3"]
        assert hub.requests == 3  # pages of groups
        assert (await hub.user("u1") or {})["servers"] == {"": {"ready": True}}
        assert await hub.user("nobody") is None  # 404: no such user
        assert await hub.stop_server("u1", "") == 202
        assert await hub.stop_server("u2", "gpu") == 202
        assert await hub.stop_server("gone", "") == 400  # not running: nothing to stop
        assert seen[-3:] == ["DELETE u1/", "DELETE u2/gpu", "DELETE gone/"]
        hub.api_url = "http://127.0.0.1:1/hub/api"
        with pytest.raises(HubError):
            await hub.user("u1")
    finally:
        server.stop()


async def test_a_mig_pod_busy_by_prometheus_is_not_idle_and_no_answer_acts_on_nothing() -> None:
    from gpuaas_service.clients.prometheus import PrometheusError

    w = World()
    answers: list[Any] = [{(NS, "jupyter-bob"): 80.0}]

    async def utilization() -> Mapping[tuple[str, str], float]:
        answer = answers[-1]
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    w.loop.utilization = utilization
    plan = await w.cycle()
    assert plan is not None
    bob = next(d for d in plan.decisions if d.workbench.key == "bob")
    assert bob.workbench.idleness.state is State.BUSY
    assert "pod GPU utilisation 80%" in bob.workbench.idleness.reason
    assert not plan.with_action(Action.WARN)  # alice alone frees too little
    answers.append(PrometheusError("http://prometheus:9090: connection refused"))
    assert await w.cycle(after=1) is None
    assert 'cycle_errors_total{source="prometheus"} 1.0' in w.loop.metrics.exposition()[0].decode()
    answers.append({})  # no sample for the pods: judged by their reports alone
    plan = await w.cycle(after=15)  # bob's last busy moment is now past idle_after (10 s)
    assert plan is not None
    assert {d.workbench.key for d in plan.with_action(Action.WARN)} == {"alice", "bob"}


# --------------------------------------------------------------------------- issue 13


class GatedHub(FakeHub):
    """A hub whose stops wait for ``release`` (the race between a decision and its stop)."""

    def __init__(self, servers: list[tuple[str, str]]) -> None:
        super().__init__(servers)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stop_server(self, user: str, server: str) -> int:
        self.entered.set()
        await self.release.wait()
        return await super().stop_server(user, server)


class GatedKube(FakeKube):
    """Annotations of ``gate_pod`` wait for ``release``: the cycle is between its decision and
    the stops that come after it."""

    def __init__(self, pods: list[dict[str, Any]], gate_pod: str) -> None:
        super().__init__(pods)
        self.gate_pod = gate_pod
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        if pod.name == self.gate_pod and RECLAIMED_AT in annotations:
            self.entered.set()
            await self.release.wait()
        await super().annotate(pod, annotations)


async def test_a_snooze_between_the_decision_and_the_stop_wins() -> None:
    # Issue 13.3: alice's stop is under way (her annotation after it waits); bob, decided in
    # the same cycle, presses "Keep my GPU" now: his server is not stopped.
    w = World()
    await w.cycle()  # alice and bob warned
    w.kube = GatedKube(list(w.kube.pods.values()), "jupyter-alice")
    w.loop.kube = w.kube
    w.now += timedelta(seconds=31)
    w.report()
    cycle = asyncio.ensure_future(w.loop.cycle())
    await asyncio.wait_for(w.kube.entered.wait(), 5)  # alice stopped; bob decided, not yet
    result = await w.loop.snooze("bob", "")
    assert result.allowed, result.reason
    w.kube.release.set()
    plan = await asyncio.wait_for(cycle, 5)
    assert plan is not None
    assert ("bob", "") in [(d.workbench.user, d.workbench.server) for d in plan.decisions]
    assert w.hub.stopped == [("alice", "")]  # bob kept (his press came after the decision)
    # the next cycle still sees bob's snooze, though the pod it read before did not have it
    await w.cycle(after=1)
    assert ("bob", "") not in w.hub.stopped
    assert w.loop.seen["bob"].workbench.snoozed_until is not None


async def test_a_snooze_during_the_stop_is_refused_with_why() -> None:
    w = World()
    await w.cycle()
    w.hub = GatedHub(list(w.hub.servers))
    w.loop.hub = w.hub
    w.now += timedelta(seconds=31)
    w.report()
    cycle = asyncio.ensure_future(w.loop.cycle())
    await asyncio.wait_for(w.hub.entered.wait(), 5)  # alice's stop is under way
    result = await w.loop.snooze("alice", "")
    assert not result.allowed
    assert "being stopped now" in result.reason
    assert "alice" in w.loop.stopping
    w.hub.release.set()
    await asyncio.wait_for(cycle, 5)
    assert ("alice", "") in w.hub.stopped


async def test_a_busy_report_between_the_decision_and_the_stop_wins() -> None:
    w = World()
    await w.cycle()
    w.kube = GatedKube(list(w.kube.pods.values()), "jupyter-alice")
    w.loop.kube = w.kube
    w.now += timedelta(seconds=31)
    w.report()
    cycle = asyncio.ensure_future(w.loop.cycle())
    await asyncio.wait_for(w.kube.entered.wait(), 5)
    w.now += timedelta(seconds=1)  # bob's kernel runs a cell, reported now
    w.store.record("bob", "", busy(w.now), w.now)
    w.kube.release.set()
    await asyncio.wait_for(cycle, 5)
    assert w.hub.stopped == [("alice", "")]


async def test_after_a_restart_the_banner_comes_back_and_saving_comes_first() -> None:
    # Issue 13.8: the deadline and reason are on the pod; a restarted service shows them and
    # stops nothing before the sidebar has had "saving" for save_lead.
    w = World()
    await w.cycle()
    ann = w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert ann[RECLAIM_DEADLINE] == isoformat_z(w.now + timedelta(seconds=30))
    assert "needs what it holds" in ann[RECLAIM_REASON]
    w.loop = w.new_loop()  # restart, its countdown continues on the pod
    w.store.set_notice("alice", None)  # the store is the new process's too
    w.store.set_notice("bob", None)
    await w.cycle(after=10)
    warning = w.loop.warning_for("alice", "")["warning"]
    assert warning["reason"] == ann[RECLAIM_REASON]
    assert warning["reclaim_at"] == ann[RECLAIM_DEADLINE]
    w.loop = w.new_loop()  # restarted again, past the deadline this time
    for key in ("alice", "bob"):
        w.store.set_notice(key, None)
    await w.cycle(after=60)
    assert not w.hub.stopped
    assert w.loop.warning_for("alice", "")["warning"]["saving"] is True
    await w.cycle(after=10)
    assert not w.hub.stopped  # only 10 of save_lead's 15 s
    await w.cycle(after=6)
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]


async def test_a_warning_names_queued_work_of_another_team_by_its_team_only() -> None:
    # Issue 13.10: team A's workbenches warned for team B's Job: "queued work of team team-b".
    w = World()
    w.jobs[0]["metadata"]["namespace"] = "team-b"
    team_b = read_local_queue(
        {
            "metadata": {"name": "training", "namespace": "team-b"},
            "spec": {"clusterQueue": "team-a-training"},
        }
    )
    w.view.state = replace(
        w.view.state,
        local_queues={**w.view.state.local_queues, ("team-b", "training"): team_b},
    )
    w.settings = Settings(job_namespaces=("team-b",), interval=10, max_backoff=80)
    w.loop = w.new_loop()
    plan = await w.cycle()
    assert plan is not None
    (warned, *_) = plan.with_action(Action.WARN)
    assert "team-b/train" in warned.reason  # the audit names it
    told = w.loop.warning_for(warned.workbench.user, "")["warning"]["reason"]
    assert told.startswith("queued work of team team-b needs what it holds")
    assert "train" not in told
    ann = w.kube.pods[f"jupyter-{warned.workbench.user}"]["metadata"]["annotations"]
    assert "train" not in ann[RECLAIM_REASON]


# --------------------------------------------------------------------------- the console's journal


async def test_a_restarted_service_keeps_the_console_journal_and_its_regret() -> None:
    w = await reclaimed_for_the_job()
    before = [(e.event, e.user, e.at) for e in w.record.journal.entries]
    assert [e for e, _, _ in before] == ["warn", "warn", "reclaim", "reclaim"]
    assert JOURNAL_CONFIGMAP in {name for _, name in w.kube.configmaps}
    written = w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)]
    w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)] = "not written since"
    await w.cycle(after=1)  # nothing new in the journal: not written again
    assert w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)] == "not written since"
    w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)] = written

    w.loop = w.new_loop()  # a restart: nothing in memory
    # alice starts a server again, after her reclaim and the restart
    again = pod("alice", uid="uid-alice-again")
    back_at = w.now
    again["metadata"]["creationTimestamp"] = again["status"]["startTime"] = iso(back_at)
    w.kube.pods["jupyter-alice"] = again
    w.hub.servers[("alice", "")] = {"name": "", "ready": True, "started": iso(w.now)}
    w.view.pod_workloads.update(FakeView(w.view.state, [], [again]).pod_workloads)
    await w.cycle(after=5)
    assert [(e.event, e.user, e.at) for e in w.record.journal.entries][:4] == before
    assert w.record.journal.regret(timedelta(hours=1)) == {
        "reclaims": 2,
        "returned_within_window": 1,
        "window_seconds": 3600.0,
    }
    kept = journal_from_text(w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)])
    assert [e.returned_at for e in kept if e.event == "reclaim" and e.user == "alice"] == [back_at]


async def test_no_journal_is_written_while_nothing_happens() -> None:
    w = World()
    w.jobs.clear()  # nothing queued: nobody is warned
    assert await w.cycle() is not None
    assert await w.cycle(after=5) is not None
    assert not w.record.journal.entries
    assert (NS, JOURNAL_CONFIGMAP) not in w.kube.configmaps


async def test_an_unusable_journal_is_replaced_and_an_unreadable_one_not_overwritten() -> None:
    w = World()
    w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)] = '{"version": 1, "entries": [{"event": "x"}]}'
    assert await w.cycle() is not None  # the decisions go on without it
    kept = journal_from_text(w.kube.configmaps[(NS, JOURNAL_CONFIGMAP)])
    assert [e.event for e in kept] == ["warn", "warn"]

    class JournalDown(FakeKube):
        async def read_state(self, namespace: str, name: str) -> str | None:
            if name == JOURNAL_CONFIGMAP:
                raise OSError("configmaps: forbidden")
            return await super().read_state(namespace, name)

    kube = JournalDown(w.pods)
    kube.configmaps = dict(w.kube.configmaps)
    w.kube = kube
    w.loop = w.new_loop()
    assert await w.cycle(after=31) is not None  # unreadable: the decisions go on
    await w.cycle(after=16)  # (a restarted service says "saving" for save_lead first)
    assert len(w.hub.stopped) == 2
    assert [e.event for e in w.record.journal.entries] == ["reclaim", "reclaim"]
    # not overwritten while unread: what the previous run kept is still there
    assert journal_from_text(kube.configmaps[(NS, JOURNAL_CONFIGMAP)]) == kept
    kube.read_state = FakeKube.read_state.__get__(kube)  # type: ignore[method-assign]
    await w.cycle(after=1)  # read now: both runs' events, in order, written
    merged = [e.event for e in journal_from_text(kube.configmaps[(NS, JOURNAL_CONFIGMAP)])]
    assert merged == ["warn", "warn", "reclaim", "reclaim"]


def test_the_journal_text_is_bounded_and_keeps_the_newest() -> None:
    entries = [
        Entry(event="warn", at=T0 + timedelta(seconds=i), user=f"u{i}", reason="x" * 200)
        for i in range(100)
    ]
    text = journal_to_text(entries, max_bytes=4096)
    assert len(text.encode()) <= 4096
    back = journal_from_text(text)
    assert 5 < len(back) < 100
    assert back == entries[-len(back) :]
    full = journal_from_text(journal_to_text(entries))
    assert full == entries
    with pytest.raises(ValueError, match="version 1"):
        journal_from_text('{"entries": []}')
    with pytest.raises(ValueError, match="without its time"):
        journal_from_text('{"version": 1, "entries": [{"event": "warn"}]}')

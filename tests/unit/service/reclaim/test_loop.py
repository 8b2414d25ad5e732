"""The reclaim loop over a small world with in-memory stand-ins for the hub, the pods and the
Kueue caches (tests/support/service_world.py; the real ones are in tests/real_hub): warnings,
reclaims and hand-offs, a hub or API server that cannot be read, dry runs, and a snooze or a
busy report that arrives while a cycle acts."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import FrozenInstanceError, replace
from datetime import timedelta
from typing import Any

import pytest

from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.decide import Action
from gpuaas_service.reclaim.handoffs import (
    HANDOFFS_CONFIGMAP,
)
from gpuaas_service.reclaim.idleness import State
from gpuaas_service.reclaim.loop import Settings, team_display_names
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import (
    read_local_queue,
)
from jupyter_gpuaas.core.labels import (
    RECLAIM_DEADLINE,
    RECLAIM_REASON,
    RECLAIMED_AT,
    RECLAIMED_FOR,
    RECLAIMED_FOR_TEAM,
    SNOOZES_USED,
    TEAM_LABEL,
    WARNED_AT,
)
from tests.support.api_schema import schema_errors
from tests.support.jobs_samples import jobs_catalog, jobs_catalog_data
from tests.support.service_samples import NS
from tests.support.service_world import (
    POLICY,
    T0,
    FakeHub,
    FakeKube,
    World,
    busy,
    cause_of,
    idle,
    job_workload,
    reclaimed_for_the_job,
    warning_of,
)

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
    warning = warning_of(w.loop, "alice")
    assert warning["seconds_left"] == 30
    assert warning["snoozes_left"] == 1
    assert w.loop.warning_for("alice", "busy")["warning"] is None

    plan = await w.cycle(after=10)
    assert {d.workbench.key for d in plan.with_action(Action.WAIT)} == {"alice", "bob"}
    assert not w.hub.stopped
    assert len(w.kube.events) == 2
    assert warning_of(w.loop, "bob")["saving"] is False
    w.now += timedelta(seconds=6)
    assert warning_of(w.loop, "bob")["saving"] is True  # 15 s before: save

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
    assert 'gpuaas_reclaimed_gpu_equivalents_total{team="team-a"} 0.2857' in text
    assert "gpuaas_handoff_latency_seconds_count 1.0" in text
    assert 'gpuaas_handoffs_total{result="succeeded"} 1.0' in text
    assert 'gpuaas_idle_gpu_hours_total{team="team-a"}' in text
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
    assert 'gpuaas_reclaim_cycle_errors_total{source="kubernetes"} 3.0' in text


async def test_unsynced_kueue_caches_act_on_nothing() -> None:
    w = World()
    w.view.state = QueueState(synced=False)
    assert await w.cycle() is None
    assert w.hub.calls == 0
    assert not w.kube.patches


async def test_a_busy_kernel_clears_the_warning() -> None:
    w = World()
    await w.cycle()
    warning = w.loop.warning_for("alice", "")["warning"]
    assert warning is not None
    w.now += timedelta(seconds=5)
    w.store.record("alice", "", busy(T0), w.now)
    w.store.record("bob", "", idle(T0), w.now)
    w.store.record("alice", "busy", busy(T0), w.now)
    plan = await w.loop.cycle()
    assert plan is not None
    assert {d.workbench.key: d.action for d in plan.decisions}["alice"] is Action.CLEAR_WARNING
    assert WARNED_AT not in w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    answer = w.loop.warning_for("alice", "")
    assert answer["warning"] is None
    # which warning was withdrawn, so that her tab says it is over even near its deadline
    # (without it, a warning gone then reads as the stop beginning)
    assert answer.get("withdrawn") == {
        "warned_at": warning["warned_at"],
        "withdrawn_at": isoformat_z(w.now),
    }
    assert schema_errors("service_reclaim", answer) == []
    # ...for 10 minutes, and never for a server that was not warned
    assert "withdrawn" not in w.loop.warning_for("alice", "", w.now + timedelta(minutes=10))
    assert "withdrawn" not in w.loop.warning_for("alice", "busy")
    # the console's journal says the warning is off, and why (only its warning showed)
    # (bob's too: his batch cannot be covered without alice)
    events = [(e.event, e.user) for e in w.record.journal.entries]
    assert events == [
        ("warn", "alice"),
        ("warn", "bob"),
        ("withdraw", "alice"),
        ("withdraw", "bob"),
    ]
    assert all(
        e.reason.startswith("warning withdrawn: ") for e in list(w.record.journal.entries)[2:]
    )


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
    assert w.loop.state.last_error == "kubernetes: reading the hand-off records"
    assert len(w.kube.patches) == 2
    assert not w.hub.stopped
    w.kube.configmaps_down = False
    await w.cycle(after=1)  # read now; but a restarted service first tells them "saving"
    assert not w.hub.stopped
    assert warning_of(w.loop, "alice")["saving"] is True
    await w.cycle(after=16)  # save_lead later: alice and bob are stopped for the Job
    assert len(w.hub.stopped) == 2
    assert '"workload": "team-a/train"' in w.kube.configmaps[(NS, HANDOFFS_CONFIGMAP)]


async def test_a_handoff_whose_workload_is_gone_blocks_nothing() -> None:
    w = await reclaimed_for_the_job()
    assert w.loop.state.handoffs
    w.jobs.clear()  # the Job was deleted before it was seen admitted
    await w.cycle(after=1)
    assert not w.loop.state.handoffs


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


async def test_a_mig_pod_busy_by_prometheus_is_not_idle_and_no_answer_acts_on_nothing() -> None:
    from gpuaas_service.clients.prometheus import PrometheusError

    w = World()
    answers: list[Any] = [{(NS, "jupyter-bob"): 80.0}]

    async def utilization() -> Mapping[tuple[str, str], float]:
        answer = answers[-1]
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    w.loop.feeds = replace(w.loop.feeds, utilization=utilization)
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


# ------------------------------------------------- a press or a report while a cycle acts


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
    # alice's stop is under way (her reclaim mark, set before the stop, waits); bob, decided
    # in the same cycle, presses "Keep my GPU" now: his server is not stopped.
    w = World()
    await w.cycle()  # alice and bob warned
    w.kube = GatedKube(list(w.kube.pods.values()), "jupyter-alice")
    w.loop.kube = w.kube
    w.now += timedelta(seconds=31)
    w.report()
    cycle = asyncio.ensure_future(w.loop.cycle())
    await asyncio.wait_for(w.kube.entered.wait(), 5)  # alice stopping; bob decided, not yet
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
    assert w.loop._seen["bob"].workbench.snoozed_until is not None


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
    assert "alice" in w.loop._stopping
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
    # The deadline and reason are on the pod; a restarted service shows them and
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
    warning = warning_of(w.loop, "alice")
    assert warning["reason"] == ann[RECLAIM_REASON]
    assert warning["reclaim_at"] == ann[RECLAIM_DEADLINE]
    w.loop = w.new_loop()  # restarted again, past the deadline this time
    for key in ("alice", "bob"):
        w.store.set_notice(key, None)
    await w.cycle(after=60)
    assert not w.hub.stopped
    assert warning_of(w.loop, "alice")["saving"] is True
    await w.cycle(after=10)
    assert not w.hub.stopped  # only 10 of save_lead's 15 s
    await w.cycle(after=6)
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]


def _team_b_job(w: World) -> None:
    """Team A's workbenches are wanted by team B's Job (in team B's namespace)."""
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


async def test_a_warning_names_queued_work_of_another_team_by_its_display_name_only() -> None:
    # Team A's workbenches warned for team B's Job: "queued work of Team B",
    # the catalog's display name, never the Job's name nor the team's slug.
    w = World()
    _team_b_job(w)
    w.loop = w.new_loop()
    w.loop.settings = replace(
        w.loop.settings, team_names=team_display_names(jobs_catalog().tenants.values())
    )
    plan = await w.cycle()
    assert plan is not None
    (warned, *_) = plan.with_action(Action.WARN)
    assert "team-b/train" in warned.reason  # the audit names it
    warning = warning_of(w.loop, warned.workbench.user)
    told = warning["reason"]
    assert told.startswith("queued work of Team B needs what it holds")
    assert "train" not in told
    assert "team-b" not in told
    assert cause_of(warning)["for"] == {"team": "other", "name": "Team B"}
    ann = w.kube.pods[f"jupyter-{warned.workbench.user}"]["metadata"]["annotations"]
    assert "train" not in ann[RECLAIM_REASON]
    assert "team-b" not in ann[RECLAIM_REASON]


async def test_another_team_without_a_display_name_is_another_team_not_its_slug() -> None:
    # A service without the catalog knows no display names: the words never fall back to the
    # slug (the sidebar says "Queued work of another team").
    w = World()
    _team_b_job(w)
    w.loop = w.new_loop()
    plan = await w.cycle()
    assert plan is not None
    (warned, *_) = plan.with_action(Action.WARN)
    warning = warning_of(w.loop, warned.workbench.user)
    assert warning["reason"].startswith("queued work of another team needs what it holds")
    assert "team-b" not in warning["reason"]
    assert cause_of(warning)["for"] == {"team": "other", "name": ""}


def test_team_display_names_by_every_name_a_teams_work_goes_by() -> None:
    data = jobs_catalog_data()
    data["tenants"][1]["local_queue"] = "b-servers"
    names = team_display_names(build_catalog([CatalogSource("", data)]).tenants.values())
    # the servers' team label, the notebook LocalQueue, the Jobs' namespace
    assert names == {
        "team-a": "Team A",
        "team-b": "Team B",
        "b-servers": "Team B",
    }
    # a team's name is its own; a Jobs namespace two other teams share names neither
    data["tenants"][1]["jobs"]["namespace"] = "team-a"  # team A's name: still team A
    data["tenants"][0]["jobs"]["namespace"] = "training"
    data["tenants"][1]["local_queue"] = "training"
    names = team_display_names(build_catalog([CatalogSource("", data)]).tenants.values())
    assert names == {"team-a": "Team A", "team-b": "Team B"}


async def test_no_policy_in_force_acts_on_nothing() -> None:
    w = World()
    w.loop.set_policies(load_policy({**POLICY}).__class__(policies=()))
    assert await w.cycle() is None
    assert not w.kube.patches
    assert not w.hub.stopped


class MarkReadingHub(FakeHub):
    """A hub that reads, as the spawner's stop does, the pod it is asked to stop; ``refuse``:
    the stop fails."""

    def __init__(self, servers: list[tuple[str, str]], kube: FakeKube, refuse: bool) -> None:
        super().__init__(servers)
        self.kube, self.refuse = kube, refuse
        self.seen: dict[str, Mapping[str, Any]] = {}

    async def stop_server(self, user: str, server: str) -> int:
        pod = self.kube.pods[f"jupyter-{user}"]
        self.seen[user] = dict(pod["metadata"]["annotations"])
        if self.refuse:
            raise OSError("hub unreachable")
        return await super().stop_server(user, server)


@pytest.mark.parametrize("refuse", [False, True])
async def test_the_pod_is_marked_reclaimed_before_the_hub_stops_it(refuse: bool) -> None:
    w = World()
    await w.cycle()  # alice and bob warned
    w.hub = MarkReadingHub(list(w.hub.servers), w.kube, refuse)
    w.loop.hub = w.hub
    await w.cycle(after=31)
    assert sorted(w.hub.seen) == ["alice", "bob"]
    for user, seen in w.hub.seen.items():
        assert seen[RECLAIMED_AT] == isoformat_z(w.now), user
        assert seen[RECLAIMED_FOR] == "team-a/train", user
        assert seen[RECLAIMED_FOR_TEAM] == "team-a", user
    kept = {u: w.kube.pods[f"jupyter-{u}"]["metadata"]["annotations"] for u in ("alice", "bob")}
    if refuse:  # a stop that failed takes the mark off: the pod is not taken for stopping
        marks = {RECLAIMED_AT, RECLAIMED_FOR, RECLAIMED_FOR_TEAM}
        assert all(not marks & a.keys() for a in kept.values())
    else:
        assert all(RECLAIMED_AT in a for a in kept.values())


async def test_a_reclaim_for_another_teams_work_is_journaled_as_lent() -> None:
    policy = json.loads(json.dumps(POLICY))
    policy["policies"][0]["match"] = {"kinds": ["mig"]}  # team B's servers too
    w = World(policy)
    w.kube.pods["jupyter-bob"]["metadata"]["labels"][TEAM_LABEL] = "team-b"
    await w.cycle()
    await w.cycle(after=10)
    w.now += timedelta(seconds=6)
    await w.cycle(after=15)
    assert sorted(w.hub.stopped) == [("alice", ""), ("bob", "")]
    entries = w.record.journal.recent(timedelta(days=1))
    lent = [e for e in entries if e["event"] == "lent"]
    # bob's (team B's) quota went to team A's Job; alice's reclaim is her own team's business.
    assert [(e["user"], e["team"], e["workload"]) for e in lent] == [
        ("bob", "team-b", "team-a/train")
    ]
    assert "queued work of team-a" in lent[0]["reason"]
    assert {e["user"] for e in entries if e["event"] == "reclaim"} == {"alice", "bob"}


class _FailingListener:
    """A listener whose view of each cycle fails (the console's MIG advice did)."""

    def __init__(self) -> None:
        self.calls = 0

    async def cycle_completed(self, result: Any) -> None:
        self.calls += 1
        raise ValueError("invalid literal for int() with base 10: 'foo'")

    def happened(self, event: Any) -> None:
        pass


class _CountingListener:
    def __init__(self) -> None:
        self.cycles = 0

    async def cycle_completed(self, result: Any) -> None:
        self.cycles += 1

    def happened(self, event: Any) -> None:
        pass


async def test_a_listeners_failure_never_counts_as_a_failed_cycle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Fourth audit, finding 3: the cycle was decided and acted on; the interval stays."""
    w = World()
    failing, counting = _FailingListener(), _CountingListener()
    w.loop.listeners[:0] = [failing, counting]
    for after in (0, 5):
        await w.cycle(after=after)  # raised before the fix (and run() counted a failure)
    assert failing.calls == 2
    assert counting.cycles == 2  # the listeners after it still hear of each cycle
    assert w.loop.state.failures == 0
    assert w.loop.next_delay() == w.loop.settings.interval
    assert w.loop.state.last_error == ""
    assert any("_FailingListener failed" in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- its readers


class _StateReader:
    """A listener that reads the loop's state as the console does, while the cycle tells it."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.read: list[tuple[Any, Any]] = []

    async def cycle_completed(self, result: Any) -> None:
        self.read.append((result, self.loop.state))

    def happened(self, event: Any) -> None:
        pass


async def test_readers_get_one_snapshot_that_each_cycle_replaces_whole() -> None:
    """The web handlers, the console and the app read :attr:`ReclaimLoop.state`: a frozen
    snapshot of one moment, never changed in place, so a reader never holds half a cycle."""
    w = World()
    reader = _StateReader(w.loop)
    w.loop.listeners.append(reader)
    before = w.loop.state
    assert before.policies is w.policy
    assert (before.last_plan, before.last_inputs, before.last_completed) == (None, None, None)

    plan = await w.cycle()
    assert plan is not None
    after = w.loop.state
    assert after is not before
    assert (before.last_plan, before.last_inputs, before.last_completed) == (None, None, None)
    assert after.last_completed == plan.now
    assert after.last_plan is plan
    assert after.last_inputs is not None
    ((result, seen),) = reader.read  # a listener sees the plan and the inputs of its own cycle
    assert seen is after
    assert (result.plan, result.inputs) == (after.last_plan, after.last_inputs)
    with pytest.raises(FrozenInstanceError):
        after.last_plan = None

    w.kube.down = True  # a failed cycle: a new snapshot counts it; the last complete one stays
    assert await w.cycle(after=1) is None
    failed = w.loop.state
    assert (failed.failures, after.failures) == (1, 0)
    assert failed.last_error.startswith("kubernetes: ")
    assert failed.last_plan is plan
    assert after.last_error == ""


async def test_the_handoff_records_readers_see_are_a_copy_the_loop_never_changes() -> None:
    w = World()
    await w.cycle()
    assert w.loop.state.handoffs == {}
    await w.cycle(after=31)  # alice and bob stopped for the Job: one record for its queue
    kept = w.loop.state.handoffs
    (record,) = kept.values()
    assert record.workload == "team-a/train"
    with pytest.raises(TypeError):
        kept["another-queue"] = record  # type: ignore[index]
    w.jobs.clear()  # the Job deleted before it was admitted: the loop forgets the record
    await w.cycle(after=1)
    assert w.loop.state.handoffs == {}
    assert list(kept.values()) == [record]  # what a reader held stays as it was


# ------------------------------------------------------------------ stopping the service


class EventGatedKube(FakeKube):
    """Events wait for ``release``: a warning is on the pod, its Event not yet written."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        super().__init__(pods)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def event(self, pod: PodRef, reason: str, message: str, type_: str, *, at: Any) -> None:
        self.entered.set()
        await self.release.wait()
        await super().event(pod, reason, message, type_, at=at)


def _running(w: World) -> asyncio.Event:
    """Start ``w.loop`` as the service does; its pauses between cycles last until a stop
    (returned: set when the first pause begins)."""
    pausing = asyncio.Event()

    async def pause(_seconds: float) -> None:
        pausing.set()
        await asyncio.Event().wait()

    w.loop.sleep = pause
    w.loop.task = asyncio.ensure_future(w.loop.run())
    return pausing


async def _paused_mid_warning() -> tuple[World, EventGatedKube]:
    """A running loop whose first warning is on its pod and waits to write its Event."""
    w = World()
    kube = EventGatedKube(list(w.kube.pods.values()))
    w.kube = w.loop.kube = kube
    w.report()
    _running(w)
    await asyncio.wait_for(kube.entered.wait(), 5)
    return w, kube


async def test_a_stop_mid_warning_lets_the_warning_be_given_whole_then_ends_the_loop() -> None:
    # SIGTERM between a warning's annotation and its Event: the Event still goes out.
    w, kube = await _paused_mid_warning()
    stopping = asyncio.ensure_future(w.loop.stop(grace=5))
    await asyncio.sleep(0)
    assert not stopping.done()  # waiting for the cycle under way
    kube.release.set()
    assert await asyncio.wait_for(stopping, 5) is True
    assert sorted(e[:2] for e in kube.events) == [
        ("jupyter-alice", "GPUReclaimWarning"),
        ("jupyter-bob", "GPUReclaimWarning"),
    ]
    assert w.loop.task is not None
    assert w.loop.task.done()
    assert not w.loop.task.cancelled()


async def test_a_stop_between_cycles_ends_the_pause_at_once() -> None:
    w = World()
    w.report()
    pausing = _running(w)
    await asyncio.wait_for(pausing.wait(), 5)
    assert await asyncio.wait_for(w.loop.stop(grace=5), 1) is True
    assert w.loop.task is not None
    assert w.loop.task.done()


class HangingHub(FakeHub):
    """The hub takes alice's stop and never answers (a hub busy stopping, a dropped answer)."""

    def __init__(self, servers: list[tuple[str, str]]) -> None:
        super().__init__(servers)
        self.entered = asyncio.Event()

    async def stop_server(self, user: str, server: str) -> int:
        self.entered.set()
        await asyncio.Event().wait()
        return 202


async def test_a_stop_cut_short_by_the_services_stop_leaves_no_marks_on_the_running_pod() -> None:
    # Fifth audit, finding 6: the grace's cancel passed `except Exception` between the pod's reclaim
    # marks and the hub's answer: the pod, still running, stayed marked (counted as stopping).
    w = World()
    await w.cycle()  # alice and bob warned
    w.hub = w.loop.hub = HangingHub(list(w.hub.servers))
    w.now += timedelta(seconds=31)
    w.report()

    async def the_cycle() -> None:  # as run() would run it
        await w.loop.cycle()

    w.loop.task = asyncio.ensure_future(the_cycle())
    await asyncio.wait_for(w.hub.entered.wait(), 5)
    alice = w.kube.pods["jupyter-alice"]["metadata"]["annotations"]
    assert RECLAIMED_AT in alice  # marked, the hub asked, no answer yet
    finished = await w.loop.stop(grace=0.01)
    cleaned_up_first = w.loop.task.done()
    await asyncio.wait({w.loop.task}, timeout=1)
    marks = {RECLAIMED_AT, RECLAIMED_FOR, RECLAIMED_FOR_TEAM}
    assert not marks & alice.keys()
    assert w.loop.stop_under_way("alice", "") == ""
    assert finished is False
    assert cleaned_up_first  # the clean-up ran before stop() returned (the process ends next)


async def test_a_cycle_that_outlasts_the_grace_is_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w, _ = await _paused_mid_warning()
    assert await w.loop.stop(grace=0.01) is False
    await asyncio.sleep(0)
    assert w.loop.task is not None
    assert w.loop.task.cancelled()
    assert "did not end within" in caplog.text

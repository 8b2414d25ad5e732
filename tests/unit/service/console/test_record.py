"""The console's record as a listener of the loop: its journal kept across restarts in a
ConfigMap, read before it is written, never in the way of a cycle."""

from __future__ import annotations

from datetime import timedelta

from gpuaas_service.console.journal import (
    JOURNAL_CONFIGMAP,
    journal_from_text,
)
from tests.support.service_samples import NS, iso
from tests.support.service_world import (
    FakeKube,
    FakeView,
    World,
    pod,
    reclaimed_for_the_job,
)


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

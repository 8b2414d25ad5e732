"""Session peaks recorded for the size advice (gpuaas_service.reclaim.usage)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from gpuaas_service.clients.persisted import PersistedState
from gpuaas_service.reclaim.decide import Action, Decision, Plan, Workbench
from gpuaas_service.reclaim.events import CycleInputs, CycleResult
from gpuaas_service.reclaim.idleness import ActivityReport, Idleness, State
from gpuaas_service.reclaim.usage import UsageRecorder
from jupyter_gpuaas.core.activity import Activity
from jupyter_gpuaas.core.sizing import HISTORY_CONFIGMAP, PeakHistory, history_json, parse_history

T0 = datetime(2026, 12, 3, 9, tzinfo=timezone.utc)
GIB = 1 << 30


class Store:
    """The ConfigMap texts, as the Kubernetes client reads and writes them."""

    def __init__(self, text: str | None = None, readable: bool = True) -> None:
        self.texts = {HISTORY_CONFIGMAP: text} if text is not None else {}
        self.readable = readable
        self.writes = 0

    async def read_state(self, namespace: str, name: str) -> str | None:
        if not self.readable:
            raise OSError("the API server is not answering")
        return self.texts.get(name)

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        self.writes += 1
        self.texts[name] = text


def workbench(user: str, started: datetime = T0) -> Workbench:
    idle = Idleness(State.IDLE, last_active=started, reason="idle")
    return Workbench(user=user, started_at=started, idleness=idle)


def cycle(now: datetime, held: dict[str, int | None], started: datetime = T0) -> CycleResult:
    """A cycle that confirmed a workbench of each user in ``held``, whose report says its
    kernels hold that much GPU memory (absent: no report at all)."""
    decisions = tuple(
        Decision(workbench=workbench(user, started), action=Action.SKIP, code="busy", reason="busy")
        for user in held
    )
    reports = {
        user: ActivityReport(received_at=now, activity=Activity(gpu_memory=size))
        for user, size in held.items()
        if size != -1
    }
    inputs = CycleInputs(
        pending=(), handoffs=(), reports=reports, pod_utilization={}, dry_run=False
    )
    return CycleResult(now=now, plan=Plan(now=now, decisions=decisions), inputs=inputs)


def recorder(store: Store) -> UsageRecorder:
    return UsageRecorder(
        PersistedState(store, "jupyter-users", HISTORY_CONFIGMAP, owner="culler", what="usage")
    )


def kept(store: Store) -> PeakHistory:
    history, problems = parse_history(store.texts[HISTORY_CONFIGMAP])
    assert problems == []
    return history


async def test_a_session_is_recorded_with_its_peak_when_it_ends() -> None:
    store = Store()
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": 2 * GIB, "bob": None}))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=1), {"alice": 6 * GIB, "bob": GIB}))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=2), {"alice": 3 * GIB, "bob": 0}))
    assert store.writes == 0  # nothing ended yet
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=3), {"bob": 0}))
    assert kept(store).peaks == {"alice": (6 * 1024,)}
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=4), {}))
    assert kept(store).peaks == {"bob": (1024,), "alice": (6 * 1024,)}


async def test_a_restarted_server_is_a_new_session() -> None:
    store = Store()
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": 5 * GIB}))
    later = T0 + timedelta(hours=1)
    await rec.cycle_completed(cycle(later, {"alice": GIB}, started=later))
    assert kept(store).of("alice") == (5 * 1024,)


async def test_one_run_whose_start_moves_is_one_session() -> None:
    """The form said "Your last 3 sessions" after one. The start a cycle sees moves
    within one run: the pod's, then the hub's spawn time (earlier) while alice is warned, then
    the pod's again; a start a few seconds off (clocks) is the same run too."""
    store = Store()
    rec = recorder(store)
    pod_start, hub_start = T0, T0 - timedelta(seconds=4)
    starts = [pod_start, hub_start, pod_start, hub_start, pod_start + timedelta(seconds=20)]
    for i, started in enumerate(starts):
        held: dict[str, int | None] = {"alice": (i + 1) * GIB}
        await rec.cycle_completed(cycle(T0 + timedelta(minutes=i), held, started=started))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=9), {}))
    assert kept(store).of("alice") == (5 * 1024,)


async def test_a_session_measured_never_is_not_recorded() -> None:
    store = Store()
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": -1, "bob": None}))  # no report; unknown size
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=1), {}))
    assert store.writes == 0


async def test_what_an_earlier_run_kept_is_read_before_anything_is_written() -> None:
    earlier = history_json(PeakHistory({"carol": (2048,)}))
    store = Store(earlier, readable=False)
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": GIB}))  # cannot read: records nothing yet
    store.readable = True
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=1), {"alice": GIB}))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=2), {}))
    assert kept(store).peaks == {"alice": (1024,), "carol": (2048,)}


async def test_a_damaged_history_keeps_its_usable_part() -> None:
    store = Store('{"version": 1, "peaks_mib": {"carol": [2048], "mallory": "lots"}}')
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": GIB}))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=1), {}))
    assert kept(store).peaks == {"alice": (1024,), "carol": (2048,)}


async def test_the_open_sessions_peak_so_far_is_read_for_the_way_down() -> None:
    rec = recorder(Store())
    await rec.cycle_completed(cycle(T0, {"alice": 2 * GIB, "bob": None, "carol": -1}))
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=10), {"alice": 3 * GIB, "bob": None}))
    now = T0 + timedelta(minutes=45)
    assert rec.session_peak("alice", "", now) == (3 * GIB, 45 * 60.0)
    assert rec.session_peak("bob", "", now) is None  # some memory of unknown size: no peak
    assert rec.session_peak("carol", "", now) is None  # no report: not measured
    assert rec.session_peak("alice", "other", now) is None  # another server of hers
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=50), {}))
    assert rec.session_peak("alice", "", now) is None  # ended


async def test_a_move_records_the_peak_it_was_made_for() -> None:
    """After a way up at the 5.5 GiB cap, sizing showed "no session ended
    yet": the kernel reached the cap between two cycles' samples, and the move ended the
    session before the next. The move records the peak of the server's last report."""
    store = Store()
    rec = recorder(store)
    await rec.cycle_completed(cycle(T0, {"alice": 0}))  # sampled before the kernel grew
    rec.peak_at_move("alice", "", 5 * GIB + GIB // 5)
    await rec.cycle_completed(cycle(T0 + timedelta(minutes=1), {}))  # the server is moving
    assert kept(store).of("alice") == (5 * 1024 + 205,)


async def test_a_move_no_cycle_saw_is_recorded_at_the_next_cycle() -> None:
    store = Store()
    rec = recorder(store)
    rec.peak_at_move("alice", "", 3 * GIB)  # started and moved within one cycle
    await rec.cycle_completed(cycle(T0, {}))
    assert kept(store).of("alice") == (3 * 1024,)


async def test_the_move_reads_the_peak_from_the_servers_last_report() -> None:
    from gpuaas_service.reclaim.activity_store import ActivityStore
    from gpuaas_service.reclaim.usage import move_recorder

    rec = recorder(Store())
    reports = ActivityStore()
    record = move_recorder(rec, reports)
    record("alice", "")  # no report: nothing known, nothing recorded
    assert rec.session_peak("alice", "", T0) is None
    await rec.cycle_completed(cycle(T0, {"alice": GIB}))
    reports.record("alice", "", {"gpu_memory": 4 * GIB}, T0 + timedelta(seconds=30))
    record("alice", "")
    assert rec.session_peak("alice", "", T0 + timedelta(minutes=1)) == (4 * GIB, 60.0)

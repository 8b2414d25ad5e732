"""Spawn phases from pod + Workload + visibility data, and the spawner's own deadlines."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest

from gpuaas_spawner.hubcompat import SpawnException
from gpuaas_spawner.progress import (
    EXITED_HINT,
    NoticePart,
    Phase,
    SpawnStatus,
    check_deadline,
    exit_details,
    home_volume_failure,
    notice_parts,
    reclaim_notice,
    spawn_status,
)
from jupyter_gpuaas.core.kueue import (
    pending_item_for_workload,
    read_pending_workloads,
    read_workload,
    workload_for_pod,
)
from jupyter_gpuaas.core.labels import RECLAIM_OUTLOOK
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.clock import FakeClock, until
from tests.support.samples import (
    GPU,
    NAMESPACE,
    FakeUser,
    install_pod_reflector,
    local_queue,
    make_spawner,
    team_a_notebooks,
)

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
POD_UID = "4f9d-pod-uid"


def pod(
    *,
    gated: bool = False,
    phase: str = "Pending",
    conditions: list[dict[str, Any]] | None = None,
    node: str | None = None,
    containers: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "jupyter-alice",
        "namespace": "gpuaas-users",
        "uid": POD_UID,
        "finalizers": ["kueue.x-k8s.io/managed"],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T10:05:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "notebook"}]}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    if node:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if node:
        status["nodeName"] = node
    if containers is not None:
        status["containerStatuses"] = containers
    return {"metadata": meta, "spec": spec, "status": status}


def workload(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "pod-jupyter-alice-3a1f2",
            "namespace": "gpuaas-users",
            "uid": "wl-uid",
            "labels": {"kueue.x-k8s.io/job-uid": POD_UID},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "jupyter-alice",
                    "uid": POD_UID,
                    "controller": True,
                }
            ],
            "creationTimestamp": "2026-11-30T10:00:01Z",
        },
        "spec": {
            "queueName": "team-a",
            "priority": 1000,
            "priorityClassRef": {"name": "interactive"},
            "podSets": [],
        },
        "status": {
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastTransitionTime": "2026-11-30T10:00:02Z",
                }
                for t, s, r, m in conditions
            ],
        },
    }


PENDING_MSG = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in "
    "flavor h100, 1 more needed"
)
QUEUED_WL = workload(("QuotaReserved", "False", "Pending", PENDING_MSG))
RESERVED_WL = workload(
    ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-notebooks")
)
ADMITTED_WL = workload(
    ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team-a-notebooks"),
    ("Admitted", "True", "Admitted", "The workload is admitted"),
)
PREEMPTED_WL = workload(
    (
        "Evicted",
        "True",
        "Preempted",
        "Preempted to accommodate a workload (UID: x) due to reclamation within the cohort",
    ),
    (
        "Preempted",
        "True",
        "InCohortReclamation",
        "Preempted to accommodate a workload (UID: x) due to reclamation within the cohort",
    ),
)
VISIBILITY = {
    "kind": "PendingWorkloadsSummary",
    "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "items": [
        {
            "metadata": {"name": "pod-jupyter-bob-1", "namespace": "gpuaas-users"},
            "priority": 1000,
            "localQueueName": "team-a",
            "positionInClusterQueue": 0,
            "positionInLocalQueue": 0,
        },
        {
            "metadata": {
                "name": "pod-jupyter-alice-3a1f2",
                "namespace": "gpuaas-users",
                "ownerReferences": [{"kind": "Pod", "name": "jupyter-alice", "uid": POD_UID}],
            },
            "priority": 1000,
            "localQueueName": "team-a",
            "positionInClusterQueue": 4,
            "positionInLocalQueue": 2,
        },
    ],
}
ITEMS = read_pending_workloads(VISIBILITY)
MINE = pending_item_for_workload(ITEMS, workload_name="pod-jupyter-alice-3a1f2")
ready = {"type": "PodScheduled", "status": "True"}


def on_node(notebook: dict[str, Any], phase: str = "Pending") -> dict[str, Any]:
    """A pod placed on gpu-1 whose one container's status is ``notebook``."""
    container = {"name": "notebook"} | notebook
    return pod(phase=phase, conditions=[ready], node="gpu-1", containers=[container])


def test_readers() -> None:
    wl = read_workload(QUEUED_WL)
    assert (wl.queue_name, wl.priority, wl.priority_class, wl.owner_kind, wl.owner_uid) == (
        "team-a",
        1000,
        "interactive",
        "Pod",
        POD_UID,
    )
    assert (wl.quota_reserved, wl.admitted, wl.inadmissible, wl.pending_message) == (
        False,
        False,
        False,
        PENDING_MSG,
    )
    assert wl.created == datetime(2026, 11, 30, 10, 0, 1, tzinfo=timezone.utc)
    assert read_workload(PREEMPTED_WL).preempted is not None
    other = read_workload(
        {"metadata": {"name": "x", "ownerReferences": [{"kind": "Pod", "uid": "other"}]}}
    )
    assert workload_for_pod([other, wl], pod_uid=POD_UID) is wl
    assert workload_for_pod([other], pod_uid=POD_UID) is None
    assert MINE is not None
    assert (MINE.position_in_local_queue, MINE.owner_uid) == (2, POD_UID)
    assert pending_item_for_workload(ITEMS, pod_uid=POD_UID) == MINE
    assert pending_item_for_workload(ITEMS, workload_name="nope") is None


CASES: list[tuple[str, dict[str, Any], SpawnStatus]] = [
    (
        "not created yet",
        {"pod": None},
        SpawnStatus(Phase.SUBMITTING, "Submitting your server to the queue"),
    ),
    (
        "gated, no workload yet",
        {"pod": pod(gated=True)},
        SpawnStatus(Phase.QUEUED, "Queued in team-a: waiting for the queue to take it in"),
    ),
    (
        "gated with position",
        {"pod": pod(gated=True), "workload": read_workload(QUEUED_WL), "pending": MINE},
        SpawnStatus(
            Phase.QUEUED,
            "Queued in team-a: position 3 (4 ahead in the cluster queue)",
            position=3,
            ahead_in_cluster_queue=4,
        ),
    ),
    (
        "gated, visibility not answered",
        {"pod": pod(gated=True), "workload": read_workload(QUEUED_WL)},
        SpawnStatus(Phase.QUEUED, "Queued in team-a: waiting for a GPU to free up"),
    ),
    (
        "quota reserved, checks pending",
        {"pod": pod(gated=True), "workload": read_workload(RESERVED_WL)},
        SpawnStatus(
            Phase.QUOTA_RESERVED,
            "Admitted in team-a: quota reserved, waiting for the last checks",
        ),
    ),
    (
        "admitted, scheduler says no node",
        {
            "pod": pod(
                conditions=[
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
                    }
                ]
            ),
            "workload": read_workload(ADMITTED_WL),
            "offering": "NVIDIA H100",
        },
        SpawnStatus(
            Phase.WAITING_FOR_NODE,
            "Admitted in team-a (quota reserved); waiting for a free node for NVIDIA H100",
        ),
    ),
    (
        "admitted, not looked at yet",
        {"pod": pod()},
        SpawnStatus(
            Phase.WAITING_FOR_NODE, "Admitted in team-a (quota reserved); waiting for a free node"
        ),
    ),
    (
        "scheduled, pulling (event)",
        {
            "pod": on_node({"ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}),
            "events": [
                {
                    "reason": "Scheduled",
                    "message": "assigned",
                    "lastTimestamp": "2026-11-30T10:01:00Z",
                },
                {
                    "reason": "Pulling",
                    "message": 'Pulling image "quay.io/jupyter/pytorch-notebook"',
                    "lastTimestamp": "2026-11-30T10:01:01Z",
                },
            ],
        },
        SpawnStatus(Phase.PULLING, "Pulling the image"),
    ),
    (
        "scheduled, pulled (event)",
        {
            "pod": pod(conditions=[ready], node="gpu-1"),
            "events": [
                {"reason": "Pulled", "lastTimestamp": "2026-11-30T10:02:00Z"},
                {"reason": "Pulling", "lastTimestamp": "2026-11-30T10:01:01Z"},
            ],
        },
        SpawnStatus(Phase.STARTING, "Starting the container"),
    ),
    (
        "scheduled, no events",
        {"pod": pod(conditions=[ready], node="gpu-1")},
        SpawnStatus(Phase.PULLING, "Node found; pulling the image and creating the container"),
    ),
    (
        "image pull failing",
        {
            "pod": on_node(
                {
                    "ready": False,
                    "state": {
                        "waiting": {
                            "reason": "ImagePullBackOff",
                            "message": "Back-off pulling image",
                        }
                    },
                }
            )
        },
        SpawnStatus(
            Phase.PULLING,
            "The server's image cannot be downloaded yet; retrying. If this lasts, tell an admin.",
        ),
    ),
    (
        "token secret not there yet",
        {
            "pod": on_node(
                {
                    "ready": False,
                    "state": {
                        "waiting": {
                            "reason": "CreateContainerConfigError",
                            "message": 'secret "jupyter-alice-hub-token" not found',
                        }
                    },
                }
            )
        },
        SpawnStatus(Phase.STARTING, "The container cannot be created yet; retrying."),
    ),
    (
        "running, not ready",
        {"pod": on_node({"ready": False, "state": {"running": {}}}, phase="Running")},
        SpawnStatus(Phase.STARTING, "Starting Jupyter"),
    ),
    (
        "ready",
        {"pod": on_node({"ready": True, "state": {"running": {}}}, phase="Running")},
        SpawnStatus(Phase.READY, "Your server is ready"),
    ),
    (
        "exited",
        {
            "pod": pod(phase="Failed", node="gpu-1")
            | {"status": {"phase": "Failed", "reason": "OOMKilled"}}
        },
        SpawnStatus(Phase.FAILED, f"Your server stopped before it was ready. {EXITED_HINT}"),
    ),
    (
        "refused by the node's device admission (a kubelet's UnexpectedAdmissionError)",
        {
            "pod": pod(phase="Failed", node="local-0")
            | {
                "status": {
                    "phase": "Failed",
                    "reason": "UnexpectedAdmissionError",
                    "message": "nvidia.com/mig-1g.5gb: 1 requested, 0 free",
                }
            }
        },
        SpawnStatus(
            Phase.FAILED,
            "The node could not run your server: the GPU it was given was not free on the node. "
            "This is the cluster's doing, not a setting of yours, and nothing of yours was lost. "
            "Start it again; if it happens again, tell an admin.",
            failure_reason="node_refused",
        ),
    ),
    (
        "refused by the node's resource admission (OutOf<resource>)",
        {
            "pod": pod(phase="Failed", node="gpu-1")
            | {"status": {"phase": "Failed", "reason": "OutOfnvidia.com/gpu"}}
        },
        SpawnStatus(
            Phase.FAILED,
            "The node could not run your server: it had no free GPU left. "
            "This is the cluster's doing, not a setting of yours, and nothing of yours was lost. "
            "Start it again; if it happens again, tell an admin.",
            failure_reason="node_refused",
        ),
    ),
    (
        "exited and started again (restartPolicy OnFailure): it will not come up by retrying",
        {
            "pod": on_node(
                {
                    "ready": False,
                    "restartCount": 1,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                },
                phase="Running",
            )
        },
        SpawnStatus(
            Phase.FAILED, f"Your server exited before it was ready (exit code 1). {EXITED_HINT}"
        ),
    ),
    (
        "exited, not yet started again",
        {
            "pod": on_node(
                {"ready": False, "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}},
                phase="Running",
            )
        },
        SpawnStatus(
            Phase.FAILED,
            f"Your server exited before it was ready (exit code 137, OOMKilled). {EXITED_HINT}",
        ),
    ),
    (
        "restarted once but ready now",
        {
            "pod": on_node(
                {
                    "ready": True,
                    "restartCount": 1,
                    "state": {"running": {}},
                    "lastState": {"terminated": {"exitCode": 1}},
                },
                phase="Running",
            )
        },
        SpawnStatus(Phase.READY, "Your server is ready"),
    ),
    (
        "preempted: pod gone, workload says so",
        {"pod": None, "pod_seen": True, "workload": read_workload(PREEMPTED_WL)},
        SpawnStatus(
            Phase.PREEMPTED,
            "Your server was stopped in team-a to make room for other queued work. Your files "
            "are kept; start it again when quota is free.",
        ),
    ),
    (
        "preempted: Kueue marks the pod before deleting it",
        {
            "pod": pod(
                phase="Running",
                node="gpu-1",
                conditions=[
                    {
                        "type": "TerminationTarget",
                        "status": "True",
                        "reason": "WorkloadEvicted",
                        "message": "Preempted to accommodate a higher priority Workload",
                    }
                ],
            )
        },
        SpawnStatus(
            Phase.PREEMPTED,
            "Your server was stopped in team-a to make room for other queued work. Your files "
            "are kept; start it again when quota is free.",
        ),
    ),
    (
        "stopped by Kueue for another reason",
        {
            "pod": pod(deleting=True),
            "workload": read_workload(
                workload(("Evicted", "True", "ClusterQueueStopped", "The ClusterQueue is stopped"))
            ),
        },
        SpawnStatus(
            Phase.STOPPED,
            "The queue stopped your server; an admin can see why. Your files are kept.",
        ),
    ),
    (
        "deleted by someone",
        {"pod": None, "pod_seen": True},
        SpawnStatus(
            Phase.STOPPED, "Your server was stopped outside JupyterHub. Your files are kept."
        ),
    ),
]


@pytest.mark.parametrize(("name", "inputs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_spawn_status(name: str, inputs: dict[str, Any], expected: SpawnStatus) -> None:
    assert spawn_status(team="team-a", **inputs) == expected


def test_status_flags_and_event() -> None:
    queued = spawn_status(team="team-a", pod=pod(gated=True), pending=MINE)
    assert (queued.in_queue, queued.admitted, queued.terminal) == (True, False, False)
    assert queued.event() == {
        "progress": 10,
        "message": "Queued in team-a: position 3 (4 ahead in the cluster queue)",
        "phase": "queued",
    }
    node = spawn_status(team="team-a", pod=pod())
    assert (node.in_queue, node.admitted, node.progress) == (False, True, 45)
    gone = spawn_status(team="team-a", pod=None, pod_seen=True)
    assert (gone.terminal, gone.admitted) == (True, False)


def _at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_queue_timeout_counts_only_the_wait_in_the_queue() -> None:
    queued = spawn_status(team="team-a", pod=pod(gated=True), pending=MINE)
    kw: dict[str, Any] = {
        "team": "team-a",
        "submitted_at": T0,
        "queue_timeout": 1800,
        "start_timeout": 300,
    }
    assert check_deadline(queued, admitted_at=None, now=_at(1799), **kw) is None
    deadline = check_deadline(queued, admitted_at=None, now=_at(1800), **kw)
    assert deadline is not None
    assert deadline.kind == "queue"
    assert deadline.message == (
        "Your server waited 30 min in team-a's queue (position 3) without getting a GPU, the "
        "limit for a queued server. Nothing was started; try again later or choose an offering "
        "with free quota."
    )
    assert (
        check_deadline(queued, admitted_at=None, now=_at(10**7), **{**kw, "queue_timeout": 0})
        is None
    )


def test_start_timeout_begins_at_admission() -> None:
    kw: dict[str, Any] = {
        "team": "team-a",
        "submitted_at": T0,
        "queue_timeout": 1800,
        "start_timeout": 300,
    }
    pulling = spawn_status(team="team-a", pod=pod(conditions=[ready], node="gpu-1"))
    # admitted after 50 minutes in the queue: the queue timeout no longer applies...
    assert check_deadline(pulling, admitted_at=_at(3000), now=_at(3299), **kw) is None
    # ...and the start timeout runs from admission
    deadline = check_deadline(pulling, admitted_at=_at(3000), now=_at(3300), **kw)
    assert deadline is not None
    assert deadline.kind == "start"
    assert deadline.message == (
        "Your server was admitted but did not become ready within 5 min: "
        "Node found; pulling the image and creating the container. Its quota is released; "
        "start it again, and tell an admin if it happens again (the server's events say why)."
    )
    done = spawn_status(
        team="team-a",
        pod=on_node({"ready": True, "state": {"running": {}}}, phase="Running"),
    )
    assert check_deadline(done, admitted_at=_at(0), now=_at(10**6), **kw) is None


# ----------------------------------------------------------------------------- the spawner's loop


@pytest.fixture
async def spawner(kubeconfig: None) -> AsyncIterator[Any]:
    view = StaticKueueView(
        cluster_queues=[team_a_notebooks(usage={("h100", GPU): 1}, pending=4)],
        local_queues=[local_queue("team-a", "team-a-notebooks")],
        workloads=[QUEUED_WL],
        pending={(NAMESPACE, "team-a"): VISIBILITY},
    )
    clock = FakeClock(T0)
    sp = make_spawner(
        FakeUser("alice", ["team-a"]),
        view,
        clock=clock.utc,
        queue_timeout=600,
        start_timeout=300,
        queue_poll_interval=0.01,
    )
    sp.api_token = "tok-0123456789abcdef"
    reflector = install_pod_reflector(sp)
    owned: list[str] = []
    never = asyncio_event()

    async def kubespawner_start() -> str:  # KubeSpawner._start: the pod never becomes ready here
        await never.wait()
        return "http://pod:8888"

    async def no_watch(replace: bool = False) -> None:
        return None

    async def own(uid: str) -> None:
        owned.append(uid)
        sp._gpuaas_secret_owned = True

    sp._start = kubespawner_start
    sp._start_watching_pods = no_watch
    sp._own_token_secret = own
    sp.test_clock, sp.test_reflector, sp.test_owned, sp.test_view = clock, reflector, owned, view
    yield sp
    type(sp).reflectors.pop(sp._get_reflector_key("pods"), None)


def asyncio_event() -> Any:
    import asyncio

    return asyncio.Event()


async def test_queue_wait_is_not_the_start_timeout_and_ends_cleanly(spawner: Any) -> None:
    import asyncio

    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    assert spawner.start_timeout == 600 + 300 + 60  # what the hub waits for, in total
    await asyncio.sleep(0.02)
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod(gated=True)  # created, gated
    progress = spawner.progress()
    first = await progress.__anext__()
    assert first == {
        "progress": 10,
        "phase": "queued",
        "message": "Queued in Team A: position 3 (4 ahead in the cluster queue)",
    }
    await asyncio.sleep(0.05)
    assert spawner.test_owned == [POD_UID]  # the token Secret gets owned by the pod
    assert spawner.test_view.tracked == {(NAMESPACE, "team-a"): 1}  # positions polled meanwhile
    spawner.test_clock.advance(601)
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(future, 5)
    assert (info.value.status_code, info.value.reason) == (400, "queue_timeout")  # not a hub error
    assert info.value.message.startswith("Your server waited 10 min in Team A's queue (position 3)")
    assert spawner.start_timeout == 300  # restored: stop() never inherits the long timeout
    assert spawner.test_view.tracked == {(NAMESPACE, "team-a"): 0}
    assert [e async for e in progress] == []  # the generator ends with the spawn


async def test_start_timeout_runs_from_admission(spawner: Any) -> None:
    import asyncio

    spawner.queue_timeout = 0  # wait in the queue without limit
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.02)
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod(gated=True)
    await asyncio.sleep(0.03)
    spawner.test_clock.advance(3000)  # 50 minutes in the queue
    await asyncio.sleep(0.03)
    assert not future.done()
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod()  # Kueue removed the gate
    await asyncio.sleep(0.03)
    spawner.test_clock.advance(299)
    await asyncio.sleep(0.03)
    assert not future.done()
    spawner.test_clock.advance(2)
    # a clean failure, not an error towards consecutive_failure_limit (a restart would not help)
    with pytest.raises(
        SpawnException, match="admitted but did not become ready within 5 min"
    ) as info:
        await asyncio.wait_for(future, 5)
    assert (info.value.status_code, info.value.reason) == (400, "start_timeout")


async def test_preempted_while_starting_is_reported_as_such(
    spawner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from gpuaas_spawner import hubcompat

    monkeypatch.setattr(hubcompat, "COUNTS_EVERY_FAILURE", True)  # as on JupyterHub 5.5
    spawner.handler = SimpleNamespace(settings={})
    spawner._spawn_future = asyncio.get_running_loop().create_future()  # spawn_single_user's
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.02)
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod()
    await asyncio.sleep(0.03)
    spawner.test_view._workloads = [read_workload(PREEMPTED_WL)]
    del spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"]
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(future, 5)
    assert (info.value.status_code, info.value.reason) == (400, "preempted")
    assert "stopped in Team A to make room for other queued work" in info.value.message
    assert spawner.handler.settings["failure_count"] == -1  # 5.5's +1 leaves the count at 0


async def test_a_previous_pod_of_the_same_name_is_not_mistaken_for_this_one(spawner: Any) -> None:
    import asyncio

    old = pod(deleting=True)
    old["metadata"]["uid"] = "old-uid"
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = old
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    progress = spawner.progress()
    assert (await progress.__anext__())["phase"] == "submitting"
    await asyncio.sleep(0.05)
    assert not future.done()
    future.cancel()
    await progress.aclose()


async def test_kubespawner_removing_an_old_pod_does_not_end_this_spawn(spawner: Any) -> None:
    """KubeSpawner's _start calls stop(True) on a 409; that stop must not undo the spawn."""
    import asyncio

    stops: list[bool] = []

    async def stop_pod(now: bool) -> None:
        stops.append(now)

    async def kubespawner_start() -> str:
        await asyncio.ensure_future(spawner.stop(True))  # as from inside exponential_backoff
        await asyncio.Event().wait()
        return ""

    spawner._stop_pod = stop_pod
    spawner._start = kubespawner_start
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.05)
    assert stops == [True]
    assert spawner.start_timeout == 600 + 300 + 60  # still the long one while queued
    assert spawner._gpuaas_choice is not None
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future
    assert spawner.start_timeout == 300


async def test_stop_uses_stop_timeout_and_cleans_up(spawner: Any) -> None:
    seen: list[int] = []
    deleted: list[bool] = []

    async def stop_pod(now: bool) -> None:
        seen.append(spawner.start_timeout)

    async def delete_secret() -> None:
        deleted.append(True)

    spawner._stop_pod = stop_pod
    spawner._delete_token_secret = delete_secret
    spawner.stop_timeout = 45
    await spawner._run_apply_user_options({"offering": "h100"})
    await spawner.stop()
    assert seen == [45]  # not the long spawn timeout
    assert spawner.start_timeout == 300
    assert deleted == [True]
    assert spawner._gpuaas_choice is None


async def test_a_pod_the_watch_has_not_shown_is_still_stopped_on_cancel(spawner: Any) -> None:
    """JupyterHub stops a server only if poll() says it runs; a just-created pod must count."""
    import asyncio

    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.02)
    assert await spawner.poll() is None  # the pod may exist already: let the hub stop it
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future


async def test_a_started_server_that_vanished_is_reported_stopped(spawner: Any) -> None:
    import asyncio

    async def kubespawner_start() -> str:
        spawner.pod_id = POD_UID
        return "http://pod:8888"

    spawner._start = kubespawner_start
    spawner.http_timeout = 0  # no wait for it to listen: it vanishes after the start here
    await spawner._run_apply_user_options({"offering": "h100"})
    assert await asyncio.wait_for(spawner.start(), 5) == "http://pod:8888"
    spawner.test_view._workloads = [read_workload(PREEMPTED_WL)]
    assert await spawner.poll() == 1  # no pod: gone
    assert (
        "stopped in Team A to make room for other queued work" in spawner._gpuaas_notice
    )  # told on the next visit


async def test_a_queued_spawn_ended_by_a_hub_restart_is_explained(spawner: Any) -> None:
    async def stop_pod(now: bool) -> None:
        return None

    async def delete_secret() -> None:
        return None

    spawner._stop_pod = stop_pod
    spawner._delete_token_secret = delete_secret
    queued = pod(gated=True)
    queued["metadata"]["labels"] = {"gpuaas.jupyter.org/team": "team-a"}
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = queued
    await spawner.stop()  # what JupyterHub does at start for a server still pending
    assert spawner._gpuaas_notice == (
        "Your server was waiting in Team A's queue when JupyterHub restarted, which ends waiting "
        "servers. Nothing of yours was lost; start it again."
    )
    html = await spawner.get_options_form()
    assert "when JupyterHub restarted" in html


def earlier_pods_workload(uid: str) -> dict[str, Any]:
    """The Workload of an earlier pod of alice's server (same pod name, another uid)."""
    wl = workload(("Finished", "True", "Succeeded", "the pod ended"))
    wl["metadata"]["name"] = "pod-jupyter-alice-0b7c1"
    wl["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": uid}
    wl["metadata"]["ownerReferences"][0]["uid"] = uid
    return wl


async def test_a_restart_creates_its_pod_only_once_the_earlier_pods_workload_is_gone(
    spawner: Any,
) -> None:
    """Kueue 0.17 matches a plain pod's Workloads by the pod's name: a pod created while the
    earlier pod's Workload remains is later stopped by Kueue (0.18+ match the UID
    only with FinishOrphanedWorkloads on, which our Kueue configuration turns off)."""
    import asyncio

    started = asyncio.Event()
    never = asyncio.Event()

    async def kubespawner_start() -> str:
        started.set()
        await never.wait()
        return "http://pod:8888"

    spawner._start = kubespawner_start
    spawner._gpuaas_pod_uid = "earlier-pod-uid"  # the server's previous pod, just stopped
    view = spawner.test_view
    view._workloads.append(read_workload(earlier_pods_workload("earlier-pod-uid")))
    asked: list[str] = []
    looks_up = view.has_workload_for_pod

    def has_workload_for_pod(namespace: str, uid: str, pod_name: str) -> bool:
        asked.append(uid)
        return bool(looks_up(namespace, uid, pod_name))

    view.has_workload_for_pod = has_workload_for_pod
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    # looked, then looked again after a backoff: the wait holds, it was not a single glance
    await until("the spawner to look for the earlier Workload again", lambda: len(asked) >= 3)
    assert not started.is_set()  # no pod while the earlier Workload is there
    view._workloads = [w for w in view._workloads if w.owner_uid != "earlier-pod-uid"]
    await asyncio.wait_for(started.wait(), 5)
    future.cancel()


async def test_an_earlier_workload_that_stays_ends_the_spawn_cleanly(spawner: Any) -> None:
    import asyncio

    spawner.stop_timeout = 0.05
    spawner._gpuaas_pod_uid = "earlier-pod-uid"
    spawner.test_view._workloads.append(read_workload(earlier_pods_workload("earlier-pod-uid")))
    await spawner._run_apply_user_options({"offering": "h100"})
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(spawner.start(), 5)
    assert (info.value.status_code, info.value.reason) == (400, "earlier_workload")
    assert "still being cleaned up" in info.value.message


async def test_a_server_that_exits_before_it_listens_ends_the_spawn_cleanly(spawner: Any) -> None:
    """KubeSpawner returns once the pod is Running; a server that exits right after (its own
    config) is a clean failure, not the hub's error of a server that never answered."""
    import asyncio

    running = asyncio.Event()
    not_listening_seen = asyncio.Event()

    async def kubespawner_start() -> str:
        spawner.pod_id = POD_UID
        ready = pod(phase="Running", containers=[{"name": "notebook", "ready": True}])
        spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = ready
        running.set()
        return "http://127.0.0.1:9"  # nothing listens there

    check_spawn = spawner._check_spawn

    async def check_spawn_noted() -> None:
        await check_spawn()
        if running.is_set():  # a check after the start: nothing listened yet
            not_listening_seen.set()

    spawner._start = kubespawner_start
    spawner._check_spawn = check_spawn_noted
    spawner.test_view._workloads = [read_workload(ADMITTED_WL)]
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.wait_for(not_listening_seen.wait(), 5)  # running, waiting for it to listen
    exited = pod(
        phase="Failed",
        containers=[{"name": "notebook", "state": {"terminated": {"exitCode": 1}}}],
    )
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = exited
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(future, 5)
    assert (info.value.status_code, info.value.reason) == (400, "server_exited")
    assert "before it was ready" in info.value.message
    assert "the server itself did not start" in info.value.message


async def test_a_server_that_exits_is_one_log_record_and_its_user_sees_no_output(
    spawner: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    async def kubespawner_start() -> str:
        spawner.pod_id = POD_UID
        spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = exited_pod(FORGED)
        return "http://127.0.0.1:9"

    spawner._start = kubespawner_start
    spawner.test_view._workloads = [read_workload(ADMITTED_WL)]
    await spawner._run_apply_user_options({"offering": "h100"})
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(spawner.start(), 5)
    assert info.value.reason == "server_exited"
    (record,) = [r for r in caplog.records if "event=spawn-ended" in r.getMessage()]
    logged = record.getMessage()
    assert logged.isprintable(), "one line, no terminal escapes"
    assert TOKEN not in logged
    assert "RuntimeError: the end" in logged
    # The progress page says how it exited, never what it printed (docs/security.md).
    assert "RuntimeError" not in info.value.message
    assert "gpuaas: event" not in info.value.message


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, ""),
        ({"gpuaas.jupyter.org/reclaim-warned-at": "2026-11-30T09:50:00Z"}, ""),  # warned only
        (
            {
                "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z",
                "gpuaas.jupyter.org/reclaim-for": "team-a/train",
            },
            "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to your"
            " team's queued work.",
        ),
        (
            {
                "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z",
                "gpuaas.jupyter.org/reclaim-for": "team-x/train",
            },
            "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to queued"
            " work of another team.",
        ),
        (  # a teammate's notebook queued in the notebooks' namespace
            {
                "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z",
                "gpuaas.jupyter.org/reclaim-for": "jupyter-users/jupyter-bob-wl",
                "gpuaas.jupyter.org/reclaim-for-team": "team-a",
            },
            "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to your"
            " team's queued work.",
        ),
        (
            {
                "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z",
                "gpuaas.jupyter.org/reclaim-for": "jupyter-users/jupyter-carol-wl",
                "gpuaas.jupyter.org/reclaim-for-team": "team-b",
            },
            "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to queued"
            " work of Team B.",
        ),
        (
            {"gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z"},  # a max-age stop
            "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to queued"
            " work.",
        ),
    ],
)
def test_reclaim_notice(annotations: dict[str, str], expected: str) -> None:
    notice = reclaim_notice(annotations, team="team-a", team_names={"team-b": "Team B"})
    assert notice.startswith(expected) if expected else notice == ""


def test_notice_parts_show_moments_as_times_and_keep_the_rest() -> None:
    parts = notice_parts("At [[time:2026-11-30T10:00:00Z]], or [[time:soon]].")
    assert parts == (
        NoticePart("At "),
        NoticePart("10:00 UTC", time="2026-11-30T10:00:00.000Z"),
        NoticePart(", or "),
        NoticePart("[[time:soon]]"),
        NoticePart("."),
    )


def _claim(phase: str, uid: str = "claim-2") -> dict[str, Any]:
    return {"metadata": {"name": "claim-alice", "uid": uid}, "status": {"phase": phase}}


def _claim_event(uid: str, message: str, at: str, reason: str = "ProvisioningFailed") -> Any:
    return {
        "type": "Warning",
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
        "involvedObject": {"kind": "PersistentVolumeClaim", "name": "claim-alice", "uid": uid},
    }


@pytest.mark.parametrize(
    ("claim", "events", "expected"),
    [
        (_claim("Pending"), [], ""),  # the provisioner has not said anything yet
        (
            _claim("Pending"),
            [
                _claim_event("claim-2", "asks for 50Gi, more than 20Gi.", "2026-12-03T10:00:00Z"),
                _claim_event("claim-2", "the node is full.", "2026-12-03T10:00:05Z"),
            ],
            "the node is full",
        ),
        # an earlier claim of the same name (deleted since) or another kind of event: nothing
        (_claim("Pending"), [_claim_event("claim-1", "too big", "2026-12-03T09:00:00Z")], ""),
        (
            _claim("Pending"),
            [_claim_event("claim-2", "waiting", "2026-12-03T10:00:00Z", reason="Provisioning")],
            "",
        ),
        (_claim("Bound"), [_claim_event("claim-2", "too big", "2026-12-03T10:00:00Z")], ""),
    ],
)
def test_home_volume_failure(claim: Any, events: list[Any], expected: str) -> None:
    assert home_volume_failure(claim, events) == expected


def test_a_queued_server_is_told_what_holds_the_gpu_and_when_it_frees() -> None:
    now = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)
    outlook = {
        "holders": [
            {
                "kind": "server",
                "team": "team-a",
                "yours": False,
                "state": "idle",
                "idle_since": "2026-11-30T09:56:00.000Z",
                "freed_at": "2026-11-30T10:12:00.000Z",
            }
        ],
        "more": 0,
        "freed_at": "2026-11-30T10:12:00.000Z",
    }
    waiting = pod(gated=True)
    waiting["metadata"]["annotations"] = {RECLAIM_OUTLOOK: json.dumps(outlook)}
    kw: dict[str, Any] = {"pod": waiting, "workload": read_workload(QUEUED_WL), "pending": MINE}
    status = spawn_status(team="team-a", now=now, own_team="team-a", teams={}, **kw)
    assert status.phase is Phase.QUEUED
    assert status.position == 3
    assert status.message == (
        "Queued in team-a: position 3 (4 ahead in the cluster queue). The GPU is in use by a "
        "teammate's server, idle 4 min (being freed). An idle server is being freed for you: "
        "about 12 min."
    )
    # Without a clock (or with a damaged outlook) only the place in the queue is told.
    assert spawn_status(team="team-a", **kw).message.endswith("cluster queue)")
    waiting["metadata"]["annotations"] = {RECLAIM_OUTLOOK: "{not json"}
    assert spawn_status(team="team-a", now=now, **kw).message.endswith("cluster queue)")


def test_the_admins_log_says_how_a_pod_that_never_became_ready_ended() -> None:
    pod = {
        "metadata": {"uid": "u-1"},
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "notebook",
                    "state": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "message": "OSError: [Errno 98] Address already in use\n",
                        }
                    },
                }
            ],
        },
    }
    assert exit_details(pod) == (
        "pod uid=u-1 phase=Failed; container 'notebook': exit code 1 ('Error'), last output: "
        "'OSError: [Errno 98] Address already in use'"
    )
    evicted = {"metadata": {"uid": "u-2"}, "status": {"phase": "Failed", "reason": "Evicted"}}
    assert exit_details(evicted) == "pod uid=u-2 phase=Failed; reason='Evicted' message=''"
    assert exit_details(None) == "pod gone"


TOKEN = "tok-0123456789abcdef"
FORGED = (
    "x" * 3000 + "Traceback (most recent call last):\n"
    "[W 2026-11-30 10:00:00.000 JupyterHub spawner:1054] gpuaas: event=spawn-ended"
    " reason=server_exited user=bob server=: pod gone\r\n"
    "\x1b[2J\x1b[31mJUPYTERHUB_API_TOKEN=" + TOKEN + "\x1b[0m\u2028"
    "RuntimeError: the end\n"
)


def exited_pod(message: str) -> dict[str, Any]:
    exited = pod(
        phase="Failed",
        containers=[
            {"name": "notebook", "state": {"terminated": {"exitCode": 1, "message": message}}}
        ],
    )
    exited["status"]["message"] = "claim\n[W fake] gpuaas: event=x"
    return exited


def test_the_admins_log_quotes_the_servers_output_as_one_escaped_capped_line() -> None:
    # Fifth audit, finding 4: the output's line breaks made records of their own (a forged one among
    # them), its ANSI sequences reached the terminal, the hub token it printed the log.
    details = exit_details(exited_pod(FORGED), secrets=[TOKEN])
    assert details.isprintable()  # no line break, escape or other control character
    assert "\\x1b[31m" in details  # shown escaped
    assert "\\n[W 2026-11-30" in details  # the forged record stays inside the quote
    assert "message='claim\\n[W fake] gpuaas: event=x'" in details
    assert TOKEN not in details
    assert details.endswith("RuntimeError: the end'")
    assert ", last output: …'" in details  # its beginning cut: the end is what tells
    assert len(details) < 200 + 10 * 1000 + 400


def test_a_server_held_for_a_whole_node_says_so() -> None:
    """Kueue's Topology Aware Scheduling holds a notebook back (Kueue v0.19.2's words): its
    quota is there, no node has room. The spawn page says so, keeping its place in the queue."""
    no_room = (
        "couldn't assign flavors to pod set main: topology \"gpu-racks\" doesn't allow to fit"
        " any of 1 pod(s)"
    )
    held = workload(("QuotaReserved", "False", "Pending", no_room))
    held["spec"]["podSets"] = [
        {"name": "main", "count": 1, "topologyRequest": {"required": "kubernetes.io/hostname"}}
    ]
    status = spawn_status(
        team="team-a", pod=pod(gated=True), workload=read_workload(held), pending=MINE
    )
    assert status.phase is Phase.QUEUED
    assert status.message == (
        "Queued in team-a: the quota is there; waiting for a whole node with room for it"
    )
    assert MINE is not None
    assert status.position == MINE.position_in_local_queue + 1
    short = spawn_status(
        team="team-a", pod=pod(gated=True), workload=read_workload(QUEUED_WL), pending=MINE
    )
    assert "whole node" not in short.message


async def test_a_start_after_a_reclaim_yields_until_it_is_admitted(spawner: Any) -> None:
    """A reclaimed server's next start has the priority below every Job class (its pod's
    label), says why it waits while it is queued, and is ordinary again once admitted."""
    import asyncio

    spawner.orm_spawner = SimpleNamespace(state=None, user_options={}, server=None, name="")
    spawner.db = SimpleNamespace(commit=lambda: None)
    spawner.load_state({"gpuaas_yields_after_reclaim": True})  # as the reclaimed stop saved it
    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.02)
    assert spawner._gpuaas_settings.labels["kueue.x-k8s.io/priority-class"] == (
        "interactive-after-reclaim"
    )
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod(gated=True)
    first = await spawner.progress().__anext__()
    assert first["message"] == (
        "Queued in Team A: position 3 (4 ahead in the cluster queue). Your last server's GPU was"
        " given to queued work when it was reclaimed; this start waits for that work to end (or"
        " for another GPU) rather than stopping it"
    )
    assert spawner.orm_spawner.state["gpuaas_yields_after_reclaim"] is True  # a hub restart
    spawner.test_reflector.pods[f"{NAMESPACE}/jupyter-alice"] = pod()  # Kueue removed the gate
    await asyncio.sleep(0.05)
    assert spawner._gpuaas_yields is False
    assert "gpuaas_yields_after_reclaim" not in spawner.orm_spawner.state  # saved at once
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future


async def test_an_ordinary_start_keeps_its_usual_priority(spawner: Any) -> None:
    import asyncio

    await spawner._run_apply_user_options({"offering": "h100"})
    future = spawner.start()
    await asyncio.sleep(0.02)
    assert spawner._gpuaas_settings.labels["kueue.x-k8s.io/priority-class"] == "interactive"
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future

"""What GPUaaSSpawner keeps in JupyterHub's spawner state: the notice for the user's next visit.

JupyterHub (6.x ``User.stop``) calls ``clear_state()`` and then saves ``get_state()`` when a
server stops, and a new hub process calls ``load_state()`` with what was saved. These tests drive
the spawner through that same sequence, with the ORM row and the database session as small fakes
(JupyterHub's objects, not a component of ours).
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

import pytest

from gpuaas_spawner.hubcompat import SpawnException
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.clock import FakeClock
from tests.support.samples import (
    GPU,
    NAMESPACE,
    FakeUser,
    install_pod_reflector,
    local_queue,
    make_spawner,
    team_a_notebooks,
)

RESTART_NOTICE = (
    "Your server was waiting in Team A's queue when JupyterHub restarted, which ends waiting "
    "servers. Nothing of yours was lost; start it again."
)
POD_KEY = f"{NAMESPACE}/jupyter-alice"


class FakeOrmSpawner:
    def __init__(self) -> None:
        self.state: dict[str, Any] | None = None
        self.name = ""
        self.server = None
        self.user_options: dict[str, Any] = {}


class FakeDb:
    def __init__(self) -> None:
        self.commits = 0

    def commit(self) -> None:
        self.commits += 1


T0 = datetime(2026, 11, 30, 10, 0, tzinfo=timezone.utc)


def queued_pod(*, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "jupyter-alice",
        "namespace": NAMESPACE,
        "uid": "pod-uid-1",
        "labels": {"gpuaas.jupyter.org/team": "team-a"},
        "finalizers": ["kueue.x-k8s.io/managed"],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T10:05:00Z"
    return {
        "metadata": meta,
        "spec": {
            "containers": [{"name": "notebook"}],
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
        },
        "status": {"phase": "Pending"},
    }


def new_hub_process_spawner(view: StaticKueueView, clock: FakeClock | None = None) -> Any:
    """A spawner as a (new) hub process makes it: constructed, then given the saved state."""
    sp = make_spawner(
        FakeUser("alice", ["team-a"]),
        view,
        clock=(clock or FakeClock(T0)).utc,
        queue_timeout=60,
        start_timeout=300,
        queue_poll_interval=0.01,
    )
    sp.orm_spawner = FakeOrmSpawner()
    sp.db = FakeDb()
    sp.api_token = "tok-0123456789abcdef"
    sp.test_stopped = []

    async def no_watch(replace: bool = False) -> None:
        return None

    async def stop_pod(now: bool) -> None:  # KubeSpawner's delete-and-wait
        sp.test_stopped.append(now)
        sp.pod_reflector.pods.pop(POD_KEY, None)

    async def delete_secret() -> None:
        return None

    sp._start_watching_pods = no_watch
    sp._stop_pod = stop_pod
    sp._delete_token_secret = delete_secret
    return sp


def hub_stops(sp: Any) -> dict[str, Any]:
    """The end of JupyterHub's ``User.stop``: clear the state, then save what is left."""
    sp.clear_state()
    state: dict[str, Any] = sp.get_state()
    sp.orm_spawner.state = state
    return state


@pytest.fixture
async def view(kubeconfig: None) -> AsyncIterator[StaticKueueView]:
    yield StaticKueueView(
        cluster_queues=[team_a_notebooks(usage={("h100", GPU): 2}, pending=1)],
        local_queues=[local_queue("team-a", "team-a-notebooks")],
    )
    from gpuaas_spawner.spawner import GPUaaSSpawner

    GPUaaSSpawner.reflectors.clear()


async def test_a_restart_notice_outlives_the_stop_and_another_restart(
    view: StaticKueueView,
) -> None:
    saved = new_hub_process_spawner(view).get_state()  # by hub process 1, as the spawn began
    # hub process 2 finds alice's server pending, its pod still gated in Kueue's queue
    sp = new_hub_process_spawner(view)
    sp.load_state(saved)
    install_pod_reflector(sp).pods[POD_KEY] = queued_pod()
    assert await sp.poll() == 1  # not "running": nothing would ever answer
    assert sp.test_stopped == [True]  # ... and its pod is removed now, not after http_timeout
    assert await sp.poll() == 1  # JupyterHub's stop polls again: no second stop
    assert sp.test_stopped == [True]
    state = hub_stops(sp)
    assert state["gpuaas_notice"] == RESTART_NOTICE
    assert state["pod_name"] == "jupyter-alice"  # KubeSpawner's own state is still there

    # hub process 3: alice visits the form and is told; showing it does not use it up
    for _ in range(2):
        again = new_hub_process_spawner(view)
        again.load_state(state)
        assert again._left_in_queue() is False  # no pod: nothing to stop
        page = await again.get_options_form()
        assert 'id="gpuaas-notice"' in page
        assert RESTART_NOTICE in html.unescape(page)


async def test_a_new_spawn_forgets_the_notice_in_the_database_at_once(
    view: StaticKueueView,
) -> None:
    sp = new_hub_process_spawner(view)
    sp.load_state({**sp.get_state(), "gpuaas_notice": RESTART_NOTICE})
    assert RESTART_NOTICE in html.unescape(await sp.get_options_form())
    install_pod_reflector(sp)
    never = asyncio.Event()

    async def kubespawner_start() -> str:
        await never.wait()
        return "http://pod:8888"

    sp._start = kubespawner_start
    await sp._run_apply_user_options({"offering": "h100"})
    future = sp.start()
    await asyncio.sleep(0.05)
    assert sp.orm_spawner.state is not None
    assert "gpuaas_notice" not in sp.orm_spawner.state  # saved before the spawn waits
    assert sp.orm_spawner.state["namespace"] == NAMESPACE  # the tenant's, for a restart
    assert sp.db.commits >= 1
    assert "gpuaas-notice" not in await sp.get_options_form()
    future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await future


async def test_a_queue_timeout_is_told_again_on_the_next_visit(view: StaticKueueView) -> None:
    clock = FakeClock(T0)
    sp = new_hub_process_spawner(view, clock)
    reflector = install_pod_reflector(sp)
    never = asyncio.Event()

    async def kubespawner_start() -> str:
        await never.wait()
        return "http://pod:8888"

    sp._start = kubespawner_start

    async def own(uid: str) -> None:
        sp._gpuaas_secret_owned = True

    sp._own_token_secret = own
    await sp._run_apply_user_options({"offering": "h100"})
    future = sp.start()
    await asyncio.sleep(0.02)
    reflector.pods[POD_KEY] = queued_pod()
    assert await sp.poll() is None  # a spawn of this process waits: left alone
    await asyncio.sleep(0.02)
    clock.advance(61)
    with pytest.raises(SpawnException) as info:
        await asyncio.wait_for(future, 5)
    assert info.value.reason == "queue_timeout"
    await sp.stop()  # what JupyterHub does after a failed start
    state = hub_stops(sp)
    assert state["gpuaas_notice"] == info.value.message
    assert "waited 1 min in Team A's queue" in state["gpuaas_notice"]
    assert sp.test_stopped == [False]  # stopped once, by the hub's stop


async def test_a_pod_already_going_away_is_not_stopped_again(view: StaticKueueView) -> None:
    sp = new_hub_process_spawner(view)
    install_pod_reflector(sp).pods[POD_KEY] = queued_pod(deleting=True)
    assert await sp.poll() is None  # KubeSpawner's answer for a Pending pod, unchanged
    assert sp.test_stopped == []
    assert sp.get_state().get("gpuaas_notice") is None


def running_pod(annotations: dict[str, str]) -> dict[str, Any]:
    pod = queued_pod()
    pod["spec"].pop("schedulingGates")
    pod["status"]["phase"] = "Running"
    pod["metadata"]["annotations"] = annotations
    return pod


async def test_a_server_stopped_by_the_gpuaas_service_is_explained_on_the_next_visit(
    view: StaticKueueView,
) -> None:
    sp = new_hub_process_spawner(view)
    install_pod_reflector(sp).pods[POD_KEY] = running_pod(
        {
            "gpuaas.jupyter.org/reclaim-warned-at": "2026-11-30T09:50:00Z",
            "gpuaas.jupyter.org/reclaim-stopped-at": "2026-11-30T10:00:00Z",
            "gpuaas.jupyter.org/reclaim-for": "team-b/train-resnet",
        }
    )
    await sp.stop()  # the hub's stop, asked by the gpuaas service
    state = hub_stops(sp)
    assert state["gpuaas_notice"] == (
        "Your server was stopped at [[time:2026-11-30T10:00:00.000Z]] to give its GPU to queued"
        " work of Team B, after the warning at [[time:2026-11-30T09:50:00.000Z]]. Your files are"
        " kept."
        " Start it again below; if the GPU is still in use, the next page shows your place in"
        " the queue."
    )
    again = new_hub_process_spawner(view)
    again.load_state(state)
    page = await again.get_options_form()
    assert '<time class="gpuaas-time" datetime="2026-11-30T10:00:00.000Z">10:00 UTC</time>' in page
    assert "[[time:" not in page
    # its GPU went to queued work: the next start, by whichever hub process, must not take it back
    assert state["gpuaas_yields_after_reclaim"] is True
    assert again._gpuaas_yields is True


async def test_a_stop_of_the_users_own_tells_nothing(view: StaticKueueView) -> None:
    sp = new_hub_process_spawner(view)
    warned_only = {"gpuaas.jupyter.org/reclaim-warned-at": "2026-11-30T09:50:00Z"}
    install_pod_reflector(sp).pods[POD_KEY] = running_pod(warned_only)
    await sp.stop()
    state = hub_stops(sp)
    assert "gpuaas_notice" not in state
    assert "gpuaas_yields_after_reclaim" not in state  # the next start is an ordinary one

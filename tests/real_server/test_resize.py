"""A real jupyter server with the extension asks the gpuaas service's real handlers for the way
up to a bigger GPU (only the hub's answers come from an in-process stand-in): the next size up,
a move that stops this server and starts it on the bigger offering, and the service's refusals
passed on as they are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import HTTPClientError

from devcluster.hub import free_port
from gpuaas_service.clients.persisted import PersistedState
from gpuaas_service.reclaim.decide import Plan
from gpuaas_service.reclaim.events import CycleInputs, CycleResult
from gpuaas_service.reclaim.loop import ReclaimLoop
from gpuaas_service.reclaim.policy import load_policy
from gpuaas_service.reclaim.usage import UsageRecorder, move_recorder
from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_moves import TickingHub
from tests.support.jupyter_fetch import Fetch, execute, start_session
from tests.support.samples import fraction_catalog

QUARTER = {"team": "team-a", "offering": "l4-quarter", "count": 1}
GiB = 1 << 30


@pytest.fixture
async def hub(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[TickingHub]:
    """The service's app with its resize part; this server runs a quarter L4 with its own
    token, which the extension forwards."""
    from jupyterhub.services.auth import HubAuth

    hub_auth = HubAuth(
        api_token="service-token",
        api_url="http://127.0.0.1:1/hub/api",
        access_scopes={"access:services!service=gpuaas"},
    )
    hub = TickingHub()
    monkeypatch.setattr(hub_auth, "get_user", hub.get_user)
    resizer = Resizer(hub, fraction_catalog, poll_interval=0.01)
    app = make_app(ServiceContext(hub_auth=hub_auth, servers=ServerTokens(hub), resize=resizer))
    port = free_port()
    server = app.listen(port, "127.0.0.1")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", hub.run("alice", dict(QUARTER)))
    monkeypatch.setenv("GPUAAS_SERVICE_URL", f"http://127.0.0.1:{port}/services/gpuaas/")
    yield hub
    server.stop()


async def _json(jp_fetch: Any, method: str = "GET", body: bytes | None = None) -> Any:
    response = await jp_fetch("gpuaas", "api", "resize", method=method, body=body)
    return response.code, json.loads(response.body)


async def test_the_sidebar_learns_the_next_size_up(hub: TickingHub, jp_fetch: Any) -> None:
    code, answer = await _json(jp_fetch)
    assert code == 200
    assert answer["current"]["slug"] == "l4-quarter"
    assert answer["next"]["slug"] == "l4-half"
    assert answer["next"]["memory_text"] == "11 GiB"


async def test_a_move_through_the_extension_restarts_the_server_bigger(
    hub: TickingHub, jp_fetch: Any
) -> None:
    code, answer = await _json(jp_fetch, "POST", b"{}")
    assert code == 202
    assert answer["to"]["slug"] == "l4-half"
    for _ in range(300):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert [(user, options["offering"]) for user, _s, options in hub.started] == [
        ("alice", "l4-half")
    ]


async def test_the_services_refusals_come_back_as_they_are(hub: TickingHub, jp_fetch: Any) -> None:
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch(
            "gpuaas", "api", "resize", method="POST", body=b'{"offering": "h100", "count": 8}'
        )
    assert err.value.code == 400
    answer = json.loads(err.value.response.body)  # type: ignore[union-attr]
    assert answer["errors"][0]["path"] == "count"
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("gpuaas", "api", "resize", method="POST", body=b'{"offering": "mig-1g"}')
    assert err.value.code == 400
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("gpuaas", "api", "resize", method="POST", body=b"not json")
    assert err.value.code == 400
    assert hub.started == []


async def test_the_way_up_saves_the_kernels_before_the_server_stops(
    hub: TickingHub,
    jp_fetch: Fetch,
    jp_ws_fetch: Fetch,
    jp_serverapp: Any,
    jp_home_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The move keeps the notebook's variables (they come back when it opens on
    # the bigger share); they are saved before the service is asked, so before the stop.
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, "x = 41\nbatches = (i for i in range(3))")
    km = jp_serverapp.kernel_manager
    for _ in range(200):
        if km.kernel_model(kernel)["execution_state"] == "idle":
            break
        await asyncio.sleep(0.05)
    folder = jp_home_dir / ".jupyter-gpuaas" / "kernel-state"
    saved_at_stop: list[list[str]] = []
    stop = hub.stop_server

    async def stop_server(user: str, server: str) -> int:
        saved_at_stop.append(sorted(p.name for p in folder.glob("*")) if folder.exists() else [])
        return await stop(user, server)

    monkeypatch.setattr(hub, "stop_server", stop_server)
    code, answer = await _json(jp_fetch, "POST", b"{}")
    assert code == 202, answer
    for _ in range(300):
        if saved_at_stop:
            break
        await asyncio.sleep(0.01)
    assert saved_at_stop
    assert any(name.startswith("train.ipynb-") for name in saved_at_stop[0]), saved_at_stop


@pytest.mark.parametrize("gpuaas_config", [{"kernel_state_on_reclaim": False}])
async def test_a_server_told_not_to_keep_state_moves_without_saving(
    hub: TickingHub, jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_home_dir: Path
) -> None:
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, "x = 41")
    code, _answer = await _json(jp_fetch, "POST", b"{}")
    assert code == 202
    assert not (jp_home_dir / ".jupyter-gpuaas" / "kernel-state").exists()


class _Unused:
    async def user(self, name: str) -> dict[str, Any] | None:
        raise AssertionError("not in this test")


class _History:
    """The usage history's ConfigMap, as the Kubernetes client reads and writes it."""

    def __init__(self) -> None:
        self.text: str | None = None

    async def read_state(self, namespace: str, name: str) -> str | None:
        return self.text

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        self.text = text


@pytest.fixture
async def recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[TickingHub, UsageRecorder, _History]]:
    """The service with its activity reports and usage recorder (as the app wires them: the
    move reads the peak from the server's last report), and the resize part."""
    from jupyterhub.services.auth import HubAuth

    hub_auth = HubAuth(
        api_token="service-token",
        api_url="http://127.0.0.1:1/hub/api",
        access_scopes={"access:services!service=gpuaas"},
    )
    hub = TickingHub()
    monkeypatch.setattr(hub_auth, "get_user", hub.get_user)
    loop = ReclaimLoop(
        hub=_Unused(),  # type: ignore[arg-type]
        kube=_Unused(),  # type: ignore[arg-type]
        view=_Unused(),  # type: ignore[arg-type]
        policies=load_policy({"policies": [{"name": "p", "idle_after": "1m"}]}),
    )
    history = _History()
    recorder = UsageRecorder(
        PersistedState(history, "jupyter-users", "gpuaas-usage-history", owner="t", what="usage")
    )
    resizer = Resizer(
        hub, fraction_catalog, poll_interval=0.01, peak_at_move=move_recorder(recorder, loop.store)
    )
    app = make_app(
        ServiceContext(loop=loop, hub_auth=hub_auth, servers=ServerTokens(hub), resize=resizer)
    )
    port = free_port()
    server = app.listen(port, "127.0.0.1")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", hub.run("alice", dict(QUARTER)))
    monkeypatch.setenv("GPUAAS_SERVICE_URL", f"http://127.0.0.1:{port}/services/gpuaas/")
    yield hub, recorder, history
    server.stop()


@pytest.mark.parametrize("gpuaas_config", [{"activity_report_interval": 3600}])
async def test_the_move_records_the_peak_the_server_holds_as_it_asks(
    recorded: tuple[TickingHub, UsageRecorder, _History], jp_fetch: Fetch, jp_ws_fetch: Fetch
) -> None:
    """A kernel reaches its cap after the last periodic report, and the
    user moves up at once; the size advice later said "no session ended yet". The extension
    reports just before it asks for the move, and the move records that report's peak."""
    hub, recorder, history = recorded
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(
        jp_ws_fetch,
        kernel,
        "from jupyter_gpuaas.gpu import simulate\nh = simulate.hold('2GiB', device=0)",
    )
    code, answer = await _json(jp_fetch, "POST", b"{}")
    assert code == 202, answer
    for _ in range(300):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert hub.started
    # the next cycle of the loop: the moved session has ended, with the peak it moved at
    now = datetime.now(timezone.utc)
    inputs = CycleInputs(pending=(), handoffs=(), reports={}, pod_utilization={}, dry_run=False)
    await recorder.cycle_completed(
        CycleResult(now=now, plan=Plan(now=now, decisions=()), inputs=inputs)
    )
    assert history.text is not None
    assert json.loads(history.text)["peaks_mib"] == {"alice": [2048]}

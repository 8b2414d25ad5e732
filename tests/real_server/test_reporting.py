"""A real jupyter server with the extension reports its activity to the gpuaas service's
handlers (a real tornado app; only the hub's answers, who a token is and which servers and
tokens a user has, come from an in-process stand-in), reads its reclaim warning back and
forwards "Keep my GPU"."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPClientError

from devcluster.hub import free_port
from gpuaas_service.reclaim.activity_store import Notice
from gpuaas_service.reclaim.decide import SnoozeResult
from gpuaas_service.reclaim.loop import ReclaimLoop
from gpuaas_service.reclaim.policy import load_policy
from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from jupyter_gpuaas.core.durations import isoformat_z
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.jupyter_fetch import Fetch, execute, start_session

SERVER_TOKEN = "server-token-of-alice"
PERSONAL_TOKEN = "personal-token-of-alice"


def token_hub() -> TokenHub:
    """The hub's answers: alice's server runs with the token the hub issued it; alice also
    minted a personal token that may reach the service."""
    hub = TokenHub(groups={"alice": ["team-a"]})
    hub.start("alice", secret=SERVER_TOKEN)
    hub.mint("alice", ["access:servers!user=alice", SERVICE_SCOPE], secret=PERSONAL_TOKEN)
    return hub


class _Unused:
    async def user(self, name: str) -> dict[str, Any] | None:
        raise AssertionError("not in this test")

    async def group_members(self) -> dict[str, list[str]]:
        raise AssertionError("not in this test")


@pytest.fixture
async def service(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[str, ReclaimLoop]]:
    from jupyterhub.services.auth import HubAuth

    hub_auth = HubAuth(
        api_token="service-token",
        api_url="http://127.0.0.1:1/hub/api",
        access_scopes={"access:services!service=gpuaas"},
    )

    hub = token_hub()
    monkeypatch.setattr(hub_auth, "get_user", hub.get_user)
    loop = ReclaimLoop(
        hub=_Unused(),  # type: ignore[arg-type]
        kube=_Unused(),  # type: ignore[arg-type]
        view=_Unused(),  # type: ignore[arg-type]
        policies=load_policy({"policies": [{"name": "p", "idle_after": "1m"}]}),
    )
    app = make_app(
        ServiceContext(loop=loop, hub_auth=hub_auth, operator_token="op", servers=ServerTokens(hub))
    )
    port = free_port()
    server = app.listen(port, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/services/gpuaas/"
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", SERVER_TOKEN)
    monkeypatch.setenv("GPUAAS_SERVICE_URL", url)
    yield url, loop
    server.stop()


@pytest.fixture
def gpuaas_config() -> dict[str, Any]:
    return {"activity_report_interval": 0.2}


async def eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def test_reports_reach_the_service_for_this_server_only(
    service: tuple[str, ReclaimLoop], jp_fetch: Any
) -> None:
    url, loop = service
    await jp_fetch("api", "status")  # the server runs, with the extension loaded
    await eventually(lambda: loop.store.report("alice") is not None)
    report = loop.store.report("alice")
    assert report is not None
    assert report.activity.source == "simulated"
    assert report.activity.idle_since is not None  # nothing busy in a fresh server

    # A personal token may reach the service but cannot report for a server.
    client = AsyncHTTPClient()
    with pytest.raises(HTTPClientError) as err:
        await client.fetch(
            url + "api/activity",
            method="POST",
            body=json.dumps({"kernels": []}),
            headers={"Authorization": f"token {PERSONAL_TOKEN}"},
        )
    assert err.value.code == 403
    with pytest.raises(HTTPClientError) as err:
        await client.fetch(url + "api/reclaim", headers={"Authorization": "token nobody"})
    assert err.value.code == 403
    with pytest.raises(HTTPClientError) as err:
        await client.fetch(
            url + "api/activity",
            method="POST",
            body=json.dumps({"kernels": "x"}),
            headers={"Authorization": f"token {SERVER_TOKEN}"},
        )
    assert err.value.code == 400
    assert "kernels" in json.loads(err.value.response.body)["message"]  # type: ignore[union-attr]

    metrics = await client.fetch(url + "metrics", headers={"Authorization": "Bearer op"})
    assert b"gpuaas_reclaimed_gpu_equivalents" in metrics.body


async def test_warning_and_snooze_through_the_server_extension(
    service: tuple[str, ReclaimLoop], jp_fetch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _url, loop = service
    answer = json.loads((await jp_fetch("gpuaas", "api", "reclaim")).body)
    assert answer["warning"] is None

    now = datetime.now(timezone.utc)
    loop.store.set_notice(
        "alice", Notice(now, now + timedelta(minutes=5), "queued team-a/train needs it", 1)
    )
    answer = json.loads((await jp_fetch("gpuaas", "api", "reclaim")).body)
    warning = answer["warning"]
    assert warning["reason"] == "queued team-a/train needs it"
    assert 290 <= warning["seconds_left"] <= 300
    assert warning["snoozes_left"] == 1
    assert warning["saving"] is False

    asked: list[tuple[str, str]] = []

    async def snooze(user: str, server: str) -> SnoozeResult:
        asked.append((user, server))
        if len(asked) > 1:
            return SnoozeResult(False, "no snoozes left (policy p allows 1 per server)")
        return SnoozeResult(True, "kept", until=now + timedelta(hours=1), snoozes_left=0)

    monkeypatch.setattr(loop, "snooze", snooze)
    response = await jp_fetch("gpuaas", "api", "reclaim", "snooze", method="POST", body=b"")
    assert json.loads(response.body)["allowed"] is True
    with pytest.raises(HTTPClientError) as err:
        await jp_fetch("gpuaas", "api", "reclaim", "snooze", method="POST", body=b"")
    assert err.value.code == 409
    assert asked == [("alice", ""), ("alice", "")]


async def test_a_snapshot_request_is_answered_with_each_kernels_outcome(
    service: tuple[str, ReclaimLoop],
    jp_fetch: Fetch,
    jp_ws_fetch: Fetch,
    jp_serverapp: Any,
    jp_home_dir: Path,
) -> None:
    # Before a reclaim stops this server the service asks, in its answer to a
    # report, for a snapshot; the reporter saves every kernel and reports the outcomes at once.
    _url, loop = service
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, "x = 41\nbatches = (i for i in range(3))")
    await eventually(
        lambda: (
            (report := loop.store.report("alice")) is not None
            and report.activity.keeps_kernel_state
            and all(k.execution_state == "idle" for k in report.activity.kernels)
        )
    )

    now = datetime.now(timezone.utc)
    ask = loop.store.ask_snapshot(
        "alice", now, timedelta(seconds=30), wait_until=time.monotonic() + 30
    )
    answer = await loop.store.wait_snapshot("alice", 30)
    assert answer is not None, "no answer within 30 s"
    assert isoformat_z(answer.requested_at) == isoformat_z(ask.requested_at)
    assert answer.error == ""
    (outcome,) = answer.outcomes
    assert (outcome.kernel_id, outcome.notebook) == (kernel, "train.ipynb")
    assert outcome.outcome == "kept_with_losses", outcome
    assert [(v.name, v.reason) for v in outcome.lost] == [("batches", "a generator")]
    saved = list((jp_home_dir / ".jupyter-gpuaas" / "kernel-state").iterdir())
    assert saved

    # Each request is answered once: later reports carry no second snapshot.
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpuaas"]
    reporter = app.state.reporter
    sent = reporter.sent
    await eventually(lambda: reporter.sent >= sent + 3)
    assert reporter.snapshots == 1
    assert loop.store.report("alice").activity.kernel_state is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "gpuaas_config", [{"activity_report_interval": 0.2, "kernel_state_on_reclaim": False}]
)
async def test_a_server_told_not_to_keep_state_says_so(
    service: tuple[str, ReclaimLoop], jp_fetch: Fetch
) -> None:
    _url, loop = service
    await jp_fetch("api", "status")
    await eventually(lambda: loop.store.report("alice") is not None)
    report = loop.store.report("alice")
    assert report is not None
    assert report.activity.keeps_kernel_state is False


@pytest.mark.parametrize(
    "gpuaas_config", [{"activity_report_interval": 3600, "activity_watch_interval": 0.2}]
)
async def test_a_cell_after_a_quiet_spell_is_reported_at_once(
    service: tuple[str, ReclaimLoop], jp_fetch: Fetch, jp_ws_fetch: Fetch, jp_serverapp: Any
) -> None:
    """Reports every hour, yet the service hears of the first cell within seconds: it never
    judges the server by the report from before its user came back."""
    _url, loop = service
    await eventually(lambda: loop.store.report("alice") is not None)  # the first, at start
    first = loop.store.report("alice")
    assert first is not None
    assert first.activity.kernels == ()  # nothing ran yet
    kernel = await start_session(jp_fetch, "train.ipynb")
    await execute(jp_ws_fetch, kernel, "x = 41")
    await eventually(
        lambda: (
            (report := loop.store.report("alice")) is not None
            and [k.kernel_id for k in report.activity.kernels] == [kernel]
        )
    )
    (app,) = jp_serverapp.extension_manager.extension_apps["jupyter_gpuaas"]
    assert app.state.reporter.early >= 1

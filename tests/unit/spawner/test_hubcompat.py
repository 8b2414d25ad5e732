"""What differs between JupyterHub 5.5 (z2jh's hub image) and 6.x: one refusal type on both, and
5.5's count of consecutive failed spawns kept to errors, as on 6.x.

The hub side of the count is replayed as JupyterHub 5.5.0 does it (``handlers/base.py``
``_track_failure_count``: add one when the spawn's future fails, exit at the limit); the real hub
runs it in tests/real_hub/test_spawn.py on both lines (``make test-hub55``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import jupyterhub
import pytest
from tornado import web

from gpuaas_spawner import hubcompat
from gpuaas_spawner.hubcompat import SpawnException, not_counted

LIMIT = 5  # z2jh's hub.consecutiveFailureLimit


class FakeHandler:
    def __init__(self) -> None:
        self.settings: dict[str, Any] = {}


class FakeSpawner:
    def __init__(self, future: asyncio.Future[Any] | None, handler: FakeHandler | None) -> None:
        self._spawn_future = future
        self.handler = handler


def hub55_counts_failure(settings: dict[str, Any]) -> bool:
    """JupyterHub 5.5.0's ``_track_failure_count`` for a failed spawn: True if the hub exits."""
    settings.setdefault("failure_count", 0)
    settings["failure_count"] += 1
    return bool(settings["failure_count"] >= LIMIT)


@pytest.fixture
def on_hub55(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hubcompat, "COUNTS_EVERY_FAILURE", True)


def test_the_line_is_told_by_the_installed_jupyterhub() -> None:
    major = int(jupyterhub.__version__.split(".")[0])
    assert hubcompat.COUNTS_EVERY_FAILURE is (major < 6)


def test_one_refusal_type_on_both_lines() -> None:
    exc: Any = SpawnException("Queued too long: 50% of team-a's GPUs", reason="queue_timeout")
    assert exc.status_code == 400
    assert exc.reason == "queue_timeout"
    assert exc.message == "Queued too long: 50% of team-a's GPUs"
    assert "50% of team-a" in str(exc)  # a "%" is not read as a format
    assert isinstance(exc, web.HTTPError)  # what JupyterHub's handlers turn into a 400


async def test_refusals_in_a_row_never_stop_a_55_hub(on_hub55: None) -> None:
    handler = FakeHandler()
    spawner = FakeSpawner(asyncio.get_running_loop().create_future(), handler)
    for _ in range(3 * LIMIT):
        not_counted(spawner, SpawnException("queued too long", reason="queue_timeout"))
        assert not hub55_counts_failure(handler.settings)
    assert handler.settings["failure_count"] == 0


@pytest.mark.parametrize(
    "error",
    [
        RuntimeError("the API server went away"),
        web.HTTPError(503),
        web.HTTPError(500, reason="error"),
    ],
)
async def test_errors_still_count_on_55(on_hub55: None, error: BaseException) -> None:
    handler = FakeHandler()
    spawner = FakeSpawner(asyncio.get_running_loop().create_future(), handler)
    exits = []
    for _ in range(LIMIT):
        not_counted(spawner, error)
        exits.append(hub55_counts_failure(handler.settings))
    assert exits == [False] * (LIMIT - 1) + [True]


async def test_a_spawn_exception_is_never_counted_on_55_whatever_its_status(
    on_hub55: None,
) -> None:
    """As JupyterHub 6 (``_track_failure_count``: a SpawnException is a "failure"): a cluster that
    is down (503) ends spawns cleanly, and the hub does not exit over it."""
    handler = FakeHandler()
    spawner = FakeSpawner(asyncio.get_running_loop().create_future(), handler)
    for _ in range(3 * LIMIT):
        not_counted(spawner, SpawnException("down", reason="cluster_unavailable", status_code=503))
        assert not hub55_counts_failure(handler.settings)
    assert handler.settings["failure_count"] == 0


async def test_a_refusal_between_errors_leaves_their_count(on_hub55: None) -> None:
    handler = FakeHandler()
    spawner = FakeSpawner(asyncio.get_running_loop().create_future(), handler)
    for _ in range(LIMIT - 1):
        hub55_counts_failure(handler.settings)  # errors
    not_counted(spawner, SpawnException("preempted", reason="preempted"))
    assert not hub55_counts_failure(handler.settings)
    assert handler.settings["failure_count"] == LIMIT - 1


async def test_nothing_taken_off_for_a_spawn_the_hub_does_not_track(on_hub55: None) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    done.set_result(None)
    refusal = SpawnException("no", reason="invalid_options")
    for spawner in (
        FakeSpawner(None, FakeHandler()),  # not started through spawn_single_user
        FakeSpawner(done, FakeHandler()),  # that spawn is over: nothing would add one back
        FakeSpawner(loop.create_future(), None),  # no requesting handler
    ):
        not_counted(spawner, refusal)
        assert "failure_count" not in (spawner.handler.settings if spawner.handler else {})


async def test_nothing_to_do_on_6(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hubcompat, "COUNTS_EVERY_FAILURE", False)
    handler = FakeHandler()
    spawner = FakeSpawner(asyncio.get_running_loop().create_future(), handler)
    not_counted(spawner, SpawnException("no", reason="invalid_options"))
    assert handler.settings == {}

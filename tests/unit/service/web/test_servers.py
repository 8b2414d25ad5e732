"""Which running server a token was issued to (web/servers.py): only the token the hub issued to
a server the hub has running passes, never one its user minted with the same scopes or note, nor
one naming a made-up server; a flood of made-up names costs the hub a few calls."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from tornado import web

from gpuaas_service.web.servers import ServerTokens, issued_token_id
from tests.support.clock import FakeClock
from tests.support.hub_tokens import SERVICE_SCOPE, STARTED, TokenHub


async def refused(check: ServerTokens, model: Any) -> web.HTTPError:
    with pytest.raises(web.HTTPError) as err:
        await check.server_of(model)
    return err.value


async def test_the_token_the_hub_issued_to_a_running_server_is_that_server() -> None:
    hub = TokenHub()
    default, named = hub.start("alice"), hub.start("alice", "gpu2")
    check = ServerTokens(hub)
    assert await check.server_of(hub.whoami[default]) == ("alice", "")
    assert await check.server_of(hub.whoami[named]) == ("alice", "gpu2")


@pytest.mark.parametrize(
    "when",
    [STARTED - timedelta(minutes=5), STARTED + timedelta(minutes=5)],
    ids=["before", "after"],
)
async def test_a_token_its_user_mints_with_the_servers_scopes_and_note_is_refused(
    when: Any,
) -> None:
    """The scopes of a server's token and its note are the user's to choose when they mint one:
    what tells the server's own is that the hub created it as that start began."""
    hub = TokenHub()
    scopes = ["access:servers!server=alice/", "users:activity!user=alice", SERVICE_SCOPE]
    forged = hub.mint("alice", scopes, note="Server at /user/alice//", at=when)
    own = hub.start("alice")
    check = ServerTokens(hub)
    error = await refused(check, hub.whoami[forged])
    assert error.status_code == 403
    assert "issued to the server alice/" in str(error.log_message)
    assert await check.server_of(hub.whoami[own]) == ("alice", "")


async def test_a_token_for_a_server_the_hub_has_not_running_is_refused() -> None:
    hub = TokenHub()
    hub.start("alice")
    made_up = hub.mint("alice", ["access:servers!server=alice/made-up", SERVICE_SCOPE])
    error = await refused(ServerTokens(hub), hub.whoami[made_up])
    assert error.status_code == 403
    assert "no running server alice/made-up" in str(error.log_message)


async def test_a_stopped_servers_token_is_refused_once_the_hub_says_so() -> None:
    hub, clock = TokenHub(), FakeClock()
    token = hub.start("alice", "gpu2")
    check = ServerTokens(hub, user_ttl=30, clock=clock)
    assert await check.server_of(hub.whoami[token]) == ("alice", "gpu2")
    hub.stop("alice", "gpu2")
    clock.now += 31
    assert (await refused(check, hub.whoami[token])).status_code == 403


async def test_a_flood_of_made_up_servers_costs_the_hub_one_call_per_refresh() -> None:
    hub, clock = TokenHub(), FakeClock()
    hub.start("mallory")
    check = ServerTokens(hub, refresh_after=5, clock=clock)
    for i in range(1000):
        made_up = hub.mint("mallory", [f"access:servers!server=mallory/x{i}", SERVICE_SCOPE])
        assert (await refused(check, hub.whoami[made_up])).status_code == 403
    assert len(hub.calls) == 1
    clock.now += 6
    await refused(check, hub.whoami[made_up])
    assert len(hub.calls) == 2


async def test_a_server_started_after_the_users_servers_were_asked_is_found() -> None:
    hub, clock = TokenHub(), FakeClock()
    first = hub.start("alice")
    check = ServerTokens(hub, refresh_after=5, clock=clock)
    await check.server_of(hub.whoami[first])
    late = hub.start("alice", "late")
    clock.now += 6
    assert await check.server_of(hub.whoami[late]) == ("alice", "late")


@pytest.mark.parametrize(
    ("model", "words"),
    [
        (None, "a server's token"),
        ({"kind": "user", "name": "alice", "scopes": [SERVICE_SCOPE]}, "exactly one server"),
        (
            {"kind": "user", "name": "alice", "scopes": ["access:servers!server=alice/"]},
            "JupyterHub 5",
        ),
    ],
)
async def test_tokens_that_are_no_servers_are_refused_without_asking_the_hub(
    model: Any, words: str
) -> None:
    hub = TokenHub()
    hub.start("alice")
    error = await refused(ServerTokens(hub), model)
    assert error.status_code == 403
    assert words in str(error.log_message)
    assert hub.calls == []


async def test_the_hub_not_answering_is_a_503_not_a_refusal() -> None:
    hub = TokenHub()
    token = hub.start("alice")
    hub.down = True
    error = await refused(ServerTokens(hub), hub.whoami[token])
    assert error.status_code == 503
    assert "connection refused" in str(error.log_message)


def test_the_newest_token_noted_for_the_server_before_its_start_is_its_own() -> None:
    url, started = "http://hub.example/user/a%20b/gpu/", "2026-11-30T11:00:00.000000Z"
    tokens: list[dict[str, Any]] = [
        {"id": "a1", "note": "Server at /user/a%20b/gpu/", "created": "2026-11-30T10:00:00Z"},
        {"id": "a2", "note": "Server at /user/a%20b/gpu/", "created": "2026-11-30T10:59:59.9Z"},
        {"id": "a3", "note": "Server at /user/a%20b/gpu/", "created": "2026-11-30T11:05:00Z"},
        {"id": "a4", "note": "Server at /user/a%20b/other/", "created": "2026-11-30T10:59:59.95Z"},
        {"id": "a5", "note": "Requested via api", "created": "2026-11-30T10:59:59.99Z"},
    ]
    assert issued_token_id(tokens, url, started) == "a2"
    assert issued_token_id(tokens, url, "") == ""
    assert issued_token_id([], url, started) == ""


class SlowHub(TokenHub):
    """Answers after the event loop has turned a few times, or fails as asked."""

    def __init__(self) -> None:
        super().__init__()
        self.fail: Exception | None = None

    async def user(self, name: str) -> dict[str, Any] | None:
        for _ in range(3):
            await asyncio.sleep(0)
        if self.fail is not None:
            self.calls.append(f"user {name}")
            raise self.fail
        return await super().user(name)


async def test_requests_at_once_for_one_user_share_one_question_to_the_hub() -> None:
    hub = SlowHub()
    tokens = [hub.start("alice", f"s{i}") for i in range(5)]
    check = ServerTokens(hub)
    found = await asyncio.gather(*(check.server_of(hub.whoami[t]) for t in tokens))
    assert found == [("alice", f"s{i}") for i in range(5)]
    assert hub.calls.count("user alice") == 1


async def test_an_unexpected_failure_reaches_every_waiting_request() -> None:
    """Not only the hub's refusals: whatever ends the question ends the requests waiting on it,
    and the next request asks again."""
    hub = SlowHub()
    tokens = [hub.start("alice", f"s{i}") for i in range(3)]
    hub.fail = ValueError("the hub's answer was not JSON")
    check = ServerTokens(hub)
    answers = await asyncio.wait_for(
        asyncio.gather(*(check.server_of(hub.whoami[t]) for t in tokens), return_exceptions=True),
        5,
    )
    assert all(isinstance(a, ValueError) for a in answers)
    hub.fail = None
    assert await check.server_of(hub.whoami[tokens[0]]) == ("alice", "s0")


async def test_a_server_started_again_is_known_by_its_new_token_after_a_refresh() -> None:
    """A stop and a start within the users' cache time: the new start's token passes once the
    hub may be asked again (refresh_after), not only when the cache expires (user_ttl)."""
    hub, clock = TokenHub(), FakeClock()
    first = hub.start("alice")
    check = ServerTokens(hub, user_ttl=30, refresh_after=5, clock=clock)
    assert await check.server_of(hub.whoami[first]) == ("alice", "")
    hub.stop("alice")
    again = hub.start("alice", at=STARTED + timedelta(minutes=2))
    clock.now += 6
    assert await check.server_of(hub.whoami[again]) == ("alice", "")
    assert (await refused(check, hub.whoami[first])).status_code == 403  # the old start's

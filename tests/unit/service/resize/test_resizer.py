"""The Hub calls of a move (resize/resizer.py): the offer from the hub's recent answer, a move
checked whole before the stop, one move per user at a time, the way down carried out."""

from __future__ import annotations

import asyncio

import pytest

from gpuaas_service.resize.plan import ResizeRefused, WayDownRule
from gpuaas_service.resize.resizer import Resizer
from jupyter_gpuaas.core import api_types as api
from tests.support.api_schema import schema_errors
from tests.support.hub_moves import TEAM_A, TickingHub
from tests.support.samples import GPU, NAMESPACE, cluster_queue, fraction_catalog, state

CATALOG = fraction_catalog()
GiB = 1 << 30
HOUR = 3600.0
RULE = WayDownRule(below=0.25, after_seconds=1800, headroom=1.25)


def up(answer: api.ServiceResizeOffer) -> api.ServiceResizeOffering:
    """The next size up, which the test expects the answer to offer."""
    bigger = answer["next"]
    assert bigger is not None, answer
    return bigger


def down(answer: api.ServiceResizeOffer) -> api.ServiceResizeDown:
    """The way down, which the test expects the answer to offer."""
    smaller = answer.get("down")
    assert smaller is not None, answer
    return smaller


async def test_the_next_size_up_carries_its_headroom_where_the_service_reads_the_queues() -> None:
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    resizer = Resizer(hub, lambda: CATALOG, queue_state=lambda: state([], synced=False))
    answer = await resizer.offer("alice", "", TEAM_A)
    assert up(answer)["slug"] == "l4-half"
    assert up(answer)["headroom"]["fit"] == "unknown"  # the queues not read yet
    assert schema_errors("service_resize_offer", answer) == []


async def test_the_next_size_up_counts_the_users_own_share_as_freed() -> None:
    """team-a's pool holds one half-L4 (or two quarters); alice's quarter
    is the only one in it. The move stops her quarter before it starts the half, so the half
    starts now; the dialog said "will queue: first in line once a half-L4 frees up"."""
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    pool = [("l4-hami", GPU), ("l4-hami", "nvidia.com/total-gpumem")]
    pool.append(("l4-hami", "nvidia.com/total-gpucores"))
    notebooks = cluster_queue(
        "team-a-notebooks",
        quotas={fr: (q, 0, None) for fr, q in zip(pool, (2, 11264, 50), strict=True)},
        usage=dict(zip(pool, (1, 5632, 25), strict=True)),  # alice's quarter
    )
    resizer = Resizer(
        hub, lambda: CATALOG, queue_state=lambda: state([notebooks]), namespace=NAMESPACE
    )
    answer = await resizer.offer("alice", "", TEAM_A)
    assert up(answer)["slug"] == "l4-half"
    assert up(answer)["headroom"] == {
        "fit": "now",
        "message": "available now (1 of 1 half-L4 free)",
    }


async def test_a_move_the_spawner_would_refuse_at_the_start_is_refused_before_the_stop() -> None:
    """Fourth audit, finding 5: team-a allows 2 GPU servers; alice runs three (one charged to
    team-b, which she left). Before the fix the check counted two, answered 202 and stopped
    her server; the spawner then refused the start at the cap."""
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    hub.run("alice", {"team": "team-a", "offering": "mig-1g", "count": 1}, "a")
    hub.run("alice", {"team": "team-b", "offering": "mig-1g", "count": 1}, "old")
    resizer = Resizer(hub, lambda: CATALOG, queue_state=lambda: state([], synced=False))
    with pytest.raises(ResizeRefused) as caught:
        await resizer.move("alice", "", TEAM_A, {})
    assert caught.value.status == 409
    assert "2 GPU servers" in str(caught.value), caught.value
    assert "stop alice" not in hub.calls
    assert resizer.moving == {}
    offer = await resizer.offer("alice", "", TEAM_A)  # GET api/resize says so too
    assert offer["next"] is None
    assert "2 GPU servers" in offer["reason"]


async def test_two_moves_of_two_servers_of_one_user_never_both_stop() -> None:
    hub = TickingHub()
    hub.stop_after = 10**6  # the first stop never ends while the second is asked
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    hub.run("alice", {"team": "team-a", "offering": "cpu", "count": 1}, "notes")
    resizer = Resizer(hub, lambda: CATALOG, poll_interval=0.01)
    results = await asyncio.gather(
        resizer.move("alice", "", TEAM_A, {}),
        resizer.move("alice", "notes", TEAM_A, {}),
        return_exceptions=True,
    )
    moved = [r for r in results if isinstance(r, dict)]
    refused = [r for r in results if isinstance(r, ResizeRefused)]
    assert len(moved) == 1, results
    assert len(refused) == 1, results
    assert refused[0].status == 409
    assert "another of your servers is being moved" in str(refused[0])
    await asyncio.sleep(0.05)
    assert hub.calls.count("stop alice") == 1
    # bob's moves are his own
    hub.run("bob", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    assert (await resizer.move("bob", "", TEAM_A, {}))["moving"] is True
    for task in resizer.moving.values():
        task.cancel()


async def test_the_offer_is_served_from_the_hubs_recent_answer_and_a_move_asks_afresh() -> None:
    """Fourth audit, finding 9: GET api/resize asked the hub on every request (a sidebar asks
    often)."""
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    now = [1000.0]
    resizer = Resizer(hub, lambda: CATALOG, poll_interval=0.01, clock=lambda: now[0])
    for _ in range(5):
        assert up(await resizer.offer("alice", "", TEAM_A))["slug"] == "l4-half"
    assert resizer.hub_asked == 1
    now[0] += 4.9
    await resizer.offer("alice", "", TEAM_A)
    assert resizer.hub_asked == 1
    now[0] += 0.2  # 5 s: asked again
    await resizer.offer("alice", "", TEAM_A)
    assert resizer.hub_asked == 2
    await resizer.move("alice", "", TEAM_A, {})  # a move never trusts a kept answer
    assert resizer.hub_asked == 3
    while "stop alice" not in hub.calls:
        await asyncio.sleep(0.001)
    with pytest.raises(ResizeRefused) as caught:  # and the next offer sees it stopping
        await resizer.offer("alice", "", TEAM_A)
    assert caught.value.status == 409
    assert resizer.hub_asked == 4
    for task in resizer.moving.values():
        task.cancel()


async def test_the_offer_carries_the_way_down_and_the_move_down_starts_the_smaller_share() -> None:
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-half", "count": 1})
    peaks = {("alice", ""): (2 * GiB, 2 * HOUR)}
    resizer = Resizer(
        hub,
        lambda: CATALOG,
        poll_interval=0.01,
        session_peak=lambda user, server: peaks.get((user, server)),
        way_down_rule=RULE,
    )

    answer = await resizer.offer("alice", "", TEAM_A)

    assert schema_errors("service_resize_offer", answer) == []
    assert answer["down"] == {
        "slug": "l4-quarter",
        "title": "l4-quarter",
        "count": 1,
        "memory": 5632 << 20,
        "memory_text": "5.5 GiB",
        "peak": 2 * GiB,
        "peak_text": "2 GiB",
    }
    assert up(answer)["slug"] == "mig-3g"  # the way up is still there
    moved = await resizer.move("alice", "", TEAM_A, {"offering": "l4-quarter"})
    assert moved["to"]["slug"] == "l4-quarter"
    for _ in range(300):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert [(u, o["offering"]) for u, _s, o in hub.started] == [("alice", "l4-quarter")]


async def test_no_way_down_is_offered_without_the_usage_recorder() -> None:
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "h100", "count": 1})
    answer = await Resizer(hub, lambda: CATALOG).offer("alice", "", TEAM_A)
    assert answer["down"] is None
    assert schema_errors("service_resize_offer", answer) == []


async def test_the_way_down_waits_as_long_as_the_sessions_policy_says() -> None:
    """``way_down_after`` is a policy field; the service's option is the
    default for sessions whose policy sets none."""
    from gpuaas_service.reclaim.policy import load_policy

    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-half", "count": 1})
    peaks = {("alice", ""): (2 * GiB, 120.0)}  # two minutes measured; the rule wants 30
    policies = [
        load_policy(
            {
                "policies": [
                    {
                        "name": "halves",
                        "match": {"offerings": ["l4-half"]},
                        "idle_after": "5m",
                        "way_down_after": "2m",
                    },
                    {"name": "rest", "idle_after": "5m"},
                ]
            }
        )
    ]
    resizer = Resizer(
        hub,
        lambda: CATALOG,
        session_peak=lambda user, server: peaks.get((user, server)),
        way_down_rule=RULE,
        policies=lambda: policies[0],
    )
    assert down(await resizer.offer("alice", "", TEAM_A))["slug"] == "l4-quarter"
    resizer.offer_seconds = 0  # the next offers ask the hub again
    peaks[("alice", "")] = (2 * GiB, 119.0)
    assert (await resizer.offer("alice", "", TEAM_A))["down"] is None
    # a policy without its own: the service's 30 minutes
    policies[0] = load_policy({"policies": [{"name": "rest", "idle_after": "5m"}]})
    peaks[("alice", "")] = (2 * GiB, 1799.0)
    assert (await resizer.offer("alice", "", TEAM_A))["down"] is None
    peaks[("alice", "")] = (2 * GiB, 1800.0)
    assert down(await resizer.offer("alice", "", TEAM_A))["slug"] == "l4-quarter"


async def test_a_move_records_the_peak_it_was_made_for_before_the_stop() -> None:
    """The size advice never saw the peak of a session moved at its cap."""
    hub = TickingHub()
    hub.run("alice", {"team": "team-a", "offering": "l4-quarter", "count": 1})
    order: list[str] = []
    stop = hub.stop_server

    async def stop_server(user: str, server: str) -> int:
        order.append(f"stop {user}")
        return await stop(user, server)

    hub.stop_server = stop_server  # type: ignore[method-assign]
    resizer = Resizer(
        hub,
        lambda: CATALOG,
        poll_interval=0.01,
        peak_at_move=lambda user, server: order.append(f"peak {user} {server!r}"),
    )
    with pytest.raises(ResizeRefused):  # a refused move records nothing
        await resizer.move("alice", "", TEAM_A, {"offering": "nothing-like-it"})
    assert order == []
    await resizer.move("alice", "", TEAM_A, {})
    for _ in range(300):
        if hub.started:
            break
        await asyncio.sleep(0.01)
    assert order == ["peak alice ''", "stop alice"]

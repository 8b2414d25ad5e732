"""The notification hook: the policy's ``notify`` field, and the loop posting warnings and
reclaims to a real HTTP server on 127.0.0.1 in the background."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from datetime import timedelta
from typing import Any

import pytest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets
from tornado.web import Application, RequestHandler

from gpuaas_service.clients.hub import HubClient
from gpuaas_service.reclaim.decide import Action
from gpuaas_service.reclaim.notify import Notifier
from gpuaas_service.reclaim.policy import MAX_NOTIFY_TIMEOUT, Notify, PolicyError, load_policy
from tests.support.service_world import POLICY, World

# --------------------------------------------------------------------------- the field


def policy_with(notify: Any) -> dict[str, Any]:
    return {**POLICY, "notify": notify}


def test_notify_is_read_with_a_default_timeout() -> None:
    assert load_policy(POLICY).notify is None
    got = load_policy(policy_with({"webhook": "https://chat.example.org/hooks/x"})).notify
    assert got == Notify("https://chat.example.org/hooks/x", timeout=timedelta(seconds=5))
    got = load_policy(policy_with({"webhook": "http://127.0.0.1:9/h", "timeout": "2s"})).notify
    assert got is not None
    assert got.timeout == timedelta(seconds=2)


@pytest.mark.parametrize(
    ("notify", "path", "message"),
    [
        ("https://x.org", "notify", "must be a mapping"),
        ({}, "notify.webhook", "is required"),
        ({"webhook": 3}, "notify.webhook", "must be a string"),
        ({"webhook": "ftp://x.org/h"}, "notify.webhook", "is not an http(s) URL"),
        ({"webhook": "chat.example.org"}, "notify.webhook", "is not an http(s) URL"),
        ({"webhook": "https://u:p@x.org/h"}, "notify.webhook", "must not carry credentials"),
        ({"webhook": "https://x.org/h", "timeout": 5}, "notify.timeout", "needs a unit"),
        ({"webhook": "https://x.org/h", "timeout": "0"}, "notify.timeout", "longer than 0"),
        ({"webhook": "https://x.org/h", "timeout": "5m"}, "notify.timeout", "longer than 1m"),
        ({"webhook": "https://x.org/h", "timout": "5s"}, "notify.timout", "did you mean 'timeout'"),
    ],
)
def test_notify_errors_have_field_paths(notify: Any, path: str, message: str) -> None:
    with pytest.raises(PolicyError) as e:
        load_policy(policy_with(notify))
    assert [err.path for err in e.value.errors] == [path]
    assert message in e.value.errors[0].message


def test_notify_errors_come_with_the_others() -> None:
    with pytest.raises(PolicyError) as e:
        load_policy({**policy_with({"webhook": "nope"}), "handoff_timeout": "soon"})
    assert {err.path for err in e.value.errors} == {"notify.webhook", "handoff_timeout"}


# --------------------------------------------------------------------------- a real receiver


class Receiver:
    """A tornado app on 127.0.0.1 that records what is posted to /hook."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.arrived = asyncio.Event()
        outer = self

        class Hook(RequestHandler):
            def post(self) -> None:
                outer.posts.append((dict(self.request.headers), json.loads(self.request.body)))
                outer.arrived.set()
                self.set_status(204)

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        self.server = HTTPServer(Application([("/hook", Hook)]))
        self.server.add_sockets([sock])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def stop(self) -> None:
        self.server.stop()


def world_posting_to(url: str, timeout: str = "5s") -> World:
    return World(policy=policy_with({"webhook": url, "timeout": timeout}))


def silent_listener() -> socket.socket:
    """A webhook that accepts connections (the kernel's backlog) and never answers."""
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    silent.setblocking(False)
    return silent


async def hang_up(silent: socket.socket, posts: int) -> None:
    """End ``posts`` posts waiting on ``silent`` at once (their connections closed unanswered),
    so that a test need not wait out their timeout."""
    for _ in range(posts):
        conn, _addr = await asyncio.wait_for(asyncio.get_running_loop().sock_accept(silent), 10)
        conn.close()


async def test_warnings_and_reclaims_are_posted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.notify")
    receiver = Receiver()
    try:
        w = world_posting_to(receiver.url)
        assert w.loop.notifier is not None
        plan = await w.cycle()
        assert {d.workbench.key for d in plan.with_action(Action.WARN)} == {"alice", "bob"}
        await w.loop.notifier.drain()  # the posts and their answers, not a poll of the receiver
        warned = sorted((p for _, p in receiver.posts), key=lambda p: p["user"])
        assert [(p["event"], p["user"], p["server"]) for p in warned] == [
            ("warn", "alice", ""),
            ("warn", "bob", ""),
        ]
        alice = warned[0]
        assert alice["reclaim_at"] == "2026-11-30T12:01:30.000Z"  # warned at 12:01:00, 30 s
        assert alice["at"] == "2026-11-30T12:01:00.000Z"
        assert alice["team"] == "team-a"
        assert alice["kind"] == "mig"
        assert alice["offering"] == "local-mig-1g"
        assert "team-a/train" in alice["reason"]
        assert alice["dry_run"] is False
        assert set(alice) == {
            "event", "user", "server", "team", "kind", "offering", "reason", "reclaim_at",
            "at", "handoff", "dry_run",
        }  # fmt: skip
        headers = receiver.posts[0][0]
        assert headers["Content-Type"] == "application/json"
        assert "Authorization" not in headers
        assert not any("token" in json.dumps(p).lower() for _, p in receiver.posts)

        await w.cycle(after=10)  # waiting: no second post
        await w.loop.notifier.drain()
        assert len(receiver.posts) == 2

        plan = await w.cycle(after=25)
        assert {d.workbench.key for d in plan.with_action(Action.RECLAIM)} == {"alice", "bob"}
        await w.loop.notifier.drain()
        reclaimed = sorted((p for _, p in receiver.posts[2:]), key=lambda p: p["user"])
        assert [(p["event"], p["user"]) for p in reclaimed] == [
            ("reclaim", "alice"),
            ("reclaim", "bob"),
        ]
        assert reclaimed[0]["reclaim_at"] == reclaimed[0]["at"] == "2026-11-30T12:01:35.000Z"
        assert reclaimed[0]["handoff"] == "team-a/train"
        assert w.loop.notifier.sent == 4
        assert w.loop.notifier.failed == 0
        lines = [
            json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.notify"
        ]
        assert {(x["result"], x["notice"], x["user"]) for x in lines} == {
            ("sent", "warn", "alice"),
            ("sent", "warn", "bob"),
            ("sent", "reclaim", "alice"),
            ("sent", "reclaim", "bob"),
        }
        assert all(x["webhook_host"] == f"127.0.0.1:{receiver.port}" for x in lines)
        assert all("/hook" not in json.dumps(x) for x in lines)  # the path may hold a secret
    finally:
        receiver.stop()


async def test_dry_run_posts_nothing() -> None:
    receiver = Receiver()
    try:
        w = World(policy={**policy_with({"webhook": receiver.url}), "dry_run": True})
        plan = await w.cycle()
        assert {d.workbench.key for d in plan.with_action(Action.WARN)} == {"alice", "bob"}
        assert w.loop.notifier is not None
        await w.loop.notifier.drain()
        assert receiver.posts == []
    finally:
        receiver.stop()


async def test_a_webhook_that_never_answers_does_not_delay_the_cycle(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Accepts the connection (the kernel's backlog), never answers: the cycle has finished
    and acted while its posts still wait in the background."""
    caplog.set_level(logging.INFO, logger="gpuaas.culler.notify")
    silent = silent_listener()
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"
        w = world_posting_to(url, timeout="30s")
        plan = await w.cycle()
        assert {d.workbench.key for d in plan.with_action(Action.WARN)} == {"alice", "bob"}
        assert len(w.kube.events) == 2  # acted in full
        notifier = w.loop.notifier
        assert notifier is not None
        assert len(notifier.tasks) == 2
        assert not any(t.done() for t in notifier.tasks)  # still waiting for an answer
        await hang_up(silent, 2)
        await notifier.drain()
        assert notifier.failed == 2
        assert notifier.sent == 0
        lines = [
            json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.notify"
        ]
        assert [x["result"] for x in lines] == ["failed", "failed"]
        assert all(x["error"] for x in lines)
        # the next cycles go on as usual
        plan = await w.cycle(after=35)
        assert {d.workbench.key for d in plan.with_action(Action.RECLAIM)} == {"alice", "bob"}
        await hang_up(silent, 2)
        await notifier.drain()
        assert notifier.failed == 4  # one try each: no retries
    finally:
        silent.close()


async def test_a_post_with_no_answer_gives_up_after_its_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.notify")
    silent = silent_listener()
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"
        n = Notifier(Notify(url, timedelta(milliseconds=30)))
        post = n.notify({"event": "warn", "user": "alice", "server": ""})
        assert post is not None
        assert await asyncio.wait_for(post, 10) is False
        assert (n.failed, n.sent) == (1, 0)
        (line,) = (
            json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.notify"
        )
        assert line["result"] == "failed"
        assert "Timeout" in line["error"]
        assert line["seconds"] >= 0.03
    finally:
        silent.close()


async def test_a_refused_webhook_is_logged_and_the_cycle_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.notify")
    closed = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    w = world_posting_to(f"http://127.0.0.1:{port}/hook")
    plan = await w.cycle()
    assert len(plan.with_action(Action.WARN)) == 2
    assert w.loop.notifier is not None
    await w.loop.notifier.drain()
    assert w.loop.notifier.failed == 2
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "gpuaas.culler.notify"]
    assert [(x["event"], x["result"]) for x in lines] == [("culler.notify", "failed")] * 2


async def test_a_receiver_error_status_is_a_failure_not_a_retry() -> None:
    calls: list[int] = []

    class Broken(RequestHandler):
        def post(self) -> None:
            calls.append(1)
            self.set_status(500)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    server = HTTPServer(Application([("/hook", Broken)]))
    server.add_sockets([sock])
    try:
        n = Notifier(Notify(f"http://127.0.0.1:{sock.getsockname()[1]}/hook"))
        task = n.notify({"event": "warn", "user": "alice", "server": ""})
        assert task is not None
        assert await task is False
        assert calls == [1]
        assert n.failed == 1
    finally:
        server.stop()


async def test_posts_beyond_the_in_flight_limit_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="gpuaas.culler.notify")
    silent = silent_listener()
    try:
        n = Notifier(
            Notify(f"http://127.0.0.1:{silent.getsockname()[1]}/h", timedelta(seconds=30)),
            max_in_flight=2,
        )
        assert n.notify({"event": "warn", "user": "a", "server": ""}) is not None
        assert n.notify({"event": "warn", "user": "b", "server": ""}) is not None
        assert n.notify({"event": "warn", "user": "c", "server": ""}) is None
        assert n.dropped == 1
        await hang_up(silent, 2)
        await n.drain()
        assert n.failed == 2
        assert not n.tasks
        assert n.notify({"event": "warn", "user": "d", "server": ""}) is not None  # room again
        await hang_up(silent, 1)
        await n.drain()
        dropped = [
            json.loads(r.getMessage())
            for r in caplog.records
            if r.name == "gpuaas.culler.notify" and "dropped" in r.getMessage()
        ]
        assert [x["user"] for x in dropped] == ["c"]
    finally:
        silent.close()


async def test_a_webhook_that_never_answers_holds_up_neither_cycle_nor_hub() -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(200)  # accepts connections, never answers
    silent.setblocking(False)
    hook = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"
    held: list[socket.socket] = []

    class Users(RequestHandler):
        def get(self, name: str) -> None:
            self.finish({"name": name, "servers": {}})

    (hub_sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    hub_port = hub_sock.getsockname()[1]
    hub_server = HTTPServer(Application([(r"/hub/api/users/(.*)", Users)]))
    hub_server.add_sockets([hub_sock])
    notifier = Notifier(Notify(hook, timeout=MAX_NOTIFY_TIMEOUT))
    try:
        for i in range(50):  # a full house of posts in flight, each waiting its minute
            notifier.notify({"event": "warn", "user": f"u{i}"})
        loop = asyncio.get_running_loop()
        for _ in range(50):  # every post has its connection: all of them are in flight
            conn, _addr = await asyncio.wait_for(loop.sock_accept(silent), 10)
            held.append(conn)
        # Queued behind the webhook's posts, the hub's calls would wait their minute and time
        # out first: every one answered shows they were not (no wall-clock bet on a busy box).
        hub = HubClient(f"http://127.0.0.1:{hub_port}/hub/api", "t", timeout=20)
        models = await asyncio.gather(*(hub.user(f"u{i}") for i in range(20)))
        assert all(m is not None for m in models)
    finally:
        for task in list(notifier.tasks):
            task.cancel()
        hub_server.stop()
        for conn in held:
            conn.close()
        silent.close()


async def test_a_stop_sends_the_posts_under_way_and_drops_them_past_its_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    silent = silent_listener()
    try:
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/hook"
        w = world_posting_to(url, timeout="30s")
        await w.cycle()
        notifier = w.loop.notifier
        assert notifier is not None
        assert len(notifier.tasks) == 2  # the two warnings' posts wait for an answer
        stopping = asyncio.ensure_future(w.loop.stop(grace=5))
        await asyncio.sleep(0)
        assert not stopping.done()  # waiting for the posts
        await hang_up(silent, 2)
        assert await asyncio.wait_for(stopping, 5) is True
        assert notifier.failed == 2  # tried, each once, before the service ended

        # Another run (a stopped service begins no stop of a server): the warnings' posts
        # answered, the reclaims' ones get no answer within the grace.
        w = world_posting_to(url, timeout="30s")
        await w.cycle()
        await hang_up(silent, 2)
        notifier = w.loop.notifier
        assert notifier is not None
        await notifier.drain()
        await w.cycle(after=35)
        posts = set(notifier.tasks)
        assert len(posts) == 2
        assert await w.loop.stop(grace=0.01) is False
        await asyncio.sleep(0)
        assert all(p.cancelled() for p in posts)
        assert "webhook posts still in flight" in caplog.text
    finally:
        silent.close()

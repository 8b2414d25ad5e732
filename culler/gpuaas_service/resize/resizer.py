"""The Hub calls of a move (:mod:`gpuaas_service.resize`): :class:`Resizer` asks the hub what
runs, plans with :mod:`.plan` and stops and starts the server in the background."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from gpuaas_service.clients.hub import HubError
from gpuaas_service.reclaim.policy import PolicySet
from gpuaas_service.resize.plan import (
    ResizeRefused,
    SessionPeakFn,
    WayDownRule,
    current_choice,
    down_json,
    offering_json,
    others_usage,
    plan_resize,
    way_down,
)
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Catalog, Offering, Tenant
from jupyter_gpuaas.core.choice import Choice, HeadroomFn
from jupyter_gpuaas.core.headroom import (
    Headroom,
    QueueState,
    UserUsage,
    compute_headroom,
    released_by,
)

__all__ = ["ResizeHub", "Resizer"]

log = logging.getLogger("gpuaas.resize")


class ResizeHub(Protocol):
    """What a move asks of the hub (:class:`~gpuaas_service.clients.hub.HubClient`)."""

    async def user(self, name: str) -> dict[str, Any] | None: ...

    async def stop_server(self, user: str, server: str) -> int: ...

    async def start_server(self, user: str, server: str, options: Mapping[str, Any]) -> None: ...


@dataclass
class Resizer:
    """Moves servers to another offering (the next size up, or the way down offered), one move
    per user at a time."""

    hub: ResizeHub
    catalog: Callable[[], Catalog | None]
    queue_state: Callable[[], QueueState] | None = None
    namespace: str = "jupyterhub-users"
    """Where users' servers run (the headroom of a tenant without a namespace of its own)."""
    stop_timeout: float = 600.0
    """Seconds a stop may take before the move gives up (the hub's own stop timeout is less)."""
    poll_interval: float = 0.5
    """Seconds between asking the hub whether the server has stopped."""
    offer_seconds: float = 5.0
    """How long the hub's answer about a user serves ``GET api/resize`` again (a sidebar
    asks often; a move always asks afresh, and forgets what was kept of the user)."""
    clock: Callable[[], float] = field(default=time.monotonic)
    max_kept: int = 10_000
    """Users whose hub answer is kept at most (the least recently asked is forgotten)."""
    session_peak: SessionPeakFn | None = None
    """The running session's GPU-memory peak (the usage recorder's); ``None``: no way down."""
    way_down_rule: WayDownRule = field(default_factory=WayDownRule)
    """The way down's rule; its ``after_seconds`` is the service's ``way_down_after``, which a
    session's reclaim policy overrides with its own ``way_down_after``."""
    policies: Callable[[], PolicySet | None] | None = None
    """The reclaim policies in force (the loop's; ``None``: none read)."""
    peak_at_move: Callable[[str, str], None] | None = None
    """Records the session's GPU-memory peak as its server last reported it, as the move
    begins (the usage recorder's): the size advice then counts the peak the move was made
    for, which often falls between two of the loop's samples."""

    def __post_init__(self) -> None:
        self.moving: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.last_error: dict[tuple[str, str], str] = {}
        self._kept: OrderedDict[str, tuple[float, dict[str, Any] | None]] = OrderedDict()
        self.hub_asked = 0

    def _catalog(self) -> Catalog:
        catalog = self.catalog()
        if catalog is None:
            raise ResizeRefused(503, "no catalog is configured (c.GPUaaSService.catalog_file)")
        return catalog

    async def _user(self, user: str, *, kept: bool) -> dict[str, Any] | None:
        """The hub's model of ``user``; ``kept``: one asked within :attr:`offer_seconds` will
        do (``GET api/resize``), else asked afresh (a move)."""
        now = self.clock()
        found = self._kept.get(user)
        if kept and found is not None and now - found[0] < self.offer_seconds:
            return found[1]
        self.hub_asked += 1
        model = await self.hub.user(user)
        self._kept.pop(user, None)
        self._kept[user] = (now, model)
        while len(self._kept) > self.max_kept:
            self._kept.popitem(last=False)
        return model

    async def _running(
        self, user: str, server: str, *, kept: bool = False
    ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        """(the running server's model, all the user's servers); 409 when it is not running."""
        try:
            model = await self._user(user, kept=kept)
        except HubError as e:
            raise ResizeRefused(503, f"the hub cannot be asked now: {e}") from None
        servers = (model or {}).get("servers") or {}
        running = servers.get(server) if isinstance(servers, Mapping) else None
        if not isinstance(running, Mapping) or not running.get("ready") or running.get("pending"):
            raise ResizeRefused(409, "your server is not running (or is starting or stopping)")
        return running, servers

    def _headroom(self, usage: UserUsage, running: Choice) -> HeadroomFn | None:
        """The live headroom of a move from ``running``: its own share counted as freed (the
        move stops the server before it starts the new one, so Kueue sees that quota free)."""
        if self.queue_state is None:
            return None
        state = self.queue_state()
        released = released_by(running.offering, running.count)

        def room(tenant: Tenant, offering: Offering, count: int) -> Headroom:
            namespace = tenant.namespace or self.namespace
            return compute_headroom(
                tenant,
                offering,
                state,
                namespace=namespace,
                count=count,
                usage=usage,
                released=released if tenant.name == running.tenant.name else None,
            )

        return room

    async def plan(
        self, user: str, server: str, groups: Sequence[str], body: object
    ) -> tuple[Choice, Choice]:
        """(what runs, what it would move to) for ``body``; :class:`ResizeRefused` if none."""
        catalog = self._catalog()
        running, servers = await self._running(user, server)
        choice = current_choice(catalog, groups, running.get("user_options"))
        usage = others_usage(catalog, groups, servers, server)
        down = self._down(catalog, choice, user, server, groups)
        room = self._headroom(usage, choice)
        planned = plan_resize(catalog, choice, body, headroom=room, down=down)
        return choice, planned

    def _peak(self, user: str, server: str) -> tuple[int, float] | None:
        return None if self.session_peak is None else self.session_peak(user, server)

    def _rule(self, choice: Choice, user: str, groups: Sequence[str]) -> WayDownRule:
        """The way down's rule for this session: ``way_down_after`` of the reclaim policy that
        matches it (as the loop matches its workbench), else the service's."""
        policies = self.policies() if self.policies is not None else None
        policy = (
            policies.policy_for(
                team=choice.tenant.name,
                kind=choice.offering.kind,
                offering=choice.offering.slug,
                user=user,
                groups=groups,
            )
            if policies is not None
            else None
        )
        if policy is None or policy.way_down_after is None:
            return self.way_down_rule
        return replace(self.way_down_rule, after_seconds=policy.way_down_after.total_seconds())

    def _down(
        self, catalog: Catalog, choice: Choice, user: str, server: str, groups: Sequence[str]
    ) -> Offering | None:
        rule = self._rule(choice, user, groups)
        return way_down(catalog, choice, self._peak(user, server), rule)

    async def offer(self, user: str, server: str, groups: Sequence[str]) -> api.ServiceResizeOffer:
        """``GET api/resize``: the offering that runs, the next size up (``null`` and why
        not when there is none) and the way down (``null`` unless offered)."""
        catalog = self._catalog()
        running, servers = await self._running(user, server, kept=True)
        choice = current_choice(catalog, groups, running.get("user_options"))
        answer: api.ServiceResizeOffer = {
            "current": offering_json(choice.offering, choice.count),
            "next": None,
            "reason": "",
            "down": None,
        }
        usage = others_usage(catalog, groups, servers, server)
        room = self._headroom(usage, choice)
        down = self._down(catalog, choice, user, server, groups)
        if down is not None:
            try:
                smaller = plan_resize(
                    catalog, choice, {"offering": down.slug}, headroom=room, down=down
                )
            except ResizeRefused:
                pass  # it could not start now (a cap, a quota): not offered
            else:
                peak = (self._peak(user, server) or (0, 0.0))[0]
                answer["down"] = down_json(smaller.offering, smaller.count, peak)
        try:
            planned = plan_resize(catalog, choice, None, headroom=room)
        except ResizeRefused as e:
            answer["reason"] = str(e)
            return answer
        bigger = answer["next"] = offering_json(planned.offering, planned.count)
        if room is not None:
            fit = room(planned.tenant, planned.offering, planned.count)
            bigger["headroom"] = {"fit": fit.fit.value, "message": fit.message}
        return answer

    def _not_moving(self, user: str, server: str) -> None:
        """409 while this server, or another of the user's, is being moved: one move per user
        at a time, as each move's check counts the user's other servers as they run (two at
        once would each count the other as held, both stop, and one start be refused)."""
        if (user, server) in self.moving:
            raise ResizeRefused(409, "your server is already being moved")
        if any(u == user for u, _s in self.moving):
            raise ResizeRefused(
                409,
                "another of your servers is being moved: try again once it has started",
            )

    async def move(
        self, user: str, server: str, groups: Sequence[str], body: object
    ) -> api.ServiceResizeMove:
        """``POST api/resize``: checked now (the whole start, caps included, before the stop),
        then the stop and the start in the background."""
        key = (user, server)
        self._not_moving(user, server)
        choice, planned = await self.plan(user, server, groups, body)
        self._not_moving(user, server)  # asked twice at once: the first to get here moves
        options = planned.as_user_options()
        if self.peak_at_move is not None:
            self.peak_at_move(user, server)
        self.last_error.pop(key, None)
        self._kept.pop(user, None)  # its servers are changing: the next offer asks afresh
        task = asyncio.ensure_future(self._stop_and_start(user, server, options))
        self.moving[key] = task
        task.add_done_callback(lambda _t: self.moving.pop(key, None))
        log.info(
            "resize user=%s server=%s from=%s to=%s",
            user,
            server or "(default)",
            choice.offering.slug,
            planned.offering.slug,
        )
        return {
            "moving": True,
            "from": offering_json(choice.offering, choice.count),
            "to": offering_json(planned.offering, planned.count),
            "options": options,
        }

    async def _stop_and_start(self, user: str, server: str, options: dict[str, Any]) -> None:
        where = f"user={user} server={server or '(default)'}"
        try:
            await self.hub.stop_server(user, server)
            waited = 0.0
            while await self._still_there(user, server):
                if waited >= self.stop_timeout:
                    raise HubError(f"the server did not stop within {self.stop_timeout:.0f}s")
                await asyncio.sleep(self.poll_interval)
                waited += self.poll_interval
            await self.hub.start_server(user, server, options)
            self._kept.pop(user, None)
        except HubError as e:
            self.last_error[(user, server)] = str(e)
            log.error("resize failed %s offering=%s: %s", where, options["offering"], e)
            return
        log.info("resize started %s offering=%s", where, options["offering"])

    async def _still_there(self, user: str, server: str) -> bool:
        model = await self.hub.user(user)
        servers = (model or {}).get("servers") or {}
        return isinstance(servers, Mapping) and server in servers

"""The way up: a user's running server moved to the next bigger offering (docs/api.md).

A notebook near its GPU memory cap can only go on on a bigger share. The user's server holds
no Kubernetes credentials, and its hub token cannot stop and start itself, so the sidebar asks
this service (through the server extension, with the server's own token, as for every request
only a server may make: web/servers.py):

- ``GET api/resize`` — the server's offering and the next size up with its headroom, or why
  there is none;
- ``POST api/resize`` (``{}`` or ``{"offering": SLUG}``) — checked as a spawn is checked
  (:func:`~jupyter_gpuaas.core.choice.read_server_choice`: the team's offerings, the count, image
  and size, the live headroom), and bigger than what runs; answered 202 at once, then the
  server is stopped through the Hub API (``delete:servers``; its home volume stays) and started
  again with the same choice on the bigger offering (``servers``; the spawner validates
  it again, and its progress page shows the queue position, as for any spawn).

The way down (issue 36): a session whose GPU-memory peak has stayed far below its share for
long is offered a smaller one (``down`` in ``GET api/resize``: :func:`way_down` decides, with
the thresholds of :class:`WayDownRule`), and ``POST api/resize`` with that offering moves it
there the same way. The peak is what the server's own activity reports said this session
(the usage recorder's open run): a smaller share is offered, never imposed.

The decisions (:func:`current_choice`, :func:`bigger_offerings`, :func:`smaller_offerings`,
:func:`way_down`, :func:`plan_resize`) are pure; :class:`Resizer` does the Hub calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from tornado import web

from gpuaas_service.clients.hub import HubError
from gpuaas_service.web.base import ServerTokenHandler, error_answer, limit
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.catalog import Catalog, Offering, Tenant
from jupyter_gpuaas.core.choice import (
    SERVER_PURPOSE,
    Choice,
    HeadroomFn,
    TeamRefused,
    held_usage,
    pick_team,
    read_server_choice,
    stored_choice,
)
from jupyter_gpuaas.core.fields import FieldError, FieldErrors, did_you_mean, type_name
from jupyter_gpuaas.core.headroom import Headroom, QueueState, UserUsage, compute_headroom
from jupyter_gpuaas.core.parsing import ParseError, load_json
from jupyter_gpuaas.core.sizing import DEFAULT_HEADROOM, format_gib, offering_memory

__all__ = [
    "RESIZE_KEYS",
    "ResizeHub",
    "ResizeRefused",
    "Resizer",
    "SessionPeakFn",
    "WayDownRule",
    "bigger_offerings",
    "current_choice",
    "others_usage",
    "plan_resize",
    "resize_handlers",
    "smaller_offerings",
    "way_down",
]

log = logging.getLogger("gpuaas.resize")

RESIZE_KEYS = ("offering",)
"""The only key a move's body may hold: everything else of the choice stays as it runs."""
_PURPOSE = SERVER_PURPOSE


class ResizeRefused(Exception):
    """No move: ``status`` (400 a bad body, 403 not the team's, 409 not now) and why."""

    def __init__(self, status: int, message: str, path: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.path = path


# --------------------------------------------------------------------------- pure decisions


def current_choice(catalog: Catalog, groups: Sequence[str], options: object) -> Choice:
    """What the running server holds, from the ``user_options`` the hub stored for it (the
    spawner stores the canonical choice), read without the live checks (made when it started).
    409 when this catalog or the user's teams no longer know it."""
    if not isinstance(options, Mapping):
        options = {}
    try:
        tenant = pick_team(
            catalog.tenants_for_groups(groups), options.get("team"), purpose=_PURPOSE
        )
    except TeamRefused as e:
        raise ResizeRefused(409, f"Your server's team cannot be moved: {e}") from None
    errs = FieldErrors()
    choice = read_server_choice(errs, options, catalog, tenant)
    if choice is None:
        raise ResizeRefused(
            409, f"Your server's offering is no longer offered ({errs.items[0].message})."
        )
    return choice


def _memory(offering: Offering, count: int) -> int | None:
    """GPU memory the user's alone on ``count`` units; ``None``: not sized (CPU, time-shared)."""
    each = offering_memory(offering)
    return None if each is None else each * count


def _count_for(offering: Offering, count: int) -> int:
    return count if offering.min_count <= count <= offering.max_count else offering.default_count


def bigger_offerings(catalog: Catalog, choice: Choice) -> list[Offering]:
    """The team's offerings with more GPU memory of the user's own than ``choice``, the next
    size up first: those of the same pool (the ResourceFlavor: the same GPUs) before any other,
    then by memory, GPU-equivalents and catalog order. Time-shared GPUs never (their memory
    is not the user's alone)."""
    have = _memory(choice.offering, choice.count) or 0
    return _other_sizes(catalog, choice, lambda memory: memory > have)


def smaller_offerings(catalog: Catalog, choice: Choice) -> list[Offering]:
    """The team's offerings with less GPU memory of the user's own than ``choice``, those of
    the same pool first, then the smallest first (memory, GPU-equivalents, catalog order).
    Time-shared GPUs never, nor offerings without a GPU."""
    have = _memory(choice.offering, choice.count)
    if have is None:
        return []
    return _other_sizes(catalog, choice, lambda memory: memory < have)


def _other_sizes(catalog: Catalog, choice: Choice, wanted: Callable[[int], bool]) -> list[Offering]:
    """The team's other offerings whose memory of the user's own is ``wanted``: the same pool
    first, then by memory, GPU-equivalents and catalog order."""
    found: list[tuple[bool, int, Fraction, int, Offering]] = []
    for order, slug in enumerate(choice.tenant.offerings):
        offering = catalog.offerings.get(slug)
        if offering is None or offering.slug == choice.offering.slug:
            continue
        count = _count_for(offering, choice.count)
        memory = _memory(offering, count)
        if memory is None or not wanted(memory):
            continue
        other_pool = offering.flavor != choice.offering.flavor
        found.append((other_pool, memory, offering.gpu_equivalents_for(count), order, offering))
    return [f[-1] for f in sorted(found, key=lambda f: f[:4])]


@dataclass(frozen=True)
class WayDownRule:
    """When a session is offered a smaller share (``c.GPUaaSService.way_down_*``)."""

    below: float = 0.25
    """Its peak is at most this share of its GPU memory (``way_down_below``)."""
    after_seconds: float = 1800.0
    """It has run at least this long (``way_down_after``): a peak needs time to show."""
    headroom: float = DEFAULT_HEADROOM
    """The smaller share holds the peak times this (as the spawn form's advice sizes)."""


SessionPeakFn = Callable[[str, str], "tuple[int, float] | None"]
"""(user, server) → (the session's GPU-memory peak in bytes, seconds it has been measured),
or ``None`` where nothing was measured."""


def way_down(
    catalog: Catalog, choice: Choice, peak: tuple[int, float] | None, rule: WayDownRule
) -> Offering | None:
    """The smaller offering a session running ``choice`` is offered, or ``None``: its peak
    (bytes, seconds measured) has stayed at most ``rule.below`` of its memory for at least
    ``rule.after_seconds``, and a smaller offering holds the peak times ``rule.headroom`` (the
    smallest such, the same pool first)."""
    have = _memory(choice.offering, choice.count)
    if have is None or peak is None:
        return None
    peak_bytes, seconds = peak
    if seconds < rule.after_seconds or peak_bytes > rule.below * have:
        return None
    need = max(1, int(peak_bytes * max(1.0, rule.headroom)))
    smaller = smaller_offerings(catalog, choice)
    # smaller_offerings puts the same pool first, then the smallest: the first that fits
    return next(
        (o for o in smaller if (_memory(o, _count_for(o, choice.count)) or 0) >= need), None
    )


def _target_options(catalog: Catalog, choice: Choice, target: Offering) -> dict[str, Any]:
    """The running choice with ``target`` for its offering; the count, image and size kept
    where ``target`` allows them, else its defaults."""
    options: dict[str, Any] = {
        "team": choice.tenant.name,
        "offering": target.slug,
        "count": _count_for(target, choice.count),
    }
    if choice.image is not None and choice.image in catalog.images_for(target):
        options["image"] = choice.image.slug
    if choice.size is not None and choice.size in catalog.sizes_for(target):
        options["size"] = choice.size.slug
    return options


def _requested(body: object) -> str | None:
    """The offering a move's body names (``None``: the next size up); 400 for anything else."""
    if body is None:
        return None
    if not isinstance(body, Mapping):
        raise ResizeRefused(400, f"the body must be a JSON object, not {type_name(body)}")
    unknown = sorted(str(k) for k in body if k not in RESIZE_KEYS)
    if unknown:
        raise ResizeRefused(
            400,
            f"unknown field {unknown[0][:40]!r}{did_you_mean(unknown[0], RESIZE_KEYS)}; a move"
            ' takes only {"offering": SLUG} (the rest of your choice stays as it runs)',
            path=unknown[0][:40],
        )
    slug = body.get("offering")
    if slug is None:
        return None
    if not isinstance(slug, str) or not slug or len(slug) > 253:
        raise ResizeRefused(400, "offering must be an offering's slug", path="offering")
    return slug


def plan_resize(
    catalog: Catalog,
    choice: Choice,
    body: object,
    *,
    headroom: HeadroomFn | None = None,
    down: Offering | None = None,
) -> Choice:
    """The choice a server running ``choice`` moves to for the move ``body`` asks for (an
    offering, or none: the next size up), checked as a spawn is; else :class:`ResizeRefused`.

    In order: the body (400), the offering known (400) and offered to the team (403), bigger
    than what runs or the way down offered (``down``, from :func:`way_down`; 400), then the
    spawn's own checks of the whole choice with the live headroom (a per-user cap, a quota it
    can never fit: 409).
    """
    slug = _requested(body)
    bigger = bigger_offerings(catalog, choice)
    tenant = choice.tenant
    if slug is None:
        if not bigger:
            raise ResizeRefused(
                409, f"{tenant.display_name} offers nothing bigger than {_shown(choice)}."
            )
        target = bigger[0]
    else:
        found = catalog.offerings.get(slug)
        if found is None:
            raise ResizeRefused(
                400,
                f"unknown offering {slug[:40]!r}{did_you_mean(slug, tenant.offerings)}",
                path="offering",
            )
        if slug not in tenant.offerings:
            raise ResizeRefused(
                403, f"{found.display_name} is not offered to {tenant.display_name}", "offering"
            )
        if found not in bigger and (down is None or found.slug != down.slug):
            raise ResizeRefused(
                400,
                f"{found.display_name} is not bigger than {_shown(choice)}"
                + (f"; the next size up is {bigger[0].display_name}" if bigger else ""),
                path="offering",
            )
        target = found
    errs = FieldErrors()
    wanted = _target_options(catalog, choice, target)
    planned = read_server_choice(errs, wanted, catalog, tenant, headroom=headroom)
    if planned is None:
        first = errs.items[0]
        raise ResizeRefused(409, first.message, path=first.path)
    return planned


def _shown(choice: Choice) -> str:
    memory = _memory(choice.offering, choice.count)
    size = f" ({format_gib(memory)})" if memory else ""
    return f"your {choice.offering.display_name}{size}"


def _offering_json(offering: Offering, count: int) -> dict[str, Any]:
    memory = _memory(offering, count)
    return {
        "slug": offering.slug,
        "title": offering.display_name,
        "count": count,
        "memory": memory,
        "memory_text": format_gib(memory) if memory else None,
    }


def others_usage(
    catalog: Catalog, groups: Sequence[str], servers: Mapping[str, Any], server: str
) -> UserUsage:
    """What the user's other active servers hold (for the per-user caps), counted as the
    spawner counts them at the start (:func:`~jupyter_gpuaas.core.choice.stored_choice`):
    one whose options no longer validate (a team the user left) still holds its GPUs."""
    return held_usage(
        stored_choice(model.get("user_options") or {}, catalog, groups)
        for name, model in servers.items()
        if name != server and isinstance(model, Mapping)
    )


# --------------------------------------------------------------------------- the Hub calls


class ResizeHub(Protocol):
    """What a move asks of the hub (:class:`~gpuaas_service.clients.hub.HubClient`)."""

    async def user(self, name: str) -> dict[str, Any] | None: ...

    async def stop_server(self, user: str, server: str) -> int: ...

    async def start_server(self, user: str, server: str, options: Mapping[str, Any]) -> None: ...


@dataclass
class Resizer:
    """Moves servers to bigger offerings, one move per server at a time."""

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

    def _headroom(self, usage: UserUsage) -> HeadroomFn | None:
        if self.queue_state is None:
            return None
        state = self.queue_state()

        def room(tenant: Tenant, offering: Offering, count: int) -> Headroom:
            namespace = tenant.namespace or self.namespace
            return compute_headroom(
                tenant, offering, state, namespace=namespace, count=count, usage=usage
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
        down = self._down(catalog, choice, user, server)
        planned = plan_resize(catalog, choice, body, headroom=self._headroom(usage), down=down)
        return choice, planned

    def _peak(self, user: str, server: str) -> tuple[int, float] | None:
        return None if self.session_peak is None else self.session_peak(user, server)

    def _down(self, catalog: Catalog, choice: Choice, user: str, server: str) -> Offering | None:
        return way_down(catalog, choice, self._peak(user, server), self.way_down_rule)

    async def offer(self, user: str, server: str, groups: Sequence[str]) -> dict[str, Any]:
        """``GET api/resize``: the offering that runs, the next size up (``null`` and why
        not when there is none) and the way down (``null`` unless offered)."""
        catalog = self._catalog()
        running, servers = await self._running(user, server, kept=True)
        choice = current_choice(catalog, groups, running.get("user_options"))
        answer: dict[str, Any] = {
            "current": _offering_json(choice.offering, choice.count),
            "next": None,
            "reason": "",
            "down": None,
        }
        usage = others_usage(catalog, groups, servers, server)
        room = self._headroom(usage)
        down = self._down(catalog, choice, user, server)
        if down is not None:
            try:
                smaller = plan_resize(
                    catalog, choice, {"offering": down.slug}, headroom=room, down=down
                )
            except ResizeRefused:
                pass  # it could not start now (a cap, a quota): not offered
            else:
                peak = (self._peak(user, server) or (0, 0.0))[0]
                answer["down"] = {
                    **_offering_json(smaller.offering, smaller.count),
                    "peak": peak,
                    "peak_text": format_gib(peak),
                }
        try:
            planned = plan_resize(catalog, choice, None, headroom=room)
        except ResizeRefused as e:
            answer["reason"] = str(e)
            return answer
        answer["next"] = _offering_json(planned.offering, planned.count)
        if room is not None:
            fit = room(planned.tenant, planned.offering, planned.count)
            answer["next"]["headroom"] = {"fit": fit.fit.value, "message": fit.message}
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
    ) -> dict[str, Any]:
        """``POST api/resize``: checked now (the whole start, caps included, before the stop),
        then the stop and the start in the background."""
        key = (user, server)
        self._not_moving(user, server)
        choice, planned = await self.plan(user, server, groups, body)
        self._not_moving(user, server)  # asked twice at once: the first to get here moves
        options = planned.as_user_options()
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
            "from": _offering_json(choice.offering, choice.count),
            "to": _offering_json(planned.offering, planned.count),
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


# --------------------------------------------------------------------------- the handler


class ResizeHandler(ServerTokenHandler):
    """``GET``/``POST api/resize``: only the server's own token, for that server."""

    resizer: Resizer

    def initialize(self, context: ServiceContext, resizer: Resizer) -> None:
        self.bind(context)
        self.resizer = resizer

    def _caller(self) -> tuple[str, str, list[str]]:
        user, server = self.server_caller
        limit(self.context, "queue", user)
        return user, server, [str(g) for g in self.current_user.get("groups") or ()]

    def _refused(self, e: ResizeRefused) -> None:
        self.set_status(e.status)
        errors = [FieldError(e.path, str(e))] if e.path else None
        self.finish(json.dumps(error_answer(e.status, str(e), errors)))

    async def get(self) -> None:
        user, server, groups = self._caller()
        try:
            self.finish(json.dumps(await self.resizer.offer(user, server, groups)))
        except ResizeRefused as e:
            self._refused(e)

    async def post(self) -> None:
        user, server, groups = self._caller()
        try:
            body = load_json(self.request.body, max_bytes=4096)
        except ParseError as e:
            self._refused(ResizeRefused(400, f"not JSON: {e.message}", path=e.path))
            return
        try:
            answer = await self.resizer.move(user, server, groups, body)
        except ResizeRefused as e:
            self._refused(e)
            return
        self.set_status(202)
        self.finish(json.dumps(answer))


def resize_handlers(
    context: ServiceContext, resizer: Resizer
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    kw: dict[str, object] = {"context": context, "resizer": resizer}
    return [(context.root + "api/resize", ResizeHandler, kw)]

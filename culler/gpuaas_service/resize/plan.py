"""The decisions of a move (:mod:`gpuaas_service.resize`), pure: what runs, the next size up,
the way down, and the choice a move's body asks for, checked as a spawn is."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Catalog, Offering
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
from jupyter_gpuaas.core.fields import FieldErrors, did_you_mean, type_name
from jupyter_gpuaas.core.headroom import UserUsage
from jupyter_gpuaas.core.sizing import DEFAULT_HEADROOM, format_gib, offering_memory

__all__ = [
    "RESIZE_KEYS",
    "ResizeRefused",
    "SessionPeakFn",
    "WayDownRule",
    "bigger_offerings",
    "current_choice",
    "down_json",
    "offering_json",
    "others_usage",
    "plan_resize",
    "smaller_offerings",
    "way_down",
]

RESIZE_KEYS = ("offering",)
"""The only key a move's body may hold: everything else of the choice stays as it runs."""
_PURPOSE = SERVER_PURPOSE


class ResizeRefused(Exception):
    """No move: ``status`` (400 a bad body, 403 not the team's, 409 not now) and why."""

    def __init__(self, status: int, message: str, path: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.path = path


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


def offering_json(offering: Offering, count: int) -> api.ServiceResizeOffering:
    """An offering as ``api/resize`` shows it: slug, title, count and its memory."""
    memory = _memory(offering, count)
    return {
        "slug": offering.slug,
        "title": offering.display_name,
        "count": count,
        "memory": memory,
        "memory_text": format_gib(memory) if memory else None,
    }


def down_json(offering: Offering, count: int, peak: int) -> api.ServiceResizeDown | None:
    """The way down as ``api/resize`` shows it: the smaller offering with its memory, and the
    session's peak; ``None`` for an offering whose memory is not known (never a way down:
    :func:`way_down` picks one by its memory)."""
    memory = _memory(offering, count)
    if not memory:
        return None
    return {
        "slug": offering.slug,
        "title": offering.display_name,
        "count": count,
        "memory": memory,
        "memory_text": format_gib(memory),
        "peak": peak,
        "peak_text": format_gib(peak),
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

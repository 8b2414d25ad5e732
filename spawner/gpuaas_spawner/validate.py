"""One validation for every way a spawn request arrives.

The spawn form (``options_from_form``) and the REST API (``POST /hub/api/users/{u}/servers/{s}``
with JSON ``user_options``, or options stored earlier) both end in :func:`validate_options`.
It accepts exactly the canonical keys, checks every value against the catalog and the user's
teams, and returns a typed :class:`Choice`; anything else is refused with a message a person can
act on. Nothing a user sends reaches the pod except through a ``Choice``, so forged resources,
labels, queues or overrides have no path into a manifest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, TypeVar

from jupyter_gpuaas.core.catalog import Catalog, Image, Offering, Size, Tenant
from jupyter_gpuaas.core.headroom import Headroom, UserUsage

__all__ = [
    "OPTION_KEYS",
    "Choice",
    "OptionsError",
    "UserContext",
    "options_from_form_data",
    "pick_team",
    "stored_choice",
    "user_usage",
    "validate_options",
]

OPTION_KEYS = ("team", "offering", "count", "image", "size")
"""The only keys ``user_options`` may hold."""

_MAX_VALUE_LEN = 253
_COUNT_RE = re.compile(r"^[0-9]{1,4}$")
_COUNT_FIELD = "count-"
_FORM_IGNORED = ("_xsrf",)

HeadroomFn = Callable[[Tenant, Offering, int], Headroom]


class OptionsError(ValueError):
    """A refused spawn request. ``jupyterhub_message`` is what JupyterHub shows the user."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.jupyterhub_message = message


@dataclass(frozen=True)
class UserContext:
    """Who is asking: the user whose server it is (not an admin acting for them)."""

    name: str
    groups: tuple[str, ...]
    usage: UserUsage = field(default_factory=UserUsage)


@dataclass(frozen=True)
class Choice:
    """A validated spawn request: everything the pod is built from."""

    tenant: Tenant
    offering: Offering
    count: int
    image: Image | None = None
    size: Size | None = None

    def as_user_options(self) -> dict[str, Any]:
        """The canonical ``user_options`` (what the hub stores and re-validates next time)."""
        options: dict[str, Any] = {
            "team": self.tenant.name,
            "offering": self.offering.slug,
            "count": self.count,
        }
        if self.image is not None:
            options["image"] = self.image.slug
        if self.size is not None:
            options["size"] = self.size.slug
        return options


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_Choice = TypeVar("_Choice", Image, Size)


def _pick(
    options: Mapping[str, Any],
    key: str,
    offering: Offering,
    allowed: Sequence[_Choice],
    default: _Choice | None,
    known: Mapping[str, _Choice],
) -> _Choice | None:
    """The image or size asked for (``key``), if the offering allows it; else its default."""
    slug = _text(options, key)
    if slug is None:
        return default
    chosen = next((c for c in allowed if c.slug == slug), None)
    if chosen is None:
        where = f"with {offering.display_name}" if slug in known else "here"
        raise OptionsError(f"{key.capitalize()} {_show(slug)} is not offered {where}", field=key)
    return chosen


def _text(options: Mapping[str, Any], key: str) -> str | None:
    if key not in options or options[key] is None:
        return None
    value = options[key]
    if not isinstance(value, str):
        raise OptionsError(f"{key} must be a string, not {type(value).__name__}", field=key)
    if not value or len(value) > _MAX_VALUE_LEN:
        raise OptionsError(f"{key} {_show(value)} is not a valid choice", field=key)
    return value


def pick_team(
    catalog: Catalog, user: UserContext, requested: str | None, default_team: str
) -> Tenant:
    """The team to charge: the one asked for if it is the user's, else the only/default one."""
    mine = catalog.tenants_for_groups(user.groups)
    if not mine:
        raise OptionsError(
            "You are not in any team that may start GPU servers; ask an admin to add you "
            "to a team's group.",
            field="team",
        )
    if requested is not None:
        for tenant in mine:
            if tenant.name == requested:
                return tenant
        names = ", ".join(t.name for t in mine)
        raise OptionsError(
            f"{_show(requested)} is not one of your teams (yours: {names})", field="team"
        )
    if len(mine) == 1:
        return mine[0]
    for tenant in mine:
        if tenant.name == default_team:
            return tenant
    names = ", ".join(t.name for t in mine)
    raise OptionsError(f"You are in several teams ({names}); choose which to charge.", field="team")


def _count(options: Mapping[str, Any], offering: Offering) -> int:
    value = options.get("count")
    if value is None:
        return offering.default_count
    if isinstance(value, bool):
        raise OptionsError("count must be a whole number", field="count")
    if isinstance(value, str) and _COUNT_RE.match(value):
        value = int(value)
    if not isinstance(value, int):
        raise OptionsError(f"count must be a whole number, not {_show(value)}", field="count")
    if not offering.min_count <= value <= offering.max_count:
        if offering.min_count == offering.max_count:
            allowed = f"exactly {offering.min_count}"
        else:
            allowed = f"{offering.min_count} to {offering.max_count}"
        raise OptionsError(
            f"{offering.display_name}: count must be {allowed}, not {value}", field="count"
        )
    return value


def validate_options(
    options: object,
    catalog: Catalog,
    user: UserContext,
    *,
    default_team: str = "",
    headroom: HeadroomFn | None = None,
) -> Choice:
    """Check ``user_options`` against the catalog and the user's teams; return the choice.

    ``headroom`` (tenant, offering, count → :class:`Headroom`) adds the live checks: per-user
    caps, a team queue that can never admit it, the team's cap on waiting servers.
    """
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise OptionsError(f"user_options must be an object, not {type(options).__name__}")
    unknown = sorted(str(k) for k in options if k not in OPTION_KEYS)
    if unknown:
        shown = ", ".join(_show(k) for k in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise OptionsError(
            f"Unknown option(s) {shown}{more}; allowed: {', '.join(OPTION_KEYS)}",
            field=unknown[0],
        )

    tenant = pick_team(catalog, user, _text(options, "team"), default_team)

    slug = _text(options, "offering") or tenant.default_offering
    offering = catalog.offerings.get(slug)
    if offering is None:
        raise OptionsError(f"Unknown offering {_show(slug)}", field="offering")
    if slug not in tenant.offerings:
        raise OptionsError(
            f"{offering.display_name} is not available to {tenant.display_name}", field="offering"
        )
    count = _count(options, offering)

    image = _pick(
        options,
        "image",
        offering,
        catalog.images_for(offering),
        catalog.default_image_for(offering),
        catalog.images,
    )
    size = _pick(
        options,
        "size",
        offering,
        catalog.sizes_for(offering),
        catalog.default_size_for(offering),
        catalog.sizes,
    )

    if headroom is not None:
        room = headroom(tenant, offering, count)
        if not room.fit.selectable:
            detail = f" {room.detail}" if room.detail else ""
            raise OptionsError(
                f"{offering.display_name} cannot start for {tenant.display_name}: "
                f"{room.message}.{detail}",
                field="offering",
            )
    return Choice(tenant=tenant, offering=offering, count=count, image=image, size=size)


def options_from_form_data(form: Mapping[str, list[Any]], catalog: Catalog) -> dict[str, Any]:
    """Spawn-form fields (lists of strings, as JupyterHub passes them) → ``user_options``.

    Fields: ``team``, ``offering``, ``image``, ``size`` and a ``count-{offering}`` select per
    offering that has a choice of count (only the chosen offering's is used). Anything else is
    refused here already; values are checked by :func:`validate_options` afterwards.
    """
    count_fields = {f"{_COUNT_FIELD}{slug}" for slug in catalog.offerings}
    options: dict[str, Any] = {}
    counts: dict[str, Any] = {}
    for key, values in form.items():
        if key in _FORM_IGNORED:
            continue
        if key not in OPTION_KEYS and key not in count_fields:
            raise OptionsError(f"Unknown form field {_show(key)}", field=str(key))
        if key == "count":
            raise OptionsError("Unknown form field 'count'", field="count")
        if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
            raise OptionsError(f"Form field {_show(key)} must be given once", field=str(key))
        if key in count_fields:
            counts[key[len(_COUNT_FIELD) :]] = values[0]
        else:
            options[key] = values[0]
    chosen = options.get("offering")
    if isinstance(chosen, str) and chosen in counts:
        options["count"] = counts[chosen]
    return options


def stored_choice(
    options: object, catalog: Catalog, user: UserContext, *, default_team: str = ""
) -> Choice | None:
    """What an active server holds, from the ``user_options`` the hub stored for it.

    For a server this hub process did not validate (it was started before a hub restart). Its
    options are re-read through :func:`validate_options` (without the live checks, which were
    made when it started), so a team default, a count sent as text or a missing key mean what
    they meant for the pod. Options that no longer validate (the catalog or the user's teams
    changed since) are read as the canonical form the spawner stores: a known offering with its
    count. ``None``: it holds nothing this catalog knows of.
    """
    try:
        return validate_options(options, catalog, user, default_team=default_team)
    except OptionsError:
        pass
    if not isinstance(options, Mapping):
        return None
    slug = options.get("offering")
    offering = catalog.offerings.get(slug) if isinstance(slug, str) else None
    tenant = catalog.tenants.get(str(options.get("team")))
    if offering is None or tenant is None:
        return None
    count = options.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        count = offering.default_count
    return Choice(tenant=tenant, offering=offering, count=count)


def user_usage(held: Iterable[Choice | None]) -> UserUsage:
    """What a user's *other* active servers hold, from their validated choices (never from the
    raw options a request sent: those may leave out the offering or give the count as text)."""
    servers = 0
    gpu_eq = Fraction(0)
    for choice in held:
        if choice is None or not choice.offering.is_gpu:
            continue
        servers += 1
        gpu_eq += choice.offering.gpu_equivalents_for(choice.count)
    return UserUsage(gpu_servers=servers, gpu_equivalents=gpu_eq)

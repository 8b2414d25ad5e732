"""What a user picks from the catalog, checked once, and what it becomes in a pod (pure).

A spawn (``spawner/gpuaas_spawner/validate.py``), a move to a bigger offering
(``culler/gpuaas_service/resize/``) and a notebook Job
(``culler/gpuaas_service/jobs/request.py``) all ask for a team, an offering, a count, an image
and a size. :func:`read_choice` checks those against the catalog and the caller's teams for
each (:func:`read_server_choice` for a server's, among its team's offerings), and reports each
problem with its field path (:mod:`jupyter_gpuaas.core.fields`, whose typed readers it words in
:data:`CHOICE_WORDS`) in a sentence a person can act on; :func:`choice_resources` and
:func:`shm_volume` are what the choice adds to the container of a server's pod and of a Job's
pod alike.

Each caller keeps only what is its own: the keys its request may hold, which of its teams
count (a Job needs the team's ``jobs`` section), and what else it carries (a notebook, a time
limit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from jupyter_gpuaas.core.catalog import Catalog, Image, Offering, Size, Tenant
from jupyter_gpuaas.core.fields import (
    FieldError,
    FieldErrors,
    did_you_mean,
    read_int,
    read_str,
    type_name,
)
from jupyter_gpuaas.core.headroom import Headroom, UserUsage
from jupyter_gpuaas.core.kueue import format_quantity

__all__ = [
    "CHOICE_WORDS",
    "SERVER_OPTION_KEYS",
    "SERVER_PURPOSE",
    "SHM_PATH",
    "SHM_VOLUME",
    "Choice",
    "HeadroomFn",
    "TeamRefused",
    "choice_resources",
    "held_usage",
    "pick_team",
    "read_choice",
    "read_server_choice",
    "read_text",
    "refusal",
    "shm_volume",
    "show",
    "stored_choice",
]

MAX_VALUE_LEN = 253
COUNT_DIGITS = 4
"""The most digits of a count sent as text (as the form sends it)."""
SHM_VOLUME = "gpuaas-shm"
SHM_PATH = "/dev/shm"

HeadroomFn = Callable[[Tenant, Offering, int], Headroom]

SERVER_OPTION_KEYS = ("team", "offering", "count", "image", "size")
"""The only keys a server's ``user_options`` may hold (the spawner stores them canonical)."""
SERVER_PURPOSE = "may start GPU servers"
"""What a team must allow for a server to charge it (completes "You are not in any team that")."""
"""(tenant, offering, count) → its live :class:`Headroom` (per-user caps, quota, waiting)."""

CHOICE_WORDS: Mapping[str, str] = {
    "text.not_text": "{key} must be a string, not {type}",
    "text.invalid": "{key} {value} is not a valid choice",
    "team.none": (
        "You are not in any team that {purpose}; ask an admin to add you to a team's group."
    ),
    "team.not_yours": "{value} is not one of your teams (yours: {teams})",
    "team.several": "You are in several teams ({teams}); choose which to charge.",
    "count.not_whole": "count must be a whole number",
    "count.not_whole_value": "count must be a whole number, not {value}",
    "count.exactly": "exactly {low}",
    "count.range": "{low} to {high}",
    "count.out_of_range": "{offering}: count must be {allowed}, not {value}",
    "pick.not_with": "with {offering}",
    "pick.not_here": "here{did_you_mean}",
    "pick.not_offered": "{Key} {value} is not offered {where}",
    "offering.none": "nothing is offered to {where}; ask an admin to add offerings",
    "offering.unknown": "Unknown offering {value}{did_you_mean}",
    "offering.not_available": "{offering} is not available to {where}{did_you_mean}",
    "offering.cannot_start": "{offering} cannot start for {team}: {why}.{detail}",
}
"""Every sentence a refused choice shows (a spawn's form or request, a notebook Job's), in one
table: the spawner's reviewed list (tests/unit/spawner/messages.json) pins each one. ``{Key}``
is ``{key}`` with a capital."""


def refusal(message: str, /, **values: Any) -> str:
    """The sentence ``message`` of :data:`CHOICE_WORDS` with its fields filled."""
    capitals = {k.capitalize(): str(v)[:1].upper() + str(v)[1:] for k, v in values.items()}
    return CHOICE_WORDS[message].format(**values, **capitals)


@dataclass(frozen=True)
class Choice:
    """A validated choice: the team charged and what it runs on."""

    tenant: Tenant
    offering: Offering
    count: int
    image: Image | None = None
    size: Size | None = None

    def as_user_options(self) -> dict[str, Any]:
        """The canonical options (what a hub stores as ``user_options`` and re-validates)."""
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


class TeamRefused(PermissionError):
    """The caller may not charge the team asked for, or has none to charge (path ``team``)."""

    path = "team"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.error = FieldError(self.path, message)


def show(value: object) -> str:
    """A value as quoted in a message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text_words(problem: str, /, **values: Any) -> str:
    """A choice's words (:data:`CHOICE_WORDS`) for a text field :func:`read_str` refuses."""
    if problem == "not_string":
        return refusal("text.not_text", key=values["key"], type=values["type"])
    return refusal("text.invalid", key=values["key"], value=show(values["raw"]))


def read_text(
    errs: FieldErrors, data: Mapping[str, Any], key: str, limit: int = MAX_VALUE_LEN
) -> str | None:
    """``data[key]`` if it is a non-empty string of at most ``limit`` characters; ``None`` if
    absent; else the problem is reported at ``key`` in the choice's words and ``None``
    returned (:func:`~jupyter_gpuaas.core.fields.read_str`)."""
    return read_str(errs, "", data, key, max_length=limit, say=_text_words)


def pick_team(
    mine: Sequence[Tenant], requested: object, *, default_team: str = "", purpose: str
) -> Tenant:
    """The team to charge out of ``mine`` (the caller's teams that may do this, catalog
    order): the one asked for, else the only one, else ``default_team`` if it is theirs.

    ``purpose`` completes "You are not in any team that ..." ("may start GPU servers").
    Raises :class:`TeamRefused`.
    """
    if requested is not None and not isinstance(requested, str):
        raise TeamRefused(refusal("text.not_text", key="team", type=type_name(requested)))
    if not mine:
        raise TeamRefused(refusal("team.none", purpose=purpose))
    if requested is not None:
        for tenant in mine:
            if tenant.name == requested:
                return tenant
        raise TeamRefused(refusal("team.not_yours", value=show(requested), teams=_names(mine)))
    if len(mine) == 1:
        return mine[0]
    for tenant in mine:
        if tenant.name == default_team:
            return tenant
    raise TeamRefused(refusal("team.several", teams=_names(mine)))


def _names(teams: Sequence[Tenant]) -> str:
    """The teams as a person reads them (display names)."""
    return ", ".join(t.display_name for t in teams)


def _count(errs: FieldErrors, data: Mapping[str, Any], offering: Offering) -> int:
    """The count asked for (a whole number, or its digits as text, as a form sends them)
    within the offering's range; its default if absent."""
    low, high = offering.min_count, offering.max_count
    allowed = refusal("count.exactly" if low == high else "count.range", low=low, high=high)

    def words(problem: str, /, **values: Any) -> str:
        raw = values["raw"]
        if problem == "out_of_range":
            return refusal(
                "count.out_of_range", offering=offering.display_name, allowed=allowed, value=raw
            )
        if isinstance(raw, bool):
            return refusal("count.not_whole")
        return refusal("count.not_whole_value", value=show(raw))

    count = read_int(
        errs,
        "",
        data,
        "count",
        minimum=low,
        maximum=high,
        text_digits=COUNT_DIGITS,
        say=words,
    )
    return offering.default_count if count is None else count


_Picked = TypeVar("_Picked", Image, Size)


def _pick(
    errs: FieldErrors,
    data: Mapping[str, Any],
    key: str,
    offering: Offering,
    allowed: Sequence[_Picked],
    default: _Picked | None,
    known: Mapping[str, _Picked],
) -> _Picked | None:
    """The image or size asked for (``key``) if the offering allows it; else its default."""
    slug = read_text(errs, data, key)
    if slug is None:
        return default
    chosen = next((c for c in allowed if c.slug == slug), None)
    if chosen is None:
        where = (
            refusal("pick.not_with", offering=offering.display_name)
            if slug in known
            else refusal(
                "pick.not_here", did_you_mean=did_you_mean(slug, [c.slug for c in allowed])
            )
        )
        errs.add(key, refusal("pick.not_offered", key=key, value=show(slug), where=where))
    return chosen or default


def read_choice(
    errs: FieldErrors,
    data: Mapping[str, Any],
    catalog: Catalog,
    tenant: Tenant,
    *,
    offerings: Sequence[str],
    default_offering: str | None,
    where: str,
    headroom: HeadroomFn | None = None,
) -> Choice | None:
    """The offering, count, image and size of ``data`` for ``tenant``, or ``None`` with every
    problem in ``errs``.

    ``offerings``: the slugs this tenant may pick here (a spawn: the tenant's; a Job: its
    ``jobs`` section's); ``default_offering`` when ``data`` names none; ``where`` ends "… is
    not available to" (``Team A``, ``Team A's jobs``). ``headroom`` adds the live checks: a
    choice whose headroom is not selectable (a per-user cap, a quota it can never fit, the
    team's cap on waiting) is refused with the headroom's words.
    """
    slug = read_text(errs, data, "offering")
    if slug is None and "offering" in data and data["offering"] is not None:
        return None  # reported by read_text
    if slug is None:
        slug = default_offering or ""
    offering = catalog.offerings.get(slug)
    if not slug:
        errs.add("offering", refusal("offering.none", where=where))
        return None
    if offering is None:
        hint = did_you_mean(slug, offerings)
        errs.add("offering", refusal("offering.unknown", value=show(slug), did_you_mean=hint))
        return None
    if slug not in offerings:
        hint = did_you_mean(slug, offerings)
        name = offering.display_name
        errs.add(
            "offering",
            refusal("offering.not_available", offering=name, where=where, did_you_mean=hint),
        )
        return None
    before = len(errs)
    count = _count(errs, data, offering)
    image = _pick(
        errs,
        data,
        "image",
        offering,
        catalog.images_for(offering),
        catalog.default_image_for(offering),
        catalog.images,
    )
    size = _pick(
        errs,
        data,
        "size",
        offering,
        catalog.sizes_for(offering),
        catalog.default_size_for(offering),
        catalog.sizes,
    )
    if len(errs) != before:
        return None
    if headroom is not None:
        room = headroom(tenant, offering, count)
        if not room.fit.selectable:
            words = refusal(
                "offering.cannot_start",
                offering=offering.display_name,
                team=tenant.display_name,
                why=room.message,
                detail=f" {room.detail}" if room.detail else "",
            )
            errs.add("offering", words)
            return None
    return Choice(tenant=tenant, offering=offering, count=count, image=image, size=size)


def read_server_choice(
    errs: FieldErrors,
    data: Mapping[str, Any],
    catalog: Catalog,
    tenant: Tenant,
    *,
    headroom: HeadroomFn | None = None,
) -> Choice | None:
    """A server's choice for ``tenant`` (a spawn's, a move's to a bigger offering):
    :func:`read_choice` over the team's own offerings, its default offering where ``data``
    names none, and the team's name in the refusals."""
    return read_choice(
        errs,
        data,
        catalog,
        tenant,
        offerings=tenant.offerings,
        default_offering=tenant.default_offering,
        where=tenant.display_name,
        headroom=headroom,
    )


# --------------------------------------------------------------------------- what is held


def stored_choice(
    options: object, catalog: Catalog, groups: Sequence[str], *, default_team: str = ""
) -> Choice | None:
    """What an active server holds, from the ``user_options`` the hub stored for it: the one
    way both the spawner (its per-user caps at a start) and the service (the way up's check
    before it stops a server) count a user's other servers, so that a move the service lets
    through is never refused by the spawner at the start.

    The options are read as a spawn reads them, without the live checks (made when it
    started): only :data:`SERVER_OPTION_KEYS`, a team of ``groups`` (``default_team`` where
    they name none and the user has several), the team's offering, count, image and size.
    Options that no longer read so (the catalog or the user's teams changed since: a team
    they left) still hold their GPUs until the server stops: they are read as the canonical
    form the spawner stores, a known offering with its count (its default where the count is
    not a whole number of at least 1). ``None``: it holds nothing this catalog knows of."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        return None
    if all(key in SERVER_OPTION_KEYS for key in options):
        errs = FieldErrors()
        requested = read_text(errs, options, "team")
        try:
            tenant = pick_team(
                catalog.tenants_for_groups(groups),
                requested,
                default_team=default_team,
                purpose=SERVER_PURPOSE,
            )
        except TeamRefused:
            tenant = None
        if not errs.items and tenant is not None:
            choice = read_server_choice(errs, options, catalog, tenant)
            if choice is not None:
                return choice
    slug = options.get("offering")
    offering = catalog.offerings.get(slug) if isinstance(slug, str) else None
    stored_tenant = catalog.tenants.get(str(options.get("team")))
    if offering is None or stored_tenant is None:
        return None
    count = options.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        count = offering.default_count
    return Choice(tenant=stored_tenant, offering=offering, count=count)


def held_usage(held: Iterable[Choice | None]) -> UserUsage:
    """What a user's *other* active servers hold (their :func:`stored_choice` or the choice
    validated as they started; never the raw options a request sent), for the per-user caps:
    their GPU servers and GPU-equivalents."""
    servers = 0
    gpu_eq = Fraction(0)
    for choice in held:
        if choice is None or not choice.offering.is_gpu:
            continue
        servers += 1
        gpu_eq += choice.offering.gpu_equivalents_for(choice.count)
    return UserUsage(gpu_servers=servers, gpu_equivalents=gpu_eq)


# --------------------------------------------------------------------------- in the pod


def _cpu(value: float) -> str:
    return format_quantity(Fraction(value).limit_denominator(1000))


def choice_resources(
    offering: Offering, size: Size | None, count: int
) -> tuple[dict[str, str], dict[str, str]]:
    """The container's requests and limits: the offering's extended resources for ``count``
    units (requests = limits, as Kubernetes needs for them), then CPU and memory from the size
    where it sets them, else from the offering."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    for name, qty in sorted(offering.requests(count).items()):
        requests[name] = limits[name] = str(qty)

    def pick(attr: str) -> Any:
        value = getattr(size, attr) if size is not None else None
        return value if value is not None else getattr(offering, attr)

    if pick("cpu_guarantee") is not None:
        requests["cpu"] = _cpu(pick("cpu_guarantee"))
    if pick("cpu_limit") is not None:
        limits["cpu"] = _cpu(pick("cpu_limit"))
    if pick("mem_guarantee") is not None:
        requests["memory"] = str(pick("mem_guarantee"))
    if pick("mem_limit") is not None:
        limits["memory"] = str(pick("mem_limit"))
    return requests, limits


def shm_volume(offering: Offering) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A GPU offering's memory-backed ``/dev/shm`` (data loaders need more than the 64 MiB a
    container gets): the volume and its mount, or ``None``."""
    if not offering.is_gpu or not offering.shm_size:
        return None
    return (
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": offering.shm_size}},
        {"name": SHM_VOLUME, "mountPath": SHM_PATH},
    )

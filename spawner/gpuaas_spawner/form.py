"""The spawn form: a plain-data model (:func:`build_form_model`) and its HTML (:func:`render_form`).

The model lists the teams a user may charge and, per team, the offerings with their live state
from :mod:`jupyter_gpuaas.core.headroom` ("available now (3 of 8 free)", "will queue (about 2
ahead)", or not selectable with the reason). Building it reads only the snapshot it is given —
no API call per render. The HTML is a fragment JupyterHub 6 puts inside its spawn page's
``<form>`` (Bootstrap 5 classes, fieldsets with legends, every state in words, not colour).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

import jinja2

from gpuaas_spawner.messages import say
from gpuaas_spawner.progress import NoticePart, notice_parts
from gpuaas_spawner.validate import OptionsError, UserContext, pick_team
from jupyter_gpuaas.core.catalog import Catalog, Image, Offering, Size, Tenant
from jupyter_gpuaas.core.gpu_equivalents import format_gpu_equivalents
from jupyter_gpuaas.core.headroom import Fit, Headroom, QueueState, compute_headroom
from jupyter_gpuaas.core.kueue import parse_quantity
from jupyter_gpuaas.core.sizing import DEFAULT_HEADROOM, advise

__all__ = [
    "ChoiceOption",
    "FormModel",
    "OfferingOption",
    "TeamOption",
    "build_form_model",
    "render_form",
]


@dataclass(frozen=True)
class ChoiceOption:
    """An image or a size: ``offerings`` lists the offering slugs it goes with."""

    slug: str
    display_name: str
    description: str
    offerings: tuple[str, ...]
    default_for: tuple[str, ...]


@dataclass(frozen=True)
class OfferingOption:
    slug: str
    display_name: str
    description: str
    kind: str
    isolation: str
    gpu_model: str
    gpu_memory: str
    gpu_equivalents: str
    state: str
    """``Fit`` value: now, borrow, queue, unknown, not-allowed, never."""
    status: str
    detail: str
    gpu_status: str
    """For a memory-capped fraction, the team's memory quota: "40 of 96 GiB of fractional GPU
    memory free"; empty otherwise (GPU-equivalents are ITOps' unit, shown in the console, not
    on a data scientist's form)."""
    fraction: str
    """A memory-capped fraction's terms: "5.5 GiB GPU memory (capped), 25% of its compute"."""
    selectable: bool
    checked: bool
    """Checked in the page as served (only in the selected team: radios share one name)."""
    preferred: bool
    """What to check when the user switches to this team."""
    counts: tuple[int, ...]
    default_count: int
    units: str
    advised: bool = False
    """The offering that fits the user's measured use (see ``TeamOption.advice``)."""


@dataclass(frozen=True)
class TeamOption:
    name: str
    display_name: str
    selected: bool
    offerings: tuple[OfferingOption, ...]
    advice: str = ""
    """Why the preselected offering fits, in one line ("Your last 8 sessions peaked at 6.1 GiB;
    ...", "... would queue: ... starts now."); empty without measured use when the team's
    usual choice starts now."""

    @property
    def any_selectable(self) -> bool:
        return any(o.selectable for o in self.offerings)


@dataclass(frozen=True)
class FormModel:
    teams: tuple[TeamOption, ...]
    images: tuple[ChoiceOption, ...] = ()
    sizes: tuple[ChoiceOption, ...] = ()
    selected_image: str | None = None
    selected_size: str | None = None
    notice: str = ""
    problem: str = ""
    """Set when the user cannot start anything (no team, catalog broken)."""

    @property
    def notice_parts(self) -> tuple[NoticePart, ...]:
        """The notice with its moments as times the page shows in the reader's time zone."""
        return notice_parts(self.notice)


def _memory_text(value: str | None) -> str:
    if not value:
        return ""
    amount = parse_quantity(value)
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if amount >= factor:
            shown = format_gpu_equivalents(Fraction(amount, factor))
            return f"{shown} {unit}"
    return f"{int(amount)} bytes"


def _mib_text(mib: int) -> str:
    return _memory_text(f"{mib}Mi") if mib > 0 else "0 GiB"


def _fraction_text(offering: Offering) -> str:
    if offering.kind != "fraction" or not offering.memory_cap:
        return ""
    text = f"{_memory_text(offering.memory_cap)} GPU memory (capped)"
    if offering.cores_percent is not None:
        text += f", {offering.cores_percent}% of its compute"
    return text


def _gpu_status(offering: Offering, room: Headroom) -> str:
    if offering.kind == "fraction":
        if room.free_memory_mib is None or room.total_memory_mib is None:
            return ""
        free, total = _mib_text(room.free_memory_mib), _mib_text(room.total_memory_mib)
        unit = total.rsplit(" ", 1)[-1]
        if free.endswith(f" {unit}"):
            free = free.rsplit(" ", 1)[0]
        return f"{free} of {total} of fractional GPU memory free"
    return ""


def _offering_option(
    offering: Offering, room: Headroom, *, preferred: bool, checked: bool, advised: bool
) -> OfferingOption:
    return OfferingOption(
        slug=offering.slug,
        display_name=offering.display_name,
        description=offering.description,
        kind=offering.kind,
        isolation=offering.isolation_text,
        gpu_model=offering.gpu_model,
        gpu_memory=_memory_text(offering.gpu_memory),
        gpu_equivalents=format_gpu_equivalents(offering.gpu_equivalents),
        state=room.fit.value,
        status=room.message,
        detail=room.detail,
        gpu_status=_gpu_status(offering, room),
        fraction=_fraction_text(offering),
        selectable=room.fit.selectable,
        checked=checked,
        preferred=preferred,
        counts=tuple(range(offering.min_count, offering.max_count + 1)),
        default_count=offering.default_count,
        units=offering.units,
        advised=advised,
    )


def _team_option(
    catalog: Catalog,
    tenant: Tenant,
    user: UserContext,
    state: QueueState,
    *,
    namespace: str,
    selected: bool,
    previous_offering: str | None,
    peaks_mib: Sequence[int],
    advice_headroom: float,
    restart: bool = False,
) -> TeamOption:
    rooms: list[tuple[Offering, Headroom]] = []
    for slug in tenant.offerings:
        offering = catalog.offerings[slug]
        room = compute_headroom(tenant, offering, state, namespace=namespace, usage=user.usage)
        rooms.append((offering, room))
    selectable = [o.slug for o, r in rooms if r.fit.selectable]
    starts_now = [o.slug for o, r in rooms if r.fit in (Fit.NOW, Fit.BORROW)]
    advice = advise(
        [o for o, r in rooms if r.fit.selectable],
        peaks_mib,
        default=tenant.default_offering,
        headroom=advice_headroom,
        starts_now=starts_now if state.synced else None,
        last=previous_offering,
    )
    # Preselect, only ever something the user may start: what fits the user's measured use
    # (something that starts now where anything that fits does), else their last choice or
    # the team's default (one at least as large that starts now where that would queue), else
    # the first that starts now.
    advised = advice.offering if advice is not None and advice.measured else None
    first = advice.offering if advice is not None else None
    if previous_offering in selectable and (
        (restart and previous_offering in starts_now)
        or _changes_kind(catalog, previous_offering, first)
    ):
        # Start again after a stop the person did not choose (a reclaim, a deadline) restarts
        # what they had where it starts now; and a GPU session never becomes CPU only (or the
        # reverse) unasked. The advice stays beside it as a suggestion.
        first = previous_offering
    preferred = [first, previous_offering, tenant.default_offering, *starts_now, *selectable]
    checked = next((s for s in preferred if s in selectable), None)
    # The line is said where there is something to say: measured use, or a usual choice
    # that would queue; as a suggestion where the person's own choice was kept.
    said = advice is not None and (
        advice.measured
        or (
            advice.offering == checked
            and (advice.queues or checked not in (previous_offering, tenant.default_offering))
        )
    )
    return TeamOption(
        name=tenant.name,
        display_name=tenant.display_name,
        selected=selected,
        offerings=tuple(
            _offering_option(
                o,
                r,
                preferred=o.slug == checked,
                checked=selected and o.slug == checked,
                advised=o.slug == advised,
            )
            for o, r in rooms
        ),
        advice=advice.reason if advice is not None and said else "",
    )


def _changes_kind(catalog: Catalog, previous: str | None, advised: str | None) -> bool:
    """Whether going from ``previous`` to ``advised`` moves between CPU only and a GPU."""
    if previous is None or advised is None:
        return False
    before, after = catalog.offerings.get(previous), catalog.offerings.get(advised)
    return (
        before is not None and after is not None and (before.kind == "cpu") != (after.kind == "cpu")
    )


_Choice = TypeVar("_Choice", Image, Size)


def _choice_options(
    items: Iterable[_Choice],
    offered: Sequence[Offering],
    allowed: Callable[[Offering], Sequence[_Choice]],
    default: Callable[[Offering], _Choice | None],
) -> tuple[ChoiceOption, ...]:
    """Images or sizes, each with the offerings it goes with and those it is the default of."""
    return tuple(
        ChoiceOption(
            slug=item.slug,
            display_name=item.display_name,
            description=item.description,
            offerings=tuple(o.slug for o in offered if item in allowed(o)),
            default_for=tuple(o.slug for o in offered if default(o) == item),
        )
        for item in items
    )


def build_form_model(
    catalog: Catalog,
    user: UserContext,
    state: QueueState,
    *,
    namespace: str,
    default_team: str = "",
    previous: Mapping[str, Any] | None = None,
    notice: str = "",
    peaks_mib: Sequence[int] = (),
    advice_headroom: float = DEFAULT_HEADROOM,
) -> FormModel:
    """The form for ``user``: their teams, each team's offerings with live headroom.

    ``previous`` is the user's last ``user_options`` (preselects team, offering, image, size);
    ``notice`` is shown above the form (e.g. why their last server was stopped: then their last
    offering is preselected, the advice beside it as a suggestion); ``peaks_mib``,
    the GPU-memory peaks of the user's recent sessions (one per session, newest first;
    :mod:`jupyter_gpuaas.core.sizing`): the offering that fits them is preselected before
    ``previous``, preferring one that starts now (:func:`~jupyter_gpuaas.core.sizing.advise`
    with ``advice_headroom``); none: the team's usual choice, or one at least as large that
    starts now where the usual one would queue.
    """
    previous = previous or {}
    tenants = catalog.tenants_for_groups(user.groups)
    if not tenants:
        return FormModel(
            teams=(),
            notice=notice,
            problem=say("form.no_team"),
        )
    prev_team = previous.get("team") if isinstance(previous.get("team"), str) else None
    try:
        selected = pick_team(
            catalog,
            user,
            prev_team if prev_team in {t.name for t in tenants} else None,
            default_team,
        )
    except OptionsError:
        selected = tenants[0]
    prev_offering = previous.get("offering") if isinstance(previous.get("offering"), str) else None
    teams = tuple(
        _team_option(
            catalog,
            t,
            user,
            state,
            namespace=namespace,
            selected=t.name == selected.name,
            previous_offering=prev_offering if t.name == selected.name else None,
            peaks_mib=peaks_mib,
            advice_headroom=advice_headroom,
            restart=bool(notice),
        )
        for t in tenants
    )
    offered = [catalog.offerings[s] for s in sorted({o.slug for t in teams for o in t.offerings})]
    images = _choice_options(
        catalog.images.values(), offered, catalog.images_for, catalog.default_image_for
    )
    sizes = _choice_options(
        catalog.sizes.values(), offered, catalog.sizes_for, catalog.default_size_for
    )
    # Preselect an image and size that go with the offering checked as served (no JS needed).
    checked = next(
        (catalog.offerings[o.slug] for t in teams if t.selected for o in t.offerings if o.checked),
        None,
    )

    def pick(kind: str, items: tuple[ChoiceOption, ...]) -> str | None:
        prev = previous.get(kind)
        fits = [i for i in items if checked is None or checked.slug in i.offerings]
        if isinstance(prev, str) and any(i.slug == prev for i in fits):
            return prev
        default = [i for i in fits if checked is not None and checked.slug in i.default_for]
        candidates = default or fits or list(items)
        return candidates[0].slug if candidates else None

    return FormModel(
        teams=teams,
        images=images,
        sizes=sizes,
        selected_image=pick("image", images),
        selected_size=pick("size", sizes),
        notice=notice,
    )


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("gpuaas_spawner", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_form(model: FormModel) -> str:
    """The HTML fragment for JupyterHub's spawn page."""
    return _environment().get_template("form.html.j2").render(form=model)

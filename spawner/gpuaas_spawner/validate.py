"""One validation for every way a spawn request arrives.

The spawn form (``options_from_form``) and the REST API (``POST /hub/api/users/{u}/servers/{s}``
with JSON ``user_options``, or options stored earlier) both end in :func:`validate_options`.
It accepts exactly the canonical keys, checks every value against the catalog and the user's
teams, and returns a typed :class:`Choice`; anything else is refused with a message a person can
act on. Nothing a user sends reaches the pod except through a ``Choice``, so forged resources,
labels, queues or overrides have no path into a manifest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuaas_spawner.messages import say
from jupyter_gpuaas.core.catalog import Catalog, Tenant
from jupyter_gpuaas.core.choice import (
    SERVER_OPTION_KEYS,
    SERVER_PURPOSE,
    Choice,
    HeadroomFn,
    TeamRefused,
    held_usage,
    read_server_choice,
    read_text,
    show,
)
from jupyter_gpuaas.core.choice import pick_team as pick_from
from jupyter_gpuaas.core.choice import stored_choice as core_stored_choice
from jupyter_gpuaas.core.fields import FieldErrors
from jupyter_gpuaas.core.headroom import UserUsage

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

OPTION_KEYS = SERVER_OPTION_KEYS
"""The only keys ``user_options`` may hold."""

_COUNT_FIELD = "count-"
_FORM_IGNORED = ("_xsrf",)
_PURPOSE = SERVER_PURPOSE


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


def pick_team(
    catalog: Catalog, user: UserContext, requested: str | None, default_team: str
) -> Tenant:
    """The team to charge: the one asked for if it is the user's, else the only/default one
    (:func:`jupyter_gpuaas.core.choice.pick_team` over the user's teams)."""
    try:
        return pick_from(
            catalog.tenants_for_groups(user.groups),
            requested,
            default_team=default_team,
            purpose=_PURPOSE,
        )
    except TeamRefused as e:
        raise OptionsError(str(e), field=e.path) from e


def _refuse(errs: FieldErrors) -> OptionsError:
    """The first problem (a spawn is refused with one message, which JupyterHub shows)."""
    first = errs.items[0]
    return OptionsError(first.message, field=first.path)


def validate_options(
    options: object,
    catalog: Catalog,
    user: UserContext,
    *,
    default_team: str = "",
    headroom: HeadroomFn | None = None,
) -> Choice:
    """Check ``user_options`` against the catalog and the user's teams; return the choice.

    The team, offering, count, image and size are checked by
    :func:`jupyter_gpuaas.core.choice.read_server_choice`, as a notebook Job's are. ``headroom``
    (tenant, offering, count → :class:`Headroom`) adds the live checks: per-user caps, a team
    queue that can never admit it, the team's cap on waiting servers.
    """
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise OptionsError(say("form.not_object", type=type(options).__name__))
    unknown = sorted(str(k) for k in options if k not in OPTION_KEYS)
    if unknown:
        shown = ", ".join(show(k) for k in unknown[:5])
        more = say("form.unknown_options.more", count=len(unknown) - 5) if len(unknown) > 5 else ""
        allowed = ", ".join(OPTION_KEYS)
        raise OptionsError(
            say("form.unknown_options", options=shown, more=more, allowed=allowed),
            field=unknown[0],
        )
    errs = FieldErrors()
    requested = read_text(errs, options, "team")
    if errs.items:
        raise _refuse(errs)
    tenant = pick_team(catalog, user, requested, default_team)
    choice = read_server_choice(errs, options, catalog, tenant, headroom=headroom)
    if choice is None:
        raise _refuse(errs)
    return choice


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
            raise OptionsError(say("form.unknown_field", field=show(key)), field=str(key))
        if key == "count":
            raise OptionsError(say("form.unknown_field", field=show(key)), field="count")
        if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
            raise OptionsError(say("form.field_once", field=show(key)), field=str(key))
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
    """What an active server holds, from the ``user_options`` the hub stored for it (for a
    server this hub process did not validate: started before a hub restart). The service
    counts a user's other servers with the same function before a move to a bigger offering
    (:func:`jupyter_gpuaas.core.choice.stored_choice`)."""
    return core_stored_choice(options, catalog, user.groups, default_team=default_team)


def user_usage(held: Iterable[Choice | None]) -> UserUsage:
    """What a user's *other* active servers hold, from their validated choices (never from the
    raw options a request sent: those may leave out the offering or give the count as text)."""
    return held_usage(held)

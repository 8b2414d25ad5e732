"""One validation of a "Run as GPU job" request (pure; docs/jobs.md).

The server extension forwards what the dialog chose plus the notebook's content; nothing of it
reaches a manifest except through a :class:`JobRequest`, whose every field was checked against
the catalog and the caller's teams here. The team, offering, count, image and size are checked
by :mod:`jupyter_gpuaas.core.choice`, as a spawn's are; the rest (the notebook, its path and
parameters, the time limit) is a Job's own. Every problem is reported at once with its field path
(``parameters["lr"]``, ``count``), as the catalog and the activity payload report theirs.
"""

from __future__ import annotations

import keyword
import math
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from jupyter_gpuaas.core.catalog import Catalog, Image, Offering, Size, Tenant, TenantJobs
from jupyter_gpuaas.core.choice import (
    Choice,
    HeadroomFn,
    TeamRefused,
    pick_team,
    read_choice,
    show,
)
from jupyter_gpuaas.core.durations import format_duration
from jupyter_gpuaas.core.fields import (
    NAME_RE,
    FieldError,
    FieldErrors,
    key_path,
    read_duration,
    read_list,
    read_mapping,
    read_str,
    type_name,
    unknown_keys,
)

__all__ = [
    "REQUEST_KEYS",
    "JobRequest",
    "JobRequestError",
    "NotAllowed",
    "job_teams",
    "validate_job_request",
]

REQUEST_KEYS = (
    "team",
    "path",
    "notebook",
    "offering",
    "count",
    "image",
    "size",
    "time_limit",
    "parameters",
    "kernel_name",
)
"""The only keys a request may hold."""

MAX_PARAMETERS = 50
MAX_PARAMETER_TEXT = 2000
MAX_PATH = 1024
MAX_CELLS = 5000
MIN_TIME_LIMIT = timedelta(minutes=1)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")


class JobRequestError(ValueError):
    """A refused request: every problem with its field path (answered 400)."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors[:5]))


class NotAllowed(PermissionError):
    """The caller may not submit there (answered 403): not their team, or no jobs for it."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


@dataclass(frozen=True)
class JobRequest:
    """A validated request: everything the Job, its input and its result path come from."""

    user: str
    tenant: Tenant
    jobs: TenantJobs
    offering: Offering
    count: int
    image: Image | None
    size: Size | None
    time_limit: int | None
    path: str
    notebook: Mapping[str, Any]
    parameters: Mapping[str, Any] = field(default_factory=dict)
    kernel_name: str | None = None

    @property
    def notebook_name(self) -> str:
        return posixpath.basename(self.path)


def job_teams(catalog: Catalog, groups: Sequence[str]) -> list[Tenant]:
    """The caller's teams that run notebooks as Jobs (catalog order)."""
    return [t for t in catalog.tenants_for_groups(groups) if t.jobs is not None]


def _path(errs: FieldErrors, data: Mapping[str, Any]) -> str:
    value = read_str(
        errs,
        "",
        data,
        "path",
        required=True,
        required_hint="the notebook's path in your server, e.g. work/train.ipynb",
    )
    if value is None:
        return ""
    if len(value) > MAX_PATH or "\x00" in value or "\\" in value:
        errs.add("path", f"{show(value)} is not a notebook path")
        return ""
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts):
        errs.add("path", f"{show(value)} must be relative to your server's root, without . or ..")
        return ""
    if not parts[-1].endswith(".ipynb") or parts[-1] == ".ipynb":
        errs.add("path", f"{show(value)} is not a notebook (.ipynb)")
        return ""
    return value


def _notebook(errs: FieldErrors, data: Mapping[str, Any]) -> Mapping[str, Any]:
    nb = read_mapping(errs, "", data, "notebook", required=True, what="the notebook's JSON")
    if nb is None:
        return {}
    if nb.get("nbformat") != 4:
        errs.add("notebook.nbformat", f"must be 4 (nbformat 4), not {show(nb.get('nbformat'))}")
    before = len(errs)
    # a notebook without cells is valid nbformat: its Job runs and records nothing
    cells = read_list(
        errs, "notebook", nb, "cells", required=True, what="a list of cells", may_be_empty=True
    )
    if len(errs) > before:
        return {}
    if len(cells) > MAX_CELLS:
        errs.add("notebook.cells", f"has {len(cells)} cells; the most is {MAX_CELLS}")
    for path, cell in cells[:MAX_CELLS]:
        if not isinstance(cell, Mapping) or not isinstance(cell.get("cell_type"), str):
            errs.add(path, "must be a cell (an object with a cell_type)")
            break
    return nb


def _parameter_value(errs: FieldErrors, path: str, value: Any, depth: int = 0) -> None:
    """A parameter's value: text, a number, true/false, null, or (at the top) a list of those."""
    if isinstance(value, list) and depth == 0:
        if len(value) > 100:
            errs.add(path, "has more than 100 items")
            return
        for i, item in enumerate(value):
            _parameter_value(errs, f"{path}[{i}]", item, depth + 1)
        return
    problem = _scalar_problem(value)
    if problem:
        errs.add(path, problem)


def _scalar_problem(value: Any) -> str:
    """What is wrong with a parameter's scalar value (``""``: nothing)."""
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return "is too large a number" if abs(value) > 2**63 else ""
    if isinstance(value, float):
        return "" if math.isfinite(value) else "must be a finite number"
    if isinstance(value, str):
        if len(value) > MAX_PARAMETER_TEXT:
            return f"is {len(value)} characters; the most is {MAX_PARAMETER_TEXT}"
        return ""
    return f"must be text, a number, true/false, null or a list of those, not {type_name(value)}"


def _parameters(errs: FieldErrors, data: Mapping[str, Any]) -> dict[str, Any]:
    raw = read_mapping(errs, "", data, "parameters", what="an object of name: value")
    if raw is None:
        return {}
    if len(raw) > MAX_PARAMETERS:
        errs.add("parameters", f"has {len(raw)} names; the most is {MAX_PARAMETERS}")
        return {}
    out: dict[str, Any] = {}
    for name, value in raw.items():
        path = key_path("parameters", str(name))
        if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) or keyword.iskeyword(name):
            errs.add(path, "must be a Python variable name (letters, digits, _)")
            continue
        before = len(errs)
        _parameter_value(errs, path, value)
        if len(errs) == before:
            out[name] = value
    return out


def _time_limit(errs: FieldErrors, data: Mapping[str, Any], jobs: TenantJobs) -> int | None:
    if data.get("time_limit") in (None, ""):  # the dialog's empty field: the team's default
        return jobs.default_time_limit
    limit = read_duration(errs, "", data, "time_limit", minimum=MIN_TIME_LIMIT)
    if limit is None:
        return None
    seconds = int(limit.total_seconds())
    if jobs.max_time_limit is not None and seconds > jobs.max_time_limit:
        errs.add(
            "time_limit",
            f"{format_duration(seconds)} is over the team's limit of "
            f"{format_duration(jobs.max_time_limit)}",
        )
        return None
    return seconds


def _team(catalog: Catalog, groups: Sequence[str], requested: object) -> Tenant:
    try:
        return pick_team(
            job_teams(catalog, groups), requested, purpose="runs notebooks as GPU jobs"
        )
    except TeamRefused as e:
        raise NotAllowed(e.path, str(e)) from e


def validate_job_request(
    body: object,
    catalog: Catalog,
    user: str,
    groups: Sequence[str],
    *,
    headroom: HeadroomFn | None = None,
) -> JobRequest:
    """Check a request from ``user`` (with hub ``groups``) against the catalog.

    ``headroom`` (tenant, offering, count → the team's training queue's headroom) refuses a
    choice that could never start there, as a spawn's is refused.
    Raises :class:`NotAllowed` (the team is not theirs, or runs no jobs) or
    :class:`JobRequestError` with every problem's field path.
    """
    if not isinstance(body, Mapping):
        raise JobRequestError([FieldError("", f"must be a JSON object, not {type_name(body)}")])
    errs = FieldErrors()
    unknown_keys(errs, "", body, REQUEST_KEYS)
    tenant = _team(catalog, groups, body.get("team"))
    jobs = tenant.jobs
    assert jobs is not None  # job_teams() keeps only those
    default = tenant.default_offering
    choice: Choice | None = read_choice(
        errs,
        body,
        catalog,
        tenant,
        offerings=jobs.offerings,
        default_offering=default if default in jobs.offerings else next(iter(jobs.offerings), None),
        where=f"{tenant.display_name}'s jobs",
        headroom=headroom,
    )
    time_limit = _time_limit(errs, body, jobs)
    path = _path(errs, body)
    notebook = _notebook(errs, body)
    parameters = _parameters(errs, body)
    kernel_name = read_str(errs, "", body, "kernel_name", pattern=NAME_RE, what="a kernel name")
    if errs.items or choice is None:
        raise JobRequestError(errs.items)
    return JobRequest(
        user=user,
        tenant=tenant,
        jobs=jobs,
        offering=choice.offering,
        count=choice.count,
        image=choice.image,
        size=choice.size,
        time_limit=time_limit,
        path=path,
        notebook=notebook,
        parameters=parameters,
        kernel_name=kernel_name,
    )

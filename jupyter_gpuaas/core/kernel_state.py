"""What became of one kernel's variables when its server was asked to keep them (pure).

One definition for every side: the server extension builds a :class:`KernelStateOutcome` per
kernel when it snapshots (``POST gpuaas/api/kernel-state/snapshot``, and the gpuaas service's
reclaim, which asks for the same before it stops a server); the service reads them back with
:meth:`KernelStateOutcome.from_json` for its audit, metrics and console, and words its notices
with :func:`summarise` ("its variables were saved, except “batches” (a generator)") and
:func:`comes_back` (when they come back: the notebook's next opening, not before).

The outcomes, in order of how much was kept:

- ``kept``: every variable was saved;
- ``kept_with_losses``: saved, except the variables in ``lost`` (each with why);
- ``failed``: nothing was saved (``error`` says why: the time bound, no free space, ...);
- ``skipped_busy``: a cell was running, so the kernel was left alone (a snapshot never waits
  on, or interrupts, a user's cell).

The checks of the snapshot's files are here too, as pure functions of what was read
(:func:`check_opened`, :func:`parse_manifest`, :func:`check_places`, :func:`parse_outcome`):
one reader composes them for every path (:mod:`jupyter_gpuaas.statefiles`, which opens and
reads the files), so the kernel's restore, the kernel's clean-up after a snapshot and the
server's listing (``GET gpuaas/api/kernel-state``) apply the same checks, on the file they
opened.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, cast, get_args

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = [
    "DIRECTORY_ENV",
    "FORMAT",
    "FORMAT_VERSION",
    "OUTCOMES",
    "READ_VERSIONS",
    "KernelStateOutcome",
    "LostVariable",
    "Manifest",
    "Outcome",
    "Refused",
    "check_in_home",
    "check_opened",
    "check_places",
    "comes_back",
    "describe",
    "entries_digest",
    "is_data_of",
    "is_outcome_file",
    "lost_words",
    "parse_manifest",
    "parse_outcome",
    "quoted",
    "save_seconds",
    "state_directory_in",
    "state_key",
    "summarise",
]

Outcome = Literal["kept", "kept_with_losses", "failed", "skipped_busy"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

MAX_TEXT = 2000
"""Characters of ``error``, a reason or a name read back (a hostile payload stays small)."""
DIRECTORY_ENV = "JUPYTER_GPUAAS_KERNEL_STATE_DIR"
"""The snapshot folder (``c.GPUaaS.kernel_state_dir``) as the server extension hands it to its
kernels in their environment: a notebook's restore as it opens runs in its kernel, asked by
JupyterLab on the notebook's own connection (``jupyter_gpuaas.kernel.restore``)."""
MAX_LOST = 10_000
"""Lost variables read back from one payload."""
NAMED_IN_WORDS = 5
"""Lost variables :func:`summarise` names one by one; the rest are counted."""


@dataclass(frozen=True)
class LostVariable:
    """A variable that was not kept, and why in a few words ("a generator", "an open file",
    "over the size budget (3.0 GiB; 2.0 GiB left)")."""

    name: str
    reason: str

    def to_json(self) -> api.KernelStateLost:
        return {"name": self.name, "reason": self.reason}


@dataclass(frozen=True)
class KernelStateOutcome:
    """One kernel's snapshot: what was kept, what was lost and why, what it cost."""

    kernel_id: str
    notebook: str
    """The notebook's path relative to the server's root; ``""`` if no session names one."""
    outcome: Outcome
    lost: tuple[LostVariable, ...] = ()
    error: str = ""
    """Why the snapshot failed (``outcome == "failed"``), ``""`` otherwise."""
    bytes: int = 0
    """Size of the saved data, in bytes."""
    seconds: float = 0.0
    """Wall-clock seconds the snapshot took, as the server saw it."""
    saved_at: datetime | None = None
    """When the snapshot was written (UTC); ``None`` when nothing was written."""

    def to_json(self) -> api.KernelStateOutcome:
        return {
            "kernel_id": self.kernel_id,
            "notebook": self.notebook,
            "outcome": self.outcome,
            "lost": [lost.to_json() for lost in self.lost],
            # capped as from_json (and the documents) take it: one long exception message
            # must not get every activity report of its server refused
            "error": self.error
            if len(self.error) <= MAX_TEXT
            else self.error[: MAX_TEXT - 1] + "…",
            "bytes": self.bytes,
            "seconds": self.seconds,
            "saved_at": None if self.saved_at is None else isoformat_z(self.saved_at),
        }

    @classmethod
    def from_json(cls, data: object) -> KernelStateOutcome:
        """Read :meth:`to_json`'s payload back; a :class:`ValueError` saying what is wrong
        (the field and what it should be) for anything else."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a kernel state outcome is an object, not {type(data).__name__}")
        fields = cast("Mapping[str, Any]", data)
        outcome = fields.get("outcome")
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome: {_quoted(outcome)} is not one of {', '.join(OUTCOMES)}")
        return cls(
            kernel_id=_text(fields, "kernel_id", required=True),
            notebook=_text(fields, "notebook"),
            outcome=cast("Outcome", outcome),
            lost=_lost(fields.get("lost", [])),
            error=_text(fields, "error"),
            bytes=_count(fields, "bytes"),
            seconds=_seconds(fields),
            saved_at=_time(fields.get("saved_at")),
        )


def quoted(name: str) -> str:
    """A variable's name as plain text shows it (the spawn page's notice, JupyterLab's
    notifications, the console's journal, a log line): in quotes, “batches”. No Markdown: not
    one of those places renders it, and a backtick would show as it is."""
    return f"“{name}”"


def lost_words(lost: Iterable[LostVariable], named: int = NAMED_IN_WORDS) -> str:
    """ "“batches” (a generator), “log” (an open file) and 3 more": the lost variables, the
    first ``named`` with their reasons. The labextension's ``lostWords`` (JupyterLab's
    notifications) follows the same rule: tests/unit/core/kernel_state_words.json holds the
    cases both are tested on."""
    items = list(lost)
    words = [f"{quoted(v.name)} ({v.reason})" for v in items[:named]]
    rest = len(items) - len(words)
    if rest:
        words.append(f"{rest} more")
    if len(words) <= 1:
        return words[0] if words else ""
    return ", ".join(words[:-1]) + " and " + words[-1]


def describe(outcome: KernelStateOutcome) -> str:
    """One kernel's snapshot in words ("its variables were saved, except “batches” (a
    generator)"). Said when the snapshot is known, which is before anything is restored: the
    variables are saved, not back (:func:`comes_back` says when they come back)."""
    if outcome.outcome == "kept":
        return "its variables were saved"
    if outcome.outcome == "kept_with_losses":
        return f"its variables were saved, except {lost_words(outcome.lost)}"
    if outcome.outcome == "skipped_busy":
        return "its variables were not saved: a cell was running"
    return f"its variables could not be saved ({outcome.error or 'no reason given'})"


def comes_back(outcomes: Iterable[KernelStateOutcome]) -> str:
    """When what was saved comes back, after :func:`summarise`'s words: "they come back when
    you open the notebook again" (one kernel), "what was saved comes back when you open each
    notebook again" (several); ``""`` where nothing was saved."""
    items = list(outcomes)
    if not any(o.outcome in ("kept", "kept_with_losses") for o in items):
        return ""
    if len(items) == 1:
        return "they come back when you open the notebook again"
    return "what was saved comes back when you open each notebook again"


def summarise(outcomes: Iterable[KernelStateOutcome]) -> str:
    """Every kernel's outcome in the words of a notice: one kernel as :func:`describe` says it;
    several, each after its notebook ("train.ipynb: its variables were saved; eval.ipynb: its
    variables were not saved: a cell was running"). ``""`` for none."""
    items = list(outcomes)
    if len(items) == 1:
        return describe(items[0])
    return "; ".join(f"{o.notebook or 'kernel ' + o.kernel_id}: {describe(o)}" for o in items)


# --------------------------------------------------------------------------- reading back


def _quoted(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(fields: Mapping[str, Any], key: str, *, required: bool = False) -> str:
    value = fields.get(key, None if required else "")
    if not isinstance(value, str):
        raise ValueError(f"{key}: a string, not {_quoted(value)}")
    if required and not value:
        raise ValueError(f"{key}: must not be empty")
    if len(value) > MAX_TEXT:
        raise ValueError(f"{key}: at most {MAX_TEXT} characters, not {len(value)}")
    return value


def _count(fields: Mapping[str, Any], key: str) -> int:
    value = fields.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key}: a whole number of bytes (0 or more), not {_quoted(value)}")
    return value


def _seconds(fields: Mapping[str, Any]) -> float:
    value = fields.get("seconds", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"seconds: a number, not {_quoted(value)}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"seconds: a finite number, 0 or more, not {_quoted(value)}")
    return float(value)


def _time(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"saved_at: an ISO 8601 time or null, not {_quoted(value)}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"saved_at: not an ISO 8601 time: {_quoted(value)}") from e
    if parsed.tzinfo is None:
        raise ValueError(f"saved_at: needs a time zone (e.g. Z): {_quoted(value)}")
    return parsed.astimezone(timezone.utc)


def _lost(value: object) -> tuple[LostVariable, ...]:
    if not isinstance(value, list):
        raise ValueError(f"lost: a list, not {_quoted(value)}")
    if len(value) > MAX_LOST:
        raise ValueError(f"lost: at most {MAX_LOST} variables, not {len(value)}")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise ValueError(f"lost[{i}]: an object with name and reason, not {_quoted(item)}")
        try:
            out.append(LostVariable(_text(item, "name", required=True), _text(item, "reason")))
        except ValueError as e:
            raise ValueError(f"lost[{i}].{e}") from e
    return tuple(out)


SAVE_BYTES_PER_SECOND = 400_000_000
"""The rate a save is estimated at before a reclaim (the sidebar's "about 6 s to save"): below
what the development machine measured for arrays (510–778 MB/s, docs/benchmarks.md), as a
session holds more than arrays; frames of many small objects save slower."""
SAVE_FIXED_SECONDS = 0.5
"""A snapshot's cost whatever its size (the fork, three fsyncs, the answer's way back)."""


def save_seconds(state_bytes: int) -> float:
    """About how long a snapshot of ``state_bytes`` (the kernels' own estimate, all of them:
    they save at once, to one disk) takes to write: the figure the sidebar shows before a
    reclaim beside the wait the reclaim's policy gives it."""
    return SAVE_FIXED_SECONDS + max(state_bytes, 0) / SAVE_BYTES_PER_SECOND


def state_key(notebook: str, kernel_id: str) -> str:
    """The file name stem of a notebook's snapshot: its base name, to be readable, and a hash
    of its whole path, to be one per notebook (a kernel with no notebook: its id)."""
    if not notebook:
        return "kernel-" + "".join(c for c in kernel_id if c.isalnum() or c == "-")[:64]
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in notebook.rsplit("/", 1)[-1])
    digest = hashlib.sha256(notebook.encode()).hexdigest()[:16]
    return f"{base.lstrip('.')[:80]}-{digest}"


def state_directory_in(configured: str, home: Path) -> Path:
    """The snapshot folder ``configured`` names, as written (``~`` is ``home``; a relative
    path is under it; an absolute one stays as it is), links not resolved: the edge resolves
    it and checks it with :func:`check_in_home`."""
    if configured == "~" or configured.startswith("~/"):
        return home / configured[2:]
    return home / configured


def check_in_home(resolved: Path, resolved_home: Path, configured: str) -> Path:
    """``resolved`` (the folder ``configured`` names, links resolved); :class:`ValueError`
    unless it lies in ``resolved_home``: state is read and written in the user's own home."""
    if not resolved.is_relative_to(resolved_home):
        raise ValueError(
            f"the kernel state folder {configured} is outside your home ({resolved_home}); "
            "set c.GPUaaS.kernel_state_dir to a folder in it"
        )
    return resolved


# --------------------------------------------------------------------------- the files

FORMAT = "jupyter-gpuaas kernel state"
FORMAT_VERSION = 2
"""The layout this code writes; a change that an older reader would misread gets a new number
(the older package then refuses it with a message). 2: each variable's checksum is XXH3-128,
a pickled variable's out-of-band buffers follow its pickle (``parts``); 1: SHA-256."""
READ_VERSIONS = (1, 2)
"""The format versions this code reads."""


class Refused(Exception):
    """A snapshot that must not be loaded (nor listed, nor cleaned up after), and why, in words
    for the user."""


@dataclass(frozen=True)
class Manifest:
    """A manifest that passed the reader's checks (``jupyter_gpuaas.statefiles.read_manifest``)."""

    path: Path
    data_path: Path
    data_bytes: int
    """The data file's size when it was checked."""
    fields: dict[str, Any]

    @property
    def entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.fields["variables"]
        return entries


def entries_digest(entries: list[dict[str, Any]]) -> str:
    """The manifest's ``sha256``: of its entries (each with its own data's checksum)."""
    canonical = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def is_data_of(key: str, name: str) -> bool:
    """Whether ``name`` is a data file of the snapshot ``key`` (``<key>.<token>.data``): the
    only files a snapshot of ``key`` may remove."""
    token = name[len(key) + 1 : -len(".data")] if name.startswith(key + ".") else ""
    return name.endswith(".data") and token.isascii() and token.isalnum()


def check_opened(info: os.stat_result, uid: int, what: str, name: str) -> None:
    """:class:`Refused` unless a file, as opened (its ``fstat``), is a plain file of ``uid``
    (this user) that no one else may write."""
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"the snapshot's {what} {name} is not a plain file")
    if info.st_uid != uid:
        raise Refused(
            f"the snapshot's {what} {name} belongs to user id {info.st_uid}, not to "
            f"you ({uid}): only your own snapshots are loaded"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Refused(f"the snapshot's {what} {name} can be written by others")


def parse_manifest(content: bytes, uid: int) -> tuple[dict[str, Any], str]:
    """A manifest's fields and the name of its data file, once its bytes are a manifest of
    this format, written by ``uid`` (this user), its entries matching its checksum, naming a
    data file beside it; :class:`Refused` otherwise. The data file's own checks and
    :func:`check_places` are the reader's, once it has opened it."""
    try:
        fields = json.loads(content)
    except ValueError as e:
        raise Refused(f"the snapshot's manifest is damaged (not JSON: {e})") from e
    _check_fields(fields, uid)
    return fields, _data_name(fields)


def _check_fields(fields: Any, uid: int) -> list[dict[str, Any]]:
    """The manifest's entries, once its fields say it is a manifest of this format, written by
    this user, its entries matching its checksum; :class:`Refused` otherwise."""
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        raise Refused("the file is not a jupyter-gpuaas kernel state manifest")
    version = fields.get("format_version")
    if version not in READ_VERSIONS or isinstance(version, bool):
        written_by = fields.get("package_version", "an unknown version")
        readable = " and ".join(str(v) for v in READ_VERSIONS)
        raise Refused(
            f"the snapshot is in format version {version!r} (written by jupyter-gpuaas "
            f"{written_by}); this version reads formats {readable}"
        )
    if fields.get("owner_uid") != uid:
        raise Refused(
            f"the snapshot was written by user id {fields.get('owner_uid')!r}, not by you "
            f"({uid}): only your own snapshots are loaded"
        )
    entries = fields.get("variables")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise Refused("the snapshot's manifest is damaged (no list of variables)")
    if fields.get("sha256") != entries_digest(entries):
        raise Refused("the snapshot's manifest is damaged (its checksum does not match)")
    return entries


def _data_name(fields: dict[str, Any]) -> str:
    """The data file's name: a plain name beside the manifest (no path)."""
    data_name = fields.get("data")
    if not isinstance(data_name, str) or "/" in data_name or data_name in ("", ".", ".."):
        raise Refused("the snapshot's manifest names no data file beside it")
    return data_name


def check_places(entries: list[dict[str, Any]], size: int) -> None:
    """Each entry has a place (offset, length) inside a data file of ``size`` bytes."""
    for entry in entries:
        offset, length = entry.get("offset"), entry.get("length")
        if not (isinstance(offset, int) and isinstance(length, int)) or offset < 0 or length < 0:
            raise Refused("the snapshot's manifest is damaged (a variable has no place)")
        if offset + length > size:
            raise Refused("the snapshot's data file is shorter than its manifest says")


def is_outcome_file(name: str) -> bool:
    """Whether ``name`` is a background writer's outcome file (``.<key>.<token>.outcome``)."""
    return name.startswith(".") and name.endswith(".outcome") and "/" not in name


def parse_outcome(content: bytes) -> KernelStateOutcome:
    """The outcome a kernel's background writer left (its file's bytes); :class:`ValueError`
    where they are not one."""
    return KernelStateOutcome.from_json(json.loads(content))

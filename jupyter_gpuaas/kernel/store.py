"""The on-disk snapshot of one notebook's variables, and the checks before anything is loaded.

A snapshot is two files in the state directory (under the user's home, mode 0600):

- ``<key>.<token>.data``: the variables' bytes, one after another;
- ``<key>.json``: the manifest: format and version, owner uid, package version, the notebook,
  and per variable its kind, place in the data file and sha256, plus the variables that were not
  kept and why. Its ``sha256`` covers that list, so each byte of the data is checked.

Both are written to temporary files and renamed, the manifest last: a reader sees the old
snapshot or the new one, never half of one. Unpickling runs code, so :func:`read_manifest`
refuses (:class:`Refused`) a snapshot that is not this user's own, in their own home, of a
known format, before any of its data is read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from jupyter_gpuaas.core.kernel_state import state_directory as core_state_directory

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Manifest",
    "OutOfBudget",
    "OutOfTime",
    "Refused",
    "Sink",
    "entries_digest",
    "read_manifest",
    "read_verified",
    "state_directory",
]

FORMAT = "jupyter-gpuaas kernel state"
FORMAT_VERSION = 1
"""The layout this code writes and the only one it reads; a change that an older reader would
misread gets a new number (the older package then refuses it with a message)."""
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
CHUNK = 16 * 1024 * 1024
"""Bytes written or hashed at a time: the time bound is checked between two chunks."""
PARALLEL_FROM = 1024 * 1024
"""Chunks from this size are hashed in a thread while they are written (or the next is read)."""


@functools.cache
def _hasher() -> ThreadPoolExecutor:
    """One thread that hashes beside the kernel's own, made when first needed."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuaas-state-hash")


class Refused(Exception):
    """A snapshot that must not be loaded, and why, in words for the user."""


class OutOfBudget(Exception):
    """Writing one more byte would pass the size budget."""


class OutOfTime(Exception):
    """The time bound has passed."""


def state_directory(configured: str) -> Path:
    """The snapshot folder in this user's home (:func:`~jupyter_gpuaas.core.kernel_state.\
state_directory`); :class:`Refused` where it lies elsewhere."""
    try:
        return core_state_directory(configured, Path.home())
    except ValueError as e:
        raise Refused(str(e)) from e


class Sink:
    """A file that counts, hashes and bounds what is written to it (one entry at a time):
    :class:`OutOfBudget` before a write would pass ``limit`` bytes in all, :class:`OutOfTime`
    once ``deadline`` (in ``clock``'s seconds, ``time.monotonic()`` unless told) has passed."""

    def __init__(
        self,
        file: IO[bytes],
        limit: int,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file = file
        self.limit = limit
        self.deadline = deadline
        self.clock = clock
        self.written = 0
        self.entry_start = 0
        self._hash = hashlib.sha256()

    def begin(self) -> None:
        self.entry_start = self.written
        self._hash = hashlib.sha256()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        for start in range(0, max(len(view), 1), CHUNK):
            part = view[start : start + CHUNK]
            if self.written + len(part) > self.limit:
                raise OutOfBudget
            if self.clock() > self.deadline:
                raise OutOfTime
            if len(part) < PARALLEL_FROM:
                self.file.write(part)
                self._hash.update(part)
            else:  # both let go of the GIL: hash on a second core while the chunk is written
                hashed = _hasher().submit(self._hash.update, part)
                self.file.write(part)
                hashed.result()
            self.written += len(part)
        return len(view)

    def end(self) -> tuple[int, int, str]:
        """The entry just written: its offset, length and sha256."""
        return self.entry_start, self.written - self.entry_start, self._hash.hexdigest()

    def undo(self) -> None:
        """Forget the entry being written (it failed): the file ends where it began."""
        self.file.seek(self.entry_start)
        self.file.truncate()
        self.written = self.entry_start


def entries_digest(entries: list[dict[str, Any]]) -> str:
    """The manifest's ``sha256``: of its entries (each with its own data's sha256)."""
    canonical = json.dumps(entries, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class Manifest:
    """A manifest that passed :func:`read_manifest`'s checks."""

    path: Path
    data_path: Path
    fields: dict[str, Any]

    @property
    def entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = self.fields["variables"]
        return entries


def _own_file(path: Path, what: str) -> os.stat_result:
    try:
        info = path.lstat()
    except FileNotFoundError as e:
        raise Refused(f"the snapshot's {what} {path.name} is missing") from e
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"the snapshot's {what} {path.name} is not a plain file")
    if info.st_uid != os.getuid():
        raise Refused(
            f"the snapshot's {what} {path.name} belongs to user id {info.st_uid}, not to you "
            f"({os.getuid()}): only your own snapshots are loaded"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Refused(f"the snapshot's {what} {path.name} can be written by others")
    return info


def read_manifest(path: Path) -> Manifest:
    """The manifest at ``path``, checked: a plain file of this user, not writable by others,
    written by this user (``owner_uid``) in the format this code reads, naming a data file of
    this user beside it, its entries matching its ``sha256``. :class:`Refused` otherwise;
    :class:`FileNotFoundError` when there is none."""
    if not path.exists() and not path.is_symlink():
        raise FileNotFoundError(path)
    info = _own_file(path, "manifest")
    if info.st_size > MAX_MANIFEST_BYTES:
        raise Refused(f"the snapshot's manifest is {info.st_size} bytes: too large to be one")
    try:
        fields = json.loads(path.read_bytes())
    except ValueError as e:
        raise Refused(f"the snapshot's manifest is damaged (not JSON: {e})") from e
    entries = _check_fields(fields)
    data_path = path.parent / _data_name(fields)
    _check_places(entries, _own_file(data_path, "data file").st_size)
    return Manifest(path=path, data_path=data_path, fields=fields)


def _check_fields(fields: Any) -> list[dict[str, Any]]:
    """The manifest's entries, once its fields say it is a manifest of this format, written by
    this user, its entries matching its checksum; :class:`Refused` otherwise."""
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        raise Refused("the file is not a jupyter-gpuaas kernel state manifest")
    version = fields.get("format_version")
    if version != FORMAT_VERSION:
        written_by = fields.get("package_version", "an unknown version")
        raise Refused(
            f"the snapshot is in format version {version!r} (written by jupyter-gpuaas "
            f"{written_by}); this version reads only format {FORMAT_VERSION}"
        )
    if fields.get("owner_uid") != os.getuid():
        raise Refused(
            f"the snapshot was written by user id {fields.get('owner_uid')!r}, not by you "
            f"({os.getuid()}): only your own snapshots are loaded"
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


def _check_places(entries: list[dict[str, Any]], size: int) -> None:
    """Each entry has a place (offset, length) inside a data file of ``size`` bytes."""
    for entry in entries:
        offset, length = entry.get("offset"), entry.get("length")
        if not (isinstance(offset, int) and isinstance(length, int)) or offset < 0 or length < 0:
            raise Refused("the snapshot's manifest is damaged (a variable has no place)")
        if offset + length > size:
            raise Refused("the snapshot's data file is shorter than its manifest says")


def read_verified(manifest: Manifest, data: IO[bytes]) -> list[bytearray]:
    """Each variable's bytes, read once and checked against its sha256 as they are read;
    :class:`Refused` naming the first that differs, before the caller loads any."""
    buffers = []
    for entry in manifest.entries:
        data.seek(entry["offset"])
        buffer = bytearray(entry["length"])
        view = memoryview(buffer)
        digest = hashlib.sha256()
        done = 0
        hashed: Future[None] | None = None
        while done < len(buffer):
            n = data.readinto(view[done : done + CHUNK])  # type: ignore[attr-defined]
            if not n:
                raise Refused("the snapshot's data file is shorter than its manifest says")
            if hashed is not None:
                hashed.result()
            # Hash this chunk on a second core while the next one is read.
            hashed = _hasher().submit(digest.update, view[done : done + n])
            done += n
        if hashed is not None:
            hashed.result()
        if digest.hexdigest() != entry.get("sha256"):
            raise Refused(
                f"the snapshot's data is damaged (the checksum of `{entry.get('name')}` does "
                "not match); nothing was loaded"
            )
        buffers.append(buffer)
    return buffers

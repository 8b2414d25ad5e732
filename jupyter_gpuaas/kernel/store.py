"""The on-disk snapshot of one notebook's variables, and the checks before anything is loaded.

A snapshot is two files in the state directory (under the user's home, mode 0600):

- ``<key>.<token>.data``: the variables' bytes, one after another (a pickled variable: its
  pickle, then its out-of-band buffers, their lengths in its entry's ``parts``);
- ``<key>.json``: the manifest: format and version, owner uid, package version, the notebook,
  and per variable its kind, place in the data file and checksum, plus the variables that were
  not kept and why. Its ``sha256`` covers that list, so each byte of the data is checked.

The checksum of each variable is XXH3-128 (format 2; :data:`CHECKSUMS`): it detects damage at
memory speed, where SHA-256 ran at a third of the disk's speed. It is no defence against a
forger and needs not be: who may write the files is what the owner and mode checks decide.
Snapshots of format 1 (SHA-256) are still read.

Both are written to temporary files and renamed, the manifest last: a reader sees the old
snapshot or the new one, never half of one. Unpickling runs code, so :func:`read_manifest`
refuses (:class:`Refused`) a snapshot that is not this user's own, in their own home, of a
known format, before any of its data is read. The format and its checks live in
:mod:`jupyter_gpuaas.core.kernel_state` and the reader in :mod:`jupyter_gpuaas.statefiles`,
where the server's listing reads manifests with the same checks; they are named here too,
for the kernel's code.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import mmap
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import xxhash

from jupyter_gpuaas.core.kernel_state import (
    FORMAT,
    FORMAT_VERSION,
    Manifest,
    Refused,
    entries_digest,
)
from jupyter_gpuaas.statefiles import open_own_file, read_manifest
from jupyter_gpuaas.statefiles import state_directory as home_state_directory

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Manifest",
    "OutOfBudget",
    "OutOfRoom",
    "OutOfTime",
    "Refused",
    "Sink",
    "checksum_of",
    "entries_digest",
    "open_own_file",
    "read_manifest",
    "read_verified",
    "read_verified_each",
    "state_directory",
]

CHUNK = 16 * 1024 * 1024
"""Bytes written or read at a time: the time bound and the budget are checked between two."""
PIECE = 1024 * 1024
"""Bytes hashed then written (or read then hashed) at a time: the write and the hash read the
piece from the processor's cache, where a hash beside the write on another thread read every
byte from memory twice (1 MiB pieces wrote 10-30 % faster on the development machine)."""
LARGE = 1024 * 1024
"""A part of at least this many bytes is read into memory of its own from the system
(anonymous ``mmap``): not zero-filled first, as a ``bytearray`` is, and freed whole."""
READ_AS_BYTES = frozenset({"polars"})
"""The kinds whose bytes are read as one ``bytes``: what their loader parses without copying
it first (polars parses an ``io.BytesIO`` over ``bytes`` where they lie, where over other
memory it copies them: a 384 MiB frame came back in 0.58-0.73 s against 1.1-1.3 s)."""
MAX_READ = 0x7FFFF000
"""Bytes asked of one ``read``: Linux's most (a part up to that is read straight into its
``bytes``; a larger one is read in pieces, then joined, a copy)."""


CHECKSUMS: dict[int, tuple[str, Callable[..., Any]]] = {
    1: ("sha256", hashlib.sha256),
    2: ("xxh3_128", xxhash.xxh3_128),
}
"""Per format version: the entries' checksum field and its hash."""
CHECKSUM, _new_hash = CHECKSUMS[FORMAT_VERSION]


def checksum_of(data: bytes) -> dict[str, str]:
    """An entry's checksum field for ``data``, as this version writes it."""
    return {CHECKSUM: _new_hash(data).hexdigest()}


class OutOfBudget(Exception):
    """Writing one more byte would pass the size budget."""


class OutOfTime(Exception):
    """The time bound has passed."""


class OutOfRoom(OSError):
    """Writing one more byte would pass the free space above the reserve: the snapshot cannot
    be written beside the one it replaces, which is kept."""


def state_directory(configured: str) -> Path:
    """The snapshot folder in this user's home (:func:`~jupyter_gpuaas.core.kernel_state.\
state_directory_in`, resolved); :class:`Refused` where it lies elsewhere."""
    try:
        return home_state_directory(configured, Path.home())
    except ValueError as e:
        raise Refused(str(e)) from e


class Sink:
    """A file that counts, hashes and bounds what is written to it (one entry at a time):
    :class:`OutOfBudget` before a write would pass ``limit`` bytes in all (the variable is then
    lost, the snapshot goes on), :class:`OutOfRoom` before it would pass ``room`` (the free
    space beside the previous snapshot: the snapshot fails), :class:`OutOfTime` once
    ``deadline`` (in ``clock``'s seconds, ``time.monotonic()`` unless told) has passed.

    What stopped it is kept in :attr:`stopped` and a failed write of the file in :attr:`broken`,
    so that the caller tells them from the user's own errors even where a pickler or
    ``torch.save`` wraps them in an exception of its own."""

    def __init__(
        self,
        file: IO[bytes],
        limit: int,
        deadline: float,
        clock: Callable[[], float] = time.monotonic,
        room: int | None = None,
    ) -> None:
        self.file = file
        self.limit = limit
        self.room = limit if room is None else room
        self.deadline = deadline
        self.clock = clock
        self.written = 0
        self.entry_start = 0
        self.stopped: OutOfBudget | OutOfTime | None = None
        self.broken: OSError | None = None
        self._hash = _new_hash()

    def begin(self) -> None:
        self.entry_start = self.written
        self.stopped = None
        self._hash = _new_hash()

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        for start in range(0, max(len(view), 1), CHUNK):
            part = view[start : start + CHUNK]
            if self.broken is not None:
                raise self.broken
            if self.written + len(part) > self.limit:
                self.stopped = OutOfBudget()
                raise self.stopped
            if self.written + len(part) > self.room:
                self.broken = OutOfRoom(self.room)
                raise self.broken
            if self.clock() > self.deadline:
                self.stopped = OutOfTime()
                raise self.stopped
            try:
                for at in range(0, len(part), PIECE):
                    piece = part[at : at + PIECE]
                    self._hash.update(piece)
                    _write_all(self.file, piece)
            except OSError as e:  # the disk is full, the volume gone: the snapshot fails
                self.broken = e
                raise
            self.written += len(part)
        return len(view)

    def flush(self) -> None:
        """``torch.save`` flushes the file it is given (nothing is buffered here)."""
        self.file.flush()

    def end(self) -> tuple[int, int, dict[str, str]]:
        """The entry just written: its offset, length and checksum field."""
        checksum = {CHECKSUM: self._hash.hexdigest()}
        return self.entry_start, self.written - self.entry_start, checksum

    def undo(self) -> None:
        """Forget the entry being written (it failed): the file ends where it began."""
        self.file.seek(self.entry_start)
        self.file.truncate()
        self.written = self.entry_start


def _write_all(file: IO[bytes], part: memoryview) -> None:
    """Write all of ``part``: an unbuffered file may write less than asked (a disk filling up
    writes what fits, then fails on the rest)."""
    done = 0
    while done < len(part):
        n = file.write(part[done:])
        if not n:  # None: a non-blocking file that took nothing (none of ours is one)
            raise OSError("the snapshot's data file took no bytes")
        done += n


def read_verified(manifest: Manifest, data: IO[bytes]) -> list[list[Any]]:
    """Each variable's bytes (its parts: one, or a pickle and its out-of-band buffers, each in
    memory of its own: a ``bytearray``, or an anonymous ``mmap`` from :data:`LARGE` bytes),
    read once and checked against its checksum as they are read; :class:`Refused` naming the
    first that differs, before the caller loads any."""
    return list(read_verified_each(manifest, data))


def read_verified_each(manifest: Manifest, data: IO[bytes]) -> Iterator[list[Any]]:
    """:func:`read_verified`, one variable at a time: each is given once checked (a caller
    that loads as it goes would load those before a damaged one)."""
    field, new_hash = CHECKSUMS[manifest.fields["format_version"]]
    for entry in manifest.entries:
        parts = _parts(entry)
        data.seek(entry["offset"])
        digest = new_hash()
        read = _read_bytes if entry.get("kind") in READ_AS_BYTES else _read_into
        buffers = [read(data, n, digest) for n in parts]
        _forget(data, entry["offset"], entry["offset"] + entry["length"])
        if digest.hexdigest() != entry.get(field):
            raise Refused(
                f"the snapshot's data is damaged (the checksum of `{entry.get('name')}` does "
                "not match); nothing was loaded"
            )
        yield buffers


def _parts(entry: dict[str, Any]) -> list[int]:
    """The lengths of an entry's parts, which fill its place."""
    parts = entry.get("parts", [entry["length"]])
    if (
        not isinstance(parts, list)
        or not all(isinstance(n, int) and n >= 0 for n in parts)
        or sum(parts) != entry["length"]
    ):
        raise Refused("the snapshot's manifest is damaged (a variable's parts do not fill it)")
    return parts


def _read_into(data: IO[bytes], length: int, digest: Any) -> Any:
    """``length`` bytes of ``data`` in memory of their own (see :data:`LARGE`), each piece
    hashed as soon as it is read."""
    buffer: Any = bytearray(length) if length < LARGE else _large(length)
    view = memoryview(buffer)
    done = 0
    while done < length:
        n = data.readinto(view[done : done + CHUNK])  # type: ignore[attr-defined]
        if not n:
            raise Refused("the snapshot's data file is shorter than its manifest says")
        for at in range(done, done + n, PIECE):
            digest.update(view[at : min(at + PIECE, done + n)])
        done += n
    view.release()
    return buffer


def _read_bytes(data: IO[bytes], length: int, digest: Any) -> bytes:
    """``length`` bytes of ``data`` as one ``bytes`` (see :data:`READ_AS_BYTES`), hashed once
    read."""
    pieces: list[bytes] = []
    left = length
    while left:
        piece = data.read(min(left, MAX_READ))
        if not piece:
            raise Refused("the snapshot's data file is shorter than its manifest says")
        pieces.append(piece)
        left -= len(piece)
    buffer = pieces[0] if len(pieces) == 1 else b"".join(pieces)
    with memoryview(buffer) as view:
        for at in range(0, length, PIECE):
            digest.update(view[at : at + PIECE])
    return buffer


def _large(length: int) -> mmap.mmap:
    # No MADV_HUGEPAGE: under memory pressure (a restore of many GiB) its faults compact
    # memory first, which read a 20 GiB snapshot at a fifth of the disk's speed.
    return mmap.mmap(-1, length)


def _forget(data: IO[bytes], start: int, end: int) -> None:
    """Drop the bytes just read from the page cache: a restore reads each once, and keeping
    them would hold the snapshot twice in memory (the process's copy and the cache's)."""
    if hasattr(os, "posix_fadvise") and end > start:
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            os.posix_fadvise(data.fileno(), start, end - start, os.POSIX_FADV_DONTNEED)

"""The user's own kernel-state files, opened and read with their checks (docs/kernel-state.md).

One reader for every path that reads a snapshot's files: the kernel's restore and its clean-up
after a snapshot (:mod:`jupyter_gpuaas.kernel`), the server's listing and its wait for a
background writer's outcome (:mod:`jupyter_gpuaas.server.kernel_requests`). It opens and reads;
what it read is judged by the pure checks of :mod:`jupyter_gpuaas.core.kernel_state`, on the
file as opened (a link is not followed, a FIFO is not waited on). Nothing here unpickles.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from jupyter_gpuaas.core.kernel_state import (
    KernelStateOutcome,
    Manifest,
    Refused,
    check_in_home,
    check_opened,
    check_places,
    parse_manifest,
    parse_outcome,
    state_directory_in,
)

__all__ = [
    "MAX_MANIFEST_BYTES",
    "MAX_OUTCOME_BYTES",
    "open_own_file",
    "read_manifest",
    "read_outcome_file",
    "state_directory",
]

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""A manifest's size at most."""
MAX_OUTCOME_BYTES = 4 * 1024 * 1024
"""An outcome file's size at most (its lost list is bounded by the outcome's reader)."""

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
"""A link is not followed, and a FIFO opens without waiting for a writer (then it is refused):
the file is checked as opened, not by its name."""


def state_directory(configured: str, home: Path) -> Path:
    """The snapshot folder ``configured`` names (``~`` is ``home``; a relative path is under
    it), with symbolic links resolved; :class:`ValueError` unless it lies in ``home``.
    (Resolving reads the links on the way; it writes nothing.)"""
    resolved_home = home.resolve()
    directory = state_directory_in(configured, resolved_home).resolve()
    return check_in_home(directory, resolved_home, configured)


def open_own_file(path: Path, what: str) -> tuple[int, os.stat_result]:
    """``path`` opened for reading (its descriptor, and its status as opened), once it is a
    plain file of this user that no one else may write; :class:`Refused` otherwise (the
    descriptor closed), :class:`FileNotFoundError` where there is none."""
    try:
        fd = os.open(path, _OPEN_FLAGS | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as e:  # a link (ELOOP), a socket (ENXIO), no right to read it, ...
        if e.errno == errno.ELOOP or not _plain_file(path):
            raise Refused(f"the snapshot's {what} {path.name} is not a plain file") from e
        raise Refused(f"the snapshot's {what} {path.name} cannot be opened ({e.strerror})") from e
    try:
        info = os.fstat(fd)
        check_opened(info, os.getuid(), what, path.name)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _plain_file(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def read_manifest(path: Path) -> Manifest:
    """The manifest at ``path``, checked: a plain file of this user, not writable by others,
    at most :data:`MAX_MANIFEST_BYTES`, written by this user (``owner_uid``) in the format this
    code reads, naming a data file of this user beside it that holds every entry's place, its
    entries matching its ``sha256``. :class:`Refused` otherwise; :class:`FileNotFoundError`
    when there is none. Nothing of the data is read."""
    content = _read_own_bounded(path, "manifest", MAX_MANIFEST_BYTES)
    fields, data_name = parse_manifest(content, os.getuid())
    data_path = path.parent / data_name
    try:
        data_fd, data_info = open_own_file(data_path, "data file")
    except FileNotFoundError as e:
        raise Refused(f"the snapshot's data file {data_path.name} is missing") from e
    os.close(data_fd)
    check_places(fields["variables"], data_info.st_size)
    return Manifest(path=path, data_path=data_path, data_bytes=data_info.st_size, fields=fields)


def read_outcome_file(path: Path) -> KernelStateOutcome:
    """The outcome a kernel's background writer left at ``path`` (checked as a manifest is:
    the user's own plain file, bounded); :class:`FileNotFoundError` while there is none,
    :class:`Refused` or :class:`ValueError` for anything else."""
    return parse_outcome(_read_own_bounded(path, "outcome file", MAX_OUTCOME_BYTES))


def _read_own_bounded(path: Path, what: str, limit: int) -> bytes:
    """The bytes of the user's own plain file at ``path`` (:func:`open_own_file`), refused
    when it is, or grows while read to, more than ``limit`` bytes."""
    fd, info = open_own_file(path, what)
    try:
        if info.st_size > limit:
            raise Refused(f"the snapshot's {what} is {info.st_size} bytes: too large to be one")
        with os.fdopen(fd, "rb", closefd=False) as file:
            content = file.read(limit + 1)
    finally:
        os.close(fd)
    if len(content) > limit:  # it grew since: still not one
        raise Refused(f"the snapshot's {what} is over {limit} bytes")
    return content

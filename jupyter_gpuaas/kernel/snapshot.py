"""Save a kernel's variables (IPython's user namespace) as one notebook's snapshot.

Each variable is saved on its own, so one that cannot be saved is named with the reason and
the rest are kept: modules by name (re-imported on restore), plain numpy arrays as raw bytes,
CuPy and JAX arrays as the raw bytes of their copy in host memory (with their device),
PyTorch tensors and models with ``torch.save`` (a GPU tensor keeps its device kind), polars
frames in polars' own binary form written straight into the file, everything else (pandas frames
included) with cloudpickle, protocol 5, its large buffers (an array's, a frame's columns) out
of band: written from the object's own memory, not copied into the pickle. Small variables
go first, so a size budget that runs out loses the largest. Bounded: a size budget (also the
free space, less a reserve) and a deadline checked between chunks of at most
:data:`~.store.CHUNK` bytes.

The kernel stops only for a consistent view of its variables (:func:`snapshot_in_background`):
it takes the device-to-host copies of GPU arrays and tensors, then forks; the child, which sees
the variables as they were at that instant (copy-on-write), writes them and exits, while the
kernel runs its user's next cell. Where the process holds a GPU library, everything else is
pickled before the fork too (a child of a CUDA process must not touch the GPU), its large
buffers still written by the child from memory. Where a fork is impossible, the kernel writes
the snapshot itself (:func:`snapshot`), as it did before.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import glob
import importlib.metadata
import io
import json
import math
import os
import pickle
import re
import shutil
import signal
import socket
import sqlite3
import stat
import sys
import tempfile
import threading
import time
import types
import uuid
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import cloudpickle  # type: ignore[import-untyped, unused-ignore]

from jupyter_gpuaas.core.kernel_state import KernelStateOutcome, LostVariable, is_data_of
from jupyter_gpuaas.kernel.store import (
    FORMAT,
    FORMAT_VERSION,
    Manifest,
    OutOfBudget,
    OutOfRoom,
    OutOfTime,
    Refused,
    Sink,
    checksum_of,
    entries_digest,
    read_manifest,
    state_directory,
)

__all__ = [
    "estimate",
    "estimate_request",
    "snapshot",
    "snapshot_in_background",
    "snapshot_request",
    "user_variables",
]

# IPython's own names beside those in ``user_ns_hidden``: its input and output history.
_IPYTHON_NAME = re.compile(r"_(i{1,3}|i?\d+|_{0,2}|dh|ih|oh)")
_DATABASE_MODULES = (
    "sqlite3",
    "psycopg",
    "psycopg2",
    "pymysql",
    "MySQLdb",
    "mysql.connector",
    "sqlalchemy.engine",
    "sqlalchemy.orm.session",
    "pymongo",
    "redis",
    "duckdb",
)
# What pickle names in "cannot pickle 'X' object", and the words for it.
_HELD = {
    "generator": "holds a generator",
    "_io.": "holds an open file",
    "socket": "holds a socket",
    "_thread.": "holds a lock or a thread",
    "sqlite3.": "holds a database connection",
    "coroutine": "holds a coroutine",
}
TORCH_KINDS = ("Tensor", "nn.Module")
"""What ``torch.save`` writes (dotted names under ``torch``): tensors and models."""


def user_variables(shell: Any) -> dict[str, Any]:
    """The user's variables: IPython's user namespace without IPython's own names (those it
    started with, its history ``_``, ``_i3``, ``_5``, ...) and without dunder names."""
    hidden: Mapping[str, Any] = getattr(shell, "user_ns_hidden", {})
    out = {}
    for name, value in shell.user_ns.items():
        if name.startswith("__") or _IPYTHON_NAME.fullmatch(name):
            continue
        if name in hidden and hidden[name] is value:
            continue
        out[name] = value
    return out


def unsaveable(value: object) -> str | None:
    """Why ``value`` cannot be saved, for the kinds that never can (their state lives outside
    the process or in a running frame); ``None`` for the rest."""
    if isinstance(value, types.GeneratorType):
        return "a generator"
    if isinstance(value, types.AsyncGeneratorType):
        return "an async generator"
    if isinstance(value, types.CoroutineType):
        return "a coroutine"
    if isinstance(value, io.IOBase):
        return "an open file" if not value.closed else "a closed file"
    if isinstance(value, socket.socket):
        return "a socket"
    if isinstance(value, threading.Thread):
        return "a thread"
    if isinstance(value, (sqlite3.Connection, sqlite3.Cursor)):
        return "a database connection"
    module = type(value).__module__ or ""
    if any(module == m or module.startswith(m + ".") for m in _DATABASE_MODULES):
        return "a database connection"
    return None


def _failure_reason(error: BaseException) -> str:
    text = str(error)
    found = re.search(r"cannot pickle '([^']+)'", text)
    if found:
        for prefix, words in _HELD.items():
            if found[1].startswith(prefix):
                return words
        return f"holds a {found[1]} object, which cannot be saved"
    text = text if len(text) <= 120 else text[:117] + "..."
    return f"cannot be saved ({type(error).__name__}: {text})"


def estimated_size(value: object) -> int:
    """A cheap guess of ``value``'s saved size in bytes, to save small variables first and to
    check the free space (arrays, frames and tensors know theirs; others are guessed)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    memory_usage = getattr(value, "memory_usage", None)
    if callable(memory_usage) and type(value).__module__.startswith("pandas"):
        with contextlib.suppress(Exception):
            usage = memory_usage(index=True, deep=False)
            return int(usage.sum() if hasattr(usage, "sum") else usage)
    if _is_torch(value, "Tensor"):
        return int(value.element_size() * value.nelement())  # type: ignore[attr-defined]
    try:
        return sys.getsizeof(value)
    except Exception:  # noqa: BLE001 - a __sizeof__ of the user's that fails: guess small
        return 64


def _is_torch(value: object, kind: str) -> bool:
    """Whether ``value`` is a ``torch.<kind>`` (``"nn.Module"``: a model), torch imported."""
    found: Any = sys.modules.get("torch")
    for part in kind.split("."):
        found = getattr(found, part, None)
    return isinstance(found, type) and isinstance(value, found)


def _is_plain_array(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    if numpy is None or type(value) is not numpy.ndarray:
        return False
    dtype = value.dtype
    return dtype.fields is None and not dtype.hasobject and dtype.kind != "V"


def device_array(value: Any) -> tuple[str, str, Any] | None:
    """A CuPy or JAX array as ``(library, device, its copy in host memory as a numpy array)``
    (the device as ``"cuda:0"``, ``"gpu:0"``, ``"cpu:0"``); ``None`` for anything else, and for
    a JAX array spread over several devices (it is pickled whole)."""
    module = type(value).__module__ or ""
    if (module == "cupy" or module.startswith("cupy.")) and hasattr(value, "get"):
        return "cupy", f"cuda:{value.device.id}", value.get()
    jax: Any = sys.modules.get("jax")
    array_type = getattr(jax, "Array", None)
    if isinstance(array_type, type) and isinstance(value, array_type):
        jax_array: Any = value
        devices = list(jax_array.devices())
        if len(devices) == 1:
            import numpy

            device = devices[0]
            return "jax", f"{device.platform}:{device.id}", numpy.asarray(jax_array)
    return None


def _save_array(value: Any, sink: Sink) -> dict[str, Any]:
    import numpy

    fortran = value.flags.f_contiguous and not value.flags.c_contiguous
    contiguous = numpy.ascontiguousarray(value.T if fortran else value)
    sink.write(memoryview(contiguous.data).cast("B"))
    return {
        "kind": "ndarray",
        "dtype": value.dtype.str,
        "shape": list(value.shape),
        "fortran": bool(fortran),
    }


def _is_polars_frame(value: Any) -> bool:
    polars: Any = sys.modules.get("polars")
    return polars is not None and type(value) is getattr(polars, "DataFrame", None)


def _save_polars(value: Any, file: Any) -> dict[str, Any]:
    """A polars frame in polars' own binary form (``DataFrame.serialize``: its pickle state),
    written piece by piece into ``file``: the pickle builds it whole in memory first, then
    copies it into a ``bytes``, 1.6 times as long in a forked writer. A frame of several
    chunks is made one chunk in the pause first (:func:`_in_the_pause`)."""
    value.serialize(file)
    return {"kind": "polars", "type": "polars.DataFrame"}


def _raw(buffer: pickle.PickleBuffer) -> memoryview:
    """An out-of-band buffer's bytes, from the object's memory (a copy only where they are not
    contiguous, which numpy never hands out of band)."""
    try:
        return buffer.raw()
    except BufferError:
        return memoryview(memoryview(buffer).tobytes())


def _pickled(value: Any, sink: Any) -> tuple[dict[str, Any], list[pickle.PickleBuffer]]:
    """``value`` pickled into ``sink``, its large buffers out of band (returned, not written):
    the entry's fields and the buffers."""
    buffers: list[pickle.PickleBuffer] = []
    cloudpickle.dump(value, sink, protocol=5, buffer_callback=buffers.append)
    kind = {"kind": "pickle", "type": f"{type(value).__module__}.{type(value).__qualname__}"}
    return kind, buffers


def _save_one(name: str, value: Any, sink: Sink) -> dict[str, Any]:
    """Write one variable to ``sink``; its manifest entry (without place and checksum)."""
    if isinstance(value, _Ready):
        parts = [memoryview(part).cast("B") for part in value.parts]
        for part in parts:
            sink.write(part)
        return {**value.entry, **_layout(parts)}
    if _is_plain_array(value):
        return _save_array(value, sink)
    if isinstance(value, _OnDevice):
        return {**_save_array(value.host, sink), "library": value.library, "device": value.device}
    for kind in TORCH_KINDS:
        if _is_torch(value, kind):
            torch = sys.modules["torch"]
            torch.save(value, sink, pickle_module=cloudpickle)
            return {"kind": "torch", "device": _torch_device(value), "type": f"torch.{kind}"}
    if _is_polars_frame(value):
        return _save_polars(value, sink)
    start = sink.written
    entry, buffers = _pickled(value, sink)
    lengths = [sink.written - start]
    for buffer in buffers:
        raw = _raw(buffer)
        sink.write(raw)
        lengths.append(raw.nbytes)
    return {**entry, "parts": lengths} if buffers else entry


def _layout(parts: list[memoryview]) -> dict[str, Any]:
    """The ``parts`` field of an entry written from several pieces (a pickle and its buffers)."""
    return {"parts": [part.nbytes for part in parts]} if len(parts) > 1 else {}


def _torch_device(value: Any) -> str:
    """A tensor's device, or a model's: ``cpu`` only where every parameter and buffer is there
    (a model on two devices is named by the first that is not the CPU)."""
    if _is_torch(value, "Tensor"):
        return str(value.device)
    devices = [str(t.device) for t in (*value.parameters(), *value.buffers())]
    return next((d for d in devices if d != "cpu"), "cpu")


def _words(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


# --------------------------------------------------------------------------- the pause


@dataclass(frozen=True)
class _Ready:
    """A variable serialised in the kernel's pause (a GPU object, or anything in a process
    that holds a GPU): the entry's fields and the bytes to write (a pickle and its buffers)."""

    entry: dict[str, Any]
    parts: list[Any]


@dataclass(frozen=True)
class _OnDevice:
    """A CuPy or JAX array's copy in host memory, taken in the kernel's pause."""

    library: str
    device: str
    host: Any


@dataclass
class _Plan:
    """What the writer needs, decided in the kernel's pause: where, within which bounds, and
    each variable as the writer will see it (its value, or what replaced it in the pause)."""

    folder: Path
    key: str
    token: str
    notebook: str
    kernel_id: str
    limit: int
    room: int
    limit_at: float
    clock: Callable[[], float]
    started: float
    kept_words: str
    order: list[tuple[str, Any]] = field(default_factory=list)
    lost: list[LostVariable] = field(default_factory=list)
    superseded: Path | None = None
    """The data file of the snapshot this one replaced, once this one is the one read: removed
    after the outcome is given (:func:`_drop_superseded`), which need not wait for it."""

    @property
    def status_path(self) -> Path:
        """Where a background writer leaves its outcome for the server."""
        return self.folder / f".{self.key}.{self.token}.outcome"


def _gpu_in_process() -> bool:
    """Whether a GPU library is at work in this process: a forked child must then not touch
    any object that might hold GPU memory (CUDA does not survive a fork)."""
    torch: Any = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    with contextlib.suppress(Exception):
        if cuda is not None and cuda.is_initialized():
            return True
    return any(m in sys.modules for m in ("cupy", "jax"))


def _prepare(order: list[tuple[str, Any]], plan: _Plan, *, for_fork: bool) -> None:
    """Put each variable of ``order`` in ``plan`` as the writer will see it: modules and what
    cannot be saved decided; GPU arrays and tensors copied to host memory now; and, where the
    writer will be a forked child of a process that holds a GPU, everything but plain arrays
    and CPU tensors pickled now (its large buffers referenced, not copied)."""
    gpu = for_fork and _gpu_in_process()
    for index, (name, value) in enumerate(order):
        if plan.clock() > plan.limit_at:
            late = order[index:]
            plan.lost += [LostVariable(n, "the time bound was reached") for n, _ in late]
            return
        if isinstance(value, types.ModuleType):
            plan.order.append((name, value))
            continue
        reason = unsaveable(value)
        if reason:
            plan.lost.append(LostVariable(name, reason))
            continue
        try:
            plan.order.append((name, _in_the_pause(value, gpu=gpu, fork=for_fork)))
        except Exception as e:  # noqa: BLE001 - the user's object failed to copy or pickle
            plan.lost.append(LostVariable(name, _failure_reason(e)))


def _in_the_pause(value: Any, *, gpu: bool, fork: bool) -> Any:
    """``value`` as the writer will see it (see :func:`_prepare`)."""
    if _is_plain_array(value):
        return value
    on_device = device_array(value)
    if on_device is not None and _is_plain_array(on_device[2]):
        return _OnDevice(*on_device)
    for kind in TORCH_KINDS:
        if _is_torch(value, kind):
            device = _torch_device(value)
            if device == "cpu":
                return value  # the child saves it: it touches no GPU
            saved = io.BytesIO()
            sys.modules["torch"].save(value, saved, pickle_module=cloudpickle)
            entry = {"kind": "torch", "device": device, "type": f"torch.{kind}"}
            return _Ready(entry, [saved.getbuffer()])
    if _is_polars_frame(value) and gpu:
        saved = io.BytesIO()
        return _Ready(_save_polars(value, saved), [saved.getbuffer()])
    if _is_polars_frame(value) and fork and max(value.n_chunks("all"), default=1) > 1:
        # A frame of several chunks is written on polars' thread pool, which a forked child
        # lacks: it would wait for it until its deadline. Made one chunk here (a copy), it is
        # written without the pool. (Polars' IPC file writer, ``write_ipc``, waits for the
        # pool even for one chunk.)
        return value.rechunk()
    if not gpu:
        return value
    stream = io.BytesIO()
    entry, buffers = _pickled(value, stream)
    return _Ready(entry, [stream.getbuffer(), *(_raw(b) for b in buffers)])


# --------------------------------------------------------------------------- the writing


def _write(plan: _Plan) -> KernelStateOutcome:
    """Write ``plan``'s variables as its snapshot and make it the one a restore reads; the
    outcome (``failed``, the previous snapshot kept, where the file could not be written)."""
    fd, temp_name = tempfile.mkstemp(dir=plan.folder, prefix=f".{plan.key}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "w+b", buffering=0) as file:  # a buffer would copy every chunk
            sink = Sink(file, plan.limit, plan.limit_at, plan.clock, room=plan.room)
            entries, lost = _write_variables(plan.order, sink)
            file.flush()
            os.fsync(file.fileno())
        lost = plan.lost + lost
        saved_at = datetime.now(timezone.utc)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "package_version": _package_version(),
            "python": sys.version.split()[0],
            "owner_uid": os.getuid(),
            "notebook": plan.notebook,
            "kernel_id": plan.kernel_id,
            "saved_at": saved_at.isoformat().replace("+00:00", "Z"),
            "seconds": round(plan.clock() - plan.started, 3),
            "bytes": sink.written,
            "variables": entries,
            "sha256": entries_digest(entries),
            "lost": [v.to_json() for v in lost],
        }
        _commit(plan, temp, manifest)
    except OutOfRoom:
        room = _words(max(plan.room, 0))
        return _failed(
            plan,
            f"not enough free space in {plan.folder} to write it beside the previous one "
            f"({room} free above the space kept free, c.GPUaaS.kernel_state_reserve)"
            f"{plan.kept_words}",
        )
    except OSError as e:
        return _failed(plan, f"the snapshot could not be written: {e}{plan.kept_words}")
    finally:  # written or not (an error, the user's interrupt), no temporary file stays
        with contextlib.suppress(OSError):
            temp.unlink()
    return KernelStateOutcome(
        plan.kernel_id,
        plan.notebook,
        "kept_with_losses" if lost else "kept",
        lost=tuple(lost),
        bytes=sink.written,
        seconds=plan.clock() - plan.started,
        saved_at=saved_at,
    )


def _failed(plan: _Plan, error: str) -> KernelStateOutcome:
    seconds = plan.clock() - plan.started
    return KernelStateOutcome(plan.kernel_id, plan.notebook, "failed", error=error, seconds=seconds)


def _write_variables(
    order: list[tuple[str, Any]], sink: Sink
) -> tuple[list[dict[str, Any]], list[LostVariable]]:
    """Write each variable of ``order`` to ``sink``: the manifest's entries of those kept, and
    those lost with why. Past the time bound, the rest are lost."""
    entries: list[dict[str, Any]] = []
    lost: list[LostVariable] = []
    for index, (name, value) in enumerate(order):
        if isinstance(value, types.ModuleType):
            place = {"offset": 0, "length": 0, **checksum_of(b"")}
            entries.append({"name": name, "kind": "module", "module": value.__name__, **place})
            continue
        sink.begin()
        try:
            entry = _save_one(name, value, sink)
        except Exception as e:  # the user's object's own pickling failed (or the sink)
            if sink.broken is not None:  # the file, not the variable: the snapshot fails
                raise sink.broken from e
            sink.undo()
            if isinstance(sink.stopped, OutOfBudget):  # as raised, or wrapped by a pickler
                left = sink.limit - sink.written
                lost.append(LostVariable(name, f"over the size budget ({_words(left)} was left)"))
                continue
            if isinstance(sink.stopped, OutOfTime):
                late = [LostVariable(n, "the time bound was reached") for n, _ in order[index:]]
                lost += late
                break
            lost.append(LostVariable(name, _failure_reason(e)))
            continue
        offset, length, checksum = sink.end()
        entries.append({"name": name, **entry, "offset": offset, "length": length, **checksum})
    return entries, lost


def _commit(plan: _Plan, temp: Path, manifest: dict[str, Any]) -> None:
    """Make the written data file ``temp`` the snapshot ``plan.key``: rename it, then write the
    manifest (the step that makes it the one read); the data it replaces is left in
    ``plan.superseded``."""
    data = plan.folder / f"{plan.key}.{plan.token}.data"
    os.replace(temp, data)
    manifest_path = plan.folder / f"{plan.key}.json"
    previous = _previous(plan.folder, plan.key)
    try:
        _write_atomically(manifest_path, json.dumps({**manifest, "data": data.name}).encode())
    except BaseException:
        with contextlib.suppress(OSError):
            data.unlink()
        raise
    if previous is not None and previous.data_path != data:
        plan.superseded = previous.data_path


def _drop_superseded(plan: _Plan) -> None:
    """Remove the data file the new snapshot replaced (:attr:`_Plan.superseded`), once the
    outcome is given: freeing a large file takes its file system a while (10-20 ms for 64 MiB
    here), which the reclaim need not wait for."""
    if plan.superseded is not None:
        with contextlib.suppress(OSError):
            plan.superseded.unlink()


# --------------------------------------------------------------------------- the entry points


def _plan(
    shell: Any,
    *,
    directory: str,
    key: str,
    notebook: str,
    kernel_id: str,
    max_bytes: int,
    reserve_bytes: int,
    deadline: float,
    clock: Callable[[], float],
) -> _Plan | KernelStateOutcome:
    """The checks before a snapshot and its bounds; an outcome where there is nothing to write
    (``failed``, or ``kept`` for a namespace with no user variables, which leaves an earlier
    snapshot as it is: a fresh kernel must not wipe the state it has not restored)."""
    started = clock()
    limit_at = started + (deadline - time.time())

    def failed(error: str) -> KernelStateOutcome:
        seconds = clock() - started
        return KernelStateOutcome(kernel_id, notebook, "failed", error=error, seconds=seconds)

    if clock() > limit_at:
        return failed("the time bound passed before the kernel was free")
    try:
        folder = state_directory(directory)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except (Refused, OSError) as e:
        return failed(str(e))
    variables = user_variables(shell)
    if not variables:
        return KernelStateOutcome(kernel_id, notebook, "kept", seconds=clock() - started)
    _clean_up(folder, key)
    previous = _previous(folder, key)
    # The new snapshot is written beside the one it replaces, which stays until it is whole:
    # it may take the space that one frees (the budget), but must fit beside it (the room).
    free = shutil.disk_usage(folder).free
    room = free - reserve_bytes
    limit = min(max_bytes, room + (previous.data_bytes if previous else 0))
    if limit <= 0:
        return failed(
            f"not enough free space in {folder}: {_words(free)} free, {_words(reserve_bytes)} "
            "kept free (c.GPUaaS.kernel_state_reserve)"
        )
    saved_at = previous.fields.get("saved_at") if previous else None
    plan = _Plan(
        folder=folder,
        key=key,
        token=uuid.uuid4().hex[:12],
        notebook=notebook,
        kernel_id=kernel_id,
        limit=limit,
        room=room,
        limit_at=limit_at,
        clock=clock,
        started=started,
        kept_words=f"; the previous snapshot ({saved_at}) is kept" if previous else "",
    )
    _package_version()  # asked here, before the fork, so that each writer has it (see there)
    plan.order = sorted(variables.items(), key=lambda item: estimated_size(item[1]))
    return plan


def snapshot(
    shell: Any,
    *,
    directory: str,
    key: str,
    notebook: str,
    kernel_id: str,
    max_bytes: int,
    reserve_bytes: int,
    deadline: float,
    clock: Callable[[], float] = time.monotonic,
) -> KernelStateOutcome:
    """Save ``shell``'s variables as the snapshot ``key`` in ``directory`` (see the module's
    docstring), written by this process (the kernel is paused throughout); ``deadline`` is a
    ``time.time()``, ``clock`` the seconds it counts down in."""
    plan = _plan(
        shell,
        directory=directory,
        key=key,
        notebook=notebook,
        kernel_id=kernel_id,
        max_bytes=max_bytes,
        reserve_bytes=reserve_bytes,
        deadline=deadline,
        clock=clock,
    )
    if isinstance(plan, KernelStateOutcome):
        return plan
    order, plan.order = plan.order, []
    _prepare(order, plan, for_fork=False)
    outcome = _write(plan)
    _drop_superseded(plan)
    return outcome


WRITER_GRACE = 5.0
"""Seconds past its deadline after which a background writer is killed (it stops writing at
the deadline; this bounds one stuck in a user's object's own pickling)."""


def snapshot_in_background(shell: Any, **arguments: Any) -> dict[str, Any]:
    """:func:`snapshot`, the kernel paused only until a forked child holds a consistent view of
    its variables: ``{"writing": <the outcome file's name in the folder>, "paused_s": ...}``,
    the outcome left in that file by the child (or by the kernel, for a child that died);
    ``{"outcome": ..., "paused_s": ...}`` where there was nothing to write, or where the kernel
    wrote the snapshot itself (no fork here, or the fork failed)."""
    clock: Callable[[], float] = arguments.get("clock", time.monotonic)
    started = clock()
    plan = _plan(shell, **{"clock": clock, **arguments})
    if isinstance(plan, KernelStateOutcome):
        return {"outcome": plan.to_json(), "paused_s": clock() - started}
    order, plan.order = plan.order, []
    can_fork = hasattr(os, "fork") and hasattr(os, "register_at_fork")
    _prepare(order, plan, for_fork=can_fork)
    pid = _fork_writer(plan) if can_fork else None
    if pid is None:  # the kernel writes it itself
        outcome = _write(plan)
        _drop_superseded(plan)
        return {"outcome": outcome.to_json(), "paused_s": clock() - started}
    plan.order = []  # the child's: copies made in the pause are not kept here while it writes
    paused = clock() - started
    reaper = threading.Thread(
        target=_reap, args=(pid, plan), name="gpuaas-state-writer", daemon=True
    )
    reaper.start()
    return {"writing": plan.status_path.name, "paused_s": paused}


def _fork_writer(plan: _Plan) -> int | None:
    """Fork a child that writes ``plan`` (and never returns); its pid, or ``None`` where the
    system refused the fork (no memory for the page tables, too many processes)."""
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a process with threads may deadlock the child, and
        # JAX warns at any fork: this child takes no lock another thread may hold (it writes
        # files and pickles the user's objects, logs nothing, imports nothing new) and ends
        # with os._exit; a child stuck anyway is killed at its deadline.
        warnings.simplefilter("ignore")
        try:
            pid = os.fork()
        except OSError:
            return None
    if pid == 0:
        _child(plan)  # never returns
    return pid


def _child(plan: _Plan) -> None:
    """The writer: write ``plan``, leave its outcome in the outcome file, exit: 0 once the
    outcome is left (whatever it says), :data:`NO_OUTCOME` where it could not be."""
    code = NO_OUTCOME
    try:
        try:
            gc.disable()  # no finalizer of the user's runs here
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # an interrupt is for the user's cell
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, math.ceil(plan.limit_at - plan.clock() + WRITER_GRACE)))
            devnull = open(os.devnull, "w")  # noqa: SIM115 - the kernel's streams are its threads'
            sys.stdout = sys.stderr = devnull
            outcome = _write(plan)
        except BaseException as e:  # noqa: BLE001 - whatever it is, the server must hear of it
            outcome = _failed(plan, f"the writer failed: {e!r}")
        _leave_outcome(plan.status_path, outcome)
        code = 0
        _drop_superseded(plan)
    finally:
        os._exit(code)


NO_OUTCOME = 71
"""The writer's exit status where it could not leave its outcome (the kernel then does)."""


def _reap(pid: int, plan: _Plan) -> None:
    """Wait for the writer ``pid`` (in the kernel, on a thread of its own); where it left no
    outcome (killed: out of memory, its time bound; or it could not), leave one that says so.
    (A writer that exited 0 left its own, which the server may have read and removed since.)"""
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:  # reaped by someone else (a SIGCHLD handler of the user's)
        how, left = "ended", plan.status_path.exists()
    else:
        left = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        how = (
            f"was killed by signal {os.WTERMSIG(status)}"
            if os.WIFSIGNALED(status)
            else f"exited with {os.WEXITSTATUS(status)}"
        )
    if not left:
        with contextlib.suppress(OSError):
            error = f"the writer process {how} before it finished{plan.kept_words}"
            _leave_outcome(plan.status_path, _failed(plan, error))


def _leave_outcome(path: Path, outcome: KernelStateOutcome) -> None:
    """Leave the outcome for the server, whole (a rename), not synced to the disk: it is a
    message to a reader that waits now, not a record (the manifest is the record)."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(json.dumps(outcome.to_json()).encode())
    os.replace(temp, path)


STALE_AFTER = 24 * 3600.0
"""Seconds after which an outcome file no server read, or a temporary file a killed writer
left, is removed by the next snapshot of the same notebook."""


def _clean_up(folder: Path, key: str) -> None:
    """Remove ``key``'s outcome and temporary files older than :data:`STALE_AFTER`."""
    now = time.time()
    for path in folder.glob(f".{glob.escape(key)}.*"):
        with contextlib.suppress(OSError):
            info = path.lstat()
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_AFTER:
                path.unlink()


@functools.cache
def _package_version() -> str:
    """This package's version (asked once per kernel: a look-up reads the installed packages'
    metadata, 13-20 ms, which a forked writer would otherwise pay at each snapshot)."""
    try:
        return importlib.metadata.version("jupyter-gpuaas")
    except importlib.metadata.PackageNotFoundError:  # a source checkout, never installed
        return "0.0.0"


def _previous(folder: Path, key: str) -> Manifest | None:
    """The snapshot ``key`` has now, read with the checks a restore makes; ``None`` where there
    is none, where it would be refused, and where its manifest names a data file that is not
    one of ``key``'s (which a new snapshot must then never remove)."""
    try:
        manifest = read_manifest(folder / f"{key}.json")
    except (OSError, Refused):
        return None
    return manifest if is_data_of(key, manifest.data_path.name) else None


def _write_atomically(path: Path, content: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    with contextlib.suppress(OSError):  # the rename lasts through a crash where this works
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def snapshot_request(request: str) -> str:
    """The server's call (a silent execute's user expression): ``request`` is JSON with the
    keyword arguments of :func:`snapshot`; the answer is :func:`snapshot_in_background`'s, as
    JSON."""
    from IPython import get_ipython

    arguments = json.loads(request)
    return json.dumps(snapshot_in_background(get_ipython(), **arguments))


def estimate(shell: Any) -> dict[str, Any]:
    """What a snapshot of ``shell`` would write, cheaply (no pickling): ``bytes`` (the
    variables' estimated sizes, :func:`estimated_size`), ``variables`` (how many would be kept)
    and ``not_kept`` (those that never can be, with why)."""
    total, kept, not_kept = 0, 0, []
    for name, value in user_variables(shell).items():
        if isinstance(value, types.ModuleType):
            kept += 1
            continue
        reason = unsaveable(value)
        if reason:
            not_kept.append({"name": name, "reason": reason})
            continue
        total += estimated_size(value)
        kept += 1
    return {"bytes": total, "variables": kept, "not_kept": not_kept}


def estimate_request(request: str = "{}") -> str:
    """The server's call (a silent execute's user expression): :func:`estimate`, as JSON."""
    from IPython import get_ipython

    return json.dumps(estimate(get_ipython()))

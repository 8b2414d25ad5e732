"""Save a kernel's variables (IPython's user namespace) as one notebook's snapshot.

Each variable is saved on its own, so one that cannot be saved is named with the reason and
the rest are kept: modules by name (re-imported on restore), plain numpy arrays as raw bytes,
CuPy and JAX arrays as the raw bytes of their copy in host memory (with their device),
PyTorch tensors and models with ``torch.save`` (a GPU tensor keeps its device kind),
everything else (pandas frames included) with cloudpickle, protocol 5. Small variables go
first, so a size budget that runs out loses the largest. Bounded: a size budget (also the free
space, less a reserve) and a deadline checked between chunks of at most 16 MiB.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shutil
import socket
import sqlite3
import sys
import tempfile
import threading
import time
import types
import uuid
from collections.abc import Callable, Mapping
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
    entries_digest,
    read_manifest,
    state_directory,
)

__all__ = ["snapshot", "snapshot_request", "user_variables"]

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
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
"""The checksum of a module's entry, which has no bytes."""
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


def _save_one(name: str, value: Any, sink: Sink) -> dict[str, Any]:
    """Write one variable to ``sink``; its manifest entry (without place and checksum)."""
    if _is_plain_array(value):
        return _save_array(value, sink)
    on_device = device_array(value)
    if on_device is not None and _is_plain_array(on_device[2]):
        library, device, host = on_device
        return {**_save_array(host, sink), "library": library, "device": device}
    for kind in TORCH_KINDS:
        if _is_torch(value, kind):
            torch = sys.modules["torch"]
            device = str(value.device) if kind == "Tensor" else _module_device(value)
            torch.save(value, sink, pickle_module=cloudpickle)
            return {"kind": "torch", "device": device, "type": f"torch.{kind}"}
    cloudpickle.dump(value, sink, protocol=5)
    return {"kind": "pickle", "type": f"{type(value).__module__}.{type(value).__qualname__}"}


def _module_device(module: Any) -> str:
    for parameter in module.parameters():
        return str(parameter.device)
    return "cpu"


def _words(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


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
    docstring); ``deadline`` is a ``time.time()``, ``clock`` the seconds it counts down in. A
    namespace with no user variables leaves an earlier snapshot as it is (a fresh kernel must
    not wipe the state it has not restored)."""
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
    kept = (
        f"; the previous snapshot ({previous.fields.get('saved_at')}) is kept" if previous else ""
    )
    order = sorted(variables.items(), key=lambda item: estimated_size(item[1]))
    fd, temp_name = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
    temp = Path(temp_name)
    try:
        with os.fdopen(fd, "w+b", buffering=0) as file:  # a buffer would copy every chunk
            sink = Sink(file, limit, limit_at, clock, room=room)
            entries, lost = _write_variables(order, sink)
            file.flush()
            os.fsync(file.fileno())
        saved_at = datetime.now(timezone.utc)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "package_version": _package_version(),
            "python": sys.version.split()[0],
            "owner_uid": os.getuid(),
            "notebook": notebook,
            "kernel_id": kernel_id,
            "saved_at": saved_at.isoformat().replace("+00:00", "Z"),
            "seconds": round(clock() - started, 3),
            "bytes": sink.written,
            "variables": entries,
            "sha256": entries_digest(entries),
            "lost": [v.to_json() for v in lost],
        }
        _commit(folder, key, temp, manifest)
    except OutOfRoom:
        return failed(
            f"not enough free space in {folder} to write it beside the previous one "
            f"({_words(max(room, 0))} free above the {_words(reserve_bytes)} kept free, "
            f"c.GPUaaS.kernel_state_reserve){kept}"
        )
    except OSError as e:
        return failed(f"the snapshot could not be written: {e}{kept}")
    finally:  # written or not (an error, the user's interrupt), no temporary file stays
        with contextlib.suppress(OSError):
            temp.unlink()
    return KernelStateOutcome(
        kernel_id,
        notebook,
        "kept_with_losses" if lost else "kept",
        lost=tuple(lost),
        bytes=sink.written,
        seconds=clock() - started,
        saved_at=saved_at,
    )


def _write_variables(
    order: list[tuple[str, Any]], sink: Sink
) -> tuple[list[dict[str, Any]], list[LostVariable]]:
    """Write each variable of ``order`` to ``sink``: the manifest's entries of those kept, and
    those lost with why. Past the time bound, the rest are lost."""
    entries: list[dict[str, Any]] = []
    lost: list[LostVariable] = []
    for index, (name, value) in enumerate(order):
        if isinstance(value, types.ModuleType):
            module = value.__name__
            place = {"offset": 0, "length": 0, "sha256": _EMPTY_SHA256}
            entries.append({"name": name, "kind": "module", "module": module, **place})
            continue
        reason = unsaveable(value)
        if reason:
            lost.append(LostVariable(name, reason))
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
        offset, length, digest = sink.end()
        entries.append(
            {"name": name, **entry, "offset": offset, "length": length, "sha256": digest}
        )
    return entries, lost


def _commit(folder: Path, key: str, temp: Path, manifest: dict[str, Any]) -> None:
    """Make the written data file ``temp`` the snapshot ``key``: rename it, then write the
    manifest (the step that makes it the one read), then drop the data it replaces."""
    data = folder / f"{key}.{uuid.uuid4().hex[:12]}.data"
    os.replace(temp, data)
    manifest_path = folder / f"{key}.json"
    previous = _previous(folder, key)
    try:
        _write_atomically(manifest_path, json.dumps({**manifest, "data": data.name}).encode())
    except BaseException:
        with contextlib.suppress(OSError):
            data.unlink()
        raise
    if previous is not None and previous.data_path != data:
        with contextlib.suppress(OSError):
            previous.data_path.unlink()


def _package_version() -> str:
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
    keyword arguments of :func:`snapshot`; the answer is the outcome's JSON."""
    from IPython import get_ipython

    arguments = json.loads(request)
    outcome = snapshot(get_ipython(), **arguments)
    return json.dumps(outcome.to_json())

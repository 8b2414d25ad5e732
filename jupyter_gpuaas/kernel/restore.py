"""Load a notebook's snapshot back into a kernel's namespace.

Nothing is loaded until the manifest and every variable's checksum have passed
(:mod:`.store`): a damaged or foreign snapshot is refused whole and the kernel is left as it
was. A name the kernel already has is never overwritten (the user's new work wins) and is
listed as not restored; so is a variable whose loading fails (its class is gone, a module
cannot be imported). A GPU tensor or array (PyTorch, CuPy, JAX) goes back to the same kind of
device, or to the CPU with a note where this kernel has none. Any other object is what its
pickle holds: its data, never the device memory it held; where that is known (a simulated GPU
hold) a note says so.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import sys
import time
from typing import Any

from jupyter_gpuaas.core.kernel_state import DIRECTORY_ENV, quoted, state_key
from jupyter_gpuaas.core.sizing import format_gib
from jupyter_gpuaas.kernel.snapshot import user_variables
from jupyter_gpuaas.kernel.store import (
    Manifest,
    Refused,
    open_own_file,
    read_manifest,
    read_verified,
    state_directory,
)

__all__ = ["restore", "restore_as_opened", "restore_request"]


def _answer(status: str, message: str = "", **fields: Any) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "restored": [],
        "not_restored": [],
        "notes": [],
        "bytes": 0,
        "seconds": 0.0,
        "saved_at": None,
        **fields,
    }


def _load_one(entry: dict[str, Any], parts: list[Any], notes: list[str]) -> Any:
    kind = entry.get("kind")
    buffer = parts[0]
    if kind == "module":
        return importlib.import_module(str(entry["module"]))
    if kind == "ndarray":
        import numpy

        # The array takes the buffer as its memory: no copy.
        array = numpy.frombuffer(buffer, dtype=numpy.dtype(entry["dtype"]))
        shape = tuple(entry["shape"])
        array = array.reshape(shape[::-1]).T if entry.get("fortran") else array.reshape(shape)
        return _to_device(array, entry, notes) if "library" in entry else array
    if kind == "torch":
        return _load_torch(entry, buffer, notes)
    if kind == "polars":
        import polars  # type: ignore[import-not-found, unused-ignore]

        # Its bytes (read as ``bytes``, see store.read_verified_each): parsed where they lie.
        return polars.DataFrame.deserialize(io.BytesIO(buffer))
    if kind == "pickle":
        import pickle

        # The out-of-band buffers become the arrays' memory (a frame's columns): no copy.
        return pickle.loads(buffer, buffers=parts[1:])
    raise ValueError(f"unknown kind {kind!r}")


def _to_device(array: Any, entry: dict[str, Any], notes: list[str]) -> Any:
    """A CuPy or JAX array back on its kind of device; where there is none, on the CPU (a JAX
    array) or as a numpy array, with a note."""
    library, device = str(entry["library"]), str(entry.get("device", "cpu:0"))
    kind, _, number = device.partition(":")
    index = int(number) if number.isdigit() else 0
    name = entry.get("name")
    if library == "cupy":
        try:
            import cupy  # type: ignore[import-not-found, unused-ignore]

            if cupy.cuda.is_available():
                with cupy.cuda.Device(min(index, cupy.cuda.runtime.getDeviceCount() - 1)):
                    return cupy.asarray(array)
        except ImportError:
            pass
        notes.append(
            f"{quoted(str(name))} was a CuPy array on {device}; no GPU here: it is a numpy array"
        )
        return array
    if library == "jax":
        try:
            import jax  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            notes.append(
                f"{quoted(str(name))} was a JAX array; JAX is not installed here: it is a numpy "
                "array"
            )
            return array
        try:
            devices = jax.devices(kind)
        except RuntimeError:  # no such backend here
            notes.append(
                f"{quoted(str(name))} was on {device}; no {kind} device here: it is on the CPU"
            )
            return jax.device_put(array, jax.devices("cpu")[0])
        return jax.device_put(array, devices[min(index, len(devices) - 1)])
    raise ValueError(f"unknown array library {library!r}")


def _load_torch(entry: dict[str, Any], buffer: Any, notes: list[str]) -> Any:
    import torch  # type: ignore[import-not-found, unused-ignore]

    device = str(entry.get("device", "cpu"))
    kind = device.split(":")[0]
    available = kind == "cpu" or (
        hasattr(torch, kind) and getattr(torch, kind).is_available()  # cuda, mps, xpu
    )
    location = None if available else "cpu"
    if not available:
        name = quoted(str(entry["name"]))
        notes.append(f"{name} was on {device}; no {kind} device here: it is on the CPU")
    # The checksum and the owner were checked: this is the user's own object, as saved.
    with io.BufferedReader(_Reader(buffer), buffer_size=1 << 20) as file:
        return torch.load(file, map_location=location, weights_only=False)


class _Reader(io.RawIOBase):
    """A read-only file over bytes in memory, without the copy ``io.BytesIO`` makes of them
    (``torch.load`` reads a file)."""

    def __init__(self, data: Any) -> None:
        self._view = memoryview(data).cast("B")
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        n = min(len(target), len(self._view) - self._at)
        memoryview(target).cast("B")[:n] = self._view[self._at : self._at + n]
        self._at += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = max(0, base + offset)
        return self._at

    def tell(self) -> int:
        return self._at


def _restored_holds() -> list[Any]:
    """The simulated GPU holds loaded from pickles in this kernel so far (none where the
    simulation was never imported)."""
    simulate = sys.modules.get("jupyter_gpuaas.gpu.simulate")
    return list(getattr(simulate, "RESTORED", []))


def _device_memory_note(name: str, holds: list[Any]) -> str:
    """What a variable restored with simulated GPU holds in it cannot hold: the memory."""
    held = sum(int(h.size) for h in holds)
    devices = ", ".join(sorted({str(h.device) for h in holds}))
    what = "a simulated GPU hold" if len(holds) == 1 else f"{len(holds)} simulated GPU holds"
    return (
        f"{quoted(name)} is back as {what} of {format_gib(held)} on GPU {devices}, holding no "
        "GPU memory: a restored object keeps its data, not the device memory it held. Run the "
        "cell that made it to hold the memory again."
    )


def _load_noting(name: str, entry: dict[str, Any], parts: list[Any], notes: list[str]) -> Any:
    """:func:`_load_one`, with a note for the simulated GPU holds the value brought back."""
    before = len(_restored_holds())
    value = _load_one(entry, parts, notes)
    holds = _restored_holds()[before:]
    if holds:
        notes.append(_device_memory_note(name, holds))
    return value


def _read(manifest: Manifest) -> list[list[Any]]:
    """Every variable's bytes, checked (:func:`~.store.read_verified`), from the data file as
    opened (checked again)."""
    fd, _ = open_own_file(manifest.data_path, "data file")
    if hasattr(os, "posix_fadvise"):  # read once, front to back: a larger read-ahead
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
    with os.fdopen(fd, "rb", buffering=0) as data:
        return read_verified(manifest, data)


def restore(shell: Any, *, directory: str, key: str, force: bool = False) -> dict[str, Any]:
    """Restore the snapshot ``key`` of ``directory`` into ``shell``'s namespace.

    The answer's ``status``: ``restored``; ``none`` (no snapshot); ``skipped`` (the kernel has
    run cells and ``force`` is false: restoring is for a new kernel); ``refused`` (``message``
    says why; nothing was loaded)."""
    started = time.monotonic()
    try:
        folder = state_directory(directory)
    except Refused as e:
        return _answer("refused", str(e))
    path = folder / f"{key}.json"
    try:
        manifest = read_manifest(path)
    except FileNotFoundError:
        return _answer("none", "no saved variables for this notebook")
    except Refused as e:
        return _answer("refused", str(e))
    fields = manifest.fields
    saved = {"saved_at": fields.get("saved_at"), "bytes": fields.get("bytes", 0)}
    if not force and (shell.execution_count > 1 or user_variables(shell)):
        return _answer("skipped", "this kernel has already run cells", **saved)
    existing = set(user_variables(shell))
    restored: list[str] = []
    modules: list[str] = []  # named last: the user's own data is what they look for
    not_restored = [dict(v) for v in fields.get("lost", []) if isinstance(v, dict)]
    notes: list[str] = []
    try:
        buffers = _read(manifest)
    except Refused as e:
        return _answer("refused", str(e), **saved)
    except OSError as e:
        return _answer("refused", f"the snapshot could not be read: {e}", **saved)
    # Every checksum matched: only now is anything loaded.
    for index, entry in enumerate(manifest.entries):
        parts, buffers[index] = buffers[index], []  # held by its value only
        name = str(entry.get("name"))
        if name in existing:
            not_restored.append({"name": name, "reason": "already set in this kernel"})
            continue
        try:
            shell.user_ns[name] = _load_noting(name, entry, parts, notes)
        except Exception as e:  # noqa: BLE001 - a class gone, a module not installed: name it
            text = f"{type(e).__name__}: {e}"
            text = text if len(text) <= 120 else text[:117] + "..."
            not_restored.append({"name": name, "reason": f"could not be loaded ({text})"})
            continue
        (modules if entry.get("kind") == "module" else restored).append(name)
    return _answer(
        "restored",
        restored=restored + modules,
        not_restored=not_restored,
        notes=notes,
        seconds=round(time.monotonic() - started, 3),
        **saved,
    )


def restore_request(request: str) -> str:
    """The server's call (a silent execute's user expression): ``request`` is JSON with
    ``directory``, ``key`` and ``force``; the answer is :func:`restore`'s, as JSON."""
    from IPython import get_ipython

    arguments = json.loads(request)
    answer = restore(
        get_ipython(),
        directory=str(arguments["directory"]),
        key=str(arguments["key"]),
        force=bool(arguments.get("force", False)),
    )
    return json.dumps(answer)


class _Answer(dict):  # type: ignore[type-arg]
    """A restore's answer as a user expression's value: JSON (``application/json``) for
    JupyterLab, beside IPython's ``text/plain``."""

    def _repr_json_(self) -> dict[str, Any]:
        return dict(self)


def restore_as_opened(request: str) -> _Answer:
    """JupyterLab's restore as a notebook opens (``request``: JSON with the notebook's ``path``),
    asked as a silent execute on the notebook's own kernel connection: the kernel runs the
    requests of one connection in the order they were sent, so a cell run at once (a first
    Shift+Enter) waits behind the restore instead of running first and leaving the saved
    variables out. The snapshot folder is the server's, from the environment it
    started the kernel with (:data:`~jupyter_gpuaas.core.kernel_state.DIRECTORY_ENV`); without
    it, no snapshot is looked for."""
    from IPython import get_ipython

    path = str(json.loads(request)["path"])
    directory = os.environ.get(DIRECTORY_ENV)
    if not directory:
        return _Answer(_answer("none", "this kernel was not started by a server that keeps state"))
    return _Answer(restore(get_ipython(), directory=directory, key=state_key(path, "")))

"""Simulated GPU work, for CPU-only machines, Binder and the demo.

With ``c.GPUaaS.gpu_source = "simulated"`` the server reads GPUs from a fake NVML library
(:mod:`jupyter_gpuaas.gpu.fake_nvml`). Any process, typically code in a notebook, becomes a GPU
process of that library by calling :func:`hold`::

    from jupyter_gpuaas.gpu import simulate
    h = simulate.hold("2GiB", device=0)   # this process now "uses" 2 GiB on GPU 0
    h.release()                           # or: with simulate.hold("2GiB"): ...

A hold lasts until it is released or its process exits (the library ignores dead PIDs), so it
behaves like a CUDA context rather than a Python object: dropping the handle does not free it.
Nor does a copy hold anything: a hold pickled and loaded again (a kernel's saved variables
restored in a new kernel, docs/kernel-state.md) is a record of what was held, released, as
device memory is never in a pickle; :data:`RESTORED` lists those loaded in this process.

The server and the processes meet in a state directory: ``$JUPYTER_GPUAAS_SIM_DIR``, or else
``gpuaas-sim`` in the Jupyter runtime directory (``jupyter --runtime-dir``, per user). Kernels
inherit the server's environment, so both see the same one. It holds::

    devices.json      the simulated devices, written by the library when it initialises
    driver.json       driver behaviour set by set_driver() (optional)
    holds/*.json      one file per hold: pid, device, bytes, utilisation, container

A node's state: the dev cluster's node agent owns one such directory for its whole node and
writes ``node.json`` there (the node's GPUs, as a spec string). Every pod's server and kernels
get it as ``$JUPYTER_GPUAAS_SIM_DIR``, with the devices of their allocation in
``NVIDIA_VISIBLE_DEVICES`` (and HAMi's ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` for a fraction) and their
container in ``$JUPYTER_GPUAAS_SIM_CONTAINER``. Then each pod's fake NVML shows only its own
devices, holds name their device by UUID (a container's index 0 is not its neighbour's) and
say whose container they are, so a time-shared GPU shows a neighbour's memory as used and, as a
driver does inside a PID namespace, leaves their processes out of the list.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import tempfile
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, get_args

import psutil

from jupyter_gpuaas.gpu.spec import (
    SpecError,
    parse_devices,
    parse_size,
    resolve_ref,
    visible_gpus,
)

ENV_DIR = "JUPYTER_GPUAAS_SIM_DIR"
# The container a process runs in (the node agent sets "<pod uid>/<container name>").
ENV_CONTAINER = "JUPYTER_GPUAAS_SIM_CONTAINER"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NODE_FILE = "node.json"

# How the simulated driver reports processes seen from inside a pod (docs/simulated-gpus.md):
#   "565"      PIDs of this namespace with their memory (drivers 565.57 and later, or hostPID)
#   "535.113"  PIDs of this namespace, memory reported as 0 (drivers 535.113 - 560.x)
#   "535.104"  host PIDs that match nothing here, memory correct (drivers up to 535.104)
#   "no_driver" nvmlInit fails with "Driver Not Loaded"
DriverBehaviour = Literal["565", "535.113", "535.104", "no_driver"]
DRIVER_BEHAVIOURS: tuple[str, ...] = get_args(DriverBehaviour)
ProcessKind = Literal["compute", "graphics", "both"]

# Added to real PIDs to play host PIDs: above any pid_max (at most 2^22), so they match nothing.
HOST_PID_OFFSET = 10_000_000


def state_dir() -> Path:
    """The simulation's state directory (see the module docstring)."""
    env = os.environ.get(ENV_DIR)
    if env:
        return Path(env)
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir()) / "gpuaas-sim"


@dataclass(frozen=True)
class HoldRecord:
    pid: int
    device: str  # as given to hold(): index, "GPU:MIG" or UUID; the library resolves it
    size: int
    utilization: int = 0
    kind: ProcessKind = "compute"
    create_time: float = 0.0
    # The holder's container ($JUPYTER_GPUAAS_SIM_CONTAINER); "" outside a node's pods.
    container: str = ""


@dataclass(frozen=True)
class DriverState:
    behaviour: DriverBehaviour = "565"
    # GPUs (index or UUID) whose calls fail with "GPU is lost"
    lost: frozenset[str] = frozenset()
    # NVML entry point name -> NVML return code it fails with, e.g.
    # {"nvmlDeviceGetComputeRunningProcesses_v3": 4} for "Insufficient Permissions"
    errors: Mapping[str, int] = field(default_factory=dict)


class Hold:
    """A simulated GPU allocation of this process; release it or let the process exit."""

    def __init__(self, path: Path, record: HoldRecord) -> None:
        self.path = path
        self.record = record
        self.released = False
        self.restored = False
        """Loaded from a pickle: a record of another process's hold, holding nothing."""

    @property
    def size(self) -> int:
        return self.record.size

    @property
    def device(self) -> str:
        return self.record.device

    def release(self) -> None:
        if not self.released:
            self.released = True
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            _live_holds.discard(self)

    def __enter__(self) -> Hold:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def __reduce__(self) -> tuple[Any, tuple[HoldRecord]]:
        # Only the record travels: the memory is the holding process's, as a CUDA allocation
        # is its context's, and a copy must never release (unlink) the original's file.
        return _restored_hold, (self.record,)

    def __repr__(self) -> str:
        if self.restored:
            state = "restored from a snapshot: holds no GPU memory; call hold() again"
        else:
            state = "released" if self.released else "held"
        return f"<Hold {self.record.size} bytes on device {self.record.device} ({state})>"


RESTORED: list[HoldRecord] = []
"""The holds loaded from a pickle in this process, in order (a restore names them)."""


def _restored_hold(record: HoldRecord) -> Hold:
    """A pickled :class:`Hold` loaded again: released, holding nothing (see the module's
    docstring)."""
    handle = Hold(Path(os.devnull), record)
    handle.released = True
    handle.restored = True
    RESTORED.append(record)
    return handle


_live_holds: set[Hold] = set()
_counter = itertools.count()
_lock = threading.Lock()


@atexit.register
def _release_all() -> None:
    for h in list(_live_holds):
        h.release()


def _default_device() -> str:
    # As CUDA would: the first device CUDA_VISIBLE_DEVICES names, else device 0.
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return visible or "0"


def hold(
    size: str | int,
    device: int | str | None = None,
    *,
    utilization: int = 0,
    kind: ProcessKind = "compute",
    directory: Path | None = None,
) -> Hold:
    """Make this process hold `size` (bytes, or e.g. "2GiB") of simulated GPU memory.

    `device`: a GPU index (0), a MIG device "GPU:MIG" ("2:3"), or a UUID; by default the first
    device in CUDA_VISIBLE_DEVICES, else 0. `utilization` (percent) is what the GPU reports as
    busy while this is held. `kind` picks NVML's process list: compute, graphics or both.
    """
    nbytes = parse_size(size)
    if not 0 <= utilization <= 100:
        raise SpecError(f"utilization is a percentage (0-100), not {utilization}")
    if kind not in get_args(ProcessKind):
        raise SpecError(f"kind must be one of {get_args(ProcessKind)}, not {kind!r}")
    ref = _default_device() if device is None else str(device)
    directory = directory or state_dir()
    node = read_node(directory)
    if node is not None:
        ref = _node_device(node, ref)
    else:
        _check_device(directory, ref)
    record = HoldRecord(
        pid=os.getpid(),
        device=ref,
        size=nbytes,
        utilization=utilization,
        kind=kind,
        create_time=psutil.Process().create_time(),
        container=os.environ.get(ENV_CONTAINER, ""),
    )
    holds_dir = directory / "holds"
    holds_dir.mkdir(parents=True, exist_ok=True)
    with _lock:
        path = holds_dir / f"{record.pid}-{next(_counter)}.json"
    _write_json(path, record.__dict__)
    handle = Hold(path, record)
    _live_holds.add(handle)
    return handle


def _node_device(node: str, ref: str) -> str:
    """The UUID of `ref` among this container's devices on a node (see the module docstring)."""
    gpus = visible_gpus(parse_devices(node), os.environ.get(VISIBLE_DEVICES))
    uuid = resolve_ref(gpus, ref)
    if uuid is None:
        if not gpus:
            raise SpecError(
                "this pod has no GPU (NVIDIA_VISIBLE_DEVICES names none): request one "
                "(e.g. nvidia.com/gpu: 1) to hold GPU memory"
            )
        raise SpecError(
            f"no GPU {ref!r} in this pod: use an index 0-{len(gpus) - 1}, 'GPU:MIG' such as "
            "'0:0' for a MIG device, or a UUID of NVIDIA_VISIBLE_DEVICES"
        )
    return uuid


def write_node(directory: Path, spec: str) -> None:
    """Make `directory` a node's GPU state: its GPUs, as a spec string (the node agent)."""
    parse_devices(spec)  # refuse a bad spec here, not in every pod
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "holds").mkdir(exist_ok=True)
    _write_json(directory / NODE_FILE, {"gpus": spec})


def read_node(directory: Path) -> str | None:
    """The node's GPUs (a spec string) when `directory` is a node's state, else None."""
    try:
        spec = json.loads((directory / NODE_FILE).read_text())["gpus"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return spec if isinstance(spec, str) else None


def _check_device(directory: Path, ref: str) -> None:
    """Refuse a device the running simulation does not have (when its devices are known)."""
    try:
        gpus = json.loads((directory / "devices.json").read_text())["gpus"]
    except (OSError, ValueError, KeyError):
        return  # no simulation has started yet: the library will ignore unknown devices
    valid = {str(i) for i in range(len(gpus))}
    for i, gpu in enumerate(gpus):
        valid.add(gpu["uuid"])
        valid.update(gpu["mig"])
        valid.update(f"{i}:{j}" for j in range(len(gpu["mig"])))
    if ref not in valid:
        raise SpecError(
            f"no simulated device {ref!r}: use an index 0-{len(gpus) - 1}, 'GPU:MIG' such as "
            "'2:0' for a MIG device, or a UUID"
        )


def set_driver(
    behaviour: DriverBehaviour = "565",
    *,
    lost: Iterable[int | str] = (),
    errors: Mapping[str, int] | None = None,
    directory: Path | None = None,
) -> None:
    """Make the simulated driver behave like `behaviour` (see DriverBehaviour), mark GPUs as
    lost, or make NVML entry points fail with a return code; the server sees it on its next
    sample. reset_driver() goes back to what the server was configured with."""
    if behaviour not in DRIVER_BEHAVIOURS:
        raise SpecError(f"driver behaviour must be one of {DRIVER_BEHAVIOURS}, not {behaviour!r}")
    directory = directory or state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    state = {"behaviour": behaviour, "lost": [str(x) for x in lost], "errors": dict(errors or {})}
    _write_json(directory / "driver.json", state)


def reset_driver(directory: Path | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        ((directory or state_dir()) / "driver.json").unlink()


def read_driver(directory: Path) -> DriverState | None:
    """The behaviour set by set_driver(), or None."""
    try:
        data = json.loads((directory / "driver.json").read_text())
    except (OSError, ValueError):
        return None
    behaviour = data.get("behaviour", "565")
    if behaviour not in DRIVER_BEHAVIOURS:
        return None
    return DriverState(
        behaviour=behaviour,
        lost=frozenset(str(x) for x in data.get("lost", [])),
        errors={str(k): int(v) for k, v in dict(data.get("errors", {})).items()},
    )


def read_holds(directory: Path) -> list[HoldRecord]:
    """The holds of live processes; files of processes that are gone are removed."""
    return HoldReader(directory).read()


class HoldReader:
    """read_holds() for repeated use: each file is parsed once (holds never change, they only
    come and go) and each holder's liveness costs one /proc read."""

    def __init__(self, directory: Path) -> None:
        self.holds_dir = directory / "holds"
        self._records: dict[str, HoldRecord] = {}
        self._procs: dict[str, psutil.Process] = {}

    def read(self) -> list[HoldRecord]:
        try:
            names = {n for n in os.listdir(self.holds_dir) if n.endswith(".json")}
        except OSError:
            names = set()
        for gone in set(self._records) - names:
            del self._records[gone]
            self._procs.pop(gone, None)
        holds = []
        for name in sorted(names):
            record = self._records.get(name) or self._parse(name)
            if record is None:
                continue  # being written or released right now
            if self._alive(name, record):
                holds.append(record)
            else:
                with contextlib.suppress(OSError):
                    (self.holds_dir / name).unlink()
                self._records.pop(name, None)
                self._procs.pop(name, None)
        return holds

    def _parse(self, name: str) -> HoldRecord | None:
        try:
            record = HoldRecord(**json.loads((self.holds_dir / name).read_text()))
        except (OSError, ValueError, TypeError):
            return None
        self._records[name] = record
        return record

    def _alive(self, name: str, record: HoldRecord) -> bool:
        try:
            proc = self._procs.get(name)
            if proc is None:
                proc = psutil.Process(record.pid)
                # A different start time is a new process that reuses the PID. Checked once:
                # a holder seen alive and then gone is dropped on the next read, long before
                # the system hands out its PID again.
                if abs(proc.create_time() - record.create_time) >= 1.0:
                    return False
                self._procs[name] = proc
            # An exited process not yet reaped by its parent holds no GPU memory either.
            return bool(proc.status() != psutil.STATUS_ZOMBIE)
        except psutil.Error:
            return False


def write_devices(directory: Path, gpus: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    _write_json(directory / "devices.json", {"gpus": gpus})


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    # Atomic, so readers never see half a file.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".part")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)

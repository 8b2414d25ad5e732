"""Starting, recognising and stopping the cluster's processes by PID.

A PID alone can be reused after a crash, so each record also keeps the process's start time (field
22 of ``/proc/<pid>/stat``, clock ticks since boot): ``down`` signals a PID only while both match.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Popen objects of the processes this Python process started, so that it can reap them.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ProcRecord:
    name: str
    pid: int
    start_ticks: int
    argv: list[str]
    log: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_ticks=int(data["start_ticks"]),
            argv=[str(a) for a in data.get("argv", [])],
            log=str(data.get("log", "")),
        )


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) is in parentheses and may contain spaces.
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest  # rest[0] is field 3 (state)


def start_ticks(pid: int) -> int | None:
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return int(fields[19])  # field 22


def is_alive(rec: ProcRecord) -> bool:
    """True while the recorded process runs (not a zombie, not a reused PID)."""
    child = _CHILDREN.get(rec.pid)
    if child is not None and child.poll() is not None:
        return False
    fields = _stat_fields(rec.pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return int(fields[19]) == rec.start_ticks


def spawn(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ProcRecord:
    """Start ``argv`` in its own session (so it outlives ``devcluster up``), output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    ticks = start_ticks(proc.pid)
    if ticks is None:  # exited at once; record it anyway so its log is reported
        ticks = -1
    return ProcRecord(name=name, pid=proc.pid, start_ticks=ticks, argv=list(argv), log=str(log))


def exit_code(rec: ProcRecord) -> int | None:
    child = _CHILDREN.get(rec.pid)
    return child.poll() if child is not None else None


def _signal(rec: ProcRecord, sig: int) -> None:
    # Each component leads its own process group (start_new_session): signal the group, so that
    # anything it forked goes too. Fall back to the PID if the group is gone.
    try:
        if os.getpgid(rec.pid) == rec.pid:
            os.killpg(rec.pid, sig)
            return
    except ProcessLookupError:
        return
    except PermissionError:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.kill(rec.pid, sig)


def _reap(rec: ProcRecord) -> None:
    child = _CHILDREN.get(rec.pid)
    if child is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=0.05)
        if child.poll() is not None:
            _CHILDREN.pop(rec.pid, None)


def stop(records: Iterable[ProcRecord], timeout: float = 10.0) -> list[str]:
    """SIGTERM each live record (in the order given), SIGKILL after ``timeout``; return notes."""
    notes: list[str] = []
    for rec in records:
        if not is_alive(rec):
            _reap(rec)
            continue
        _signal(rec, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _reap(rec)
            if not is_alive(rec):
                break
            time.sleep(0.05)
        else:
            notes.append(f"{rec.name} (pid {rec.pid}) ignored SIGTERM for {timeout:.0f}s: killed")
            _signal(rec, signal.SIGKILL)
            for _ in range(100):
                _reap(rec)
                if not is_alive(rec):
                    break
                time.sleep(0.05)
        _reap(rec)
    return notes


def descendants(pid: int) -> list[ProcRecord]:
    """Every live process below ``pid`` (children, their children, ...), found by parent PID.

    A process that starts its children in sessions of their own (JupyterHub its proxy and
    services) leaves them behind when it dies; recorded while it runs, they can still be
    stopped, each by its start time, after it is gone."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is None or fields[0] in ("Z", "X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: list[ProcRecord] = []
    todo = list(children.get(pid, []))
    while todo:
        child = todo.pop()
        todo += children.get(child, [])
        ticks = start_ticks(child)
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if ticks is None:
            continue
        words = [a.decode("utf-8", "replace") for a in argv if a]
        out.append(ProcRecord(Path(words[0]).name if words else "?", child, ticks, words, ""))
    return out


def stop_together(records: Iterable[ProcRecord], timeout: float = 10.0) -> list[str]:
    """SIGTERM every live record at once (its process group when it leads one), SIGKILL what is
    left after ``timeout``; return notes on what had to be killed."""
    live = [r for r in records if is_alive(r)]
    for rec in live:
        _signal(rec, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(is_alive(r) for r in live):
        time.sleep(0.05)
    notes = []
    for rec in live:
        if is_alive(rec):
            notes.append(f"{rec.name} (pid {rec.pid}) ignored SIGTERM for {timeout:.0f}s: killed")
            _signal(rec, signal.SIGKILL)
    return notes


def tail(path: Path | str, lines: int = 40) -> str:
    try:
        with Path(path).open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(data.splitlines()[-lines:])


# --- ports -----------------------------------------------------------------------------------


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            cols = row.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(inode)
    return inodes


def listening_sockets(host_prefix: str | None = None) -> list[tuple[str, int]]:
    """(ip, port) of every IPv4 TCP socket listening on this machine (optionally by IP prefix)."""
    out: list[tuple[str, int]] = []
    try:
        rows = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except FileNotFoundError:
        return out
    for row in rows:
        cols = row.split()
        if cols[3] != "0A":
            continue
        hex_ip, hex_port = cols[1].split(":")
        ip = ".".join(str(b) for b in reversed(bytes.fromhex(hex_ip)))
        if host_prefix is None or ip.startswith(host_prefix):
            out.append((ip, int(hex_port, 16)))
    return out


def port_owner(port: int) -> str | None:
    """'pid N (comm)' of a process listening on ``port``, when /proc lets us see it."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    comm = (proc / "comm").read_text().strip()
                    return f"pid {proc.name} ({comm})"
        except (FileNotFoundError, PermissionError, ProcessLookupError, NotADirectoryError):
            continue
    return None


# --- state file ----------------------------------------------------------------------------


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}

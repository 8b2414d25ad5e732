"""The demo's way down, with real processes: SIGTERM to its process group twice, the second
while it stops (what ``kill`` on ``make demo``'s group does: make relays it once more)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from devcluster.hub import REPO

# The demo's main in miniature: run_until_stopped with a "hub" and a "cluster" that are real
# processes in sessions of their own (as HubProcess and devcluster start them), and a clean-up
# that takes a while (the hub stopping its servers, the cluster going down): here until the test
# lets it go on (a line on its stdin), so that a signal surely lands during it.
CHILD = """
import signal, subprocess, sys
from pathlib import Path
from demo.shutdown import run_until_stopped

out = Path(sys.argv[1])
procs = []

def run():
    for name in ("hub", "cluster"):
        p = subprocess.Popen(["sleep", "300"], start_new_session=True)
        procs.append(p)
        (out / f"{name}.pid").write_text(str(p.pid))
    print("up", flush=True)
    while True:
        signal.pause()  # until the stop signal's KeyboardInterrupt

def cleanup():
    print("stopping", flush=True)
    sys.stdin.readline()  # a clean-up that lasts until the test has sent what it sends meanwhile
    for p in procs:
        p.terminate()
        p.wait()
    (out / "state").mkdir()  # stands for the cluster's state dir, removed last
    (out / "state").rmdir()
    (out / "cleaned").write_text("yes")
    print("stopped", flush=True)

run_until_stopped(run, cleanup)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_unread: dict[int, str] = {}


def _read_until(proc: subprocess.Popen[str], line: str, timeout: float = 30.0) -> None:
    """Read the child's lines until ``line``, failing after ``timeout`` (a plain readline would
    wait for ever: the child's own children hold its stdout open)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = _unread.pop(proc.pid, "")
    deadline = time.monotonic() + timeout
    while True:
        while "\n" in buffer:
            got, buffer = buffer.split("\n", 1)
            if got.strip() == line:
                _unread[proc.pid] = buffer
                return
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        buffer += chunk.decode("utf-8", "replace")
    raise AssertionError(f"no {line!r} from the child within {timeout:.0f}s (exit {proc.poll()})")


def _let_the_cleanup_go_on(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.write("\n")
    proc.stdin.flush()


@contextmanager
def demo_in_miniature(
    tmp_path: Path, inherited_sigint: Callable[[], None] | None = None
) -> Iterator[tuple[subprocess.Popen[str], list[int]]]:
    """The child, in a process group of its own as make demo's, once it is up; its "hub" and
    "cluster" pids. Whatever is left is killed at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=inherited_sigint,
    )
    pids: list[int] = []
    try:
        _read_until(proc, "up")
        pids += [int((tmp_path / f"{n}.pid").read_text()) for n in ("hub", "cluster")]
        yield proc, pids
    finally:
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def test_a_second_sigterm_during_shutdown_does_not_cut_it_short(tmp_path: Path) -> None:
    with demo_in_miniature(tmp_path) as (proc, pids):
        os.killpg(proc.pid, signal.SIGTERM)  # kill -TERM -<pgid>
        _read_until(proc, "stopping")
        os.killpg(proc.pid, signal.SIGTERM)  # make relays it: the second, during the clean-up
        _let_the_cleanup_go_on(proc)  # the signal is pending in the child once killpg returns
        _read_until(proc, "stopped")
        assert proc.wait(30) == 0
        assert proc.stderr is not None
        assert "SIGTERM while stopping: finishing the clean-up first" in proc.stderr.read()
        assert (tmp_path / "cleaned").read_text() == "yes"
        assert not any(_alive(p) for p in pids)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_sigint_stops_it_also_when_inherited_as_ignored(tmp_path: Path) -> None:
    # `make demo &` from a shell without job control (a script, CI, nohup) starts it with SIGINT
    # ignored; Python keeps it ignored unless told otherwise, and Ctrl-C did nothing.
    with demo_in_miniature(tmp_path, inherited_sigint=_ignore_sigint) as (proc, pids):
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the foreground group
        _read_until(proc, "stopping")
        _let_the_cleanup_go_on(proc)
        _read_until(proc, "stopped")
        assert proc.wait(30) == 0
        assert (tmp_path / "cleaned").read_text() == "yes"
        assert not any(_alive(p) for p in pids)

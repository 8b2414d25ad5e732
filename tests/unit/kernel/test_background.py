"""The snapshot written by a forked child (jupyter_gpuaas.kernel.snapshot
``snapshot_in_background``): the kernel goes on as soon as the child holds its view of the
variables; the child writes them as they were at that instant, leaves its outcome for the
server, and a child that dies or hangs is said so."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_gpuaas.kernel import snapshot as snapshot_module
from jupyter_gpuaas.kernel.restore import restore
from jupyter_gpuaas.kernel.snapshot import snapshot_in_background
from tests.support.kernel_shell import Shell, outcome_left, own_home
from tests.support.kernel_shell import save as save_in_process

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system")

DIRECTORY = "~/state"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


def in_background(shell: Shell, **fields: Any) -> dict[str, Any]:
    arguments: dict[str, Any] = {
        "directory": DIRECTORY,
        "key": "nb",
        "notebook": "nb.ipynb",
        "kernel_id": "k1",
        "max_bytes": 1 << 30,
        "reserve_bytes": 0,
        "deadline": time.time() + 60,
        **fields,
    }
    return snapshot_in_background(shell, **arguments)


def left(home: Path, answer: dict[str, Any]) -> Any:
    return outcome_left(home / "state" / answer["writing"])


def load() -> tuple[Shell, dict[str, Any]]:
    shell = Shell()
    return shell, restore(shell, directory=DIRECTORY, key="nb")


class WaitsFor:
    """Pickles only once ``path`` exists (in the writer: the kernel has gone on by then)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        while not self.path.exists():
            time.sleep(0.01)
        return (str, ("released",))


def test_the_kernel_goes_on_while_the_child_writes(home: Path) -> None:
    release = home / "release"
    answer = in_background(Shell(a=np.arange(5), held=WaitsFor(release)))
    # Here the kernel runs its user's next cell; the writer waits on the release meanwhile.
    assert set(answer) == {"writing", "paused_s"}
    assert not (home / "state" / answer["writing"]).exists()
    release.touch()
    outcome = left(home, answer)
    assert outcome.outcome == "kept", outcome
    shell, restored = load()
    assert sorted(restored["restored"]) == ["a", "held"]
    assert shell.user_ns["held"] == "released"


def test_the_child_writes_the_variables_as_they_were_when_the_kernel_went_on(home: Path) -> None:
    release = home / "release"
    array = np.zeros(1 << 16)
    frame = {"rows": [1, 2, 3]}
    shell = Shell(array=array, frame=frame, held=WaitsFor(release))
    answer = in_background(shell)
    array += 1  # the user's next cell changes everything in place...
    frame["rows"].append(4)
    shell.user_ns["array"] = "rebound"
    release.touch()  # ...before the writer gets to it
    assert left(home, answer).outcome == "kept"
    new, _ = load()
    np.testing.assert_array_equal(new.user_ns["array"], np.zeros(1 << 16))
    assert new.user_ns["frame"] == {"rows": [1, 2, 3]}


class KillsItsProcess:
    def __reduce__(self) -> Any:
        os.kill(os.getpid(), signal.SIGKILL)
        return (str, ())


def test_a_writer_that_dies_is_said_so_and_the_previous_snapshot_kept(home: Path) -> None:
    save_in_process(Shell(a=1), directory=DIRECTORY, notebook="nb.ipynb")
    answer = in_background(Shell(a=2, dies=KillsItsProcess()))
    outcome = left(home, answer)
    assert outcome.outcome == "failed"
    assert outcome.error.startswith("the writer process was killed by signal 9 before it finished")
    assert outcome.error.endswith(") is kept")
    shell, restored = load()
    assert restored["restored"] == ["a"]
    assert shell.user_ns["a"] == 1


class Hangs:
    def __reduce__(self) -> Any:
        signal.pause()  # in the writer, until its alarm
        return (str, ())


def test_a_writer_stuck_past_its_deadline_is_killed_and_said_so(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot_module, "WRITER_GRACE", 0.0)
    answer = in_background(Shell(stuck=Hangs()), deadline=time.time() + 0.5)
    outcome = left(home, answer)
    assert outcome.outcome == "failed"
    assert outcome.error == "the writer process was killed by signal 14 before it finished"


PICKLED_IN: list[int] = []


class Records:
    """Notes the process that pickles it."""

    def __reduce__(self) -> Any:
        PICKLED_IN.append(os.getpid())
        return (str, ("recorded",))


def test_in_a_process_with_a_gpu_library_the_kernel_pickles_before_the_fork(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    PICKLED_IN.clear()
    answer = in_background(Shell(r=Records(), a=np.ones(3)))
    assert left(home, answer).outcome == "kept"
    assert PICKLED_IN == []  # the child pickled it: its list is not this one
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    answer = in_background(Shell(r=Records(), a=np.ones(3)))
    assert left(home, answer).outcome == "kept"
    assert [os.getpid()] == PICKLED_IN  # a child of a CUDA process must not touch the GPU
    shell, restored = load()
    assert sorted(restored["restored"]) == ["a", "r"]
    assert shell.user_ns["r"] == "recorded"


def test_nothing_to_save_or_a_failure_before_writing_is_answered_at_once(home: Path) -> None:
    answer = in_background(Shell())
    assert answer["outcome"]["outcome"] == "kept"
    late = in_background(Shell(a=1), deadline=time.time() - 1)
    assert late["outcome"]["outcome"] == "failed"


def test_where_the_fork_fails_the_kernel_writes_it_itself(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused() -> int:
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(os, "fork", refused)
    answer = in_background(Shell(a=[1, 2]))
    assert answer["outcome"]["outcome"] == "kept"
    assert load()[1]["restored"] == ["a"]


def test_an_outcome_the_server_read_and_removed_is_not_written_again(home: Path) -> None:
    answer = in_background(Shell(a=[1]))
    path = home / "state" / answer["writing"]
    assert left(home, answer).outcome == "kept"
    path.unlink()  # as the server does once it has read it
    for reaper in [t for t in threading.enumerate() if t.name == "gpuaas-state-writer"]:
        reaper.join(30)
    assert not path.exists()


def test_the_writer_removes_the_data_it_replaced_after_giving_its_outcome(home: Path) -> None:
    assert left(home, in_background(Shell(a=np.arange(1000)))).outcome == "kept"
    first = {p.name for p in (home / "state").glob("nb.*.data")}
    answer = in_background(Shell(a=np.arange(2000)))
    assert left(home, answer).outcome == "kept"
    for reaper in [t for t in threading.enumerate() if t.name == "gpuaas-state-writer"]:
        reaper.join(30)  # the writer has exited
    second = {p.name for p in (home / "state").glob("nb.*.data")}
    assert len(second) == 1
    assert second.isdisjoint(first)
    shell, answer = load()
    assert answer["status"] == "restored"
    np.testing.assert_array_equal(shell.user_ns["a"], np.arange(2000))


def test_the_package_version_is_looked_up_before_the_fork_once(home: Path) -> None:
    """A writer would otherwise read the installed packages' metadata at each snapshot."""
    snapshot_module._package_version.cache_clear()
    assert left(home, in_background(Shell(a=1))).outcome == "kept"
    assert snapshot_module._package_version.cache_info().currsize == 1  # here, in the kernel

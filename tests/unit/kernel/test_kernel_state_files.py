"""The kernel-side snapshot and restore (jupyter_gpuaas.kernel) on a stand-in shell: what is
saved and how, what is named as lost and why, the bounds, and the refusals before any byte of
a damaged or foreign snapshot is unpickled."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest

from jupyter_gpuaas.kernel import store
from jupyter_gpuaas.kernel.restore import restore
from jupyter_gpuaas.kernel.snapshot import user_variables
from tests.support.clock import FakeClock
from tests.support.kernel_shell import own_home
from tests.support.kernel_shell import save as save_as
from tests.support.snapshot_files import write_snapshot

DIRECTORY = "~/.jupyter-gpuaas/kernel-state"


class Shell:
    """What the kernel code reads of IPython's shell: the namespace, IPython's own names, the
    execution count."""

    def __init__(self, **variables: Any) -> None:
        self.user_ns_hidden: dict[str, Any] = {"In": [], "Out": {}, "exit": object()}
        self.user_ns: dict[str, Any] = {**self.user_ns_hidden, "__name__": "__main__"}
        self.user_ns.update({"_": 1, "_i1": "x = 1", "_3": 3, "_ih": [], "__builtins__": {}})
        self.user_ns.update(variables)
        self.execution_count = 1 if not variables else 5


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


@pytest.fixture
def folder(home: Path) -> Path:
    return home / ".jupyter-gpuaas" / "kernel-state"


def save(shell: Shell, **bounds: Any) -> Any:
    return save_as(shell, **{"directory": DIRECTORY, "notebook": "train.ipynb", **bounds})


def load(shell: Shell | None = None, **options: Any) -> dict[str, Any]:
    return restore(shell or Shell(), **{"directory": DIRECTORY, "key": "train", **options})


def square(x: int) -> int:
    return x * x


class Slow:
    """Takes ``seconds`` of ``clock``'s time to pickle."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        self.clock = clock
        self.seconds = seconds

    def __reduce__(self) -> Any:
        self.clock.advance(self.seconds)
        return (Slow, (self.clock, self.seconds))


@pytest.fixture
def unsaveable(tmp_path: Path) -> Iterator[dict[str, Any]]:
    f = (tmp_path / "log.txt").open("w")
    s = socket.socket()
    db = sqlite3.connect(":memory:")
    yield {
        "batches": (i for i in range(3)),
        "log": f,
        "sock": s,
        "worker": threading.Thread(target=print),
        "db": db,
        "nested": {"inner": (i for i in range(2))},
        "lock": threading.Lock(),
    }
    f.close()
    s.close()
    db.close()


def test_only_the_users_own_names_are_variables() -> None:
    shell = Shell(x=1, _private=2)
    assert user_variables(shell) == {"x": 1, "_private": 2}


def test_each_kind_comes_back_as_it_was(folder: Path) -> None:
    fortran = np.asfortranarray(np.arange(12, dtype="int16").reshape(3, 4))
    shell = Shell(
        np=np,
        path=os.path,
        array=np.arange(6, dtype="float32").reshape(2, 3),
        fortran=fortran,
        strings=np.array(["a", "bc"]),
        objects=np.array([1, "x"], dtype=object),
        frame=pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}),
        fn=lambda x: x + 1,
        square=square,
        numbers=[1, 2.5, {"k": (3,)}],
    )
    outcome = save(shell)
    assert outcome.outcome == "kept", outcome
    assert outcome.lost == ()
    assert outcome.bytes > 0

    new = Shell()
    answer = load(new)
    assert answer["status"] == "restored", answer
    assert sorted(answer["restored"]) == sorted(user_variables(shell))
    assert answer["not_restored"] == []
    ns = new.user_ns
    assert ns["np"] is np
    assert ns["path"] is os.path
    np.testing.assert_array_equal(ns["array"], shell.user_ns["array"])
    assert ns["array"].dtype == np.float32
    np.testing.assert_array_equal(ns["fortran"], fortran)
    assert ns["fortran"].flags.f_contiguous
    np.testing.assert_array_equal(ns["strings"], ["a", "bc"])
    assert list(ns["objects"]) == [1, "x"]
    pd.testing.assert_frame_equal(ns["frame"], shell.user_ns["frame"])
    assert ns["fn"](1) == 2
    assert ns["square"](4) == 16
    assert ns["numbers"] == [1, 2.5, {"k": (3,)}]
    manifest = json.loads((folder / "train.json").read_text())
    kinds = {v["name"]: v["kind"] for v in manifest["variables"]}
    assert kinds["array"] == kinds["fortran"] == kinds["strings"] == "ndarray"
    assert kinds["objects"] == kinds["frame"] == "pickle"
    assert kinds["np"] == "module"


def test_what_cannot_be_saved_is_named_with_the_reason(unsaveable: dict[str, Any]) -> None:
    outcome = save(Shell(kept=1, **unsaveable))
    assert outcome.outcome == "kept_with_losses"
    assert dict((v.name, v.reason) for v in outcome.lost) == {
        "batches": "a generator",
        "log": "an open file",
        "sock": "a socket",
        "worker": "a thread",
        "db": "a database connection",
        "nested": "holds a generator",
        "lock": "holds a lock or a thread",
    }
    answer = load()
    assert answer["restored"] == ["kept"]
    assert {v["name"] for v in answer["not_restored"]} == set(unsaveable)


def test_files_are_the_users_alone_and_written_whole(folder: Path) -> None:
    save(Shell(a=np.zeros(10)))
    first = {p.name for p in folder.iterdir()}
    save(Shell(a=np.ones(10)))
    files = list(folder.iterdir())
    assert {p.stat().st_mode & 0o777 for p in files} == {0o600}
    assert folder.stat().st_mode & 0o777 == 0o700
    names = sorted(p.name for p in files)
    assert len(names) == 2, names  # the manifest and one data file: the old one is gone
    assert "train.json" in names
    assert not any(n.endswith(".tmp") for n in names)
    assert names != sorted(first)
    assert load()["status"] == "restored"


def test_a_fresh_kernel_leaves_an_earlier_snapshot_alone(folder: Path) -> None:
    save(Shell(a=1))
    before = sorted(p.name for p in folder.iterdir())
    outcome = save(Shell())
    assert outcome.outcome == "kept"
    assert outcome.saved_at is None
    assert sorted(p.name for p in folder.iterdir()) == before


def test_the_size_budget_loses_the_largest_first() -> None:
    small, large = np.zeros(50, dtype="uint8"), np.zeros(5000, dtype="uint8")
    outcome = save(Shell(small=small, large=large, n=3), max_bytes=1000)
    assert outcome.outcome == "kept_with_losses"
    [lost] = outcome.lost
    assert lost.name == "large"
    assert lost.reason.startswith("over the size budget (")
    assert outcome.bytes < 1000
    answer = load()
    assert sorted(answer["restored"]) == ["n", "small"]


def test_no_free_space_fails_before_anything_is_written(folder: Path) -> None:
    outcome = save(Shell(a=1), reserve_bytes=1 << 62)
    assert outcome.outcome == "failed"
    assert "not enough free space" in outcome.error
    assert "c.GPUaaS.kernel_state_reserve" in outcome.error
    assert list(folder.iterdir()) == []


def test_the_time_bound_stops_the_snapshot_and_names_what_was_left() -> None:
    clock = FakeClock()
    outcome = save(Shell(a=1, slow=Slow(clock, 60), b=[2]), deadline=time.time() + 30, clock=clock)
    assert outcome.outcome == "kept_with_losses"
    assert ("slow", "the time bound was reached") in [(v.name, v.reason) for v in outcome.lost]
    assert "slow" not in load()["restored"]


def test_a_deadline_already_past_writes_nothing(folder: Path) -> None:
    outcome = save(Shell(a=1), deadline=time.time() - 1)
    assert outcome.outcome == "failed"
    assert outcome.error == "the time bound passed before the kernel was free"
    assert not folder.exists()


def test_a_folder_outside_the_home_is_refused(tmp_path: Path) -> None:
    outcome = save(Shell(a=1), directory="/tmp")
    assert outcome.outcome == "failed"
    assert "outside your home" in outcome.error
    assert load(directory="/etc")["status"] == "refused"


def test_no_snapshot_is_said_so() -> None:
    assert load()["status"] == "none"


def test_a_kernel_that_ran_cells_is_left_alone_unless_asked_and_keeps_its_own_names() -> None:
    save(Shell(a=1, b=2))
    busy = Shell(b="mine")
    assert load(busy)["status"] == "skipped"
    assert busy.user_ns["b"] == "mine"
    answer = load(busy, force=True)
    assert answer["restored"] == ["a"]
    assert answer["not_restored"] == [{"name": "b", "reason": "already set in this kernel"}]
    assert busy.user_ns["b"] == "mine"


def manifest_of(folder: Path) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads((folder / "train.json").read_text())
    return fields


def rewrite(folder: Path, **changes: Any) -> None:
    (folder / "train.json").write_text(json.dumps({**manifest_of(folder), **changes}))


def refused(shell: Shell | None = None) -> str:
    shell = shell or Shell()
    answer = load(shell)
    assert answer["status"] == "refused", answer
    assert user_variables(shell) == {}  # the kernel is left as it was
    return str(answer["message"])


def test_a_snapshot_of_another_user_is_refused(folder: Path) -> None:
    save(Shell(a=1))
    rewrite(folder, owner_uid=os.getuid() + 1)
    assert "written by user id" in refused()
    assert "only your own snapshots are loaded" in refused()


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file away needs root")
def test_a_file_owned_by_someone_else_is_refused(folder: Path) -> None:
    save(Shell(a=1))
    data = folder / manifest_of(folder)["data"]
    os.chown(data, 4242, 4242)
    assert "belongs to user id 4242, not to you" in refused()


def test_a_file_others_can_write_is_refused(folder: Path) -> None:
    save(Shell(a=1))
    (folder / "train.json").chmod(0o666)
    assert "can be written by others" in refused()


def test_damaged_data_is_refused_before_anything_loads(folder: Path) -> None:
    save(Shell(a=np.arange(100), b="text"))
    data = folder / manifest_of(folder)["data"]
    content = bytearray(data.read_bytes())
    content[-1] ^= 0xFF
    data.write_bytes(bytes(content))
    assert "the checksum of `" in refused()


def test_a_damaged_manifest_is_refused(folder: Path) -> None:
    save(Shell(a=1))
    fields = manifest_of(folder)
    fields["variables"][0]["length"] += 1
    rewrite(folder, variables=fields["variables"])
    assert "its checksum does not match" in refused()
    (folder / "train.json").write_text("{not json")
    assert "not JSON" in refused()


def test_an_unknown_format_version_is_refused_naming_the_writer(folder: Path) -> None:
    save(Shell(a=1))
    rewrite(folder, format_version=store.FORMAT_VERSION + 1, package_version="9.9.9")
    message = refused()
    assert f"format version {store.FORMAT_VERSION + 1}" in message
    assert "9.9.9" in message


def test_a_data_file_elsewhere_is_refused(folder: Path) -> None:
    save(Shell(a=1))
    rewrite(folder, data="../../etc/passwd")
    assert "names no data file beside it" in refused()


def test_a_symbolic_link_is_refused(folder: Path, tmp_path: Path) -> None:
    save(Shell(a=1))
    real = tmp_path / "elsewhere.json"
    (folder / "train.json").rename(real)
    (folder / "train.json").symlink_to(real)
    assert "is not a plain file" in refused()


def test_a_variable_that_no_longer_loads_is_named_and_the_rest_come_back(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(Shell(a=1, path=os.path))
    fields = manifest_of(folder)
    for v in fields["variables"]:
        if v["name"] == "path":
            v["module"] = "no_such_module_here"
    rewrite(folder, variables=fields["variables"], sha256=store.entries_digest(fields["variables"]))
    answer = load()
    assert answer["restored"] == ["a"]
    [lost] = answer["not_restored"]
    assert lost["name"] == "path"
    assert lost["reason"].startswith("could not be loaded (ModuleNotFoundError")


def test_the_sink_stops_at_its_budget_and_its_deadline(tmp_path: Path) -> None:
    with (tmp_path / "f").open("w+b") as f:
        sink = store.Sink(f, limit=10, deadline=time.monotonic() + 60)
        sink.begin()
        sink.write(b"12345678")
        with pytest.raises(store.OutOfBudget):
            sink.write(b"abc")
        sink.undo()
        assert (sink.written, f.tell()) == (0, 0)
        late = store.Sink(f, limit=10, deadline=time.monotonic() - 1)
        with pytest.raises(store.OutOfTime):
            late.write(b"x")


def test_a_full_disk_fails_the_snapshot_and_keeps_the_previous_one(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    save(Shell(a=1))
    before = sorted(p.name for p in folder.iterdir())

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", full)
        outcome = save(Shell(a=2, b=np.zeros(100)))

    assert outcome.outcome == "failed"
    assert outcome.error.startswith(
        "the snapshot could not be written: [Errno 28] No space left on device; "
        "the previous snapshot ("
    )
    assert outcome.error.endswith(") is kept")
    assert sorted(p.name for p in folder.iterdir()) == before  # no temporary file left
    new = Shell()
    answer = load(new)
    assert answer["restored"] == ["a"], answer
    assert new.user_ns["a"] == 1


@contextlib.contextmanager
def files_at_most(size: int) -> Iterator[None]:
    """No file of this process grows past ``size`` bytes: a write beyond fails as on a full
    disk (EFBIG; Python ignores the SIGXFSZ that comes with it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_disk_that_fills_mid_write_fails_the_snapshot_and_keeps_the_previous_one(
    folder: Path,
) -> None:
    save(Shell(a=1, b=np.arange(10)))
    before = sorted(p.name for p in folder.iterdir())
    with files_at_most(1 << 20):
        outcome = save(Shell(a=2, b=np.zeros(1 << 19)))  # 4 MiB: the disk fills within b
    assert outcome.outcome == "failed", outcome
    assert outcome.error.startswith("the snapshot could not be written: [Errno 27] File too large")
    assert outcome.error.endswith(") is kept")
    assert outcome.lost == ()
    assert sorted(p.name for p in folder.iterdir()) == before
    new = Shell()
    assert sorted(load(new)["restored"]) == ["a", "b"]
    assert new.user_ns["a"] == 1
    np.testing.assert_array_equal(new.user_ns["b"], np.arange(10))


@pytest.fixture
def volume(home: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Make the home a volume of the given size: its free space is that size less the files
    under it."""

    def sized(size: int) -> None:
        real = shutil.disk_usage

        def usage(path: Any) -> Any:
            used = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
            return real(path)._replace(total=size, used=used, free=max(size - used, 0))

        monkeypatch.setattr(shutil, "disk_usage", usage)

    return sized


def test_a_second_save_in_a_small_home_never_loses_what_the_first_kept(
    volume: Callable[[int], None],
) -> None:
    volume(64 << 10)
    model = np.arange(36 << 10, dtype=np.uint8)  # 36 KiB in a 64 KiB home
    first = save(Shell(model=model, lr=0.1))
    assert first.outcome == "kept", first
    second = save(Shell(model=model, lr=0.2))
    # It does not fit beside the first one: the first stays whole, not a snapshot without model.
    assert second.outcome == "failed", second
    assert "not enough free space" in second.error
    assert "beside the previous one" in second.error
    assert second.error.endswith(") is kept")
    new = Shell()
    answer = load(new)
    assert sorted(answer["restored"]) == ["lr", "model"], answer
    assert new.user_ns["lr"] == 0.1
    np.testing.assert_array_equal(new.user_ns["model"], model)


def test_a_manifest_naming_another_notebooks_data_file_never_gets_it_removed(
    folder: Path,
) -> None:
    save(Shell(a=1), notebook="other.ipynb")
    other_data = folder / manifest_of_key(folder, "other")["data"]
    size = other_data.stat().st_size
    variables = [{"name": "x", "kind": "pickle", "offset": 0, "length": size, "sha256": "0"}]
    write_snapshot(folder, {}, variables=variables, data=other_data.name)  # train.json
    assert save(Shell(a=2)).outcome == "kept"
    assert other_data.exists()
    answer = load(key="other")
    assert answer["restored"] == ["a"], answer


def test_a_fifo_in_place_of_the_manifest_holds_no_snapshot(folder: Path) -> None:
    folder.mkdir(parents=True)
    os.mkfifo(folder / "train.json", 0o600)
    outcome = unblocked(lambda: save(Shell(a=1)), folder / "train.json")
    assert outcome.outcome == "kept", outcome
    assert load()["restored"] == ["a"]


def unblocked(call: Callable[[], Any], fifo: Path) -> Any:
    """``call()``'s value; a failure if it waits on ``fifo`` (a reader that opened it waits for a
    writer forever), after letting it go."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        with contextlib.suppress(OSError), open(fifo, "wb"):
            pass
        worker.join(20)
        pytest.fail(f"{call} waited on the FIFO {fifo.name}")
    return done[0]


def manifest_of_key(folder: Path, key: str) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads((folder / f"{key}.json").read_text())
    return fields

"""The kernel-side restore's own decisions (jupyter_gpuaas.kernel.restore), on hand-written
snapshots: when it restores at all, that the user's names win, how each kind of entry is
loaded, and the words of each answer."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_gpuaas.kernel.restore import restore, restore_request
from tests.support.kernel_shell import Shell, own_home
from tests.support.snapshot_files import write_snapshot

DIRECTORY = "~/state"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


@pytest.fixture
def folder(home: Path) -> Path:
    return home / "state"


def load(shell: Shell, force: bool = False) -> dict[str, Any]:
    return restore(shell, directory=DIRECTORY, key="train", force=force)


def test_no_snapshot_is_said_so_and_nothing_else() -> None:
    answer = load(Shell())
    assert answer == {
        "status": "none",
        "message": "no saved variables for this notebook",
        "restored": [],
        "not_restored": [],
        "notes": [],
        "bytes": 0,
        "seconds": 0.0,
        "saved_at": None,
    }


def test_a_folder_outside_the_home_is_refused(tmp_path: Path) -> None:
    answer = restore(Shell(), directory=str(tmp_path.parent), key="train")
    assert answer["status"] == "refused"
    assert "outside your home" in answer["message"]


def test_a_foreign_manifest_is_refused_and_nothing_loaded(folder: Path) -> None:
    write_snapshot(folder, {"a": pickle.dumps(1)}, format_version=42)
    shell = Shell()
    answer = load(shell)
    assert answer["status"] == "refused"
    assert "format version 42" in answer["message"]
    assert shell.user_ns == {}


@pytest.mark.parametrize(
    "shell", [Shell(execution_count=3), Shell(mine=1)], ids=["ran cells", "has variables"]
)
def test_a_kernel_in_use_is_left_alone_with_what_the_snapshot_holds(
    folder: Path, shell: Shell
) -> None:
    write_snapshot(folder, {"a": pickle.dumps(1)})
    before = dict(shell.user_ns)
    answer = load(shell)
    assert (answer["status"], answer["message"]) == ("skipped", "this kernel has already run cells")
    assert (answer["saved_at"], answer["bytes"]) == ("2026-12-01T12:00:00Z", len(pickle.dumps(1)))
    assert shell.user_ns == before


def test_forced_the_users_own_names_win_and_are_listed(folder: Path) -> None:
    write_snapshot(folder, {"a": pickle.dumps("saved"), "b": pickle.dumps("also")})
    shell = Shell(execution_count=7, a="new work")
    answer = load(shell, force=True)
    assert answer["status"] == "restored"
    assert answer["restored"] == ["b"]
    assert answer["not_restored"] == [{"name": "a", "reason": "already set in this kernel"}]
    assert shell.user_ns == {"a": "new work", "b": "also"}


def test_modules_come_back_by_name_and_are_listed_last(folder: Path) -> None:
    kinds = {"js": {"kind": "module", "module": "json"}}
    write_snapshot(folder, {"js": b"", "x": pickle.dumps([1, 2])}, kinds=kinds)
    shell = Shell()
    answer = load(shell)
    assert answer["restored"] == ["x", "js"]
    assert shell.user_ns["js"] is json
    assert shell.user_ns["x"] == [1, 2]


def test_what_the_snapshot_lost_is_passed_on_and_junk_in_the_list_ignored(folder: Path) -> None:
    lost = [{"name": "gen", "reason": "a generator"}, "junk", 3]
    write_snapshot(folder, {"x": pickle.dumps(1)}, lost=lost)
    answer = load(Shell())
    assert answer["not_restored"] == [{"name": "gen", "reason": "a generator"}]


@pytest.mark.parametrize("fortran", [False, True])
def test_a_raw_array_comes_back_with_its_shape_and_order(folder: Path, fortran: bool) -> None:
    array = np.arange(6, dtype="<i4").reshape(2, 3)
    raw = (array.T if fortran else array).tobytes()
    kinds = {"m": {"kind": "ndarray", "dtype": "<i4", "shape": [2, 3], "fortran": fortran}}
    write_snapshot(folder, {"m": raw}, kinds=kinds)
    shell = Shell()
    load(shell)
    back = shell.user_ns["m"]
    assert back.tolist() == array.tolist()
    assert bool(back.flags.f_contiguous) is fortran


@pytest.mark.parametrize(
    ("library", "note"),
    [
        ("cupy", "“m” was a CuPy array on cuda:1; no GPU here: it is a numpy array"),
        ("jax", "“m” was a JAX array; JAX is not installed here: it is a numpy array"),
    ],
)
def test_a_device_array_without_its_library_comes_back_as_numpy_with_a_note(
    folder: Path, monkeypatch: pytest.MonkeyPatch, library: str, note: str
) -> None:
    monkeypatch.setitem(sys.modules, library, None)  # importing it raises ImportError
    kinds = {
        "m": {
            "kind": "ndarray",
            "dtype": "<f8",
            "shape": [2],
            "library": library,
            "device": "cuda:1",
        }
    }
    write_snapshot(folder, {"m": np.array([1.5, 2.5]).tobytes()}, kinds=kinds)
    shell = Shell()
    answer = load(shell)
    assert answer["notes"] == [note]
    assert answer["restored"] == ["m"]
    assert isinstance(shell.user_ns["m"], np.ndarray)
    assert shell.user_ns["m"].tolist() == [1.5, 2.5]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"kind": "weird"}, "could not be loaded (ValueError: unknown kind 'weird')"),
        (
            {"kind": "ndarray", "dtype": "<f8", "shape": [1], "library": "tinygrad"},
            "could not be loaded (ValueError: unknown array library 'tinygrad')",
        ),
        (
            {"kind": "module", "module": "no_such_module_for_the_test"},
            "could not be loaded (ModuleNotFoundError: No module named"
            " 'no_such_module_for_the_test')",
        ),
    ],
)
def test_an_entry_that_does_not_load_is_named_and_the_rest_come_back(
    folder: Path, fields: dict[str, Any], reason: str
) -> None:
    bad = b"" if fields["kind"] == "module" else np.zeros(1).tobytes()
    write_snapshot(folder, {"bad": bad, "ok": pickle.dumps(2)}, kinds={"bad": fields})
    shell = Shell()
    answer = load(shell)
    assert answer["not_restored"] == [{"name": "bad", "reason": reason}]
    assert answer["restored"] == ["ok"]
    assert "bad" not in shell.user_ns


def test_a_simulated_gpu_hold_is_back_with_a_note_that_it_holds_no_gpu_memory(
    folder: Path, sim_dir: Path
) -> None:
    """Pickling keeps an object's data, not the device memory it held: a
    restored simulated hold is listed as back, and a note says what it cannot hold."""
    from jupyter_gpuaas.gpu import simulate

    one, two = simulate.hold("2GiB", device=0), simulate.hold("1GiB", device=0)
    try:
        values = {"h": pickle.dumps(one), "pair": pickle.dumps([one, two]), "n": pickle.dumps(1)}
        write_snapshot(folder, values)
    finally:
        one.release()
        two.release()
    shell = Shell()
    answer = load(shell)
    assert sorted(answer["restored"]) == ["h", "n", "pair"]
    assert shell.user_ns["h"].restored
    assert answer["notes"] == [
        "“h” is back as a simulated GPU hold of 2 GiB on GPU 0, holding no GPU memory: a "
        "restored object keeps its data, not the device memory it held. Run the cell that "
        "made it to hold the memory again.",
        "“pair” is back as 2 simulated GPU holds of 3 GiB on GPU 0, holding no GPU memory: a "
        "restored object keeps its data, not the device memory it held. Run the cell that "
        "made it to hold the memory again.",
    ]


def test_a_long_loading_error_is_cut_to_120_characters(folder: Path) -> None:
    kinds = {"bad": {"kind": "x" * 200}}
    write_snapshot(folder, {"bad": b"1"}, kinds=kinds)
    reason = load(Shell())["not_restored"][0]["reason"]
    text = reason.removeprefix("could not be loaded (").removesuffix(")")
    assert len(text) == 120
    assert text.endswith("...")


def test_a_damaged_variable_refuses_the_whole_snapshot(folder: Path) -> None:
    _, data = write_snapshot(folder, {"a": pickle.dumps(1), "b": pickle.dumps(2)})
    raw = bytearray(data.read_bytes())
    raw[-2] ^= 0xFF
    data.write_bytes(bytes(raw))
    shell = Shell()
    answer = load(shell)
    assert answer["status"] == "refused"
    assert "the checksum of `b` does not match" in answer["message"]
    assert answer["saved_at"] == "2026-12-01T12:00:00Z"
    assert shell.user_ns == {}


def test_the_servers_request_is_json_in_and_the_answer_json_out(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython

    write_snapshot(folder, {"a": pickle.dumps({"k": 1})})
    shell = Shell(execution_count=4)
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    request = {"directory": DIRECTORY, "key": "train"}
    assert json.loads(restore_request(json.dumps(request)))["status"] == "skipped"
    answer = json.loads(restore_request(json.dumps({**request, "force": True})))
    assert (answer["status"], answer["restored"]) == ("restored", ["a"])
    assert shell.user_ns["a"] == {"k": 1}


def test_as_a_notebook_opens_the_kernel_finds_its_snapshot_by_the_path(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JupyterLab's restore as a notebook opens runs in its kernel: the snapshot
    folder from the environment the server started it with, the key from the notebook's path,
    and the answer as JSON for the front end."""
    import IPython

    from jupyter_gpuaas.core.kernel_state import DIRECTORY_ENV, state_key
    from jupyter_gpuaas.kernel.restore import restore_as_opened

    write_snapshot(folder, {"a": pickle.dumps({"k": 1})}, key=state_key("work/it's.ipynb", ""))
    shell = Shell()
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    request = json.dumps({"path": "work/it's.ipynb"})
    monkeypatch.delenv(DIRECTORY_ENV, raising=False)
    assert (
        restore_as_opened(request)["status"] == "none"
    )  # not a kernel of a server that keeps state
    monkeypatch.setenv(DIRECTORY_ENV, DIRECTORY)
    answer = restore_as_opened(request)
    assert answer._repr_json_()["restored"] == ["a"]
    assert shell.user_ns["a"] == {"k": 1}

"""The kernel-side snapshot's own decisions (jupyter_gpuaas.kernel.snapshot): which names are the
user's variables, what can never be saved and the words for why, the size guess that orders
them, the device arrays it recognises, and the manifest it writes."""

from __future__ import annotations

import json
import socket
import sqlite3
import sys
import threading
import time
import types
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest

from jupyter_gpuaas.kernel import snapshot as snapshot_module
from jupyter_gpuaas.kernel.snapshot import (
    device_array,
    estimated_size,
    snapshot_request,
    unsaveable,
    user_variables,
)
from tests.support.kernel_shell import Shell, outcome_left, own_home
from tests.support.kernel_shell import save as save_as

DIRECTORY = "~/state"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


def save(shell: Shell, **bounds: Any) -> Any:
    return save_as(shell, **{"directory": DIRECTORY, "notebook": "nb.ipynb", **bounds})


def manifest(home: Path) -> dict[str, Any]:
    fields: dict[str, Any] = json.loads((home / "state" / "nb.json").read_text())
    return fields


# --------------------------------------------------------------------------- user_variables


@pytest.mark.parametrize(
    "name", ["_", "__", "___", "_i", "_ii", "_iii", "_i7", "_7", "_dh", "_ih", "_oh", "__doc__"]
)
def test_ipythons_history_and_dunder_names_are_not_the_users(name: str) -> None:
    assert user_variables(Shell(**{name: 1})) == {}


@pytest.mark.parametrize("name", ["x", "_x", "_i7a", "_iv", "i", "_ooh", "data_"])
def test_other_names_are_the_users(name: str) -> None:
    assert user_variables(Shell(**{name: 1})) == {name: 1}


def test_a_hidden_name_the_user_rebound_is_the_users() -> None:
    original, mine = object(), object()
    shell = Shell({"exit": original, "In": []})
    assert user_variables(shell) == {}
    shell.user_ns["exit"] = mine
    assert user_variables(shell) == {"exit": mine}


# --------------------------------------------------------------------------- unsaveable


def numbers() -> Iterator[int]:
    yield 1


async def numbers_later() -> AsyncIterator[int]:
    yield 1


def test_what_lives_outside_the_process_or_in_a_frame_is_never_saved(tmp_path: Path) -> None:
    async def later() -> None:
        return None

    coroutine = later()
    closed = (tmp_path / "closed").open("w")
    closed.close()
    db = sqlite3.connect(":memory:")
    sock = socket.socket()
    try:
        with (tmp_path / "open").open("w") as f:
            found = {
                "generator": unsaveable(numbers()),
                "async": unsaveable(numbers_later()),
                "coroutine": unsaveable(coroutine),
                "open": unsaveable(f),
                "closed": unsaveable(closed),
                "socket": unsaveable(sock),
                "thread": unsaveable(threading.Thread(target=print)),
                "connection": unsaveable(db),
                "cursor": unsaveable(db.cursor()),
            }
    finally:
        coroutine.close()
        sock.close()
        db.close()
    assert found == {
        "generator": "a generator",
        "async": "an async generator",
        "coroutine": "a coroutine",
        "open": "an open file",
        "closed": "a closed file",
        "socket": "a socket",
        "thread": "a thread",
        "connection": "a database connection",
        "cursor": "a database connection",
    }


@pytest.mark.parametrize(
    ("module", "reason"),
    [
        ("psycopg2.extensions", "a database connection"),
        ("redis", "a database connection"),
        ("sqlalchemy.engine.base", "a database connection"),
        ("redisearch", None),  # a module whose name only begins like one
        ("sqlalchemy.sql", None),
    ],
)
def test_database_clients_are_known_by_their_module(module: str, reason: str | None) -> None:
    client = type("Client", (), {"__module__": module})()
    assert unsaveable(client) == reason


@pytest.mark.parametrize("value", [1, "text", [1, 2], {"a": 1}, np.zeros(2), numbers])
def test_plain_values_can_be_saved(value: object) -> None:
    assert unsaveable(value) is None


# --------------------------------------------------------------------------- estimated_size


class Sized:
    def __init__(self, nbytes: object) -> None:
        self.nbytes = nbytes


class BadSize:
    def __sizeof__(self) -> int:
        raise RuntimeError("no size")


def test_arrays_frames_and_others_have_their_size_guessed() -> None:
    assert estimated_size(np.zeros(100, dtype=np.float64)) == 800
    assert estimated_size(Sized(12345)) == 12345
    frame = pd.DataFrame({"a": np.zeros(1000, dtype=np.int64)})
    assert estimated_size(frame) >= 8000
    assert estimated_size(Sized("big")) == sys.getsizeof(Sized("big"))  # not an int: guessed
    assert estimated_size(b"x" * 1000) == sys.getsizeof(b"x" * 1000)
    assert estimated_size(BadSize()) == 64


# --------------------------------------------------------------------------- device arrays


class Device:
    def __init__(self, platform: str, id: int) -> None:
        self.platform = platform
        self.id = id


def test_a_cupy_array_is_its_host_copy_on_its_card() -> None:
    host = np.arange(3)
    cupy_array = type(
        "ndarray",
        (),
        {"__module__": "cupy._core.core", "device": Device("cuda", 2), "get": lambda self: host},
    )()
    found = device_array(cupy_array)
    assert found is not None
    library, device, copy = found
    assert (library, device) == ("cupy", "cuda:2")
    assert copy is host


def test_a_jax_array_on_one_device_is_its_host_copy_and_on_several_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Array:
        def __init__(self, *devices: Device) -> None:
            self._devices = devices

        def devices(self) -> set[Device]:
            return set(self._devices)

        def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray[Any, Any]:
            return np.ones(2)

    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(Array=Array))
    found = device_array(Array(Device("gpu", 1)))
    assert found is not None
    library, device, copy = found
    assert (library, device) == ("jax", "gpu:1")
    assert copy.tolist() == [1.0, 1.0]
    assert device_array(Array(Device("gpu", 0), Device("gpu", 1))) is None


def test_anything_else_is_no_device_array() -> None:
    assert device_array(np.zeros(2)) is None
    assert device_array([1]) is None


# --------------------------------------------------------------------------- the manifest


def test_the_manifest_says_how_each_variable_was_kept_smallest_first(home: Path) -> None:
    big = np.asfortranarray(np.arange(600, dtype=np.int32).reshape(20, 30))
    outcome = save(Shell(big=big, small=1, np_module=np, words="x" * 100))
    assert outcome.outcome == "kept"
    fields = manifest(home)
    entries = {e["name"]: e for e in fields["variables"]}
    assert entries["np_module"]["kind"] == "module"
    assert entries["np_module"]["module"] == "numpy"
    assert entries["np_module"]["length"] == 0
    assert entries["big"]["kind"] == "ndarray"
    assert entries["big"]["fortran"] is True
    assert entries["big"]["shape"] == [20, 30]
    assert entries["big"]["length"] == 2400
    assert entries["small"] == {**entries["small"], "kind": "pickle", "type": "builtins.int"}
    saved = [e["name"] for e in fields["variables"] if e["kind"] != "module"]
    assert saved == ["small", "words", "big"]
    assert fields["bytes"] == outcome.bytes == sum(e["length"] for e in fields["variables"])
    assert (fields["notebook"], fields["kernel_id"], fields["lost"]) == ("nb.ipynb", "k1", [])


class Refuses:
    def __init__(self, error: Exception) -> None:
        self.error = error

    def __reduce__(self) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (TypeError("cannot pickle 'generator' object"), "holds a generator"),
        (TypeError("cannot pickle '_io.TextIOWrapper' object"), "holds an open file"),
        (TypeError("cannot pickle '_thread.RLock' object"), "holds a lock or a thread"),
        (
            TypeError("cannot pickle 'Widget' object"),
            "holds a Widget object, which cannot be saved",
        ),
        (ValueError("no"), "cannot be saved (ValueError: no)"),
        (RuntimeError("x" * 200), f"cannot be saved (RuntimeError: {'x' * 117}...)"),
    ],
)
def test_a_variable_whose_pickling_fails_is_named_with_why_and_the_rest_kept(
    home: Path, error: Exception, reason: str
) -> None:
    outcome = save(Shell(bad=Refuses(error), good=[1, 2]))
    assert outcome.outcome == "kept_with_losses"
    assert [(v.name, v.reason) for v in outcome.lost] == [("bad", reason)]
    fields = manifest(home)
    assert [e["name"] for e in fields["variables"]] == ["good"]
    assert fields["lost"] == [{"name": "bad", "reason": reason}]


def test_over_the_budget_says_what_was_left(home: Path) -> None:
    outcome = save(Shell(small=1, big=np.zeros(4096)), max_bytes=1000)
    assert [v.name for v in outcome.lost] == ["big"]
    left = 1000 - outcome.bytes
    assert outcome.lost[0].reason == f"over the size budget ({left} bytes was left)"


def test_a_reserve_larger_than_the_free_space_fails_naming_the_option() -> None:
    outcome = save(Shell(a=1), reserve_bytes=1 << 62)
    assert outcome.outcome == "failed"
    assert outcome.error.startswith("not enough free space in ")
    assert outcome.error.endswith("kept free (c.GPUaaS.kernel_state_reserve)")


def test_a_deadline_already_past_fails_before_anything(home: Path) -> None:
    outcome = save(Shell(a=1), deadline=time.time() - 1)
    assert (outcome.outcome, outcome.error) == (
        "failed",
        "the time bound passed before the kernel was free",
    )
    assert not (home / "state").exists()


def test_a_folder_outside_the_home_fails_with_the_reason(tmp_path: Path) -> None:
    outcome = save(Shell(a=1), directory=str(tmp_path.parent / "elsewhere"))
    assert outcome.outcome == "failed"
    assert "outside your home" in outcome.error


def test_a_new_snapshot_replaces_the_old_data_file(home: Path) -> None:
    save(Shell(a=1))
    first = manifest(home)["data"]
    save(Shell(a=2))
    second = manifest(home)["data"]
    assert first != second
    assert sorted(p.name for p in (home / "state").iterdir()) == sorted(["nb.json", second])


def test_a_manifest_naming_a_path_never_makes_the_snapshot_remove_it(home: Path) -> None:
    outside = home / "precious.data"
    outside.write_text("mine")
    (home / "state").mkdir()
    (home / "state" / "nb.json").write_text(json.dumps({"data": "../precious.data"}))
    assert save(Shell(a=1)).outcome == "kept"
    assert outside.read_text() == "mine"


def test_the_servers_request_is_json_in_and_the_outcome_json_out(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: Shell(a=[1, 2, 3]))
    request = {
        "directory": DIRECTORY,
        "key": "nb",
        "notebook": "nb.ipynb",
        "kernel_id": "k9",
        "max_bytes": 1 << 20,
        "reserve_bytes": 0,
        "deadline": time.time() + 30,
    }
    answer = json.loads(snapshot_request(json.dumps(request)))
    assert set(answer) == {"writing", "paused_s"}
    assert answer["paused_s"] >= 0
    outcome = outcome_left(home / "state" / answer["writing"])
    assert outcome.outcome == "kept"
    assert outcome.kernel_id == "k9"
    assert [e["name"] for e in manifest(home)["variables"]] == ["a"]


def test_the_size_words_pick_the_largest_unit() -> None:
    words = snapshot_module._words
    assert [words(n) for n in (10, 2048, 3 << 20, 5 << 30)] == [
        "10 bytes",
        "2.0 KiB",
        "3.0 MiB",
        "5.0 GiB",
    ]

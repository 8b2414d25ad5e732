"""What the server says of a notebook's snapshot from its manifest alone (nothing loaded), read
with the checks a restore makes: what a restore would refuse is a problem, never listed."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.core.kernel_state import state_key
from jupyter_gpuaas.server.kernel_requests import KernelStateSettings, restore_answer, snapshot_info
from tests.support.api_schema import schema_errors
from tests.support.snapshot_files import write_snapshot

SETTINGS = KernelStateSettings(directory="~/state")


def folder(home: Path) -> Path:
    return home / "state"


def key(notebook: str) -> str:
    return state_key(notebook, "")


def test_no_snapshot_is_said_so(tmp_path: Path) -> None:
    info = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert info["exists"] is False
    assert schema_errors("kernel_state_info", info) == []


def test_the_manifest_names_the_variables_and_what_was_lost(tmp_path: Path) -> None:
    write_snapshot(
        folder(tmp_path),
        {"frame": b"0123456789", "np": b""},
        key=key("w/a.ipynb"),
        kinds={"np": {"kind": "module", "module": "numpy"}},
        saved_at="2026-12-06T14:02:00.000Z",
        bytes=10,
        lost=[{"name": "batches", "reason": "a generator"}],
    )
    info = snapshot_info("w/a.ipynb", SETTINGS, tmp_path)
    assert info == {
        "path": "w/a.ipynb",
        "exists": True,
        "saved_at": "2026-12-06T14:02:00.000Z",
        "bytes": 10,
        "variables": ["frame", "np"],
        "lost": [{"name": "batches", "reason": "a generator"}],
        "problem": None,
    }
    assert schema_errors("kernel_state_info", info) == []


def test_a_damaged_manifest_is_a_problem_not_an_error(tmp_path: Path) -> None:
    manifest, _ = write_snapshot(folder(tmp_path), {"a": b"1"}, key=key("a.ipynb"))
    manifest.write_text("{not json")
    info = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert info["exists"] is True
    assert (info["problem"] or "").startswith("the snapshot's manifest is damaged (not JSON")
    assert info["variables"] == []
    write_snapshot(folder(tmp_path), {"a": b"1"}, key=key("a.ipynb"), saved_at=5, lost="x")
    odd = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert (odd["saved_at"], odd["variables"], odd["lost"]) == (None, ["a"], [])
    assert schema_errors("kernel_state_info", odd) == []


def problem(home: Path, notebook: str = "a.ipynb") -> str:
    info = snapshot_info(notebook, SETTINGS, home)
    assert info["exists"] is True
    assert (info["variables"], info["lost"], info["bytes"]) == ([], [], 0)
    assert schema_errors("kernel_state_info", info) == []
    return str(info["problem"])


def test_a_linked_manifest_is_not_listed_as_the_notebooks(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    manifest, _ = write_snapshot(elsewhere, {"secret": b"1"}, key=key("a.ipynb"))
    folder(tmp_path).mkdir()
    (folder(tmp_path) / manifest.name).symlink_to(manifest)
    assert problem(tmp_path) == f"the snapshot's manifest {manifest.name} is not a plain file"


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file away needs root")
def test_another_users_manifest_is_not_listed(tmp_path: Path) -> None:
    manifest, _ = write_snapshot(folder(tmp_path), {"a": b"1"}, key=key("a.ipynb"))
    os.chown(manifest, 4242, 4242)
    assert "belongs to user id 4242, not to you" in problem(tmp_path)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"owner_uid": os.getuid() + 1}, "written by user id"),
        ({"format_version": 99}, "format version 99"),
        ({"sha256": "0" * 64}, "its checksum does not match"),
    ],
)
def test_a_manifest_a_restore_would_refuse_is_a_problem(
    tmp_path: Path, fields: dict[str, Any], said: str
) -> None:
    write_snapshot(folder(tmp_path), {"a": b"1"}, key=key("a.ipynb"), **fields)
    assert said in problem(tmp_path)


def test_a_fifo_in_place_of_the_manifest_is_a_problem_not_a_wait(tmp_path: Path) -> None:
    folder(tmp_path).mkdir()
    fifo = folder(tmp_path) / f"{key('a.ipynb')}.json"
    os.mkfifo(fifo, 0o600)
    said = unblocked(lambda: problem(tmp_path), fifo)
    assert said == f"the snapshot's manifest {fifo.name} is not a plain file"


def unblocked(call: Callable[[], Any], fifo: Path) -> Any:
    """``call()``'s value; a failure if it waits on ``fifo`` (a reader that opened it waits for a
    writer forever: the server's event loop would), after letting it go."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(20)
    if worker.is_alive():
        with contextlib.suppress(OSError), open(fifo, "wb"):
            pass
        worker.join(20)
        pytest.fail(f"reading the snapshot waited on the FIFO {fifo.name}")
    return done[0]


def test_a_kernels_restore_answer_is_passed_on_with_the_documents_fields_only() -> None:
    """The kernel's JSON (jupyter_gpuaas.kernel.restore) with the notebook and kernel it was
    for; a key the document does not name (the kernel is the user's) is not passed on."""
    kernel = {
        "status": "restored",
        "message": "",
        "restored": ["x"],
        "not_restored": [{"name": "gen", "reason": "a generator"}],
        "notes": [],
        "bytes": 8,
        "seconds": 0.25,
        "saved_at": "2026-11-30T12:00:00Z",
    }
    answer = restore_answer("a.ipynb", "k1", {**kernel, "extra": "not documented"})
    assert answer == {"path": "a.ipynb", "kernel_id": "k1", **kernel}
    assert schema_errors("kernel_state_restore", answer) == []
    bare = restore_answer("a.ipynb", "k1", {"status": "none", "message": "nothing saved"})
    assert schema_errors("kernel_state_restore", bare) == []

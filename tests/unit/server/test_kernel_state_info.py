"""What the server says of a notebook's snapshot from its manifest alone (nothing loaded)."""

from __future__ import annotations

import json
from pathlib import Path

from jupyter_gpuaas.core.kernel_state import state_key
from jupyter_gpuaas.server.kernel_state import KernelStateSettings, snapshot_info
from tests.support.api_schema import schema_errors

SETTINGS = KernelStateSettings(directory="~/state")


def manifest(home: Path, notebook: str) -> Path:
    folder = home / "state"
    folder.mkdir(exist_ok=True)
    return folder / f"{state_key(notebook, '')}.json"


def test_no_snapshot_is_said_so(tmp_path: Path) -> None:
    info = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert info["exists"] is False
    assert schema_errors("kernel_state_info", info) == []


def test_the_manifest_names_the_variables_and_what_was_lost(tmp_path: Path) -> None:
    manifest(tmp_path, "w/a.ipynb").write_text(
        json.dumps(
            {
                "saved_at": "2026-12-06T14:02:00.000Z",
                "bytes": 12,
                "variables": [{"name": "frame"}, {"name": "np"}],
                "lost": [{"name": "batches", "reason": "a generator"}],
            }
        )
    )
    info = snapshot_info("w/a.ipynb", SETTINGS, tmp_path)
    assert info == {
        "path": "w/a.ipynb",
        "exists": True,
        "saved_at": "2026-12-06T14:02:00.000Z",
        "bytes": 12,
        "variables": ["frame", "np"],
        "lost": [{"name": "batches", "reason": "a generator"}],
        "problem": None,
    }
    assert schema_errors("kernel_state_info", info) == []


def test_a_damaged_manifest_is_a_problem_not_an_error(tmp_path: Path) -> None:
    manifest(tmp_path, "a.ipynb").write_text("{not json")
    info = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert info["exists"] is True
    assert info["problem"].startswith("the snapshot cannot be read")
    manifest(tmp_path, "a.ipynb").write_text(json.dumps({"saved_at": 5, "variables": "x"}))
    odd = snapshot_info("a.ipynb", SETTINGS, tmp_path)
    assert (odd["saved_at"], odd["variables"], odd["bytes"]) == (None, [], 0)
    assert schema_errors("kernel_state_info", odd) == []

"""A stand-in for IPython's shell as the kernel-side state code reads it (its namespace, IPython's
own names, the execution count), and a home of the test's own for the snapshots."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.core.kernel_state import KernelStateOutcome
from jupyter_gpuaas.kernel.snapshot import snapshot
from jupyter_gpuaas.statefiles import read_outcome_file

__all__ = ["Shell", "outcome_left", "own_home", "save"]


class Shell:
    """``hidden``: IPython's own names (also in the namespace, as IPython keeps them);
    ``variables``: the user's."""

    def __init__(
        self, hidden: dict[str, Any] | None = None, /, execution_count: int = 1, **variables: Any
    ) -> None:
        self.user_ns_hidden: dict[str, Any] = dict(hidden or {})
        self.user_ns: dict[str, Any] = {**self.user_ns_hidden, **variables}
        self.execution_count = execution_count


def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Make ``tmp_path`` the home (snapshots live under ``~``); use as a fixture's body."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def save(shell: Any, **fields: Any) -> Any:
    """Snapshot ``shell``: ``fields`` name at least ``directory`` and ``notebook`` (the key is
    the notebook's name without ``.ipynb``, the kernel ``k1``, the budget 1 GiB, no reserve,
    30 s) and may override any of the request's fields."""
    notebook = str(fields["notebook"])
    arguments: dict[str, Any] = {
        "key": notebook.removesuffix(".ipynb"),
        "kernel_id": "k1",
        "max_bytes": 1 << 30,
        "reserve_bytes": 0,
        "deadline": time.time() + 30,
    }
    return snapshot(shell, **{**arguments, **fields})


def outcome_left(path: Path, within: float = 60.0) -> KernelStateOutcome:
    """The outcome a background writer leaves at ``path``, once it is there (polled every
    10 ms, as the server polls it; a failure after ``within`` seconds)."""
    until = time.monotonic() + within
    while True:
        try:
            return read_outcome_file(path)
        except FileNotFoundError:
            if time.monotonic() > until:
                raise AssertionError(f"no outcome at {path} within {within} s") from None
            time.sleep(0.01)

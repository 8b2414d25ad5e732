"""A stand-in for IPython's shell as the kernel-side state code reads it (its namespace, IPython's
own names, the execution count), and a home of the test's own for the snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["Shell", "own_home"]


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

"""The reader of the user's own kernel-state files, where it meets the file system: the folder
resolved into the home, a file checked as opened. Each refusal of a planted snapshot is
tests/unit/kernel/test_store.py's and test_restore.py's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_gpuaas.core.kernel_state import Refused
from jupyter_gpuaas.statefiles import open_own_file, read_outcome_file, state_directory


def test_the_state_folder_must_lie_in_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    assert state_directory("~/.jupyter-gpuaas/s", home) == home / ".jupyter-gpuaas" / "s"
    assert state_directory("rel/s", home) == home / "rel" / "s"
    with pytest.raises(ValueError, match="outside your home"):
        state_directory("/tmp/elsewhere", home)
    with pytest.raises(ValueError, match="outside your home"):
        state_directory("~/../escape", home)
    (home / "link").symlink_to(tmp_path)
    with pytest.raises(ValueError, match="outside your home"):
        state_directory("~/link/s", home)


def test_a_file_is_checked_as_opened(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.write_bytes(b"{}")
    own.chmod(0o600)
    fd, info = open_own_file(own, "manifest")
    os.close(fd)
    assert info.st_size == 2
    own.chmod(0o620)
    with pytest.raises(Refused, match="can be written by others"):
        open_own_file(own, "manifest")
    (tmp_path / "link").symlink_to(own)
    with pytest.raises(Refused, match="is not a plain file"):
        open_own_file(tmp_path / "link", "manifest")
    with pytest.raises(FileNotFoundError):
        open_own_file(tmp_path / "none", "manifest")


def test_an_outcome_file_too_large_to_be_one_is_refused(tmp_path: Path) -> None:
    outcome = tmp_path / ".k.abc.outcome"
    outcome.write_bytes(b" " * (4 * 1024 * 1024 + 1))
    outcome.chmod(0o600)
    with pytest.raises(Refused, match="too large to be one"):
        read_outcome_file(outcome)

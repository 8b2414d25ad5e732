"""Kernels' process trees."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from jupyter_gpuaas.gpu import processes

PARENTS = {1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 20: 1, 30: 30}


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        (10, {10, 11, 12, 13}),
        (12, {12, 13}),
        (20, {20}),
        (30, {30}),  # a process that is its own parent must not loop
        (99, set()),  # exited
        (None, set()),  # no PID known (a remote kernel)
    ],
)
def test_tree(root: int | None, expected: set[int]) -> None:
    children = processes.children_map(PARENTS)
    assert processes.tree(root, children, PARENTS) == expected


def test_parent_map_and_tree_of_real_processes() -> None:
    # a child that starts a grandchild, both waiting on stdin
    code = (
        "import subprocess, sys; "
        "g = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], "
        "stdin=subprocess.PIPE); print(g.pid, flush=True); sys.stdin.read(); "
        "g.stdin.close(); g.wait()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        grandchild = int(child.stdout.readline())
        parents = processes.parent_map()
        assert parents[os.getpid()] == os.getppid()
        assert parents[grandchild] == child.pid
        tree = processes.tree(os.getpid(), processes.children_map(parents), parents)
        assert {os.getpid(), child.pid, grandchild} <= tree
        assert os.getppid() not in tree
    finally:
        assert child.stdin is not None
        assert child.stdout is not None
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()


class KernelManager:
    def __init__(self, kernels: dict[str, Any]) -> None:
        self.kernels = kernels

    def get_kernel(self, kernel_id: str) -> Any:
        return self.kernels[kernel_id]


@pytest.mark.parametrize(
    ("kernel", "pid"),
    [
        (SimpleNamespace(provisioner=SimpleNamespace(pid=4242)), 4242),
        (SimpleNamespace(provisioner=SimpleNamespace(pid=None)), None),  # not started yet
        (SimpleNamespace(provisioner=SimpleNamespace()), None),  # a remote provisioner
        (SimpleNamespace(provisioner=None), None),
        (SimpleNamespace(), None),
    ],
)
def test_kernel_pid(kernel: Any, pid: int | None) -> None:
    assert processes.kernel_pid(KernelManager({"k": kernel}), "k") == pid


def test_kernel_pid_of_a_kernel_that_is_gone() -> None:
    assert processes.kernel_pid(KernelManager({}), "k") is None


def test_process_table_follows_new_and_reparented_processes() -> None:
    table = processes.ProcessTable()
    table.refresh()
    # a child that starts a grandchild, then exits when told: the grandchild is re-parented
    code = (
        "import subprocess, sys; "
        "g = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], "
        "stdin=subprocess.PIPE); print(g.pid, flush=True); sys.stdin.readline()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdin is not None
    grandchild = int(child.stdout.readline())
    try:
        parents = table.refresh()
        assert parents[child.pid] == os.getpid()
        assert parents[grandchild] == child.pid

        child.stdin.write("exit\n")
        child.stdin.flush()
        child.wait(timeout=30)
        parents = table.refresh()
        assert child.pid not in parents
        assert parents[grandchild] != child.pid
        assert grandchild not in processes.tree(
            os.getpid(), processes.children_map(parents), parents
        )
    finally:
        psutil.Process(grandchild).kill()
        child.stdin.close()
        child.wait(timeout=30)
        child.stdout.close()

"""Kernels' process trees: the kernel's PID from its provisioner plus all its descendants."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import psutil


def kernel_pid(kernel_manager: Any, kernel_id: str) -> int | None:
    """The PID of a local kernel, or None (a remote or custom provisioner, or no such kernel).

    jupyter-server knows local kernels' PIDs through their provisioner; other provisioners
    (gateway, Kubernetes, SSH) run the kernel where its PID means nothing here.
    """
    try:
        kernel = kernel_manager.get_kernel(kernel_id)
    except KeyError:
        return None
    pid = getattr(getattr(kernel, "provisioner", None), "pid", None)
    return pid if isinstance(pid, int) and pid > 0 else None


def parent_map() -> dict[int, int]:
    """PID -> parent PID of every process of this PID namespace, in one pass."""
    return ProcessTable().refresh()


class ProcessTable:
    """PID -> parent PID of every process of this PID namespace, kept between samples.

    Listing the PIDs is cheap; reading each process's parent is not (one file per process).
    A parent only changes when it exits (its children are re-parented), so only new PIDs and
    the children of PIDs that are gone are read again.
    """

    def __init__(self) -> None:
        self._parents: dict[int, int] = {}

    def refresh(self) -> dict[int, int]:
        pids = set(psutil.pids())
        old = self._parents
        gone = old.keys() - pids
        orphans = {pid for pid, ppid in old.items() if ppid in gone and pid in pids}
        parents = {pid: ppid for pid, ppid in old.items() if pid in pids and pid not in orphans}
        for pid in pids - parents.keys():
            ppid = _parent(pid)
            if ppid is not None:
                parents[pid] = ppid
        self._parents = parents
        return dict(parents)


def _parent(pid: int) -> int | None:
    """The parent PID of `pid`, or None if it exited meanwhile."""
    if not sys.platform.startswith("linux"):
        try:
            return psutil.Process(pid).ppid()
        except psutil.Error:
            return None
    # Reading /proc/<pid>/stat directly is several times cheaper than psutil.Process(pid).ppid().
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid ...": comm may itself contain ") ", so split after the last ")".
    fields = stat[stat.rfind(b")") + 2 :].split(None, 2)
    return int(fields[1]) if len(fields) >= 2 else None


def children_map(parents: Mapping[int, int]) -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    return children


def tree(
    root: int | None, children: Mapping[int, list[int]], alive: Mapping[int, int]
) -> frozenset[int]:
    """`root` and all its descendants; empty when root is None or no longer running."""
    if root is None or root not in alive:
        return frozenset()
    found = {root}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return frozenset(found)

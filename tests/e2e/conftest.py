"""Fixtures of the browser tests.

The server, the browser and the page come from the shared support package
(tests/support/lab.py), one of each per module. What a test holds on the simulated GPUs is
its own: ``notebooks`` opens fresh kernels for each test and shuts them down after it, so
that the tests pass in any order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.lab import Lab, browser, lab, page
from tests.support.lab_page import run_until_printed, shut_down_and_close, write_notebook

__all__ = ["browser", "lab", "notebooks", "page"]

NOTEBOOK_A = """\
from jupyter_gpuaas.gpu.simulate import hold
h = hold("2GiB")
print("held-a")"""

# Notebook B's GPU memory is held by a child process of its kernel, not by the kernel;
# the child exits when the kernel does.
NOTEBOOK_B = '''\
import subprocess, sys
CHILD = """
import os, sys, time
from jupyter_gpuaas.gpu.simulate import hold
h = hold("3GiB", device=1)
print("held", flush=True)
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
"""
child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip() + "-b by pid", child.pid)'''

RELEASE_TIMEOUT_S = 30.0


def _memory_used(lab: Lab) -> dict[str, int]:
    usage: dict[str, Any] = lab.api("GET", "gpuaas/api/usage")
    return {d["uuid"]: d["memory_used"] for d in usage["devices"]}


@pytest.fixture
def notebooks(lab: Lab, page: Any) -> Iterator[dict[str, dict[str, str]]]:
    """Two notebooks open and run, each on a kernel of its own: A holds 2 GiB in its kernel,
    B 3 GiB in a kernel's child; their ``widgetId`` and ``kernelId`` by path.

    After the test, both kernels are shut down and the notebooks closed, and the fixture waits
    until the GPUs hold what they held before, so that the next test starts from there.
    """
    before = _memory_used(lab)
    write_notebook(lab.root / "a.ipynb", NOTEBOOK_A)
    write_notebook(lab.root / "b.ipynb", NOTEBOOK_B)
    opened: dict[str, dict[str, str]] = {}
    try:
        for path, marker in (("a.ipynb", "held-a"), ("b.ipynb", "held-b")):
            opened[path] = run_until_printed(page, path, marker)
        yield opened
    finally:
        for ids in opened.values():
            shut_down_and_close(page, ids["widgetId"])
        deadline = time.monotonic() + RELEASE_TIMEOUT_S
        while (now := _memory_used(lab)) != before:
            assert time.monotonic() < deadline, f"the GPUs hold {now}, not {before} as before"
            time.sleep(0.2)

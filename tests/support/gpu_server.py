"""A real jupyter server in a subprocess (optionally in a new PID namespace) for the GPU tests."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from benchmarks._server import JupyterServer

# The same server the benchmarks drive; here optionally inside a new PID namespace.
Server = JupyterServer


def unshare_prefix() -> list[str]:
    """The command prefix that runs a program in a new PID namespace, as a pod's container sees
    the driver; skips the test when this machine does not allow it."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare (util-linux) is not installed")
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    if os.geteuid() != 0:
        prefix[1:1] = ["--user", "--map-root-user"]
    probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"cannot create a PID namespace here: {probe.stderr.strip()}")
    return prefix

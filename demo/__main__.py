"""Run the demo: JupyterLab with simulated GPUs and the GPU sidebar.

Later issues grow this into the whole system (cluster, hub, culler); the entry point stays
`make demo`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATE = REPO / ".demo"

SAMPLE_NOTEBOOK = {
    "cells": [
        {
            "cell_type": "markdown",
            "metadata": {},
            "source": [
                "# Simulated GPU memory\n",
                "\n",
                "This demo runs on simulated GPUs (a fake NVML library under the real bindings).\n",
                "Run the next cell: this kernel then holds 6 GiB on the first GPU, and the **GPU**\n",
                "panel in the left sidebar shows it against this notebook within one refresh.",
            ],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": [
                "from jupyter_gpuaas.simulate import hold\n",
                "\n",
                'held = hold("6GiB")  # held.release() gives it back; so does restarting the kernel',
            ],
        },
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": [
                "# A data-loader style child process: its memory counts for this notebook too.\n",
                "import subprocess, sys\n",
                "worker = subprocess.Popen([sys.executable, '-c',\n",
                "    'import time; from jupyter_gpuaas.simulate import hold; '\n",
                "    'h = hold(\"3GiB\", device=1); time.sleep(3600)'])",
            ],
        },
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def wait_for(url: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"JupyterLab exited with code {proc.returncode}; see its log above.")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"JupyterLab did not answer at {url} within {timeout:.0f} s.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8888, help="preferred port (default 8888)")
    args = parser.parse_args()

    work = STATE / "work"
    work.mkdir(parents=True, exist_ok=True)
    notebook = work / "simulated-gpu.ipynb"
    if not notebook.exists():
        notebook.write_text(json.dumps(SAMPLE_NOTEBOOK, indent=1))
    sim_dir = STATE / "simulated-gpus"
    shutil.rmtree(sim_dir, ignore_errors=True)
    sim_dir.mkdir(parents=True)

    port = free_port(args.port)
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_GPUAAS_SIM_DIR=str(sim_dir))
    cmd = [
        sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root",
        "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={work}", "--GPUaaS.gpu_source=simulated",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env)
    try:
        wait_for(f"http://127.0.0.1:{port}/api/status?token={token}", proc, timeout=120)
        print(
            "\n  jupyter-gpuaas demo is up: JupyterLab with simulated GPUs\n"
            f"  open  http://127.0.0.1:{port}/lab/tree/simulated-gpu.ipynb?token={token}\n"
            "  then the GPU panel in the left sidebar; Ctrl-C stops the demo.\n",
            flush=True,
        )
        proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)  # JupyterLab asks for confirmation on the first one
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()

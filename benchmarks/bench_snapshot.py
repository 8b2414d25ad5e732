"""Saving and restoring a kernel's variables (docs/kernel-state.md): throughput against plain
pickle, and how long a real kernel pauses while it saves.

1. Throughput, in this process, of the kernel-side code (``jupyter_gpuaas.kernel``) on a real
   IPython shell's namespace, against ``pickle.dump``/``pickle.load`` (protocol 5) of the same
   variables as one dict, each to a file in a fresh folder with an fsync before the file is
   closed (as the snapshot does), the two in turns, best of ``--rounds``: numpy arrays
   (``--gib``, default 1 GiB, in 128 MiB float32 arrays), a pandas frame (``--frame-rows``
   rows: float, int, a category and a text column) and a CPU PyTorch model (a 4-layer MLP,
   about 64 MiB of parameters) where torch is installed (skipped, with the reason, where not).
   MB/s are the variables' in-memory bytes (``nbytes``; the frame's deep ``memory_usage``)
   per second. Restores read files the page cache still holds (a restore after a move reads
   from the volume: slower).
2. The kernel's pause: a real Jupyter Server with the extension, one kernel holding
   ``--pause-gib`` of arrays. The latency of a tiny execute (``1``, over a new websocket) at
   rest, ten times; then, three times, ``POST gpuaas/api/kernel-state/snapshot`` and, 0.1 s
   later, the same tiny execute: it waits until the snapshot is done, which is the pause a user
   would see. Then ``POST .../restore`` into a new kernel of the notebook.

    python -m benchmarks snapshot [--gib 1] [--frame-rows 2000000] [--pause-gib 0.5] [--rounds 3]
    python -m benchmarks snapshot --gib 0.125 --frame-rows 200000 --pause-gib 0.125  # quick
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import pickle
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._server import JupyterServer

MiB = 1 << 20
GiB = 1 << 30
ARRAY_BYTES = 128 * MiB


@dataclass
class Row:
    what: str
    bytes: int
    save_s: float
    restore_s: float
    pickle_save_s: float
    pickle_restore_s: float
    note: str = ""


def _mbs(n: int, seconds: float) -> str:
    return f"{n / MiB / seconds:,.0f}" if seconds > 0 else "-"


def arrays(total: int) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    out, left, i = {}, total, 0
    while left > 0:
        size = min(ARRAY_BYTES, left)
        out[f"a{i}"] = rng.random(size // 4, dtype=np.float32)
        left -= size
        i += 1
    return out


def frame(rows: int) -> tuple[dict[str, Any], int]:
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "loss": rng.random(rows),
            "step": np.arange(rows, dtype=np.int64),
            "gpu": pd.Categorical(rng.choice(["h100", "a100", "l4"], rows)),
            "note": [f"run-{i % 1000}" for i in range(rows)],
        }
    )
    return {"frame": df}, int(df.memory_usage(deep=True).sum())


def torch_model() -> tuple[dict[str, Any], int] | str:
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        return (
            f"skipped: torch is not installed here ({e}); its Linux wheel on PyPI brings "
            "CUDA libraries of several GB"
        )
    layers = [torch.nn.Linear(2048, 2048) for _ in range(4)]
    model = torch.nn.Sequential(*layers)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"model": model}, int(size)


def measure(what: str, variables: dict[str, Any], size: int, rounds: int) -> Row:
    """Ours and plain pickle on ``variables`` in a real IPython shell (see the docstring)."""
    from IPython.core.interactiveshell import InteractiveShell

    from jupyter_gpuaas.kernel.restore import restore
    from jupyter_gpuaas.kernel.snapshot import snapshot

    shell: Any = InteractiveShell.instance()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    os.environ["HOME"] = str(work)  # the state folder must lie in the home

    def ours_save() -> float:
        shell.reset(new_session=False)
        shell.user_ns.update(variables)
        started = time.perf_counter()
        outcome = snapshot(
            shell,
            directory="~/state",
            key="bench",
            notebook="bench.ipynb",
            kernel_id="bench",
            max_bytes=1 << 50,
            reserve_bytes=0,
            deadline=time.time() + 3600,
        )
        seconds = time.perf_counter() - started
        assert outcome.outcome == "kept", outcome
        return seconds

    def ours_restore() -> float:
        shell.reset(new_session=False)
        gc.collect()
        started = time.perf_counter()
        answer = restore(shell, directory="~/state", key="bench", force=True)
        seconds = time.perf_counter() - started
        assert answer["status"] == "restored", answer
        shell.reset(new_session=False)
        return seconds

    path = work / "plain.pickle"

    def plain_save() -> float:
        started = time.perf_counter()
        with path.open("wb") as f:
            pickle.dump(dict(variables), f, protocol=5)
            f.flush()
            os.fsync(f.fileno())
        return time.perf_counter() - started

    def plain_restore() -> float:
        gc.collect()
        started = time.perf_counter()
        with path.open("rb") as f:
            loaded = pickle.load(f)
        seconds = time.perf_counter() - started
        del loaded
        return seconds

    # In turns, so that a busy moment of the machine does not fall on one side only.
    times: list[list[float]] = [[], [], [], []]
    for _ in range(rounds):
        for index, run in enumerate((ours_save, plain_save, ours_restore, plain_restore)):
            times[index].append(run())
    row = Row(what, size, min(times[0]), min(times[2]), min(times[1]), min(times[3]))
    for p in sorted(work.rglob("*"), reverse=True):
        p.unlink() if p.is_file() else p.rmdir()
    work.rmdir()
    return row


async def tiny_latency(server: JupyterServer, kernel: str) -> float:
    started = time.perf_counter()
    await server.execute(kernel, "1")
    return time.perf_counter() - started


async def kernel_pause(pause_gib: float) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="bench-snapshot-server-"))
    config = {
        "ServerApp": {"jpserver_extensions": {"jupyter_gpuaas": True}},
        "GPUaaS": {
            "gpu_source": "simulated",
            "kernel_state_reserve": 0,
            "kernel_state_max_bytes": 1 << 40,
            "kernel_state_timeout": 600,
        },
    }
    server = JupyterServer(base, config)
    server.env["HOME"] = str(base / "home")
    (base / "home").mkdir()
    await server.start()
    try:
        kernel = await server.start_session("train.ipynb")
        count = max(1, int(pause_gib * GiB) // ARRAY_BYTES)
        await server.execute(
            kernel,
            "import numpy as np\n"
            f"arrays = [np.random.default_rng(i).random({ARRAY_BYTES // 4}, dtype=np.float32) "
            f"for i in range({count})]\n"
            "import pandas as pd\nframe = pd.DataFrame({'x': range(1000)})\n"
            "batches = (i for i in range(3))",
        )
        await asyncio.sleep(1.0)
        at_rest = sorted([await tiny_latency(server, kernel) for _ in range(10)])
        runs = []
        for _ in range(3):
            snap = asyncio.ensure_future(
                server.post("gpuaas/api/kernel-state/snapshot", {"kernel_id": kernel})
            )
            await asyncio.sleep(0.1)
            during = await tiny_latency(server, kernel)
            [outcome] = (await snap)["outcomes"]
            runs.append((during, outcome["seconds"], outcome["bytes"], outcome["outcome"]))
            await asyncio.sleep(0.5)
        await server.fetch(f"api/kernels/{kernel}", method="DELETE")
        new = await server.start_session("train.ipynb")
        started = time.perf_counter()
        answer = await server.post(
            "gpuaas/api/kernel-state/restore", {"kernel_id": new, "path": "train.ipynb"}
        )
        restore_wall = time.perf_counter() - started
        return {
            "bytes": count * ARRAY_BYTES,
            "at_rest_p50": statistics.median(at_rest),
            "at_rest_max": at_rest[-1],
            "runs": runs,
            "restore_status": answer["status"],
            "restored": answer.get("restored", []),
            "not_restored": answer.get("not_restored", []),
            "restore_kernel_s": answer.get("seconds", 0.0),
            "restore_wall_s": restore_wall,
        }
    finally:
        await server.stop()


def print_rows(rows: list[Row], skipped: list[str]) -> None:
    print(
        f"{'variables':<28} {'MiB':>7} {'save MB/s':>10} {'restore MB/s':>13} "
        f"{'pickle save':>12} {'pickle restore':>15}   (MiB/s; seconds in brackets)"
    )
    for r in rows:
        print(
            f"{r.what:<28} {r.bytes / MiB:>7,.0f} "
            f"{_mbs(r.bytes, r.save_s):>6} ({r.save_s:.2f}) "
            f"{_mbs(r.bytes, r.restore_s):>7} ({r.restore_s:.2f}) "
            f"{_mbs(r.bytes, r.pickle_save_s):>6} ({r.pickle_save_s:.2f}) "
            f"{_mbs(r.bytes, r.pickle_restore_s):>7} ({r.pickle_restore_s:.2f})"
        )
    for line in skipped:
        print(f"{'PyTorch model':<28} {line}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks snapshot", description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of numpy arrays (1)")
    parser.add_argument("--frame-rows", type=int, default=2_000_000, help="rows of the frame")
    parser.add_argument("--pause-gib", type=float, default=0.5, help="GiB in the real kernel")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is shown (3)")
    args = parser.parse_args(argv)

    rows, skipped = [], []
    total = int(args.gib * GiB)
    rows.append(
        measure(f"numpy, {total // ARRAY_BYTES or 1} arrays", arrays(total), total, args.rounds)
    )
    gc.collect()
    variables, size = frame(args.frame_rows)
    rows.append(measure(f"pandas frame, {args.frame_rows:,} rows", variables, size, args.rounds))
    del variables
    model = torch_model()
    if isinstance(model, str):
        skipped.append(model)
    else:
        rows.append(measure("PyTorch MLP (CPU)", model[0], model[1], args.rounds))
    gc.collect()
    print_rows(rows, skipped)

    pause = asyncio.run(kernel_pause(args.pause_gib))
    print(
        f"\nreal kernel holding {pause['bytes'] / MiB:,.0f} MiB of arrays, a frame and a generator:"
    )
    print(
        f"  tiny execute at rest: p50 {pause['at_rest_p50'] * 1000:.0f} ms, "
        f"max {pause['at_rest_max'] * 1000:.0f} ms"
    )
    for during, seconds, size, outcome in pause["runs"]:
        print(
            f"  snapshot {outcome}, {size / MiB:,.0f} MiB in {seconds:.2f} s (server's clock); "
            f"a tiny execute sent 0.1 s in answered after {during:.2f} s"
        )
    print(
        f"  restore into a new kernel: {pause['restore_status']}, {len(pause['restored'])} "
        f"variables in {pause['restore_kernel_s']:.2f} s in the kernel, "
        f"{pause['restore_wall_s']:.2f} s for the request; not back: "
        + ", ".join(f"{v['name']} ({v['reason']})" for v in pause["not_restored"])
    )
    return 0

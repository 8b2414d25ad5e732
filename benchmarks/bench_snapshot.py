"""Saving and restoring a kernel's variables (docs/kernel-state.md): throughput against plain
pickle and the disk, how long the kernel pauses, and the size the reclaim's wait allows.

1. The disk: its raw write (16 MiB writes, then fsync) and read (``O_DIRECT``: not from the
   page cache) of ``--gib`` in the state folder's file system: the physical limit.
2. Throughput, in this process, of the kernel-side code (``jupyter_gpuaas.kernel``) on a real
   IPython shell's namespace, against ``pickle.dump``/``pickle.load`` (protocol 5) of the same
   variables as one dict, each to a file with an fsync before it is closed (as the snapshot
   does), the two in turns, best of ``--rounds``: numpy arrays (``--gib``, in 128 MiB float32
   arrays), a pandas frame (``--frame-rows`` rows: float, int, a category and a text column),
   and where installed a polars frame, both again at about ``--frame-gib`` (the frames people
   keep: a model's data), a CPU PyTorch model (a 4-layer MLP, 64 MiB), a
   Hugging Face model built from a config (no weights are downloaded) and a JAX array (CPU);
   each one missing is named with the reason. "save" is the snapshot as the kernel asks for it
   (``snapshot_in_background``: the fork, the child's writing, its outcome file read), with
   the kernel's pause beside it; "restore" reads from the disk, not the page cache (both files
   are dropped from it with ``posix_fadvise(DONTNEED)`` first), checks and loads. MB/s are the
   variables' in-memory bytes (``nbytes``; a frame's deep ``memory_usage``) per second. The
   frameworks are measured last, after 3-5: a process that has imported JAX counts as one that
   holds a GPU library, whose other objects the kernel pickles in its pause.
3. The pause options, on ``--pause-gib`` of arrays in this process: writing in the kernel (what
   a synchronous snapshot pauses), copying the arrays for a writer thread (what a consistent
   thread needs first), and the fork (what ships).
4. A real kernel behind a real Jupyter Server with the extension, holding ``--pause-gib`` of
   arrays, a frame and a generator: a tiny execute's latency at rest, then sent 0.1 s into each
   of three snapshots (``POST gpuaas/api/kernel-state/snapshot``); then a restore into a new
   kernel of the notebook.
5. ``--big-gib`` (20): saved by the snapshot code, streamed: ``--big-gib`` names for views of
   one 1 GiB array (each variable is saved on its own, so the file holds ``--big-gib`` GiB
   while this process holds 1), within the reclaim's default ``snapshot_timeout`` (60 s);
   then read back and checked as a restore does (from the disk, chunk by chunk; the arrays are
   not kept: ``--big-gib`` of them would not fit this machine's memory), with the disk's raw
   speed at the same size beside it.

    python -m benchmarks snapshot [--gib 1] [--frame-rows 2000000] [--frame-gib 1]
                                  [--pause-gib 1] [--big-gib 20] [--rounds 3]
    python -m benchmarks snapshot --gib 0.125 --frame-rows 200000 --frame-gib 0.125 \
                                  --pause-gib 0.125 --big-gib 1
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import mmap
import os
import pickle
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._server import JupyterServer

MiB = 1 << 20
GiB = 1 << 30
ARRAY_BYTES = 128 * MiB
IO_CHUNK = 16 * MiB
SNAPSHOT_TIMEOUT = 60.0
"""The gpuaas service's default ``snapshot_timeout`` (docs/culler.md)."""


@dataclass
class Row:
    what: str
    bytes: int
    save_s: float
    pause_s: float
    restore_s: float
    pickle_save_s: float
    pickle_restore_s: float


def _mbs(n: int, seconds: float) -> str:
    return f"{n / MiB / seconds:,.0f}" if seconds > 0 else "-"


def _uncache(path: Path) -> None:
    """Drop ``path``'s pages from the page cache (they are clean after the fsync)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- the disk


def disk_speed(folder: Path, size: int) -> tuple[float, float]:
    """Seconds to write ``size`` bytes (then fsync) and to read them back with O_DIRECT."""
    path = folder / "disk-speed.bin"
    block = np.random.default_rng(2).integers(0, 255, IO_CHUNK, dtype=np.uint8).tobytes()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    started = time.perf_counter()
    try:
        for _ in range(max(1, size // IO_CHUNK)):
            os.write(fd, block)
        os.fsync(fd)
    finally:
        os.close(fd)
    write_s = time.perf_counter() - started
    _uncache(path)
    buffer = mmap.mmap(-1, IO_CHUNK)  # page-aligned, as O_DIRECT needs
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    started = time.perf_counter()
    try:
        while os.readv(fd, [buffer]):
            pass
    finally:
        os.close(fd)
    read_s = time.perf_counter() - started
    path.unlink()
    return write_s, read_s


# --------------------------------------------------------------------------- the variables


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


def polars_frame(rows: int) -> tuple[dict[str, Any], int] | str:
    try:
        import polars as pl  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        return f"skipped: polars is not installed here ({e})"
    rng = np.random.default_rng(3)
    df = pl.DataFrame(
        {"loss": rng.random(rows), "step": np.arange(rows, dtype=np.int64)}
    ).with_columns(note=pl.format("run-{}", pl.col("step") % 1000))  # no Python strings
    return {"plframe": df}, int(df.estimated_size())


def rows_for(make: Callable[[int], tuple[dict[str, Any], int] | str], size: int) -> int | str:
    """Rows of ``make``'s frame that take about ``size`` bytes (measured on 100,000 rows)."""
    sample = make(100_000)
    if isinstance(sample, str):
        return sample
    return max(1, round(size / (sample[1] / 100_000)))


def torch_model() -> tuple[dict[str, Any], int] | str:
    try:
        import torch  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        return f"skipped: torch is not installed here ({e})"
    layers = [torch.nn.Linear(2048, 2048) for _ in range(4)]
    model = torch.nn.Sequential(*layers)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"model": model, "batch": torch.randn(4096, 2048)}, int(size) + 4096 * 2048 * 4


def hf_model() -> tuple[dict[str, Any], int] | str:
    try:
        import transformers  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        return f"skipped: transformers is not installed here ({e})"
    # Built from a config: nothing is downloaded (this machine reaches no model hub).
    config = transformers.BertConfig(
        hidden_size=512, num_hidden_layers=6, num_attention_heads=8, intermediate_size=2048
    )
    model = transformers.BertModel(config)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"bert": model}, int(size)


def jax_array(total: int) -> tuple[dict[str, Any], int] | str:
    try:
        import jax  # type: ignore[import-not-found, unused-ignore]
        import jax.numpy as jnp  # type: ignore[import-not-found, unused-ignore]
    except ImportError as e:
        return f"skipped: jax is not installed here ({e})"
    x = jnp.asarray(np.random.default_rng(4).random(total // 4, dtype=np.float32))
    jax.block_until_ready(x)
    return {"jx": x}, int(x.nbytes)


# --------------------------------------------------------------------------- throughput


class Bench:
    """Ours and plain pickle on one namespace, in a real IPython shell (see the docstring)."""

    def __init__(self) -> None:
        from IPython.core.interactiveshell import InteractiveShell

        self.shell: Any = InteractiveShell.instance()
        self.work = Path(tempfile.mkdtemp(prefix="bench-snapshot-", dir=os.environ.get("TMPDIR")))
        os.environ["HOME"] = str(self.work)  # the state folder must lie in the home
        self.folder = self.work / "state"

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def arguments(self, deadline: float = 3600) -> dict[str, Any]:
        return {
            "directory": "~/state",
            "key": "bench",
            "notebook": "bench.ipynb",
            "kernel_id": "bench",
            "max_bytes": 1 << 50,
            "reserve_bytes": 0,
            "deadline": time.time() + deadline,
        }

    def save(self, variables: dict[str, Any], deadline: float = 3600) -> tuple[float, float, Any]:
        """Seconds to the outcome, the kernel's pause, the outcome."""
        from jupyter_gpuaas.kernel.snapshot import snapshot_in_background
        from jupyter_gpuaas.statefiles import read_outcome_file

        self.shell.reset(new_session=False)
        self.shell.user_ns.update(variables)
        started = time.perf_counter()
        answer = snapshot_in_background(self.shell, **self.arguments(deadline))
        if "writing" in answer:
            path = self.folder / answer["writing"]
            while True:
                try:
                    outcome = read_outcome_file(path)
                    break
                except FileNotFoundError:
                    time.sleep(0.005)
            path.unlink()
        else:
            from jupyter_gpuaas.core.kernel_state import KernelStateOutcome

            outcome = KernelStateOutcome.from_json(answer["outcome"])
        seconds = time.perf_counter() - started
        self.shell.reset(new_session=False)
        return seconds, float(answer["paused_s"]), outcome

    def data_file(self) -> Path:
        return next(self.folder.glob("bench.*.data"))

    def restore(self) -> float:
        from jupyter_gpuaas.kernel.restore import restore

        self.shell.reset(new_session=False)
        gc.collect()
        _uncache(self.data_file())
        started = time.perf_counter()
        answer = restore(self.shell, directory="~/state", key="bench", force=True)
        seconds = time.perf_counter() - started
        assert answer["status"] == "restored", answer
        assert not answer["not_restored"], answer
        self.shell.reset(new_session=False)
        return seconds

    def measure(self, what: str, variables: dict[str, Any], size: int, rounds: int) -> Row:
        path = self.work / "plain.pickle"

        def plain_save() -> float:
            started = time.perf_counter()
            with path.open("wb") as f:
                pickle.dump(dict(variables), f, protocol=5)
                f.flush()
                os.fsync(f.fileno())
            return time.perf_counter() - started

        def plain_restore() -> float:
            gc.collect()
            _uncache(path)
            started = time.perf_counter()
            with path.open("rb") as f:
                loaded = pickle.load(f)
            seconds = time.perf_counter() - started
            del loaded
            return seconds

        saves: list[tuple[float, float]] = []

        def ours_save() -> float:
            seconds, paused, outcome = self.save(variables)
            assert outcome.outcome == "kept", outcome
            saves.append((seconds, paused))
            return seconds

        # In turns, so that a busy moment of the machine does not fall on one side only.
        times: list[list[float]] = [[], [], [], []]
        for _ in range(rounds):
            for index, run in enumerate((ours_save, plain_save, self.restore, plain_restore)):
                times[index].append(run())
        best = min(saves)
        path.unlink()
        return Row(what, size, best[0], best[1], min(times[2]), min(times[1]), min(times[3]))


# --------------------------------------------------------------------------- the pause


def pause_options(bench: Bench, variables: dict[str, Any]) -> dict[str, float]:
    """Seconds the kernel would pause with each way of writing (see the docstring)."""
    from jupyter_gpuaas.kernel.snapshot import snapshot

    bench.shell.reset(new_session=False)
    bench.shell.user_ns.update(variables)
    started = time.perf_counter()
    outcome = snapshot(bench.shell, **bench.arguments())
    in_kernel = time.perf_counter() - started
    assert outcome.outcome == "kept", outcome
    started = time.perf_counter()
    copies = [np.copy(v) for v in variables.values()]
    copy_s = time.perf_counter() - started
    del copies
    forks = [bench.save(variables)[1] for _ in range(3)]
    return {"in_kernel": in_kernel, "copy": copy_s, "fork": min(forks), "fork_max": max(forks)}


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
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- the big one


def big_run(bench: Bench, gib: int) -> dict[str, float]:
    """``gib`` GiB saved (views of one GiB), then read back and checked as a restore does."""
    from jupyter_gpuaas.kernel.store import read_manifest, read_verified_each

    base = np.random.default_rng(5).random(GiB // 8)
    variables = {f"v{i:02d}": base[:] for i in range(gib)}  # one view per name: saved each
    seconds, paused, outcome = bench.save(variables, deadline=600)
    assert outcome.outcome == "kept", outcome
    del variables, base
    gc.collect()
    data = bench.data_file()
    _uncache(data)
    manifest = read_manifest(bench.folder / "bench.json")
    started = time.perf_counter()
    with data.open("rb", buffering=0) as f:
        checked = sum(len(part) for parts in read_verified_each(manifest, f) for part in parts)
    read_s = time.perf_counter() - started
    assert checked == outcome.bytes
    data.unlink()
    write_raw, read_raw = disk_speed(bench.folder, gib * GiB)
    return {
        "bytes": float(outcome.bytes),
        "save_s": seconds,
        "pause_s": paused,
        "read_s": read_s,
        "raw_write_s": write_raw,
        "raw_read_s": read_raw,
    }


# --------------------------------------------------------------------------- printing


def print_rows(rows: list[Row], skipped: list[tuple[str, str]]) -> None:
    print(
        f"{'variables':<34} {'MiB':>6} {'save MB/s':>14} {'pause':>7} {'restore MB/s':>14} "
        f"{'pickle save':>14} {'pickle restore':>15}  ours/pickle save, restore"
    )
    for r in rows:
        print(
            f"{r.what:<34} {r.bytes / MiB:>6,.0f} "
            f"{_mbs(r.bytes, r.save_s):>6} ({r.save_s:5.2f}) {r.pause_s:6.3f}s "
            f"{_mbs(r.bytes, r.restore_s):>6} ({r.restore_s:5.2f}) "
            f"{_mbs(r.bytes, r.pickle_save_s):>6} ({r.pickle_save_s:5.2f}) "
            f"{_mbs(r.bytes, r.pickle_restore_s):>7} ({r.pickle_restore_s:5.2f})  "
            f"{r.pickle_save_s / r.save_s:.2f}x, {r.pickle_restore_s / r.restore_s:.2f}x"
        )
    for what, line in skipped:
        print(f"{what:<34} {line}")


def _optional(
    rows: list[Row],
    skipped: list[tuple[str, str]],
    bench: Bench,
    what: str,
    made: tuple[dict[str, Any], int] | str,
    rounds: int,
) -> None:
    if isinstance(made, str):
        skipped.append((what, made))
        return
    try:
        rows.append(bench.measure(what, made[0], made[1], rounds))
    except Exception as e:  # noqa: BLE001 - a framework's object that does not come back: say so
        skipped.append((what, f"not kept: {type(e).__name__}: {str(e)[:200]}"))


def large_frames(
    rows: list[Row], skipped: list[tuple[str, str]], bench: Bench, size: int, rounds: int
) -> None:
    """A pandas and (where installed) a polars frame of about ``size`` bytes each."""
    pandas_rows = rows_for(frame, size)
    assert isinstance(pandas_rows, int)  # pandas is a dependency
    variables, made_size = frame(pandas_rows)
    rows.append(bench.measure(f"pandas frame, {pandas_rows:,} rows", variables, made_size, rounds))
    del variables
    gc.collect()
    polars_rows = rows_for(polars_frame, size)
    if isinstance(polars_rows, str):
        skipped.append(("polars frame, large", polars_rows))
        return
    made = polars_frame(polars_rows)
    _optional(rows, skipped, bench, f"polars frame, {polars_rows:,} rows", made, rounds)
    del made
    gc.collect()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks snapshot", description=__doc__)
    parser.add_argument("--gib", type=float, default=1.0, help="GiB of numpy arrays (1)")
    parser.add_argument("--frame-rows", type=int, default=2_000_000, help="rows of the frames")
    parser.add_argument(
        "--frame-gib", type=float, default=1.0, help="GiB of the large frames (1; 0: none)"
    )
    parser.add_argument("--pause-gib", type=float, default=1.0, help="GiB held for the pause")
    parser.add_argument("--big-gib", type=int, default=20, help="GiB of the streamed run (20)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is shown (3)")
    args = parser.parse_args(argv)

    bench = Bench()
    try:
        total = int(args.gib * GiB)
        write_s, read_s = disk_speed(bench.work, total)
        print(
            f"disk ({bench.work}): raw write {_mbs(total, write_s)} MB/s (16 MiB writes, fsync), "
            f"raw read {_mbs(total, read_s)} MB/s (O_DIRECT), {total / MiB:,.0f} MiB"
        )
        rows: list[Row] = []
        skipped: list[tuple[str, str]] = []
        count = total // ARRAY_BYTES or 1
        rows.append(bench.measure(f"numpy, {count} arrays", arrays(total), total, args.rounds))
        gc.collect()
        variables, size = frame(args.frame_rows)
        what = f"pandas frame, {args.frame_rows:,} rows"
        rows.append(bench.measure(what, variables, size, args.rounds))
        del variables
        gc.collect()
        held = arrays(int(args.pause_gib * GiB))
        options = pause_options(bench, held)
        del held
        gc.collect()
        gib = args.pause_gib
        print(
            f"\nthe kernel's pause with {gib:g} GiB of arrays held, by way of writing: "
            f"in the kernel {options['in_kernel']:.2f} s; copies for a writer thread "
            f"{options['copy']:.2f} s; fork {options['fork']:.3f}-{options['fork_max']:.3f} s "
            f"({options['fork'] / gib:.3f} s per GiB)"
        )

        pause = asyncio.run(kernel_pause(args.pause_gib))
        print(
            f"\nreal kernel holding {pause['bytes'] / MiB:,.0f} MiB of arrays, a frame and a "
            f"generator: a tiny execute at rest p50 {pause['at_rest_p50'] * 1000:.0f} ms, "
            f"max {pause['at_rest_max'] * 1000:.0f} ms"
        )
        for during, seconds, size, outcome in pause["runs"]:
            print(
                f"  snapshot {outcome}, {size / MiB:,.0f} MiB in {seconds:.2f} s (server's "
                f"clock); a tiny execute sent 0.1 s in answered after {during:.3f} s"
            )
        print(
            f"  restore into a new kernel: {pause['restore_status']}, {len(pause['restored'])} "
            f"variables in {pause['restore_kernel_s']:.2f} s in the kernel, "
            f"{pause['restore_wall_s']:.2f} s for the request; not back: "
            + ", ".join(f"{v['name']} ({v['reason']})" for v in pause["not_restored"])
        )

        big = big_run(bench, args.big_gib)
        n = int(big["bytes"])
        print(
            f"\n{n / GiB:.0f} GiB streamed: saved in {big['save_s']:.1f} s "
            f"({_mbs(n, big['save_s'])} MB/s, pause {big['pause_s']:.3f} s; the reclaim's "
            f"default snapshot_timeout is {SNAPSHOT_TIMEOUT:.0f} s); read back and checked in "
            f"{big['read_s']:.1f} s ({_mbs(n, big['read_s'])} MB/s); the disk raw: write "
            f"{big['raw_write_s']:.1f} s ({_mbs(n, big['raw_write_s'])} MB/s), read "
            f"{big['raw_read_s']:.1f} s ({_mbs(n, big['raw_read_s'])} MB/s)"
        )
        makers: list[tuple[str, Callable[[], tuple[dict[str, Any], int] | str]]] = [
            (f"polars frame, {args.frame_rows:,} rows", lambda: polars_frame(args.frame_rows)),
            ("PyTorch MLP + batch (CPU)", torch_model),
            ("Hugging Face BERT (CPU, config)", hf_model),
            (f"JAX array (CPU), {total / MiB:,.0f} MiB", lambda: jax_array(total)),
        ]
        for what, make in makers:
            _optional(rows, skipped, bench, what, make(), args.rounds)
            gc.collect()
        if args.frame_gib > 0:
            large_frames(rows, skipped, bench, int(args.frame_gib * GiB), args.rounds)
        print()
        print_rows(rows, skipped)

    finally:
        bench.close()
    return 0

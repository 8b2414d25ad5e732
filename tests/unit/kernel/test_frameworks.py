"""Each framework's objects saved and restored by the kernel code, the real libraries (not
stand-ins): a pandas frame (its columns out of band), a polars frame, PyTorch CPU tensors and
models, a JAX array on the CPU, a Hugging Face model built from a config. A test whose library
is not installed here is skipped, saying so (only pandas is in the test extras: the others are
large; docs/benchmarks.md has their figures)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped, unused-ignore]
import pytest

from jupyter_gpuaas.kernel.restore import restore
from jupyter_gpuaas.kernel.snapshot import snapshot_in_background
from tests.support.kernel_shell import Shell, outcome_left, own_home
from tests.support.kernel_shell import save as save_in_process

DIRECTORY = "~/state"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return own_home(tmp_path, monkeypatch)


@pytest.fixture(params=["in the kernel", "by the forked writer"])
def save(request: pytest.FixtureRequest, home: Path) -> Any:
    """Save a shell one way or the other; the outcome."""

    def saved(shell: Shell) -> Any:
        if request.param == "in the kernel":
            return save_in_process(shell, directory=DIRECTORY, notebook="nb.ipynb")
        answer = snapshot_in_background(
            shell,
            directory=DIRECTORY,
            key="nb",
            notebook="nb.ipynb",
            kernel_id="k1",
            max_bytes=1 << 30,
            reserve_bytes=0,
            deadline=time.time() + 60,
        )
        if "outcome" in answer:
            return answer["outcome"]
        return outcome_left(home / "state" / answer["writing"])

    return saved


def back(names: list[str]) -> dict[str, Any]:
    shell = Shell()
    answer = restore(shell, directory=DIRECTORY, key="nb")
    assert answer["status"] == "restored", answer
    assert answer["not_restored"] == [], answer
    assert sorted(answer["restored"]) == sorted(names)
    return shell.user_ns


def entries(home: Path) -> dict[str, dict[str, Any]]:
    manifest = json.loads((home / "state" / "nb.json").read_text())
    return {e["name"]: e for e in manifest["variables"]}


def kept(outcome: Any) -> None:
    status = outcome["outcome"] if isinstance(outcome, dict) else outcome.outcome
    assert status == "kept", outcome


def test_a_pandas_frame_comes_back_equal_its_columns_out_of_band(save: Any, home: Path) -> None:
    rows = 50_000
    frame = pd.DataFrame(
        {
            "loss": np.linspace(0, 1, rows),
            "step": np.arange(rows, dtype=np.int64),
            "gpu": pd.Categorical(["h100", "l4"] * (rows // 2)),
            "note": [f"run-{i % 7}" for i in range(rows)],
        }
    )
    kept(save(Shell(frame=frame)))
    entry = entries(home)["frame"]
    assert entry["kind"] == "pickle"
    assert len(entry["parts"]) > 1  # the pickle, then the numeric columns' own bytes
    assert sum(entry["parts"][1:]) >= rows * 16
    restored = back(["frame"])["frame"]
    pd.testing.assert_frame_equal(restored, frame)
    restored.loc[0, "loss"] = 5.0  # built on memory of its own: writable
    assert restored.loc[0, "loss"] == 5.0


def test_a_polars_frame_comes_back_equal(save: Any, home: Path) -> None:
    pl = pytest.importorskip("polars", reason="polars is not installed here (not a test extra)")
    frame = pl.DataFrame({"loss": np.linspace(0, 1, 1000), "note": [f"r{i}" for i in range(1000)]})
    kept(save(Shell(plframe=frame)))
    assert entries(home)["plframe"]["kind"] == "polars"  # its IPC stream, not its pickle
    assert back(["plframe"])["plframe"].equals(frame)


def test_a_polars_frame_of_many_chunks_and_types_is_written_after_polars_ran(save: Any) -> None:
    """Polars' thread pool has run in the kernel: a forked writer (which has none of its
    threads) must still write the frame, not wait for them until its deadline."""
    pl = pytest.importorskip("polars", reason="polars is not installed here (not a test extra)")
    part = pl.DataFrame({"loss": np.linspace(0, 1, 20_000), "step": np.arange(20_000)})
    frame = pl.concat([part, part, part], rechunk=False).with_columns(
        note=pl.format("run-{}", pl.col("step") % 7),
        pair=pl.concat_list("loss", "loss"),
        both=pl.struct("loss", "step"),
    )
    frame = frame.with_columns(kind=pl.col("note").cast(pl.Categorical))
    assert frame.group_by("note").agg(pl.col("loss").sum()).height == 7  # the pool at work
    kept(save(Shell(plframe=frame)))
    restored = back(["plframe"])["plframe"]
    assert restored.equals(frame)
    assert restored.schema == frame.schema


def test_a_polars_frame_over_the_budget_is_named_and_the_rest_kept(home: Path) -> None:
    pl = pytest.importorskip("polars", reason="polars is not installed here (not a test extra)")
    frame = pl.DataFrame({"loss": np.linspace(0, 1, 200_000)})
    outcome = save_in_process(
        Shell(plframe=frame, small=1), directory=DIRECTORY, notebook="nb.ipynb", max_bytes=100_000
    )
    assert outcome.outcome == "kept_with_losses", outcome
    assert [v.name for v in outcome.lost] == ["plframe"]
    assert "over the size budget" in outcome.lost[0].reason
    shell = Shell()
    assert restore(shell, directory=DIRECTORY, key="nb")["restored"] == ["small"]
    assert shell.user_ns["small"] == 1


def test_pytorch_cpu_tensors_and_a_model_come_back_equal(save: Any, home: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed here (not a test extra)")
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    tensor = torch.randn(64, 16)
    kept(save(Shell(model=model, tensor=tensor)))
    assert {e["kind"] for e in entries(home).values()} == {"torch"}
    ns = back(["model", "tensor"])
    assert torch.equal(ns["tensor"], tensor)
    assert ns["model"](tensor).shape == (64, 2)
    for name, value in model.state_dict().items():
        assert torch.equal(ns["model"].state_dict()[name], value)


def test_a_jax_array_on_the_cpu_comes_back_a_jax_array(save: Any, home: Path) -> None:
    jax = pytest.importorskip("jax", reason="jax is not installed here (not a test extra)")
    array = jax.numpy.arange(12.0).reshape(3, 4)
    kept(save(Shell(jx=array)))
    assert entries(home)["jx"]["library"] == "jax"
    restored = back(["jx"])["jx"]
    assert isinstance(restored, jax.Array)
    assert restored.devices() == array.devices()
    np.testing.assert_array_equal(np.asarray(restored), np.asarray(array))


def test_a_hugging_face_model_built_from_a_config_comes_back_equal(save: Any) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed here (not a test extra)")
    transformers = pytest.importorskip(
        "transformers", reason="transformers is not installed here (not a test extra)"
    )
    config = transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    model = transformers.BertModel(config).eval()  # no weights downloaded: built from a config
    kept(save(Shell(bert=model)))
    restored = back(["bert"])["bert"]
    assert type(restored) is type(model)
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(restored(ids).last_hidden_state, model(ids).last_hidden_state)

"""Which device a saved tensor comes back on: the kernel code's own choice, tested with a small
stand-in for ``torch`` (PyTorch's wheel is not installed on the development machine; the
stand-in has only what the kernel code calls: ``Tensor``, ``nn.Module``, ``save``, ``load`` and
``cuda.is_available``). A real PyTorch round trip runs where torch is installed."""

from __future__ import annotations

import pickle
import sys
import time
import types
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.kernel.restore import restore
from jupyter_gpuaas.kernel.snapshot import snapshot


class Shell:
    def __init__(self, **variables: Any) -> None:
        self.user_ns_hidden: dict[str, Any] = {}
        self.user_ns: dict[str, Any] = dict(variables)
        self.execution_count = 1


class Tensor:
    def __init__(self, values: list[float], device: str) -> None:
        self.values, self.device = values, device

    def element_size(self) -> int:
        return 4

    def nelement(self) -> int:
        return len(self.values)


class Module:
    def __init__(self, weight: Tensor) -> None:
        self.weight = weight

    def parameters(self) -> Any:
        return iter([self.weight])


def fake_torch(cuda: bool) -> types.ModuleType:
    torch = types.ModuleType("torch")
    loads: list[Any] = []

    def save(obj: Any, f: Any, pickle_module: Any) -> None:
        pickle_module.dump(obj, f)

    def load(f: Any, map_location: str | None, weights_only: bool) -> Any:
        loads.append((map_location, weights_only))
        obj = pickle.load(f)
        if map_location is not None:
            for tensor in [obj] if isinstance(obj, Tensor) else [obj.weight]:
                tensor.device = map_location
        return obj

    torch.Tensor = Tensor  # type: ignore[attr-defined]
    torch.nn = types.SimpleNamespace(Module=Module)  # type: ignore[attr-defined]
    torch.save = save  # type: ignore[attr-defined]
    torch.load = load  # type: ignore[attr-defined]
    torch.cuda = types.SimpleNamespace(is_available=lambda: cuda)  # type: ignore[attr-defined]
    torch.loads = loads  # type: ignore[attr-defined]
    return torch


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def round_trip(monkeypatch: pytest.MonkeyPatch, cuda_after: bool) -> tuple[Shell, dict[str, Any]]:
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda=True))
    weights = Tensor([1.0, 2.0], "cuda:0")
    outcome = snapshot(
        Shell(weights=weights, model=Module(Tensor([3.0], "cuda:1")), cpu=Tensor([4.0], "cpu")),
        directory="~/s",
        key="k",
        notebook="n.ipynb",
        kernel_id="k",
        max_bytes=1 << 20,
        reserve_bytes=0,
        deadline=time.time() + 30,
    )
    assert outcome.outcome == "kept", outcome
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda=cuda_after))
    shell = Shell()
    return shell, restore(shell, directory="~/s", key="k")


def test_a_gpu_tensor_comes_back_on_the_gpu_where_there_is_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shell, answer = round_trip(monkeypatch, cuda_after=True)
    assert answer["status"] == "restored"
    assert answer["notes"] == []
    assert shell.user_ns["weights"].device == "cuda:0"
    assert shell.user_ns["model"].weight.device == "cuda:1"
    assert sys.modules["torch"].loads == [(None, False)] * 3


def test_without_a_gpu_it_comes_back_on_the_cpu_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shell, answer = round_trip(monkeypatch, cuda_after=False)
    assert shell.user_ns["weights"].device == "cpu"
    assert shell.user_ns["weights"].values == [1.0, 2.0]
    assert shell.user_ns["model"].weight.device == "cpu"
    assert shell.user_ns["cpu"].device == "cpu"
    assert sorted(answer["notes"]) == [
        "`model` was on cuda:1; no cuda device here: it is on the CPU",
        "`weights` was on cuda:0; no cuda device here: it is on the CPU",
    ]

"""Which device a saved tensor or array comes back on: the kernel code's own choice, tested with
small stand-ins for ``torch``, ``cupy`` and ``jax`` (none of them is installed on the development
machine; each stand-in has only what the kernel code calls, e.g. for torch ``Tensor``,
``nn.Module``, ``save``, ``load`` and ``cuda.is_available``)."""

from __future__ import annotations

import json
import pickle
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jupyter_gpuaas.kernel.restore import restore
from jupyter_gpuaas.kernel.snapshot import snapshot
from tests.support.kernel_shell import Shell, own_home


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

    def buffers(self) -> Any:
        return iter([])


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
    return own_home(tmp_path, monkeypatch)


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
        "“model” was on cuda:1; no cuda device here: it is on the CPU",
        "“weights” was on cuda:0; no cuda device here: it is on the CPU",
    ]


# CuPy and JAX arrays: saved as the raw bytes of their host copy, back on the same kind of
# device. Stand-ins again (neither library is installed here), with only what the code calls.


class CupyArray:
    """Like cupy.ndarray: a class of a ``cupy.`` module, ``get()`` to the host, ``device.id``."""

    __module__ = "cupy._core.core"

    def __init__(self, host: np.ndarray, device: int) -> None:
        self.host, self.device = host, types.SimpleNamespace(id=device)

    def get(self) -> np.ndarray:
        return self.host


def fake_cupy(gpu: bool) -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    current = {"device": 0}

    class Device:
        def __init__(self, index: int) -> None:
            self.index = index

        def __enter__(self) -> None:
            current["device"] = self.index

        def __exit__(self, *exc: object) -> None:
            current["device"] = 0

    cupy.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_available=lambda: gpu,
        Device=Device,
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 2),
    )
    cupy.asarray = lambda a: CupyArray(np.asarray(a), current["device"])  # type: ignore[attr-defined]
    return cupy


class JaxDevice:
    def __init__(self, platform: str, id: int) -> None:
        self.platform, self.id = platform, id


class JaxArray:
    def __init__(self, host: np.ndarray, device: JaxDevice) -> None:
        self.host, self.device = host, device

    def devices(self) -> set[JaxDevice]:
        return {self.device}

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.host


def fake_jax(platforms: tuple[str, ...]) -> types.ModuleType:
    jax = types.ModuleType("jax")

    def devices(platform: str) -> list[JaxDevice]:
        if platform not in platforms:
            raise RuntimeError(f"Unknown backend {platform}")
        return [JaxDevice(platform, 0), JaxDevice(platform, 1)]

    jax.Array = JaxArray  # type: ignore[attr-defined]
    jax.devices = devices  # type: ignore[attr-defined]
    jax.device_put = lambda a, d: JaxArray(np.asarray(a), d)  # type: ignore[attr-defined]
    return jax


def save_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", fake_jax(("gpu", "cpu")))
    outcome = snapshot(
        Shell(
            c=CupyArray(np.arange(6, dtype="float32").reshape(2, 3), 1),
            j=JaxArray(np.arange(4, dtype="int32"), JaxDevice("gpu", 1)),
        ),
        directory="~/s",
        key="arrays",
        notebook="n.ipynb",
        kernel_id="k",
        max_bytes=1 << 20,
        reserve_bytes=0,
        deadline=time.time() + 30,
    )
    assert outcome.outcome == "kept", outcome


def test_cupy_and_jax_arrays_come_back_on_their_gpu(
    monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    save_arrays(monkeypatch)
    manifest = json.loads((home / "s" / "arrays.json").read_text())
    assert {v["name"]: (v["kind"], v["library"], v["device"]) for v in manifest["variables"]} == {
        "c": ("ndarray", "cupy", "cuda:1"),
        "j": ("ndarray", "jax", "gpu:1"),
    }
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(gpu=True))
    shell = Shell()
    answer = restore(shell, directory="~/s", key="arrays")
    assert answer["notes"] == []
    c, j = shell.user_ns["c"], shell.user_ns["j"]
    assert isinstance(c, CupyArray)
    assert c.device.id == 1
    np.testing.assert_array_equal(c.host, np.arange(6, dtype="float32").reshape(2, 3))
    assert isinstance(j, JaxArray)
    assert (j.device.platform, j.device.id) == ("gpu", 1)
    np.testing.assert_array_equal(j.host, np.arange(4, dtype="int32"))


def test_without_a_gpu_they_come_back_on_the_cpu_with_a_note(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    save_arrays(monkeypatch)
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(gpu=False))
    monkeypatch.setitem(sys.modules, "jax", fake_jax(("cpu",)))
    shell = Shell()
    answer = restore(shell, directory="~/s", key="arrays")
    assert isinstance(shell.user_ns["c"], np.ndarray)
    assert shell.user_ns["j"].device.platform == "cpu"
    assert sorted(answer["notes"]) == [
        "“c” was a CuPy array on cuda:1; no GPU here: it is a numpy array",
        "“j” was on gpu:1; no gpu device here: it is on the CPU",
    ]

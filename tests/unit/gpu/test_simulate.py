"""Simulated GPU work: holds and driver behaviour in the state directory."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.fake_nvml import FakeNvml
from jupyter_gpuaas.gpu.simulate import DriverState, read_driver, read_holds
from jupyter_gpuaas.gpu.spec import GiB, SpecError, parse_devices


def test_hold_and_release(sim_dir: Path) -> None:
    handle = simulate.hold("3GiB", device="1", utilization=30)
    [record] = read_holds(sim_dir)
    assert (record.device, record.size, record.utilization, record.kind) == (
        "1",
        3 * GiB,
        30,
        "compute",
    )
    assert handle.size == 3 * GiB
    assert "held" in repr(handle)
    handle.release()
    handle.release()  # twice is fine
    assert read_holds(sim_dir) == []
    assert "released" in repr(handle)


def test_a_pickled_hold_comes_back_as_a_record_that_holds_nothing(sim_dir: Path) -> None:
    """Device memory is never in a pickle: a hold loaded again, as a kernel's
    restored variables are, is released, says so, and releasing it leaves the original's
    memory alone."""
    handle = simulate.hold("2GiB", device=0)
    copy = pickle.loads(pickle.dumps(handle))
    assert copy.restored
    assert copy.released
    assert copy.size == 2 * GiB
    assert "restored from a snapshot: holds no GPU memory" in repr(copy)
    assert simulate.RESTORED[-1] == handle.record
    copy.release()
    assert [h.size for h in read_holds(sim_dir)] == [2 * GiB]  # the original still holds
    handle.release()
    assert read_holds(sim_dir) == []


def test_hold_as_context_manager(sim_dir: Path) -> None:
    with simulate.hold(1024, device=0):
        assert [h.size for h in read_holds(sim_dir)] == [1024]
    assert read_holds(sim_dir) == []


def test_default_device_follows_cuda_visible_devices(
    sim_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2:1,0")
    with simulate.hold("1GiB") as h:
        assert h.device == "2:1"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with simulate.hold("1GiB") as h:
        assert h.device == "0"


def test_unknown_device_refused_once_the_simulation_runs(sim_dir: Path) -> None:
    FakeNvml(parse_devices("1xH100-80GB,1xA100-40GB:mig=2x3g.20gb"), sim_dir).write_devices()
    for ok in ("0", "1", "1:1", parse_devices("1xH100-80GB")[0].uuid):
        simulate.hold("1GiB", device=ok).release()
    for bad in ("2", "1:2", "0:0", "GPU-nope"):
        with pytest.raises(SpecError, match="no simulated device"):
            simulate.hold("1GiB", device=bad)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"size": "lots"}, "cannot read size"),
        ({"size": "1GiB", "utilization": 101}, "percentage"),
        ({"size": "1GiB", "kind": "tensor"}, "kind must be"),
    ],
)
def test_hold_rejects(sim_dir: Path, args: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        simulate.hold(**args)


def test_set_driver_round_trip(sim_dir: Path) -> None:
    assert read_driver(sim_dir) is None
    simulate.set_driver("535.104", lost=[1, "GPU-x"], errors={"nvmlDeviceGetName": 3})
    assert read_driver(sim_dir) == DriverState(
        "535.104", frozenset({"1", "GPU-x"}), {"nvmlDeviceGetName": 3}
    )
    simulate.reset_driver()
    assert read_driver(sim_dir) is None
    with pytest.raises(SpecError, match="driver behaviour"):
        simulate.set_driver("550")  # type: ignore[arg-type]


def test_unreadable_state_files_are_skipped(sim_dir: Path) -> None:
    (sim_dir / "holds").mkdir(parents=True)
    (sim_dir / "holds" / "half.json").write_text('{"pid": ')
    (sim_dir / "driver.json").write_text(json.dumps({"behaviour": "999"}))
    assert read_holds(sim_dir) == []
    assert read_driver(sim_dir) is None


def test_state_dir_defaults_to_the_jupyter_runtime_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(simulate.ENV_DIR, raising=False)
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    assert simulate.state_dir() == tmp_path / "rt" / "gpuaas-sim"
    monkeypatch.setenv(simulate.ENV_DIR, str(tmp_path / "elsewhere"))
    assert simulate.state_dir() == tmp_path / "elsewhere"

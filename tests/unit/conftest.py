from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from jupyter_gpuaas.gpu import fake_nvml
from jupyter_gpuaas.gpu.simulate import ENV_DIR
from tests.support.clock import RealSleeps

# Property tests check behaviour, not speed (benchmarks do): on a loaded machine a case may take
# longer than hypothesis's 200 ms deadline, which failed a passing fuzz test on a busy CI box.
settings.register_profile("gpuaas", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("gpuaas")

UNIT = Path(__file__).resolve().parent
# A warning in a unit test is an error, as the Jupyter projects run their tests. The exceptions,
# each as narrow as it can be:
UNIT_WARNINGS = (
    "error",
    # The replay's Gpuaas policy (benchmarks/replay/policies.py) makes an event loop per run and
    # never closes it; Python says so, with the loop's self-pipe socket pair, when the loop is
    # collected, in whichever test runs then.
    # (Python 3.10 names the family and type: AddressFamily.AF_UNIX, SocketKind.SOCK_STREAM)
    "ignore:unclosed event loop:ResourceWarning",
    r"ignore:unclosed <socket\.socket fd=\d+, family=(1|AddressFamily\.AF_UNIX), "
    r"type=(1|SocketKind\.SOCK_STREAM), proto=0>:ResourceWarning",
    # A socket left open by a tornado server's or client's test is closed by the garbage
    # collector whenever it runs, in whichever test runs then (on two workers, any test): the
    # warning would fail a test that did nothing wrong. Other unraisable warnings still fail.
    r"ignore:Exception ignored in. <socket\.socket fd=\d+, family=(2|AddressFamily\.AF_INET):"
    "pytest.PytestUnraisableExceptionWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The unit tests' warning filters (the other suites keep pytest's defaults)."""
    for item in items:
        if item.path.is_relative_to(UNIT):
            item.add_marker(pytest.mark.filterwarnings(*UNIT_WARNINGS))


@pytest.fixture(autouse=True)
def real_sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[RealSleeps]:
    """Fail a unit test that sleeps for real longer than ``tests.support.clock.SLEEP_LIMIT``:
    such a test either waits for nothing or bets on a quiet machine."""
    watch = RealSleeps()
    monkeypatch.setattr(time, "sleep", watch.sleep)
    monkeypatch.setattr(asyncio, "sleep", watch.async_sleep)
    yield watch
    failure = watch.failure()
    if failure:
        pytest.fail(failure, pytrace=False)


@pytest.fixture
def sim_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh simulation state directory, also seen by child processes."""
    directory = tmp_path / "sim"
    monkeypatch.setenv(ENV_DIR, str(directory))
    return directory


@pytest.fixture(autouse=True)
def _bindings_as_new() -> Iterator[None]:
    """Leave nvidia-ml-py as a fresh process has it: no fake installed, no cached functions."""
    yield
    fake_nvml.uninstall()


class Holder:
    """A separate process holding simulated GPU memory until stopped."""

    def __init__(self, size: str, device: str) -> None:
        code = (
            "import sys; from jupyter_gpuaas.gpu import simulate; "
            f"simulate.hold({size!r}, device={device!r}); print('held', flush=True); "
            "sys.stdin.read()"
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "held"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stop(self) -> None:
        """Close its input (its cue to exit), wait for it and close its output: stopped twice,
        nothing happens the second time."""
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture
def holder(sim_dir: Path) -> Iterator[Callable[[str, str], Holder]]:
    started: list[Holder] = []

    def start(size: str, device: str) -> Holder:
        started.append(Holder(size, device))
        return started[-1]

    yield start
    for h in started:
        h.stop()

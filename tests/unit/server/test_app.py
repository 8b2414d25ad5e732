"""The server extension's configuration (jupyter_gpuaas.server.app): every option documented with
its default and a config line, the bounds it refuses, the kernel-state settings it hands on, and
which GPU reader it builds for each ``gpu_source``. The extension loaded in a real Jupyter server
is tests/real_server's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from traitlets import TraitError

from jupyter_gpuaas.gpu.spec import DEFAULT_SIMULATED_DEVICES
from jupyter_gpuaas.server.app import GPUaaS
from jupyter_gpuaas.server.kernel_requests import KernelStateSettings

OPTIONS = sorted(GPUaaS.class_own_traits(config=True))


def test_the_extension_has_its_options() -> None:
    assert "gpu_source" in OPTIONS
    assert "kernel_state_on_reclaim" in OPTIONS
    assert len(OPTIONS) >= 15


@pytest.mark.parametrize("name", OPTIONS)
def test_each_option_says_its_default_and_how_to_set_it(name: str) -> None:
    help_text = GPUaaS.class_traits()[name].help
    assert re.search(r"\bdefault\b", help_text, re.IGNORECASE), name  # "Default: x", "(default)"
    assert re.search(rf"Example: c\.GPUaaS\.{name} = \S", help_text), name


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("sample_ttl", -1.0),
        ("busy_utilization_percent", 101),
        ("busy_utilization_percent", -1),
        ("queue_timeout", 0.0),
        ("activity_report_interval", -5.0),
        ("kernel_state_max_bytes", -1),
        ("kernel_state_timeout", 0.5),
        ("kernel_state_restore_timeout", 0.0),
        ("gpu_source", "cuda"),
        ("simulated_driver", "999"),
    ],
)
def test_a_value_out_of_bounds_is_refused(option: str, value: Any) -> None:
    app = GPUaaS()
    with pytest.raises(TraitError):
        setattr(app, option, value)


def test_a_bad_device_spec_is_refused_naming_the_option() -> None:
    app = GPUaaS()
    with pytest.raises(TraitError, match=r"^GPUaaS\.simulated_devices: "):
        app.simulated_devices = "2xNOPE"
    assert app.simulated_devices == DEFAULT_SIMULATED_DEVICES


@pytest.mark.parametrize(
    "spec", ["1xL4-24GB", "4xA100-80GB,1xL4-24GB:other=6GiB", [{"model": "H100-80GB", "count": 2}]]
)
def test_a_device_spec_as_text_or_as_a_list_is_taken(spec: Any) -> None:
    app = GPUaaS()
    app.simulated_devices = spec
    assert app.simulated_devices == spec


def test_the_command_line_sets_the_options() -> None:
    app = GPUaaS()
    app.parse_command_line(["--GPUaaS.gpu_source=simulated", "--GPUaaS.sample_ttl=2.5"])
    assert (app.gpu_source, app.sample_ttl) == ("simulated", 2.5)


def test_the_kernel_state_settings_are_the_options_and_default_alike() -> None:
    assert GPUaaS().kernel_state_settings() == KernelStateSettings()
    app = GPUaaS()
    app.kernel_state_dir = "~/state"
    app.kernel_state_max_bytes = 1000
    app.kernel_state_reserve = 10
    app.kernel_state_timeout = 5.0
    app.kernel_state_restore_timeout = 9.0
    assert app.kernel_state_settings() == KernelStateSettings(
        directory="~/state", max_bytes=1000, reserve_bytes=10, timeout=5.0, restore_timeout=9.0
    )


@pytest.mark.parametrize(("source", "expect_gpu"), [("auto", False), ("nvml", True)])
def test_the_driver_is_read_with_the_shared_devices_and_whether_a_gpu_must_be_there(
    source: str, expect_gpu: bool
) -> None:
    app = GPUaaS()
    app.gpu_source = source
    app.shared_devices = ["0", "1:2"]
    reader = app._reader()
    assert (reader.source, reader.expect_gpu, reader.simulated) == ("nvml", expect_gpu, None)
    assert reader.shared == frozenset({"0", "1:2"})


def test_simulated_gpus_are_the_spec_with_the_simulated_shared_devices(sim_dir: Path) -> None:
    app = GPUaaS()
    app.gpu_source = "simulated"
    app.simulated_devices = "3xL4-24GB"
    app.simulated_shared = ["all"]
    app.shared_devices = ["0"]  # the real driver's: not the simulation's
    reader = app._reader()
    assert reader.source == "simulated"
    assert reader.simulated is not None
    assert len(reader.simulated.gpus) == 3
    assert reader.shared == frozenset({"all"})


async def test_an_extension_that_never_loaded_stops_quietly() -> None:
    app = GPUaaS()
    assert not hasattr(app, "state")
    await app.stop_extension()

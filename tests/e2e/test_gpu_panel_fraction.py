"""The GPU panel on a HAMi fraction: the cap as the container sees it and where it comes from,
each kernel's use against the cap, and the warning as a kernel nears it.

The server runs with the environment HAMi's device plugin gives a container that asked for
``nvidia.com/gpumem: 6144`` and ``nvidia.com/gpucores: 25``; the fake NVML then answers as
HAMi-core does inside such a container."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.lab import Lab, start_lab
from tests.support.lab_page import (
    ONE_REFRESH_MS,
    PANEL,
    execute_in_kernel,
    expect,
    kernel_row,
    open_and_run_notebook,
    open_panel,
)

pytestmark = pytest.mark.e2e

GIB = 1024**3
HAMI_ENV = {
    "CUDA_DEVICE_MEMORY_LIMIT_0": "6144m",
    "CUDA_DEVICE_SM_LIMIT": "25",
    "CUDA_DEVICE_MEMORY_SHARED_CACHE": "/tmp/gpuaas-e2e-vgpu.cache",
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab on one L4 (24 GB) of which HAMi gives this container 6 GiB."""
    config = {"simulated_devices": "1xL4-24GB", "simulated_shared": []}
    with start_lab(tmp_path_factory.mktemp("lab-fraction"), config, env=HAMI_ENV) as server:
        yield server


def _notebook(source: str) -> dict[str, Any]:
    return {
        "cells": [
            {
                "cell_type": "code",
                "execution_count": None,
                "id": "gpu-cell",
                "metadata": {},
                "outputs": [],
                "source": source,
            }
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def _wait_usage(lab: Lab, kernel_id: str, size: int) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        usage: dict[str, Any] = lab.api("GET", "gpuaas/api/usage")
        kernel: dict[str, Any] = next(
            (k for k in usage["kernels"] if k["kernel_id"] == kernel_id), {}
        )
        if kernel.get("gpu_memory") == size:
            return usage
        assert time.monotonic() < deadline, f"the server reports {kernel}"
        time.sleep(0.2)


def test_fraction_cap_per_kernel_use_and_near_cap_warning(lab: Lab, page: Any) -> None:
    (lab.root / "small.ipynb").write_text(
        json.dumps(
            _notebook(
                "from jupyter_gpuaas.gpu.simulate import hold\n"
                'h = hold("1GiB")\nprint("held-small")'
            )
        )
    )
    opened = open_and_run_notebook(page, "small.ipynb")
    output = page.locator(f"#{opened['widgetId']} .jp-OutputArea-output")
    expect()(output.filter(has_text="held-small")).to_be_visible(timeout=60_000)

    # The server: the device is the cap, with its source, and marked shared (compute is).
    usage = _wait_usage(lab, opened["kernelId"], GIB)
    (device,) = usage["devices"]
    assert (device["memory_total"], device["memory_used"], device["shared"]) == (
        6 * GIB,
        GIB,
        True,
    )
    assert device["cap"] == {
        "memory": 6 * GIB,
        "source": "CUDA_DEVICE_MEMORY_LIMIT_0",
        "enforced_by": "HAMi",
        "cores_percent": 25,
    }

    # The panel: the cap and where it comes from, a fraction tag, the kernel against the cap.
    panel = open_panel(page)
    cap = panel.locator(".jp-gpuaas-device .jp-gpuaas-cap")
    expect()(cap).to_have_text(
        "cap 6.0 GiB from HAMi (CUDA_DEVICE_MEMORY_LIMIT_0) · 25% of the GPU's compute",
        timeout=ONE_REFRESH_MS,
    )
    expect()(panel.locator(".jp-gpuaas-tag.jp-mod-fraction")).to_have_text("fraction")
    expect()(panel.locator(".jp-gpuaas-tag.jp-mod-shared")).to_have_count(0)
    expect()(panel.locator(".jp-gpuaas-device .jp-gpuaas-memory")).to_have_text("1.0 GiB / 6.0 GiB")
    row = kernel_row(page, "small.ipynb")
    item = row.locator(".jp-gpuaas-bydevice-item")
    expect()(item.locator(".jp-gpuaas-figure")).to_have_text("1.0 GiB of 6.0 GiB cap")
    expect()(item).not_to_have_class("jp-gpuaas-bydevice-item jp-mod-near-cap")
    expect()(panel.locator(".jp-gpuaas-cap-warning")).to_have_count(0)
    # No standing "possibly other users" note: a fraction's used memory is this pod's.
    expect()(panel.locator(".jp-gpuaas-other-item")).to_have_count(0)

    # The kernel takes 4.6 GiB more: 5.6 of 6 GiB is past 90% of the cap.
    execute_in_kernel(page, opened["widgetId"], "h2 = hold(int(4.6 * 1024**3))")
    _wait_usage(lab, opened["kernelId"], GIB + int(4.6 * GIB))
    warning = panel.locator(".jp-gpuaas-cap-warning")
    expect()(warning).to_have_count(1, timeout=ONE_REFRESH_MS)
    expect()(warning).to_have_attribute("data-kernel-id", opened["kernelId"])
    expect()(warning).to_have_class("jp-gpuaas-cap-warning jp-mod-near")
    expect()(warning).to_have_text(
        "small.ipynb: 5.6 GiB of its 6.0 GiB cap, near the cap: an allocation beyond it fails "
        'with "out of memory".'
    )
    expect()(page.locator(f"{PANEL} .jp-gpuaas-cap-warnings")).to_have_attribute("role", "alert")
    expect()(item).to_have_class("jp-gpuaas-bydevice-item jp-mod-near-cap")
    expect()(item.locator(".jp-gpuaas-figure")).to_have_text("5.6 GiB of 6.0 GiB cap")

    # Released again: the warning goes.
    execute_in_kernel(page, opened["widgetId"], "h2.release()")
    expect()(warning).to_have_count(0, timeout=ONE_REFRESH_MS * 3)

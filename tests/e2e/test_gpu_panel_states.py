"""The GPU panel where NVML is unavailable: the reason, and the empty state."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.lab import Lab
from tests.support.lab_page import ONE_REFRESH_MS, expect, open_panel

pytestmark = pytest.mark.e2e

# The simulated driver fails nvmlInit as a machine without the NVIDIA driver does.
GPUAAS_CONFIG = {"simulated_driver": "no_driver"}


def test_unavailable_source_and_empty_state(lab: Lab, page: Any) -> None:
    usage = lab.api("GET", "gpuaas/api/usage")
    assert usage["source"] == "unavailable", usage
    assert usage["devices"] == []
    panel = open_panel(page)
    source = panel.locator(".jp-gpuaas-source")
    expect()(source).to_have_attribute("data-source", "unavailable", timeout=ONE_REFRESH_MS)
    expect()(source).to_have_text(f"unavailable: {usage['error']}")
    expect()(panel.locator(".jp-gpuaas-empty")).to_contain_text("No GPU visible to this server")
    # No sections of figures that do not exist, and no Queue section outside JupyterHub.
    expect()(panel.locator(".jp-gpuaas-section:visible")).to_have_count(0)
    expect()(panel.locator(".jp-gpuaas-error-note")).to_be_hidden()

"""The GPU sidebar panel in a real JupyterLab, with simulated GPUs, in headless Chromium.

One JupyterLab and one page serve the whole module; each test opens the notebooks it uses
(tests/e2e/conftest.py's ``notebooks``) and puts back what it changes, so that the tests pass in
any order.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from typing import Any, cast

import pytest

from tests.support.lab import REFRESH_S, Lab
from tests.support.lab_page import (
    ONE_REFRESH_MS,
    PANEL,
    PANEL_TAB,
    USAGE_URL,
    activate,
    close_main_area_widgets,
    colors,
    command,
    contrast,
    execute_in_kernel,
    expect,
    kernel_row,
    open_panel,
    rgb,
    run_on,
    screenshot,
    set_theme,
    wait_for_panel_background_change,
)

pytestmark = pytest.mark.e2e

GIB = 1024**3


def _usage(lab: Lab) -> dict[str, Any]:
    usage: dict[str, Any] = lab.api("GET", "gpuaas/api/usage")
    return usage


def _gpu(usage: dict[str, Any], index: int) -> dict[str, Any]:
    return next(d for d in usage["devices"] if d["index"] == index and d["parent_uuid"] is None)


@pytest.fixture
def a_on_two_gpus(page: Any, notebooks: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The two notebooks, with A holding 1 GiB more on GPU 1: 2 GiB on GPU 0, 1 GiB on GPU 1."""
    open_panel(page)
    total_a = kernel_row(page, "a.ipynb").locator(".jp-gpuaas-kernel-total")
    expect()(total_a).to_have_text("2.0 GiB", timeout=ONE_REFRESH_MS)
    execute_in_kernel(page, notebooks["a.ipynb"]["widgetId"], 'h2 = hold("1GiB", device=1)')
    expect()(total_a).to_have_text("3.0 GiB", timeout=ONE_REFRESH_MS)
    return notebooks


def test_panel_is_in_the_left_sidebar(page: Any) -> None:
    tab = page.locator(PANEL_TAB)
    expect()(tab).to_have_count(1)
    expect()(tab).to_have_attribute("title", re.compile("GPU"))
    panel = open_panel(page)
    expect()(panel.locator("h2")).to_have_text("GPU")
    expect()(panel.locator(".jp-gpuaas-source")).to_have_text("simulated")
    # conftest's simulated devices: two H100 80GB, and an A100 40GB with seven MIG devices.
    expect()(panel.locator(".jp-gpuaas-section-devices h3")).to_have_text("Devices")
    whole = panel.locator(".jp-gpuaas-devices > .jp-gpuaas-device:not(.jp-mod-mig)")
    expect()(whole).to_have_count(3)
    expect()(panel.locator(".jp-gpuaas-mig > .jp-gpuaas-device.jp-mod-mig")).to_have_count(7)
    bar = panel.locator(".jp-gpuaas-device .jp-gpuaas-bar[role=meter]").first
    expect()(bar).to_have_attribute("aria-valuemax", "100")
    # Nothing is held on the MIG devices: their list is folded, and opens on demand.
    group = panel.locator(".jp-gpuaas-mig-group")
    expect()(group.locator("summary")).to_contain_text("7 MIG devices")
    expect()(group.locator(".jp-gpuaas-mig")).to_be_hidden()
    group.locator("summary").click()
    first_mig = group.locator(".jp-gpuaas-mig .jp-gpuaas-device").first
    expect()(first_mig).to_contain_text("MIG 1g.5gb")
    expect()(first_mig).to_contain_text("0 B / 5.0 GiB")
    expect()(first_mig.locator(".jp-gpuaas-uuid")).to_have_text(re.compile(r"^MIG-\w{8}…$"))
    group.locator("summary").click()
    expect()(group.locator(".jp-gpuaas-mig")).to_be_hidden()
    # GPU 1 is time-shared with other pods, and labelled so.
    expect()(panel.locator(".jp-gpuaas-device .jp-gpuaas-tag.jp-mod-shared")).to_have_count(1)


def test_memory_per_notebook(lab: Lab, page: Any, notebooks: dict[str, dict[str, str]]) -> None:
    open_panel(page)
    # What the server says (its sample may be up to sample_ttl old)...
    deadline = time.monotonic() + 10
    while True:
        usage = _usage(lab)
        kernels = {k["kernel_id"]: k for k in usage["kernels"]}
        a = kernels.get(notebooks["a.ipynb"]["kernelId"], {})
        b = kernels.get(notebooks["b.ipynb"]["kernelId"], {})
        if (a.get("gpu_memory"), b.get("gpu_memory")) == (2 * GIB, 3 * GIB):
            break
        assert time.monotonic() < deadline, f"the server reports {a} and {b}"
        time.sleep(0.2)
    gpu1 = _gpu(usage, 1)
    assert b["by_device"] == {gpu1["uuid"]: 3 * GIB}

    # ...is what the panel shows, per notebook.
    row_a = kernel_row(page, "a.ipynb")
    row_b = kernel_row(page, "b.ipynb")
    total_a = row_a.locator(".jp-gpuaas-kernel-total")
    expect()(total_a).to_have_text("2.0 GiB", timeout=ONE_REFRESH_MS)
    total_b = row_b.locator(".jp-gpuaas-kernel-total")
    expect()(total_b).to_have_text("3.0 GiB", timeout=ONE_REFRESH_MS)
    expect()(row_a).to_have_attribute("data-kernel-id", notebooks["a.ipynb"]["kernelId"])
    expect()(row_a.locator(".jp-gpuaas-attribution")).to_have_text("exact by PID")
    expect()(row_b.locator(".jp-gpuaas-attribution")).to_have_text("exact by PID")

    # B's memory is on GPU 1, with a bar against GPU 1's 80 GiB.
    b_device = row_b.locator(".jp-gpuaas-bydevice-item")
    expect()(b_device).to_have_count(1)
    expect()(b_device).to_have_attribute("data-uuid", gpu1["uuid"])
    expect()(b_device).to_contain_text("GPU 1")
    expect()(b_device).to_contain_text("3.0 GiB / 80 GiB")
    bar = b_device.locator(".jp-gpuaas-bar")
    expect()(bar).to_have_attribute("role", "meter")
    expect()(bar).to_have_attribute("aria-valuenow", "4")  # 3 of 80 GiB
    expect()(bar).to_have_attribute("aria-label", re.compile("b.ipynb.*GPU 1"))

    # The device section adds up: GPU 1 shows B's 3 GiB and other pods' 6 GiB.
    gpu1_item = page.locator(f'{PANEL} .jp-gpuaas-device[data-uuid="{gpu1["uuid"]}"]')
    expect()(gpu1_item.locator(".jp-gpuaas-memory")).to_have_text("9.0 GiB / 80 GiB")
    expect()(gpu1_item.locator(".jp-gpuaas-uuid")).to_have_attribute("title", gpu1["uuid"])
    expect()(gpu1_item.locator(".jp-gpuaas-uuid")).to_have_text(re.compile(r"^GPU-\w{8}…$"))


def test_new_hold_shows_within_one_refresh(page: Any, notebooks: dict[str, dict[str, str]]) -> None:
    """Memory taken while the panel is open appears within one refresh, split by device."""
    open_panel(page)
    total_a = kernel_row(page, "a.ipynb").locator(".jp-gpuaas-kernel-total")
    expect()(total_a).to_have_text("2.0 GiB", timeout=ONE_REFRESH_MS)
    execute_in_kernel(page, notebooks["a.ipynb"]["widgetId"], 'h2 = hold("1GiB", device=1)')
    started = time.monotonic()
    expect()(total_a).to_have_text("3.0 GiB", timeout=ONE_REFRESH_MS)
    assert time.monotonic() - started <= ONE_REFRESH_MS / 1000
    items = kernel_row(page, "a.ipynb").locator(".jp-gpuaas-bydevice-item")
    expect()(items).to_have_count(2)
    expect()(items.nth(0)).to_contain_text("GPU 0")
    expect()(items.nth(0)).to_contain_text("2.0 GiB / 80 GiB")
    expect()(items.nth(1)).to_contain_text("GPU 1")
    expect()(items.nth(1)).to_contain_text("1.0 GiB / 80 GiB")


def test_other_memory_on_a_shared_gpu(
    lab: Lab, page: Any, a_on_two_gpus: dict[str, dict[str, str]]
) -> None:
    """Memory of no kernel here: on a time-shared GPU, only its total, said to be others'."""
    open_panel(page)
    usage = _usage(lab)
    gpu1 = _gpu(usage, 1)
    assert gpu1["shared"] is True
    assert usage["other_memory"][gpu1["uuid"]] == 6 * GIB
    section = page.locator(f"{PANEL} .jp-gpuaas-section-other")
    expect()(section.locator("h3")).to_have_text("Other memory")
    rows = section.locator(".jp-gpuaas-other-item")
    expect()(rows).to_have_count(1)
    expect()(rows).to_have_attribute("data-uuid", gpu1["uuid"])
    # The total and whose it may be; nothing else about those processes.
    expect()(rows).to_have_text("GPU 16.0 GiBother processes, possibly other users")
    # GPU 1's bar: A's 1 GiB and B's 3 GiB, then the other 6 GiB.
    gpu1_item = page.locator(f'{PANEL} .jp-gpuaas-device[data-uuid="{gpu1["uuid"]}"]')
    memory = gpu1_item.locator(".jp-gpuaas-memory")
    expect()(memory).to_have_text("10 GiB / 80 GiB", timeout=ONE_REFRESH_MS)
    bar = gpu1_item.locator(".jp-gpuaas-bar")
    expect()(bar).to_have_attribute("aria-valuenow", "13")  # 10 of 80 GiB
    expect()(bar.locator(".jp-gpuaas-bar-fill.jp-mod-kernels")).to_have_count(1)
    expect()(bar.locator(".jp-gpuaas-bar-fill.jp-mod-other")).to_have_count(1)
    # The README's screenshot: both notebooks, the devices and the other memory.
    screenshot(page, "sidebar.png")


# The page's own record of its usage requests (start times on its clock): Playwright delivers
# request events to the test late under load, which made a request sent before the sidebar hid
# look like one sent while hidden.
_RECORD_USAGE_REQUESTS = """() => {
    window.__gpuaasUsage = [];
    window.__gpuaasObserver?.disconnect();
    window.__gpuaasObserver = new PerformanceObserver(list => {
        for (const e of list.getEntries()) {
            if (e.name.includes('/gpuaas/api/usage')) window.__gpuaasUsage.push(e.startTime);
        }
    });
    window.__gpuaasObserver.observe({type: 'resource'});
    performance.clearResourceTimings();
}"""


def usage_requests_since(page: Any, t: float) -> list[float]:
    """Start times (page clock, ms) of the usage requests the page sent after ``t``."""
    return cast("list[float]", page.evaluate(f"() => window.__gpuaasUsage.filter(s => s > {t})"))


def test_polling_stops_while_hidden(page: Any) -> None:
    open_panel(page)
    page.evaluate(_RECORD_USAGE_REQUESTS)
    try:
        # Polls while visible...
        page.wait_for_function("() => window.__gpuaasUsage.length > 0", timeout=ONE_REFRESH_MS)
        # ...not while the sidebar is collapsed (clicking the current tab collapses it).
        page.locator(PANEL_TAB).click()
        expect()(page.locator(PANEL)).to_be_hidden()
        hidden_at = page.evaluate("() => performance.now()")
        page.wait_for_timeout(REFRESH_S * 2.5 * 1000)  # waiting for nothing to happen
        assert usage_requests_since(page, hidden_at) == [], "the panel polled while hidden"
        # Shown again, it refreshes at once, not at its next tick.
        clicked_at = page.evaluate("() => performance.now()")
        page.locator(PANEL_TAB).click()
        expect()(page.locator(PANEL)).to_be_visible()
        page.wait_for_function(
            f"() => window.__gpuaasUsage.some(s => s > {clicked_at})", timeout=ONE_REFRESH_MS
        )
        first = min(usage_requests_since(page, clicked_at))
        assert first - clicked_at < REFRESH_S * 1000, f"refreshed {first - clicked_at:.0f} ms after"
    finally:
        page.evaluate("() => window.__gpuaasObserver?.disconnect()")


def test_a_failed_refresh_keeps_the_figures(
    page: Any, a_on_two_gpus: dict[str, dict[str, str]]
) -> None:
    """While the server fails, the last figures stay with a note; they refresh after."""
    panel = open_panel(page)
    note = panel.locator(".jp-gpuaas-error-note")
    expect()(note).to_be_hidden()
    # The browser answers the panel's requests with an error in the server's place.
    page.route(
        USAGE_URL,
        lambda route: route.fulfill(
            status=500,
            content_type="application/json",
            body=json.dumps({"message": "Internal Server Error"}),
        ),
    )
    try:
        expect()(note).to_be_visible(timeout=ONE_REFRESH_MS)
        expect()(note).to_contain_text("Could not refresh")
        expect()(note).to_contain_text("retrying")
        expect()(kernel_row(page, "a.ipynb")).to_contain_text("3.0 GiB")
        expect()(kernel_row(page, "b.ipynb")).to_contain_text("3.0 GiB")
    finally:
        page.unroute(USAGE_URL)
    # Hiding and showing the panel refreshes at once, rather than after the backoff.
    page.locator(PANEL_TAB).click()
    page.locator(PANEL_TAB).click()
    expect()(note).to_be_hidden(timeout=ONE_REFRESH_MS)


def test_driver_without_sizes_in_a_pod(
    lab: Lab, page: Any, a_on_two_gpus: dict[str, dict[str, str]]
) -> None:
    """Drivers 535.113-560 in a PID namespace list a kernel's processes without their size."""
    panel = open_panel(page)
    row_a = kernel_row(page, "a.ipynb")
    row_b = kernel_row(page, "b.ipynb")
    widget_b = a_on_two_gpus["b.ipynb"]["widgetId"]
    execute_in_kernel(
        page, widget_b, 'from jupyter_gpuaas.gpu import simulate; simulate.set_driver("535.113")'
    )
    try:
        for row in (row_a, row_b):
            attribution = row.locator(".jp-gpuaas-attribution")
            expect()(attribution).to_have_text(
                "using the GPU, size unknown", timeout=ONE_REFRESH_MS
            )
            expect()(row.locator(".jp-gpuaas-kernel-total")).to_have_text("size unknown")
        b_device = row_b.locator(".jp-gpuaas-bydevice-item")
        expect()(b_device).to_contain_text("GPU 1")
        expect()(b_device).to_contain_text("size unknown")
        expect()(b_device.locator(".jp-gpuaas-bar")).to_have_count(0)
        usage = _usage(lab)
        unknown = [uuid for uuid, other in usage["other_memory"].items() if other is None]
        assert unknown, usage["other_memory"]
        other = panel.locator(f'.jp-gpuaas-other-item[data-uuid="{unknown[0]}"]')
        expect()(other.locator(".jp-gpuaas-figure")).to_have_text("unknown")
    finally:
        execute_in_kernel(page, widget_b, "simulate.reset_driver()")
    expect()(row_a.locator(".jp-gpuaas-attribution")).to_have_text(
        "exact by PID", timeout=ONE_REFRESH_MS
    )
    expect()(row_a.locator(".jp-gpuaas-kernel-total")).to_have_text("3.0 GiB")


def test_a_lost_gpu_is_reported_with_the_rest(
    lab: Lab, page: Any, notebooks: dict[str, dict[str, str]]
) -> None:
    """A GPU that fails ("GPU is lost"): the other figures stay, with the reason."""
    panel = open_panel(page)
    widget_b = notebooks["b.ipynb"]["widgetId"]
    partial = panel.locator(".jp-gpuaas-partial")
    expect()(partial).to_be_hidden()
    execute_in_kernel(
        page, widget_b, "from jupyter_gpuaas.gpu import simulate; simulate.set_driver(lost=[0])"
    )
    try:
        expect()(partial).to_be_visible(timeout=ONE_REFRESH_MS)
        usage = _usage(lab)
        assert usage["source"] == "simulated"
        assert usage["error"], usage
        expect()(partial).to_contain_text("Some figures could not be read")
        expect()(partial).to_contain_text(usage["error"])
        expect()(panel.locator(".jp-gpuaas-source")).to_have_text("simulated")
        expect()(kernel_row(page, "b.ipynb").locator(".jp-gpuaas-kernel-total")).to_have_text(
            "3.0 GiB"
        )
    finally:
        execute_in_kernel(page, widget_b, "simulate.reset_driver()")
    expect()(partial).to_be_hidden(timeout=ONE_REFRESH_MS)


def test_refresh_interval_setting_applies_live(page: Any) -> None:
    """The refresh interval is in the Settings Editor, and a change applies without reload."""
    open_panel(page)
    command(page, "settingeditor:open", {"query": "GPU"})
    page.locator(".jp-PluginList-entry", has_text="GPU").first.click()
    field = page.locator('input[id$="refreshInterval"]')
    expect()(field).to_be_visible(timeout=20_000)
    expect()(field).to_have_value("2")

    times: list[float] = []

    def on_request(request: Any) -> None:
        if USAGE_URL.search(request.url):
            times.append(time.monotonic())

    field.fill("0.5")
    field.press("Tab")
    page.on("request", on_request)
    try:
        open_panel(page)  # the settings editor stays open in the main area
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            page.wait_for_timeout(250)
            if len([t for t in times if t > time.monotonic() - 3]) >= 5:
                break
        recent = [t for t in times if t > time.monotonic() - 3.5]
        gaps = [b - a for a, b in itertools.pairwise(recent)]
        assert len(gaps) >= 3, f"too few requests after the change: {gaps}"
        assert sorted(gaps)[len(gaps) // 2] < 1.2, f"not every 0.5 s after the change: {gaps}"
    finally:
        page.remove_listener("request", on_request)
        # Back to the default, through the same form, and close the editor.
        command(page, "settingeditor:open", {"query": "GPU"})
        field.fill("2")
        field.press("Tab")
        expect()(field).to_have_value("2")
        close_main_area_widgets(page, "setting")


def test_a_row_opens_its_notebook(page: Any, notebooks: dict[str, dict[str, str]]) -> None:
    open_panel(page)
    activate(page, notebooks["a.ipynb"]["widgetId"])
    current = page.locator("#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current")
    expect()(current).to_contain_text("a.ipynb")
    kernel_row(page, "b.ipynb").locator("button.jp-gpuaas-kernel-name").click()
    expect()(current).to_contain_text("b.ipynb")


def test_dark_theme(page: Any, notebooks: dict[str, dict[str, str]]) -> None:
    open_panel(page)
    expect()(kernel_row(page, "b.ipynb")).to_have_count(1, timeout=ONE_REFRESH_MS)
    light = colors(page)
    try:
        set_theme(page, "JupyterLab Dark")
        wait_for_panel_background_change(page, light["background"])
        dark = colors(page)
        screenshot(page, "sidebar-dark.png")
    finally:
        set_theme(page, "JupyterLab Light")

    for key in ("background", "text", "name", "bar"):
        assert light[key] != dark[key], f"{key} is {light[key]} in both themes"
    assert sum(rgb(dark["background"])) < sum(rgb(light["background"]))
    for theme, theme_colors in (("light", light), ("dark", dark)):
        background = theme_colors["background"]
        for key in ("text", "name"):
            ratio = contrast(theme_colors[key], background)
            assert ratio >= 7, f"{key} on background in the {theme} theme: contrast {ratio:.1f}"
        ratio = contrast(theme_colors["meta"], background)
        assert ratio >= 4.5, f"secondary text in the {theme} theme: contrast {ratio:.1f}"
        ratio = contrast(theme_colors["fill"], theme_colors["bar"])
        assert ratio >= 1.5, f"bar fill against its track in the {theme} theme: {ratio:.1f}"


def test_shutting_a_kernel_removes_its_row(
    lab: Lab, page: Any, notebooks: dict[str, dict[str, str]]
) -> None:
    open_panel(page)
    row_a = kernel_row(page, "a.ipynb")
    row_b = kernel_row(page, "b.ipynb")
    expect()(row_a).to_have_count(1, timeout=ONE_REFRESH_MS)
    # Kernel > Shut Down Kernel, on notebook A.
    run_on(page, notebooks["a.ipynb"]["widgetId"], "kernelmenu:shutdown")
    expect()(row_a).to_have_count(0, timeout=ONE_REFRESH_MS)
    expect()(row_b).to_have_count(1)
    kernel_ids = {k["kernel_id"] for k in _usage(lab)["kernels"]}
    assert notebooks["a.ipynb"]["kernelId"] not in kernel_ids

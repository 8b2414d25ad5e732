"""What the browser tests do in a JupyterLab page: JupyterLab's own commands, the GPU panel."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, cast

from tests.support.lab import REFRESH_S, REPO, SAMPLE_TTL_S

SCREENSHOTS = REPO / "build" / "screenshots"
"""Where the browser tests' screenshots go on an ordinary run (ignored by git)."""


def docs_image(name: str) -> Path:
    """The path of a screenshot that illustrates the docs (``name`` below ``docs/``): under
    build/screenshots/ on an ordinary run, so that tests never change tracked files; the docs'
    own file when ``make screenshots`` refreshes them on purpose (GPUAAS_DOCS_SCREENSHOTS=1)."""
    base = REPO / "docs" if os.environ.get("GPUAAS_DOCS_SCREENSHOTS") == "1" else SCREENSHOTS
    path = base / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


PANEL = "#jupyter-gpuaas-panel"
PANEL_TAB = '.jp-SideBar [data-id="jupyter-gpuaas-panel"]'
USAGE_URL = re.compile(r"/gpuaas/api/usage")
# "Within one refresh": the panel's interval, the server's sample cache, and slack for a
# loaded two-core machine (rendering, a request in flight). Never a blind sleep: the
# expectations poll the DOM until they hold or this runs out.
ONE_REFRESH_MS = int((REFRESH_S + SAMPLE_TTL_S + 2.5) * 1000)

_EXECUTE = "([id, args]) => window.jupyterapp.commands.execute(id, args).then(() => null)"

_OPEN_AND_RUN = """async (path) => {
    const app = window.jupyterapp;
    const widget = await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
    await widget.context.ready;
    await widget.sessionContext.ready;
    const kernel = widget.sessionContext.session.kernel;
    await kernel.info;
    app.shell.activateById(widget.id);
    while (app.shell.currentWidget?.id !== widget.id) {
        await new Promise(resolve => setTimeout(resolve, 50));
    }
    await app.commands.execute('notebook:run-all-cells');
    return { widgetId: widget.id, kernelId: kernel.id };
}"""

_EXECUTE_IN_KERNEL = """async ([widgetId, code]) => {
    const app = window.jupyterapp;
    const widget = [...app.shell.widgets('main')].find(w => w.id === widgetId);
    await widget.sessionContext.session.kernel.requestExecute({ code }).done;
}"""

_SHUT_DOWN_AND_CLOSE = """async (widgetId) => {
    const widget = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === widgetId);
    if (widget === undefined) { return; }
    await widget.sessionContext.shutdown();
    widget.dispose();
}"""

_ACTIVATE = """async (widgetId) => {
    const app = window.jupyterapp;
    app.shell.activateById(widgetId);
    while (app.shell.currentWidget?.id !== widgetId) {
        await new Promise(resolve => setTimeout(resolve, 50));
    }
}"""

_CLOSE_MAIN_AREA_WIDGETS = """(part) => {
    for (const widget of [...window.jupyterapp.shell.widgets('main')]) {
        if (widget.id.includes(part)) { widget.close(); }
    }
}"""

_COLORS = """() => {
    const style = (selector) => getComputedStyle(document.querySelector(selector));
    const panel = '#jupyter-gpuaas-panel';
    return {
        background: style(panel).backgroundColor,
        text: style(panel).color,
        name: style(`${panel} .jp-gpuaas-kernel-name`).color,
        meta: style(`${panel} .jp-gpuaas-meta`).color,
        bar: style(`${panel} .jp-gpuaas-bar`).backgroundColor,
        fill: style(`${panel} .jp-gpuaas-bar-fill`).backgroundColor,
    };
}"""

_BACKGROUND_CHANGED = """(before) =>
    getComputedStyle(document.querySelector('#jupyter-gpuaas-panel')).backgroundColor !== before"""


def expect() -> Any:
    """Playwright's `expect`, imported when a test runs (collection needs no browser)."""
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect


def command(page: Any, command_id: str, args: dict[str, Any] | None = None) -> None:
    """Run one of JupyterLab's commands, as a menu item or the palette would."""
    page.evaluate(_EXECUTE, [command_id, args or {}])


def open_and_run_notebook(page: Any, path: str) -> dict[str, str]:
    """Open a notebook, wait for its kernel, run all its cells; return widget and kernel ids."""
    return cast("dict[str, str]", page.evaluate(_OPEN_AND_RUN, path))


def write_notebook(path: Path, source: str) -> None:
    """Write a notebook of one code cell (``source``) on the python3 kernel."""
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": None,
        "id": "gpu-cell",
        "metadata": {},
        "outputs": [],
        "source": source,
    }
    notebook = {
        "cells": [cell],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook))


def run_until_printed(page: Any, path: str, printed: str) -> dict[str, str]:
    """Open and run a notebook, and wait until its output shows ``printed``; return its widget
    and kernel ids."""
    opened = open_and_run_notebook(page, path)
    output = page.locator(f"#{opened['widgetId']} .jp-OutputArea-output")
    expect()(output.filter(has_text=printed)).to_be_visible(timeout=60_000)
    return opened


def execute_in_kernel(page: Any, widget_id: str, code: str) -> None:
    """Run code in the kernel of an open notebook (not as a cell)."""
    page.evaluate(_EXECUTE_IN_KERNEL, [widget_id, code])


def shut_down_and_close(page: Any, widget_id: str) -> None:
    """Shut an open notebook's kernel down (if it still runs) and close the notebook, unsaved."""
    page.evaluate(_SHUT_DOWN_AND_CLOSE, widget_id)


def activate(page: Any, widget_id: str) -> None:
    """Make a main-area widget the current one."""
    page.evaluate(_ACTIVATE, widget_id)


def run_on(page: Any, widget_id: str, command_id: str) -> None:
    """Make a main-area widget the current one, then run a command on it."""
    activate(page, widget_id)
    command(page, command_id)


def close_main_area_widgets(page: Any, id_part: str) -> None:
    page.evaluate(_CLOSE_MAIN_AREA_WIDGETS, id_part)


def open_panel(page: Any) -> Any:
    """Show the GPU panel (click its sidebar tab unless it is showing); return it."""
    panel = page.locator(PANEL)
    if not panel.is_visible():
        page.locator(PANEL_TAB).click()
    expect()(panel).to_be_visible()
    return panel


def kernel_row(page: Any, path: str) -> Any:
    return page.locator(f'{PANEL} .jp-gpuaas-kernel[data-path="{path}"]')


def set_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab's theme and wait until it is applied."""
    light = "false" if "Dark" in theme else "true"
    command(page, "apputils:change-theme", {"theme": theme})
    expect()(page.locator("body")).to_have_attribute("data-jp-theme-light", light, timeout=20_000)
    # JupyterLab shows its splash screen while it loads a theme.
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=20_000)


def wait_for_panel_background_change(page: Any, before: str) -> None:
    page.wait_for_function(_BACKGROUND_CHANGED, arg=before)


def colors(page: Any) -> dict[str, str]:
    """Computed colours of the panel's background, texts and bars."""
    return cast("dict[str, str]", page.evaluate(_COLORS))


def screenshot(page: Any, name: str) -> Path:
    """Save a screenshot of the page for the README, without a focus ring or hover."""
    page.evaluate("() => document.activeElement?.blur()")
    page.mouse.move(900, 600)
    page.wait_for_timeout(300)  # let the last render settle into pixels
    path = docs_image(f"images/{name}")
    page.screenshot(path=str(path))
    return path


def rgb(css: str) -> tuple[float, float, float]:
    numbers = [float(n) for n in re.findall(r"[\d.]+", css)[:3]]
    assert len(numbers) == 3, css
    return numbers[0], numbers[1], numbers[2]


def contrast(foreground: str, background: str) -> float:
    """WCAG contrast ratio of two CSS rgb() colours."""

    def luminance(color: str) -> float:
        def channel(c: float) -> float:
            c /= 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b = (channel(c) for c in rgb(color))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)

"""A notebook's variables across a new kernel in a real JupyterLab (headless Chromium): the
user builds a DataFrame, a numpy array and a generator, saves the variables ("Save variables
now"), the kernel is shut down and the notebook closed, and when it opens again with a new
kernel the frame and the array are back before any cell runs, the generator is named as lost,
and the notebook itself is left unchanged (docs/kernel-state.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from tests.support.lab import Lab, start_lab
from tests.support.lab_page import (
    expect,
    run_on,
    run_until_printed,
    shut_down_and_close,
    write_notebook,
)

pytestmark = pytest.mark.e2e

TOAST = ".Toastify__toast"
BUILD = """\
import numpy as np
import pandas as pd
frame = pd.DataFrame({"gpu": ["h100", "l4", "a100"], "hours": [1.5, 2.0, 0.5]})
array = np.arange(12).reshape(3, 4)
batches = (i for i in range(3))
print("built")"""

_OPEN = """async (path) => {
    const app = window.jupyterapp;
    const widget = await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
    await widget.context.ready;
    await widget.sessionContext.ready;
    return { widgetId: widget.id, kernelId: widget.sessionContext.session.kernel.id };
}"""

_RUN_AND_READ = """async ([widgetId, code]) => {
    const widget = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === widgetId);
    const future = widget.sessionContext.session.kernel.requestExecute({ code });
    let out = '';
    future.onIOPub = msg => {
        const c = msg.content;
        if (msg.header.msg_type === 'stream') { out += c.text; }
        if (msg.header.msg_type === 'error') { out += `${c.ename}: ${c.evalue}`; }
    };
    await future.done;
    return out;
}"""

_CELLS = """(widgetId) => {
    const widget = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === widgetId);
    const cells = widget.content.model.cells;
    return Array.from({ length: cells.length }, (_, i) => {
        const cell = cells.get(i);
        return [cell.sharedModel.getSource(), cell.type === 'code' ? cell.outputs.length : 0];
    });
}"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """This module's JupyterLab, with a home of its own: the snapshots land there."""
    base = tmp_path_factory.mktemp("lab-kernel-state")
    home = base / "home"
    home.mkdir()
    with start_lab(base, env={"HOME": str(home)}) as server:
        yield server


SEEN: list[str] = []
"""This test's console lines and kernel-state requests, said when a notice does not come."""


@pytest.fixture(autouse=True)
def requests_seen(page: Any) -> Iterator[None]:
    SEEN.clear()
    started = time.monotonic()

    def seen(what: str) -> None:
        SEEN.append(f"{time.monotonic() - started:.1f} s {what}")

    def on_console(message: Any) -> None:
        seen(f"console: {message.text}")

    def on_request(request: Any) -> None:
        if "kernel-state" in request.url:
            seen(f"{request.method} {request.url.rsplit('/', 2)[-2:]}")

    def on_finished(request: Any) -> None:
        if "kernel-state" in request.url:
            seen(f"answered {request.url.rsplit('/', 2)[-2:]}")

    page.on("console", on_console)
    page.on("request", on_request)
    page.on("requestfinished", on_finished)
    yield
    page.remove_listener("console", on_console)
    page.remove_listener("request", on_request)
    page.remove_listener("requestfinished", on_finished)


@pytest.fixture(autouse=True)
def no_toasts_left(page: Any) -> Iterator[None]:
    """Each test's notifications are dismissed after it (the warnings stay until dismissed, and
    JupyterLab shows only a few toasts at once)."""
    yield
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:dismiss-notification')")
    try:
        expect()(page.locator(TOAST)).to_have_count(0, timeout=10_000)
    except AssertionError:
        left = page.locator(TOAST).all_inner_texts()
        raise AssertionError(
            f"notifications left after the test: {left}; the page: {SEEN}"
        ) from None


def wait_idle(lab: Lab, kernel_id: str) -> None:
    """Until the server has seen the kernel go idle (the page may see the output first)."""
    deadline = time.monotonic() + 30
    while lab.api("GET", f"api/kernels/{kernel_id}")["execution_state"] != "idle":
        assert time.monotonic() < deadline, "the kernel stayed busy"
        time.sleep(0.1)


def toast_or_explain(page: Any, lab: Lab, text: str, opened: dict[str, str], path: str) -> Any:
    """The notice with ``text``; where none comes, a failure that says what the kernel holds,
    what a restore says now, and the requests the page made."""
    try:
        return toast(page, text)
    except AssertionError:
        probe = "print(get_ipython().execution_count, sorted(globals()))"
        holds = page.evaluate(_RUN_AND_READ, [opened["widgetId"], probe])
        body = {"kernel_id": opened["kernelId"], "path": path}
        answer = lab.api("POST", "gpuaas/api/kernel-state/restore", body)
        raise AssertionError(
            f"no notice {text!r}; the kernel holds {holds}; a restore now: {answer}; "
            f"the page: {SEEN}"
        ) from None


def toast(page: Any, text: str) -> Any:
    found = page.locator(TOAST).filter(has_text=text)
    expect()(found).to_be_visible(timeout=60_000)
    return found


def test_the_frame_and_the_array_come_back_and_the_generator_is_named(lab: Lab, page: Any) -> None:
    write_notebook(lab.root / "state.ipynb", BUILD)
    first = run_until_printed(page, "state.ipynb", "built")
    wait_idle(lab, first["kernelId"])
    run_on(page, first["widgetId"], "jupyter-gpuaas:save-variables")
    saved = toast(page, "Variables of state.ipynb saved")
    expect()(saved).to_contain_text("except “batches” (a generator)")
    snapshots = list((lab.root.parent / "home" / ".jupyter-gpuaas" / "kernel-state").iterdir())
    assert {p.stat().st_mode & 0o777 for p in snapshots} == {0o600}
    shut_down_and_close(page, first["widgetId"])

    again = cast("dict[str, str]", page.evaluate(_OPEN, "state.ipynb"))
    assert again["kernelId"] != first["kernelId"]
    back = toast_or_explain(page, lab, "state.ipynb: its variables are back", again, "state.ipynb")
    expect()(back).to_contain_text("“array”")
    expect()(back).to_contain_text("“frame”")
    expect()(back).to_contain_text("except “batches” (a generator)")
    shown = page.evaluate(
        _RUN_AND_READ,
        [
            again["widgetId"],
            "print(frame.hours.sum(), int(array.sum()), array.shape, 'batches' in globals())",
        ],
    )
    assert shown.split() == ["4.0", "66", "(3,", "4)", "False"], shown
    # The notebook is as it was: its one cell, no output added (the notice is a notification).
    assert page.evaluate(_CELLS, again["widgetId"]) == [[BUILD, 0]]
    shut_down_and_close(page, again["widgetId"])


def test_a_damaged_snapshot_is_refused_and_said_so(lab: Lab, page: Any) -> None:
    write_notebook(lab.root / "damaged.ipynb", "secret = 42\nprint('built')")
    first = run_until_printed(page, "damaged.ipynb", "built")
    wait_idle(lab, first["kernelId"])
    saved = lab.api("POST", "gpuaas/api/kernel-state/snapshot", {"kernel_id": first["kernelId"]})
    assert saved["outcomes"][0]["outcome"] == "kept", saved
    shut_down_and_close(page, first["widgetId"])
    folder = lab.root.parent / "home" / ".jupyter-gpuaas" / "kernel-state"
    [data] = [
        p for p in folder.iterdir() if p.name.startswith("damaged.ipynb-") and p.suffix == ".data"
    ]
    content = bytearray(data.read_bytes())
    content[-1] ^= 0xFF
    Path(data).write_bytes(bytes(content))

    again = cast("dict[str, str]", page.evaluate(_OPEN, "damaged.ipynb"))
    refused = toast_or_explain(
        page, lab, "damaged.ipynb: the saved variables were not loaded", again, "damaged.ipynb"
    )
    expect()(refused).to_contain_text("checksum")
    shown = page.evaluate(_RUN_AND_READ, [again["widgetId"], "print('secret' in globals())"])
    assert shown.strip() == "False"
    shut_down_and_close(page, again["widgetId"])


_OPEN_AND_SHIFT_ENTER = """async (path) => {
    const app = window.jupyterapp;
    const widget = await app.commands.execute('docmanager:open', { path, factory: 'Notebook' });
    await widget.context.ready;
    await widget.sessionContext.ready;
    // Shift+Enter at once: the restore that opening the notebook started is under way.
    app.shell.activateById(widget.id);
    widget.content.activeCellIndex = 0;
    await app.commands.execute('notebook:run-cell-and-select-next');
    const cell = widget.content.model.cells.get(0);
    const outputs = [];
    for (let i = 0; i < cell.outputs.length; i++) {
        const o = cell.outputs.get(i).toJSON();
        outputs.push(o.text ?? `${o.ename}: ${o.evalue}`);
    }
    return {
        widgetId: widget.id,
        kernelId: widget.sessionContext.session.kernel.id,
        count: cell.executionCount,
        output: outputs.join('')
    };
}"""


def test_a_cell_run_as_the_notebook_opens_runs_and_the_variables_come_back(
    lab: Lab, page: Any
) -> None:
    """Issue 50.9: a Shift+Enter the moment a notebook opens. The restore is sent first, as a
    silent execute on the notebook's own kernel connection, and the kernel runs one
    connection's requests in order: the cell runs after it, with the variables. (Asked of the
    server on a connection of its own, the restore came second: the kernel had run a cell, the
    restore was skipped, and the variables never came back, without a word.)"""
    write_notebook(lab.root / "quick.ipynb", "kept = {'epochs': 3}\nprint('built')")
    first = run_until_printed(page, "quick.ipynb", "built")
    wait_idle(lab, first["kernelId"])
    run_on(page, first["widgetId"], "jupyter-gpuaas:save-variables")
    toast(page, "Variables of quick.ipynb saved")
    shut_down_and_close(page, first["widgetId"])
    write_notebook(
        lab.root / "quick.ipynb", "print('ran', sorted(k for k in globals() if k == 'kept'))"
    )

    ran = cast("dict[str, Any]", page.evaluate(_OPEN_AND_SHIFT_ENTER, "quick.ipynb"))
    SEEN.append(f"the cell: {ran}")
    assert ran["count"] is not None, f"the cell did not run: {ran}; the page: {SEEN}"
    # it ran after the restore, which was sent first on the same connection
    assert ran["output"] == "ran ['kept']\n", f"{ran}; the page: {SEEN}"
    toast_or_explain(page, lab, "quick.ipynb: its variables are back", ran, "quick.ipynb")
    shown = page.evaluate(_RUN_AND_READ, [ran["widgetId"], "print(kept['epochs'])"])
    assert shown.strip() == "3", shown
    shut_down_and_close(page, ran["widgetId"])


_RESTART = """async (widgetId) => {
    const widget = [...window.jupyterapp.shell.widgets('main')].find(w => w.id === widgetId);
    await widget.sessionContext.session.kernel.restart();
}"""


def test_a_restarted_kernel_starts_clean_until_the_user_restores(lab: Lab, page: Any) -> None:
    write_notebook(lab.root / "restart.ipynb", "kept = {'epochs': 3}\nprint('built')")
    opened = run_until_printed(page, "restart.ipynb", "built")
    wait_idle(lab, opened["kernelId"])
    run_on(page, opened["widgetId"], "jupyter-gpuaas:save-variables")
    toast(page, "Variables of restart.ipynb saved")

    page.evaluate(_RESTART, opened["widgetId"])
    check = "print('kept' in globals())"
    assert page.evaluate(_RUN_AND_READ, [opened["widgetId"], check]).strip() == "False"
    run_on(page, opened["widgetId"], "jupyter-gpuaas:restore-variables")
    toast(page, "restart.ipynb: its variables are back (“kept”)")
    shown = page.evaluate(_RUN_AND_READ, [opened["widgetId"], "print(kept['epochs'])"])
    assert shown.strip() == "3"
    shut_down_and_close(page, opened["widgetId"])


_SET_MODE = """async (mode) => {
    const settings = window.jupyterapp.serviceManager.settings;
    const current = await settings.fetch('jupyter-gpuaas:plugin');
    await settings.save('jupyter-gpuaas:plugin', JSON.stringify({ restoreVariables: mode }));
    return current.raw;
}"""


def test_the_ask_setting_asks_first_and_restores_on_the_answer(lab: Lab, page: Any) -> None:
    write_notebook(lab.root / "ask.ipynb", "answer = 42\nprint('built')")
    first = run_until_printed(page, "ask.ipynb", "built")
    wait_idle(lab, first["kernelId"])
    run_on(page, first["widgetId"], "jupyter-gpuaas:save-variables")
    toast(page, "Variables of ask.ipynb saved")
    shut_down_and_close(page, first["widgetId"])
    page.evaluate(_SET_MODE, "ask")
    # The plugin reads its settings as they change; reload so that the page starts with "ask".
    page.reload()
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    try:
        again = cast("dict[str, str]", page.evaluate(_OPEN, "ask.ipynb"))
        question = toast(page, "ask.ipynb has variables saved")
        expect()(question).to_contain_text("(“answer”). Restore them into this kernel?")
        check = "print('answer' in globals())"
        assert page.evaluate(_RUN_AND_READ, [again["widgetId"], check]).strip() == "False"
        question.get_by_role("button", name="Restore").click()
        toast(page, "ask.ipynb: its variables are back (“answer”)")
        shown = page.evaluate(_RUN_AND_READ, [again["widgetId"], "print(answer)"])
        assert shown.strip() == "42"
        shut_down_and_close(page, again["widgetId"])
    finally:
        page.evaluate(_SET_MODE, "automatic")

"""GPU jobs in a real JupyterLab, in Chromium (docs/jobs.md): the "Run as GPU job…" dialog with
the team's offerings and headroom; a first job (a notebook that sleeps) takes the test queue's
only slice, so the second waits behind it and the GPU jobs section shows its position
("queued · #1 in the queue"); cancelling the first from the section lets the second run, and
the section follows it to success; the finish notice, and opening the executed copy. The
dialog says where the typed parameters go: after the notebook's ``parameters`` cell, named by
its number, or, without one, in a new first cell that later cells may override. Then the same
in make demo's configuration (demo/jobs.py: its catalog, its ``demo`` queue, its sample
notebook), as carol of team B. Real cluster, hub, gpuaas service and node agent; each JupyterLab
holds a token with its user's server's scopes.

Screenshots: docs/images/jobs-dialog.png, docs/images/jobs-queued.png, docs/images/jobs-panel.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from demo.jobs import EXAMPLES, write_catalog
from devcluster.queue_hub import QueueHub, queue_hub
from devcluster.testing import Cluster
from tests.support.lab import Lab, browser, start_lab
from tests.support.lab_page import expect, open_panel, screenshot
from tests.support.notebook_jobs import (
    QUEUE_YAML,
    SLEEPER,
    WRITER,
    catalog_file,
    clear_notebook_jobs,
    run_kubectl,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture(scope="module")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[QueueHub]:
    run_kubectl(cluster, ["apply", "-f", "-"], stdin=QUEUE_YAML)
    clear_notebook_jobs(cluster)
    tmp = tmp_path_factory.mktemp("jobs")
    args = [f"--GPUaaSService.catalog_file={catalog_file(tmp)}"]
    with queue_hub(tmp / "hub", cluster.info.settings.state_dir, service_args=args) as qh:
        yield qh
    clear_notebook_jobs(cluster)
    # the queue goes too: a training queue outside the cohort, left behind, is what the
    # deployment checks of a later module on this lane's cluster rightly call wrong
    run_kubectl(cluster, ["delete", "--ignore-not-found", "-f", "-"], stdin=QUEUE_YAML)


@pytest.fixture(scope="module")
def lab(hub: QueueHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    env = {"JUPYTERHUB_API_TOKEN": hub.server_token("alice"), "GPUAAS_SERVICE_URL": hub.service_url}
    with start_lab(tmp_path_factory.mktemp("lab"), {"jobs_collect_interval": 2}, env=env) as server:
        (server.root / "writer.ipynb").write_text(json.dumps(WRITER))
        (server.root / "sleeper.ipynb").write_text(json.dumps(SLEEPER))
        yield server


@pytest.fixture(scope="module")
def page(browser: object, lab: Lab) -> Iterator[object]:
    context, page = open_page(browser, lab)
    yield page
    context.close()


NO_PARAMETERS_CELL = (
    'This notebook has no cell tagged "parameters": your values are set in a new first cell, '
    "and a later cell that sets the same name overrides them."
)


def open_page(browser: object, lab: Lab) -> tuple[Any, Any]:
    chromium: Any = browser
    context = chromium.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
    page = context.new_page()
    # JupyterLab's first load compiles nothing but fetches many files: slow on a loaded machine
    page.goto(f"{lab.url}lab?token={lab.token}", timeout=120_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    return context, page


def run_as_gpu_job(p: Any, path: str) -> Any:
    """Open the "Run as GPU job…" dialog for ``path`` (as the file browser's menu does)."""
    # not awaited: the command's promise ends with the dialog
    p.evaluate(
        "([id, args]) => { void window.jupyterapp.commands.execute(id, args); }",
        ["jupyter-gpuaas:run-as-gpu-job", {"path": path}],
    )
    dialog = p.locator(".jp-Dialog")
    expect()(dialog.locator(".jp-gpuaas-job-form")).to_be_visible(timeout=30_000)
    expect()(dialog.locator(".jp-gpuaas-job-offering")).to_have_value("local-mig-1g")
    expect()(dialog.locator(".jp-gpuaas-job-headroom")).not_to_be_empty()
    return dialog


def test_run_as_gpu_job_from_jupyterlab(page: object, lab: Lab) -> None:
    p: Any = page
    panel = open_panel(p)
    jobs = panel.locator(".jp-gpuaas-job")

    # the sleeper takes the queue's one slice; it has no parameters cell, and the dialog says so
    dialog = run_as_gpu_job(p, "sleeper.ipynb")
    expect()(dialog.locator(".jp-gpuaas-job-parameters-note")).to_have_text(NO_PARAMETERS_CELL)
    dialog.locator("button.jp-mod-accept").click()
    sleeper = jobs.filter(has_text="sleeper.ipynb")
    expect()(sleeper).to_have_attribute("data-state", "running", timeout=120_000)

    dialog = run_as_gpu_job(p, "writer.ipynb")
    expect()(dialog.locator(".jp-gpuaas-job-limit")).to_have_value("30m")
    expect()(dialog.locator(".jp-gpuaas-job-parameters-note")).to_have_text(
        "Your values replace the defaults of the parameters cell (cell 1)."
    )
    dialog.locator(".jp-gpuaas-job-parameters").fill('greeting = "hey"')
    screenshot(p, "jobs-dialog.png")
    dialog.locator("button.jp-mod-accept").click()

    # the writer waits behind it, and the section says where
    writer = jobs.filter(has_text="writer.ipynb")
    expect()(writer).to_have_attribute("data-state", "queued", timeout=30_000)
    expect()(writer.locator(".jp-gpuaas-job-state")).to_have_text(
        "queued · #1 in the queue", timeout=60_000
    )
    expect()(jobs).to_have_count(2)
    screenshot(p, "jobs-queued.png")

    # cancelling the sleeper from the section frees the slice: it goes, the writer runs
    sleeper.locator("button", has_text="Cancel").click()
    confirm = p.locator(".jp-Dialog")
    expect()(confirm).to_contain_text("Cancel GPU job")
    confirm.locator("button.jp-mod-warn").click()
    expect()(sleeper).to_have_count(0, timeout=60_000)

    expect()(writer).to_have_attribute("data-state", "succeeded", timeout=180_000)
    expect()(writer.locator("button", has_text="Open output")).to_be_visible(timeout=30_000)
    name = writer.get_attribute("data-job")
    # the notice, with the same action
    notice = p.get_by_role("alert").filter(has_text=f"GPU job {name}")
    expect()(notice).to_be_visible(timeout=30_000)
    expect()(notice.get_by_role("button", name="Open output")).to_be_visible()
    screenshot(p, "jobs-panel.png")
    writer.locator("button", has_text="Open output").click()
    expect()(p.locator(".jp-OutputArea-output", has_text="wrote heyhey")).to_be_visible(
        timeout=30_000
    )
    written = Path(lab.root) / f"writer-{name}.ipynb"
    assert written.exists()
    assert json.loads((Path(lab.root) / "writer.ipynb").read_text()) == WRITER


@pytest.fixture
def demo_lab(cluster: Cluster, tmp_path: Path) -> Iterator[Lab]:
    """A JupyterLab of carol's (team B: not the module's hub's user, whose server pod has the
    same name on this cluster) on a hub in make demo's configuration, with the demo's sample."""
    args = [f"--GPUaaSService.catalog_file={write_catalog(tmp_path / 'demo')}"]
    with queue_hub(tmp_path / "hub", cluster.info.settings.state_dir, service_args=args) as qh:
        env = {
            "JUPYTERHUB_API_TOKEN": qh.server_token("carol"),
            "GPUAAS_SERVICE_URL": qh.service_url,
        }
        with start_lab(tmp_path / "lab", {"jobs_collect_interval": 2}, env=env) as server:
            for sample in EXAMPLES.glob("*.ipynb"):
                (Path(server.root) / sample.name).write_bytes(sample.read_bytes())
            yield server
    clear_notebook_jobs(cluster)


def test_the_demos_sample_runs_as_a_gpu_job(browser: object, demo_lab: Lab) -> None:
    context, p = open_page(browser, demo_lab)
    try:
        panel = open_panel(p)
        dialog = run_as_gpu_job(p, "gpu-job-sample.ipynb")
        expect()(dialog.locator(".jp-gpuaas-job-parameters-note")).to_have_text(
            "Your values replace the defaults of the parameters cell (cell 2)."
        )
        dialog.locator(".jp-gpuaas-job-parameters").fill("epochs = 3")
        dialog.locator("button.jp-mod-accept").click()
        job = panel.locator(".jp-gpuaas-job").filter(has_text="gpu-job-sample.ipynb")
        # the demo queue borrows a slice of this machine's GPU: the job runs for real
        expect()(job).to_have_attribute("data-state", "succeeded", timeout=180_000)
        expect()(job.locator("button", has_text="Open output")).to_be_visible(timeout=30_000)
        job.locator("button", has_text="Open output").click()
        expect()(p.locator(".jp-OutputArea-output", has_text="after 3 epochs")).to_be_visible(
            timeout=30_000
        )
    finally:
        context.close()

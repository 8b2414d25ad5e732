"""GPU jobs in a real JupyterLab, in Chromium (docs/jobs.md): the "Run as GPU job…" dialog with
the team's offerings and headroom, the GPU jobs section following the job to success, the
finish notice, and opening the executed copy. Real cluster, hub, gpuaas service and node agent;
the JupyterLab holds a server token the hub issued to alice.

Screenshots: docs/images/jobs-dialog.png, docs/images/jobs-panel.png.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from devcluster.queue_hub import QueueHub, queue_hub
from devcluster.testing import Cluster
from tests.integration.test_notebook_jobs import (
    QUEUE_YAML,
    WRITER,
    catalog_file,
    clear_notebook_jobs,
    run_kubectl,
)
from tests.support.lab import Lab, browser, start_lab
from tests.support.lab_page import expect, open_panel, screenshot

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


@pytest.fixture(scope="module")
def lab(hub: QueueHub, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    env = {"JUPYTERHUB_API_TOKEN": hub.user_token("alice"), "GPUAAS_SERVICE_URL": hub.service_url}
    with start_lab(tmp_path_factory.mktemp("lab"), {"jobs_collect_interval": 2}, env=env) as server:
        (server.root / "writer.ipynb").write_text(json.dumps(WRITER))
        yield server


@pytest.fixture(scope="module")
def page(browser: object, lab: Lab) -> Iterator[object]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{lab.url}lab?token={lab.token}")
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    page.wait_for_function("() => window.jupyterapp !== undefined")
    page.evaluate("() => window.jupyterapp.restored.then(() => true)")
    yield page
    context.close()


def test_run_as_gpu_job_from_jupyterlab(page: object, lab: Lab) -> None:
    p: object = page
    panel = open_panel(p)
    # not awaited: the command's promise ends with the dialog
    p.evaluate(  # type: ignore[attr-defined]
        "([id, args]) => { void window.jupyterapp.commands.execute(id, args); }",
        ["jupyter-gpuaas:run-as-gpu-job", {"path": "writer.ipynb"}],
    )
    dialog = p.locator(".jp-Dialog")  # type: ignore[attr-defined]
    expect()(dialog.locator(".jp-gpuaas-job-form")).to_be_visible(timeout=30_000)
    expect()(dialog.locator(".jp-gpuaas-job-offering")).to_have_value("local-mig-1g")
    expect()(dialog.locator(".jp-gpuaas-job-headroom")).not_to_be_empty()
    expect()(dialog.locator(".jp-gpuaas-job-limit")).to_have_value("30m")
    dialog.locator(".jp-gpuaas-job-parameters").fill('greeting = "hey"')
    screenshot(p, "jobs-dialog.png")
    dialog.locator("button.jp-mod-accept").click()

    row = panel.locator(".jp-gpuaas-job")
    expect()(row).to_have_count(1, timeout=30_000)
    expect()(row.first).to_have_attribute("data-state", "succeeded", timeout=180_000)
    expect()(row.first.locator("button", has_text="Open output")).to_be_visible(timeout=30_000)
    name = row.first.get_attribute("data-job")
    # the notice, with the same action
    notice = p.get_by_role("alert").filter(has_text=f"GPU job {name}")  # type: ignore[attr-defined]
    expect()(notice).to_be_visible(timeout=30_000)
    expect()(notice.get_by_role("button", name="Open output")).to_be_visible()
    screenshot(p, "jobs-panel.png")
    row.first.locator("button", has_text="Open output").click()
    expect()(p.locator(".jp-OutputArea-output", has_text="wrote heyhey")).to_be_visible(  # type: ignore[attr-defined]
        timeout=30_000
    )
    written = Path(lab.root) / f"writer-{name}.ipynb"
    assert written.exists()
    assert json.loads((Path(lab.root) / "writer.ipynb").read_text()) == WRITER

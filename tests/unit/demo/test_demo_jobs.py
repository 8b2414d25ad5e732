"""GPU jobs in make demo (demo/jobs.py): the demo's catalog turns jobs on for every team on the
queue that borrows the node agent's slices, the images it names are those the admission policy
lets notebook Jobs run, and every home gets the sample notebook, whose ``parameters`` cell the
dialog names. (The demo's configuration with a real hub and browser:
tests/integration/test_notebook_jobs_browser.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from demo.jobs import (
    EXAMPLES,
    JOBS_QUEUE,
    examples_config,
    examples_init_container,
    write_catalog,
)
from devcluster.config import DEMO_CATALOG
from jupyter_gpuaas.core.catalog import build_catalog, load_catalog_file
from jupyter_gpuaas.job_pod.runner import PARAMETERS_TAG

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "devcluster" / "manifests"


def manifests(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def test_the_demo_catalog_runs_every_teams_jobs_on_its_demo_queue(tmp_path: Path) -> None:
    path = write_catalog(tmp_path)
    catalog = build_catalog([load_catalog_file(str(path))])
    teams = {t["name"] for t in yaml.safe_load(DEMO_CATALOG.read_text())["tenants"]}
    assert {t.name for t in catalog.tenants.values() if t.jobs is not None} == teams
    demo_queues = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for d in manifests("70-demo-training-queue.yaml")
        if d["kind"] == "LocalQueue"
    }
    for tenant in catalog.tenants.values():
        assert tenant.jobs is not None
        assert (tenant.jobs.namespace, tenant.jobs.local_queue) in demo_queues
        assert tenant.jobs.local_queue == JOBS_QUEUE
        # what the demo queue covers: the slices of the flavor "local" (this machine)
        for slug in tenant.jobs.offerings:
            assert catalog.offerings[slug].flavor == "local"


def test_the_policys_images_are_the_demo_catalogs(tmp_path: Path) -> None:
    data = yaml.safe_load(write_catalog(tmp_path).read_text())
    (config,) = [d for d in manifests("63-gpuaas-jobs-policy.yaml") if d["kind"] == "ConfigMap"]
    assert (config["metadata"]["namespace"], config["metadata"]["name"]) == (
        "jupyterhub",
        "gpuaas-job-images",
    )
    allowed = set(config["data"]["images"].split())
    assert {i["image"] for i in data["images"]} <= allowed


def test_the_sample_notebook_has_a_parameters_cell_that_is_not_first() -> None:
    (sample,) = EXAMPLES.glob("*.ipynb")
    cells = json.loads(sample.read_text())["cells"]
    tagged = [i for i, c in enumerate(cells) if PARAMETERS_TAG in c["metadata"].get("tags", [])]
    assert tagged == [1]  # "cell 2" in the dialog, after the markdown that explains it
    assert "epochs = 20" in cells[1]["source"]


def test_the_sample_notebook_runs(tmp_path: Path) -> None:
    """What a job runs (jupyter_gpuaas.job_pod) with the dialog's values for its parameters."""
    from jupyter_gpuaas.job_pod.runner import inject_parameters

    (sample,) = EXAMPLES.glob("*.ipynb")
    nb = inject_parameters(json.loads(sample.read_text()), {"epochs": 2})
    code = "\n".join(c["source"] for c in nb["cells"] if c["cell_type"] == "code")
    done = subprocess.run(
        [sys.executable, "-c", code.replace("time.sleep(0.5)", "pass")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "after 2 epochs" in done.stdout
    assert "epoch   3" not in done.stdout


def test_the_init_container_copies_only_missing_samples(tmp_path: Path) -> None:
    source = tmp_path / "examples"
    source.mkdir()
    (source / "a.ipynb").write_text("new a")
    (source / "b.ipynb").write_text("new b")
    home = tmp_path / "home"
    home.mkdir()
    (home / "a.ipynb").write_text("the user's own edit")
    container = examples_init_container(source)
    subprocess.run(container["command"], cwd=home, check=True, timeout=30)
    assert (home / "a.ipynb").read_text() == "the user's own edit"
    assert (home / "b.ipynb").read_text() == "new b"
    # on the server's home volume, at the server's home
    (mount,) = container["volumeMounts"]
    assert mount == {"name": "volume-{user_server}", "mountPath": "/home/jovyan"}
    assert repr(container) in examples_config(source)

"""GPU jobs in the demo (docs/jobs.md): the demo's catalog with a ``jobs`` section for each team,
and the sample notebooks every demo user finds in their home.

The teams' jobs go to their LocalQueue ``demo`` (devcluster/manifests/70-demo-training-queue.yaml):
the queue that borrows the node agent's MIG slices, so that a job runs for real on this machine
when a slice is free (or once the culler has freed one). The images the jobs may run are the
ConfigMap ``jupyterhub/gpuaas-job-images`` (devcluster/manifests/63-gpuaas-jobs-policy.yaml),
which every dev cluster, the demo's included, gets with the catalog's image.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from devcluster.config import DEMO_CATALOG

EXAMPLES = Path(__file__).resolve().parent / "examples"
"""The sample notebooks, copied into each demo user's home when missing."""

JOBS_QUEUE = "demo"
JOB_OFFERINGS = ("local-mig-1g",)

# Run in the server's home before the server starts (an init container on the same volume):
# copies each sample that is not there yet, so a user's own edits are never overwritten.
_COPY_EXAMPLES = """
import pathlib, shutil, sys
for source in sorted(pathlib.Path(sys.argv[1]).glob("*.ipynb")):
    target = pathlib.Path(source.name)
    if not target.exists():
        shutil.copyfile(source, target)
"""


def jobs_section(team: str) -> dict[str, Any]:
    """A demo team's ``jobs`` section: its ``demo`` queue, the local MIG slice, small caps."""
    return {
        "namespace": team,
        "local_queue": JOBS_QUEUE,
        "offerings": list(JOB_OFFERINGS),
        "max_per_user": 2,
        "max_per_team": 4,
        "default_time_limit": "30m",
        "max_time_limit": "2h",
    }


def catalog_with_jobs(catalog: dict[str, Any]) -> dict[str, Any]:
    """``catalog`` with a ``jobs`` section for each of its tenants (a copy)."""
    out = dict(catalog)
    out["tenants"] = [{**t, "jobs": jobs_section(t["name"])} for t in catalog["tenants"]]
    return out


def write_catalog(directory: Path, source: Path = DEMO_CATALOG) -> Path:
    """The demo catalog with GPU jobs on, written to ``directory/catalog.yaml``."""
    data = catalog_with_jobs(yaml.safe_load(source.read_text()))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "catalog.yaml"
    path.write_text(
        "# written by make demo (demo/jobs.py): spawner/demo-catalog.yaml with GPU jobs on\n"
        + yaml.safe_dump(data, sort_keys=False)
    )
    return path


def examples_init_container(examples: Path = EXAMPLES) -> dict[str, Any]:
    """An init container that puts the missing sample notebooks into the server's home (the
    same volume and mount as the server's: devcluster/hub.py's persistent homes)."""
    return {
        "name": "demo-examples",
        "image": "localhost/jupyter-gpuaas-dev:local",
        "command": [sys.executable, "-c", _COPY_EXAMPLES, str(examples)],
        "volumeMounts": [{"name": "volume-{user_server}", "mountPath": "/home/jovyan"}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}},
    }


def examples_config(examples: Path = EXAMPLES) -> str:
    """The hub configuration lines that give every server the sample notebooks."""
    return (
        "\n# make demo: the sample notebooks in every home (demo/jobs.py)\n"
        f"c.KubeSpawner.init_containers = [{examples_init_container(examples)!r}]\n"
    )

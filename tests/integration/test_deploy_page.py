"""docs/deploy.md is a script that works: every ` ```bash ` block of the page runs, in order,
against the dev cluster with a real hub, the gpuaas service and Prometheus (doctor_world.py),
and exits 0; the blocks marked ` ```bash not-on-dev-cluster ` are listed as not run.

What changes for the dev cluster (the page's "How this page is tested" says the same):
``kubectl`` is the dev cluster's with its administrator's kubeconfig; each command that changes
the cluster (``kubectl apply|create|label|annotate|patch``) gets ``--dry-run=server``, so the
apiserver judges every object (schema, admission, RBAC) and the dev cluster keeps its own
organisation; ``jupyterhub/gpuaas-service`` becomes the dev cluster's ``jupyterhub/gpuaas``;
the working directory holds ``gpuaas_service_config.py``, ``catalog.yaml``
(spawner/demo-catalog.yaml) and ``policy.yaml`` (the policy of culler/deploy/gpuaas-service.yaml)
beside links to the repository's ``culler``, ``demo``, ``devcluster`` and ``spawner``;
``JUPYTERHUB_API_URL``/``JUPYTERHUB_API_TOKEN`` are the test hub's and the service's token.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from devcluster.hub import DEMO_CATALOG
from devcluster.testing import Cluster
from tests.support.doctor_world import REPO, SERVICE_ACCOUNT, Setup, doctor_world

pytestmark = pytest.mark.integration

PAGE = REPO / "docs" / "deploy.md"
NOT_HERE = "not-on-dev-cluster"
FENCE = re.compile(r"^```bash([^\n]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
MUTATING = re.compile(r"\bkubectl\b(?:\s+-n\s+\S+)?\s+(?:apply|create|label|annotate|patch)\b")


@dataclass(frozen=True)
class Block:
    line: int
    text: str
    runs_here: bool


def page_blocks(text: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(text):
        marks = m.group(1).split()
        assert marks in ([], [NOT_HERE]), (
            f"unknown mark {marks} at line {text[: m.start()].count(chr(10)) + 1}"
        )
        out.append(Block(text[: m.start()].count("\n") + 1, m.group(2), not marks))
    return out


def for_dev_cluster(command: str) -> str:
    """One command line as the test runs it (the module docstring's changes)."""
    command = command.replace("jupyterhub/gpuaas-service", SERVICE_ACCOUNT)
    m = MUTATING.search(command)
    if m is None or "--dry-run" in command:
        return command
    pipe = command.find(" | ", m.end())
    cut = len(command) if pipe < 0 else pipe
    return f"{command[:cut]} --dry-run=server{command[cut:]}"


def test_the_page_is_read_as_the_test_says() -> None:
    blocks = page_blocks(PAGE.read_text())
    assert len([b for b in blocks if b.runs_here]) >= 10
    assert for_dev_cluster("kubectl apply -f x.yaml") == "kubectl apply -f x.yaml --dry-run=server"
    assert (
        for_dev_cluster("kubectl -n ns create secret generic s --from-literal=a=b")
        == "kubectl -n ns create secret generic s --from-literal=a=b --dry-run=server"
    )
    assert for_dev_cluster("kubectl get nodes") == "kubectl get nodes"
    assert for_dev_cluster("x --as-service-account jupyterhub/gpuaas-service").endswith(
        "jupyterhub/gpuaas"
    )
    # what is not run here is what needs what the dev cluster lacks
    for b in blocks:
        if not b.runs_here:
            assert re.search(
                r"\b(helm|docker|https://|rollout|exec|monitoring|hub\.example)", b.text
            ), b


@pytest.fixture(scope="module")
def world(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with doctor_world(cluster, tmp_path_factory.mktemp("deploy-page")) as w:
        yield w


def _workdir(world: Setup) -> Path:
    work = world.state / "work"
    work.mkdir()
    for name in ("culler", "demo", "devcluster", "spawner"):
        (work / name).symlink_to(REPO / name)
    shutil.copy(DEMO_CATALOG, work / "catalog.yaml")
    culler = yaml.safe_load_all((REPO / "culler" / "deploy" / "gpuaas-service.yaml").read_text())
    policy = next(d for d in culler if d and d["metadata"]["name"] == "gpuaas-culler-policy")
    (work / "policy.yaml").write_text(policy["data"]["policy.yaml"])
    config = world.config.read_text()
    config = re.sub(r'catalog_file = ".*"', f'catalog_file = "{work / "catalog.yaml"}"', config)
    config = re.sub(r'policy = ".*"', f'policy = "{work / "policy.yaml"}"', config)
    (work / "gpuaas_service_config.py").write_text(config)
    return work


def test_every_command_of_the_page_runs(world: Setup, capsys: pytest.CaptureFixture[str]) -> None:
    work = _workdir(world)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "kubectl").symlink_to(world.cluster.info.kubectl)
    venv_bin = Path(os.environ.get("VIRTUAL_ENV", REPO / ".venv")) / "bin"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{venv_bin}:{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(world.cluster.info.kubeconfig),
        "JUPYTERHUB_API_URL": f"{world.hub.url}/hub/api",
        "JUPYTERHUB_API_TOKEN": world.service_token,
        "HOME": str(work),
    }
    ran, skipped = [], []
    for block in page_blocks(PAGE.read_text()):
        if not block.runs_here:
            skipped.append(block.line)
            continue
        script = "\n".join(for_dev_cluster(line) for line in block.text.splitlines())
        proc = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (
            f"docs/deploy.md line {block.line}:\n{script}\n--- stdout\n{proc.stdout}"
            f"\n--- stderr\n{proc.stderr}"
        )
        ran.append(block.line)
    with capsys.disabled():
        print(f"\ndocs/deploy.md: ran the blocks at lines {ran}; not run here: {skipped}")
    assert len(ran) >= 10
    # the last block is the whole deployment's check: every check ok on the dev cluster
    last = page_blocks(PAGE.read_text())
    assert [b for b in last if b.runs_here][-1].text.strip().startswith("gpuaas-admin --doctor")

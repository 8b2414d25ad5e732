"""What the notebook-Job tests share (tests/integration): their queue, sample notebooks, the
catalog with Jobs on, kubectl as the cluster's admin, and the clean-up of their Jobs."""

from __future__ import annotations

from pathlib import Path

from devcluster.kube import kubectl
from devcluster.testing import Cluster, jobs_catalog_file

REPO = Path(__file__).resolve().parents[2]
QUEUE = "nbjobs-test"

QUEUE_YAML = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {QUEUE}}}
spec:
  namespaceSelector:
    matchLabels: {{kubernetes.io/metadata.name: team-a}}
  queueingStrategy: StrictFIFO
  resourceGroups:
    - coveredResources: [cpu, memory, nvidia.com/mig-1g.5gb]
      flavors:
        - name: local
          resources:
            - {{name: cpu, nominalQuota: 4}}
            - {{name: memory, nominalQuota: 8Gi}}
            - {{name: nvidia.com/mig-1g.5gb, nominalQuota: 1}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: {QUEUE}, namespace: team-a}}
spec: {{clusterQueue: {QUEUE}}}
"""

SLEEPER = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "cells": [
        {
            "cell_type": "code",
            "id": "s",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "import time\ntime.sleep(600)\n",
        }
    ],
}
WRITER = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "cells": [
        {
            "cell_type": "code",
            "id": "p",
            "metadata": {"tags": ["parameters"]},
            "outputs": [],
            "execution_count": None,
            "source": "greeting = 'hello'\n",
        },
        {
            "cell_type": "code",
            "id": "w",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "with open('out.txt', 'w') as f:\n    f.write(greeting * 2)\n",
        },
        {
            "cell_type": "code",
            "id": "r",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "import os\n"
            "print('wrote', open('out.txt').read(), os.environ['GPUAAS_OFFERING'])\n",
        },
    ],
}


def run_kubectl(cluster: Cluster, args: list[str], stdin: str | None = None) -> str:
    info = cluster.info
    done = kubectl(info.kubectl, info.settings.kubeconfig, args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    return done.stdout


def catalog_file(tmp: Path) -> Path:
    return jobs_catalog_file(tmp, QUEUE)


def clear_notebook_jobs(cluster: Cluster) -> None:
    run_kubectl(
        cluster, ["-n", "team-a", "delete", "jobs", "-l", "gpuaas.jupyter.org/job=notebook"]
    )

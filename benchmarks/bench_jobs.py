"""Submit → Workload admitted: "Run as GPU job" through the gpuaas service vs the same Job with
kubectl, same cluster, same run, free quota.

The dev cluster (started or reused), a real hub with the gpuaas service and the demo catalog with
a jobs section for team A (its own queue ``nbjobs-bench``: one 1g.5gb slice on the node agent's
node, outside the cohort). Each round, in alternating order:

- **service**: ``POST /services/gpuaas/api/jobs`` through the hub's proxy with alice's server
  token (the notebook in the body; the service asks the hub who it is, validates, checks the
  caps with one list of the team's Jobs, creates ConfigMap, Secret, Job, then the two owner
  references) — what the server extension sends;
- **kubectl**: ``kubectl create -f -`` of the same Job (the one the service made, renamed, its
  server-set fields removed) as alice's ServiceAccount, the way a user with kubectl submits.

"admitted": the Job's Workload has ``Admitted=True`` (watched every 50 ms through the API, as the
gpuaas ServiceAccount). Each Job is deleted and gone before the next round.

    python -m benchmarks.bench_jobs [--rounds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from devcluster import cluster as devcluster  # noqa: E402
from devcluster.config import load_settings  # noqa: E402
from devcluster.kube import kubectl  # noqa: E402
from devcluster.queue_hub import queue_hub  # noqa: E402
from devcluster.testing import Cluster, get_json, jobs_catalog_file  # noqa: E402

NS = "team-a"
QUEUE = "nbjobs-bench"
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields")
# Team A's jobs queue for the benchmark: one 1g.5gb slice on the node agent's node, no cohort.
QUEUE_OBJECTS: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": QUEUE},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": NS}},
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/mig-1g.5gb"],
                        "flavors": [
                            {
                                "name": "local",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 4},
                                    {"name": "memory", "nominalQuota": "8Gi"},
                                    {"name": "nvidia.com/mig-1g.5gb", "nominalQuota": 1},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": NS},
            "spec": {"clusterQueue": QUEUE},
        },
    ],
}
# A notebook that holds its slice for longer than a round takes.
SLEEPING_NOTEBOOK = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "cells": [
        {
            "cell_type": "code",
            "id": "sleep",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "import time\ntime.sleep(600)\n",
        }
    ],
}


def _kubectl(info: Any, args: list[str], stdin: str | None = None, as_sa: bool = False) -> str:
    extra = ["--as=system:serviceaccount:team-a:alice"] if as_sa else []
    done = kubectl(info.kubectl, info.settings.kubeconfig, [*extra, *args], stdin=stdin)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return done.stdout


async def _admitted(api: Any, name: str, timeout: float = 60) -> float:
    deadline = time.monotonic() + timeout
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
    while time.monotonic() < deadline:
        for wl in (await get_json(api, path))["items"]:
            owners = [o.get("name") for o in wl["metadata"].get("ownerReferences") or []]
            conds = (wl.get("status") or {}).get("conditions") or []
            if name in owners and any(
                c["type"] == "Admitted" and c["status"] == "True" for c in conds
            ):
                return time.monotonic()
        await asyncio.sleep(0.05)
    raise RuntimeError(f"{name}: not admitted in {timeout}s")


async def _gone(api: Any, name: str) -> None:
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
    for _ in range(600):
        items = (await get_json(api, path))["items"]
        if not any(
            name in [o.get("name") for o in w["metadata"].get("ownerReferences") or []]
            for w in items
        ):
            return
        await asyncio.sleep(0.1)


def _as_kubectl_job(job: dict[str, Any], name: str) -> str:
    meta = job["metadata"]
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    meta["name"] = name
    job.pop("status", None)
    template = job["spec"]["template"]
    template["metadata"].get("labels", {}).pop("batch.kubernetes.io/controller-uid", None)
    template["metadata"].get("labels", {}).pop("controller-uid", None)
    template["metadata"]["labels"].pop("batch.kubernetes.io/job-name", None)
    template["metadata"]["labels"].pop("job-name", None)
    job["spec"].pop("selector", None)
    job["spec"]["suspend"] = True
    return json.dumps(job)


async def main_async(rounds: int) -> dict[str, list[float]]:
    settings = load_settings()
    info = devcluster.up(settings)
    cluster = Cluster(info)
    _kubectl(info, ["apply", "-f", "-"], stdin=json.dumps(QUEUE_OBJECTS))
    _kubectl(info, ["-n", NS, "delete", "jobs", "-l", "gpuaas.jupyter.org/job=notebook"])
    results: dict[str, list[float]] = {"service": [], "kubectl": []}
    with tempfile.TemporaryDirectory() as tmp:
        args = [f"--GPUaaSService.catalog_file={jobs_catalog_file(Path(tmp), QUEUE)}"]
        with queue_hub(Path(tmp) / "hub", settings.state_dir, service_args=args) as hub:
            token = hub.server_token("alice")
            body = {"team": NS, "path": "bench.ipynb", "notebook": SLEEPING_NOTEBOOK}

            def submit() -> str:
                req = urllib.request.Request(
                    hub.hub.url + "/services/gpuaas/api/jobs",
                    data=json.dumps(body).encode(),
                    method="POST",
                    headers={"Authorization": f"token {token}"},
                )
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return str(json.loads(resp.read())["name"])

            async with cluster.api("jupyterhub", "gpuaas") as api:
                template: dict[str, Any] | None = None
                for i in range(rounds + 1):  # round 0: warm-up
                    order = ["service", "kubectl"] if i % 2 == 0 else ["kubectl", "service"]
                    for how in order:
                        start = time.monotonic()
                        if how == "service" or template is None:
                            name = await asyncio.to_thread(submit)
                            how = "service"
                        else:
                            name = f"kubectl-bench-{i}"
                            await asyncio.to_thread(
                                _kubectl,
                                info,
                                ["-n", NS, "create", "-f", "-"],
                                _as_kubectl_job(json.loads(json.dumps(template)), name),
                                True,
                            )
                        took = await _admitted(api, name) - start
                        if template is None:
                            template = json.loads(
                                _kubectl(info, ["-n", NS, "get", "job", name, "-o", "json"])
                            )
                        if i:
                            results[how].append(took)
                        print(f"  {how:<8} {i or 'warm-up'}: {took * 1000:.0f} ms", flush=True)
                        _kubectl(info, ["-n", NS, "delete", "job", name, "--wait=false"])
                        await _gone(api, name)
    _kubectl(info, ["delete", "--ignore-not-found", "-f", "-"], stdin=json.dumps(QUEUE_OBJECTS))
    return results


def table(results: dict[str, list[float]]) -> str:
    lines = [
        "| submit → Workload admitted | n | p50 ms | p95 ms | max ms |",
        "| --- | --- | --- | --- | --- |",
    ]
    for how, values in results.items():
        if not values:
            continue
        ms = sorted(v * 1000 for v in values)
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        lines.append(
            f"| {how} | {len(ms)} | {statistics.median(ms):.0f} | {p95:.0f} | {ms[-1]:.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="measured rounds per way")
    args = parser.parse_args(argv)
    print(table(asyncio.run(main_async(args.rounds))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

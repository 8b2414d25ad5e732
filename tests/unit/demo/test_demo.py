"""The demo's sample training Job and its queue: the Job asks for what an idle demo notebook
holds (a 1g.5gb slice of the flavor ``local``), its queue covers that flavor in the cohort, and
the culler sees it as demand for those slices. (On a real cluster: docs/culler.md, "The demo".)"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from demo.__main__ import DEMO_JOB, DEMO_JOB_SUBMITTER, submit_job_command
from gpuaas_service.reclaim.inputs import pending_workloads
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_local_queue
from jupyter_gpuaas.core.labels import USER_LABEL

REPO = Path(__file__).resolve().parents[3]
MANIFESTS = REPO / "devcluster" / "manifests"
MIG = "nvidia.com/mig-1g.5gb"


def docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def demo_catalog_local_mig() -> dict[str, Any]:
    catalog = yaml.safe_load((REPO / "spawner" / "demo-catalog.yaml").read_text())
    (offering,) = [o for o in catalog["offerings"] if o["slug"] == "local-mig-1g"]
    return dict(offering)


def test_the_job_asks_for_what_a_demo_notebook_holds() -> None:
    job = yaml.safe_load(DEMO_JOB.read_text())
    assert job["kind"] == "Job"
    assert job["metadata"]["namespace"] == "team-a"
    labels = job["metadata"]["labels"]
    assert labels[USER_LABEL] == "alice"
    assert DEMO_JOB_SUBMITTER == "system:serviceaccount:team-a:alice"  # the label's rule
    assert labels["kueue.x-k8s.io/queue-name"] == "demo"
    template = job["spec"]["template"]
    assert int(template["metadata"]["annotations"]["gpuaas.dev/run-seconds"]) > 0
    offering = demo_catalog_local_mig()
    assert offering["flavor"] == "local"
    container = template["spec"]["containers"][0]
    assert container["resources"]["requests"] == {
        r: str(n) for r, n in offering["resources"].items()
    }
    assert template["spec"]["nodeSelector"] == offering["node_selector"]
    assert template["spec"]["tolerations"] == offering["tolerations"]
    (flavor,) = [d for d in docs("20-resource-flavors.yaml") if d["metadata"]["name"] == "local"]
    assert flavor["spec"]["nodeLabels"].items() <= template["spec"]["nodeSelector"].items()


def test_its_queue_borrows_the_local_flavor_in_the_cohort() -> None:
    cq, *lqs = docs("70-demo-training-queue.yaml")
    assert cq["kind"] == "ClusterQueue"
    assert cq["metadata"]["name"] == "demo-training"
    assert cq["spec"]["cohortName"] == "gpuaas"
    assert cq["spec"]["preemption"]["reclaimWithinCohort"] == "Never"
    (group,) = cq["spec"]["resourceGroups"]
    assert MIG in group["coveredResources"]
    (local,) = group["flavors"]
    assert local["name"] == "local"
    assert all(r["nominalQuota"] == 0 for r in local["resources"])  # owns nothing
    assert {(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in lqs} == {
        ("team-a", "demo-training"),
        ("team-b", "demo-training"),
    }
    # the sample queues are untouched: none of them covers local for training
    for doc in docs("30-cluster-queues.yaml"):
        if doc["kind"] == "ClusterQueue" and doc["metadata"]["name"].endswith("-training"):
            flavors = {f["name"] for g in doc["spec"]["resourceGroups"] for f in g["flavors"]}
            assert "local" not in flavors


def with_usage(cq: dict[str, Any], used: int) -> dict[str, Any]:
    obj = copy.deepcopy(cq)
    obj["status"] = {
        "flavorsReservation": [{"name": "local", "resources": [{"name": MIG, "total": used}]}]
    }
    return obj


def state(a_used: int, b_used: int) -> QueueState:
    sample = [d for d in docs("30-cluster-queues.yaml") if d["kind"] == "ClusterQueue"]
    demo = docs("70-demo-training-queue.yaml")
    usage = {"team-a-notebooks": a_used, "team-b-notebooks": b_used}
    cqs = [
        read_cluster_queue(with_usage(c, usage.get(c["metadata"]["name"], 0)))
        for c in [*sample, demo[0]]
    ]
    lqs = [read_local_queue(q) for q in [*docs("40-local-queues.yaml"), *demo[1:]]]
    return QueueState(
        cluster_queues={c.name: c for c in cqs},
        local_queues={(q.namespace, q.name): q for q in lqs},
    )


def workload_of_the_job() -> dict[str, Any]:
    job = yaml.safe_load(DEMO_JOB.read_text())
    return {
        "metadata": {
            "name": "job-demo-train-x",
            "namespace": job["metadata"]["namespace"],
            "uid": "uid-1",
            "labels": {USER_LABEL: job["metadata"]["labels"][USER_LABEL]},
            "creationTimestamp": "2026-11-30T12:00:00Z",
        },
        "spec": {
            "queueName": job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"],
            "podSets": [
                {
                    "name": "main",
                    "count": job["spec"]["parallelism"],
                    "template": job["spec"]["template"],
                }
            ],
        },
        "status": {},
    }


def test_the_culler_sees_it_as_demand_for_the_notebooks_slices() -> None:
    flavors = {
        d["metadata"]["name"]: d["spec"]["nodeLabels"] for d in docs("20-resource-flavors.yaml")
    }
    # both demo notebooks (alice's, carol's) hold the two local slices: it lacks one
    (wl,) = pending_workloads([workload_of_the_job()], state(1, 1), flavor_labels=flavors)
    assert wl.cluster_queue == "demo-training"
    assert wl.cohorts == ("gpuaas",)
    (need,) = wl.needs
    assert (need.resource, need.flavors) == (MIG, ("local",))
    assert need.amount == 1
    assert need.free == {"local": 0}
    # one slice unused: Kueue lends it at once, nothing to reclaim
    (wl,) = pending_workloads([workload_of_the_job()], state(1, 0), flavor_labels=flavors)
    assert wl.needs[0].free == {"local": 1}


def test_the_banner_prints_the_exact_submit_line() -> None:
    line = submit_job_command(Path("/bin/kubectl"), Path("/tmp/c/kubeconfig"))
    assert line == (
        "KUBECONFIG=/tmp/c/kubeconfig /bin/kubectl --as=system:serviceaccount:team-a:alice"
        f" create -f {DEMO_JOB}"
    )

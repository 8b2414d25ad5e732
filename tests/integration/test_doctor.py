"""``gpuaas-admin --doctor`` against the real dev cluster, a real hub with the gpuaas service
and a real Prometheus scraping it (docs/deploy.md).

The healthy dev cluster gives all ok; then, one at a time and restored after each: a team's
LocalQueue deleted, the h100 flavor taken out of team A's notebook ClusterQueue, the gpuaas
account's node-reader ClusterRole removed, a hub token without ``read:tokens``, Prometheus
stopped, a catalog offering whose resource no node advertises, and (with a catalog whose team
runs notebooks as Jobs) the Jobs' image ConfigMap deleted. Each gives exactly one line that
is not ok, naming the fix, and every other check keeps its status.

The doctor runs as an operator runs it: the ``gpuaas-admin`` command, the admin's kubeconfig,
``--as-service-account jupyterhub/gpuaas`` (RBAC reviewed as the service's account), the
service's token and configuration. The dev cluster runs Kueue's manager as a local process, not
as Kueue's Deployment: the module records the version it runs (devcluster/versions.env) where a
real install has it, a ``kueue-system/kueue-controller-manager`` Deployment (0 replicas) with
Kueue's image at that tag, and deletes it at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from devcluster.hub import DEMO_CATALOG
from devcluster.testing import Cluster
from tests.support.doctor_world import (
    MANIFESTS,
    SERVICE_SCOPES,
    Setup,
    doctor_world,
    kueue_version,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def setup(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    with doctor_world(cluster, tmp_path_factory.mktemp("doctor")) as world:
        yield world


def _by_name(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {r["name"]: r for r in rows}


@pytest.fixture(scope="module")
def healthy(setup: Setup) -> dict[str, dict[str, str]]:
    code, rows = setup.doctor()
    bad = [r for r in rows if r["status"] != "ok"]
    assert bad == [], "\n".join(json.dumps(r) for r in bad)
    assert code == 0
    return _by_name(rows)


def _only_one_wrong(
    healthy: dict[str, dict[str, str]], code: int, rows: list[dict[str, str]]
) -> dict[str, str]:
    """The one check that is not ok; every other check keeps its healthy status."""
    assert code == 1
    bad = [r for r in rows if r["status"] != "ok"]
    assert len(bad) == 1, "\n".join(json.dumps(r) for r in bad)
    for r in rows:
        if r is not bad[0] and r["name"] in healthy:
            assert r["status"] == healthy[r["name"]]["status"], r
    return bad[0]


def test_healthy_dev_cluster_is_all_ok(healthy: dict[str, dict[str, str]]) -> None:
    names = set(healthy)
    # every area is checked
    for name in (
        "kueue.api",
        "kueue.version",
        "catalog",
        "localqueue.team-a",
        "localqueue.team-b",
        "queue.team-a-notebooks.h100",
        "cohort",
        "gpu.h100",
        "gpu.local-mig-1g",
        "gpu.l4-quarter",
        "rbac.nodes.cluster",
        "rbac.pods.jupyter-users",
        "admission.gpuaas-service-pod-writes",
        "hub",
        "hub.scopes",
        "prometheus",
        "prometheus.rules",
        "policy",
        "homes",
    ):
        assert name in names, name
    assert healthy["kueue.version"]["detail"].startswith(f"Kueue {kueue_version()}")
    assert "service gpuaas holds read:servers, read:tokens" in healthy["hub.scopes"]["detail"]


def test_a_deleted_local_queue(setup: Setup, healthy: dict[str, dict[str, str]]) -> None:
    setup.kubectl("-n", "jupyter-users", "delete", "localqueue", "team-b")
    try:
        bad = _only_one_wrong(healthy, *setup.doctor())
    finally:
        setup.kubectl("apply", "-f", str(MANIFESTS / "40-local-queues.yaml"))
    assert (bad["name"], bad["status"]) == ("localqueue.team-b", "missing")
    assert "create LocalQueue team-b in namespace jupyter-users" in bad["fix"]
    assert "team-b-notebooks" in bad["fix"] or "ClusterQueue" in bad["fix"]


def test_a_cluster_queue_without_the_offerings_flavor(
    setup: Setup, healthy: dict[str, dict[str, str]]
) -> None:
    cq = json.loads(setup.kubectl("get", "clusterqueue", "team-a-notebooks", "-o", "json"))
    groups = cq["spec"]["resourceGroups"]
    without = [{**g, "flavors": [f for f in g["flavors"] if f["name"] != "h100"]} for g in groups]
    patch = json.dumps({"spec": {"resourceGroups": without}})
    setup.kubectl("patch", "clusterqueue", "team-a-notebooks", "--type", "merge", "-p", patch)
    try:
        bad = _only_one_wrong(healthy, *setup.doctor())
    finally:
        restore = json.dumps({"spec": {"resourceGroups": groups}})
        setup.kubectl("patch", "clusterqueue", "team-a-notebooks", "--type", "merge", "-p", restore)
    assert (bad["name"], bad["status"]) == ("queue.team-a-notebooks.h100", "missing")
    assert "has no flavor h100" in bad["detail"]
    assert "add flavor h100 with quotas for nvidia.com/gpu" in bad["fix"]


def test_the_node_reader_role_removed(setup: Setup, healthy: dict[str, dict[str, str]]) -> None:
    setup.kubectl("delete", "clusterrole", "gpuaas-node-reader")
    try:
        bad = _only_one_wrong(healthy, *setup.doctor())
    finally:
        setup.kubectl("apply", "-f", str(MANIFESTS / "50-rbac.yaml"))
    assert (bad["name"], bad["status"]) == ("rbac.nodes.cluster", "missing")
    assert "may not get, list, watch nodes cluster-wide" in bad["detail"]
    assert "gpuaas-service-node-reader" in bad["fix"]


def test_a_hub_token_without_read_tokens(setup: Setup, healthy: dict[str, dict[str, str]]) -> None:
    scopes = [s for s in SERVICE_SCOPES if s != "read:tokens"]
    token = setup.hub_post("/users/admin/tokens", {"scopes": scopes, "expires_in": 600})["token"]
    bad = _only_one_wrong(healthy, *setup.doctor(token=token))
    assert (bad["name"], bad["status"]) == ("hub.scopes", "missing")
    assert "lacks read:tokens" in bad["detail"]
    assert "add read:tokens to the scopes of the hub role of the service" in bad["fix"]


def test_prometheus_stopped(setup: Setup, healthy: dict[str, dict[str, str]]) -> None:
    setup.prometheus.stop()
    try:
        bad = _only_one_wrong(healthy, *setup.doctor())
    finally:
        setup.prometheus.start()
    assert (bad["name"], bad["status"]) == ("prometheus", "missing")
    assert "does not answer" in bad["detail"]
    assert "start Prometheus" in bad["fix"]
    # back up: all ok again
    deadline = time.monotonic() + 30
    while True:
        code, rows = setup.doctor()
        if code == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert code == 0, [r for r in rows if r["status"] != "ok"]


def test_an_offering_no_node_advertises(setup: Setup, healthy: dict[str, dict[str, str]]) -> None:
    catalog = yaml.safe_load(DEMO_CATALOG.read_text())
    catalog["offerings"].append(
        {
            "slug": "b200",
            "display_name": "Whole B200",
            "kind": "gpu",
            "resources": {"nvidia.com/gpu": 1},
            "flavor": "h100",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-B200"},
        }
    )
    catalog["tenants"][0]["offerings"].append("b200")
    path = setup.state / "catalog-b200.yaml"
    path.write_text(yaml.safe_dump(catalog))
    bad = _only_one_wrong(healthy, *setup.doctor("--catalog", str(path)))
    assert (bad["name"], bad["status"]) == ("gpu.b200", "missing")
    assert "advertises nvidia.com/gpu" in bad["detail"]
    assert "device plugin" in bad["fix"]
    assert "node_selector" in bad["fix"]


def test_the_job_images_config_map_deleted(
    setup: Setup, healthy: dict[str, dict[str, str]]
) -> None:
    """Where a team runs notebooks as Jobs, the jobs policy's ConfigMap of images must exist
    (docs/deploy.md: without it every notebook Job is refused)."""
    catalog = yaml.safe_load(DEMO_CATALOG.read_text())
    catalog["tenants"][0]["jobs"] = {
        "namespace": "team-a",
        "local_queue": "training",
        "offerings": ["h100"],
    }
    path = setup.state / "catalog-jobs.yaml"
    path.write_text(yaml.safe_dump(catalog))
    code, rows = setup.doctor("--catalog", str(path))
    assert code == 0, [r for r in rows if r["status"] != "ok"]
    with_jobs = {r["name"]: r for r in rows}
    assert with_jobs["jobs.images"]["status"] == "ok"
    assert with_jobs["queue.team-a-training.h100"]["status"] == "ok"
    policy = MANIFESTS / "63-gpuaas-jobs-policy.yaml"
    images = next(
        d for d in yaml.safe_load_all(policy.read_text()) if d and d["kind"] == "ConfigMap"
    )
    setup.kubectl("-n", "jupyterhub", "delete", "configmap", "gpuaas-job-images")
    try:
        bad = _only_one_wrong(with_jobs, *setup.doctor("--catalog", str(path)))
        # Only notebook Jobs wait for it: other ConfigMap, Secret and Job writes go on (a
        # binding's missing parameter refuses all its policy matches, whoever writes).
        setup.kubectl("-n", "team-a", "create", "configmap", "doctor-meanwhile")
        setup.kubectl("-n", "team-a", "delete", "configmap", "doctor-meanwhile")
    finally:
        setup.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(images))  # the doctor's fix
    assert (bad["name"], bad["status"]) == ("jobs.images", "missing")
    assert "every notebook Job is refused" in bad["detail"]
    assert "parameterNotFoundAction is Deny" in bad["detail"]
    assert bad["fix"].startswith("kubectl -n jupyterhub create configmap gpuaas-job-images")
    assert "--from-literal=images=" in bad["fix"]


def _server_on_a_shared_claim(user: str) -> dict[str, Any]:
    """A server pod as KubeSpawner writes it, its home on one claim for the whole team (pending:
    the claim does not exist; the doctor reads the spec)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"doctor-{user}",
            "namespace": "jupyter-users",
            "annotations": {"hub.jupyter.org/username": user, "hub.jupyter.org/servername": ""},
        },
        "spec": {
            "securityContext": {"runAsUser": 1000, "fsGroup": 100},
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/base-notebook",
                    "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                }
            ],
            "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "doctor-team"}}],
        },
    }


def test_two_servers_whose_homes_are_one_claim(
    setup: Setup, healthy: dict[str, dict[str, str]]
) -> None:
    # Fifth audit, finding 6: as uid 1000 both, each can leave a kernel-state snapshot the
    # other loads.
    pods = [_server_on_a_shared_claim(u) for u in ("doctor-ann", "doctor-ben")]
    setup.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(pods))
    try:
        bad = _only_one_wrong(healthy, *setup.doctor())
    finally:
        names = [f"pod/{p['metadata']['name']}" for p in pods]
        setup.kubectl("-n", "jupyter-users", "delete", "--wait=true", "--timeout=60s", *names)
    assert (bad["name"], bad["status"]) == ("homes", "wrong")
    assert bad["detail"].startswith(
        "doctor-ben's server can write into doctor-ann's home (PersistentVolumeClaim"
        " doctor-team, /.jupyter-gpuaas/kernel-state), both as user id 1000 (1 more pair)"
    )
    assert "claim-{username}" in bad["fix"]


def test_everything_restored(setup: Setup) -> None:
    code, rows = setup.doctor()
    assert code == 0, [r for r in rows if r["status"] != "ok"]

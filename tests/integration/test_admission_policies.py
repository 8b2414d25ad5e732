"""The sample organisation's admission policies on the real API server:

- devcluster/manifests/57-gpuaas-service-pod-policy.yaml: the gpuaas service's ServiceAccount
  may change only its own ``gpuaas.jupyter.org/reclaim-*`` annotations on pods;
- devcluster/manifests/61-own-service-account-policy.yaml: a team member's Job runs as their
  own ServiceAccount, never as a teammate's;
- devcluster/manifests/58-hub-secrets-policy.yaml: the hub writes only its token Secrets;
- devcluster/manifests/63-gpuaas-jobs-policy.yaml: in the teams' namespaces the service writes
  and deletes only what was a notebook Job's before and after, and a notebook Job takes only its
  own token and runs the runner in a catalog image;
- devcluster/manifests/59-gpuaas-service-state-policy.yaml: in the notebook namespace the service
  writes only its state ConfigMaps.
"""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.kube import KubeError
from devcluster.testing import Cluster, batch, core
from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
from gpuaas_service.jobs.build import JOB_KIND, build_job, job_name, token_name
from gpuaas_service.jobs.request import validate_job_request
from gpuaas_service.reclaim.handoffs import HANDOFFS_CONFIGMAP
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog, load_catalog_file
from jupyter_gpuaas.core.labels import (
    HUB_TOKEN_SECRET_LABEL,
    HUB_TOKEN_SECRET_SUFFIX,
    JOB_LABEL,
    RECLAIM_PREFIX,
    WARNED_AT,
)

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]

USERS_NS = "jupyter-users"
TEST_LABEL = "gpuaas-test=admission"


def parked_pod(name: str) -> dict[str, Any]:
    """A pod no scheduler places (no node has the pool) and no queue manages (no queue name)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"gpuaas.jupyter.org/team": "team-a", "gpuaas-test": "admission"},
            "annotations": {"hub.jupyter.org/username": "alice"},
        },
        "spec": {
            "automountServiceAccountToken": False,
            "nodeSelector": {"gpuaas.dev/pool": "nowhere"},
            "containers": [{"name": "notebook", "image": "registry.example/nb:1"}],
        },
    }


@pytest.fixture
async def pod(cluster: Cluster) -> AsyncIterator[str]:
    name = f"adm-{uuid.uuid4().hex[:8]}"
    async with cluster.api("jupyterhub", "hub") as hub:
        await core(hub).create_namespaced_pod(USERS_NS, parked_pod(name))
        try:
            yield name
        finally:
            with contextlib.suppress(ApiException):
                await core(hub).delete_namespaced_pod(name, USERS_NS, grace_period_seconds=0)


async def status_of(call: Any) -> int:
    """201 when the call went through, else the API server's status."""
    try:
        await call
    except ApiException as e:
        return int(e.status)
    return 201


async def refused(call: Any) -> ApiException:
    with pytest.raises(ApiException) as err:
        await call
    return err.value


async def test_the_gpuaas_service_may_change_only_its_own_annotations_on_pods(
    cluster: Cluster, pod: str
) -> None:
    async with cluster.api("jupyterhub", "gpuaas") as api:
        v1 = core(api)
        # Its own state: set, changed, removed.
        own = {"metadata": {"annotations": {WARNED_AT: "2026-01-01T00:00:00Z"}}}
        done = await v1.patch_namespaced_pod(pod, USERS_NS, own)
        assert done.metadata.annotations[WARNED_AT] == "2026-01-01T00:00:00Z"
        again = {"metadata": {"annotations": {WARNED_AT: None, RECLAIM_PREFIX + "for": "x"}}}
        done = await v1.patch_namespaced_pod(pod, USERS_NS, again)
        assert WARNED_AT not in done.metadata.annotations

        attempts = {
            "a label": {"metadata": {"labels": {"gpuaas.jupyter.org/team": "team-b"}}},
            "a new label": {"metadata": {"labels": {"sneaky": "1"}}},
            "another annotation": {"metadata": {"annotations": {"hub.jupyter.org/username": "b"}}},
            "a new annotation": {"metadata": {"annotations": {"gpuaas.jupyter.org/user": "b"}}},
            "removing an annotation": {
                "metadata": {"annotations": {"hub.jupyter.org/username": None}}
            },
            "the spec (an image, which pods may change)": {
                "spec": {"containers": [{"name": "notebook", "image": "evil.example/x:1"}]}
            },
            "a finalizer": {"metadata": {"finalizers": ["example.org/hold"]}},
        }
        for what, body in attempts.items():
            err = await refused(v1.patch_namespaced_pod(pod, USERS_NS, body))
            assert err.status == 403, (what, err.status, err.body)
            assert "gpuaas service may change only" in str(err.body), (what, err.body)
        # Mixing its own annotation with anything else is refused as a whole.
        mixed = {"metadata": {"annotations": {WARNED_AT: "x", "other.example/y": "1"}}}
        err = await refused(v1.patch_namespaced_pod(pod, USERS_NS, mixed))
        assert err.status == 403

    async with cluster.api("jupyterhub", "hub") as hub:
        # The policy is about the service alone: the hub (KubeSpawner) still labels its pods.
        current = await core(hub).read_namespaced_pod(pod, USERS_NS)
        assert current.metadata.labels["gpuaas.jupyter.org/team"] == "team-a"
        assert current.spec.containers[0].image == "registry.example/nb:1"
        assert "gpuaas.jupyter.org/user" not in current.metadata.annotations
        relabel = {"metadata": {"labels": {"gpuaas-test": "admission-2"}}}
        done = await core(hub).patch_namespaced_pod(pod, USERS_NS, relabel)
        assert done.metadata.labels["gpuaas-test"] == "admission-2"


def job_as(name: str, service_account: str | None) -> dict[str, Any]:
    """A suspended Job (no pods, no queue) that would run as ``service_account``."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "containers": [{"name": "train", "image": "registry.example/train:1"}],
    }
    if service_account is not None:
        spec["serviceAccountName"] = service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"gpuaas-test": "admission"}},
        "spec": {"suspend": True, "template": {"spec": spec}},
    }


async def test_a_team_member_cannot_run_a_job_as_a_teammate(cluster: Cluster) -> None:
    async with cluster.api("team-a", "alice") as alice:
        jobs = batch(alice)
        try:
            err = await refused(jobs.create_namespaced_job("team-a", job_as("adm-as-bob", "bob")))
            assert err.status == 403, err.body
            assert "may not use the ServiceAccount" in str(err.body)
            # the older field name of the same thing
            legacy = job_as("adm-as-bob-2", None)
            legacy["spec"]["template"]["spec"]["serviceAccount"] = "bob"
            err = await refused(jobs.create_namespaced_job("team-a", legacy))
            assert err.status == 403, err.body
            for name, sa in (("adm-as-alice", "alice"), ("adm-default", None)):
                await jobs.create_namespaced_job("team-a", job_as(name, sa))
            # Kueue-style updates of her Job (its ServiceAccount unchanged) still go through.
            await jobs.patch_namespaced_job(
                "adm-as-alice", "team-a", {"metadata": {"labels": {"touched": "yes"}}}
            )
            async with cluster.api("team-a", "bob") as bob:
                err = await refused(
                    batch(bob).create_namespaced_job("team-a", job_as("adm-bob-as-alice", "alice"))
                )
                assert err.status == 403, err.body
        finally:  # also what a failed run let through
            for job in (await jobs.list_namespaced_job("team-a", label_selector=TEST_LABEL)).items:
                with contextlib.suppress(ApiException):
                    await jobs.delete_namespaced_job(
                        job.metadata.name, "team-a", propagation_policy="Background"
                    )


def secret(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "labels": {"gpuaas-test": "admission", **(labels or {})}},
        "stringData": {"token": "t"},
    }


async def test_the_hub_may_write_only_its_token_secrets(cluster: Cluster) -> None:
    """devcluster/manifests/58-hub-secrets-policy.yaml and 55-hub-secrets-rbac.yaml."""
    tag = uuid.uuid4().hex[:6]
    mine = f"jupyter-adm{tag}{HUB_TOKEN_SECRET_SUFFIX}"
    other = f"adm-other-{tag}"
    token_labels = {HUB_TOKEN_SECRET_LABEL: "true"}
    admin = cluster.info.admin()
    secrets = f"/api/v1/namespaces/{USERS_NS}/secrets"
    admin.request("POST", secrets, secret(other))  # another component's Secret
    try:
        async with cluster.api("jupyterhub", "hub") as api:
            v1 = core(api)
            # What the spawner does: create, replace, own (patch), delete its token Secret.
            await v1.create_namespaced_secret(USERS_NS, secret(mine, token_labels))
            await v1.replace_namespaced_secret(mine, USERS_NS, secret(mine, token_labels))
            await v1.patch_namespaced_secret(mine, USERS_NS, {"metadata": {"labels": {"x": "1"}}})
            await v1.delete_namespaced_secret(mine, USERS_NS)
            # Any other write is refused.
            attempts = {
                "an unlabelled token name": v1.create_namespaced_secret(
                    USERS_NS, secret(f"jupyter-x{tag}{HUB_TOKEN_SECRET_SUFFIX}")
                ),
                "a labelled other name": v1.create_namespaced_secret(
                    USERS_NS, secret(f"adm-{tag}", token_labels)
                ),
                "overwriting another Secret": v1.replace_namespaced_secret(
                    other, USERS_NS, secret(other, token_labels)
                ),
                "labelling another Secret": v1.patch_namespaced_secret(
                    other, USERS_NS, {"metadata": {"labels": token_labels}}
                ),
                "deleting another Secret": v1.delete_namespaced_secret(other, USERS_NS),
            }
            for what, call in attempts.items():
                err = await refused(call)
                assert err.status in (403, 422), (what, err.status, err.body)
                assert "the hub may write only its per-server token Secrets" in str(err.body), what
        kept = admin.get(f"{secrets}/{other}")
        assert kept["data"] == {"token": "dA=="}  # "t", untouched
        assert HUB_TOKEN_SECRET_LABEL not in kept["metadata"]["labels"]
    finally:
        with contextlib.suppress(KubeError):
            admin.request("DELETE", f"{secrets}/{other}")


# ------------------------------------------------------- the service in the teams' namespaces

TEAM_NS = "team-a"
NOTEBOOK_LABELS = {JOB_LABEL: JOB_KIND}
NOT_A_NOTEBOOK_JOBS = "the gpuaas service writes and deletes only notebook Jobs"


def config_map(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": {"gpuaas-test": "admission", **(labels or {})}},
        "data": {"settings": "team's own"},
    }


async def test_the_gpuaas_service_cannot_take_over_or_delete_a_teams_objects(
    cluster: Cluster,
) -> None:
    """A team's own Secret, ConfigMap and Job: the service may not label its way into them (a
    patch would answer with the Secret's data), overwrite or delete them; its own objects
    (labelled before and after) it still writes, owns and deletes."""
    tag = uuid.uuid4().hex[:6]
    theirs = f"adm-team-{tag}"
    mine = f"adm-nb-{tag}"
    admin = cluster.info.admin()
    base = f"/api/v1/namespaces/{TEAM_NS}"
    jobs_path = f"/apis/batch/v1/namespaces/{TEAM_NS}/jobs"
    admin.request("POST", f"{base}/secrets", secret(theirs))
    admin.request("POST", f"{base}/configmaps", config_map(theirs))
    admin.request("POST", jobs_path, job_as(theirs, None))
    label = {"metadata": {"labels": NOTEBOOK_LABELS}}
    try:
        async with cluster.api("jupyterhub", "gpuaas") as api:
            v1, jobs = core(api), batch(api)
            overwrite = {
                "metadata": {"labels": NOTEBOOK_LABELS},
                "stringData": {"token": "mine now"},
            }
            # RBAC grants patch and delete on all three (update: none of them)
            attempts: dict[str, Callable[[], Awaitable[Any]]] = {
                "labelling a team's Secret": lambda: v1.patch_namespaced_secret(
                    theirs, TEAM_NS, label
                ),
                "overwriting a team's Secret": lambda: v1.patch_namespaced_secret(
                    theirs, TEAM_NS, overwrite
                ),
                "deleting a team's Secret": lambda: v1.delete_namespaced_secret(theirs, TEAM_NS),
                "labelling a team's ConfigMap": lambda: v1.patch_namespaced_config_map(
                    theirs, TEAM_NS, label
                ),
                "deleting a team's ConfigMap": lambda: v1.delete_namespaced_config_map(
                    theirs, TEAM_NS
                ),
                "labelling a team's Job": lambda: jobs.patch_namespaced_job(theirs, TEAM_NS, label),
                "deleting a team's Job": lambda: jobs.delete_namespaced_job(theirs, TEAM_NS),
            }
            for what, call in attempts.items():
                err = await refused(call())
                assert err.status == 403, (what, err.status, err.body)
                assert NOT_A_NOTEBOOK_JOBS in str(err.body), (what, err.body)
                assert "dA==" not in str(err.body), what  # the Secret's data never comes back

            # What it does with a notebook Job's own objects (jobs/service.py): create, give an
            # owner (a patch), delete; taking the mark off is refused.
            await v1.create_namespaced_secret(TEAM_NS, secret(mine, NOTEBOOK_LABELS))
            await v1.patch_namespaced_secret(mine, TEAM_NS, {"metadata": {"labels": {"x": "1"}}})
            unmark = {"metadata": {"labels": {JOB_LABEL: None}}}
            err = await refused(v1.patch_namespaced_secret(mine, TEAM_NS, unmark))
            assert err.status == 403, err.body
            await v1.delete_namespaced_secret(mine, TEAM_NS)
            await v1.create_namespaced_config_map(TEAM_NS, config_map(mine, NOTEBOOK_LABELS))
            await v1.patch_namespaced_config_map(mine, TEAM_NS, {"data": {"more": "1"}})
            await v1.delete_namespaced_config_map(mine, TEAM_NS)

        kept = admin.get(f"{base}/secrets/{theirs}")
        assert kept["data"] == {"token": "dA=="}
        assert JOB_LABEL not in kept["metadata"]["labels"]
        assert JOB_LABEL not in admin.get(f"{base}/configmaps/{theirs}")["metadata"]["labels"]
        assert JOB_LABEL not in admin.get(f"{jobs_path}/{theirs}")["metadata"]["labels"]
    finally:
        for path in (f"{base}/secrets/{theirs}", f"{base}/configmaps/{theirs}"):
            with contextlib.suppress(KubeError):
                admin.request("DELETE", path)
        with contextlib.suppress(KubeError):
            admin.request("DELETE", f"{jobs_path}/{theirs}", {"propagationPolicy": "Background"})
        for path in (f"{base}/secrets/{mine}", f"{base}/configmaps/{mine}"):
            with contextlib.suppress(KubeError):
                admin.request("DELETE", path)


def notebook_job(tag: str) -> dict[str, Any]:
    """The Job the service builds (jobs/build.py) for alice's notebook on the demo catalog."""
    source = load_catalog_file(str(REPO_ROOT / "spawner" / "demo-catalog.yaml"))
    data = copy.deepcopy(dict(source.data))
    for tenant in data["tenants"]:
        if tenant["name"] == TEAM_NS:
            tenant["jobs"] = {"namespace": TEAM_NS, "local_queue": "training"}
    catalog = build_catalog([CatalogSource(source.origin, data)])
    body = {
        "team": TEAM_NS,
        "path": "adm.ipynb",
        "notebook": {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []},
        "offering": "local-mig-1g",
    }
    request = validate_job_request(body, catalog, "alice", [TEAM_NS])
    name = job_name("adm.ipynb", tag)
    return build_job(request, name=name, token_sha="0" * 64, service_url="http://gpuaas/")


def _container(job: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return container


async def test_a_notebook_job_takes_only_its_own_token_and_runs_a_catalog_image(
    cluster: Cluster,
) -> None:
    """Requests are dry runs: admission runs in full, nothing is stored, Kueue sees nothing."""
    job = notebook_job(uuid.uuid4().hex[:6])
    name = job["metadata"]["name"]
    assert _container(job)["image"] == "localhost/jupyter-gpuaas-dev:local"
    own_token = {"secretKeyRef": {"name": token_name(name), "key": "token"}}
    assert {"name": "GPUAAS_JOB_TOKEN", "valueFrom": own_token} in _container(job)["env"]

    def changed(**container: Any) -> dict[str, Any]:
        out = copy.deepcopy(job)
        _container(out).update(container)
        return out

    env = _container(job)["env"]
    other_secret = {"secretKeyRef": {"name": "team-a-database", "key": "password"}}
    a_config_map = {"configMapKeyRef": {"name": "team-a-settings", "key": "url"}}
    attempts = {
        "another Secret in env": changed(env=[*env, {"name": "P", "valueFrom": other_secret}]),
        "a ConfigMap in env": changed(env=[*env, {"name": "U", "valueFrom": a_config_map}]),
        "a Secret as envFrom": changed(envFrom=[{"secretRef": {"name": "team-a-database"}}]),
        "a ConfigMap as envFrom": changed(envFrom=[{"configMapRef": {"name": "team-a-settings"}}]),
        "an image not in the catalog": changed(image="registry.example/miner:1"),
        "another command": changed(command=["sh", "-c", "cat /proc/1/environ"]),
        "arguments": changed(args=["--other"]),
    }
    async with cluster.api("jupyterhub", "gpuaas") as api:
        jobs = batch(api)
        created = await jobs.create_namespaced_job(TEAM_NS, job, dry_run="All")
        assert created.metadata.name == name
        for what, body in attempts.items():
            err = await refused(jobs.create_namespaced_job(TEAM_NS, body, dry_run="All"))
            assert err.status == 403, (what, err.status, err.body)
            assert "a notebook Job" in str(err.body), (what, err.body)
        err = await refused(
            jobs.create_namespaced_job(TEAM_NS, attempts["an image not in the catalog"])
        )
        assert "registry.example/miner:1 is not" in str(err.body)


async def test_in_the_notebook_namespace_the_service_writes_only_its_state_config_maps(
    cluster: Cluster,
) -> None:
    """RBAC grants creating any ConfigMap there (create cannot be limited to a name)."""
    planted = f"adm-planted-{uuid.uuid4().hex[:6]}"
    admin = cluster.info.admin()
    try:
        async with cluster.api("jupyterhub", "gpuaas") as api:
            v1 = core(api)
            err = await refused(v1.create_namespaced_config_map(USERS_NS, config_map(planted)))
            assert err.status == 403, err.body
            assert "writes only its state ConfigMaps" in str(err.body)
            generated = config_map("")
            del generated["metadata"]["name"]
            generated["metadata"]["generateName"] = "adm-planted-"
            err = await refused(v1.create_namespaced_config_map(USERS_NS, generated))
            assert err.status == 403, err.body  # its name is made before admission
            assert "writes only its state ConfigMaps" in str(err.body)
            # its own state objects: admitted (a dry run; 409 where the service made it already)
            for own in (HANDOFFS_CONFIGMAP, JOURNAL_CONFIGMAP):
                call = v1.create_namespaced_config_map(USERS_NS, config_map(own), dry_run="All")
                assert await status_of(call) in (201, 409), own
    finally:
        with contextlib.suppress(KubeError):
            admin.request("DELETE", f"/api/v1/namespaces/{USERS_NS}/configmaps/{planted}")

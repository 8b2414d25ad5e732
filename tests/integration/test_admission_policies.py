"""The sample organisation's admission policies on the real API server (issue 13, point 10):

- devcluster/manifests/57-gpuaas-service-pod-policy.yaml: the gpuaas service's ServiceAccount
  may change only its own ``gpuaas.jupyter.org/reclaim-*`` annotations on pods;
- devcluster/manifests/61-own-service-account-policy.yaml: a team member's Job runs as their
  own ServiceAccount, never as a teammate's;
- devcluster/manifests/58-hub-secrets-policy.yaml: the hub writes only its token Secrets.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.kube import KubeError
from devcluster.testing import Cluster, batch, core
from jupyter_gpuaas.core.labels import (
    HUB_TOKEN_SECRET_LABEL,
    HUB_TOKEN_SECRET_SUFFIX,
    RECLAIM_PREFIX,
    WARNED_AT,
)

pytestmark = pytest.mark.integration

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

"""Homes on persistent volumes: a claim of the default StorageClass is provisioned as a directory
(devcluster/provisioner.py), and the node agent gives a pod that directory at its home, so that
what one pod saved is there for the next; a claim that cannot be provisioned is told why."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.kube import KubeError
from devcluster.testing import Cluster, core, on_local_node, wait_for

pytestmark = pytest.mark.integration

NS = "jupyter-users"


def claim(name: str, size: str) -> dict[str, Any]:
    # No storageClassName: the cluster's default class, as z2jh's claims leave it.
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def home_pod(name: str, claim_name: str, script: str) -> dict[str, Any]:
    """A pod on the node agent's node with the claim at /home/jovyan, as KubeSpawner mounts it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            **on_local_node(),
            "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": claim_name}}],
            "containers": [
                {
                    "name": "notebook",
                    "image": "quay.io/jupyter/base-notebook",
                    "command": ["python3", "-c", script],
                    "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                    "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                }
            ],
        },
    }


WRITE = "open('notes.txt', 'w').write('kept')"
READ = "import sys; sys.exit(0 if open('notes.txt').read() == 'kept' else 3)"


async def test_what_a_pod_saves_in_its_home_is_there_for_the_next(cluster: Cluster) -> None:
    admin = cluster.info.admin()
    async with cluster.api("jupyterhub", "hub") as api:
        v1 = core(api)

        async def finished(name: str) -> tuple[str, str] | None:
            pod = await v1.read_namespaced_pod(name, NS)
            if pod.status.phase not in ("Succeeded", "Failed"):
                return None
            return str(pod.status.phase), str(pod.status.message or "")

        async def delete_pod(name: str) -> None:
            with contextlib.suppress(ApiException):
                await v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)

            async def gone() -> bool:
                return name not in {
                    p.metadata.name for p in (await v1.list_namespaced_pod(NS)).items
                }

            await wait_for(f"{name} gone", gone, 60)

        await v1.create_namespaced_persistent_volume_claim(NS, claim("claim-keeps", "1Gi"))
        try:

            async def bound() -> str | None:
                pvc = await v1.read_namespaced_persistent_volume_claim("claim-keeps", NS)
                return pvc.spec.volume_name if pvc.status.phase == "Bound" else None

            volume = await wait_for("the claim bound", bound, 60)
            directory = Path(
                admin.get(f"/api/v1/persistentvolumes/{volume}")["spec"]["hostPath"]["path"]
            )
            assert directory.parent == cluster.info.settings.volumes_dir

            await v1.create_namespaced_pod(NS, home_pod("writes-notes", "claim-keeps", WRITE))
            assert await wait_for("the writer done", lambda: finished("writes-notes"), 60) == (
                "Succeeded",
                "",
            )
            await delete_pod("writes-notes")
            assert (directory / "notes.txt").read_text() == "kept"  # outlived its pod

            await v1.create_namespaced_pod(NS, home_pod("reads-notes", "claim-keeps", READ))
            assert await wait_for("the reader done", lambda: finished("reads-notes"), 60) == (
                "Succeeded",
                "",
            )
            await delete_pod("reads-notes")
        finally:
            with contextlib.suppress(ApiException):
                await v1.delete_namespaced_persistent_volume_claim("claim-keeps", NS)

        # The claim gone, its volume (policy Delete) goes, directory and all.
        async def volume_gone() -> bool:
            try:
                admin.get(f"/api/v1/persistentvolumes/{volume}")
            except KubeError as e:
                return e.status == 404
            return False

        await wait_for("the released volume deleted", volume_gone, 60)
        assert not directory.exists()


async def test_a_claim_that_cannot_be_provisioned_is_told_why(cluster: Cluster) -> None:
    async with cluster.api("jupyterhub", "hub") as api:
        v1 = core(api)
        await v1.create_namespaced_persistent_volume_claim(NS, claim("claim-too-big", "1Ti"))
        try:

            async def told() -> str | None:
                events = await v1.list_namespaced_event(
                    NS, field_selector="involvedObject.name=claim-too-big"
                )
                failed = [e.message for e in events.items if e.reason == "ProvisioningFailed"]
                return failed[0] if failed else None

            message = await wait_for("a ProvisioningFailed event", told, 30)
            assert "1Ti requested, more than the 20 GiB" in message
            pvc = await v1.read_namespaced_persistent_volume_claim("claim-too-big", NS)
            assert (pvc.status.phase, pvc.spec.volume_name) == ("Pending", None)
        finally:
            await v1.delete_namespaced_persistent_volume_claim("claim-too-big", NS)


async def test_a_pod_whose_claim_comes_later_waits_for_it_and_starts(cluster: Cluster) -> None:
    """A kubelet never fails a pod for a claim it cannot read yet (refused by the Node authorizer
    a moment after the binding, not there, still binding): its volume manager reads again and the
    pod stays Pending until it mounts. Here the pod is bound to the node before its claim exists
    (``nodeName`` set, so no scheduler waits for the claim), so the agent's first reads find
    nothing; once the claim is made and bound, the pod must start and see its home."""
    async with cluster.api("jupyterhub", "hub") as api:
        v1 = core(api)
        pod = home_pod("waits-for-claim", "claim-later", WRITE)
        pod["spec"]["nodeName"] = "local-0"
        await v1.create_namespaced_pod(NS, pod)
        try:

            async def read_tried() -> bool:
                # the agent has tried the claim: it reported the pod (Pending) while it waits
                p = await v1.read_namespaced_pod("waits-for-claim", NS)
                return p.status.start_time is not None

            await wait_for("the agent to take the pod", read_tried, 30)
            waiting = await v1.read_namespaced_pod("waits-for-claim", NS)
            assert waiting.status.phase == "Pending", waiting.status

            await v1.create_namespaced_persistent_volume_claim(NS, claim("claim-later", "1Gi"))

            async def finished() -> tuple[str, str] | None:
                p = await v1.read_namespaced_pod("waits-for-claim", NS)
                if p.status.phase not in ("Succeeded", "Failed"):
                    return None
                return str(p.status.phase), str(p.status.reason or "")

            assert await wait_for("the pod done", finished, 60) == ("Succeeded", "")
            pvc = await v1.read_namespaced_persistent_volume_claim("claim-later", NS)
            volume = cluster.info.admin().get(f"/api/v1/persistentvolumes/{pvc.spec.volume_name}")
            assert (Path(volume["spec"]["hostPath"]["path"]) / "notes.txt").read_text() == "kept"
        finally:
            with contextlib.suppress(ApiException):
                await v1.delete_namespaced_pod("waits-for-claim", NS, grace_period_seconds=0)
            with contextlib.suppress(ApiException):
                await v1.delete_namespaced_persistent_volume_claim("claim-later", NS)

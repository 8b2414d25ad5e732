"""Persistent volumes for the dev cluster: a small provisioner of local directories.

As on a real cluster, a PersistentVolumeClaim of the StorageClass ``local-home`` (the cluster's
default class) gets a PersistentVolume made for it: ``devcluster up`` starts this process
(``python -m devcluster.provisioner``) with an identity of its own, bound to the ClusterRole
below, the way an external provisioner runs. It

- creates, for each pending claim of its class, a directory ``<state>/volumes/<pv name>`` and a
  ``hostPath`` PersistentVolume of that directory, pre-bound to the claim (``claimRef`` with the
  claim's UID), which kube-controller-manager's volume controller then binds;
- refuses what a local directory cannot honour, with a ``ProvisioningFailed`` Warning Event on
  the claim that says why (the claim stays Pending, and so does a pod that needs it): another
  access mode than ReadWriteOnce / ReadWriteOncePod, a block volume, a size above ``--max-size``;
- deletes a volume of its own whose claim is gone (``Released``, reclaim policy ``Delete``),
  directory and all; a ``Retain`` volume is left as it is.

The node agent gives a pod the directory of the volume mounted at its container's home
(devcluster/nodeagent.py); kwok's nodes run nothing, so their pods only need the claim bound.
Decisions are pure (:func:`plan`); the loop lists claims and volumes every half second.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster.kube import Kube, KubeError

log = logging.getLogger("devcluster.provisioner")

STORAGE_CLASS = "local-home"
PROVISIONER = "devcluster.gpuaas.dev/local-home"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ACCESS_MODES = frozenset({"ReadWriteOnce", "ReadWriteOncePod"})
DEFAULT_MAX_SIZE = "20Gi"
POLL_SECONDS = 0.5

IDENTITY = "devcluster:local-home-provisioner"
"""The provisioner's user name (its client certificate's common name)."""

_SUFFIXES = {
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "": 1,
}


def manifests() -> str:
    """The StorageClass (the cluster's default) and the provisioner's RBAC, applied at start."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {
                "name": STORAGE_CLASS,
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "devcluster:local-home-provisioner"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["persistentvolumes"],
                    "verbs": ["get", "list", "watch", "create", "delete"],
                },
                {
                    "apiGroups": [""],
                    "resources": ["persistentvolumeclaims"],
                    "verbs": ["get", "list", "watch"],
                },
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "devcluster:local-home-provisioner"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "devcluster:local-home-provisioner",
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY}
            ],
        },
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def quantity_bytes(text: str) -> int:
    """Bytes of a Kubernetes storage quantity ("10Gi", "500M", "1024"); ValueError if not one."""
    text = str(text).strip()
    for suffix in sorted(_SUFFIXES, key=len, reverse=True):
        if suffix and text.endswith(suffix):
            number = text[: -len(suffix)]
            break
    else:
        number, suffix = text, ""
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"{text!r} is not a storage size") from None
    if value < 0:
        raise ValueError(f"{text!r} is not a storage size")
    return int(value * _SUFFIXES[suffix])


@dataclass(frozen=True)
class Provision:
    """Make a volume for ``claim`` (its directory and PersistentVolume)."""

    claim: Mapping[str, Any]
    volume: dict[str, Any]
    directory: Path


@dataclass(frozen=True)
class Refuse:
    """Tell ``claim`` why it gets no volume (a Warning Event, once per reason)."""

    claim: Mapping[str, Any]
    message: str


@dataclass(frozen=True)
class Remove:
    """Delete a released volume of ours and its directory."""

    name: str
    directory: Path


Action = Provision | Refuse | Remove


def _ours(claim: Mapping[str, Any]) -> bool:
    spec = claim.get("spec") or {}
    annotations = (claim.get("metadata") or {}).get("annotations") or {}
    return bool(
        spec.get("storageClassName") == STORAGE_CLASS
        or annotations.get("volume.kubernetes.io/storage-provisioner") == PROVISIONER
    )


def refusal(claim: Mapping[str, Any], max_bytes: int) -> str | None:
    """Why a local directory cannot be this claim's volume, or None."""
    spec = claim.get("spec") or {}
    modes = set(spec.get("accessModes") or [])
    if not modes or not modes <= ACCESS_MODES:
        return (
            f"access modes {sorted(modes)} cannot be provided: {STORAGE_CLASS} volumes are "
            "directories of one node (ReadWriteOnce or ReadWriteOncePod)"
        )
    if spec.get("volumeMode", "Filesystem") != "Filesystem":
        return f"volumeMode {spec.get('volumeMode')} cannot be provided: only Filesystem"
    requested = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    if requested is None:
        return "no storage size requested (spec.resources.requests.storage)"
    try:
        size = quantity_bytes(requested)
    except ValueError as e:
        return str(e)
    if size > max_bytes:
        return (
            f"{requested} requested, more than the {max_bytes // 1024**3} GiB a {STORAGE_CLASS} "
            "volume may have on this cluster"
        )
    return None


def volume_for(claim: Mapping[str, Any], directory: Path) -> dict[str, Any]:
    """The PersistentVolume for ``claim``: its directory, pre-bound to the claim's UID."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": list(spec["accessModes"]),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(directory), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
        },
    }


def plan(
    claims: Sequence[Mapping[str, Any]],
    volumes: Sequence[Mapping[str, Any]],
    root: Path,
    max_bytes: int,
) -> list[Action]:
    """What to do now: a volume for each pending claim of ours that has none (or why not), and
    the removal of each released volume of ours whose policy is Delete."""
    bound_to = {
        str(((v.get("spec") or {}).get("claimRef") or {}).get("uid"))
        for v in volumes
        if (v.get("spec") or {}).get("claimRef")
    }
    actions: list[Action] = []
    for claim in claims:
        meta, spec = claim.get("metadata") or {}, claim.get("spec") or {}
        pending = (claim.get("status") or {}).get("phase", "Pending") == "Pending"
        if not pending or spec.get("volumeName") or meta.get("deletionTimestamp"):
            continue
        if not _ours(claim) or str(meta.get("uid")) in bound_to:
            continue
        why = refusal(claim, max_bytes)
        if why is not None:
            actions.append(Refuse(claim, why))
            continue
        directory = root / f"pvc-{meta['uid']}"
        actions.append(Provision(claim, volume_for(claim, directory), directory))
    for v in volumes:
        meta, spec = v.get("metadata") or {}, v.get("spec") or {}
        if (meta.get("annotations") or {}).get(PROVISIONED_BY) != PROVISIONER:
            continue
        released = (v.get("status") or {}).get("phase") in ("Released", "Failed")
        if released and spec.get("persistentVolumeReclaimPolicy") == "Delete":
            path = Path(str((spec.get("hostPath") or {}).get("path", "")))
            if path.parent == root:  # never anything outside our directory
                actions.append(Remove(str(meta["name"]), path))
    return actions


class Provisioner:
    """The loop: list, plan, act; refusals told once per claim and reason."""

    def __init__(self, kube: Kube, root: Path, max_bytes: int) -> None:
        self.kube = kube
        self.root = root
        self.max_bytes = max_bytes
        self._told: set[tuple[str, str]] = set()

    def once(self) -> None:
        claims = self.kube.get("/api/v1/persistentvolumeclaims")["items"]
        volumes = self.kube.get("/api/v1/persistentvolumes")["items"]
        for action in plan(claims, volumes, self.root, self.max_bytes):
            try:
                self._act(action)
            except (KubeError, OSError) as e:
                log.warning("%s: %s", type(action).__name__, e)

    def _act(self, action: Action) -> None:
        if isinstance(action, Provision):
            action.directory.mkdir(parents=True, exist_ok=True)
            action.directory.chmod(0o777)  # a home for whichever user the pod runs as
            try:
                self.kube.request("POST", "/api/v1/persistentvolumes", action.volume)
            except KubeError as e:
                if e.status != 409:  # made on an earlier round
                    raise
            meta = action.claim["metadata"]
            log.info(
                "provisioned %s for %s/%s",
                action.volume["metadata"]["name"],
                meta["namespace"],
                meta["name"],
            )
            self._event(
                action.claim,
                "Normal",
                "ProvisioningSucceeded",
                f"Successfully provisioned volume {action.volume['metadata']['name']}",
            )
        elif isinstance(action, Refuse):
            key = (str(action.claim["metadata"]["uid"]), action.message)
            if key not in self._told:
                self._told.add(key)
                self._event(action.claim, "Warning", "ProvisioningFailed", action.message)
        else:
            shutil.rmtree(action.directory, ignore_errors=True)
            try:
                self.kube.request("DELETE", f"/api/v1/persistentvolumes/{action.name}")
            except KubeError as e:
                if e.status != 404:
                    raise
            log.info("deleted %s and its directory", action.name)

    def _event(self, claim: Mapping[str, Any], etype: str, reason: str, message: str) -> None:
        meta = claim["metadata"]
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "type": etype,
            "reason": reason,
            "message": message,
            "source": {"component": PROVISIONER},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self.kube.request("POST", f"/api/v1/namespaces/{meta['namespace']}/events", body)
        except (KubeError, OSError) as e:
            log.warning("event for %s/%s: %s", meta["namespace"], meta["name"], e)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster.provisioner", description=__doc__)
    parser.add_argument("--server", required=True, help="the API server's URL")
    parser.add_argument("--ca", required=True, help="the cluster CA certificate")
    parser.add_argument("--cert", required=True, help="the provisioner's client certificate")
    parser.add_argument("--key", required=True, help="its key")
    parser.add_argument("--root", required=True, help="directory that holds the volumes")
    parser.add_argument("--ready-file", help="touched after the first round")
    parser.add_argument(
        "--max-size", default=DEFAULT_MAX_SIZE, help=f"largest volume (default {DEFAULT_MAX_SIZE})"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    kube = Kube(args.server, Path(args.ca), Path(args.cert), Path(args.key))
    root = Path(args.root)
    root.mkdir(parents=True, exist_ok=True)
    provisioner = Provisioner(kube, root, quantity_bytes(args.max_size))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    first = True
    while True:
        try:
            provisioner.once()
            if first and args.ready_file:
                Path(args.ready_file).touch()
            first = False
        except (KubeError, OSError) as e:
            log.warning("listing claims and volumes: %s", e)
        time.sleep(POLL_SECONDS)


if __name__ == "__main__":
    sys.exit(main())

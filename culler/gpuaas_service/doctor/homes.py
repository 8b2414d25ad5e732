"""Whose servers can write into another user's home, read from the running servers' pods (pure).

A kernel loads a snapshot of its variables only when the files are owned by the kernel's user id
and the manifest names it (docs/kernel-state.md, "Safety"). That tells users apart only where
they have user ids of their own: under zero-to-jupyterhub every user's server runs as uid 1000,
so what keeps alice's snapshot out of bob's kernel is that no server of hers can write into
bob's home. Each user's home a volume of their own (KubeSpawner's ``claim-{username}``), or a
``subPath`` of their own on a shared one, holds that; a volume mounted whole and writable in
every user's server (a shared NFS export, a team claim) does not.

What is read of each pod: its hub user (KubeSpawner's annotation), the notebook container's
user id (``runAsUser``, the container's over the pod's; unset: the image's, taken as the same
for everyone), its home (``HOME`` from its env, else ``/home/jovyan``, the docker-stacks' and
z2jh's), and its volume mounts: the source of each volume (a claim, an NFS export, a host path,
another kind's fields; a pod's own ``emptyDir``, ``ephemeral`` claim, ConfigMap, Secret,
downward API or projected volume is nobody else's) and the mount's ``subPath``. Two claims on
one PersistentVolume look like two volumes here (reading PersistentVolumes is not the
service's to do).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaas_service.model.pods import hub_server
from jupyter_gpuaas.core.kueue import as_list, as_mapping

__all__ = ["DEFAULT_HOME", "STATE_FOLDER", "SharedHome", "server_users", "shared_homes"]

DEFAULT_HOME = "/home/jovyan"
STATE_FOLDER = ".jupyter-gpuaas/kernel-state"
"""The snapshots' folder in the home (``GPUaaS.kernel_state_dir``'s default)."""

_OWN_KINDS = ("emptyDir", "ephemeral", "configMap", "secret", "downwardAPI", "projected")
"""Volume kinds that are the pod's own: no other pod sees what is written there."""


@dataclass(frozen=True)
class SharedHome:
    """``writer``'s server can write where ``owner``'s server keeps its snapshots."""

    owner: str
    writer: str
    volume: str
    """The storage, in words (``PersistentVolumeClaim home``, ``NFS nfs-1:/export``)."""
    path: str
    """The snapshots' folder on that storage (``/alice/.jupyter-gpuaas/kernel-state``)."""
    uid: int | None
    """The user id both run as (``None``: not set on either pod, the image's)."""


@dataclass(frozen=True)
class _Mount:
    source: str  # "": the pod's own
    sub_path: str
    path: str
    writable: bool


@dataclass(frozen=True)
class _Server:
    user: str
    uid: int | None
    home: str
    mounts: tuple[_Mount, ...]


def _source(volume: Mapping[str, Any]) -> str:
    """The storage a volume is, in words; "" for one that is the pod's own."""
    if not volume or any(kind in volume for kind in _OWN_KINDS):
        return ""
    claim = as_mapping(volume.get("persistentVolumeClaim"))
    if claim:
        return f"PersistentVolumeClaim {claim.get('claimName')}"
    nfs = as_mapping(volume.get("nfs"))
    if nfs:
        return f"NFS {nfs.get('server')}:{posixpath.normpath(str(nfs.get('path') or '/'))}"
    host = as_mapping(volume.get("hostPath"))
    if host:
        return f"hostPath {posixpath.normpath(str(host.get('path') or '/'))}"
    kinds = {k: v for k, v in volume.items() if k != "name"}
    return "volume " + json.dumps(kinds, sort_keys=True, separators=(",", ":"))


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _server(pod: Mapping[str, Any]) -> _Server | None:
    named = hub_server(pod)
    spec = as_mapping(pod.get("spec"))
    containers = [as_mapping(c) for c in as_list(spec.get("containers"))]
    phase = as_mapping(pod.get("status")).get("phase")
    if named is None or not containers or phase in ("Succeeded", "Failed"):
        return None
    notebook = next((c for c in containers if c.get("name") == "notebook"), containers[0])
    uid = as_mapping(notebook.get("securityContext")).get("runAsUser")
    if uid is None:
        uid = as_mapping(spec.get("securityContext")).get("runAsUser")
    env = [as_mapping(e) for e in as_list(notebook.get("env"))]
    home = next((e.get("value") for e in env if e.get("name") == "HOME"), None)
    if not isinstance(home, str) or not home.startswith("/"):
        home = DEFAULT_HOME
    volumes = {as_mapping(v).get("name"): as_mapping(v) for v in as_list(spec.get("volumes"))}
    mounts = tuple(
        _Mount(
            _source(volumes.get(m.get("name"), {})),
            posixpath.normpath("/" + str(m.get("subPath") or m.get("subPathExpr") or "")),
            posixpath.normpath(str(m.get("mountPath") or "/")),
            not m.get("readOnly"),
        )
        for m in map(as_mapping, as_list(notebook.get("volumeMounts")))
    )
    return _Server(
        named[0], uid if isinstance(uid, int) else None, posixpath.normpath(home), mounts
    )


def server_users(pods: Iterable[Mapping[str, Any]]) -> set[str]:
    """The hub users whose servers' pods these are."""
    return {s.user for s in map(_server, pods) if s is not None}


def shared_homes(pods: Sequence[Mapping[str, Any]]) -> list[SharedHome]:
    """Every pair of users where one's server can write (a writable mount of the same storage
    that holds the folder) into the folder where the other's keeps its snapshots, while both
    run as one user id (or either as the image's); sorted, one per pair."""
    servers = [s for s in map(_server, pods) if s is not None]
    found: dict[tuple[str, str], SharedHome] = {}
    for owner in servers:
        folder = posixpath.join(owner.home, STATE_FOLDER)
        holding = [m for m in owner.mounts if _within(folder, m.path)]
        if not holding:
            continue  # in the container's own filesystem
        home = max(holding, key=lambda m: len(m.path))
        if not home.source:
            continue
        where = posixpath.normpath(
            posixpath.join(home.sub_path, posixpath.relpath(folder, home.path))
        )
        for writer in servers:
            if writer.user == owner.user or (key := (owner.user, writer.user)) in found:
                continue
            if owner.uid is not None and writer.uid is not None and owner.uid != writer.uid:
                continue  # the owner check tells them apart
            if any(
                m.writable and m.source == home.source and _within(where, m.sub_path)
                for m in writer.mounts
            ):
                uid = owner.uid if owner.uid is not None else writer.uid
                found[key] = SharedHome(owner.user, writer.user, home.source, where, uid)
    return [found[k] for k in sorted(found)]

"""The doctor's ``homes`` line (doctor/homes.py, checks.homes_check): under z2jh every server
runs as uid 1000, so a kernel-state snapshot is the user's own only where no other user's
server can write into their home (fifth audit, finding 6). Tables of plain pods as KubeSpawner
and z2jh write them."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.doctor.checks import Facts, Read, homes_check, run_checks
from gpuaas_service.doctor.homes import SharedHome, shared_homes

FOLDER = ".jupyter-gpuaas/kernel-state"


def server(
    user: str,
    *,
    volumes: dict[str, dict[str, Any]],
    mounts: list[dict[str, Any]],
    uid: int | None = 1000,
    home: str | None = None,
    phase: str = "Running",
) -> dict[str, Any]:
    """A user's server pod: the notebook container's ``mounts`` of ``volumes`` (name → source);
    ``uid`` on the pod as z2jh's ``singleuser.uid`` puts it (``None``: unset)."""
    container: dict[str, Any] = {"name": "notebook", "volumeMounts": mounts}
    if home is not None:
        container["env"] = [
            {"name": "JUPYTERHUB_USER", "value": user},
            {"name": "HOME", "value": home},
        ]
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": n, **source} for n, source in volumes.items()],
    }
    if uid is not None:
        spec["securityContext"] = {"runAsUser": uid, "fsGroup": 100}
    return {
        "metadata": {
            "name": f"jupyter-{user}",
            "annotations": {"hub.jupyter.org/username": user, "hub.jupyter.org/servername": ""},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def own_claim(user: str, **kw: Any) -> dict[str, Any]:
    """z2jh's default: a claim per user (claim-{username}) at /home/jovyan."""
    return server(
        user,
        volumes={"volume-home": {"persistentVolumeClaim": {"claimName": f"claim-{user}"}}},
        mounts=[{"name": "volume-home", "mountPath": "/home/jovyan"}],
        **kw,
    )


def static_claim(user: str, *extra: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """z2jh's ``storage.type: static``: one claim, a subPath per user; ``extra`` mounts of it."""
    return server(
        user,
        volumes={"home": {"persistentVolumeClaim": {"claimName": "homes"}}},
        mounts=[{"name": "home", "mountPath": "/home/jovyan", "subPath": user}, *extra],
        **kw,
    )


def nfs_homes(user: str, **kw: Any) -> dict[str, Any]:
    """One NFS export mounted whole at /home, each user's home a folder of it."""
    return server(
        user,
        volumes={"homes": {"nfs": {"server": "nfs-1", "path": "/export/"}}},
        mounts=[{"name": "homes", "mountPath": "/home"}],
        home=f"/home/{user}",
        **kw,
    )


def ephemeral(user: str) -> dict[str, Any]:
    return server(user, volumes={"scratch": {"emptyDir": {}}}, mounts=[])


SHARED_WHOLE = {"name": "home", "mountPath": "/home/jovyan/shared"}


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        ([own_claim("alice"), own_claim("bob")], []),
        ([static_claim("alice"), static_claim("bob")], []),
        ([ephemeral("alice"), ephemeral("bob")], []),
        (
            [nfs_homes("alice"), nfs_homes("bob")],
            [
                SharedHome("alice", "bob", "NFS nfs-1:/export", f"/alice/{FOLDER}", 1000),
                SharedHome("bob", "alice", "NFS nfs-1:/export", f"/bob/{FOLDER}", 1000),
            ],
        ),
        # the whole claim mounted in every server as a "shared" folder: each home reachable
        (
            [static_claim("alice", SHARED_WHOLE), static_claim("bob", SHARED_WHOLE)],
            [
                SharedHome("alice", "bob", "PersistentVolumeClaim homes", f"/alice/{FOLDER}", 1000),
                SharedHome("bob", "alice", "PersistentVolumeClaim homes", f"/bob/{FOLDER}", 1000),
            ],
        ),
        # ... read-only: nobody writes into another's home
        (
            [
                static_claim("alice", {**SHARED_WHOLE, "readOnly": True}),
                static_claim("bob", {**SHARED_WHOLE, "readOnly": True}),
            ],
            [],
        ),
        # one who mounts it whole reaches the other's home, not the other way round
        (
            [static_claim("alice", SHARED_WHOLE), static_claim("bob")],
            [SharedHome("bob", "alice", "PersistentVolumeClaim homes", f"/bob/{FOLDER}", 1000)],
        ),
        # user ids of their own: the owner check tells them apart
        ([nfs_homes("alice", uid=1001), nfs_homes("bob", uid=1002)], []),
        # no user id set: the image's, the same for everyone
        (
            [nfs_homes("alice", uid=None), nfs_homes("bob", uid=None)],
            [
                SharedHome("alice", "bob", "NFS nfs-1:/export", f"/alice/{FOLDER}", None),
                SharedHome("bob", "alice", "NFS nfs-1:/export", f"/bob/{FOLDER}", None),
            ],
        ),
        # two servers of one user share their home; a finished pod is nobody's server
        (
            [
                nfs_homes("alice"),
                {**nfs_homes("alice"), "metadata": {**nfs_homes("alice")["metadata"]}},
                nfs_homes("bob", phase="Succeeded"),
            ],
            [],
        ),
    ],
)
def test_whose_server_can_write_into_anothers_home(
    pods: list[dict[str, Any]], expected: list[SharedHome]
) -> None:
    assert shared_homes(pods) == expected


def facts(pods: Read[Any] | None) -> Facts:
    down: Read[Any] = Read.failed("not read in this test")
    return Facts(
        api_groups=Read({}),
        kueue_version=down,
        kueue_version_source="",
        flavors=down,
        cluster_queues=down,
        cohorts=down,
        local_queues=down,
        nodes=down,
        access=[],
        admission_policies=down,
        admission_bindings=down,
        hub=None,
        prometheus=None,
        catalog=down,
        catalog_file="",
        policy_file="",
        policy_problems=Read([]),
        notebook_pods=pods,
    )


def test_a_shared_home_is_wrong_and_says_who_can_reach_whom_and_the_fix() -> None:
    check = homes_check(facts(Read([nfs_homes("alice"), nfs_homes("bob"), nfs_homes("carol")])))
    assert check is not None
    assert check.status == "wrong"
    assert check.detail.startswith(
        "bob's server can write into alice's home (NFS nfs-1:/export,"
        f" /alice/{FOLDER}), both as user id 1000 (5 more pairs)"
    )
    assert "restoring it runs bob's code as alice" in check.detail
    assert "claim-{username}" in check.fix
    every = run_checks(facts(Read([nfs_homes("alice"), nfs_homes("bob")])))
    assert [(c.name, c.status) for c in every if c.name == "homes"] == [("homes", "wrong")]


def test_homes_of_their_own_and_no_servers_are_ok_and_say_the_condition() -> None:
    for pods in ([own_claim("alice"), own_claim("bob")], []):
        check = homes_check(facts(Read(pods)))
        assert check is not None
        assert check.status == "ok"
        assert "tells users apart only where no other user's server can write" in check.detail
    assert "2 users" in str(homes_check(facts(Read([own_claim("alice"), own_claim("bob")]))))
    assert "no running servers" in str(homes_check(facts(Read([]))))


def test_unreadable_pods_are_unknown_and_not_gathered_is_no_line() -> None:
    unread = homes_check(facts(Read.failed("HTTP 403 forbidden", forbidden=True)))
    assert unread is not None
    assert (unread.status, unread.detail) == (
        "unknown",
        "cannot read the servers' pods: HTTP 403 forbidden",
    )
    assert homes_check(facts(None)) is None

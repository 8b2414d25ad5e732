"""Failed starts seen in the notebook pods between looks (console/starts.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gpuaas_service.console.starts import StartWatch, past_the_queue
from jupyter_gpuaas.core.kueue import ADMISSION_GATE
from jupyter_gpuaas.core.labels import (
    HUB_SERVERNAME_ANNOTATION,
    HUB_USERNAME_ANNOTATION,
    OFFERING_LABEL,
    TEAM_LABEL,
)
from tests.support.console_samples import T0


def pod(
    state: str, *, uid: str = "u1", user: str = "alice", server: str = "", team: str = "team-a"
) -> dict[str, Any]:
    """A workbench pod in one of: ``queued`` (gated), ``admitted`` (gate gone, not Ready),
    ``placed`` (on a node, not Ready), ``ready``, ``failed``, ``exited``, ``deleting`` (placed),
    ``queued-deleting`` (gated)."""
    meta: dict[str, Any] = {
        "name": f"jupyter-{user}",
        "uid": uid,
        "labels": {TEAM_LABEL: team, OFFERING_LABEL: "off-mig"},
        "annotations": {HUB_USERNAME_ANNOTATION: user, HUB_SERVERNAME_ANNOTATION: server},
    }
    spec: dict[str, Any] = {}
    status: dict[str, Any] = {"phase": "Pending"}
    if state in ("queued", "queued-deleting"):
        spec["schedulingGates"] = [{"name": ADMISSION_GATE}]
    if state in ("placed", "ready", "failed", "exited", "deleting"):
        spec["nodeName"] = "gpu-node-1"
    if state == "ready":
        status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    if state == "failed":
        status = {"phase": "Failed"}
    if state == "exited":
        status = {"phase": "Succeeded"}
    if state in ("deleting", "queued-deleting"):
        meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    return {"metadata": meta, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("looks", "expected"),
    [
        # admitted, then deleted before it was ever Ready: the hub gave up
        (["queued", "admitted", None], ["deleted"]),
        (["placed", "deleting", "deleting", None], ["deleted"]),  # counted once
        (["admitted", "failed", "failed"], ["failed"]),
        (["placed", "exited"], ["exited"]),
        (["failed"], ["failed"]),  # first seen already failed, after the queue
        # not failed starts: left the queue before admission, or was Ready once
        (["queued", "queued", None], []),
        (["queued", "queued-deleting", None], []),
        (["admitted", "ready", "deleting", None], []),
        (["ready", "failed"], []),
        (["admitted", "placed"], []),  # still starting
    ],
)
def test_a_failed_start_is_admitted_then_ended_without_being_ready(
    looks: list[str | None], expected: list[str]
) -> None:
    watch = StartWatch()
    seen: list[str] = []
    for i, state in enumerate(looks):
        pods = [pod(state)] if state is not None else []
        seen += [f.how for f in watch.observe(pods, T0 + timedelta(minutes=i))]
    assert seen == expected
    if looks[-1] is None:
        assert watch.seen == {}, "a pod that is gone is forgotten"


def test_a_failed_start_names_the_team_user_server_offering_and_pod() -> None:
    watch = StartWatch()
    watch.observe([pod("admitted", server="gpu2", team="team-b")], T0)
    (failed,) = watch.observe([], T0 + timedelta(minutes=1))
    assert (failed.at, failed.team, failed.user, failed.server, failed.offering, failed.pod) == (
        T0 + timedelta(minutes=1),
        "team-b",
        "alice",
        "gpu2",
        "off-mig",
        "jupyter-alice",
    )


def test_pods_are_told_apart_by_uid_and_pods_of_no_hub_server_are_ignored() -> None:
    watch = StartWatch()
    other = pod("admitted", uid="u2", user="bob")
    nameless = pod("admitted", uid="u3")
    nameless["metadata"]["annotations"] = {}
    watch.observe([pod("ready"), other, nameless], T0)
    # alice's pod is replaced by a new one (a new uid) that fails; bob's is deleted
    failed = watch.observe([pod("failed", uid="u4")], T0 + timedelta(minutes=1))
    assert sorted((f.user, f.how) for f in failed) == [("alice", "failed"), ("bob", "deleted")]


def test_past_the_queue() -> None:
    assert not past_the_queue(pod("queued"))
    assert past_the_queue(pod("admitted"))
    gated_but_bound = pod("queued")
    gated_but_bound["spec"]["nodeName"] = "gpu-node-1"
    assert past_the_queue(gated_but_bound)

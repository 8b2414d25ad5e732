"""The gpuaas service's queue view: per-user filtering and the shaping of positions (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.queue.workloads import (
    NO_NAMES,
    DisplayNames,
    NotebookPod,
    display_names,
    queue_payload,
    read_notebook_pod,
    user_of,
)
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog
from jupyter_gpuaas.core.kueue import (
    PendingWorkloadInfo,
    read_pending_workloads,
    read_workload,
)
from tests.support.jobs_samples import jobs_catalog, jobs_catalog_data
from tests.support.queue_samples import (
    ADMITTED,
    CQS,
    LQS,
    NOW,
    QUEUE,
    THREE_AND_BOB,
    WAITING,
    job_workload,
    notebook_pod,
    pod_workload,
    visibility,
)

# --------------------------------------------------------------------------- whose is it


@pytest.mark.parametrize(
    ("workload", "pods", "expected"),
    [
        pytest.param(job_workload("a", "alice"), {}, "alice", id="job-labelled"),
        pytest.param(job_workload("a", None), {}, "", id="job-unlabelled"),
        pytest.param(
            pod_workload("p", "pod-1"),
            {"pod-1": read_notebook_pod(notebook_pod("pod-1", "alice"))},
            "alice",
            id="notebook-pod-annotation",
        ),
        pytest.param(
            pod_workload("p", "pod-1", label_user="mallory"),
            {"pod-1": read_notebook_pod(notebook_pod("pod-1", "alice"))},
            "alice",
            id="notebook-pod-beats-label",
        ),
        pytest.param(pod_workload("p", "pod-unknown"), {}, "", id="unknown-pod"),
        pytest.param(
            pod_workload("p", "pod-9", label_user="bob"), {}, "bob", id="plain-pod-labelled"
        ),
    ],
)
def test_user_of(workload: dict[str, Any], pods: Mapping[str, NotebookPod], expected: str) -> None:
    assert user_of(read_workload(workload), pods) == expected


@pytest.mark.parametrize(
    ("conditions", "active", "pending"),
    [
        ([], True, True),
        (WAITING, True, True),
        (ADMITTED, True, False),
        ([{"type": "QuotaReserved", "status": "True"}], True, False),
        ([{"type": "Finished", "status": "True"}], True, False),
        (WAITING, False, False),
    ],
)
def test_pending(conditions: list[dict[str, Any]], active: bool, pending: bool) -> None:
    wl = read_workload(job_workload("a", "alice", conditions=conditions, active=active))
    assert wl.pending is pending


def test_summary_totals_pods_and_drops_templates() -> None:
    wl = read_workload(job_workload("a", "alice", gpus="2", count=3))
    assert wl.resources == {"cpu": Fraction(3), "nvidia.com/gpu": Fraction(6)}
    assert wl.pods == 3
    assert "hunter2" not in repr(wl)
    assert "train.py" not in repr(wl)


# --------------------------------------------------------------------------- the answer


def payload(
    user: str,
    workloads: list[dict[str, Any]],
    pending: dict[tuple[str, str], list[PendingWorkloadInfo] | None],
    pods: list[dict[str, Any]] = (),  # type: ignore[assignment]
    teams: tuple[str, ...] = (),
    names: DisplayNames = NO_NAMES,
) -> api.Queue:
    notebook = {p.uid: p for p in map(read_notebook_pod, pods)}
    return queue_payload(
        user,
        workloads=[read_workload(w) for w in workloads],
        notebook_pods=notebook,
        pending=pending,
        local_queues=LQS,
        cluster_queues=CQS,
        now=NOW,
        teams=teams,
        names=names,
    )


@pytest.mark.parametrize(
    ("user", "names", "positions"),
    [
        ("alice", ["a1", "a2", "a3"], [1, 2, 3]),
        ("bob", ["b1"], [4]),
        ("carol", [], []),
        ("", [], []),
    ],
)
def test_only_the_callers_pending_work(user: str, names: list[str], positions: list[int]) -> None:
    out = payload(user, THREE_AND_BOB, {("team-a", "training"): QUEUE})
    assert [i["name"] for i in out["items"]] == names
    assert [i["position_in_local_queue"] for i in out["items"]] == positions
    assert [i["position_in_cluster_queue"] for i in out["items"]] == positions
    assert out["user"] == user
    assert out["error"] is None


def test_item_shape_has_summaries_only() -> None:
    out = payload("alice", THREE_AND_BOB, {("team-a", "training"): QUEUE})
    first = out["items"][0]
    assert first == {
        "kind": "job",
        "name": "a1",
        "workload": "job-a1-x1",
        "namespace": "team-a",
        "local_queue": "training",
        "cluster_queue": "team-a-training",
        "position_in_local_queue": 1,
        "position_in_cluster_queue": 1,
        "positions_known": True,
        "offering": None,
        "offering_display_name": None,
        "resources": {"cpu": "1", "nvidia.com/gpu": "1"},
        "pods": 1,
        "gpu_equivalents": "1",
        "team": "team-a",
        "team_display_name": None,  # no catalog: the sidebar's own words, never the slug
        "priority_class": "training",
        "waiting_since": "2026-11-30T16:31:00.000Z",
        "waited_seconds": 540,
        "reason": "insufficient unused quota for nvidia.com/gpu in flavor h100, 1 more needed",
        "waiting_for": None,
    }
    text = json.dumps(out)
    for secret in ("hunter2", "train.py", "SECRET", "template", "env"):
        assert secret not in text


def test_positions_move_up_after_an_admission() -> None:
    later = [dict(w) for w in THREE_AND_BOB]
    later[1] = job_workload("a1", "alice", conditions=ADMITTED)
    moved = visibility(
        ("job-a2-x1", "training", 0, 0),
        ("job-a3-x1", "training", 1, 1),
        ("job-b1-x1", "training", 2, 2),
    )
    out = payload("alice", later, {("team-a", "training"): moved})
    assert [(i["name"], i["position_in_local_queue"]) for i in out["items"]] == [
        ("a2", 1),
        ("a3", 2),
    ]


@pytest.mark.parametrize(
    ("answer", "known", "position"),
    [
        pytest.param(None, False, None, id="not-polled-yet"),
        pytest.param([], True, None, id="not-in-answer"),
    ],
)
def test_unknown_positions(
    answer: list[PendingWorkloadInfo] | None, known: bool, position: int | None
) -> None:
    out = payload("alice", [job_workload("a1", "alice")], {("team-a", "training"): answer})
    (item,) = out["items"]
    assert item["positions_known"] is known
    assert item["position_in_local_queue"] is position


def test_notebook_pod_item_and_team_counts() -> None:
    wl = pod_workload("jupyter-alice", "pod-1")
    answer = read_pending_workloads(
        {
            "items": [
                {
                    "metadata": {
                        "name": wl["metadata"]["name"],
                        "namespace": "jupyter-users",
                        "ownerReferences": [{"kind": "Pod", "uid": "pod-1", "name": "x"}],
                    },
                    "localQueueName": "team-a",
                    "positionInLocalQueue": 0,
                    "positionInClusterQueue": 1,
                }
            ]
        }
    )
    out = payload(
        "alice",
        [wl],
        {("jupyter-users", "team-a"): answer},
        pods=[notebook_pod("pod-1", "alice", "gpu")],
        teams=("team-a", "team-b"),
    )
    (item,) = out["items"]
    assert item["kind"] == "notebook"
    assert item["name"] == "gpu"
    assert item["offering"] == "local-mig-1g"
    assert item["gpu_equivalents"] == "1/7"
    assert (item["position_in_local_queue"], item["position_in_cluster_queue"]) == (1, 2)
    teams = {t["team"]: t for t in out["teams"]}
    assert teams["team-a"]["admitted"] == 4
    assert teams["team-a"]["pending"] == 5
    assert [c["name"] for c in teams["team-a"]["cluster_queues"]] == [
        "team-a-notebooks",
        "team-a-training",
    ]
    assert teams["team-b"]["pending"] == 0


# --------------------------------------------------------------------------- display names


def _notebook_and_job(names: DisplayNames) -> api.Queue:
    """alice's notebook server on ``local-mig-1g`` (team label team-a) and her Job in the
    namespace team-a, with team-a and team-b (her hub groups) in the per-team rows."""
    pod = notebook_pod("pod-1", "alice", "gpu")
    pod["metadata"]["labels"]["gpuaas.jupyter.org/offering"] = "mig-1g"
    return payload(
        "alice",
        [pod_workload("jupyter-alice", "pod-1"), job_workload("a1", "alice")],
        {},
        pods=[pod],
        teams=("team-a", "team-b"),
        names=names,
    )


def test_items_and_rows_carry_the_catalogs_names() -> None:
    out = _notebook_and_job(display_names(jobs_catalog()))
    shown = {i["kind"]: i for i in out["items"]}
    assert (shown["notebook"]["offering"], shown["notebook"]["offering_display_name"]) == (
        "mig-1g",
        "A100 MIG 1g.5gb",
    )
    assert (shown["notebook"]["team"], shown["notebook"]["team_display_name"]) == (
        "team-a",
        "Team A",
    )
    # the Job has no offering label; its team is its namespace, a name team A's Jobs go by
    assert (shown["job"]["offering"], shown["job"]["offering_display_name"]) == (None, None)
    assert (shown["job"]["team"], shown["job"]["team_display_name"]) == ("team-a", "Team A")
    assert [(t["team"], t["display_name"]) for t in out["teams"]] == [
        ("team-a", "Team A"),
        ("team-b", "Team B"),
    ]


def test_without_a_catalog_no_display_name_is_made_up() -> None:
    out = _notebook_and_job(display_names(None))
    for item in out["items"]:
        assert item["offering_display_name"] is None
        assert item["team_display_name"] is None
    assert [t["display_name"] for t in out["teams"]] == [None, None]


def test_a_team_unknown_to_the_catalog_has_no_display_name() -> None:
    names = display_names(jobs_catalog())
    out = payload("alice", [job_workload("a1", "alice", ns="research")], {}, names=names)
    (item,) = out["items"]
    assert (item["team"], item["team_display_name"]) == ("research", None)


def test_display_names_by_hub_group_of_exactly_one_team() -> None:
    data = jobs_catalog_data()
    data["tenants"][0]["groups"] = ["vision", "everyone"]
    data["tenants"][1]["groups"] = ["nlp", "everyone"]
    catalog = build_catalog([CatalogSource("", data)], default_namespace="users")
    names = display_names(catalog)
    assert names.teams["vision"] == "Team A"
    assert names.teams["nlp"] == "Team B"
    assert "everyone" not in names.teams  # two teams' group names neither
    assert names.teams["team-a"] == "Team A"  # the tenant's own name still
    assert names.offerings["h100"] == "NVIDIA H100"

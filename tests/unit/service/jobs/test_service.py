"""The service's notebook Jobs over an in-memory Kubernetes (jobs/service.py): what is created,
in which order; caps; refused requests create nothing; a failed create leaves nothing; the
runner's token."""

from __future__ import annotations

import logging

import pytest

from gpuaas_service.jobs.request import JobRequestError
from gpuaas_service.jobs.service import CapReached, JobError, JobService
from tests.support.jobs_samples import FakeKube, jobs_catalog, request_body, service
from tests.support.samples import MIG1, cluster_queue, local_queue, state


async def test_submit_creates_input_token_job_then_owners() -> None:
    kube = FakeKube()
    job = await service(kube).submit("alice", ["team-a"], request_body())
    name = job["name"]
    assert kube.calls == [
        ("create", "configmap", f"{name}-input"),
        ("create", "secret", f"{name}-token"),
        ("create", "job", name),
        ("patch", "configmap", f"{name}-input"),
        ("patch", "secret", f"{name}-token"),
    ]
    uid = kube.objects[("job", "team-a", name)]["metadata"]["uid"]
    for kind, obj in (("configmap", f"{name}-input"), ("secret", f"{name}-token")):
        owners = kube.objects[(kind, "team-a", obj)]["metadata"]["ownerReferences"]
        assert owners[0]["uid"] == uid
    assert job["state"] == "queued"
    assert job["notebook"] == "train.ipynb"


async def test_refused_requests_create_nothing() -> None:
    kube = FakeKube()
    svc = service(kube)
    with pytest.raises(JobError) as info:
        await svc.submit("carol", ["team-b"], request_body(team="team-a"))
    assert info.value.status == 403
    with pytest.raises(Exception, match=r"invalid|count"):
        await svc.submit("alice", ["team-a"], request_body(count=9))
    assert [c for c in kube.calls if c[0] == "create"] == []


async def test_an_offering_the_training_queue_can_never_admit_is_refused() -> None:
    """As a spawn is (core/choice.py): team A's training queue has MIG slices but no H100, so
    an H100 Job would wait forever; it is refused at the offering and nothing is created."""
    training = cluster_queue("team-a-training", quotas={("a100-mig", MIG1): (2, 0, None)})
    queues = state([training], [local_queue("training", "team-a-training", namespace="team-a")])
    kube = FakeKube()
    svc = JobService(kube, jobs_catalog, service_url="http://svc/", queue_state=lambda: queues)
    with pytest.raises(JobRequestError) as info:
        await svc.submit("alice", ["team-a"], request_body(offering="h100", count=1))
    assert [(e.path, e.message) for e in info.value.errors] == [
        (
            "offering",
            "NVIDIA H100 cannot start for Team A: your team has no quota for NVIDIA H100. "
            "Team A's queue has no quota for this kind of GPU; ask an admin.",
        )
    ]
    assert kube.calls == []
    job = await svc.submit("alice", ["team-a"], request_body(offering="mig-1g", count=1))
    assert job["offering"] == "mig-1g"


async def test_a_job_refused_for_quota_logs_where_an_admin_should_look(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The user is told in plain words; the service's log says, for an admin, who was refused,
    in which team, and Kueue's explanation (the headroom's admin_detail)."""
    training = cluster_queue("team-a-training", quotas={("a100-mig", MIG1): (2, 0, None)})
    queues = state([training], [local_queue("training", "team-a-training", namespace="team-a")])
    svc = JobService(
        FakeKube(), jobs_catalog, service_url="http://svc/", queue_state=lambda: queues
    )
    caplog.set_level(logging.INFO, logger="gpuaas.jobs")
    with pytest.raises(JobRequestError):
        await svc.submit("alice", ["team-a"], request_body(offering="h100", count=1))
    (line,) = [r for r in caplog.records if r.getMessage().startswith("job.refused")]
    assert line.levelno == logging.WARNING
    text = line.getMessage()
    assert "user=alice team=team-a offering=h100 fit=never" in text
    assert "cluster_queue=team-a-training" in text
    # admin_detail: Kueue's words
    assert "ClusterQueue team-a-training does not cover nvidia.com/gpu" in text
    # a request refused for another reason (a count out of range) says nothing of quota
    caplog.clear()
    with pytest.raises(JobRequestError):
        await svc.submit("alice", ["team-a"], request_body(offering="mig-1g", count=9))
    assert [r for r in caplog.records if r.getMessage().startswith("job.refused")] == []


async def test_the_dialogs_headroom_speaks_of_a_job() -> None:
    """The dialog's headroom comes from the spawn form's code but is about a job, not a server."""
    training = cluster_queue(
        "team-a-training", quotas={("a100-mig", MIG1): (2, 0, None)}, usage={("a100-mig", MIG1): 2}
    )
    queues = state([training], [local_queue("training", "team-a-training", namespace="team-a")])
    svc = JobService(
        FakeKube(), jobs_catalog, service_url="http://svc/", queue_state=lambda: queues
    )
    (team,) = (await svc.options("alice", ["team-a"]))["teams"]
    mig = next(o for o in team["offerings"] if o["slug"] == "mig-1g")
    headroom = mig["headroom"]
    assert headroom is not None
    assert headroom["fit"] == "queue"
    assert headroom["detail"] == "Your job waits in the queue until quota frees up."


async def test_a_failed_job_create_leaves_nothing() -> None:
    kube = FakeKube(fail_job=True)
    with pytest.raises(RuntimeError):
        await service(kube).submit("alice", ["team-a"], request_body())
    assert kube.objects == {}


async def test_caps_per_user_and_team() -> None:
    kube = FakeKube()
    svc = service(kube)
    await svc.submit("alice", ["team-a"], request_body())
    await svc.submit("alice", ["team-a"], request_body())
    with pytest.raises(CapReached) as info:
        await svc.submit("alice", ["team-a"], request_body())
    assert info.value.extra == {"cap": "per_user", "limit": 2, "active": 2}
    # a finished job no longer counts
    first = next(o for (k, _, _), o in kube.objects.items() if k == "job")
    first["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    await svc.submit("alice", ["team-a"], request_body())
    for _ in range(2):
        await svc.submit("bob", ["team-a"], request_body())
    await svc.submit("erin", ["team-a"], request_body())  # team A now has 5 at once
    with pytest.raises(CapReached) as info:
        await svc.submit("erin", ["team-a"], request_body())
    assert info.value.extra["cap"] == "per_team"


async def test_other_users_jobs_are_not_found_and_the_runner_needs_its_token() -> None:
    kube = FakeKube()
    svc = service(kube)
    job = await svc.submit("alice", ["team-a"], request_body())
    name = job["name"]
    for call in (svc.cancel, svc.log_of, svc.result):
        with pytest.raises(JobError) as info:
            await call("bob", ["team-a"], "team-a", name)
        assert info.value.status == 404
    assert [j["name"] for j in (await svc.list("bob", ["team-a"]))["jobs"]] == []
    with pytest.raises(JobError) as info:
        await svc.runner_job(f"team-a/{name}", "token-1")  # another job's token
    assert info.value.status == 403
    runner = await svc.runner_job(f"team-a/{name}", "token-0")
    got = await svc.runner_input(runner)
    assert got["parameters"]["epochs"] == 3
    assert got["notebook"]["cells"][0]["source"] == "epochs = 1\n"
    notebook = {**got["notebook"], "cells": []}
    await svc.runner_result(runner, {"status": "succeeded", "notebook": notebook, "log": "ok"})
    with pytest.raises(JobError) as info:
        await svc.runner_result(runner, {"status": "succeeded", "notebook": notebook})
    assert info.value.status == 409
    result = await svc.result("alice", ["team-a"], "team-a", name)
    assert result["path"] == "work/train.ipynb"
    assert result["status"] == "succeeded"
    assert (await svc.list("alice", ["team-a"]))["jobs"][0]["result"] == "succeeded"
    await svc.cancel("alice", ["team-a"], "team-a", name)
    assert ("job", "team-a", name) not in kube.objects


async def test_a_hub_that_runs_no_gpu_jobs_says_so_and_refuses_a_submit() -> None:
    """No catalog: the list is empty and says so (the sidebar hides its section); a submit
    still gets the reason it cannot run."""
    from tests.support.api_schema import schema_errors

    svc = JobService(FakeKube(), lambda: None, service_url="http://svc/", token=lambda: "t")
    answer = await svc.list("alice", ["team-a"])
    assert (answer["jobs"], answer.get("enabled")) == ([], False)
    assert schema_errors("service_jobs", answer) == []
    with pytest.raises(JobError, match="no catalog is configured for GPU jobs"):
        await svc.submit("alice", ["team-a"], request_body())

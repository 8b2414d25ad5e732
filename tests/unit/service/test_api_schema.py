"""The gpuaas service's JSON answers against the one API schema
(``jupyter_gpuaas/server/api-schema.json``, the ``service_*`` definitions): every payload here
is built by the service's own code (the reclaim loop, the console's standing and rows, the jobs
service, the handlers' answer builders), so a builder that drifts from the schema fails."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpuaas_service.console.aggregates import plan_row
from gpuaas_service.console.standing import standing
from gpuaas_service.jobs.request import JobRequestError
from gpuaas_service.jobs.service import CapReached
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.web.base import error_answer
from gpuaas_service.web.reclaim import report_answer, snooze_answer
from jupyter_gpuaas.core.fields import FieldError
from tests.support.api_schema import api_schema, schema_errors
from tests.support.jobs_samples import FakeKube, request_body, service
from tests.support.service_world import World


def assert_matches(definition: str, payload: Any) -> None:
    assert schema_errors(definition, payload) == [], payload


def test_every_service_definition_is_described() -> None:
    service = {k: v for k, v in api_schema()["$defs"].items() if k.startswith("service_")}
    assert len(service) >= 15
    assert [k for k, v in service.items() if not v.get("description")] == []


async def test_the_reclaim_answers_match_the_schema() -> None:
    w = World()
    await w.cycle()
    warned = w.loop.warning_for("alice", "")
    assert warned["warning"]["cause"]["code"] == "demand"
    for answer in (warned, w.loop.warning_for("alice", "busy")):
        assert_matches("service_reclaim", answer)
        assert_matches("service_report_answer", report_answer(w.now, answer))
    assert_matches("service_report_answer", report_answer(w.now, warned, stopping="stopping"))

    kept = await w.loop.snooze("alice", "")
    refused = await w.loop.snooze("alice", "")
    assert (kept.allowed, refused.allowed) == (True, False)
    for result in (kept, refused):
        assert_matches("service_snooze", snooze_answer(result))


async def test_the_standing_and_the_console_rows_match_the_schema() -> None:
    w = World()
    await w.cycle()
    plan = w.loop.last_plan
    assert plan is not None
    assert plan.decisions
    for decision in plan.decisions:
        assert_matches("service_workbench", plan_row(decision, plan.now))
    known = standing(plan, w.policy, server_key("alice", "busy"), now=w.now)
    unknown = standing(plan, w.policy, server_key("carol", ""), now=w.now)
    assert (known["known"], unknown["known"]) == (True, False)
    for answer in (known, unknown):
        assert_matches("service_standing", answer)


async def test_the_jobs_answers_match_the_schema() -> None:
    kube = FakeKube()
    svc = service(kube)
    options = await svc.options("alice", ["team-a"])
    assert options["teams"][0]["offerings"]
    assert_matches("service_job_options", options)

    job = await svc.submit("alice", ["team-a"], request_body())
    assert_matches("service_job", job)
    name = job["name"]
    runner = await svc.runner_job(f"team-a/{name}", "token-0")
    notebook = {**(await svc.runner_input(runner))["notebook"], "cells": []}
    failed = {"cell_index": 0, "ename": "ValueError", "evalue": "bad lr"}
    await svc.runner_result(runner, {"status": "failed", "notebook": notebook, "error": failed})
    listed = await svc.list("alice", ["team-a"])
    assert listed["jobs"][0]["result"] == "failed"
    assert_matches("service_jobs", listed)
    result = await svc.result("alice", ["team-a"], "team-a", name)
    assert result["error"] == failed
    assert_matches("service_job_result", result)
    assert_matches("service_job_log", await svc.log_of("alice", ["team-a"], "team-a", name))
    assert_matches("service_job_cancelled", await svc.cancel("alice", ["team-a"], "team-a", name))


async def test_the_error_answers_match_the_schema() -> None:
    svc = service(FakeKube())
    with pytest.raises(JobRequestError) as invalid:
        await svc.submit("alice", ["team-a"], request_body(count=9, colour="red"))
    for _ in range(2):
        await svc.submit("alice", ["team-a"], request_body())
    with pytest.raises(CapReached) as cap:
        await svc.submit("alice", ["team-a"], request_body())
    many = [FieldError(f"kernels[{i}]", "must be an object") for i in range(25)]
    answers = [
        error_answer(404, "Not Found"),
        error_answer(400, "invalid job request", invalid.value.errors),
        error_answer(409, str(cap.value), **cap.value.extra),
        error_answer(400, "invalid activity report", many, more_errors=3),
    ]
    assert answers[3]["more_errors"] == 3 + 5
    assert len(answers[3]["errors"]) == 20
    for answer in answers:
        assert_matches("service_error", answer)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda job: job.update(state=3), "state"),
        (lambda job: job.update(colour="red"), "(payload)"),
        (lambda job: job.pop("finished"), "(payload)"),
        (lambda job: job.update(time_limit="2h"), "time_limit"),
    ],
)
async def test_a_job_entry_that_drifts_from_the_schema_is_caught(change: Any, path: str) -> None:
    job = await service(FakeKube()).submit("alice", ["team-a"], request_body())
    assert_matches("service_job", job)
    drifted = copy.deepcopy(job)
    change(drifted)
    assert [e.split(":")[0] for e in schema_errors("service_job", drifted)] == [path]

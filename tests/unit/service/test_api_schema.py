"""The gpuaas service's JSON answers against the schemas of the API's OpenAPI documents (the
``service_*`` schemas: ``gpuaas_service/openapi.json``'s, and those it shares with the servers
in ``jupyter_gpuaas/server/openapi.json``): every payload here is built by the service's own
code (the reclaim loop, the console's standing and rows, the jobs service, the handlers' answer
builders), so a builder that drifts from the schema fails."""

from __future__ import annotations

import copy
import json
import socket
from fractions import Fraction
from pathlib import Path
from typing import Any, cast

import pytest
from tornado.httpclient import AsyncHTTPClient, HTTPRequest
from tornado.httpserver import HTTPServer
from tornado.netutil import bind_sockets

from gpuaas_service.app import _policy_health
from gpuaas_service.clients.prometheus import PrometheusClient
from gpuaas_service.console.aggregates import plan_row
from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.console.preview import preview
from gpuaas_service.console.standing import standing
from gpuaas_service.jobs.request import JobRequestError
from gpuaas_service.jobs.service import CapReached
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.reclaim.decide import HandOffRecord, PlacementWait
from gpuaas_service.reclaim.explain_input import dump_snapshot
from gpuaas_service.reclaim.policy import PolicyFile
from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import error_answer
from gpuaas_service.web.console_history import History, history_answer
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.reclaim import report_answer, snooze_answer
from jupyter_gpuaas.core.catalog import Catalog, Offering, Tenant
from jupyter_gpuaas.core.fields import FieldError
from jupyter_gpuaas.core.sizing import PeakHistory
from tests.support.api_schema import api_schema, schema_errors
from tests.support.console_samples import a100_mig_node, pod_holding
from tests.support.hub_tokens import SERVICE_SCOPE, TokenHub
from tests.support.jobs_samples import FakeKube, request_body, service
from tests.support.service_web import QueueIndexStub
from tests.support.service_world import (
    POLICY,
    World,
    cause_of,
    job_workload,
    reclaimed_for_the_job,
    world_console,
)


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
    assert warned["warning"] is not None
    assert cause_of(warned["warning"])["code"] == "demand"
    for answer in (warned, w.loop.warning_for("alice", "busy")):
        assert_matches("service_reclaim", answer)
        assert_matches("service_report_answer", report_answer(w.now, answer))
    assert_matches("service_report_answer", report_answer(w.now, warned, stopping="stopping"))

    kept = await w.loop.snooze("alice", "")
    refused = await w.loop.snooze("alice", "")
    assert (kept.allowed, refused.allowed) == (True, False)
    for result in (kept, refused):
        assert_matches("service_snooze", snooze_answer(result))


async def test_a_max_age_warning_to_a_server_in_use_matches_the_schema() -> None:
    """Its cause has no idle time (``idle_seconds`` null): the server is not idle."""
    policy: dict[str, Any] = copy.deepcopy(dict(POLICY))
    policy["policies"][0]["max_age"] = "1m"
    w = World(policy)
    await w.cycle()
    warned = w.loop.warning_for("alice", "busy")
    assert warned["warning"] is not None
    cause = cause_of(warned["warning"])
    assert (cause["code"], cause["idle_seconds"]) == ("max-age", None)
    assert_matches("service_reclaim", warned)


async def test_the_standing_and_the_console_rows_match_the_schema() -> None:
    w = World()
    await w.cycle()
    plan = w.loop.state.last_plan
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
    given = await svc.runner_input(runner)
    assert_matches("service_job_runner_input", given)
    notebook = {**given["notebook"], "cells": []}
    failed = {"cell_index": 0, "ename": "ValueError", "evalue": "bad lr"}
    taken = await svc.runner_result(
        runner, {"status": "failed", "notebook": notebook, "error": failed}
    )
    assert_matches("service_job_runner_taken", taken)
    listed = await svc.list("alice", ["team-a"])
    assert listed["jobs"][0]["result"] == "failed"
    assert_matches("service_jobs", listed)
    result = await svc.result("alice", ["team-a"], "team-a", name)
    assert result["error"] == failed
    assert_matches("service_job_result", result)
    assert_matches("service_job_log", await svc.log_of("alice", ["team-a"], "team-a", name))
    collected = await svc.mark("alice", ["team-a"], "team-a", name, collected="results/x.ipynb")
    assert collected["collected"] == "results/x.ipynb"
    notified = await svc.mark("alice", ["team-a"], "team-a", name, notified=True)
    assert "notified" in notified
    for marked in (collected, notified):
        assert_matches("service_job_marked", marked)
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


# --------------------------------------------------------------------------- the console


def sizing_catalog() -> Catalog:
    """Team A's offerings, the one its servers run on (local-mig-1g) and a whole GPU."""
    return Catalog(
        offerings={
            "local-mig-1g": Offering(
                "local-mig-1g",
                "MIG 1g.5gb",
                "mig",
                gpu_memory="5Gi",
                gpu_equivalents=Fraction(1, 7),
            ),
            "gpu": Offering(
                "gpu", "Whole GPU", "gpu", gpu_memory="40Gi", gpu_equivalents=Fraction(1)
            ),
        },
        tenants={
            "team-a": Tenant(
                "team-a", "Team A", ("a",), "team-a", ("local-mig-1g", "gpu"), "local-mig-1g"
            )
        },
    )


async def console_after_a_handoff() -> tuple[World, ConsoleState]:
    """alice and bob reclaimed for the Job, which is then admitted: the journal holds warnings,
    reclaims and the hand-off, the ledger today's hours, the view an admitted training Job."""
    w = await reclaimed_for_the_job()
    w.jobs[0] = job_workload(admitted=w.now)
    await w.cycle(after=5)
    console = world_console(
        w,
        record=w.record,
        policy_file=lambda: {"file": "/etc/gpuaas/policy.yaml", "error": ""},
        pods=lambda: w.pods,
        usage_history=lambda: PeakHistory({"alice": (1000, 3000)}),
        catalog=sizing_catalog,
    )
    return w, console


async def test_the_console_answers_match_the_schema() -> None:
    _, console = await console_after_a_handoff()
    every = console.answer()
    assert {e["event"] for e in every["events"]} >= {"warn", "reclaim", "handoff"}
    assert [h["status"] for h in every["handoffs"]] == ["succeeded"]
    assert every["teams"][0]["flavors"]
    assert every["teams"][0]["today"]["allocated_hours"] > 0
    assert every["workbenches"]
    assert every["regret"] is not None
    lead = console.answer(["team-a"])
    assert lead["visible_teams"] == ["team-a"]
    for answer in (every, lead, console.answer(["team-b"])):
        assert_matches("service_console", answer)

    gpus = console.gpus()
    assert {d["holder_kind"] for d in gpus["devices"]} == {"workbench", "training"}
    assert_matches("service_console_gpus", gpus)
    assert_matches("service_console_gpus", console.gpus(["team-b"]))

    fit = console.fit()
    assert fit["teams"][0]["users"][0]["peak_bytes"] == 3000 << 20
    assert_matches("service_console_fit", fit)
    console.nodes = lambda: [a100_mig_node()]
    console.job_pods = lambda: [pod_holding("nvidia.com/mig-3g.20gb", "local-0")]
    assert console.fit()["mig"][0]["demand"] == {"3g.20gb": 1}
    assert_matches("service_console_fit", console.fit())
    console.catalog = lambda: None
    assert_matches("service_console_fit", console.fit())


async def test_an_empty_console_matches_the_schema() -> None:
    """Before the first cycle: no plan, no summary, nothing held."""
    w = World()
    console = world_console(w)
    answer = console.answer()
    assert (answer["decided_at"], answer["summary"], answer["workbenches"]) == (None, {}, [])
    assert_matches("service_console", answer)
    assert_matches("service_console_gpus", console.gpus())


async def test_the_policy_preview_matches_the_schema() -> None:
    w, console = await console_after_a_handoff()
    snap = console.snapshot()
    assert snap is not None
    policy: Any = copy.deepcopy(POLICY)
    policy["policies"][0]["reclaim"] = "always"
    text = json.dumps(policy)
    answer = preview(snap, text, w.loop.state.last_plan)
    assert answer["workbenches"]
    assert_matches("service_policy_preview", answer)
    assert_matches("service_policy_preview", preview(snap, text, None))


async def test_the_snapshot_matches_the_schema() -> None:
    """What ``gpuaas-admin --explain --snapshot`` reads back: the workbenches with their
    reports and the queued Job they were reclaimed for; then the same inputs with a pod's own
    utilisation, a hand-off under watch and a pod that waits for whole cards."""
    w = await reclaimed_for_the_job()
    snap = world_console(w).snapshot()
    assert snap is not None
    assert snap["workbenches"]
    assert any(wb["activity"] is not None for wb in snap["workbenches"])
    assert snap["pending"][0]["needs"]
    assert_matches("service_console_snapshot", snap)

    plan, inputs = w.loop.state.last_plan, w.loop.state.last_inputs
    assert plan is not None
    assert inputs is not None
    wait = PlacementWait(
        name="train-0", namespace="team-b", flavor="l4", cards=2, blocked={"gpu-1": "a Job"}
    )
    more = dump_snapshot(
        w.now,
        [d.workbench for d in plan.decisions],
        inputs.pending,
        [
            HandOffRecord(
                workload="team-a/train", cluster_queue="team-a-training", reclaimed_at=w.now
            )
        ],
        reports=inputs.reports,
        pod_utilization={plan.decisions[0].workbench.key: 0.25},
        waits=[wait],
    )
    assert more["workbenches"][0]["pod_utilization"] == 0.25
    assert more["handoffs"][0]["admitted_at"] is None
    assert more["waits"][0]["blocked"] == {"gpu-1": "a Job"}
    assert_matches("service_console_snapshot", more)


class RecordedPrometheus(PrometheusClient):
    """Answers every range query with two teams' series, as Prometheus's HTTP API would."""

    async def query_range(
        self, query: str, start: float, end: float, step: float, *, timeout: float | None = None
    ) -> Any:
        series = [
            {"metric": {"team": team, "result": "succeeded"}, "values": [[start, "0.5"]]}
            for team in ("team-a", "team-b")
        ]
        return {"status": "success", "data": {"resultType": "matrix", "result": series}}


async def test_the_history_answers_match_the_schema() -> None:
    client = RecordedPrometheus("http://prometheus.invalid")
    available = await history_answer(History(client, max_series=1), None, 3600)
    assert available["available"] is True
    assert available["charts"][0]["note"]  # two series, one kept
    assert_matches("service_console_history", available)
    lead = await history_answer(History(client), {"team-a"}, 6 * 3600)
    assert_matches("service_console_history", lead)
    unavailable = await history_answer(History(None), None, 3600)
    assert unavailable["available"] is False
    assert_matches("service_console_history", unavailable)


async def test_the_console_endpoints_answers_match_the_schema(tmp_path: Path) -> None:
    """What only the handlers build: the export's envelope, a refused preview, the health
    answer with the policy's state, and the console's refusals."""
    w, console = await console_after_a_handoff()
    policy_path = tmp_path / "policy.yaml"
    policy_path.write_text(json.dumps(POLICY))
    source = PolicyFile(str(policy_path))
    source.check()
    hub = TokenHub()
    context = ServiceContext(
        hub_auth=cast(Any, hub),
        console_auth=cast(Any, hub),
        index=cast(Any, QueueIndexStub()),
        loop=w.loop,
        console=console,
        operator_token="op-secret",
        health_policy=lambda: _policy_health(source, w.loop),
    )
    ops = hub.mint("ops", ["custom:gpuaas:console", SERVICE_SCOPE])
    user = hub.mint("alice", [SERVICE_SCOPE])
    (sock,) = bind_sockets(0, "127.0.0.1", family=socket.AF_INET)
    server = HTTPServer(make_app(context))
    server.add_sockets([sock])
    client = AsyncHTTPClient(force_instance=True)

    async def call(path: str, token: str, body: str | None = None) -> tuple[int, Any]:
        response = await client.fetch(
            HTTPRequest(
                f"http://127.0.0.1:{sock.getsockname()[1]}/services/gpuaas/{path}",
                method="GET" if body is None else "POST",
                body=body,
                headers={"Authorization": f"Bearer {token}"},
            ),
            raise_error=False,
        )
        return response.code, json.loads(response.body)

    try:
        day = w.now.date().isoformat()
        code, export = await call(f"api/console/export?day={day}&format=json", ops)
        assert (code, export["rows"][0]["team"]) == (200, "team-a"), export
        assert_matches("service_console_export", export)
        code, refused = await call("api/console/preview", ops, "policies: [{name: 3}]")
        assert (code, refused["valid"]) == (400, False), refused
        assert_matches("service_preview_refused", refused)
        code, health = await call("api/health", "op-secret")
        assert (code, health["policy"]["valid"]) == (200, True), health
        assert_matches("service_health", health)
        for path, token, status in [
            ("api/console", user, 403),
            ("api/console/export?day=yesterday", ops, 400),
            ("api/console/history?range=1y", ops, 400),
        ]:
            code, error = await call(path, token)
            assert code == status, error
            assert_matches("service_error", error)
    finally:
        server.stop()

"""The doctor's reads (gpuaas_service.doctor.reads), where they decide something: the queries it
asks Prometheus, the words of a failed read, the catalog and policy files, and an API server
that does not answer (a real client against a closed loopback port). The reads of a live
cluster are tested with the real one in tests/integration/test_doctor.py."""

from __future__ import annotations

import asyncio
import importlib
import json
import socket
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.rest import ApiException

from gpuaas_service.doctor.checks import Read, run_checks
from gpuaas_service.doctor.reads import DoctorSettings, gather, service_queries
from gpuaas_service.reclaim.policy import load_policy_file

ROOT = Path(__file__).resolve().parents[4]
CATALOG = ROOT / "spawner" / "demo-catalog.yaml"
POLICY = ROOT / "culler" / "examples" / "policy.yaml"
# The package's ``gather`` is the function: the module, for its helpers.
doctor_reads = importlib.import_module("gpuaas_service.doctor.reads")


# --------------------------------------------------------------------------- queries


def test_the_queries_are_the_cullers_hamis_and_the_historys() -> None:
    queries = service_queries("avg(util)", "max(hami)")
    assert queries["culler utilisation"] == "avg(util)"
    assert queries["HAMi last kernel"] == "max(hami)"
    history = [name for name in queries if name.startswith("history ")]
    assert history
    assert len(queries) == len(history) + 2
    assert "history allocated" in queries


def test_a_query_not_configured_is_not_asked() -> None:
    queries = service_queries("", "")
    assert queries
    assert all(name.startswith("history ") for name in queries)


# --------------------------------------------------------------------------- failed reads


def api_error(status: int, reason: str, body: str = "") -> ApiException:
    error = ApiException(status=status, reason=reason)
    error.body = body.encode()  # as the client sets it: the response's bytes
    return error


@pytest.mark.parametrize(
    ("error", "reason", "forbidden"),
    [
        (
            api_error(403, "Forbidden", json.dumps({"message": "nodes is forbidden: no list"})),
            "HTTP 403 nodes is forbidden: no list",
            True,
        ),
        (api_error(404, "Not Found"), "HTTP 404 Not Found", False),
        (
            api_error(500, "Internal Server Error", "<html>oops"),
            "HTTP 500 Internal Server Error",
            False,
        ),
        (api_error(409, "Conflict", "[1, 2]"), "HTTP 409 Conflict", False),  # JSON, no message
        (ConnectionRefusedError("Connection refused"), "Connection refused", False),
        (TimeoutError(), "TimeoutError", False),
        (ValueError("x" * 400), "x" * 300, False),
    ],
)
async def test_a_failed_read_says_why_and_whether_it_was_forbidden(
    error: Exception, reason: str, forbidden: bool
) -> None:
    async def fails() -> int:
        raise error

    assert await doctor_reads._read(fails) == Read(None, reason, forbidden)


async def test_a_read_that_answers_keeps_its_value() -> None:
    async def answers() -> list[str]:
        return ["v1"]

    assert await doctor_reads._read(answers) == Read(["v1"])


async def test_a_cancelled_read_is_cancelled_not_a_fact() -> None:
    async def cancelled() -> None:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await doctor_reads._read(cancelled)


# --------------------------------------------------------------------------- the files


def test_the_catalog_is_read_or_its_errors_said(tmp_path: Path) -> None:
    assert doctor_reads._load_catalog("") == Read.failed("no catalog_file")
    good = doctor_reads._load_catalog(str(CATALOG))
    assert good.value is not None
    assert not good.error
    missing = doctor_reads._load_catalog(str(tmp_path / "none.yaml"))
    assert missing.value is None
    assert "none.yaml: cannot read the catalog file" in missing.error


def test_the_policy_is_checked_against_the_catalogs_teams(tmp_path: Path) -> None:
    catalog = doctor_reads._load_catalog(str(CATALOG)).value
    assert catalog is not None
    assert doctor_reads._policy_problems("", catalog) == Read([])
    assert doctor_reads._policy_problems(str(POLICY), catalog) == Read([])
    stray = tmp_path / "policy.yaml"
    stray.write_text("policies:\n  - name: p\n    match: {teams: [team-zed]}\n    idle_after: 1h\n")
    problems = doctor_reads._policy_problems(str(stray), catalog).value
    assert problems
    assert any("team-zed" in p for p in problems), problems
    load_policy_file(str(stray))  # the same file without a catalog to check teams against
    assert doctor_reads._policy_problems(str(stray), None) == Read([])


# --------------------------------------------------------------------------- no API server


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_an_api_server_that_does_not_answer_is_asked_nothing_more() -> None:
    config = client.Configuration(host=f"http://127.0.0.1:{closed_port()}")
    settings = DoctorSettings(catalog_file=str(CATALOG), notebook_namespace="nb", timeout=5)
    async with client.ApiClient(config) as api:
        facts = await gather(settings, api)
    assert facts.api_groups.value is None
    assert facts.api_groups.error  # the connection's own words
    assert not facts.api_groups.forbidden
    down: Read[Any] = Read.failed(facts.api_groups.error)
    unread: list[Read[Any]] = [
        facts.kueue_version,
        facts.flavors,
        facts.cluster_queues,
        facts.cohorts,
        facts.local_queues,
        facts.nodes,
        facts.admission_policies,
        facts.admission_bindings,
    ]
    assert unread == [down] * len(unread)
    assert facts.access == []
    assert (facts.hub, facts.prometheus) == (None, None)  # neither configured
    assert facts.catalog.value is not None
    assert facts.notebook_namespace == "nb"
    assert "--as-service-account NAMESPACE/NAME" in facts.identity_hint


async def test_no_line_of_the_doctor_shows_a_urls_credentials() -> None:
    # Fifth audit, finding 3: the doctor's text, --json and api/console/checks printed
    # prometheus_url with its user:password@ (they are all the checks' lines and dicts).
    config = client.Configuration(host=f"http://127.0.0.1:{closed_port()}")
    prometheus, hub = closed_port(), closed_port()
    settings = DoctorSettings(
        hub_api_url=f"http://svc:hub-pass@127.0.0.1:{hub}/hub/api",
        hub_token="t",
        prometheus_url=f"http://grafana:s3cret@127.0.0.1:{prometheus}",
        prometheus_queries=service_queries("avg(util)", ""),
        prometheus_timeout=2,
        catalog_file=str(CATALOG),
        timeout=5,
    )
    async with client.ApiClient(config) as api:
        facts = await gather(settings, api)
    assert facts.prometheus is not None
    assert facts.prometheus.url == f"http://127.0.0.1:{prometheus}"
    checks = run_checks(facts)
    shown = "\n".join(c.line() for c in checks) + json.dumps([c.as_dict() for c in checks])
    assert f"http://127.0.0.1:{prometheus} does not answer" in shown
    for secret in ("s3cret", "grafana", "hub-pass", "svc:"):
        assert secret not in shown, secret

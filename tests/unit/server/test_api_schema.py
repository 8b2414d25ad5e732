"""The HTTP API's OpenAPI documents (``jupyter_gpuaas/server/openapi.json``, the service's
``gpuaas_service/openapi.json``) are valid; the payloads the Python code builds match their
schemas; the TypeScript types of the sidebar and of the console are generated from them and
current."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from gpuaas_service.queue.workloads import queue_payload, read_notebook_pod
from jupyter_gpuaas.core.activity import KernelActivity, TerminalActivity
from jupyter_gpuaas.core.kueue import read_workload
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity_payload import activity_payload
from jupyter_gpuaas.server.queue import error_payload
from jupyter_gpuaas.server.service_client import ServiceProblem
from tests.support import openapi, route_table
from tests.support.api_schema import schema_errors
from tests.support.queue_samples import (
    CQS,
    LQS,
    NOW,
    QUEUE,
    THREE_AND_BOB,
    notebook_pod,
    pod_workload,
)

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)


def test_both_openapi_documents_are_valid() -> None:
    assert openapi.document_problems() == []
    for server in ("extension", "service"):
        jsonschema.Draft202012Validator.check_schema(openapi.document(server))


def test_an_access_table_cell_must_be_a_listed_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = openapi.document("service")
    callers = changed["paths"]["/api/health"]["get"]["x-gpuaas-access"]["callers"]
    callers["a team lead"] = "418 a teapot"
    raw, document = openapi.raw, openapi._document
    monkeypatch.setattr(openapi, "raw", lambda s: changed if s == "service" else raw(s))
    monkeypatch.setattr(openapi, "_document", lambda s: changed if s == "service" else document(s))
    assert openapi.document_problems() == [
        "service: GET api/health: x-gpuaas-access says 'a team lead' gets 418, which its "
        "responses do not list"
    ]


def test_an_invalid_document_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: a response without its description, a path without its slash."""
    broken = openapi.document("extension")
    del broken["paths"]["/usage"]["get"]["responses"]["200"]["description"]
    broken["paths"]["activity"] = broken["paths"].pop("/activity")
    raw = openapi.raw
    monkeypatch.setattr(openapi, "raw", lambda s: broken if s == "extension" else raw(s))
    assert len(openapi.document_problems()) == 1  # the first problem of the document


def test_an_access_check_no_server_makes_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = openapi.document("service")
    changed["paths"]["/api/health"]["get"]["x-gpuaas-access"]["check"] = "jupyter-server:kernels"
    raw = openapi.raw
    monkeypatch.setattr(openapi, "raw", lambda s: changed if s == "service" else raw(s))
    (problem,) = openapi.document_problems()
    assert problem.startswith(
        "service: GET api/health: x-gpuaas-access check 'jupyter-server:kernels' is none of"
    )


def test_each_stored_document_validates_alone_with_a_stock_validator() -> None:
    """As Swagger UI, Redoc or a client generator loads it: the file alone, read by
    openapi-spec-validator with no resolver of ours (the service's names nothing outside)."""
    from openapi_spec_validator import validate

    for path in openapi.PATHS.values():
        text = path.read_text(encoding="utf-8")
        assert "urn:" not in text
        validate(json.loads(text))


def test_each_server_serves_its_document_as_a_stock_validator_loads_it() -> None:
    """What ``GET gpuaas/api/openapi.json`` and the service's ``GET api/openapi.json`` send
    (who may read them is the route tables' business): the stored document, whole."""
    from openapi_spec_validator import validate

    from jupyter_gpuaas.core.api_documents import document_text

    served = {"extension": document_text("extension"), "service": document_text("service")}
    for server, path in openapi.PATHS.items():
        doc = json.loads(served[server])
        validate(doc)
        assert doc == json.loads(path.read_text(encoding="utf-8")), server
        assert "/openapi.json" in doc["paths"] or "/api/openapi.json" in doc["paths"]


def test_the_services_copies_of_shared_schemas_are_the_extensions() -> None:
    assert openapi.bundle_problems() == []


def test_a_shared_schema_changed_without_its_copy_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    changed = openapi.raw("extension")
    changed["components"]["schemas"]["activity"]["description"] = "changed here only"
    raw = openapi.raw
    monkeypatch.setattr(openapi, "raw", lambda s: changed if s == "extension" else raw(s))
    (problem,) = openapi.bundle_problems()
    assert problem.endswith("not copied in as that document has them: make api-types")
    assert (
        openapi.stored_service_document()["components"]["schemas"]["activity"]
        == (changed["components"]["schemas"]["activity"])
    )


def test_the_activity_payload_matches_the_schema() -> None:
    payload = activity_payload(
        sampled_at=T0,
        source="simulated",
        error=None,
        kernels=[
            KernelActivity("k1", "busy", T0, 1, 2 * 1024**3),
            KernelActivity("k2", None, None, 0, None),
        ],
        terminals=[TerminalActivity("1", T0 - timedelta(minutes=5))],
        devices=[Device("GPU-1", 0, "H100", 80 * 1024**3, 0, utilization=40)],
        busy_utilization_percent=5,
        started=T0 - timedelta(hours=1),
    )
    assert payload["gpu_utilization"] == [{"uuid": "GPU-1", "utilization": 40}]
    assert schema_errors("activity", payload) == []


def test_the_queue_answers_match_the_schema() -> None:
    problem = ServiceProblem("service_unavailable", "The service cannot be reached.", "Retrying.")
    assert schema_errors("queue", error_payload(problem)) == []
    pods = [notebook_pod("pod-1", "alice")]
    answer = queue_payload(
        "alice",
        workloads=[read_workload(w) for w in [*THREE_AND_BOB, pod_workload("nb", "pod-1")]],
        notebook_pods={p.uid: p for p in map(read_notebook_pod, pods)},
        pending={("team-a", "training"): QUEUE},
        local_queues=LQS,
        cluster_queues=CQS,
        now=NOW,
        teams=("team-a",),
    )
    assert {i["kind"] for i in answer["items"]} >= {"job"}
    assert answer["teams"]
    assert schema_errors("queue", answer) == []


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"kernels": "x"}, "kernels"),
        ({"gpu_memory": 1.5}, "gpu_memory"),
        ({"unexpected": 1}, "(payload)"),
    ],
)
def test_a_payload_that_drifts_from_the_schema_is_caught(
    payload: dict[str, Any], path: str
) -> None:
    base: dict[str, Any] = {
        "sampled_at": None,
        "source": "nvml",
        "error": None,
        "kernels": [],
        "terminals": [],
        "gpu_memory": 0,
        "gpu_utilization": [],
        "idle_since": None,
    }
    errors = schema_errors("activity", {**base, **payload})
    assert [e.split(":")[0] for e in errors] == [path]


# --------------------------------------------------------------------------- TypeScript


def test_the_generated_typescript_types_are_current() -> None:
    """The sidebar's and the console's types, as openapi-typescript writes them from the two
    documents (``make lint`` runs the same check; ``make api-types`` rewrites them)."""
    assert openapi.typescript_problems() == []


def test_a_document_changed_without_its_types_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = openapi.document("extension")
    changed["components"]["schemas"]["cap"]["properties"]["colour"] = {"type": "string"}
    monkeypatch.setattr(openapi, "_document", lambda server: changed)
    (problem,) = openapi.typescript_problems(["extension"])
    assert problem.startswith("labextension/src/extensionApi.ts is not what")


# --------------------------------------------------------------------------- docs/security.md


def test_the_security_tables_are_written_from_the_documents() -> None:
    """Each row of "Who may call each route" is an operation's ``x-gpuaas-access`` callers; a
    cell edited by hand is written back as the document says."""
    text = route_table.SECURITY.read_text(encoding="utf-8")
    assert route_table.security_page(text) == text
    row = "| `GET api/health` | 403 | 403 | 403 | 403 | 403 | 200 with the operator token |"
    assert row in text
    edited = text.replace(row, row.replace("| 403 | 403 | 403 |", "| 403 | 200 | 403 |", 1))
    assert edited != text
    assert route_table.security_page(edited) == text


def test_the_api_page_names_every_operation_and_only_schemas_that_exist(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert openapi.api_page_problems() == []
    text = openapi.API_PAGE.read_text(encoding="utf-8")
    page = tmp_path / "api.md"
    page.write_text(
        text.replace(
            "| `GET api/health` | `service_health` |", "| `GET api/health` | `health` |"
        ).replace("`GET metrics`", "`GET the metrics`"),
        encoding="utf-8",
    )
    monkeypatch.setattr(openapi, "API_PAGE", page)
    assert openapi.api_page_problems() == [
        "docs/api.md names no `GET metrics` (getMetrics, the service)",
        "docs/api.md names a schema 'health' that no document has",
    ]

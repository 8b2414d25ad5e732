"""The HTTP API's OpenAPI documents (``jupyter_gpuaas/server/openapi.json``, the service's
``gpuaas_service/openapi.json``) are valid; the payloads the Python code builds match their
schemas, and so do the TypeScript types of the sidebar
(``labextension/src/types.ts``) and of the console (its ``api.ts``), field by field and type by
type (tests/support/api_types.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import jsonschema
import pytest

from gpuaas_service.queue.workloads import queue_payload, read_notebook_pod
from jupyter_gpuaas.core.activity import KernelActivity, TerminalActivity
from jupyter_gpuaas.core.kueue import read_workload
from jupyter_gpuaas.gpu.model import Device
from jupyter_gpuaas.server.activity import activity_payload
from jupyter_gpuaas.server.queue import error_payload
from jupyter_gpuaas.server.service_client import ServiceProblem
from tests.support import api_types, openapi
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


def test_an_invalid_document_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check itself: a response without its description, a path without its slash."""
    broken = openapi.document("extension")
    del broken["paths"]["/usage"]["get"]["responses"]["200"]["description"]
    broken["paths"]["activity"] = broken["paths"].pop("/activity")
    monkeypatch.setattr(openapi, "_document", lambda server: broken)
    assert len(openapi.document_problems()) == 2  # the first problem of each


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
        ({"gpu_memory": -1.5}, "gpu_memory"),
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


def test_the_typescript_types_match_the_schema() -> None:
    """The sidebar's types.ts, jobsModel.ts, resizeModel.ts and reclaimModel.ts and the
    console's api.ts, every declaration of tests/support/api_types.py's list (``make lint``
    runs the same check)."""
    assert api_types.problems() == []
    assert {"IUsage", "IConsole", "IHistory", "IJob", "IResizeOffer", "IReclaimAnswer"} <= {
        name for names in api_types.CHECKED.values() for name in names.values()
    }


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        (  # the schema says string | null
            "export interface ICap { memory: number; source: string; enforced_by: string;"
            " cores_percent: number | null }",
            "ICap.source: string; the schema says string | null",
        ),
        (  # a field the schema does not have
            "export interface ICap { memory: number; source: string | null; enforced_by: string;"
            " cores_percent: number | null; colour: string }",
            "ICap fields",
        ),
        (  # required in the schema, optional here
            "export interface ICap { memory?: number; source: string | null; enforced_by: string;"
            " cores_percent: number | null }",
            "ICap fields",
        ),
        ("export type ICap = string;", "ICap: no such interface"),
    ],
)
def test_the_typescript_check_sees_a_declaration_that_drifted(source: str, problem: str) -> None:
    declared = api_types.typescript_declarations(f"/** doc */\n{source}\n")
    (found,) = api_types.check_module("x.ts", declared, {"cap": "ICap"})
    assert found.startswith(f"x.ts: {problem}"), found


def test_the_typescript_check_reads_optional_and_quoted_fields() -> None:
    declared = api_types.typescript_declarations(
        "export interface IActionCounts {\n  warn?: number;\n  'clear-warning'?: number;\n}\n"
        "export type Kind = 'a' | 'b';\n"
    )
    assert declared == {
        "IActionCounts": {"warn?": "number", "clear-warning?": "number"},
        "Kind": "'a' | 'b'",
    }
    names = {"service_action_counts": "IActionCounts"}
    (found,) = api_types.check_module("x.ts", declared, names)
    assert "fields ['clear-warning?', 'warn?']" in found  # the schema's wait, reclaim, skip: absent


def test_an_interface_that_extends_another_has_its_fields_its_own_last() -> None:
    declared = api_types.typescript_declarations(
        "export interface IView { code: string; idle: number | null; note: string }\n"
        "export interface IWire extends IView, Elsewhere { code: 'a' | 'b'; idle: number }\n"
    )
    assert declared["IWire"] == {"code": "'a' | 'b'", "idle": "number", "note": "string"}
    assert declared["IView"] == {"code": "string", "idle": "number | null", "note": "string"}

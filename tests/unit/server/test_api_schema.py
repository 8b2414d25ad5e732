"""One schema for the server extension's HTTP API (``jupyter_gpuaas/server/api-schema.json``):
the payloads the Python code builds match it, and so do the sidebar's TypeScript types
(``labextension/src/types.ts``), field by field and type by type."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
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
from tests.support.api_schema import api_schema, schema_errors
from tests.support.queue_samples import (
    CQS,
    LQS,
    NOW,
    QUEUE,
    THREE_AND_BOB,
    notebook_pod,
    pod_workload,
)

TYPES_TS = Path(__file__).resolve().parents[3] / "labextension" / "src" / "types.ts"

# The schema's definitions the sidebar declares, and their names in types.ts.
TS_NAMES = {
    "gpu_source": "GpuSource",
    "gpu_error_kind": "GpuErrorKind",
    "attribution": "Attribution",
    "cap": "ICap",
    "device": "IDevice",
    "kernel_usage": "IKernelUsage",
    "usage": "IUsage",
    "queue_item": "IQueueItem",
    "queue_team": "IQueueTeam",
    "queue": "IQueue",
}

T0 = datetime(2026, 11, 30, 16, 0, tzinfo=timezone.utc)


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(api_schema())


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


# --------------------------------------------------------------------------- types.ts


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside braces, brackets and angle brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "{[<(":
            depth += 1
        elif c in "}]>)":
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _fields(body: str) -> dict[str, str]:
    out = {}
    for member in _split_top(body, ";"):
        name, _, ts_type = member.partition(":")
        out[name.strip()] = " ".join(ts_type.split())
    return out


def typescript_declarations(text: str) -> dict[str, dict[str, str] | str]:
    """Interfaces (their fields' types) and type aliases of a TypeScript module."""
    text = _without_comments(text)
    found: dict[str, dict[str, str] | str] = {}
    for m in re.finditer(r"export type (\w+) =([^;]+);", text):
        found[m.group(1)] = " ".join(m.group(2).split())
    for m in re.finditer(r"export interface (\w+) \{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        found[m.group(1)] = _fields(text[m.end() : i - 1])
    return found


def ts_type(node: dict[str, Any]) -> str:
    """The TypeScript type a schema node stands for, as types.ts writes it."""
    if "$ref" in node:
        return TS_NAMES[node["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in node:
        return " | ".join(ts_type(n) for n in node["oneOf"])
    if "enum" in node:
        return " | ".join(f"'{v}'" for v in node["enum"])
    kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
    return " | ".join(_ts_single(k, node) for k in kinds)


def _ts_single(kind: str, node: dict[str, Any]) -> str:
    if kind == "array":
        return ts_type(node["items"]) + "[]"
    if kind == "object" and "properties" in node:
        inner = "; ".join(f"{k}: {ts_type(v)}" for k, v in node["properties"].items())
        return "{ " + inner + " }"
    if kind == "object":
        return f"Record<string, {ts_type(node['additionalProperties'])}>"
    return {"integer": "number", "number": "number", "null": "null"}.get(kind, kind)


def _union(text: str) -> set[str]:
    return {
        " ".join(part.split()).rstrip(";").replace("; }", " }") for part in _split_top(text, "|")
    }


def test_the_typescript_types_match_the_schema() -> None:
    declared = typescript_declarations(TYPES_TS.read_text(encoding="utf-8"))
    problems = []
    for definition, ts_name in TS_NAMES.items():
        node = api_schema()["$defs"][definition]
        ts = declared.get(ts_name)
        if "properties" not in node:
            if not isinstance(ts, str) or _union(ts) != _union(ts_type(node)):
                problems.append(f"{ts_name} = {ts!r}; the schema says {ts_type(node)}")
            continue
        if not isinstance(ts, dict):
            problems.append(f"{ts_name}: no such interface in types.ts")
            continue
        if set(ts) != set(node["properties"]):
            problems.append(f"{ts_name} fields {sorted(ts)} != {sorted(node['properties'])}")
            continue
        for field, field_node in node["properties"].items():
            if _union(ts[field]) != _union(ts_type(field_node)):
                problems.append(
                    f"{ts_name}.{field}: {ts[field]}; the schema says {ts_type(field_node)}"
                )
    assert problems == []


def test_the_typescript_check_sees_a_field_that_drifted() -> None:
    declared = typescript_declarations(
        "/** doc */\nexport interface ICap {\n  memory: number;\n  source: string;\n}\n"
    )
    assert declared == {"ICap": {"memory": "number", "source": "string"}}
    cap = api_schema()["$defs"]["cap"]["properties"]
    assert _union("string") != _union(ts_type(cap["source"]))  # the schema says string | null

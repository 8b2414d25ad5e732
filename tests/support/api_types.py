"""The TypeScript declarations of the API's answers, checked against the one API schema
(``jupyter_gpuaas/server/api-schema.json``): each schema definition named in :data:`CHECKED`
must be declared in its TypeScript module with the same fields, the same optional ones and the
same types, written as :func:`ts_type` writes the schema's node.

``python -m tests.support.api_types`` prints every difference and fails (``make lint`` runs it);
the unit tests run the same check.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.api_schema import api_schema

ROOT = Path(__file__).resolve().parents[2]

SIDEBAR = "labextension/src/types.ts"
JOBS = "labextension/src/jobsModel.ts"
RESIZE = "labextension/src/resizeModel.ts"
RECLAIM = "labextension/src/reclaimModel.ts"
KERNEL_STATE = "labextension/src/kernelStateModel.ts"
CONSOLE = "culler/gpuaas_service/console/src/api.ts"
CHECKS = "culler/gpuaas_service/console/src/checks.ts"

CHECKED: dict[str, dict[str, str]] = {
    SIDEBAR: {
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
        "service_activity_state": "Activity",
        "service_reclaim_action": "ReclaimAction",
        "service_reclaim_code": "ReclaimCode",
    },
    JOBS: {
        "service_job_state": "JobState",
        "service_job": "IJob",
        "service_jobs": "IJobsAnswer",
        "service_job_offering": "IJobOffering",
        "service_job_team": "IJobTeam",
        "service_job_options": "IJobOptionsAnswer",
    },
    RESIZE: {
        "service_resize_offering": "IResizeOffering",
        "service_resize_offer": "IResizeOffer",
        "service_resize_down": "IResizeDown",
        "service_resize_move": "IResizeMove",
    },
    RECLAIM: {
        "service_reclaim_cause": "IReclaimCauseAnswer",
        "service_warning": "IReclaimWarningAnswer",
        "service_reclaim": "IReclaimAnswer",
        "service_policy_fields": "IPolicyFieldsAnswer",
        "service_standing_unknown": "IStandingUnknownAnswer",
        "service_standing_known": "IStandingKnownAnswer",
        "service_standing": "IStandingAnswer",
    },
    KERNEL_STATE: {
        "kernel_state_lost": "IKernelStateLost",
        "kernel_state_outcome": "IKernelStateOutcome",
        "kernel_state_snapshot": "IKernelStateSnapshot",
        "kernel_state_info": "IKernelStateInfo",
        "kernel_state_restore": "IKernelStateRestore",
    },
    CHECKS: {
        "service_doctor_check": "IDoctorCheck",
        "service_console_checks": "IChecksAnswer",
    },
    CONSOLE: {
        "service_action_counts": "IActionCounts",
        "service_console_amounts": "IAmounts",
        "service_console_flavor": "IFlavorRow",
        "service_hours": "IHours",
        "service_console_team": "ITeam",
        "service_workbench": "IWorkbench",
        "service_console_handoff": "IHandoff",
        "service_console_event": "IEvent",
        "service_console_regret": "IRegret",
        "service_console_policy": "IPolicyInForce",
        "service_console": "IConsole",
        "service_gpu_row": "IGpuRow",
        "service_gpu_node": "IGpuNode",
        "service_console_gpus": "IGpus",
        "service_fit_row": "IFitRow",
        "service_fit_team": "IFitTeam",
        "service_console_fit": "IFit",
        "service_console_mig_node": "IMigNode",
        "service_field_error": "IFieldError",
        "service_preview_change": "IPreviewChange",
        "service_policy_preview": "IPreview",
        "service_preview_refused": "IPreviewRefused",
        "service_history_series": "IHistorySeries",
        "service_history_chart": "IHistoryChart",
        "service_history_available": "IHistoryAvailable",
        "service_history_unavailable": "IHistoryUnavailable",
        "service_console_history": "IHistory",
    },
}
"""Per TypeScript module: the schema definitions it declares, and their names there."""

Declared = dict[str, dict[str, str] | str]
"""An interface's fields (``name`` or ``name?`` → type) or a type alias's type."""


# --------------------------------------------------------------------------- reading TypeScript


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside braces, brackets, parentheses and angle brackets."""
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
        name, _, member_type = member.partition(":")
        out[name.strip().replace("'", "")] = " ".join(member_type.split())
    return out


def typescript_declarations(text: str) -> Declared:
    """Interfaces (their fields' types; an optional field's name ends in ``?``) and type
    aliases of a TypeScript module. An interface that ``extends`` others of the module has
    their fields too."""
    text = _without_comments(text)
    found: Declared = {}
    for m in re.finditer(r"export type (\w+) =([^;]+);", text):
        found[m.group(1)] = " ".join(m.group(2).split())
    parents: dict[str, list[str]] = {}
    for m in re.finditer(r"export interface (\w+)(?: extends ([\w, ]+))? \{", text):
        depth, i = 1, m.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        found[m.group(1)] = _fields(text[m.end() : i - 1])
        parents[m.group(1)] = [p.strip() for p in (m.group(2) or "").split(",") if p.strip()]
    for name in parents:
        found[name] = _inherited(name, found, parents)
    return found


def _inherited(
    name: str, found: Declared, parents: Mapping[str, list[str]]
) -> dict[str, str] | str:
    """The fields of interface ``name`` with those of the interfaces it extends (its own
    last); a parent that is not an interface of the module is left out."""
    fields: dict[str, str] = {}
    for parent in parents.get(name, ()):
        inherited = _inherited(parent, found, parents) if parent in found else {}
        if isinstance(inherited, dict):
            fields.update(inherited)
    own = found[name]
    return {**fields, **own} if isinstance(own, dict) else own


# --------------------------------------------------------------------------- the schema's types


def _literal(value: object) -> str:
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def ts_type(node: Mapping[str, Any], names: Mapping[str, str]) -> str:
    """The TypeScript type a schema node stands for, a definition by its name in ``names``
    (a plain one, such as a string with a pattern, by its type)."""
    if "$ref" in node:
        definition = node["$ref"].rsplit("/", 1)[1]
        if definition in names:
            return names[definition]
        target = api_schema()["$defs"][definition]
        if "type" not in target or "properties" in target:
            raise KeyError(f"{definition} has no TypeScript name here")
        return ts_type(target, names)
    if "oneOf" in node:
        return " | ".join(ts_type(n, names) for n in node["oneOf"])
    if "enum" in node:
        return " | ".join(_literal(v) for v in node["enum"])
    if "const" in node:
        return _literal(node["const"])
    kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
    return " | ".join(_ts_single(k, node, names) for k in kinds)


def _ts_single(kind: str, node: Mapping[str, Any], names: Mapping[str, str]) -> str:
    if kind == "array":
        items = ts_type(node["items"], names)
        return (f"({items})" if " | " in items else items) + "[]"
    if kind == "object" and "properties" in node:
        required = set(node.get("required", ()))
        inner = "; ".join(
            f"{k}{'' if k in required else '?'}: {ts_type(v, names)}"
            for k, v in node["properties"].items()
        )
        return "{ " + inner + " }"
    if kind == "object":
        values = node.get("additionalProperties")
        return f"Record<string, {ts_type(values, names) if values else 'unknown'}>"
    return {"integer": "number", "number": "number", "null": "null"}.get(kind, kind)


def _union(text: str) -> set[str]:
    return {
        " ".join(part.split()).rstrip(";").replace("; }", " }") for part in _split_top(text, "|")
    }


def _differences(
    ts_name: str, node: Mapping[str, Any], ts: dict[str, str] | str | None, names: Mapping[str, str]
) -> list[str]:
    if "properties" not in node:
        want = ts_type(node, names)
        if not isinstance(ts, str) or _union(ts) != _union(want):
            return [f"{ts_name} = {ts!r}; the schema says {want}"]
        return []
    if not isinstance(ts, dict):
        return [f"{ts_name}: no such interface"]
    required = set(node.get("required", ()))
    want_fields = {k if k in required else k + "?": v for k, v in node["properties"].items()}
    if set(ts) != set(want_fields):
        return [f"{ts_name} fields {sorted(ts)} != the schema's {sorted(want_fields)}"]
    problems = []
    for field, field_node in want_fields.items():
        want = ts_type(field_node, names)
        if _union(ts[field]) != _union(want):
            problems.append(f"{ts_name}.{field}: {ts[field]}; the schema says {want}")
    return problems


def check_module(
    path: str, declared: Declared, names: Mapping[str, str], known: Mapping[str, str] | None = None
) -> list[str]:
    """What differs between ``declared`` (a module's declarations of ``names``) and the schema.
    A field may name a type another checked module declares (``known``: every module's names;
    the console imports the reclaim types the sidebar declares)."""
    definitions = api_schema()["$defs"]
    resolve = {**(known or {}), **names}
    problems = []
    for definition, ts_name in names.items():
        try:
            found = _differences(ts_name, definitions[definition], declared.get(ts_name), resolve)
        except KeyError as e:
            found = [f"{ts_name}: {e.args[0]}"]
        problems += [f"{path}: {p}" for p in found]
    return problems


def problems(root: Path = ROOT) -> list[str]:
    """Every difference between the checked TypeScript modules and the schema."""
    known = {definition: ts for names in CHECKED.values() for definition, ts in names.items()}
    out = []
    for path, names in CHECKED.items():
        declared = typescript_declarations((root / path).read_text(encoding="utf-8"))
        out += check_module(path, declared, names, known)
    return out


def main() -> int:
    found = problems()
    for line in found:
        print(line, file=sys.stderr)
    if found:
        schema = "jupyter_gpuaas/server/api-schema.json"
        print(f"{len(found)} TypeScript declaration(s) differ from {schema}", file=sys.stderr)
        return 1
    checked = sum(len(names) for names in CHECKED.values())
    print(f"{checked} TypeScript declarations match the API schema")
    return 0


if __name__ == "__main__":
    sys.exit(main())

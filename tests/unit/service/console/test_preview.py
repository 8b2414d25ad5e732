"""The policy preview: a pasted policy's field errors, or what it would do on the last
cycle's inputs."""

from __future__ import annotations

import json

import pytest

from gpuaas_service.console.preview import (
    PreviewError,
    parse_policy_text,
    plan_of_snapshot,
    preview,
)
from tests.support.console_samples import EXAMPLES


def test_preview_lists_every_problem_with_its_field_path() -> None:
    text = (
        "policies:\n  - name: x\n    idle_after: soon\n    reclaim: sometimes\n  - idle_after: 1h\n"
    )
    with pytest.raises(PreviewError) as e:
        parse_policy_text(text)
    paths = [x["path"] for x in e.value.errors]
    assert paths == ["policies[0].idle_after", "policies[0].reclaim", "policies[1].name"]
    with pytest.raises(PreviewError) as e:
        parse_policy_text("policies: [\n")
    assert e.value.errors[0]["path"] == "(text)"
    with pytest.raises(PreviewError):
        parse_policy_text("x" * (64 * 1024 + 1))


def test_preview_with_a_shorter_idle_after_shows_more_reclaims() -> None:
    # In force: MIG notebooks idle after 3h (alice is idle 3h35m, bob 2h10m: too few for the
    # queued job, which needs two). Pasted: the example's 1h: both are warned.
    example = (EXAMPLES / "policy.yaml").read_text()
    longer = example.replace("idle_after: 1h", "idle_after: 3h")
    data = json.loads((EXAMPLES / "snapshot.json").read_text())
    current = plan_of_snapshot(data, parse_policy_text(longer))
    answer = preview(data, example, current)
    busier = answer["summary"]["warn"] + answer["summary"]["reclaim"]
    in_force = answer["summary_in_force"]
    assert in_force is not None
    before = in_force["warn"] + in_force["reclaim"]
    assert busier > before, (answer["summary"], answer["summary_in_force"])
    assert {c["key"]: (c["now"], c["preview"]) for c in answer["changed"]} == {
        "alice": ("skip", "warn"),
        "bob": ("skip", "warn"),
    }
    same = preview(data, longer, current)
    assert same["changed"] == []
    assert same["summary"] == same["summary_in_force"]

"""The console's policy preview parses what a console-scope holder pastes within bounds
(core/parsing.py): aliases are counted before they are expanded, nesting is bounded, and an
error quotes a bounded part of the text."""

from __future__ import annotations

import re

import pytest

from gpuaas_service.console.preview import (
    MAX_PROBLEM_CHARS,
    MAX_PROBLEMS,
    PreviewError,
    parse_policy_text,
)
from jupyter_gpuaas.core import api_types as api


def refused(text: str) -> list[api.ServiceFieldError]:
    with pytest.raises(PreviewError) as err:
        parse_policy_text(text)
    return err.value.errors


def test_an_alias_bomb_in_a_pasted_policy_is_refused_unexpanded() -> None:
    """Seven levels of nine aliases: 4.8 million users in 500 bytes, which the checks would
    walk and the answer would list."""
    lines = ["a0: &a0 [u, u, u, u, u, u, u, u, u]"]
    for n in range(1, 7):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]")
    text = "\n".join(lines) + (
        "\npolicies:\n  - name: x\n    match: {users: *a6}\n    idle_after: 1h\n"
    )
    assert len(text) < 600
    errors = refused(text)
    assert errors == [
        {
            "path": "(text).a4[0]",
            "message": "more than 10000 values once its aliases (*name) are expanded",
        }
    ]


def test_aliases_a_policy_needs_still_work() -> None:
    text = (
        "policies:\n"
        "  - &base {name: mig, match: {kinds: [mig]}, idle_after: 1h, reclaim: when-queued}\n"
        "  - {<<: *base, name: gpu, match: {kinds: [gpu]}}\n"
    )
    policies = parse_policy_text(text)
    assert [p.name for p in policies.policies] == ["mig", "gpu"]


def test_deep_nesting_and_long_lines_are_field_errors_of_bounded_size() -> None:
    errors = refused("policies: " + "[" * 5000 + "]" * 5000)
    assert errors == [
        {"path": "(text).policies[0][0][0]…[0][0][0][0]", "message": "nested deeper than 64 levels"}
    ]
    (error,) = refused("policies: [" + "{name: x}, " * 3000 + "}\n")
    assert error["path"] == "(text)"
    assert len(error["message"]) < 200
    assert "line 1" in error["message"]


def test_aliases_of_a_long_string_are_refused_and_problems_are_bounded() -> None:
    """9,000 aliases of a 6,000-character string: 54 MB of text in 42 KB, which the checks'
    errors would quote in full."""
    refs = ", ".join(["*a"] * 9000)
    text = f"defs: &a {'x' * 6000}\npolicies:\n  - name: p\n    match: {{users: [{refs}]}}\n"
    assert len(text) < 64 * 1024
    errors = refused(text)
    assert len(errors) == 1
    assert errors[0]["message"].startswith("more than 262144 characters once its aliases")
    # within the bounds, a long value repeated: each message cut, the list cut and counted
    refs = ", ".join(["*a"] * 60)
    text = f"defs: &a {'y' * 1000}\npolicies:\n  - name: p\n    match: {{users: [{refs}]}}\n"
    errors = refused(text)
    assert len(errors) == MAX_PROBLEMS + 1
    assert all(len(e["message"]) <= MAX_PROBLEM_CHARS + 1 for e in errors)
    assert errors[-1]["path"] == "(text)"
    assert re.fullmatch(r"and \d+ more problem\(s\)", errors[-1]["message"])

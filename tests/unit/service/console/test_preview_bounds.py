"""The console's policy preview parses what a console-scope holder pastes within bounds
(core/parsing.py): aliases are counted before they are expanded, nesting is bounded, and an
error quotes a bounded part of the text."""

from __future__ import annotations

import pytest

from gpuaas_service.console.preview import PreviewError, parse_policy_text


def refused(text: str) -> list[dict[str, str]]:
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

"""The console's scope: which teams a caller's hub scopes open."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas_service.web.console import console_access


@pytest.mark.parametrize(
    ("scopes", "expected"),
    [
        (["custom:gpuaas:console"], None),
        (["custom:gpuaas:console!group=team-a", "self"], {"team-a"}),
        (
            ["custom:gpuaas:console!group=team-a", "custom:gpuaas:console!group=team-b"],
            {"team-a", "team-b"},
        ),
        (["custom:gpuaas:console!group=team-a", "custom:gpuaas:console"], None),
        (["access:services!service=gpuaas", "self"], False),
        (["custom:gpuaas:console!user=alice"], False),
        (["custom:gpuaas:consoles"], False),
        (None, False),
    ],
)
def test_console_access_from_scopes(scopes: Any, expected: Any) -> None:
    assert console_access(scopes) == expected

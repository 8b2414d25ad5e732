"""What the extension's handlers share (jupyter_gpuaas.server.context): its defaults are the
extension's own option defaults, so a state built without them means what the options say."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.server.app import GPUaaS
from jupyter_gpuaas.server.context import ServerState


async def nothing() -> api.Activity:
    return cast(api.Activity, {})


def state(**fields: Any) -> ServerState:
    return ServerState(
        sampler=cast(Any, None), activity_now=nothing, client=cast(Any, None), **fields
    )


def test_the_defaults_are_the_options_defaults() -> None:
    app = GPUaaS()
    built = state()
    assert built.kernel_state == app.kernel_state_settings()
    assert built.keeps_state_on_moves is app.kernel_state_on_reclaim
    assert (built.reporter, built.collector) == (None, None)  # reporting and collecting off


def test_the_state_cannot_be_changed_under_the_handlers() -> None:
    built = state()
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.keeps_state_on_moves = False  # type: ignore[misc]

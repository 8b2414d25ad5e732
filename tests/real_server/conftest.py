from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

# pytest-jupyter's server fixtures, for these tests only (a plugin would reach every test dir).
from pytest_jupyter.jupyter_server import *  # noqa: F403
from traitlets.config import Config

from jupyter_gpuaas.gpu.simulate import ENV_DIR
from tests.support.openapi import every_answer_checked


@pytest_asyncio.fixture  # type: ignore[no-redef]  # overrides pytest-jupyter's
async def jp_asyncio_loop() -> AsyncIterator[asyncio.AbstractEventLoop]:
    """Serve on the loop pytest-asyncio runs the tests on (asyncio_mode = auto), or requests
    from the test would wait on a server whose loop never runs."""
    yield asyncio.get_running_loop()


@pytest.fixture(autouse=True)
def answers_conform_to_the_document() -> Iterator[list[str]]:
    """Every answer of the extension's handlers in these tests conforms to its OpenAPI document
    (openapi-core: the operation, the status, the body's schema); one that does not fails the
    test that made it."""
    with every_answer_checked("extension", "jupyter_gpuaas") as found:
        yield found
    assert found == []


@pytest.fixture
def sim_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The simulation's state directory; kernels inherit it through the environment."""
    directory = tmp_path / "sim"
    monkeypatch.setenv(ENV_DIR, str(directory))
    return directory


@pytest.fixture
def gpuaas_config() -> dict[str, Any]:
    """c.GPUaaS for the test's server; parametrize this name to change it."""
    return {}


@pytest.fixture  # type: ignore[no-redef]  # overrides pytest-jupyter's
def jp_server_config(sim_dir: Path, gpuaas_config: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_gpuaas": True}},
            # sample_ttl 0: each request sees the latest state, so tests need not wait
            "GPUaaS": {"gpu_source": "simulated", "sample_ttl": 0.0, **gpuaas_config},
        }
    )

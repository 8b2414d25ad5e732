"""JupyterHub spawner for GPU workbenches queued by Kueue.

Use it with ``c.JupyterHub.spawner_class = "gpuaas"`` (entry point ``jupyterhub.spawners``).

The pure parts (``validate``, ``pod``, ``progress``, ``form``) import no hub code; the spawner
class is imported on first use so that they stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuaas_spawner.spawner import GPUaaSSpawner, check_catalog

__all__ = ["GPUaaSSpawner", "check_catalog"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from gpuaas_spawner import spawner

        return getattr(spawner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

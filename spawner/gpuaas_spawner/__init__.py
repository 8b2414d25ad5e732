"""JupyterHub spawner for GPU workbenches queued by Kueue.

Use it with ``c.JupyterHub.spawner_class = "gpuaas"`` (entry point ``jupyterhub.spawners``).

The pure parts (``validate``, ``pod``, ``progress``, ``form``) import no hub code; the spawner
class is imported on first use so that they stay light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuaas_spawner.spawner import GPUaaSSpawner, check_catalog

__all__ = ["HUB_TEMPLATES", "GPUaaSSpawner", "check_catalog"]

HUB_TEMPLATES = str(Path(__file__).parent / "templates" / "hub")
"""JupyterHub page templates (``c.JupyterHub.template_paths``): the "GPU console" link in the
hub's navigation, for users who may open the console (``template_vars["gpuaas_console"]``), and
the spawn progress page's "Leave the queue" for GPUaaSSpawner servers."""


def __getattr__(name: str) -> Any:
    if name in ("GPUaaSSpawner", "check_catalog"):
        from gpuaas_spawner import spawner

        return getattr(spawner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

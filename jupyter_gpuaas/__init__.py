"""jupyter-gpuaas: GPU-as-a-Service for Jupyter.

Importing this package is cheap and never touches NVML: kernels import it to call
``jupyter_gpuaas.gpu.simulate.hold``; the server extension loads its app lazily.
"""

from __future__ import annotations

from typing import Any

try:
    from jupyter_gpuaas._version import __version__  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # a source checkout that was never built
    __version__ = "0.0.0"


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-gpuaas"}]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from jupyter_gpuaas.server.app import GPUaaS

    return [{"module": "jupyter_gpuaas", "app": GPUaaS}]

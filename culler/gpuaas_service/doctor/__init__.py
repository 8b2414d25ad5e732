"""``gpuaas-admin --doctor``: is this cluster and hub ready for jupyter-gpuaas, and if not,
what is missing and how to fix it (docs/deploy.md).

:mod:`.checks` judges plain data (one pure function per area), :mod:`.gather` reads the
cluster, the hub and Prometheus; :func:`run_doctor` is both, for the command line and for the
console's ``api/console/checks``; the settings come from the service's own configuration
(``GPUaaSService.doctor_settings``).
"""

from __future__ import annotations

from typing import Any

from gpuaas_service.doctor.checks import Check, all_ok, run_checks
from gpuaas_service.doctor.reads import DoctorSettings, gather, service_queries

__all__ = [
    "Check",
    "DoctorSettings",
    "all_ok",
    "run_doctor",
    "service_queries",
]


async def run_doctor(settings: DoctorSettings, api: Any = None) -> list[Check]:
    """Every check, on ``api`` (a ``kubernetes_asyncio`` ApiClient; default: one made from the
    credentials in effect: in-cluster, else $KUBECONFIG)."""
    from kubernetes_asyncio import client

    if api is not None:
        return run_checks(await gather(settings, api))
    from kubespawner.clients import load_config

    load_config()
    async with client.ApiClient() as own:
        return run_checks(await gather(settings, own))

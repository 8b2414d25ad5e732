"""``gpuaas-culler --doctor``: is this cluster and hub ready for jupyter-gpuaas, and if not,
what is missing and how to fix it (docs/deploy.md).

:mod:`.checks` judges plain data (one pure function per area), :mod:`.gather` reads the
cluster, the hub and Prometheus; :func:`run_doctor` is both, for the command line and for the
console's ``api/console/checks``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuaas_service.doctor.checks import Check, all_ok, run_checks
from gpuaas_service.doctor.gather import DoctorSettings, gather, service_queries

if TYPE_CHECKING:
    from gpuaas_service.app import GPUaaSService

__all__ = [
    "Check",
    "DoctorSettings",
    "all_ok",
    "run_doctor",
    "service_queries",
    "settings_from_service",
]


def settings_from_service(app: GPUaaSService, **overrides: Any) -> DoctorSettings:
    """The doctor's settings from the service's own configuration (its file and environment)."""
    import os

    values: dict[str, Any] = {
        "hub_api_url": app.hub_api_url,
        "hub_token": os.environ.get("JUPYTERHUB_API_TOKEN", ""),
        "prometheus_url": app.prometheus_url,
        "prometheus_queries": service_queries(app.prometheus_query, app.hami_last_kernel_query),
        "prometheus_timeout": app.prometheus_timeout,
        "catalog_file": app.catalog_file,
        "policy_file": app.policy,
        "notebook_namespace": app.notebook_namespace,
        "job_namespaces": tuple(app.job_namespaces),
        "kueue_api_version": app.kueue_api_version,
        "visibility_api_version": app.kueue_visibility_api_version,
        "timeout": app.kubernetes_request_timeout,
    }
    values.update({k: v for k, v in overrides.items() if v is not None})
    return DoctorSettings(**values)


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

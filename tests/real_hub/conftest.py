"""Real JupyterHub with GPUaaSSpawner on the dev cluster (tests/real_hub).

``hub`` (session): a ``jupyterhub`` process (devcluster/hub.py: DummyAuthenticator, users alice and
bob in team-a, carol and dave in team-b, and ``ADVICE_USERS`` in team-a, who never start a server
here, so that the form's advice is seen without a last choice to keep; the catalog
spawner/demo-catalog.yaml, configurable-http-proxy) whose spawner talks to the cluster of
``devcluster.testing.cluster`` as the ServiceAccount ``jupyterhub/hub``. Servers on the local
offerings run as real ``jupyterhub-singleuser`` processes on the node agent's node. Everything
listens on 127.0.0.1.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import pytest
from kubernetes_asyncio import client

from devcluster.hub import DEFAULT_TEAMS, HubProcess, HubSettings
from devcluster.testing import Cluster, cluster
from tests.support.hub import ADVICE_USERS, CullerHub, Hub, browser, run_culler_hub

__all__ = ["browser", "cluster", "hub", "k8s", "reclaiming_hub"]


@pytest.fixture(scope="session")
def hub(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    state = tmp_path_factory.mktemp("hub")
    token = secrets.token_hex(24)
    # The hub's own ServiceAccount (jupyterhub/hub) and the project's RBAC, nothing more.
    kubeconfig = cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig")
    settings = HubSettings(
        state_dir=state,
        kubeconfig=kubeconfig,
        service_token=token,
        queue_timeout=300.0,
        start_timeout=90,
        poll_interval=1.0,
        teams={**DEFAULT_TEAMS, "team-a": [*DEFAULT_TEAMS["team-a"], *ADVICE_USERS]},
    )
    proc = HubProcess(settings)
    proc.start()
    try:
        yield Hub(proc, token)
    finally:
        proc.stop()


@pytest.fixture
async def k8s(cluster: Cluster) -> AsyncIterator[client.ApiClient]:
    """An admin-ish view for checking what exists: the read-only gpuaas ServiceAccount cannot
    read Secrets, so this uses the hub's own identity (which the tests never write with)."""
    async with cluster.api("jupyterhub", "hub") as api:
        yield api


@pytest.fixture(scope="module")
def reclaiming_hub(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CullerHub]:
    """A hub of the module's own with the gpuaas service reclaiming (``run_culler_hub``).
    "Saving" starts 8 s before the stop, so that the banner (which asks every 5 s) shows it, and
    homes are kept as z2jh keeps them: what the save wrote is there when the server starts again."""
    state = tmp_path_factory.mktemp("reclaiming-hub")
    with run_culler_hub(cluster, state, save_lead=8, persistent_homes=True) as hub:
        yield hub

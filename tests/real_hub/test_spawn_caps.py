"""Per-user caps through the hub's REST API, whatever spelling of a GPU choice a user sends.

A hub of its own on the demo catalog, with one change: team-a may run 2 GPU servers per user and
2 GPUs (so the GPU cap, not the server cap, is what a count decides). team-b keeps its cap of
1 GPU server per user, the cap a team-b user once got round with four named REST spawns that
named no offering (the team default): those were counted as nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from devcluster.hub import DEMO_CATALOG
from devcluster.testing import Cluster
from tests.support.hub import Hub, eventually, own_hub, pods_of

pytestmark = pytest.mark.integration

# Every way a REST spawn can ask for a team-b GPU server; each one is a GPU server.
GPU_SPELLINGS: list[Any] = [
    None,  # no body at all: the server's stored options, else the team default
    {},
    {"offering": None},
    {"team": "team-b"},
    {"count": "1"},
    {"count": 1},
    {"offering": "local-mig-1g"},
    {"offering": "local-mig-1g", "count": "1"},
    {"offering": "local-mig-3g"},
    {"offering": "mig-1g", "count": "01"},
    {"offering": "l4-shared", "image": None, "size": None},
    {"team": "team-b", "offering": "local-mig-1g", "count": 1, "image": "local-python"},
]
SERVER_CAP = "limit: 1 GPU server per user"


def _catalog(path: Path) -> Path:
    data = yaml.safe_load(DEMO_CATALOG.read_text())
    (team_a,) = (t for t in data["tenants"] if t["name"] == "team-a")
    team_a.update(max_gpu_servers_per_user=2, max_gpus_per_user=2)
    path.write_text(yaml.safe_dump(data))
    return path


def _refused(hub: Hub, user: str, server: str, options: Any, tried: list[tuple[str, str]]) -> str:
    tried.append((user, server))  # stopped at the end, should it have started
    r = hub.api("POST", f"/users/{user}/servers/{server}", options, timeout=60)
    assert r.status == 400, (options, r, hub.proc.log_tail())
    assert hub.server(user, server) is None, options
    return str(r.body["message"])


async def test_caps_hold_for_every_spelling_of_a_rest_spawn(
    cluster: Cluster, k8s: client.ApiClient, tmp_path: Path
) -> None:
    catalog = _catalog(tmp_path / "catalog.yaml")
    with own_hub(cluster, tmp_path, catalog_file=catalog) as hub:
        started: list[tuple[str, str]] = []
        try:
            # carol's first GPU server, spawned with no body (the team default) as the demo's
            # four were; the hub keeps what it really is
            r = hub.api("POST", "/users/carol/servers/first", timeout=60)
            assert r.status in (201, 202), r
            started.append(("carol", "first"))
            server = hub.wait_ready("carol", "first")
            assert server["user_options"] == {
                "team": "team-b",
                "offering": "local-mig-1g",
                "count": 1,
                "image": "local-python",
                "size": "small",
            }
            for i, options in enumerate(GPU_SPELLINGS):
                message = _refused(hub, "carol", f"more-{i}", options, started)
                assert SERVER_CAP in message, (options, message)
            assert len(await pods_of(k8s, "carol")) == 1  # nothing else was created

            # alice: two H100s asked for with the count as text are two GPUs against her cap
            r = hub.api(
                "POST", "/users/alice/servers/big", {"offering": "h100", "count": "2"}, timeout=60
            )
            assert r.status in (201, 202), r
            started.append(("alice", "big"))
            big = hub.server("alice", "big")
            assert big is not None
            assert big["user_options"]["count"] == 2, big
            for i, options in enumerate(
                [{"offering": "mig-1g"}, {}, {"offering": "l4-shared", "count": "1"}]
            ):
                message = _refused(hub, "alice", f"more-{i}", options, started)
                assert "limit: 2 GPUs per user" in message, (options, message)
            assert len(await pods_of(k8s, "alice")) == 1
        finally:
            for user, name in started:
                hub.stop(user, name)
            for user in ("carol", "alice"):
                await eventually(
                    lambda u=user: _no_pods(k8s, u), timeout=60, what=f"{user}'s pods gone"
                )


async def _no_pods(k8s: client.ApiClient, user: str) -> bool:
    return not await pods_of(k8s, user)

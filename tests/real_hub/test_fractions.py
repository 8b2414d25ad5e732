"""HAMi fractions through a real hub (docs/fractions.md).

On the simulated HAMi pool (kwok node l4-hami-0: the pods run, no server answers), users of one
team each start a quarter of an L4, the form's headroom counts down in quarter-L4s and GiB, and
the fifth quarter queues with its position once the team's fractional quota (4 quarters:
22528 MiB) is used. That hub is the test's own: team-b with five users, and a start timeout long
enough that the kwok servers (which never listen) stay starting while the test looks at them.

On the node agent's node (local-0), a quarter of its HAMi L4 is a real server: admitted on the
flavor local-hami, given HAMi's environment by the node agent, and its own GPU usage API shows
the cap as HAMi-core makes NVML report it, beside a whole GPU of the same team on the same node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import (
    Hub,
    browser,
    eventually,
    login,
    nothing_left,
    own_hub,
    pods_of,
    usage_of,
    workloads_of,
)

__all__ = ["browser"]  # a fixture

pytestmark = pytest.mark.integration

USERS = ["fa", "fb", "fc", "fd", "fe"]
QUARTER = {"team": "team-b", "offering": "l4-quarter"}


async def form_status(page: Any, hub: Hub, user: str, offering: str) -> str:
    """The state the user's spawn form shows for an offering (badge and facts, as text)."""
    await page.goto(f"{hub.url}/hub/spawn/{user}")
    oid = f"#gpuaas-team-b-{offering}"
    status = await page.locator(f"{oid}-status").inner_text()
    facts = await page.locator(f"{oid}-facts").inner_text()
    return " ".join(f"{status} | {facts}".split())


async def _running_on_hami(k8s: client.ApiClient, user: str) -> dict[str, Any] | None:
    pods = await pods_of(k8s, user)
    if len(pods) == 1 and pods[0].get("status", {}).get("phase") == "Running":
        return pods[0]
    return None


async def test_quarters_run_until_the_teams_pool_is_used_then_queue_with_position(
    cluster: Cluster, k8s: client.ApiClient, tmp_path: Path, browser: Any
) -> None:
    teams = {"team-a": ["alice"], "team-b": USERS}
    with own_hub(cluster, tmp_path, teams=teams, start_timeout=400, poll_interval=0.5) as hub:
        page = await login(browser, hub, "fe")
        try:
            first = await form_status(page, hub, "fe", "l4-quarter")
            assert first.startswith("available now (4 of 4 quarter-L4s free)"), first
            assert "5.5 GiB GPU memory (capped), 25% of its compute" in first, first
            assert "memory-limited, no fault isolation" in first, first
            assert "22 of 22 GiB of fractional GPU memory free" in first, first
            for i, user in enumerate(USERS[:4]):
                r = hub.api("POST", f"/users/{user}/server", QUARTER, timeout=60)
                assert r.status in (201, 202), r
                pod = await eventually(
                    lambda u=user: _running_on_hami(k8s, u),
                    timeout=60,
                    what=f"{user}'s quarter Running",
                )
                assert pod["spec"]["nodeName"] == "l4-hami-0"
                limits = pod["spec"]["containers"][0]["resources"]["limits"]
                assert {k: v for k, v in limits.items() if k.startswith("nvidia.com/")} == {
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpumem": "5632",
                    "nvidia.com/gpucores": "25",
                }
                assert pod["metadata"]["annotations"]["nvidia.com/use-gputype"] == "L4"
                left = 3 - i

                async def counted(n: int = left) -> bool:
                    return f"({n} of 4 quarter-L4s free)" in (
                        await form_status(page, hub, "fe", "l4-quarter")
                    )

                if left:  # at 0 the form says it queues (below)
                    await eventually(counted, timeout=30, what=f"the form counting {left} left")

            # The pool is used: the form says what queueing means.
            async def queues() -> str | None:
                text = await form_status(page, hub, "fe", "l4-quarter")
                return text if text.startswith("will queue") else None

            full = await eventually(queues, timeout=30, what="the form saying it queues")
            assert full.startswith("will queue: first in line once a quarter-L4 frees up"), full
            assert "0 of 22 GiB of fractional GPU memory free" in full, full

            r = hub.api("POST", "/users/fe/server", QUARTER, timeout=60)
            assert r.status == 202, r
            events = hub.progress_events("fe", until="position 1", timeout=60)
            assert "Queued in Team B: position 1" in events[-1]["message"]
            (pod,) = await pods_of(k8s, "fe")
            assert pod["spec"].get("schedulingGates"), pod["spec"]

            hub.stop("fa")  # a quarter frees: the queued one starts
            await eventually(
                lambda: _running_on_hami(k8s, "fe"), timeout=60, what="fe's quarter admitted"
            )
        finally:
            for user in USERS:
                hub.stop(user)
    for user in USERS:
        await eventually(lambda u=user: nothing_left(k8s, u, f"jupyter-{u}"), what=user)


GiB = 1 << 30
MiB = 1 << 20


async def test_a_quarter_on_the_node_agents_node_is_a_real_server_with_hamis_cap(
    hub: Hub, k8s: client.ApiClient
) -> None:
    spawns = {
        "alice": {"team": "team-a", "offering": "local-quarter"},
        "bob": {"team": "team-a", "offering": "local-gpu"},  # team-a's one whole local GPU
    }
    try:
        hub.start_all(spawns)
        (pod,) = await pods_of(k8s, "alice")
        assert pod["spec"]["nodeName"] == "local-0"
        limits = pod["spec"]["containers"][0]["resources"]["limits"]
        assert {k: v for k, v in limits.items() if k.startswith("nvidia.com/")} == {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": "5632",
            "nvidia.com/gpucores": "25",
        }
        # Kueue admitted the vGPU on local-hami, counted as transformed; bob's whole GPU, asking
        # for nvidia.com/gpu too, on "local" (he does not tolerate the vGPU flavor's taint).
        (wl,) = await workloads_of(k8s, {pod["metadata"]["name"]})
        (assignment,) = wl["status"]["admission"]["podSetAssignments"]
        assert set(assignment["flavors"].values()) == {"local-hami"}, assignment
        assert assignment["resourceUsage"]["nvidia.com/total-gpumem"] == "5632", assignment
        assert assignment["resourceUsage"]["nvidia.com/total-gpucores"] == "25", assignment
        (bob_pod,) = await pods_of(k8s, "bob")
        (bob_wl,) = await workloads_of(k8s, {bob_pod["metadata"]["name"]})
        (bob_assignment,) = bob_wl["status"]["admission"]["podSetAssignments"]
        assert bob_assignment["flavors"]["nvidia.com/gpu"] == "local", bob_assignment

        # The server's own view: the one L4 the node agent gave it, capped as HAMi-core shows
        # it (total = the cap), the cap read from the env the node agent set.
        usage = usage_of(hub, "alice")
        assert usage["source"] == "simulated", usage
        (device,) = usage["devices"]
        assert device["name"] == "NVIDIA L4", device
        assert device["cap"] == {
            "memory": 5632 * MiB,
            "source": "CUDA_DEVICE_MEMORY_LIMIT_0",
            "enforced_by": "HAMi",
            "cores_percent": 25,
        }, device
        assert device["memory_total"] == 5632 * MiB, device
        assert device["shared"] is True, device
        (whole,) = usage_of(hub, "bob")["devices"]
        assert whole["name"] == "NVIDIA A100-SXM4-40GB", whole
        assert whole["cap"] is None, whole
    finally:
        for user in spawns:
            hub.stop(user)
    for user in spawns:
        await eventually(lambda u=user: nothing_left(k8s, u, f"jupyter-{u}"), what=user)

"""A real reclaim keeps the kernels' state (real hub with persistent homes, Kueue,
node agent, the gpuaas service, real ipykernel kernels): before the service stops alice's
server for the queued Job it asks her server for a snapshot, her server saves her notebook's
kernel and answers, and the stop records what was kept (audit, metrics, console journal)."""

from __future__ import annotations

import http.cookiejar
import urllib.parse
import urllib.request

import pytest
from kubernetes_asyncio import client

from devcluster.testing import Cluster
from tests.support.hub import (
    PASSWORD,
    CullerHub,
    delete_jobs,
    eventually,
    no_pods,
    run_in_new_kernel,
)
from tests.support.reclaim_browser import PAIR, queue_job

pytestmark = [pytest.mark.integration]

BUILD = "x = 41\nbatches = (i for i in range(3))"


def spawn_page(hub: CullerHub, user: str) -> str:
    """The hub's spawn form as ``user`` sees it, logged in through the hub's login form."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{hub.url}/hub/login", timeout=60).read()
    xsrf = next(c.value for c in jar if c.name == "_xsrf")
    form = urllib.parse.urlencode({"username": user, "password": PASSWORD, "_xsrf": xsrf})
    opener.open(f"{hub.url}/hub/login", data=form.encode(), timeout=60).read()
    with opener.open(f"{hub.url}/hub/spawn", timeout=60) as r:
        return str(r.read().decode())


async def test_a_reclaim_saves_the_kernel_first_and_records_what_it_kept(
    reclaiming_hub: CullerHub, cluster: Cluster, k8s: client.ApiClient
) -> None:
    hub = reclaiming_hub
    try:
        hub.start_all(PAIR)
        await run_in_new_kernel(hub, "alice", BUILD, until="execute_reply", notebook="train.ipynb")

        await queue_job(cluster, "train-state")  # needs alice's and carol's slices

        async def stopped() -> bool:
            for user in ("alice", "carol"):
                if hub.server(user) is not None or not await no_pods(k8s, user):
                    return False
            return True

        await eventually(stopped, 180, "alice's and carol's servers reclaimed")

        records = {r["user"]: r for r in hub.audit() if r.get("event") == "culler.kernel-state"}
        alice = records["alice"]
        assert (alice["asked"], alice["answered"], alice["result"]) == (
            True,
            True,
            "kept_with_losses",
        ), alice
        (kernel,) = alice["kernels"]
        assert kernel["notebook"] == "train.ipynb"
        assert kernel["outcome"] == "kept_with_losses"
        assert kernel["lost"] == [{"name": "batches", "reason": "a generator"}]
        assert kernel["bytes"] > 0
        assert alice["waited_seconds"] < 60  # answered well within snapshot_timeout
        carol = records["carol"]
        assert (carol["answered"], carol["result"], carol["kernels"]) == (True, "kept", [])

        # on her return the spawn form says what was saved and that it comes back when the
        # notebook opens: nothing is restored yet, so nothing "was moved" or "is
        # back", and the name is quoted, not in Markdown the page would show raw
        page = spawn_page(hub, "alice")
        assert "Your server was stopped at" in page, page
        assert (
            "Your notebook train.ipynb: its variables were saved, except “batches” (a "
            "generator); they come back when you open the notebook again." in page
        ), page
        assert "was moved" not in page, page
        assert "are back" not in page, page

        metrics = hub.metrics()
        assert 'gpuaas_kernel_states_total{outcome="kept_with_losses"} 1.0' in metrics
        assert 'gpuaas_reclaim_states_total{result="kept_with_losses"} 1.0' in metrics
        reclaims = [r for r in hub.audit() if r.get("action") == "reclaim"]
        assert {r["user"] for r in reclaims} == {"alice", "carol"}
    finally:
        for user in PAIR:
            hub.stop(user)
        await delete_jobs(cluster, k8s)

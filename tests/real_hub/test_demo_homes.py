"""make demo's sample notebooks in a real home (demo/jobs.py's init container): a server on a
persistent home starts with the samples in it, and a user's edit of one survives the next start
(only missing samples are copied). Real hub, cluster, provisioner and node agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from demo.jobs import EXAMPLES, examples_config
from devcluster.testing import Cluster
from tests.support.hub import delete_home, eventually, no_pods, own_hub

pytestmark = pytest.mark.integration


async def test_the_demo_puts_its_samples_in_a_new_home_and_keeps_the_users_edits(
    cluster: Cluster, tmp_path: Path, k8s: client.ApiClient
) -> None:
    (sample,) = EXAMPLES.glob("*.ipynb")
    user = "dave"
    options = {"team": "team-b", "offering": "cpu"}

    with own_hub(cluster, tmp_path, persistent_homes=True, extra_config=examples_config()) as hub:
        try:
            hub.start_all({user: options})
            got = hub.contents(user, sample.name)
            cells = json.loads(sample.read_text())["cells"]
            assert [c["source"] for c in got["content"]["cells"]] == [c["source"] for c in cells]
            mine = got["content"]
            mine["cells"][1]["source"] = "epochs = 2  # dave's own default\n"
            hub.contents(user, sample.name, {"type": "notebook", "content": mine})
            hub.stop(user)
            await eventually(lambda: no_pods(k8s, user), what=f"{user}'s pod gone")
            hub.start_all({user: options})
            again = hub.contents(user, sample.name)["content"]["cells"][1]["source"]
            assert again == "epochs = 2  # dave's own default\n"
        finally:
            hub.stop(user)
            await eventually(lambda: no_pods(k8s, user), what=f"{user}'s pod gone")
            await delete_home(k8s, user)

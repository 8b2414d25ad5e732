"""make demo's hub state lives and dies with its cluster (demo/hubstate.py): a second
``make demo`` starts a new cluster, so a hub database that names the last one's claims and
pods is removed; the same cluster's is kept. And the banner says so, and where the console is."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from demo.__main__ import banner
from demo.hubstate import CLUSTER_MARK, HUB_DATABASE, cluster_identity, hub_state_for
from devcluster.config import demo_settings, load_settings


def test_a_database_made_with_another_cluster_is_removed(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    assert hub_state_for(hub, "1.5") is False  # the first run: nothing to remove
    (hub / HUB_DATABASE).write_text("alice's state names claim-alice of cluster 1.5")
    (hub / f"{HUB_DATABASE}-journal").write_text("journal")
    (hub / "jupyterhub_cookie_secret").write_text("kept")
    assert hub_state_for(hub, "1.5") is False  # the same cluster (a demo restarted on it)
    assert (hub / HUB_DATABASE).exists()
    assert hub_state_for(hub, "2.5") is True  # a new cluster: none of those claims exist
    assert not (hub / HUB_DATABASE).exists()
    assert not (hub / f"{HUB_DATABASE}-journal").exists()
    assert (hub / "jupyterhub_cookie_secret").read_text() == "kept"
    assert (hub / CLUSTER_MARK).read_text().strip() == "2.5"


def test_a_database_of_unknown_origin_is_removed(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / HUB_DATABASE).write_text("kept by a demo from before the mark")
    assert hub_state_for(hub, "3.5") is True
    (hub / HUB_DATABASE).write_text("again")
    assert hub_state_for(hub, "") is True  # the cluster cannot be told: never kept blindly


def test_the_clusters_identity_is_its_creation(tmp_path: Path) -> None:
    settings = load_settings({"HOME": str(tmp_path), "GPUAAS_CLUSTER_DIR": str(tmp_path / "c")})
    assert cluster_identity(settings) == ""
    settings.state_file.parent.mkdir(parents=True)
    settings.state_file.write_text(json.dumps({"created": 1733475000.25}))
    assert cluster_identity(settings) == "1733475000.25"


def test_the_banner_names_the_console_and_whom_to_log_in_as(tmp_path: Path) -> None:
    hub = cast(Any, SimpleNamespace(url="http://127.0.0.1:8000", log_path=tmp_path / "hub.log"))
    cluster = demo_settings({"HOME": str(tmp_path)})
    text = banner(hub, "pw", Path("/bin/kubectl"), cluster, fresh=True)
    assert "log in as\n  'admin' and open http://127.0.0.1:8000/services/gpuaas/console/" in text
    assert "the servers, home folders and hub records of an earlier" in text
    assert "earlier" not in banner(hub, "pw", Path("/bin/kubectl"), cluster, fresh=False)

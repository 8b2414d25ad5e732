"""The demo's hub: on the demo's own cluster, its state in .demo/hub, homes on persistent volumes
(a claim per server, mounted at the home; on the dev cluster the node agent gives the pod that
volume's directory: tests/integration/test_nodeagent_volumes.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from demo.__main__ import hub_settings
from demo.jobs import write_catalog
from devcluster.config import DEMO_STATE_DIR, demo_settings
from devcluster.hub import write_hub_config

STORAGE_LINES = (
    "c.KubeSpawner.storage_pvc_ensure = True",
    '"persistentVolumeClaim": {"claimName": "{pvc_name}"}',
    'c.KubeSpawner.volume_mounts = [{"name": "volume-{user_server}", "mountPath": "/home/jovyan"}]',
)


def test_the_demo_hub_runs_on_the_demos_cluster_with_persistent_homes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CONFIGPROXY_EXECUTABLE", "/bin/true")
    cluster = demo_settings({"HOME": str(tmp_path)})
    catalog = write_catalog(tmp_path / "demo")
    settings = hub_settings(cluster, 0, "pw", catalog)
    assert settings.state_dir == DEMO_STATE_DIR / "hub"
    assert settings.kubeconfig == DEMO_STATE_DIR / "cluster" / "credentials" / "hub.kubeconfig"
    assert settings.persistent_homes
    text = write_hub_config(replace(settings, state_dir=tmp_path / "hub")).read_text()
    for line in STORAGE_LINES:
        assert line in text
    # GPU jobs on: the spawner and the service read the catalog with the jobs sections
    assert settings.catalog_file == catalog
    assert f"--GPUaaSService.catalog_file={catalog}" in text
    assert "c.KubeSpawner.init_containers" in text  # the sample notebooks in every home
    plain = write_hub_config(replace(settings, state_dir=tmp_path / "t", persistent_homes=False))
    assert "storage_pvc_ensure" not in plain.read_text()

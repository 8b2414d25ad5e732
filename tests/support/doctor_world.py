"""The world the doctor's cluster tests run in (tests/integration/test_doctor.py and
test_deploy_page.py): the dev cluster, a real hub with the gpuaas service, a real Prometheus
scraping it with the shipped alert rules, and the service's configuration file.

The dev cluster runs Kueue's manager as a local process, not as Kueue's Deployment: the world
records the version it runs (devcluster/versions.env) where a real install has it, a
``kueue-system/kueue-controller-manager`` Deployment (0 replicas) with Kueue's image at that
tag, which the doctor reads as ``kubectl kueue version`` does, and deletes it at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devcluster.hub import DEMO_CATALOG, HubProcess, HubSettings, free_port
from devcluster.prometheus import PrometheusProcess, ScrapeTargets, find_binary
from devcluster.queue_hub import OPERATOR_TOKEN, service_config
from devcluster.testing import Cluster

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "devcluster" / "manifests"
SERVICE_ACCOUNT = "jupyterhub/gpuaas"
POLICY = """\
policies:
  - name: mig
    match: {kinds: [mig]}
    idle_after: 1h
    warn_before: 10m
"""
# what the service needs of the Hub API with a policy in force (culler/deploy/z2jh-values.yaml)
SERVICE_SCOPES = [
    "read:servers",
    "read:tokens",
    "delete:servers",
    "servers",
    "read:users:groups",
    "list:groups",
    "read:groups",
]


def kueue_version() -> str:
    for line in (REPO / "devcluster" / "versions.env").read_text().splitlines():
        if line.startswith("KUEUE_VERSION="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("no KUEUE_VERSION in devcluster/versions.env")


def kueue_record(version: str) -> str:
    return yaml.safe_dump(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "kueue-controller-manager",
                "namespace": "kueue-system",
                "annotations": {
                    "gpuaas.dev/note": "the dev cluster runs this manager as a local process",
                },
            },
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"control-plane": "controller-manager"}},
                "template": {
                    "metadata": {"labels": {"control-plane": "controller-manager"}},
                    "spec": {
                        "containers": [
                            {"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{version}"}
                        ]
                    },
                },
            },
        }
    )


@dataclass
class Setup:
    cluster: Cluster
    hub: HubProcess
    prometheus: PrometheusProcess
    config: Path
    service_token: str
    tester_token: str
    state: Path

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        cmd = [str(self.cluster.info.kubectl), "--kubeconfig", str(self.cluster.info.kubeconfig)]
        out = subprocess.run(
            [*cmd, *args], input=stdin, capture_output=True, text=True, check=True, timeout=120
        )
        return out.stdout

    def doctor(self, *extra: str, token: str | None = None) -> tuple[int, list[dict[str, str]]]:
        env = {
            **os.environ,
            "KUBECONFIG": str(self.cluster.info.kubeconfig),
            "JUPYTERHUB_API_URL": f"{self.hub.url}/hub/api",
            "JUPYTERHUB_API_TOKEN": token or self.service_token,
        }
        argv = [sys.executable, "-m", "gpuaas_service.cli", "--doctor", "--json"]
        argv += ["--config", str(self.config), "--as-service-account", SERVICE_ACCOUNT, *extra]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
        assert proc.returncode in (0, 1), proc.stderr
        return proc.returncode, [json.loads(line) for line in proc.stdout.splitlines()]

    def hub_post(self, path: str, body: Any) -> Any:
        req = urllib.request.Request(
            f"{self.hub.url}/hub/api{path}",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"token {self.tester_token}"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())


@contextmanager
def doctor_world(cluster: Cluster, state: Path, extra_config: str = "") -> Iterator[Setup]:
    """The hub with the gpuaas service (a policy in force, the service's token known), a
    Prometheus scraping the service with the shipped rules, the service's configuration file,
    and the record of Kueue's version; all stopped and removed at the end. ``extra_config``:
    more hub configuration lines."""
    find_binary()  # PrometheusNotInstalled says how to install it
    policy = state / "policy.yaml"
    policy.write_text(POLICY)
    service_token, tester_token = secrets.token_hex(24), secrets.token_hex(24)
    port = free_port()
    prometheus = PrometheusProcess(
        state / "prometheus",
        free_port(),
        ScrapeTargets(service=f"127.0.0.1:{port}", operator_token=OPERATOR_TOKEN),
    )
    # the service configured as the doctor's file says (its console runs the same checks)
    lines = service_config(
        port,
        cluster.kubeconfig_for("jupyterhub", "gpuaas", state / "gpuaas.kubeconfig"),
        culler_args=[f"--GPUaaSService.policy={policy}"],
        service_args=[
            f"--GPUaaSService.catalog_file={DEMO_CATALOG}",
            f"--GPUaaSService.prometheus_url={prometheus.url}",
        ],
    )
    # the service's token is known here, as in z2jh (hub.services.gpuaas.apiToken)
    lines += (
        "for _s in c.JupyterHub.services:\n"
        f"    if _s['name'] == 'gpuaas': _s['api_token'] = {service_token!r}\n"
    )
    hub = HubProcess(
        HubSettings(
            state_dir=state / "hub",
            kubeconfig=cluster.kubeconfig_for("jupyterhub", "hub", state / "hub.kubeconfig"),
            service_token=tester_token,
            extra_config=lines + extra_config,
        )
    )
    config = state / "gpuaas_service_config.py"
    config.write_text(
        f'c.GPUaaSService.notebook_namespace = "jupyter-users"\n'
        f'c.GPUaaSService.job_namespaces = ["team-a", "team-b"]\n'
        f'c.GPUaaSService.catalog_file = "{DEMO_CATALOG}"\n'
        f'c.GPUaaSService.policy = "{policy}"\n'
        f'c.GPUaaSService.prometheus_url = "{prometheus.url}"\n'
    )
    s = Setup(cluster, hub, prometheus, config, service_token, tester_token, state)
    s.kubectl("apply", "-f", "-", stdin=kueue_record(kueue_version()))
    hub.start()
    try:
        prometheus.start()
        try:
            yield s
        finally:
            prometheus.stop()
    finally:
        hub.stop()
        s.kubectl("-n", "kueue-system", "delete", "deployment", "kueue-controller-manager")

"""A real Prometheus for the tests and the demo, on 127.0.0.1.

It scrapes what a cluster's Prometheus scrapes for this project: the node agent's GPUs in
dcgm-exporter's format (``devcluster/dcgm.py``, with ``honor_labels`` as the GPU Operator's
ServiceMonitor sets it, so the pod labels stay ``pod`` and ``namespace``) and the gpuaas
service's ``/metrics`` (with the operator token), every ``scrape_interval`` seconds, and
evaluates the shipped alert rules (``culler/deploy/prometheus-rules.yaml``).

The binary is Debian's ``prometheus`` package (``make install`` installs it as root, as on CI;
``apt-get install prometheus`` elsewhere), or the one named by ``$GPUAAS_PROMETHEUS``; its
``promtool`` comes with it. Its data lives in a directory of the caller's (a temporary TSDB).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devcluster import procs

__all__ = [
    "RULES_FILE",
    "PrometheusNotInstalled",
    "PrometheusProcess",
    "ScrapeTargets",
    "find_binary",
    "write_config",
]

REPO = Path(__file__).resolve().parent.parent
RULES_FILE = REPO / "culler" / "deploy" / "prometheus-rules.yaml"
INSTALL_HINT = (
    "install Debian's prometheus package (`make install` does, as root; or "
    "`apt-get install prometheus`), or set GPUAAS_PROMETHEUS to a prometheus binary"
)


class PrometheusNotInstalled(FileNotFoundError):
    """No prometheus (or promtool) binary on this machine."""


def find_binary(name: str = "prometheus") -> str:
    """``prometheus`` or ``promtool``: beside ``$GPUAAS_PROMETHEUS`` if set, else on PATH."""
    override = os.environ.get("GPUAAS_PROMETHEUS", "")
    if override:
        path = Path(override) if name == "prometheus" else Path(override).parent / name
        if os.access(path, os.X_OK):
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    raise PrometheusNotInstalled(f"{name} not found: {INSTALL_HINT}")


@dataclass(frozen=True)
class ScrapeTargets:
    """What to scrape: ``host:port`` addresses on 127.0.0.1."""

    dcgm: str = ""  # the node agent's /metrics
    service: str = ""  # the gpuaas service (its own address, not the hub's proxy)
    service_path: str = "/services/gpuaas/metrics"
    operator_token: str = ""
    interval: float = 2.0


def write_config(directory: Path, targets: ScrapeTargets, rules: Path = RULES_FILE) -> Path:
    """Write ``prometheus.yml`` (and the token file) into ``directory``; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    every = f"{targets.interval:g}s"
    jobs: list[dict[str, object]] = []
    if targets.dcgm:
        jobs.append(
            {
                "job_name": "dcgm-exporter",
                "honor_labels": True,
                "static_configs": [{"targets": [targets.dcgm]}],
            }
        )
    if targets.service:
        token = directory / "operator-token"
        token.write_text(targets.operator_token)
        token.chmod(0o600)
        jobs.append(
            {
                "job_name": "gpuaas-service",
                "metrics_path": targets.service_path,
                "authorization": {"credentials_file": str(token)},
                "static_configs": [{"targets": [targets.service]}],
            }
        )
    config = {
        "global": {"scrape_interval": every, "evaluation_interval": every},
        "rule_files": [str(rules)],
        "scrape_configs": jobs,
    }
    path = directory / "prometheus.yml"
    # JSON is YAML: no YAML writer needed for a file nobody edits by hand.
    path.write_text(json.dumps(config, indent=2))
    return path


@dataclass
class PrometheusProcess:
    """``prometheus`` as a child process in its own session; :meth:`stop` ends it."""

    directory: Path
    port: int
    targets: ScrapeTargets
    retention: str = "2d"
    record: procs.ProcRecord | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "prometheus.log"

    def start(self, timeout: float = 60.0) -> None:
        """Start it and wait until ``/-/ready`` answers (raises RuntimeError with its log)."""
        binary = find_binary()
        config = write_config(self.directory, self.targets)
        check = subprocess.run(
            [find_binary("promtool"), "check", "config", str(config)],
            capture_output=True,
            text=True,
            check=False,
        )
        if check.returncode != 0:
            raise RuntimeError(f"promtool check config {config}:\n{check.stdout}{check.stderr}")
        argv = [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--storage.tsdb.retention.time={self.retention}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]
        self.record = procs.spawn("prometheus", argv, self.log_path, cwd=self.directory)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not procs.is_alive(self.record):
                break
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.3)
        tail = procs.tail(self.log_path)
        self.stop()
        raise RuntimeError(f"prometheus on {self.url} did not become ready:\n{tail}")

    def stop(self) -> list[str]:
        if self.record is None:
            return []
        notes = procs.stop([self.record])
        self.record = None
        return notes

"""Bring the dev cluster up and down: etcd, Kubernetes, kwok, Kueue and the node agent.

``up`` starts each component as a plain process on 127.0.0.1, waits until it is ready (failing
fast with the tail of its log if it exits or stalls), records its PID in ``state.json`` as soon as
it starts, and returns a :class:`ClusterInfo`. ``down`` stops exactly the recorded PIDs (and the
node agent's pod processes) and removes the state directory; it works after a crash too.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from devcluster import procs
from devcluster.claim import Claim, demo_holder, shared
from devcluster.config import (
    BINARIES,
    BUILD_SCRIPT,
    DEMO_CATALOG,
    HOST,
    MANIFESTS_DIR,
    NODES_FILE,
    REPO_ROOT,
    STAGES_FILE,
    Ports,
    Settings,
    build_key,
    load_settings,
    read_versions,
)
from devcluster.hamischeduler import manifests as hami_manifests
from devcluster.hamischeduler import scheduler_configuration as hami_scheduler_configuration
from devcluster.hamischeduler import webhook_configuration as hami_webhook
from devcluster.kube import Kube, KubeError, condition, kubectl, write_kubeconfig
from devcluster.nodes import (
    KWOK_ANNOTATION,
    KWOK_ANNOTATION_VALUE,
    NodeSpec,
    agent_node,
    load_nodes,
)
from devcluster.pki import ClusterPKI, make_cluster_pki
from devcluster.provisioner import STORAGE_CLASS
from devcluster.provisioner import manifests as provisioner_manifests
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.labels import USER_LABEL

Log = Callable[[str], None]

SERVICE_CIDR = "10.96.0.0/16"
KWOK_POD_CIDR = "10.244.0.0/16"
KUEUE_NAMESPACE = "kueue-system"
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"
KUEUE_VISIBILITY_SERVICE = "kueue-visibility-server"
KUEUE_VISIBILITY_CERT_DIR = Path("/visibility")  # fixed in Kueue's code
MANAGED_NAMESPACE_LABEL = "gpuaas.dev/kueue-managed"
TOKEN_SECONDS = 365 * 24 * 3600
# Kubeconfigs written for the project's ServiceAccounts: file name -> (namespace, name).
CREDENTIALS = {
    "hub": ("jupyterhub", "hub"),
    "gpuaas": ("jupyterhub", "gpuaas"),
}
# Stop order for `down`: the node agent first (it stops its pods' processes), etcd last.
STOP_ORDER = (
    "nodeagent",
    "provisioner",
    "kueue",
    "kwok-finisher",
    "kwok",
    "hami-scheduler",
    "hami",
    "kube-scheduler",
    "kube-controller-manager",
    "kube-apiserver",
    "etcd",
)


class ClusterError(RuntimeError):
    """A component failed; the message names it and carries the tail of its log."""

    def __init__(self, component: str, message: str, log_tail: str = "") -> None:
        self.component = component
        self.message = message
        self.log_tail = log_tail
        text = f"devcluster: {component}: {message}"
        hint = known_cause(log_tail)
        if hint:
            text += f"\n{hint}"
        if log_tail:
            text += f"\n--- last lines of the {component} log ---\n{log_tail}"
        super().__init__(text)


INOTIFY_LIMIT = Path("/proc/sys/fs/inotify/max_user_instances")


def known_cause(log_tail: str, inotify_limit: Path = INOTIFY_LIMIT) -> str:
    """What to do about a failure whose cause the log names, or ""."""
    if "too many open files" not in log_tail:
        return ""
    # Go raises its own file limit to the hard limit at start, so in these binaries the usual
    # cause is inotify: every kube-apiserver, controller-manager, scheduler and Kueue watches its
    # certificates, about 16 instances per cluster, against a per-user limit of 128 by default.
    try:
        limit = inotify_limit.read_text().strip()
    except OSError:
        limit = "unknown"
    return (
        "Likely cause: the user is out of inotify instances (fs.inotify.max_user_instances is "
        f"{limit}; each dev cluster holds about 16). Stop clusters you no longer need "
        "(python -m devcluster down, with their GPUAAS_CLUSTER_DIR) or raise the limit as root: "
        "sysctl -w fs.inotify.max_user_instances=1024"
    )


class BuildError(ClusterError):
    pass


@dataclass
class ClusterInfo:
    settings: Settings
    bin_dir: Path
    started: bool
    processes: list[procs.ProcRecord] = field(default_factory=list)
    agent_node: str | None = None

    @property
    def kubeconfig(self) -> Path:
        return self.settings.kubeconfig

    @property
    def apiserver_url(self) -> str:
        return self.settings.apiserver_url

    @property
    def ca_file(self) -> Path:
        return self.settings.pki_dir / "ca.crt"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    def credentials(self, name: str) -> Path:
        """Kubeconfig of one of the project's ServiceAccounts (``hub``, ``gpuaas``)."""
        return self.settings.credentials_dir / f"{name}.kubeconfig"

    def admin(self) -> Kube:
        return _admin_client(self.settings)


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --- locking and state ---------------------------------------------------------------------


@contextlib.contextmanager
def _locked(settings: Settings) -> Iterator[None]:
    settings.lock_file.parent.mkdir(parents=True, exist_ok=True)
    with settings.lock_file.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _read_state(settings: Settings) -> dict[str, Any] | None:
    return procs.read_json(settings.state_file)


def _records(state: dict[str, Any] | None) -> list[procs.ProcRecord]:
    if not state:
        return []
    return [procs.ProcRecord.from_json(p) for p in state.get("processes", [])]


class _State:
    """state.json, rewritten after every process start so that a crash loses no PID."""

    def __init__(self, settings: Settings, bin_dir: Path, agent: str | None) -> None:
        self.settings = settings
        self.data: dict[str, Any] = {
            "version": 1,
            "created": time.time(),
            "ready": False,
            "bin_dir": str(bin_dir),
            "ports": dict(settings.ports.items()),
            "agent_node": agent,
            "repo": str(REPO_ROOT),
            "processes": [],
        }
        self.save()

    def add(self, rec: procs.ProcRecord) -> None:
        self.data["processes"].append(rec.to_json())
        self.save()

    def records(self) -> list[procs.ProcRecord]:
        return _records(self.data)

    def save(self) -> None:
        procs.write_json(self.settings.state_file, self.data)


# --- binaries ------------------------------------------------------------------------------


def bin_dir_for(settings: Settings) -> Path:
    if settings.bin_dir_override is not None:
        return settings.bin_dir_override
    return settings.cache_dir / "cluster-bin" / build_key(read_versions())


def _missing_binaries(bin_dir: Path) -> list[str]:
    missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if not (bin_dir / "kueue-config" / "default" / "kustomization.yaml").is_file():
        missing.append("kueue-config/default")
    return missing


def ensure_binaries(settings: Settings, log: Log = _stderr, build: bool = True) -> Path:
    """The directory of the cluster's binaries; runs ``build.sh`` once when they are missing."""
    bin_dir = bin_dir_for(settings)
    missing = _missing_binaries(bin_dir)
    if not missing:
        return bin_dir
    if settings.bin_dir_override is not None:
        raise BuildError(
            "binaries",
            f"GPUAAS_CLUSTER_BIN={bin_dir} lacks {', '.join(missing)}; unset it to build them "
            "with `make cluster-build`",
        )
    if not build:
        raise BuildError(
            "binaries", f"{bin_dir} lacks {', '.join(missing)}: run `make cluster-build`"
        )
    log(f"devcluster: building the cluster binaries into {bin_dir} (once per pinned version)")
    env = dict(os.environ, GPUAAS_CACHE=str(settings.cache_dir))
    # build.sh prints its steps on stderr (streamed here: a cold build takes a while) and the
    # output directory on stdout; the compiler's output goes to its build.log.
    proc = subprocess.Popen(
        ["bash", str(BUILD_SCRIPT)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines: list[str] = []
    for line in proc.stderr:
        lines.append(line.rstrip())
        log(line.rstrip())
    code = proc.wait()
    if code != 0:
        build_log = settings.cache_dir / "build" / bin_dir.name / "build.log"
        raise BuildError(
            "build",
            f"`bash {BUILD_SCRIPT.relative_to(REPO_ROOT)}` failed (exit {code}): "
            + " ".join(lines[-3:])
            + " Rerun with: make cluster-build",
            procs.tail(build_log, 30),
        )
    missing = _missing_binaries(bin_dir)
    if missing:
        raise BuildError("build", f"build.sh finished but {bin_dir} lacks {', '.join(missing)}")
    return bin_dir


# --- readiness helpers ---------------------------------------------------------------------


def _admin_client(settings: Settings) -> Kube:
    pki = settings.pki_dir
    return Kube(settings.apiserver_url, pki / "ca.crt", pki / "admin.crt", pki / "admin.key")


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=timeout) as resp:
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def _wait(
    rec: procs.ProcRecord | None,
    what: str,
    check: Callable[[], bool],
    timeout: float,
    component: str,
    interval: float = 0.25,
    detail: Callable[[], str] | None = None,
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if rec is not None and not procs.is_alive(rec):
            code = procs.exit_code(rec)
            raise ClusterError(
                component,
                f"exited (code {code}) before {what}",
                procs.tail(rec.log),
            )
        if check():
            return
        if time.monotonic() > deadline:
            extra = f" ({detail()})" if detail else ""
            raise ClusterError(
                component,
                f"not ready after {timeout:.0f}s: waiting for {what}{extra}",
                procs.tail(rec.log) if rec is not None else "",
            )
        time.sleep(interval)


def _check_ports(settings: Settings) -> None:
    busy = []
    for name, port in settings.ports.items():
        if procs.port_in_use(HOST, port):
            owner = procs.port_owner(port)
            busy.append(f"{port} ({name}){' held by ' + owner if owner else ''}")
    if busy:
        raise ClusterError(
            "ports",
            f"in use on {HOST}: {', '.join(busy)}. Stop what holds them (a cluster left running? "
            "try `make cluster-down`) or pick other ports with GPUAAS_CLUSTER_PORT_BASE=<n> "
            "(or GPUAAS_CLUSTER_PORT_<NAME>=<n>).",
        )


# --- configuration files -------------------------------------------------------------------


def _kubeconfigs(settings: Settings, pki: ClusterPKI) -> dict[str, Path]:
    ca = pki.ca.cert_pem()
    out: dict[str, Path] = {}
    for name, pair in pki.clients.items():
        path = (
            settings.kubeconfig
            if name == "admin"
            else settings.state_dir / "kubeconfigs" / f"{name}.kubeconfig"
        )
        write_kubeconfig(
            path,
            server=settings.apiserver_url,
            ca_pem=ca,
            user=name,
            cert_pem=pair.cert_pem(),
            key_pem=pair.key_pem(),
        )
        out[name] = path
    return out


def kueue_transformations(catalog: Path = DEMO_CATALOG) -> list[dict[str, Any]]:
    """Kueue's ``resources.transformations``, as the catalog's ``resource_transformations``."""
    from jupyter_gpuaas.core.catalog import build_catalog, load_catalog_file

    return [t.to_kueue() for t in build_catalog([load_catalog_file(str(catalog))]).transformations]


def _kueue_config(settings: Settings) -> Path:
    ports = settings.ports
    cfg = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"{HOST}:{ports.kueue_health}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {
            "host": HOST,
            "port": ports.kueue_webhook,
            "certDir": str(settings.state_dir / "kueue" / "webhook-certs"),
        },
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": KUEUE_WEBHOOK_SERVICE,
            "webhookSecretName": "kueue-webhook-server-cert",
        },
        "visibilityServer": {"bindAddress": HOST, "bindPort": ports.kueue_visibility},
        # On by default since Kueue 0.19; written out so that the dev cluster runs what we
        # recommend (docs/queue.md, *Kueue configuration*): an admitted workload whose pods are
        # not Ready within 30 min (or not Ready again within 30 min) is evicted and its quota
        # freed. Never blockAdmission: it would admit one server at a time, each waiting for
        # the one before to start. 30 min is longer than any hub start timeout, so the spawner
        # reports a server that does not start, with its reason, before Kueue would act.
        "waitForPodsReady": {
            "timeout": "30m",
            "recoveryTimeout": "30m",
            "blockAdmission": False,
        },
        # Kueue >= 0.18 finishes a pod's Workload as soon as the pod is marked for deletion
        # (FinishOrphanedWorkloads, beta, on by default), so its quota is free while the pod
        # still holds its GPU for its grace period. Off: the quota counts a GPU until its pod
        # is gone, as the form's headroom promises, and the next queued server is not admitted
        # onto a GPU that is still in use (on local-0 the default scheduler cannot tell, since
        # its nvidia.com/gpu counts HAMi's vGPUs too). docs/queue.md, *Kueue configuration*.
        "featureGates": {"FinishOrphanedWorkloads": False},
        "clientConnection": {"qps": 50, "burst": 100},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 5,
                "LocalQueue.kueue.x-k8s.io": 1,
                "Cohort.kueue.x-k8s.io": 1,
                "ClusterQueue.kueue.x-k8s.io": 1,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        # Queue names are required: nothing is managed without one, and only in the namespaces
        # labelled for it (never the hub's own namespace, kube-system or kueue-system).
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": {MANAGED_NAMESPACE_LABEL: "true"}},
        "integrations": {
            "frameworks": ["batch/job", "pod"],
            # Who submitted a Job (devcluster/manifests/60-user-label-policy.yaml vouches for
            # it): copied onto its Workload, where the gpuaas service reads it (docs/queue.md).
            "labelKeysToCopy": [USER_LABEL],
        },
        # HAMi's per-vGPU memory and cores counted x vGPUs (docs/fractions.md): one definition,
        # the demo catalog's, which the hub's headroom applies too.
        "resources": {"transformations": kueue_transformations()},
    }
    path = settings.state_dir / "kueue" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def render_kueue_manifests(settings: Settings, bin_dir: Path) -> str:
    """Kueue's own manifests (``config/default`` via kustomize) adapted to run out of cluster.

    The manager Deployment is dropped (Kueue runs as a local process); its Services become
    ExternalName Services pointing at localhost, and the webhook configurations, conversion
    webhooks and the visibility APIService use our loopback ports. With no Deployment whose
    image tag says Kueue's version, the CRDs carry it in the label ``app.kubernetes.io/version``
    (the doctor's other place to read it, where an installer puts one).
    """
    version = read_versions()["KUEUE_VERSION"]
    proc = subprocess.run(
        [str(bin_dir / "kubectl"), "kustomize", str(bin_dir / "kueue-config" / "default")],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise ClusterError("kueue", f"kubectl kustomize of Kueue's config failed: {proc.stderr}")
    out = [
        kept
        for doc in yaml.safe_load_all(proc.stdout)
        if doc and (kept := _out_of_cluster(doc, settings.ports, version)) is not None
    ]
    return yaml.safe_dump_all(out, sort_keys=False)


def _out_of_cluster(doc: dict[str, Any], ports: Ports, version: str) -> dict[str, Any] | None:
    """One of Kueue's manifests as it runs out of cluster here (``None``: left out)."""
    kind = doc.get("kind")
    name = doc.get("metadata", {}).get("name", "")
    if kind == "Deployment" or (kind == "ConfigMap" and name.startswith("kueue-manager-config")):
        return None
    if kind == "CustomResourceDefinition":
        labels = doc.setdefault("metadata", {}).setdefault("labels", {})
        labels["app.kubernetes.io/version"] = version
    if kind == "Service":
        port = {
            KUEUE_WEBHOOK_SERVICE: ports.kueue_webhook,
            KUEUE_VISIBILITY_SERVICE: ports.kueue_visibility,
        }.get(name)
        if port is None:  # the metrics Service: metrics are off
            return None
        doc["spec"] = {
            "type": "ExternalName",
            "externalName": "localhost",
            "ports": [{"name": "https", "port": port, "protocol": "TCP", "targetPort": port}],
        }
    if kind == "APIService":
        doc["spec"]["service"]["port"] = ports.kueue_visibility
    _point_webhooks_at(doc, ports.kueue_webhook)
    return doc


def _point_webhooks_at(node: Any, port: int) -> None:
    """Every reference to Kueue's webhook Service in ``node`` uses ``port``."""
    if isinstance(node, dict):
        svc = node.get("service")
        if isinstance(svc, dict) and svc.get("name") == KUEUE_WEBHOOK_SERVICE:
            svc["port"] = port
        for value in node.values():
            _point_webhooks_at(value, port)
    elif isinstance(node, list):
        for value in node:
            _point_webhooks_at(value, port)


def _apply(
    info_bin: Path,
    kubeconfig: Path,
    component: str,
    *,
    stdin: str | None = None,
    path: Path | None = None,
    retry_for: float = 0.0,
) -> None:
    args = ["apply", "--server-side", "--force-conflicts", "--field-manager=devcluster"]
    args += ["-f", str(path) if path is not None else "-"]
    deadline = time.monotonic() + retry_for
    while True:
        res = kubectl(info_bin / "kubectl", kubeconfig, args, stdin=stdin)
        if res.returncode == 0:
            return
        if time.monotonic() > deadline:
            raise ClusterError(component, f"kubectl apply failed:\n{res.stderr.strip()}")
        time.sleep(1.0)


# --- up --------------------------------------------------------------------------------------


def _env_for_components() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBECONFIG")}
    env.setdefault("HOME", str(Path.home()))
    return env


def _start(
    state: _State,
    name: str,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> procs.ProcRecord:
    log = state.settings.logs_dir / f"{name}.log"
    rec = procs.spawn(name, argv, log, env=env or _env_for_components(), cwd=cwd)
    state.add(rec)
    return rec


def _python_env() -> dict[str, str]:
    """Environment of our Python components: this virtualenv first, the repository importable."""
    env = _env_for_components()
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(REPO_ROOT) + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
    )
    return env


def _running_info(settings: Settings, log: Log) -> ClusterInfo | None:
    """The cluster already running under this state dir, if it is whole and healthy."""
    state = _read_state(settings)
    if state is None:
        return None
    records = _records(state)
    dead = [r.name for r in records if not procs.is_alive(r)]
    healthy = (
        bool(state.get("ready"))
        and not dead
        and {r.name for r in records}
        >= set(STOP_ORDER) - ({"nodeagent"} if not state.get("agent_node") else set())
    )
    lacking: list[str] = []
    if healthy:
        try:
            admin = _admin_client(settings)
            admin.get_text("/readyz", timeout=5)
            # Nodes added to nodes.yaml since it started (kwok and its finisher learn their
            # nodes at start): such a cluster is restarted, not patched.
            have = {n["metadata"]["name"] for n in admin.get("/api/v1/nodes")["items"]}
            lacking = sorted({n.name for n in load_nodes(NODES_FILE)} - have)
        except (KubeError, OSError):
            healthy = False
        healthy = healthy and not lacking
    if healthy:
        return ClusterInfo(
            settings=settings,
            bin_dir=Path(state["bin_dir"]),
            started=False,
            processes=records,
            agent_node=state.get("agent_node"),
        )
    missing = (
        set(STOP_ORDER)
        - {r.name for r in records}
        - ({"nodeagent"} if not state.get("agent_node") else set())
    )
    why = (
        f"{', '.join(dead)} not running"
        if dead
        else f"it has no node {', '.join(lacking)} (an older nodes.yaml)"
        if lacking
        else f"it has no {', '.join(sorted(missing))} (an older checkout started it)"
        if missing
        else "not ready"
    )
    log(
        f"devcluster: the cluster recorded in {settings.state_dir} is broken ({why}); restarting it"
    )
    _down_locked(settings, log)
    return None


def up(settings: Settings | None = None, *, log: Log = _stderr, build: bool = True) -> ClusterInfo:
    """Start the cluster (or return the one already running); raise ClusterError on failure."""
    settings = settings or load_settings()
    with _locked(settings):
        running = _running_info(settings, log)
        if running is not None:
            # A newer checkout may have changed the manifests: apply them again (idempotent).
            _apply(running.bin_dir, settings.kubeconfig, "sample organisation", path=MANIFESTS_DIR)
            log(
                f"devcluster: already running (kubeconfig {settings.kubeconfig});"
                f" {MANIFESTS_DIR.relative_to(REPO_ROOT)} applied again"
            )
            return running
        bin_dir = ensure_binaries(settings, log, build=build)
        _check_ports(settings)
        _check_visibility_dir()
        if settings.state_dir.exists():
            shutil.rmtree(settings.state_dir)
        settings.state_dir.mkdir(parents=True)
        nodes = load_nodes(NODES_FILE)
        agent = agent_node(nodes)
        state = _State(settings, bin_dir, agent.name if agent else None)
        t0 = time.monotonic()
        try:
            _BringUp(settings, bin_dir, state, nodes, agent, log).run()
        except BaseException:
            notes = procs.stop(reversed(state.records()), timeout=5)
            _stop_pod_processes(settings)
            for note in notes:
                log(f"devcluster: {note}")
            state.data["failed"] = True  # the records stay, for `status` and `down`
            state.save()
            log(f"devcluster: start failed; logs kept in {settings.logs_dir}")
            raise
        state.data["ready"] = True
        state.data["ready_seconds"] = round(time.monotonic() - t0, 2)
        state.save()
        log(f"devcluster: up in {time.monotonic() - t0:.1f}s")
        log(f"devcluster: export KUBECONFIG={settings.kubeconfig}")
        return ClusterInfo(
            settings=settings,
            bin_dir=bin_dir,
            started=True,
            processes=state.records(),
            agent_node=agent.name if agent else None,
        )


@contextlib.contextmanager
def running(
    settings: Settings | None = None, *, log: Log = _stderr, build: bool = True
) -> Iterator[ClusterInfo]:
    """The cluster for the length of a block: :func:`up` (or the one already running), and
    :func:`down` at the end only if this block started it (a cluster someone else started
    keeps running). Scripts and fixtures that need a cluster use this, so that each leaves the
    machine as it found it. The block holds the cluster's shared claim: it fails at once
    (:class:`~devcluster.claim.ClusterInUse`) on a cluster a demo holds, and a demo cannot take
    this one meanwhile."""
    settings = settings or load_settings()
    with shared(settings):
        info = up(settings, log=log, build=build)
        try:
            yield info
        finally:
            if info.started:
                down(settings, log=log)


def _check_visibility_dir() -> None:
    d = KUEUE_VISIBILITY_CERT_DIR
    if d.is_dir() and os.access(d, os.W_OK):
        return
    try:
        d.mkdir(exist_ok=True)
    except OSError as e:
        raise ClusterError(
            "kueue",
            f"Kueue's visibility server writes its self-signed certificate under {d} (a path fixed "
            f"in Kueue) and cannot create it ({e.strerror}). Run as root, or once: "
            f"sudo mkdir {d} && sudo chown $USER {d}",
        ) from None


class _BringUp:
    """Bringing the cluster up: :meth:`run` does the steps in order; they share the cluster's
    PKI, kubeconfigs and admin client."""

    def __init__(
        self,
        settings: Settings,
        bin_dir: Path,
        state: _State,
        nodes: list[NodeSpec],
        agent: NodeSpec | None,
        log: Log,
    ) -> None:
        self.settings = settings
        self.ports = settings.ports
        self.bin_dir = bin_dir
        self.state = state
        self.nodes = nodes
        self.agent = agent
        self.log = log
        self.pki = make_cluster_pki(settings.pki_dir, (agent.name,) if agent else ())
        self.kcfg = _kubeconfigs(settings, self.pki)
        self.admin = _admin_client(settings)

    def run(self) -> None:
        """Start the components in dependency order, each ready before what needs it starts."""
        self.start_etcd()
        self.start_apiserver()
        controllers = self.start_controllers()
        # While they start: Kueue's CRDs, RBAC, webhooks, APIService; the nodes; the volumes.
        self.apply_kueue_manifests()
        self.create_nodes()
        self.start_provisioner()
        hami_procs = self.start_hami()
        self.wait_controllers(*controllers)
        self.wait_hami(*hami_procs)
        kueue = self.start_kwok_and_kueue()
        self.wait_kueue(kueue)
        self.apply_sample_organisation()
        self.start_node_agent()
        self.write_credentials_and_wait_for_queues(controllers[0])

    def step(self, msg: str) -> None:
        self.log(f"devcluster: {msg}")

    def binary(self, name: str) -> str:
        return str(self.bin_dir / name)

    def start_etcd(self) -> None:
        """etcd: plain HTTP on loopback, fsync off (a throwaway cluster)."""
        self.step("starting etcd")
        ports, sd = self.ports, self.settings.state_dir
        client_url, peer_url = f"http://{HOST}:{ports.etcd}", f"http://{HOST}:{ports.etcd_peer}"
        etcd = _start(
            self.state,
            "etcd",
            [
                self.binary("etcd"),
                "--name=devcluster",
                f"--data-dir={sd / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=devcluster={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ],
        )
        _wait(etcd, "GET /health", lambda: _http_ok(f"{client_url}/health"), 30, "etcd")

    def start_apiserver(self) -> None:
        self.step("starting kube-apiserver")
        pki, ports = self.pki, self.ports
        apiserver = _start(
            self.state,
            "kube-apiserver",
            [
                self.binary("kube-apiserver"),
                f"--etcd-servers=http://{HOST}:{ports.etcd}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                # the apiserver refuses a loopback address for the `kubernetes` Service's endpoints;
                # nothing here reaches the API through that Service, so it is not reconciled.
                "--endpoint-reconciler-type=none",
                f"--secure-port={ports.apiserver}",
                f"--tls-cert-file={pki.apiserver.cert}",
                f"--tls-private-key-file={pki.apiserver.key}",
                f"--client-ca-file={pki.ca.cert}",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,"
                "NodeRestriction,TaintNodesByCondition,Priority,DefaultTolerationSeconds,"
                "DefaultStorageClass,StorageObjectInUseProtection,RuntimeClass,PodSecurity,"
                "ResourceQuota,MutatingAdmissionWebhook,ValidatingAdmissionPolicy,"
                "ValidatingAdmissionWebhook",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki.service_account.cert}",
                f"--service-account-signing-key-file={pki.service_account.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Aggregated APIs (Kueue's visibility server) learn the caller from these
                # headers, trusted because the apiserver presents the front-proxy certificate.
                f"--requestheader-client-ca-file={pki.front_proxy_ca.cert}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki.front_proxy_client.cert}",
                f"--proxy-client-key-file={pki.front_proxy_client.key}",
                "--allow-privileged=true",
                "--profiling=false",
                "--event-ttl=1h",
                "--enable-garbage-collector=true",
            ],
        )
        _wait(apiserver, "GET /readyz", self.api_ready, 120, "kube-apiserver", interval=0.5)

    def api_ready(self) -> bool:
        try:
            return self.admin.get_text("/readyz", timeout=3).strip() == "ok"
        except (KubeError, OSError):
            return False

    def _serving_flags(self, component: str, port: int) -> list[str]:
        """What the controller manager and the scheduler share: identity, loopback serving."""
        kubeconfig = self.kcfg[component]
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={HOST}",
            f"--secure-port={port}",
            f"--tls-cert-file={self.pki.loopback_serving.cert}",
            f"--tls-private-key-file={self.pki.loopback_serving.key}",
            "--leader-elect=false",
            "--profiling=false",
        ]

    def start_controllers(self) -> tuple[procs.ProcRecord, procs.ProcRecord]:
        """kube-controller-manager and kube-scheduler (waited for by :meth:`wait_controllers`)."""
        self.step("starting kube-controller-manager and kube-scheduler")
        pki = self.pki
        kcm = _start(
            self.state,
            "kube-controller-manager",
            [
                self.binary("kube-controller-manager"),
                *self._serving_flags("controller-manager", self.ports.controller_manager),
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.service_account.key}",
                f"--root-ca-file={pki.ca.cert}",
                f"--cluster-signing-cert-file={pki.ca.cert}",
                f"--cluster-signing-key-file={pki.ca.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # The defaults (20 QPS, 5 Job syncs) pace a burst of Jobs like a busy production
                # cluster would; a dev cluster has the apiserver to itself.
                "--kube-api-qps=100",
                "--kube-api-burst=200",
                "--concurrent-job-syncs=10",
            ],
        )
        sched = _start(
            self.state,
            "kube-scheduler",
            [
                self.binary("kube-scheduler"),
                *self._serving_flags("scheduler", self.ports.scheduler),
            ],
        )
        return kcm, sched

    def apply_kueue_manifests(self) -> None:
        self.step("applying Kueue's manifests (CRDs, RBAC, webhooks, visibility APIService)")
        manifests = render_kueue_manifests(self.settings, self.bin_dir)
        _apply(self.bin_dir, self.settings.kubeconfig, "kueue", stdin=manifests)

    def create_nodes(self) -> None:
        self.step(f"creating {len(self.nodes)} nodes from {NODES_FILE.name}")
        node_docs = yaml.safe_dump_all([n.manifest() for n in self.nodes], sort_keys=False)
        _apply(self.bin_dir, self.settings.kubeconfig, "nodes", stdin=node_docs)
        for n in self.nodes:
            self.admin.patch_merge(f"/api/v1/nodes/{n.name}/status", n.status_patch())

    def start_provisioner(self) -> None:
        """The default StorageClass and its provisioner (devcluster/provisioner.py)."""
        self.step(f"starting the volume provisioner (StorageClass {STORAGE_CLASS})")
        _apply(self.bin_dir, self.settings.kubeconfig, "provisioner", stdin=provisioner_manifests())
        pair = self.pki.clients["provisioner"]
        ready = self.settings.state_dir / "provisioner.ready"
        rec = _start(
            self.state,
            "provisioner",
            [
                sys.executable,
                "-m",
                "devcluster.provisioner",
                f"--server={self.settings.apiserver_url}",
                f"--ca={self.pki.ca.cert}",
                f"--cert={pair.cert}",
                f"--key={pair.key}",
                f"--root={self.settings.volumes_dir}",
                f"--ready-file={ready}",
            ],
            env=_python_env(),
            cwd=REPO_ROOT,
        )
        _wait(rec, "its first list of claims", ready.exists, 30, "provisioner")

    def start_hami(self) -> tuple[procs.ProcRecord, procs.ProcRecord]:
        """HAMi's scheduler as HAMi deploys it (devcluster/hamischeduler.py): its extender and
        webhook, and a second kube-scheduler with the ``hami-scheduler`` profile that calls it."""
        self.step(f"starting HAMi's scheduler ({hami.SCHEDULER_NAME}: extender and webhook)")
        sd, ports, pki = self.settings.state_dir, self.ports, self.pki
        _apply(self.bin_dir, self.settings.kubeconfig, "hami", stdin=hami_manifests())
        pair = pki.clients["hami"]
        extender = _start(
            self.state,
            "hami",
            [
                sys.executable,
                "-m",
                "devcluster.hamischeduler",
                f"--server={self.settings.apiserver_url}",
                f"--ca={pki.ca.cert}",
                f"--cert={pair.cert}",
                f"--key={pair.key}",
                f"--serving-cert={pki.loopback_serving.cert}",
                f"--serving-key={pki.loopback_serving.key}",
                f"--extender-port={ports.hami_extender}",
                f"--webhook-port={ports.hami_webhook}",
            ],
            env=_python_env(),
            cwd=REPO_ROOT,
        )
        config_file = sd / "hami-scheduler.yaml"
        config_file.write_text(
            yaml.safe_dump(
                hami_scheduler_configuration(
                    self.kcfg["scheduler"], f"http://{HOST}:{ports.hami_extender}"
                ),
                sort_keys=False,
            )
        )
        serving = [
            f
            for f in self._serving_flags("scheduler", ports.hami_scheduler)
            # what the configuration file says instead (the deprecated flags)
            if not f.startswith(("--kubeconfig=", "--leader-elect=", "--profiling="))
        ]
        sched = _start(
            self.state,
            "hami-scheduler",
            [self.binary("kube-scheduler"), f"--config={config_file}", *serving],
        )
        webhook = hami_webhook(f"https://{HOST}:{ports.hami_webhook}/webhook", pki.ca.cert_pem())
        _apply(self.bin_dir, self.settings.kubeconfig, "hami", stdin=yaml.safe_dump(webhook))
        return extender, sched

    def wait_hami(self, extender: procs.ProcRecord, sched: procs.ProcRecord) -> None:
        serving = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        url = f"http://{HOST}:{self.ports.hami_extender}/healthz"
        _wait(extender, "GET /healthz", partial(_http_ok, url), 30, "hami")
        url = f"https://{HOST}:{self.ports.hami_webhook}/healthz"
        _wait(extender, "the webhook's GET /healthz", partial(_http_ok, url, serving), 30, "hami")
        url = f"https://{HOST}:{self.ports.hami_scheduler}/healthz"
        _wait(sched, "GET /healthz", partial(_http_ok, url, serving), 60, "hami-scheduler")

    def wait_controllers(self, kcm: procs.ProcRecord, sched: procs.ProcRecord) -> None:
        serving = ssl.create_default_context(cafile=str(self.pki.ca.cert))
        for rec, port in ((kcm, self.ports.controller_manager), (sched, self.ports.scheduler)):
            url = f"https://{HOST}:{port}/healthz"
            _wait(rec, "GET /healthz", partial(_http_ok, url, serving), 60, rec.name)

    def nodes_ready(self, names: list[str]) -> Callable[[], bool]:
        def check() -> bool:
            try:
                items = self.admin.get("/api/v1/nodes")["items"]
            except (KubeError, OSError):
                return False
            ready = {i["metadata"]["name"] for i in items if condition(i, "Ready") == "True"}
            return set(names) <= ready

        return check

    def start_kwok_and_kueue(self) -> procs.ProcRecord:
        """kwok (and the finisher, its last step) ready with its nodes; Kueue started."""
        self.step("starting kwok and Kueue")
        sd, kcfg = self.settings.state_dir, self.kcfg
        kwok = _start(
            self.state,
            "kwok",
            [
                self.binary("kwok"),
                f"--kubeconfig={kcfg['kwok']}",
                f"--config={STAGES_FILE}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}={KWOK_ANNOTATION_VALUE}",
                f"--cidr={KWOK_POD_CIDR}",
                "--node-ip=10.243.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address={HOST}:{self.ports.kwok}",
            ],
            cwd=sd,
        )
        kueue_env = _env_for_components()
        kueue_env["KUBECONFIG"] = str(kcfg["kueue"])
        kueue = _start(
            self.state,
            "kueue",
            [
                self.binary("kueue"),
                f"--config={_kueue_config(self.settings)}",
                f"--kubeconfig={kcfg['kueue']}",
                # the visibility port is visibilityServer.bindPort in the config (Kueue 0.18
                # removed --visibility-server-port: passing it stops Kueue at start)
            ],
            env=kueue_env,
            cwd=sd,
        )
        kwok_nodes = [n.name for n in self.nodes if n.run_by == "kwok"]
        # kwok deletes by name only, so the pods' last step (removal by UID) is ours: see its
        # docstring
        finisher_ready = sd / "kwok-finisher.ready"
        finisher = _start(
            self.state,
            "kwok-finisher",
            [
                sys.executable,
                "-m",
                "devcluster.kwokfinisher",
                f"--kubeconfig={kcfg['kwok']}",
                f"--ready-file={finisher_ready}",
                *(f"--node={n}" for n in kwok_nodes),
            ],
            env=_python_env(),
            cwd=REPO_ROOT,
        )
        healthz = partial(_http_ok, f"http://{HOST}:{self.ports.kwok}/healthz")
        _wait(kwok, "GET /healthz", healthz, 60, "kwok")
        _wait(
            kwok, f"nodes {', '.join(kwok_nodes)} Ready", self.nodes_ready(kwok_nodes), 60, "kwok"
        )
        _wait(finisher, "its first pod list", finisher_ready.exists, 30, "kwok-finisher")
        return kueue

    def wait_kueue(self, kueue: procs.ProcRecord) -> None:
        """Kueue ready (its webhook certificates in place) and its visibility API served."""
        cert_dir = self.settings.state_dir / "kueue" / "webhook-certs"

        def kueue_ready() -> bool:
            # Kueue's cert rotator stores its serving certificate in a Secret and waits until
            # the files appear in its certDir, where a kubelet would mount that Secret: do it.
            _sync_webhook_secret(self.admin, cert_dir)
            return _http_ok(f"http://{HOST}:{self.ports.kueue_health}/readyz")

        what = "GET /readyz (webhook certificates and server)"
        _wait(kueue, what, kueue_ready, 120, "kueue", interval=0.5)
        _wait(
            kueue,
            "the visibility APIService to be Available",
            partial(_visibility_available, self.admin),
            60,
            "kueue",
            interval=0.5,
            detail=partial(_visibility_detail, self.admin),
        )

    def apply_sample_organisation(self) -> None:
        self.step(f"applying the sample organisation ({MANIFESTS_DIR.relative_to(REPO_ROOT)})")
        # Kueue's webhooks validate these; its CA bundle may still be propagating: retry briefly.
        _apply(
            self.bin_dir,
            self.settings.kubeconfig,
            "sample organisation",
            path=MANIFESTS_DIR,
            retry_for=60,
        )

    def start_node_agent(self) -> None:
        agent = self.agent
        if agent is None:
            return
        self.step(f"starting the node agent for {agent.name}")
        rec = _start(
            self.state,
            "nodeagent",
            [
                sys.executable,
                "-m",
                "devcluster.nodeagent",
                f"--kubeconfig={self.kcfg['node-' + agent.name]}",
                f"--node={agent.name}",
                f"--state-dir={self.settings.agent_dir}",
                f"--ip-prefix={self.settings.pod_ip_prefix}",
                f"--metrics-port={self.ports.dcgm}",
                *([f"--gpus={agent.simulated_gpus}"] if agent.simulated_gpus else []),
            ],
            env=_python_env(),
            cwd=REPO_ROOT,
        )
        _wait(rec, f"node {agent.name} Ready", self.nodes_ready([agent.name]), 30, "nodeagent")

    def write_credentials_and_wait_for_queues(self, kcm: procs.ProcRecord) -> None:
        self.step("writing ServiceAccount kubeconfigs and waiting for the queues")
        admin = self.admin
        _write_credentials(self.settings, self.pki, admin)
        _wait(
            None,
            "ClusterQueues Active",
            lambda: _queues_active(admin),
            60,
            "kueue",
            detail=lambda: _inactive_queues(admin),
        )
        # The ServiceAccount admission plugin refuses pods until the namespace's `default`
        # account exists (the controller manager makes it): wait, so that the first test pod is
        # not refused.
        for ns in _namespaces_of(MANIFESTS_DIR):
            path = f"/api/v1/namespaces/{ns}/serviceaccounts/default"
            _wait(
                kcm,
                f"ServiceAccount {ns}/default",
                partial(_exists, admin, path),
                30,
                "kube-controller-manager",
            )


VISIBILITY_APISERVICE = (
    "/apis/apiregistration.k8s.io/v1/apiservices/v1beta2.visibility.kueue.x-k8s.io"
)


def _visibility_available(admin: Kube) -> bool:
    try:
        obj = admin.get(VISIBILITY_APISERVICE)
    except (KubeError, OSError):
        return False
    return condition(obj, "Available") == "True"


def _visibility_detail(admin: Kube) -> str:
    try:
        obj = admin.get(VISIBILITY_APISERVICE)
    except (KubeError, OSError) as e:
        return str(e)
    for c in obj.get("status", {}).get("conditions", []):
        if c.get("type") == "Available":
            return f"{c.get('reason')}: {c.get('message')}"
    return "no status yet"


def _sync_webhook_secret(admin: Kube, cert_dir: Path) -> None:
    """Write Kueue's webhook Secret into its certDir, once it holds a certificate."""
    if (cert_dir / "tls.crt").is_file():
        return
    try:
        secret = admin.get(
            f"/api/v1/namespaces/{KUEUE_NAMESPACE}/secrets/kueue-webhook-server-cert"
        )
    except (KubeError, OSError):
        return
    data = secret.get("data") or {}
    if not all(k in data for k in ("tls.crt", "tls.key", "ca.crt")):
        return
    cert_dir.mkdir(parents=True, exist_ok=True)
    for key in ("ca.crt", "tls.key", "tls.crt"):  # tls.crt last: the rotator waits for it
        path = cert_dir / key
        tmp = path.with_name(key + ".tmp")
        tmp.write_bytes(base64.b64decode(data[key]))
        tmp.chmod(0o600)
        os.replace(tmp, path)


def _exists(admin: Kube, path: str) -> bool:
    try:
        admin.get(path)
    except KubeError:
        return False
    except OSError:
        return False
    return True


def _namespaces_of(directory: Path) -> list[str]:
    out = []
    for path in sorted(directory.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Namespace":
                out.append(doc["metadata"]["name"])
    return out


def _queues_active(admin: Kube) -> bool:
    return _inactive_queues(admin) == ""


def _inactive_queues(admin: Kube) -> str:
    try:
        items = admin.get("/apis/kueue.x-k8s.io/v1beta2/clusterqueues")["items"]
    except (KubeError, OSError) as e:
        return str(e)
    bad = []
    for cq in items:
        if condition(cq, "Active") != "True":
            msg = next(
                (
                    c.get("message", "")
                    for c in cq.get("status", {}).get("conditions", [])
                    if c.get("type") == "Active"
                ),
                "no status",
            )
            bad.append(f"{cq['metadata']['name']}: {msg}")
    return "; ".join(bad) if items else "no ClusterQueues"


def _write_credentials(settings: Settings, pki: ClusterPKI, admin: Kube) -> None:
    for name, (ns, sa) in CREDENTIALS.items():
        deadline = time.monotonic() + 30
        while True:
            try:
                token = admin.create_token(ns, sa, TOKEN_SECONDS)
                break
            except KubeError as e:
                if time.monotonic() > deadline:
                    raise ClusterError("credentials", f"TokenRequest for {ns}/{sa}: {e}") from None
                time.sleep(0.5)
        write_kubeconfig(
            settings.credentials_dir / f"{name}.kubeconfig",
            server=settings.apiserver_url,
            ca_pem=pki.ca.cert_pem(),
            user=f"{ns}-{sa}",
            token=token,
            namespace=ns,
        )


# --- down ------------------------------------------------------------------------------------


def _stop_pod_processes(settings: Settings) -> list[str]:
    """Kill what the node agent started, if it could not (it crashed or was killed)."""
    data = procs.read_json(settings.agent_dir / "processes.json") or {}
    records = [procs.ProcRecord.from_json(p) for p in data.get("processes", [])]
    return procs.stop(records, timeout=5)


def _down_locked(settings: Settings, log: Log) -> list[str]:
    state = _read_state(settings)
    records = _records(state)
    order = {name: i for i, name in enumerate(STOP_ORDER)}
    records.sort(key=lambda r: order.get(r.name, -1))
    notes = procs.stop(records, timeout=15)
    notes += _stop_pod_processes(settings)
    for note in notes:
        log(f"devcluster: {note}")
    if settings.state_dir.exists():
        shutil.rmtree(settings.state_dir, ignore_errors=True)
    return notes


def down(
    settings: Settings | None = None, *, log: Log = _stderr, held: Claim | None = None
) -> list[str]:
    """Stop the processes recorded for this state dir and remove it. Harmless when not running.

    Refused (ClusterError) while a demo holds the cluster, unless ``held`` is that demo's own
    claim (devcluster/claim.py)."""
    settings = settings or load_settings()
    if held is None:
        holder = demo_holder(settings)
        if holder is not None:
            raise ClusterError(
                "down",
                f"{settings.state_dir} is in use by {holder}: stop the demo instead (Ctrl-C); "
                "it takes its cluster down",
            )
    with _locked(settings):
        if not settings.state_dir.exists():
            log(f"devcluster: nothing to stop ({settings.state_dir} does not exist)")
            return []
        notes = _down_locked(settings, log)
        log(f"devcluster: stopped; removed {settings.state_dir}")
        return notes


# --- status ----------------------------------------------------------------------------------


def status(settings: Settings | None = None) -> dict[str, Any]:
    settings = settings or load_settings()
    state = _read_state(settings)
    if state is None:
        return {"running": False, "state_dir": str(settings.state_dir)}
    comps = [
        {"name": r.name, "pid": r.pid, "alive": procs.is_alive(r), "log": r.log}
        for r in _records(state)
    ]
    api = False
    if settings.pki_dir.exists():
        try:
            api = _admin_client(settings).get_text("/readyz", timeout=3).strip() == "ok"
        except (KubeError, OSError):
            api = False
    return {
        "running": bool(state.get("ready")) and all(c["alive"] for c in comps) and api,
        "state_dir": str(settings.state_dir),
        "kubeconfig": str(settings.kubeconfig),
        "apiserver": settings.apiserver_url,
        "apiserver_ready": api,
        "ports": state.get("ports", {}),
        "components": comps,
        "agent_node": state.get("agent_node"),
        "bin_dir": state.get("bin_dir"),
    }


def format_status(st: dict[str, Any]) -> str:
    if "components" not in st:
        return f"not running (no state in {st['state_dir']})"
    lines = [
        f"{'running' if st['running'] else 'NOT healthy'}: {st['apiserver']}",
        f"kubeconfig: {st['kubeconfig']}",
    ]
    for c in st["components"]:
        lines.append(
            f"  {c['name']:<24} pid {c['pid']:<8} {'up' if c['alive'] else 'DOWN'}  {c['log']}"
        )
    return "\n".join(lines)


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True)

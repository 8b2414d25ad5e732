"""Where the dev cluster keeps its files and which loopback ports it uses.

Every path and port has a default and an environment variable that overrides it; see
``docs/dev-cluster.md`` for the table.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent
BUILD_SCRIPT = PACKAGE_DIR / "build.sh"
VERSIONS_FILE = PACKAGE_DIR / "versions.env"
NODES_FILE = PACKAGE_DIR / "nodes.yaml"
STAGES_FILE = PACKAGE_DIR / "kwok-stages.yaml"
MANIFESTS_DIR = PACKAGE_DIR / "manifests"
DEMO_CATALOG = REPO_ROOT / "spawner" / "demo-catalog.yaml"
"""The demo's and the hub tests' catalog; its resource transformations also configure Kueue."""

HOST = "127.0.0.1"
DEFAULT_PORT_BASE = 26400
DEFAULT_POD_IP_PREFIX = "127.42"

# `make demo` runs its own cluster, apart from the tests' (the default above): its state in the
# clone's .demo/ (beside the demo hub's), its own block of ports and pod IPs.
DEMO_STATE_DIR = REPO_ROOT / ".demo"
DEMO_PORT_BASE = 26600
DEMO_POD_IP_PREFIX = "127.46"

# Offsets from the port base; the last two digits echo each component's usual port.
PORT_OFFSETS: dict[str, int] = {
    "etcd": 79,  # 2379
    "etcd_peer": 80,  # 2380
    "apiserver": 43,  # 6443
    "controller_manager": 57,  # 10257
    "scheduler": 59,  # 10259
    "kwok": 47,  # 10247
    "kueue_webhook": 44,  # 9443
    "kueue_visibility": 82,  # 8082
    "kueue_health": 81,  # 8081
    "dcgm": 0,  # 9400, dcgm-exporter's: the node agent's GPU metrics (devcluster/dcgm.py)
    "hami_scheduler": 58,  # the second kube-scheduler (HAMi's profile) /healthz
    "hami_extender": 95,  # 9395: HAMi's scheduler extender (devcluster/hamischeduler.py)
    "hami_webhook": 96,  # HAMi's admission webhook (HTTPS, same process)
}

BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
    "kueue",
)


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    kueue_webhook: int
    kueue_visibility: int
    kueue_health: int
    dcgm: int
    hami_scheduler: int
    hami_extender: int
    hami_webhook: int

    def items(self) -> list[tuple[str, int]]:
        return [(f.name, getattr(self, f.name)) for f in fields(self)]


@dataclass(frozen=True)
class Settings:
    """Paths and ports of one dev cluster (one per state directory)."""

    state_dir: Path
    cache_dir: Path
    ports: Ports
    bin_dir_override: Path | None = None
    pod_ip_prefix: str = DEFAULT_POD_IP_PREFIX
    node_agent_name: str = "local-0"
    port_base: int = DEFAULT_PORT_BASE
    """The first port of the block (the hubs and servers started for it take theirs from a
    block keyed by it: devcluster.hub.port_block)."""

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (client certificate in ``system:masters``)."""
        return self.state_dir / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    @property
    def lock_file(self) -> Path:
        # Outside state_dir so that removing the state never races with the lock.
        return self.state_dir.parent / f".{self.state_dir.name}.lock"

    @property
    def claim_file(self) -> Path:
        """Held by whoever uses the cluster: the demo alone or test sessions (claim.py)."""
        return self.state_dir.parent / f".{self.state_dir.name}.claim"

    @property
    def pki_dir(self) -> Path:
        return self.state_dir / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def agent_dir(self) -> Path:
        return self.state_dir / "nodeagent"

    @property
    def volumes_dir(self) -> Path:
        """The persistent volumes' directories (devcluster/provisioner.py)."""
        return self.state_dir / "volumes"

    @property
    def credentials_dir(self) -> Path:
        """Kubeconfigs of the project's ServiceAccounts (hub, gpuaas service)."""
        return self.state_dir / "credentials"

    @property
    def apiserver_url(self) -> str:
        return f"https://{HOST}:{self.ports.apiserver}"


def _home(env: Mapping[str, str]) -> Path:
    return Path(env["HOME"]) if env.get("HOME") else Path.home()


def _state_home(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_STATE_HOME")
    return Path(xdg) if xdg else _home(env) / ".local" / "state"


def _cache_home(env: Mapping[str, str]) -> Path:
    if env.get("GPUAAS_CACHE"):
        return Path(env["GPUAAS_CACHE"])
    xdg = env.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else _home(env) / ".cache"
    return base / "jupyter-gpuaas"


def _int_env(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a port number") from None
    if not 0 < value < 65536:
        raise ValueError(f"{name}={value} is outside 1..65535")
    return value


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The tests' cluster (also ``make cluster-up``'s and the benchmarks'), from the environment
    (``os.environ`` by default); the demo's is :func:`demo_settings`.

    - ``GPUAAS_CLUSTER_DIR``: state directory (default ``~/.local/state/jupyter-gpuaas/cluster``)
    - ``GPUAAS_CACHE``: build cache shared with ``build.sh`` (default ``~/.cache/jupyter-gpuaas``)
    - ``GPUAAS_CLUSTER_BIN``: use the binaries in this directory instead of building them
    - ``GPUAAS_CLUSTER_PORT_BASE``: first port of the block (default 26400)
    - ``GPUAAS_CLUSTER_PORT_<NAME>``: one port, e.g. ``GPUAAS_CLUSTER_PORT_APISERVER=6443``
    - ``GPUAAS_CLUSTER_POD_IP_PREFIX``: two octets of the node agent's pod IPs (default 127.42)
    """
    env = os.environ if env is None else env
    state_dir = Path(
        env.get("GPUAAS_CLUSTER_DIR") or _state_home(env) / "jupyter-gpuaas" / "cluster"
    )
    base = _int_env(env, "GPUAAS_CLUSTER_PORT_BASE", DEFAULT_PORT_BASE)
    ports = Ports(
        **{
            name: _int_env(env, f"GPUAAS_CLUSTER_PORT_{name.upper()}", base + offset)
            for name, offset in PORT_OFFSETS.items()
        }
    )
    values = [p for _, p in ports.items()]
    if len(set(values)) != len(values):
        raise ValueError(f"two components would share a port: {ports}")
    prefix = env.get("GPUAAS_CLUSTER_POD_IP_PREFIX", DEFAULT_POD_IP_PREFIX)
    octets = prefix.split(".")
    if len(octets) != 2 or octets[0] != "127" or not octets[1].isdigit() or int(octets[1]) > 255:
        raise ValueError(f"GPUAAS_CLUSTER_POD_IP_PREFIX={prefix!r}: want two octets like 127.42")
    if prefix == "127.0":
        raise ValueError("GPUAAS_CLUSTER_POD_IP_PREFIX must not be 127.0 (localhost lives there)")
    bin_override = env.get("GPUAAS_CLUSTER_BIN")
    return Settings(
        state_dir=state_dir.expanduser().resolve(),
        cache_dir=_cache_home(env).expanduser().resolve(),
        ports=ports,
        bin_dir_override=Path(bin_override).resolve() if bin_override else None,
        pod_ip_prefix=prefix,
        port_base=base,
    )


def lane_environ(lane: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of test lane ``lane``: ``make test`` runs the cluster suites on two
    pytest-xdist workers, each on a dev cluster of its own. Lane 0 is ``env`` unchanged (the
    tests' cluster as it chooses); lane N gets the state directory with ``-laneN`` appended, the
    port block N blocks of 100 up (never the demo's), pod IPs 100·N up in the second octet (far
    from where :func:`devcluster.testing.free_pod_ip_prefix` looks for throwaway clusters), and
    no ``GPUAAS_CLUSTER_PORT_<NAME>`` overrides (they would make two lanes meet at a port)."""
    env = dict(os.environ if env is None else env)
    if lane < 0:
        raise ValueError(f"test lane {lane}: want 0 or more")
    if lane == 0:
        return env
    tests = load_settings(env)
    bases = (b for b in itertools.count(tests.port_base + 100, 100) if b != DEMO_PORT_BASE)
    base = next(itertools.islice(bases, lane - 1, None))
    second = int(tests.pod_ip_prefix.split(".")[1]) + 100 * lane
    if second > 255:
        raise ValueError(
            f"test lane {lane} of the cluster with pod IPs {tests.pod_ip_prefix}.x.y would need "
            f"127.{second}: use fewer lanes or a lower GPUAAS_CLUSTER_POD_IP_PREFIX"
        )
    own = {k: v for k, v in env.items() if not k.startswith("GPUAAS_CLUSTER_PORT_")}
    own.update(
        GPUAAS_CLUSTER_DIR=f"{tests.state_dir}-lane{lane}",
        GPUAAS_CLUSTER_PORT_BASE=str(base),
        GPUAAS_CLUSTER_POD_IP_PREFIX=f"127.{second}",
    )
    return own


def demo_settings(
    env: Mapping[str, str] | None = None, port_base: int = DEMO_PORT_BASE
) -> Settings:
    """The demo's cluster: ``.demo/cluster`` in this clone, ports from ``port_base``, pod IPs
    ``127.46.x.y``. The ``GPUAAS_CLUSTER_*`` variables (which choose the tests' cluster) do not
    apply, except ``GPUAAS_CLUSTER_BIN``; the build cache is shared."""
    env = os.environ if env is None else env
    own = {k: v for k, v in env.items() if not k.startswith("GPUAAS_CLUSTER_")}
    if env.get("GPUAAS_CLUSTER_BIN"):
        own["GPUAAS_CLUSTER_BIN"] = env["GPUAAS_CLUSTER_BIN"]
    own.update(
        GPUAAS_CLUSTER_DIR=str(DEMO_STATE_DIR / "cluster"),
        GPUAAS_CLUSTER_PORT_BASE=str(port_base),
        GPUAAS_CLUSTER_POD_IP_PREFIX=DEMO_POD_IP_PREFIX,
    )
    return load_settings(own)


def read_versions() -> dict[str, str]:
    """The pinned versions from ``versions.env`` (KEY=value lines)."""
    out: dict[str, str] = {}
    for line in VERSIONS_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, value = line.split("=", 1)
        out[key.strip()] = value.strip().strip('"')
    return out


def build_key(versions: Mapping[str, str]) -> str:
    """The cache key ``build.sh`` uses (keep the two in step)."""
    return (
        f"k8s-{versions['KUBERNETES_VERSION']}_etcd-{versions['ETCD_VERSION']}"
        f"_kwok-{versions['KWOK_VERSION']}_kueue-{versions['KUEUE_VERSION']}"
    )

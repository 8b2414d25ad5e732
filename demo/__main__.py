"""Run the demo: the dev cluster (Kubernetes + Kueue, simulated GPU pools), a JupyterHub with
GPUaaSSpawner and the gpuaas service, demo users in two teams, notebooks on the node agent with
simulated GPUs.

The demo runs on a cluster of its own (``.demo/cluster`` in this clone, ports from 26600, pod IPs
127.46.x.y) with the hub's state in ``.demo/hub``; the tests use another cluster, so neither
touches the other. Each run's cluster is new, and the hub's database is kept only with the
cluster it was made with (demo/hubstate.py): a new cluster, a new hub database. It holds its
cluster's claim (devcluster/claim.py) while it runs: a second demo in this clone is refused,
naming the first.

Ctrl-C or SIGTERM (also when started in the background, with SIGINT ignored) stops the hub, the
servers it started, its proxy and service, and brings the cluster down; a further signal
meanwhile does not cut that short (demo/shutdown.py). If the hub ends by itself, the same
happens. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from demo.hubstate import cluster_identity, hub_state_for  # noqa: E402
from demo.jobs import EXAMPLES, examples_config, write_catalog  # noqa: E402
from demo.shutdown import run_until_stopped  # noqa: E402
from devcluster import ClusterError, down, up  # noqa: E402
from devcluster.claim import Claim, ClusterInUse, exclusive  # noqa: E402
from devcluster.config import DEMO_PORT_BASE, DEMO_STATE_DIR, Settings, demo_settings  # noqa: E402
from devcluster.hub import DEFAULT_TEAMS, HubProcess, HubSettings, free_port  # noqa: E402
from devcluster.prometheus import (  # noqa: E402
    PrometheusNotInstalled,
    PrometheusProcess,
    ScrapeTargets,
)
from devcluster.queue_hub import OPERATOR_TOKEN, service_config  # noqa: E402

STATE = DEMO_STATE_DIR
DEMO_POLICY = REPO / "demo" / "policy.yaml"
DEMO_JOB = REPO / "demo" / "training-job.yaml"
# Who submits the sample Job: the label gpuaas.jupyter.org/user must name the submitter
# (devcluster/manifests/60-user-label-policy.yaml); hub user alice is this ServiceAccount.
DEMO_JOB_SUBMITTER = "system:serviceaccount:team-a:alice"
# Prometheus's port in the demo cluster's block (9090 there; another free one if taken).
PROMETHEUS_PORT_OFFSET = 90


def submit_job_command(kubectl: Path, kubeconfig: Path) -> str:
    """The exact shell line that submits the demo's training Job as alice."""
    return f"KUBECONFIG={kubeconfig} {kubectl} --as={DEMO_JOB_SUBMITTER} create -f {DEMO_JOB}"


def banner(
    hub: HubProcess,
    password: str,
    kubectl: Path,
    settings: Settings,
    prometheus: str = "",
    *,
    fresh: bool = True,
) -> str:
    """What the demo prints when it is up; ``fresh``: the hub's database of an earlier run (of
    another cluster) was removed (demo/hubstate.py)."""
    samples = ", ".join(p.name for p in sorted(EXAMPLES.glob("*.ipynb")))
    users = "\n".join(f"    {team}: {', '.join(names)}" for team, names in DEFAULT_TEAMS.items())
    return (
        "\n  jupyter-gpuaas demo is up: JupyterHub + Kueue on a local cluster\n"
        f"  open  {hub.url}/hub/login\n"
        f"  users (password {password!r}; 'admin' is the hub admin):\n{users}\n"
        f"  GPU console (ITOps: quotas, every GPU server, reclaims, showback): log in as\n"
        f"  'admin' and open {hub.url}/services/gpuaas/console/\n"
        "  Offerings marked 'this machine' run for real on the node agent (simulated GPUs,\n"
        "  GPU sidebar); the others are admitted by Kueue onto simulated nodes.\n"
        "  Try: alice starts 'Whole A100 40GB', then bob picks it too and watches his queue\n"
        "  position; stopping alice's server lets bob's start.\n"
        f"  Idle GPU servers are reclaimed for queued work under {DEMO_POLICY.name}\n"
        "  (its decisions are in the hub log); the sidebar warns first. To see it: alice\n"
        "  and carol each start 'A100 MIG 1g.5gb (this machine)' and leave it idle; then\n"
        "  submit the sample training Job (one such slice; it waits for them):\n"
        f"    {submit_job_command(kubectl, settings.kubeconfig)}\n"
        "  The Job is team-a's, so alice's server is warned once idle 5 min (carol's only\n"
        "  if alice's is not idle by then: prefer_own_team), stopped 2 min later, and the\n"
        "  Job runs (docs/culler.md, 'The demo').\n"
        "  The way down: a GPU server whose memory peak stays under a quarter of its share\n"
        "  for 3 min is offered a smaller share in the GPU panel (e.g. 'Half of an L4 (this\n"
        "  machine)' holding 1 GiB; docs/culler.md, 'The demo').\n"
        f"  GPU jobs: each home has {samples}; right-click it, 'Run as GPU job…',\n"
        "  and follow it in the GPU panel (docs/jobs.md).\n"
        + (
            f"  Prometheus: {prometheus} (the service's metrics, the node's DCGM metrics and\n"
            "  the shipped alert rules; the console's history reads it)\n"
            if prometheus
            else "  Prometheus: not running (the reason is above), so the console has no history\n"
        )
        + (
            "  A new cluster: the servers, home folders and hub records of an earlier\n"
            "  `make demo` are gone (the console's history in .demo/prometheus stays).\n"
            if fresh
            else ""
        )
        + f"  hub log: {hub.log_path}\n"
        f"  the demo's own cluster: {settings.state_dir} (`make test` uses another)\n"
        f"  export KUBECONFIG={settings.kubeconfig}\n"
        "  Ctrl-C stops the demo.\n"
    )


def hub_settings(
    settings: Settings,
    port: int,
    password: str,
    catalog: Path,
    service_port: int = 0,
    prometheus_url: str = "",
) -> HubSettings:
    """The demo hub's settings on the demo's cluster (picks its free ports), with ``catalog``
    (demo/jobs.py's: GPU jobs on) and the sample notebooks in every home; the service on
    ``service_port`` (0: a free one) reads ``prometheus_url`` when given."""
    return HubSettings(
        state_dir=STATE / "hub",
        catalog_file=catalog,
        kubeconfig=settings.credentials_dir / "hub.kubeconfig",
        port=free_port(port),
        password=password,
        queue_timeout=1800,
        # Homes on persistent volumes: files survive a stop, a reclaim, a change of offering.
        persistent_homes=True,
        # The gpuaas hub service: queue positions for the sidebar, and the culler.
        extra_config=service_config(
            service_port or free_port(),
            settings.credentials_dir / "gpuaas.kubeconfig",
            poll_interval=2.0,
            culler_args=[f"--GPUaaSService.policy={DEMO_POLICY}"],
            report_interval=30,
            service_args=[
                f"--GPUaaSService.catalog_file={catalog}",
                *([f"--GPUaaSService.prometheus_url={prometheus_url}"] if prometheus_url else []),
            ],
        )
        + examples_config(),
    )


def run_demo(args: argparse.Namespace, settings: Settings, claim: Claim) -> None:
    """Start the cluster and the hub, wait until the hub ends or a signal comes; then stop the
    hub with everything it started and take the demo's cluster down."""
    hubs: list[HubProcess] = []
    prometheuses: list[PrometheusProcess] = []

    def run() -> None:
        try:
            info = up(settings)
        except ClusterError as e:
            raise SystemExit(f"could not start the demo's cluster: {e}") from e
        # A new cluster has none of the last run's volumes: the hub's records of them go too.
        fresh = hub_state_for(STATE / "hub", cluster_identity(settings))
        catalog = write_catalog(STATE)
        service_port = free_port()
        # Its TSDB stays in .demo/prometheus: the history outlives a restart of the demo.
        prometheus = PrometheusProcess(
            STATE / "prometheus",
            free_port(settings.port_base + PROMETHEUS_PORT_OFFSET),
            ScrapeTargets(
                dcgm=f"127.0.0.1:{settings.ports.dcgm}",
                service=f"127.0.0.1:{service_port}",
                operator_token=OPERATOR_TOKEN,
                interval=5.0,
            ),
            retention="7d",
        )
        hub = HubProcess(
            hub_settings(settings, args.port, args.password, catalog, service_port, prometheus.url)
        )
        hubs.append(hub)
        hub.start()
        claim.note(url=hub.url)
        try:
            prometheus.start()
            prometheuses.append(prometheus)
        except (PrometheusNotInstalled, RuntimeError) as e:
            print(f"demo: no Prometheus, so the console has no history: {e}", file=sys.stderr)
        url = prometheus.url if prometheuses else ""
        kubectl = info.bin_dir / "kubectl"
        print(banner(hub, args.password, kubectl, settings, url, fresh=fresh), flush=True)
        while hub.running():
            time.sleep(1)
        print(f"jupyterhub exited; see {hub.log_path}", file=sys.stderr)

    def cleanup() -> None:
        for prometheus in prometheuses:
            prometheus.stop()
        for hub in hubs:
            print("stopping the hub, its proxy, service and servers ...", file=sys.stderr)
            for note in hub.stop():
                print(f"demo: {note}", file=sys.stderr)
        down(settings, held=claim)

    run_until_stopped(run, cleanup)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000, help="preferred port (default 8000)")
    parser.add_argument("--password", default="gpuaas-demo", help="the demo users' password")
    parser.add_argument(
        "--cluster-port-base",
        type=int,
        default=DEMO_PORT_BASE,
        help=f"first port of the demo cluster's block (default {DEMO_PORT_BASE})",
    )
    args = parser.parse_args()

    settings = demo_settings(port_base=args.cluster_port_base)
    # The hub's, proxy's and service's ports come from the block of the demo's cluster.
    os.environ["GPUAAS_CLUSTER_PORT_BASE"] = str(settings.port_base)
    try:
        with exclusive(settings, f"make demo in {REPO}") as claim:
            run_demo(args, settings, claim)
    except ClusterInUse as e:
        raise SystemExit(f"make demo: not started: {e}") from None


if __name__ == "__main__":
    main()

"""Run the demo: the dev cluster (Kubernetes + Kueue, simulated GPU pools), a JupyterHub with
GPUaaSSpawner and the gpuaas service, demo users in two teams, notebooks on the node agent with
simulated GPUs.

Ctrl-C or SIGTERM stops the hub (and the servers it started) and brings the cluster down again
if the demo started it; a further signal meanwhile does not cut that short (demo/shutdown.py).
Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from demo.shutdown import run_until_stopped  # noqa: E402
from devcluster import ClusterError, down, load_settings, status, up  # noqa: E402
from devcluster.hub import DEFAULT_TEAMS, HubProcess, HubSettings, free_port  # noqa: E402
from devcluster.queue_hub import service_config  # noqa: E402

STATE = REPO / ".demo"
DEMO_POLICY = REPO / "demo" / "policy.yaml"
DEMO_JOB = REPO / "demo" / "training-job.yaml"
# Who submits the sample Job: the label gpuaas.jupyter.org/user must name the submitter
# (devcluster/manifests/60-user-label-policy.yaml); hub user alice is this ServiceAccount.
DEMO_JOB_SUBMITTER = "system:serviceaccount:team-a:alice"


def submit_job_command(kubectl: Path, kubeconfig: Path) -> str:
    """The exact shell line that submits the demo's training Job as alice."""
    return f"KUBECONFIG={kubeconfig} {kubectl} --as={DEMO_JOB_SUBMITTER} create -f {DEMO_JOB}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000, help="preferred port (default 8000)")
    parser.add_argument("--password", default="gpuaas-demo", help="the demo users' password")
    args = parser.parse_args()

    settings = load_settings()
    was_running = bool(status(settings).get("running"))
    started: list[bool] = []  # whether up() started the cluster, once it has returned
    hubs: list[HubProcess] = []

    def run() -> None:
        try:
            info = up(settings)
        except ClusterError as e:
            raise SystemExit(f"could not start the dev cluster: {e}") from e
        started.append(info.started)
        hub = HubProcess(
            HubSettings(
                state_dir=STATE / "hub",
                kubeconfig=settings.credentials_dir / "hub.kubeconfig",
                port=free_port(args.port),
                password=args.password,
                queue_timeout=1800,
                # The gpuaas hub service: queue positions for the sidebar, and the culler.
                extra_config=service_config(
                    free_port(),
                    settings.credentials_dir / "gpuaas.kubeconfig",
                    poll_interval=2.0,
                    culler_args=[f"--GPUaaSService.policy={DEMO_POLICY}"],
                    report_interval=30,
                ),
            )
        )
        hubs.append(hub)
        hub.start()
        users = "\n".join(
            f"    {team}: {', '.join(names)}" for team, names in DEFAULT_TEAMS.items()
        )
        print(
            "\n  jupyter-gpuaas demo is up: JupyterHub + Kueue on a local cluster\n"
            f"  open  {hub.url}/hub/login\n"
            f"  users (password {args.password!r}; 'admin' is the hub admin):\n{users}\n"
            "  Offerings marked 'this machine' run for real on the node agent (simulated GPUs,\n"
            "  GPU sidebar); the others are admitted by Kueue onto simulated nodes.\n"
            "  Try: alice starts 'Whole A100 40GB', then bob picks it too and watches his queue\n"
            "  position; stopping alice's server lets bob's start.\n"
            f"  Idle GPU servers are reclaimed for queued work under {DEMO_POLICY.name}\n"
            "  (its decisions are in the hub log); the sidebar warns first. To see it: alice\n"
            "  and carol each start 'A100 MIG 1g.5gb (this machine)' and leave it idle; then\n"
            "  submit the sample training Job (one such slice; it waits for them):\n"
            f"    {submit_job_command(info.bin_dir / 'kubectl', settings.kubeconfig)}\n"
            "  After 5 min idle the longest-idle one is warned, 2 min later stopped, and\n"
            "  the Job runs (docs/culler.md, 'The demo').\n"
            f"  hub log: {hub.log_path}\n"
            f"  export KUBECONFIG={settings.kubeconfig}\n"
            "  Ctrl-C stops the demo.\n",
            flush=True,
        )
        while hub.proc is not None and hub.proc.poll() is None:
            time.sleep(1)
        print(f"jupyterhub exited; see {hub.log_path}", file=sys.stderr)

    def cleanup() -> None:
        for hub in hubs:
            print("stopping the hub and its servers ...", file=sys.stderr, flush=True)
            hub.stop()
        # if stopped inside up(), whatever it may have started of a cluster that was not running
        ours = started[0] if started else not was_running
        if ours:
            down(settings)
        else:
            print("the cluster was already running: left running", file=sys.stderr)

    run_until_stopped(run, cleanup)


if __name__ == "__main__":
    main()

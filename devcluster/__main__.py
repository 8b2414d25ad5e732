"""``python -m devcluster up|down|status|env|where`` (run from the repository root).

It acts on the tests' cluster (``GPUAAS_CLUSTER_*`` choose another); the demo's is its own."""

from __future__ import annotations

import argparse
import sys

from devcluster.claim import demo_holder
from devcluster.cluster import ClusterError, down, dump_json, format_status, status, up
from devcluster.config import Settings, load_settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster",
        description="Local Kubernetes + Kueue cluster with simulated GPU pools "
        "(see docs/dev-cluster.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser(
        "up", help="build what is missing, start the cluster (harmless if running)"
    )
    p_up.add_argument("--no-build", action="store_true", help="fail instead of building binaries")
    sub.add_parser("down", help="stop the processes this cluster started and remove its state")
    p_status = sub.add_parser("status", help="show the recorded processes and whether they run")
    p_status.add_argument("--json", action="store_true")
    sub.add_parser("env", help="print `export KUBECONFIG=...` and the built kubectl's directory")
    sub.add_parser("where", help="print the cluster's state directory and API address")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
    except ValueError as e:
        print(f"devcluster: {e}", file=sys.stderr)
        return 2
    try:
        return _run(args, settings)
    except ClusterError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace, settings: Settings) -> int:
    """One command; its exit status."""
    if args.command == "up":
        holder = demo_holder(settings)
        if holder is not None:
            print(
                f"devcluster: {settings.state_dir} is in use by {holder}; the tests' cluster is "
                "the default (unset GPUAAS_CLUSTER_DIR)",
                file=sys.stderr,
            )
            return 1
        info = up(settings, build=not args.no_build)
        print(f"export KUBECONFIG={info.kubeconfig}")
        print(f'export PATH={info.bin_dir}:"$PATH"  # for its kubectl')
        return 0
    if args.command == "down":
        down(settings)
        return 0
    if args.command == "where":
        print(f"{settings.state_dir} (API {settings.apiserver_url})")
        return 0
    st = status(settings)
    if args.command == "status":
        print(dump_json(st) if args.json else format_status(st))
    else:  # env
        print(f"export KUBECONFIG={settings.kubeconfig}")
        if st.get("bin_dir"):
            print(f'export PATH={st["bin_dir"]}:"$PATH"')
    return 0 if st.get("running") else 1


if __name__ == "__main__":
    sys.exit(main())

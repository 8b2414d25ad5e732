"""``gpuaas-admin``: check a policy file, explain what the culler would do, or check that a
cluster and hub are ready for jupyter-gpuaas (``--doctor``, :mod:`gpuaas_service.doctor`).
Also installed as ``gpuaas-culler``, its first name, for scripts that still call it.

Exit status: 0 when all is well, 2 when the policy, the catalog or the snapshot is invalid
(every problem is listed with its field path on stderr), 1 when a ``--doctor`` check is not ok
or for anything else unexpected.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from gpuaas_service.console.fit import mig_rows
from gpuaas_service.reclaim.decide import decide
from gpuaas_service.reclaim.explain import explain, explain_policies
from gpuaas_service.reclaim.explain_input import SnapshotError, load_snapshot_file
from gpuaas_service.reclaim.policy import PolicyError, PolicySet, load_policy_file
from jupyter_gpuaas.core.kueue import parse_time

__all__ = ["main"]

EXIT_INVALID = 2

_DESCRIPTION = """\
The GPU workbench culler of jupyter-gpuaas.

This command checks policy files and explains, from a JSON snapshot of workbenches, their
activity and Kueue's pending workloads, what the culler would do and why; it also advises each
MIG node's geometry from the MIG slices its pods ask for (--mig-advice); and it checks that a
cluster, its hub and Prometheus are ready for the service (--doctor, docs/deploy.md). The live
culler (the loop that gathers those inputs, warns users and stops servers through the Hub API)
runs inside the gpuaas hub service: gpuaas-service --policy FILE (docs/culler.md).
"""

_EPILOG = """\
examples:
  gpuaas-admin --check-policy /etc/gpuaas/culler-policy.yaml
  gpuaas-admin --check-policy policy.yaml --catalog catalog.yaml
  gpuaas-admin --explain --policy policy.yaml --snapshot snapshot.json
  gpuaas-admin --explain --policy policy.yaml --snapshot snapshot.json --json
  kubectl get nodes -o json > nodes.json; kubectl get pods -A -o json > pods.json
  gpuaas-admin --mig-advice nodes.json --pods pods.json
  gpuaas-admin --doctor --config /etc/gpuaas/config/gpuaas_service_config.py
  KUBECONFIG=admin.kubeconfig gpuaas-admin --doctor --as-service-account jupyterhub/gpuaas-service

The snapshot format is described in gpuaas_service/reclaim/explain_input.py.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuaas-admin",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--check-policy",
        metavar="FILE",
        help="validate a YAML policy file; exit 0 ('policy OK: N policies') or 2 (every"
        " problem with its field path)",
    )
    mode.add_argument(
        "--explain",
        action="store_true",
        help="print, for every workbench in the snapshot, what the culler would do now and why",
    )
    mode.add_argument(
        "--mig-advice",
        metavar="NODES_JSON",
        help="print, per MIG node of NODES_JSON (kubectl get nodes -o json), its MIG config now,"
        " the one the MIG slices of the pods in --pods ask for, and the kubectl label line that"
        " applies it (docs/right-sizing.md)",
    )
    mode.add_argument(
        "--doctor",
        action="store_true",
        help="check the cluster, the hub and Prometheus against the service's configuration;"
        " one line per check (ok / missing / wrong / unknown, with the fix); exit 0 only when"
        " every check is ok (docs/deploy.md)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="with --doctor: the service's configuration file (default:"
        " gpuaas_service_config.py in the working directory, if there); the Hub API token is"
        " $JUPYTERHUB_API_TOKEN, as for the service",
    )
    parser.add_argument(
        "--as-service-account",
        metavar="NAMESPACE/NAME",
        help="with --doctor: review the RBAC as this ServiceAccount (impersonated: run with an"
        " administrator's kubeconfig); default: as the credentials in effect (the service's own"
        " inside its pod)",
    )
    parser.add_argument(
        "--only",
        metavar="PREFIX",
        action="append",
        help="with --doctor: print and judge only the checks whose name starts with PREFIX"
        " (repeatable; e.g. --only kueue --only localqueue after installing Kueue and the"
        " queues); exit 1 if none has such a name",
    )
    parser.add_argument(
        "--kueue-namespace",
        metavar="NAMESPACE",
        default="kueue-system",
        help="with --doctor: where Kueue's manager Deployment (kueue-controller-manager) runs;"
        " its image tag is Kueue's version. Default: kueue-system",
    )
    parser.add_argument(
        "--pods",
        metavar="FILE",
        help="with --mig-advice: the pods whose MIG slices are the demand"
        " (kubectl get pods -A -o json); default: none",
    )
    parser.add_argument(
        "--policy",
        metavar="FILE",
        help="the YAML policy file to explain with (with --explain); with --doctor: instead of"
        " the configuration's",
    )
    parser.add_argument(
        "--snapshot",
        metavar="FILE",
        help="JSON snapshot of workbenches, pending workloads and hand-offs (required with"
        " --explain)",
    )
    parser.add_argument(
        "--catalog",
        metavar="FILE",
        help="the GPU catalog YAML (as GPUaaSSpawner reads it): policy team names are checked"
        " against its tenants; with --doctor: instead of the configuration's catalog_file",
    )
    parser.add_argument(
        "--now",
        metavar="TIME",
        help="the clock for --explain, ISO 8601 (default: the snapshot's 'now', else the time)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="with --explain: mark every decision as dry-run (explain never acts anyway)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="with --explain: print one JSON audit record per decision instead of text;"
        " with --mig-advice: one JSON object per node; with --doctor: one JSON object per"
        " check (name, status, detail, fix)",
    )
    return parser


def _known_teams(path: str | None) -> list[str] | None:
    if path is None:
        return None
    from jupyter_gpuaas.core.catalog import CatalogError, build_catalog, load_catalog_file

    try:
        catalog = build_catalog([load_catalog_file(path)])
    except CatalogError as e:
        raise _Invalid(f"{path}: the catalog is invalid", [str(err) for err in e.errors]) from e
    return list(catalog.tenants)


class _Invalid(Exception):
    def __init__(self, title: str, problems: Sequence[str]) -> None:
        super().__init__(title)
        self.title = title
        self.problems = list(problems)


def _load_policy(path: str, known_teams: list[str] | None) -> PolicySet:
    try:
        return load_policy_file(path, known_teams=known_teams)
    except PolicyError as e:
        raise _Invalid(
            f"{path}: {len(e.errors)} problem(s) in the policy", [str(err) for err in e.errors]
        ) from e


def _items(path: str) -> list[Any]:
    """The ``items`` of a ``kubectl get ... -o json`` list."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise _Invalid(f"{path}: cannot read it", [str(e)]) from e
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise _Invalid(f"{path}: not a list", ["expected the output of kubectl get ... -o json"])
    return items


def _mig_advice(nodes: str, pods: str | None, *, as_json: bool) -> int:
    rows = mig_rows(_items(nodes), _items(pods) if pods else [])
    for row in rows:
        sys.stdout.write((json.dumps(row, sort_keys=True) if as_json else row["line"]) + "\n")
    if not rows:
        sys.stdout.write("" if as_json else "no MIG node (mixed strategy, a known model)\n")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    import asyncio

    from traitlets import TraitError

    from gpuaas_service.app import GPUaaSService
    from gpuaas_service.doctor import all_ok, run_doctor

    service = GPUaaSService()
    try:
        service.initialize([f"--GPUaaSService.config_file={args.config}"] if args.config else [])
    except TraitError as e:
        raise _Invalid("the service's configuration is invalid", [str(e)]) from e
    settings = service.doctor_settings(
        catalog_file=args.catalog,
        policy_file=args.policy,
        service_account=args.as_service_account,
        kueue_namespace=args.kueue_namespace,
    )
    checks = asyncio.run(run_doctor(settings))
    if args.only:
        checks = [c for c in checks if c.name.startswith(tuple(args.only))]
        if not checks:
            sys.stderr.write(f"no check is named {' or '.join(args.only)}...\n")
            return 1
    for check in checks:
        line = json.dumps(check.as_dict(), sort_keys=True) if args.json else check.line()
        sys.stdout.write(line + "\n")
    if not args.json:
        bad = sum(not c.ok for c in checks)
        sys.stdout.write(f"{len(checks)} checks: " + (f"{bad} not ok\n" if bad else "all ok\n"))
    return 0 if all_ok(checks) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.as_service_account and "/" not in args.as_service_account:
        parser.error("--as-service-account: NAMESPACE/NAME, e.g. jupyterhub/gpuaas-service")
    try:
        if args.doctor:
            return _doctor(args)
        known = _known_teams(args.catalog)
        if args.check_policy:
            sys.stdout.write(explain_policies(_load_policy(args.check_policy, known)))
            return 0
        if args.mig_advice:
            return _mig_advice(args.mig_advice, args.pods, as_json=args.json)
        return _explain(parser, args, known)
    except _Invalid as e:
        sys.stderr.write(f"{e.title}:\n")
        for problem in e.problems:
            sys.stderr.write(f"  {problem}\n")
        return EXIT_INVALID


def _explain(
    parser: argparse.ArgumentParser, args: argparse.Namespace, known: list[str] | None
) -> int:
    """``--explain``: the plan for a snapshot of the loop's inputs, as text or JSON lines."""
    if not args.policy:
        parser.error("--explain needs --policy FILE")
    if not args.snapshot:
        parser.error(
            "--explain needs --snapshot FILE: reading the live hub and cluster is not"
            " implemented yet"
        )
    now: datetime | None = None
    if args.now:
        now = parse_time(args.now)
        if now is None:
            parser.error(f"--now: {args.now!r} is not an ISO 8601 time")
    policies = _load_policy(args.policy, known)
    try:
        snap = load_snapshot_file(args.snapshot, policies, now=now)
    except SnapshotError as e:
        raise _Invalid(
            f"{args.snapshot}: {len(e.errors)} problem(s) in the snapshot",
            [str(err) for err in e.errors],
        ) from e
    plan = decide(
        snap.workbenches,
        snap.pending,
        policies,
        now=snap.now,
        handoffs=snap.handoffs,
        dry_run=args.dry_run,
        waits=snap.waits,
    )
    if args.json:
        for d in plan.decisions:
            sys.stdout.write(json.dumps(d.log_record(plan.now), sort_keys=True) + "\n")
    else:
        sys.stdout.write(explain(plan, source=args.snapshot))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

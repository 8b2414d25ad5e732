"""The gpuaas service's endpoints for single-user servers' culling, and its ``/metrics``.

Under the service prefix (``/services/gpuaas/``):

- ``POST api/activity`` — a server's ``activity`` payload (docs/api.md). Only a server's own
  token may report, and only for its own server (:func:`.activity_store.server_of_token`);
  anything else is ``403``; a malformed payload ``400`` with its field paths.
- ``GET api/reclaim`` — the calling server's pending warning (deadline, reason, snoozes left,
  ``saving`` at the deadline) or ``null``.
- ``POST api/reclaim/snooze`` — "Keep my GPU": ``200`` with the new deadline-free state, or
  ``409`` when the policy allows no more snoozes.
- ``GET metrics`` — Prometheus text (no user names in it).

Callers are identified by the hub (``HubAuth``, which needs ``access:services!service=gpuaas``
on the token); no handler here counts as the user's activity.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from tornado import web

from gpuaas_culler.clients.prometheus import DEFAULT_QUERY, PrometheusClient
from gpuaas_culler.reclaim.activity_store import server_of_token
from gpuaas_culler.reclaim.loop import ReclaimLoop
from gpuaas_culler.web.base import HubJSONHandler
from jupyter_gpuaas.core.activity import ReportError
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = ["reclaim_handlers"]

MAX_REPORT_BYTES = 1 << 20


class _ServerHandler(HubJSONHandler):
    """A request from a single-user server, made with that server's own hub token."""

    loop: ReclaimLoop

    def initialize(self, loop: ReclaimLoop) -> None:
        self.loop = loop

    def caller(self) -> tuple[str, str]:
        """(user, server) of the calling server's token, or 403."""
        model = self.current_user
        if not model:
            raise web.HTTPError(
                403, "a server's token with the scope access:services!service=gpuaas is needed"
            )
        server = server_of_token(model)
        if server is None:
            raise web.HTTPError(
                403,
                "only a single-user server's own token may do this (its scopes name exactly one"
                " server: access:servers!server=USER/NAME)",
            )
        return str(model["name"]), server


class ActivityReportHandler(_ServerHandler):
    def post(self) -> None:
        user, server = self.caller()
        if len(self.request.body) > MAX_REPORT_BYTES:
            raise web.HTTPError(413, "activity report too large")
        try:
            payload = json.loads(self.request.body or b"null")
        except ValueError as e:
            raise web.HTTPError(400, f"not JSON: {e}") from e
        now = datetime.now(timezone.utc)
        try:
            self.loop.store.record(user, server, payload, now)
        except ReportError as e:
            raise web.HTTPError(400, f"invalid activity report: {e}") from e
        self.finish(
            json.dumps(
                {
                    "accepted": True,
                    "received_at": isoformat_z(now),
                    **self.loop.warning_for(user, server, now),
                }
            )
        )


class ReclaimHandler(_ServerHandler):
    def get(self) -> None:
        user, server = self.caller()
        self.finish(json.dumps(self.loop.warning_for(user, server)))


class SnoozeHandler(_ServerHandler):
    async def post(self) -> None:
        user, server = self.caller()
        result = await self.loop.snooze(user, server)
        if not result.allowed:
            self.set_status(409)
        self.finish(
            json.dumps(
                {
                    "allowed": result.allowed,
                    "reason": result.reason,
                    "until": isoformat_z(result.until) if result.until else None,
                    "snoozes_left": result.snoozes_left,
                }
            )
        )


class MetricsHandler(web.RequestHandler):
    def initialize(self, loop: ReclaimLoop) -> None:
        self.loop = loop

    def get(self) -> None:
        body, content_type = self.loop.metrics.exposition()
        self.set_header("Content-Type", content_type)
        self.finish(body)


def reclaim_handlers(
    prefix: str, loop: ReclaimLoop, hub_auth: Any = None
) -> list[tuple[str, type, dict[str, Any]]]:
    """The handlers to add to the service's tornado app (``app.add_handlers(".*", ...)``)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    if hub_auth is not None:
        _ServerHandler.hub_auth = hub_auth
    kw = {"loop": loop}
    return [
        (prefix + "api/activity", ActivityReportHandler, kw),
        (prefix + "api/reclaim", ReclaimHandler, kw),
        (prefix + "api/reclaim/snooze", SnoozeHandler, kw),
        (prefix + "metrics", MetricsHandler, kw),
    ]


def add_culler_arguments(parser: Any) -> None:
    """The culler's command-line options of ``gpuaas-service``."""
    import os

    env = os.environ.get
    parser.add_argument(
        "--policy",
        default=env("GPUAAS_CULLER_POLICY", ""),
        help="the culler's YAML policy file (gpuaas-culler --check-policy FILE checks it);"
        " default $GPUAAS_CULLER_POLICY; without one, activity reports are still taken but"
        " nothing is reclaimed",
    )
    parser.add_argument(
        "--culler-interval",
        type=float,
        default=float(env("GPUAAS_CULLER_INTERVAL", "30")),
        help="seconds between reclaim cycles; default 30 (doubling up to 5 minutes while the"
        " hub or Kubernetes cannot be read)",
    )
    parser.add_argument(
        "--culler-dry-run",
        action="store_true",
        default=env("GPUAAS_CULLER_DRY_RUN", "") in ("1", "true", "yes"),
        help="decide and log only: no warning, no stop, no annotation, no Event",
    )
    parser.add_argument(
        "--prometheus-url",
        default=env("GPUAAS_CULLER_PROMETHEUS_URL", ""),
        help="a Prometheus that scrapes DCGM exporter with its pod mapping (e.g."
        " http://prometheus.monitoring:9090): each cycle asks it for every pod's GPU"
        " utilisation, which counts for whole GPUs and MIG slices; default"
        " $GPUAAS_CULLER_PROMETHEUS_URL; empty: not asked (docs/culler.md)",
    )
    parser.add_argument(
        "--prometheus-query",
        default=env("GPUAAS_CULLER_PROMETHEUS_QUERY", DEFAULT_QUERY),
        help="PromQL giving one sample per pod in percent, labelled namespace and pod (or"
        f" exported_namespace and exported_pod); default: {DEFAULT_QUERY}",
    )
    parser.add_argument(
        "--save-lead",
        type=float,
        default=float(env("GPUAAS_CULLER_SAVE_LEAD", "15")),
        help="seconds before a reclaim from which open JupyterLabs are told to save; default 15",
    )


def _listed(reflector: Any) -> Any:
    """The reflector's pods once it has listed them; ``None`` before."""
    done = reflector.first_load_future.done() and not reflector.first_load_future.exception()
    return reflector.resources.values() if done else None


def start_culler(
    app: web.Application, args: Any, view: Any, hub_auth: Any, pods: Any = None
) -> ReclaimLoop:
    """Add the culler's handlers to the service's app and start its loop (with a policy).

    ``pods``: the service's watch of the notebook pods (a kubespawner reflector), read by each
    cycle instead of a list call."""
    import asyncio
    import os

    from gpuaas_culler.reclaim.loop import HubClient, KubeClient, Settings
    from gpuaas_culler.reclaim.policy import PolicySet, load_policy_file

    policies = load_policy_file(args.policy) if args.policy else PolicySet(policies=())
    namespaces = [n.strip() for n in args.job_namespaces.split(",") if n.strip()]
    loop = ReclaimLoop(
        hub=HubClient(
            os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api"),
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
        ),
        kube=KubeClient(),
        view=view,
        policies=policies,
        pods=None if pods is None else lambda: _listed(pods),
        utilization=(
            PrometheusClient(args.prometheus_url, args.prometheus_query).pod_utilization
            if args.prometheus_url
            else None
        ),
        settings=Settings(
            notebook_namespace=args.notebook_namespace,
            job_namespaces=namespaces,
            interval=args.culler_interval,
            save_lead=args.save_lead,
            dry_run=args.culler_dry_run,
        ),
    )
    app.add_handlers(".*", reclaim_handlers(args.prefix, loop, hub_auth))
    if policies.policies:
        loop.task = asyncio.ensure_future(loop.run())
    return loop

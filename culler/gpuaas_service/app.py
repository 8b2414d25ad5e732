"""``gpuaas-service``: the gpuaas hub service as a traitlets application (docs/queue.md,
docs/culler.md).

Run by JupyterHub as the managed service ``gpuaas`` (or as its own Deployment,
culler/deploy/gpuaas-service.yaml). It answers the sidebar's queue questions from watch caches
(:mod:`gpuaas_service.web.queue`), takes the servers' activity reports and runs the reclaim loop
when a policy is given (:mod:`gpuaas_service.web.reclaim`, :mod:`gpuaas_service.reclaim.loop`).

Configured like JupyterHub: a config file (``gpuaas_service_config.py`` in the working
directory, or ``-f FILE``) with ``c.GPUaaSService.x = ...`` lines, ``--GPUaaSService.x=...`` on
the command line; the command line wins over the file. The environment gives only what the hub
sets for a managed service (``url``, ``prefix``, ``hub_api_url``, the token) and the operator
token (``$GPUAAS_OPERATOR_TOKEN``, from a Kubernetes Secret), as defaults.
``gpuaas-service --help-all`` lists every option.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from traitlets import Bool, Enum, Float, Integer, List, TraitError, Unicode, default
from traitlets.config import Application

from gpuaas_service.clients.prometheus import DEFAULT_QUERY, HAMI_LAST_KERNEL_QUERY
from gpuaas_service.reclaim.loop import Settings
from gpuaas_service.reclaim.policy import PolicyFile

if TYPE_CHECKING:
    from gpuaas_service.api_types import ServiceHealthPolicy
    from gpuaas_service.clients.kubernetes import PodWatch
    from gpuaas_service.console.answers import ConsoleState
    from gpuaas_service.doctor import DoctorSettings
    from gpuaas_service.jobs.service import JobService
    from gpuaas_service.queue.index import QueueIndex
    from gpuaas_service.queue.outlook import OutlookWriter
    from gpuaas_service.reclaim.loop import ReclaimLoop
    from gpuaas_service.reclaim.usage import UsageRecorder
    from gpuaas_service.resize.resizer import Resizer
    from gpuaas_service.web.console_history import History
    from gpuaas_service.web.context import ServiceContext
    from gpuaas_service.web.servers import ServerTokens
    from jupyter_gpuaas.core.catalog import Catalog
    from jupyter_gpuaas.hub.kueue_watch import WatchedKueueView

Readings = Callable[[], Awaitable[Mapping[tuple[str, str], float]]]
"""A Prometheus reading per pod: ``(namespace, pod)`` → a figure."""

__all__ = ["GPUaaSService", "main"]

log = logging.getLogger("gpuaas.service")

_LOOP_DEFAULTS = Settings()
"""The reclaim loop's own defaults: the options below start from them (one number each)."""

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class GPUaaSService(Application):
    name = "gpuaas-service"
    description = (
        "The gpuaas JupyterHub service: each user's pending GPU work and its Kueue queue "
        "positions from watch caches, the servers' activity reports, and the culler's reclaim "
        "loop when a policy is given. Run by the hub as the managed service 'gpuaas' "
        "(docs/queue.md, docs/culler.md); Kubernetes credentials from KUBECONFIG or the pod's "
        "ServiceAccount; the Hub API token from $JUPYTERHUB_API_TOKEN (set by the hub)."
    )
    examples = """
gpuaas-service -f /etc/gpuaas/gpuaas_service_config.py
gpuaas-service --GPUaaSService.job_namespaces=team-a --GPUaaSService.job_namespaces=team-b
"""
    _nodes: PodWatch | None = None
    """The Node objects' watch (the console's free GPUs); ``None``: not watched."""
    _job_pods_seen: Sequence[Mapping[str, Any]] | None = ()
    """The training namespaces' pods as the reclaim loop last listed them (``None``: not yet)."""
    _policy_task: asyncio.Future[None] | None = None
    """The policy file's reload (:meth:`_watch_policy`), with a policy."""

    aliases = {  # noqa: RUF012 (traitlets reads these class attributes)
        "f": "GPUaaSService.config_file",
        "config": "GPUaaSService.config_file",
        "log-level": "Application.log_level",
    }

    log_level = Enum(
        (0, 10, 20, 30, 40, 50, "DEBUG", "INFO", "WARN", "ERROR", "CRITICAL"),
        default_value="INFO",  # the service's key=value lines are its record
        help="""The service's log level (its audit lines are INFO). Default INFO.
        Example: c.GPUaaSService.log_level = "DEBUG"
        """,
    ).tag(config=True)

    config_file = Unicode(
        "gpuaas_service_config.py",
        config=True,
        help="""The configuration file to load (Python, ``c.GPUaaSService.x = ...`` lines), like
        JupyterHub's ``-f``. Default: gpuaas_service_config.py, looked for in the working
        directory and skipped if absent; a file named here explicitly must exist.
        Example: gpuaas-service -f /etc/gpuaas/gpuaas_service_config.py""",
    )

    url = Unicode(
        "http://127.0.0.1:10101",
        config=True,
        help="""Where the service listens (scheme, host and port). Default: $JUPYTERHUB_SERVICE_URL,
        which the hub sets for a managed service, else http://127.0.0.1:10101.
        Example: c.GPUaaSService.url = "http://0.0.0.0:10101"
        """,
    )

    @default("url")
    def _url_default(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_URL") or "http://127.0.0.1:10101"

    prefix = Unicode(
        "/services/gpuaas/",
        config=True,
        help="""The URL prefix of every endpoint (the hub's proxy routes it here). Default:
        $JUPYTERHUB_SERVICE_PREFIX, else /services/gpuaas/.
        Example: c.GPUaaSService.prefix = "/services/gpuaas/"
        """,
    )

    @default("prefix")
    def _prefix_default(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX") or "/services/gpuaas/"

    hub_api_url = Unicode(
        "http://127.0.0.1:8081/hub/api",
        config=True,
        help="""The Hub REST API the culler calls. Default: $JUPYTERHUB_API_URL (set by the hub),
        else http://127.0.0.1:8081/hub/api. The token is always $JUPYTERHUB_API_TOKEN.
        Example: c.GPUaaSService.hub_api_url = "http://hub:8081/hub/api"
        """,
    )

    @default("hub_api_url")
    def _hub_api_url_default(self) -> str:
        return os.environ.get("JUPYTERHUB_API_URL") or "http://127.0.0.1:8081/hub/api"

    notebook_namespace = Unicode(
        _LOOP_DEFAULTS.notebook_namespace,
        config=True,
        help=f"""The namespace of the users' servers (KubeSpawner's ``namespace``). Default:
        {_LOOP_DEFAULTS.notebook_namespace}.
        Example: c.GPUaaSService.notebook_namespace = "jupyter-users"
        """,
    )

    job_namespaces = List(
        Unicode(),
        config=True,
        help="""The namespaces of the teams' training Jobs: their queued Workloads are shown in
        the sidebar's queue and are what a reclaim may free GPUs for; their pods are read each
        cycle (list pods there) so that an admitted Job waiting for a whole card of a shared
        pool gets one freed (docs/right-sizing.md). Empty (the default): only the notebook
        namespace's Workloads count. Default: none. On the command line, repeat
        the option (--GPUaaSService.job_namespaces=team-a --GPUaaSService.job_namespaces=team-b).
        Example: c.GPUaaSService.job_namespaces = ["team-a", "team-b"]""",
    )

    poll_interval = Float(
        2.0,
        min=0.1,
        config=True,
        help="""Seconds between polls of Kueue's visibility API for a LocalQueue with pending
        work (the only Kueue data that cannot be watched; one poller per such queue, shared by
        all callers). Default 2.
        Example: c.GPUaaSService.poll_interval = 2""",
    )

    cache_sync_timeout = Float(
        30.0,
        min=0.0,
        config=True,
        help="""Seconds to wait at start for the Kueue caches' first lists before serving anyway
        (answers say "not synced" until they are). Default 30.
        Example: c.GPUaaSService.cache_sync_timeout = 60""",
    )

    shutdown_grace = Float(
        20.0,
        min=0.0,
        config=True,
        help="""Seconds a stop (SIGTERM from Kubernetes, SIGINT from JupyterHub) waits for the
        reclaim cycle under way and its webhook posts to finish, so that a warning is never
        left half-given (on the pod but with no Event or post); no stop of a server is begun
        meanwhile (docs/culler.md). A stop the grace cuts short gets up to 5 s more to take its
        marks off the pod. Both stoppers wait 30 s before killing the process
        (terminationGracePeriodSeconds, LocalProcessSpawner's interrupt_timeout), so keep it
        at least 5 s below that. Default 20.
        Example: c.GPUaaSService.shutdown_grace = 10""",
    )

    way_down_below = Float(
        0.25,
        min=0.0,
        max=1.0,
        config=True,
        help="""The way down: a session whose GPU-memory peak (what its server's activity
        reports said since it started) is at most this share of its offering's memory is
        offered a smaller offering in the GPU panel, one that holds the peak times 1.25 (the
        spawn form's headroom), once it has run way_down_after seconds. The user decides; the
        move keeps the kernels' variables as the way up does. 0 turns the offer off.
        Default 0.25 (a peak of 5 GiB or less on a 20 GiB share).
        Example: c.GPUaaSService.way_down_below = 0.2""",
    )

    way_down_after = Float(
        1800.0,
        min=0.0,
        config=True,
        help="""Seconds a session must have run, its peak staying under way_down_below of its
        share, before the GPU panel offers it a smaller one (a peak needs time to show: a
        notebook that loads its model later would be moved down too soon). The default for
        sessions whose reclaim policy sets no way_down_after of its own (a policy field, as
        the other reclaim timings: docs/culler.md). Default 1800 (30 minutes).
        Example: c.GPUaaSService.way_down_after = 3600""",
    )

    kubernetes_request_timeout = Float(
        20.0,
        min=0.1,
        config=True,
        help="""Seconds per Kubernetes API request (lists, patches, Events, the hand-off
        ConfigMap; watches are long polls and excluded). Default 20.
        Example: c.GPUaaSService.kubernetes_request_timeout = 30""",
    )

    pod_watch_seconds = Float(
        300.0,
        min=10.0,
        config=True,
        help="""Seconds each watch of the notebook pods runs before the service lists them all
        again (changes arrive through the watch meanwhile; a list also follows any watch
        error). kubespawner's own default, 10, would list every notebook pod every 10 s.
        Default 300.
        Example: c.GPUaaSService.pod_watch_seconds = 600""",
    )

    kueue_api_version = Unicode(
        "v1beta2",
        config=True,
        help="""The kueue.x-k8s.io API version to read (ClusterQueues, LocalQueues, Workloads,
        ResourceFlavors). Default v1beta2.
        Example: c.GPUaaSService.kueue_api_version = "v1beta2"
        """,
    )

    kueue_visibility_api_version = Unicode(
        "v1beta2",
        config=True,
        help="""The visibility.kueue.x-k8s.io API version for queue positions. Default v1beta2.
        Example: c.GPUaaSService.kueue_visibility_api_version = "v1beta2"
        """,
    )

    # ---------------------------------------------------------------- limits and access

    operator_token = Unicode(
        config=True,
        help="""The token Prometheus and operators send (``Authorization: Bearer TOKEN``) to read
        ``{prefix}metrics`` and ``{prefix}api/health``. Those endpoints sit behind the hub's
        proxy, where every hub user can reach the service: without this token they answer 403 to
        everyone. Default: $GPUAAS_OPERATOR_TOKEN, else none (both closed).
        Example: c.GPUaaSService.operator_token = open("/etc/gpuaas/operator-token").read().strip()
        """,
    )

    @default("operator_token")
    def _operator_token_default(self) -> str:
        return os.environ.get("GPUAAS_OPERATOR_TOKEN", "").strip()

    max_request_bytes = Integer(
        64 * 1024,
        min=1024,
        config=True,
        help="""The largest request body in bytes, refused before it is read (an activity report
        is a few KiB; nothing the service takes is bigger). Default 65536 (64 KiB).
        Example: c.GPUaaSService.max_request_bytes = 131072""",
    )

    request_header_timeout = Float(
        20.0,
        min=0.1,
        config=True,
        help="""Seconds a request's headers may take to arrive, and a kept-alive connection may
        wait for its next request, before the connection is closed (every hub user, and every
        notebook Job's pod, reaches the service port: a slow client must not hold a socket).
        Keep it above the hub proxy's keep-alive idle time (Node's default is 5 s).
        Default 20.
        Example: c.GPUaaSService.request_header_timeout = 60""",
    )

    request_body_timeout = Float(
        10.0,
        min=0.1,
        config=True,
        help="""Seconds a request body (at most max_request_bytes) may take to arrive once its
        caller was let in (a body is read only after the token on its headers was checked);
        then the connection is closed. A notebook Job's upload has its own, longer, limit.
        Default 10.
        Example: c.GPUaaSService.request_body_timeout = 30""",
    )

    max_unidentified_connections = Integer(
        256,
        min=1,
        config=True,
        help="""Connections open at once on which no request has yet shown a valid token or
        login; a new connection over the cap is answered 503 with Retry-After and closed
        before it is read (counted in gpuaas_service_requests_refused{endpoint="connections"}).
        The hub's proxy keeps a few connections per service; each user's sidebar and server
        reach it through them. Default 256.
        Example: c.GPUaaSService.max_unidentified_connections = 1024""",
    )

    activity_reports_per_minute = Float(
        6.0,
        min=0.0,
        config=True,
        help="""Activity reports each server may send per minute (a token bucket with a burst
        of activity_report_burst); more are answered 429 with Retry-After, before they are
        parsed. Servers report every GPUaaS.activity_report_interval (default 60 s). 0: no
        limit. Default 6.
        Example: c.GPUaaSService.activity_reports_per_minute = 12""",
    )

    activity_report_burst = Integer(
        10,
        min=1,
        config=True,
        help="""Reports a server may send at once before activity_reports_per_minute applies.
        Default 10.
        Example: c.GPUaaSService.activity_report_burst = 20""",
    )

    queue_requests_per_second = Float(
        5.0,
        min=0.0,
        config=True,
        help="""Queue questions (``api/queue``) each user may ask per second, over all their
        servers and tabs (a sidebar asks every few seconds); a burst of queue_request_burst;
        more are answered 429. 0: no limit. Default 5.
        Example: c.GPUaaSService.queue_requests_per_second = 10""",
    )

    queue_request_burst = Integer(
        20,
        min=1,
        config=True,
        help="""Queue questions a user may ask at once before queue_requests_per_second
        applies. Default 20.
        Example: c.GPUaaSService.queue_request_burst = 40""",
    )

    history_requests_per_minute = Float(
        6.0,
        min=0.0,
        config=True,
        help="""Console history questions (``api/console/history``) each caller may have
        answered from Prometheus per minute (a token bucket with a burst of
        history_request_burst); more are answered 429 with Retry-After. An answer served
        again (the same teams and range, within its keep time) or shared with a caller who
        asked the same a moment before costs nothing. A console page asks once a minute.
        0: no limit. Default 6.
        Example: c.GPUaaSService.history_requests_per_minute = 12""",
    )

    history_request_burst = Integer(
        10,
        min=1,
        config=True,
        help="""History questions a caller may have answered at once before
        history_requests_per_minute applies. Default 10.
        Example: c.GPUaaSService.history_request_burst = 20""",
    )

    activity_max_servers = Integer(
        10_000,
        min=1,
        config=True,
        help="""Servers whose latest activity report is kept, whether or not a policy is
        loaded (then the longest silent report of the user holding the most is forgotten first;
        reports older than a day are always dropped). A forgotten report leaves its server
        "unknown" from when it was last known active, never idle since its start.
        Default 10000.
        Example: c.GPUaaSService.activity_max_servers = 50000""",
    )

    activity_max_servers_per_user = Integer(
        100,
        min=1,
        config=True,
        help="""Servers of one user whose latest activity report is kept (their longest
        silent is forgotten first), so that no user's reports push out another's. Keep it at
        or above the hub's named_server_limit_per_user. Default 100.
        Example: c.GPUaaSService.activity_max_servers_per_user = 20""",
    )

    # ---------------------------------------------------------------- the culler

    policy_check_interval = Float(
        10.0,
        min=0.1,
        config=True,
        help="""Seconds between checks of the policy file for changes. A changed file is loaded;
        an invalid one is logged, shown in api/health and the metric gpuaas_policy_valid,
        and the last good policy stays in force (none at start: reclaim off). Default 10.
        Example: c.GPUaaSService.policy_check_interval = 30""",
    )

    policy = Unicode(
        config=True,
        help="""The culler's YAML policy file (check it with ``gpuaas-admin --check-policy
        FILE``). Without one, activity reports are still taken but nothing is reclaimed.
        Default: none.
        Example: c.GPUaaSService.policy = "/etc/gpuaas/policy.yaml"
        """,
    )

    culler_interval = Float(
        _LOOP_DEFAULTS.interval,
        min=0.1,
        config=True,
        help=f"""Seconds between reclaim cycles (doubling, up to culler_max_backoff, while the hub
        or Kubernetes cannot be read). Default
        {_LOOP_DEFAULTS.interval:g}.
        Example: c.GPUaaSService.culler_interval = 60""",
    )

    culler_max_backoff = Float(
        _LOOP_DEFAULTS.max_backoff,
        min=0.1,
        config=True,
        help=f"""The longest wait in seconds between reclaim cycles while the hub or Kubernetes
        cannot be read. Default {_LOOP_DEFAULTS.max_backoff:g}.
        Example: c.GPUaaSService.culler_max_backoff = 600""",
    )

    culler_dry_run = Bool(
        False,
        config=True,
        help="""Decide and log only: no warning, no stop, no annotation, no Event (on top of the
        policy file's own dry_run). Default False.
        Example: c.GPUaaSService.culler_dry_run = True""",
    )

    save_lead = Float(
        _LOOP_DEFAULTS.save_lead,
        min=0.0,
        config=True,
        help=f"""Seconds before a reclaim from which open JupyterLabs are told to save. Default
        {_LOOP_DEFAULTS.save_lead:g}.
        Example: c.GPUaaSService.save_lead = 30""",
    )

    hub_concurrency = Integer(
        _LOOP_DEFAULTS.hub_concurrency,
        min=1,
        config=True,
        help=f"""Hub API requests at a time when a cycle confirms the servers it is about to warn
        or stop. Default {_LOOP_DEFAULTS.hub_concurrency}.
        Example: c.GPUaaSService.hub_concurrency = 16""",
    )

    hub_request_timeout = Float(
        20.0,
        min=0.1,
        config=True,
        help="""Seconds per Hub API request of the culler (connecting and the whole answer).
        Default 20.
        Example: c.GPUaaSService.hub_request_timeout = 60""",
    )

    hub_page_size = Integer(
        200,
        min=1,
        config=True,
        help="""Groups per page when the culler reads the hub's groups (only for policies that
        name groups). Default 200.
        Example: c.GPUaaSService.hub_page_size = 500""",
    )

    prometheus_url = Unicode(
        config=True,
        help="""A Prometheus that scrapes DCGM exporter with its pod mapping: each cycle asks it
        for every pod's GPU utilisation, which then counts for whole GPUs and MIG slices
        (docs/culler.md). Empty: not asked. Default: empty. A Prometheus behind basic auth:
        https://USER:PASSWORD@host (percent-encoded); they are sent as basic auth only, and
        every log line, error, console answer and doctor line shows the URL without them.
        Example: c.GPUaaSService.prometheus_url = "http://prometheus.monitoring:9090"
        """,
    )

    prometheus_query = Unicode(
        DEFAULT_QUERY,
        config=True,
        help=f"""PromQL giving one sample per pod in percent, labelled namespace and pod (or
        exported_namespace and exported_pod). Default:
        {DEFAULT_QUERY}
        Example: c.GPUaaSService.prometheus_query = "100 * DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        """,
    )

    hami_last_kernel_query = Unicode(
        HAMI_LAST_KERNEL_QUERY,
        config=True,
        help=f"""PromQL giving, per pod, the seconds since its last kernel from HAMi's vGPU
        monitor (docs/fractions.md), asked of prometheus_url each cycle: for fractions it counts
        as activity, and with a policy's busy_signal: gpu it alone says busy (a kernel in the
        last minute) or idle since then. Empty: not asked. Default: {HAMI_LAST_KERNEL_QUERY}
        Example: c.GPUaaSService.hami_last_kernel_query = ""
        """,
    )

    prometheus_timeout = Float(
        10.0,
        min=0.1,
        config=True,
        help="""Seconds per Prometheus query. Default 10.
        Example: c.GPUaaSService.prometheus_timeout = 20""",
    )

    history_max_points = Integer(
        240,
        min=10,
        max=11000,
        config=True,
        help="""The most points per series in the console's history (read from prometheus_url
        with range queries): the step is chosen from the range asked for so that none has more.
        Default 240 (6 hours in 2-minute steps). Prometheus allows at most 11000.
        Example: c.GPUaaSService.history_max_points = 500""",
    )

    history_max_series = Integer(
        30,
        min=1,
        config=True,
        help="""The most series per chart of the console's history (a series per team): a
        query with more keeps the first ones by name and says how many it cut. Default 30.
        Example: c.GPUaaSService.history_max_series = 60""",
    )

    # ---------------------------------------------------------------- notebook jobs

    catalog_file = Unicode(
        config=True,
        help="""The GPU catalog (the hub's, c.GPUaaSSpawner.catalog_file) for notebook Jobs and
        the way up to a bigger GPU: a tenant's ``jobs`` section says where its notebooks run as
        training Jobs and its caps (docs/jobs.md); its offerings are what a server may move up
        to (``api/resize``, docs/api.md); its teams' display names are how a reclaim warning
        names another team's queued work. Empty: those endpoints answer 503, and a warning says
        "another team". Default: empty.
        Example: c.GPUaaSService.catalog_file = "/etc/gpuaas/catalog.yaml"
        """,
    )

    job_service_url = Unicode(
        config=True,
        help="""The service's URL as a notebook Job's pod reaches it (its runner fetches the
        notebook and sends the result there, with the Job's own token). Default: url + prefix
        (right where pods share the service's network, as in the dev cluster); in a cluster,
        the service's in-cluster address.
        Example: c.GPUaaSService.job_service_url = "http://gpuaas.jupyterhub.svc:10101/services/gpuaas/"
        """,
    )

    @default("job_service_url")
    def _job_service_url_default(self) -> str:
        return self.url.rstrip("/") + "/" + self.prefix.strip("/") + "/"

    job_max_notebook_bytes = Integer(
        900_000,
        min=1024,
        config=True,
        help="""The largest notebook (JSON, bytes) a job takes, and the largest executed copy
        it sends back: each is kept in a ConfigMap, which holds at most 1 MiB. Submit bodies
        may be this plus 200 KiB. Default 900000.
        Example: c.GPUaaSService.job_max_notebook_bytes = 500000""",
    )

    job_topology_level = Unicode(
        "kubernetes.io/hostname",
        config=True,
        help="""The topology level within which a notebook Job's pod must be placed, written as
        Kueue's pod-template annotation kueue.x-k8s.io/podset-required-topology on Jobs whose
        offering's ResourceFlavor has a topologyName (Kueue's Topology Aware Scheduling,
        docs/deploy.md). With a node (the default), Kueue admits such a Job only once one node
        has room for all its GPUs, and the queue says "waiting for a whole node" meanwhile,
        instead of admitting it onto quota that no single node can give. It must be a level
        (nodeLabel) of that flavor's Topology: the doctor checks. A Job on a flavor without a
        topologyName never carries it (Kueue refuses such a Job there). Empty: no annotation;
        then Kueue admits no notebook Job onto a topology flavor whose ClusterQueue has other
        flavors. Default kubernetes.io/hostname.
        Example: c.GPUaaSService.job_topology_level = "cloud.provider.com/topology-rack"
        """,
    )

    # ---------------------------------------------------------------- the console

    console_regret_window = Float(
        3600.0,
        min=0.0,
        config=True,
        help="""Seconds after a reclaim within which its user starting a server again counts as
        "regret" in the console (the reclaim took a GPU from someone who still wanted it).
        Default 3600 (an hour).
        Example: c.GPUaaSService.console_regret_window = 1800""",
    )

    console_cache_seconds = Float(
        2.0,
        min=0.0,
        config=True,
        help="""Seconds the console's answer (api/console) is reused before it is built again
        from memory: teams, events and hand-offs, then serialised and gzipped once; the
        workbench rows are built once per reclaim cycle, and the whole answer right after
        each cycle. Requests in between get the same bytes. Default 2.
        Example: c.GPUaaSService.console_cache_seconds = 5""",
    )

    # ---------------------------------------------------------------- start-up

    def initialize(self, argv: list[str] | None = None) -> None:
        self.parse_command_line(argv)
        if self.subapp is not None:
            return
        self._load_config_file()
        # Env-derived defaults are read now; a bad one is a start-up error with its name.
        for name in self.class_trait_names(config=True):
            getattr(self, name)

    def _load_config_file(self) -> None:
        explicit = "config_file" in self.cli_config.GPUaaSService
        path = os.path.abspath(os.path.expanduser(self.config_file))
        if not os.path.isfile(path):
            if explicit:
                raise TraitError(f"config file {self.config_file} not found")
            return
        # traitlets applies the command line again after the file: it wins
        self.load_config_file(os.path.basename(path), path=os.path.dirname(path))

    def loop_settings(self) -> Settings:
        """The reclaim loop's settings (plain data: decisions never see the Application)."""
        return Settings(
            notebook_namespace=self.notebook_namespace,
            job_namespaces=tuple(self.job_namespaces),
            interval=self.culler_interval,
            max_backoff=self.culler_max_backoff,
            save_lead=self.save_lead,
            dry_run=self.culler_dry_run,
            hub_concurrency=self.hub_concurrency,
        )

    def start(self) -> None:
        if self.subapp is not None:
            self.subapp.start()
            return
        level = self.log_level
        logging.basicConfig(
            level=level if isinstance(level, int) else str(level), format=LOG_FORMAT
        )
        try:
            asyncio.run(self.serve())
        except KeyboardInterrupt:  # SIGINT before serve() took the signals over
            log.info("gpuaas service stopped")

    # ---------------------------------------------------------------- running

    async def serve(self) -> None:
        from kubespawner.clients import load_config

        from gpuaas_service.clients.kubernetes import notebook_pod_reflector
        from gpuaas_service.queue.index import QueueIndex
        from gpuaas_service.queue.workloads import display_names
        from gpuaas_service.web.app import make_app
        from gpuaas_service.web.connections import service_server

        load_config()
        if not self.job_namespaces:
            log.warning(
                "job_namespaces=none: only Workloads in %s are shown and reclaimed for; teams'"
                " training Jobs elsewhere are not (set c.GPUaaSService.job_namespaces)",
                self.notebook_namespace,
            )
        view = self._kueue_view()
        pods = notebook_pod_reflector(
            self.notebook_namespace, resync_seconds=self.pod_watch_seconds
        )
        await view.start(timeout=self.cache_sync_timeout)
        await pods.start()
        self._nodes = await self._watch_nodes()
        index = QueueIndex(
            view,
            notebook_namespace=self.notebook_namespace,
            namespaces=self.job_namespaces,
            pods=lambda: pods.resources,
            # teams and offerings in the sidebar by the catalog's names, never by slug
            names=display_names(self.load_catalog()),
        )
        source = PolicyFile(self.policy) if self.policy else None
        loop = self._reclaim_loop(view, pods, source)
        context = self._context(view, index, loop, source)
        self._start_reclaim(loop, source)
        url = urlparse(self.url)
        # Bodies over the limit are refused from their Content-Length, before they are read,
        # and every body only once its caller passed (web/base.py BodyAfterCaller).
        server = service_server(
            make_app(context, history=self._history()),
            max_body_size=self.max_request_bytes,
            header_timeout=self.request_header_timeout,
            body_timeout=self.request_body_timeout,
            gate=context.connections,
        )
        server.listen(url.port or 80, url.hostname or "127.0.0.1")
        log.info(
            "gpuaas service listening on %s%s notebook_namespace=%s job_namespaces=%s",
            self.url.rstrip("/"),
            self.prefix,
            self.notebook_namespace,
            ",".join(self.job_namespaces) or "none",
        )
        stop_asked = _stop_on_signals()
        await _tick_until(stop_asked, index.tick, max(0.5, self.poll_interval / 2))
        log.info("gpuaas service stopping: finishing the reclaim cycle under way")
        server.stop()
        if self._policy_task is not None:
            self._policy_task.cancel()
        if loop.task is not None:
            await loop.stop(self.shutdown_grace)
        log.info("gpuaas service stopped")

    def _kueue_view(self) -> WatchedKueueView:
        from kubespawner.clients import shared_client

        from jupyter_gpuaas.hub.kueue_watch import WatchedKueueView

        return WatchedKueueView(
            namespaces=[self.notebook_namespace, *self.job_namespaces],
            custom_objects_api=lambda: shared_client("CustomObjectsApi"),
            api_version=self.kueue_api_version,
            visibility_version=self.kueue_visibility_api_version,
            poll_interval=self.poll_interval,
            request_timeout=self.kubernetes_request_timeout,
            log=log,
        )

    def _context(
        self,
        view: WatchedKueueView,
        index: QueueIndex,
        loop: ReclaimLoop,
        source: PolicyFile | None,
    ) -> ServiceContext:
        """The service's parts and web settings, built once, for every handler."""
        from jupyterhub.services.auth import HubAuth, HubOAuth

        from gpuaas_service.web.connections import ConnectionGate
        from gpuaas_service.web.context import ServiceContext
        from gpuaas_service.web.limits import RateLimit

        console = self._console(loop, view, source)
        refused = loop.metrics.requests_refused
        return ServiceContext(
            prefix=self.prefix,
            hub_auth=HubAuth(parent=self),
            servers=self._server_tokens(),
            console_auth=HubOAuth(parent=self),
            operator_token=self.operator_token,
            limits={
                "activity": RateLimit(
                    self.activity_reports_per_minute / 60, self.activity_report_burst
                ),
                "queue": RateLimit(self.queue_requests_per_second, self.queue_request_burst),
                "history": RateLimit(
                    self.history_requests_per_minute / 60, self.history_request_burst
                ),
            },
            on_refused=lambda name: refused.labels(name).inc(),
            connections=ConnectionGate(
                self.max_unidentified_connections,
                on_refused=lambda: refused.labels("connections").inc(),
            ),
            health_policy=lambda: _policy_health(source, loop),
            index=index,
            loop=loop,
            console=console,
            jobs=self._job_service(view, index),
            resize=self._resizer(view, loop),
            job_max_body=self.job_max_notebook_bytes + 200_000,
            checks=self._doctor(),
        )

    def doctor_settings(self, **overrides: Any) -> DoctorSettings:
        """The doctor's settings from this service's own configuration (its file and
        environment); ``overrides`` that are not ``None`` replace them (the command line's)."""
        from gpuaas_service.doctor import DoctorSettings, service_queries

        values: dict[str, Any] = {
            "hub_api_url": self.hub_api_url,
            "hub_token": os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            "prometheus_url": self.prometheus_url,
            "prometheus_queries": service_queries(
                self.prometheus_query, self.hami_last_kernel_query
            ),
            "prometheus_timeout": self.prometheus_timeout,
            "catalog_file": self.catalog_file,
            "policy_file": self.policy,
            "notebook_namespace": self.notebook_namespace,
            "job_namespaces": tuple(self.job_namespaces),
            "kueue_api_version": self.kueue_api_version,
            "visibility_api_version": self.kueue_visibility_api_version,
            "timeout": self.kubernetes_request_timeout,
            "job_topology_level": self.job_topology_level,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return DoctorSettings(**values)

    def _doctor(self) -> Callable[..., Awaitable[Mapping[str, Any]]]:
        """The doctor's checks for the console, as the service's own account and token
        (what it may not read is said as unknown: docs/deploy.md)."""
        from gpuaas_service.doctor import run_doctor
        from gpuaas_service.doctor.cached import CachedChecks

        settings = self.doctor_settings()
        return CachedChecks(lambda: run_doctor(settings), ttl=60.0)

    def _resizer(self, view: WatchedKueueView, loop: ReclaimLoop) -> Resizer:
        """The ways up and down (``api/resize``): its own Hub API connections; scopes
        delete:servers and servers (start and stop). The way down reads each session's peak
        from the loop's usage recorder."""
        from gpuaas_service.clients.hub import HubClient
        from gpuaas_service.reclaim.usage import UsageRecorder, move_recorder
        from gpuaas_service.resize.plan import WayDownRule
        from gpuaas_service.resize.resizer import Resizer

        hub = HubClient(
            self.hub_api_url,
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            timeout=self.hub_request_timeout,
            max_clients=2,
        )
        catalog = self.load_catalog()
        recorder = next((u for u in loop.listeners if isinstance(u, UsageRecorder)), None)

        def session_peak(user: str, server: str) -> tuple[int, float] | None:
            if recorder is None:
                return None
            return recorder.session_peak(user, server, datetime.now(timezone.utc))

        return Resizer(
            hub,
            lambda: catalog,
            queue_state=view.queue_state,
            namespace=self.notebook_namespace,
            session_peak=session_peak if self.way_down_below > 0 else None,
            way_down_rule=WayDownRule(below=self.way_down_below, after_seconds=self.way_down_after),
            policies=lambda: loop.state.policies,
            peak_at_move=move_recorder(recorder, loop.store) if recorder is not None else None,
        )

    def _server_tokens(self) -> ServerTokens:
        """Which running server a token was issued to (its own Hub API connections: a busy
        cycle never delays a server's request); scopes read:servers and read:tokens."""
        from gpuaas_service.clients.hub import HubClient
        from gpuaas_service.web.servers import ServerTokens

        hub = HubClient(
            self.hub_api_url,
            os.environ.get("JUPYTERHUB_API_TOKEN", ""),
            timeout=self.hub_request_timeout,
            max_clients=4,
        )
        return ServerTokens(hub)

    def _reclaim_loop(
        self, view: WatchedKueueView, pods: PodWatch, source: PolicyFile | None
    ) -> ReclaimLoop:
        """The culler's loop, with the policy file's policies (none: reclaim is off)."""
        from gpuaas_service.clients.hub import HubClient
        from gpuaas_service.clients.kubernetes import KubeClient
        from gpuaas_service.reclaim.activity_store import ActivityStore
        from gpuaas_service.reclaim.loop import Feeds, ReclaimLoop, team_display_names
        from gpuaas_service.reclaim.policy import PolicySet

        if source is not None:
            source.check()
            if source.error:
                log.error("policy not loaded, reclaim is off until it is fixed: %s", source.error)
        utilization, last_kernel = self._prometheus_readers()
        kube = KubeClient(
            timeout=self.kubernetes_request_timeout, kueue_version=self.kueue_api_version
        )
        job_namespaces = [ns for ns in self.job_namespaces if ns != self.notebook_namespace]
        catalog = self.load_catalog()

        # none listed yet: the console calls nothing free before (where there are some)
        self._job_pods_seen = None if job_namespaces else []

        async def job_pods() -> list[dict[str, Any]]:
            listed = await kube.list_job_pods(job_namespaces)
            self._job_pods_seen = listed  # the console places training on its nodes
            return listed

        loop = ReclaimLoop(
            hub=HubClient(
                self.hub_api_url,
                os.environ.get("JUPYTERHUB_API_TOKEN", ""),
                timeout=self.hub_request_timeout,
                page_size=self.hub_page_size,
                max_clients=self.hub_concurrency + 2,
            ),
            kube=kube,
            view=view,
            policies=source.policies if source is not None else PolicySet(policies=()),
            feeds=Feeds(
                pods=_listed(pods),
                utilization=utilization,
                last_kernel=last_kernel,
                job_pods=job_pods if job_namespaces else None,
            ),
            settings=replace(
                self.loop_settings(),
                # another team's queued work is named in warnings by the catalog's display name
                team_names=team_display_names(catalog.tenants.values()) if catalog else {},
            ),
            store=ActivityStore(
                max_servers=self.activity_max_servers,
                max_per_user=self.activity_max_servers_per_user,
                opened_at=datetime.now(timezone.utc),
            ),
        )
        loop.listeners.append(self._usage_recorder(loop))
        loop.listeners.append(self._queue_outlook(loop, pods))
        return loop

    async def _watch_nodes(self) -> PodWatch | None:
        """The Node objects, for the console's free GPUs; ``None`` (said once) where the
        service may not watch them."""
        from gpuaas_service.clients.kubernetes import node_reflector

        nodes = node_reflector(resync_seconds=self.pod_watch_seconds)
        try:
            await nodes.start()
        except Exception as e:  # noqa: BLE001 - a view's detail, never a reason not to serve
            log.warning(
                "console: cannot list the nodes (%s): the per-GPU view shows no free GPUs"
                " (grant get, list, watch on nodes: culler/deploy/gpuaas-service.yaml)",
                e,
            )
            return None
        return nodes

    def _queue_outlook(self, loop: ReclaimLoop, pods: PodWatch) -> OutlookWriter:
        """What each waiting server waits for, on its pod, for the spawn progress page."""
        from gpuaas_service.queue.outlook import OutlookWriter

        return OutlookWriter(
            loop.kube,
            loop.view,
            _listed(pods),
            notebook_namespace=self.notebook_namespace,
            job_namespaces=self.job_namespaces,
        )

    def _usage_recorder(self, loop: ReclaimLoop) -> UsageRecorder:
        """Each user's session GPU-memory peaks, for the spawn form's size advice."""
        from gpuaas_service.clients.persisted import PersistedState
        from gpuaas_service.reclaim.usage import UsageRecorder
        from jupyter_gpuaas.core.sizing import HISTORY_CONFIGMAP

        state = PersistedState(
            loop.kube, self.notebook_namespace, HISTORY_CONFIGMAP, owner="culler", what="usage"
        )
        return UsageRecorder(state)

    def _history(self) -> History:
        """The console's history: prometheus_url with the history's bounds, and the time a
        Prometheus gets to answer (prometheus_timeout, at most 5 s: a page waits for it)."""
        from gpuaas_service.clients.prometheus import PrometheusClient
        from gpuaas_service.web.console_history import History

        if not self.prometheus_url:
            return History(None)
        timeout = min(self.prometheus_timeout, 5.0)
        return History(
            PrometheusClient(self.prometheus_url, timeout=timeout),
            max_points=self.history_max_points,
            max_series=self.history_max_series,
            timeout=timeout,
        )

    def _prometheus_readers(self) -> tuple[Readings | None, Readings | None]:
        """Per-pod GPU utilisation and HAMi's seconds since the last kernel, where configured."""
        from gpuaas_service.clients.prometheus import PrometheusClient

        if not self.prometheus_url:
            return None, None
        prometheus = PrometheusClient(
            self.prometheus_url, self.prometheus_query, timeout=self.prometheus_timeout
        )
        query = self.hami_last_kernel_query
        last_kernel = functools.partial(prometheus.last_kernel, query) if query else None
        return prometheus.pod_utilization, last_kernel

    def _start_reclaim(self, loop: ReclaimLoop, source: PolicyFile | None) -> None:
        """With a policy file, start the loop and the file's reload."""
        loop.metrics.policy_valid.set(1 if source is None or not source.error else 0)
        if source is not None:
            loop.task = asyncio.ensure_future(loop.run())
            self._policy_task = asyncio.ensure_future(self._watch_policy(source, loop))

    def load_catalog(self) -> Catalog | None:
        """The catalog for notebook Jobs (``None`` without ``catalog_file``); a bad file is a
        start-up error listing every problem."""
        if not self.catalog_file:
            return None
        from jupyter_gpuaas.core.catalog import CatalogError, build_catalog, load_catalog_file

        try:
            return build_catalog([load_catalog_file(self.catalog_file)])
        except CatalogError as e:
            raise TraitError(str(e)) from None

    def _job_service(self, view: WatchedKueueView, index: QueueIndex) -> JobService:
        """The notebook-Job service (docs/jobs.md)."""
        from gpuaas_service.clients.kubernetes import KubeClient
        from gpuaas_service.jobs.kube import JobsKubeClient
        from gpuaas_service.jobs.service import JobService

        catalog = self.load_catalog()
        if catalog is None:
            log.warning("catalog_file not set: notebook jobs are off (docs/jobs.md)")

        def positions(user: str, groups: Sequence[str]) -> dict[tuple[str, str], Mapping[str, Any]]:
            items = index.answer(user, groups).get("items") or []
            return {(i["namespace"], i["name"]): i for i in items if i.get("kind") == "job"}

        return JobService(
            JobsKubeClient(timeout=self.kubernetes_request_timeout),
            lambda: catalog,
            service_url=self.job_service_url,
            queue_state=view.queue_state,
            positions=positions,
            workloads=view.workloads,
            max_notebook_bytes=self.job_max_notebook_bytes,
            topology_level=self.job_topology_level,
            flavor_topologies=KubeClient(
                timeout=self.kubernetes_request_timeout, kueue_version=self.kueue_api_version
            ).flavor_topologies,
        )

    def _console(
        self, loop: ReclaimLoop, view: WatchedKueueView, source: PolicyFile | None
    ) -> ConsoleState:
        """The console's state (docs/console.md), a listener of the loop."""
        from datetime import timedelta

        from gpuaas_service.clients.persisted import PersistedState
        from gpuaas_service.console.answers import ConsoleState
        from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
        from gpuaas_service.console.record import ConsoleRecord
        from gpuaas_service.reclaim.usage import UsageRecorder
        from jupyter_gpuaas.core.sizing import PeakHistory

        journal_state = PersistedState(
            loop.kube, self.notebook_namespace, JOURNAL_CONFIGMAP, owner="console", what="journal"
        )
        catalog = self.load_catalog()  # the sizing view advises from it (None: no advice)
        console = ConsoleState(
            loop,
            view,
            record=ConsoleRecord(journal_state),
            notebook_namespace=self.notebook_namespace,
            job_namespaces=self.job_namespaces,
            regret_window=timedelta(seconds=self.console_regret_window),
            policy_file=lambda: {
                "file": source.path if source is not None else None,
                "error": source.error if source is not None else "",
            },
            ttl=self.console_cache_seconds,
            usage_history=lambda: next(
                (u.history for u in loop.listeners if isinstance(u, UsageRecorder)),
                PeakHistory({}),
            ),
            catalog=lambda: catalog,
            nodes=_listed(self._nodes) if self._nodes is not None else None,
            job_pods=lambda: self._job_pods_seen,
        )
        loop.listeners.append(console)
        if not os.environ.get("JUPYTERHUB_CLIENT_ID"):
            log.warning(
                "console: no $JUPYTERHUB_CLIENT_ID (the hub sets it for a service with a url):"
                " its page cannot log browsers in; tokens with the scope still work"
            )
            os.environ.setdefault("JUPYTERHUB_CLIENT_ID", "service-gpuaas")
        return console

    async def _watch_policy(
        self,
        source: PolicyFile,
        loop: ReclaimLoop,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        """Reload the policy file when it changes; keep the last good one when it is bad."""
        while True:
            await sleep(self.policy_check_interval)
            before = (source.loaded, source.invalid)
            changed = source.check()
            if (source.loaded, source.invalid) == before:
                continue
            if source.error:
                loop.metrics.policy_reloads.labels("invalid").inc()
                log.error(
                    "policy file %s is invalid; %s: %s",
                    self.policy,
                    "keeping the last good policy"
                    if loop.state.policies.policies
                    else "reclaim is off",
                    source.error,
                )
            else:
                loop.metrics.policy_reloads.labels("loaded").inc()
                if changed:
                    loop.set_policies(source.policies)
                log.info(
                    "policy file %s loaded (%d policies)",
                    self.policy,
                    len(source.policies.policies),
                )
            loop.metrics.policy_valid.set(0 if source.error else 1)


def _policy_health(source: PolicyFile | None, loop: ReclaimLoop) -> ServiceHealthPolicy:
    """``api/health``'s ``policy``: the file, whether it is in force, why not."""
    policies = loop.state.policies
    return {
        "file": source.path if source is not None else None,
        "valid": source is None or not source.error,
        "error": source.error if source is not None else "",
        "policies_in_force": len(policies.policies),
        "reclaim": "on" if policies.policies else "off",
    }


def _listed(reflector: PodWatch) -> Callable[[], Iterable[Mapping[str, Any]] | None]:
    """The reflector's pods once it has listed them; ``None`` before."""

    def pods() -> Iterable[Mapping[str, Any]] | None:
        future = reflector.first_load_future
        done = future.done() and not future.exception()
        return reflector.resources.values() if done else None

    return pods


def _stop_on_signals() -> asyncio.Event:
    """An Event set by SIGTERM (Kubernetes, a deploy) or SIGINT (JupyterHub stopping its
    managed service, Ctrl-C), so that the service stops between two steps of its work."""
    asked = asyncio.Event()
    running = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(signum, asked.set)
    return asked


async def _tick_until(stop: asyncio.Event, tick: Callable[[], None], every: float) -> None:
    """The service's main loop: ``tick`` now and every ``every`` seconds until ``stop`` is set."""
    while not stop.is_set():
        tick()
        # asyncio's TimeoutError: on Python 3.10 it is not the builtin one
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), every)


def main(argv: list[str] | None = None) -> None:
    """The ``gpuaas-service`` console script."""
    try:
        GPUaaSService.launch_instance(argv)
    except TraitError as e:  # a bad option, file or environment variable: say which, no trace
        raise SystemExit(f"gpuaas-service: error: {e}") from None


if __name__ == "__main__":
    main()

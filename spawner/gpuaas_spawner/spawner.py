"""``GPUaaSSpawner``: KubeSpawner with a quota-aware GPU form and Kueue-queued servers.

The decisions live in pure modules (catalog, headroom, validate, pod, progress, form); this class
wires them into JupyterHub 5.5 or 6.x and KubeSpawner 7 (what differs: ``hubcompat``):

* ``options_form`` renders the form from the catalog and the watch caches (no API call);
* ``options_from_form`` (form posts) and ``_run_apply_user_options`` (every spawn, REST included:
  JupyterHub calls it in ``User.spawn`` before ``start``) run the one validation, so a forged
  request fails before anything is created;
* the pod gets the team's LocalQueue, the interactive priority class, the offering's resources,
  node selector, tolerations and ``/dev/shm``; the hub token goes into a per-server Secret;
* ``start`` enforces the queue timeout itself (a user-facing ``SpawnException``, status 400,
  not counted towards ``consecutive_failure_limit``, on 5.5 too) and the ordinary start timeout
  only from admission; ``progress`` names the phase ("Queued in team-a: position 3", ...);
* ``stop`` waits ``stop_timeout``, not the long spawn timeout, and copes with Kueue's finalizer;
* why a server ended without the user stopping it (queue timeout, preemption, a hub restart while
  it was queued) is kept in the spawner's state and shown above the form on the next visit.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, ClassVar
from urllib.parse import urlparse

from jupyterhub.utils import exponential_backoff
from kubespawner import KubeSpawner
from tornado import web
from traitlets import Any as AnyTrait
from traitlets import Bool, Dict, Float, List, Unicode, default
from traitlets import Callable as CallableTrait
from traitlets.config import Config

from gpuaas_spawner.failures import classify_start_error, cluster_not_answering
from gpuaas_spawner.form import FormModel, build_form_model, render_form
from gpuaas_spawner.hubcompat import SpawnException, not_counted
from gpuaas_spawner.messages import page_words, say
from gpuaas_spawner.pod import (
    PodSettings,
    externalize_secrets,
    finalizer_patch,
    find_secrets,
    owner_reference,
    pod_settings,
    shape_pod,
    to_api_json,
    token_secret_manifest,
)
from gpuaas_spawner.progress import (
    Phase,
    SpawnStatus,
    check_deadline,
    exit_details,
    home_volume_failure,
    is_gated,
    reclaim_notice,
    spawn_status,
)
from gpuaas_spawner.validate import (
    Choice,
    OptionsError,
    UserContext,
    options_from_form_data,
    stored_choice,
    user_usage,
    validate_options,
)
from jupyter_gpuaas.core.catalog import (
    Catalog,
    CatalogError,
    CatalogSource,
    build_catalog,
    load_catalog_file,
)
from jupyter_gpuaas.core.headroom import Fit, Headroom, compute_headroom
from jupyter_gpuaas.core.labels import HUB_TOKEN_SECRET_LABEL, HUB_TOKEN_SECRET_SUFFIX, TEAM_LABEL
from jupyter_gpuaas.core.sizing import (
    DEFAULT_HEADROOM,
    HISTORY_CONFIGMAP,
    PeakHistory,
    history_from_configmap,
)
from jupyter_gpuaas.hub.kueue_watch import KueueView, WatchedKueueView

__all__ = ["GPUaaSSpawner", "check_catalog"]

_TOKEN_KEY = "token"
_NOTICE_STATE = "gpuaas_notice"  # key in the state JupyterHub keeps in its database
_YIELDS_STATE = "gpuaas_yields_after_reclaim"  # ditto: see GPUaaSSpawner._gpuaas_yields
_STARTING: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "gpuaas_starting", default=None
)
_WEEK = 7 * 24 * 3600
_CLAIM_CHECK_INTERVAL = 5.0
TOKEN_SECRET_RETRY_SECONDS = (5.0, 10.0, 20.0, 30.0, 60.0)
"""Waits between the background tries to delete a token Secret the stop could not (2 min)."""
"""Seconds between looks at a waiting server's home volume claim."""


def _user_error(message: str, *, reason: str, status_code: int = 400) -> web.HTTPError:
    """A clean user-facing failure: shown as is, not a hub error (a SpawnException on 5.5 and 6.x;
    :func:`~gpuaas_spawner.hubcompat.not_counted` keeps it out of 5.5's failure count)."""
    exc: web.HTTPError = SpawnException(message, reason=reason, status_code=status_code)
    exc.jupyterhub_message = message  # type: ignore[attr-defined]
    return exc


def _catalog_sources(values: dict[str, Any], catalog_file: str) -> list[CatalogSource]:
    sources = []
    if catalog_file:
        sources.append(load_catalog_file(catalog_file))
    traits = {k: v for k, v in values.items() if v}
    if traits:
        sources.append(CatalogSource("GPUaaSSpawner.", traits))
    return sources


def check_catalog(config: Config) -> Catalog:
    """Build the catalog from a hub config; raise :class:`CatalogError` with every problem.

    Call it from ``jupyterhub_config.py`` (z2jh: ``hub.extraConfig``) so a bad catalog stops
    the hub at start instead of at the first spawn::

        from gpuaas_spawner import check_catalog
        check_catalog(c)
    """
    section = config.GPUaaSSpawner
    values = {
        k: list(section[k]) if k in section else []
        for k in ("offerings", "tenants", "images", "sizes", "resource_transformations")
    }
    catalog_file = str(section["catalog_file"]) if "catalog_file" in section else ""
    namespace = str(config.KubeSpawner.namespace) if "namespace" in config.KubeSpawner else ""
    return build_catalog(_catalog_sources(values, catalog_file), default_namespace=namespace)


def _from_api_json(data: Any, klass: str) -> Any:
    """API JSON → kubernetes_asyncio model (what ``modify_pod_hook`` and KubeSpawner expect)."""
    from kubernetes_asyncio.client import models

    if data is None:
        return None
    if klass.startswith("list["):
        return [_from_api_json(v, klass[5:-1]) for v in data]
    if klass.startswith("dict("):
        inner = klass[klass.index(",") + 1 : -1].strip()
        return {k: _from_api_json(v, inner) for k, v in data.items()}
    model = getattr(models, klass, None)
    if model is None:
        return data
    kwargs = {
        attr: _from_api_json(data[model.attribute_map[attr]], kind)
        for attr, kind in model.openapi_types.items()
        if model.attribute_map[attr] in data
    }
    return model(**kwargs)


def _kubespawner_custom_objects_api() -> Any:
    """The CustomObjectsApi on KubeSpawner's shared client (its configuration, its pool)."""
    from kubespawner.clients import load_config, shared_client

    load_config()
    return shared_client("CustomObjectsApi")


class GPUaaSSpawner(KubeSpawner):  # type: ignore[misc]  # KubeSpawner is untyped
    """KubeSpawner for GPU workbenches queued by Kueue, with a team-quota-aware spawn form."""

    # ------------------------------------------------------------------ configuration

    offerings = List(
        Dict(),
        config=True,
        help="""
        GPU offerings users may pick (whole GPU, MIG profile, shared GPU, memory-capped
        fraction, CPU only).

        Each is a dict: ``slug``, ``display_name``, ``description``, ``kind`` (gpu, mig,
        shared, fraction, cpu), ``resources`` (extended resources for one unit, e.g.
        ``{"nvidia.com/mig-1g.10gb": 1}``), ``flavor`` (the Kueue ResourceFlavor whose quota it
        uses), ``node_selector`` and ``tolerations`` (the flavor's nodes), ``gpu_model``,
        ``gpu_memory`` (e.g. ``"10Gi"``), ``gpu_equivalents`` (size of one unit in whole GPUs,
        e.g. ``"1/7"``; default 1 for kind gpu), ``isolation`` (hardware, memory-limited, none),
        ``shm_size`` (memory-backed /dev/shm, default ``"1Gi"`` for GPU kinds), ``min_count``,
        ``max_count``, ``default_count`` (units per server, default 1), ``images``/``sizes``
        (slugs allowed with it; default all), ``cpu_guarantee``/``cpu_limit`` (cores),
        ``mem_guarantee``/``mem_limit`` (e.g. ``"8Gi"``); for kind ``fraction`` (HAMi, see
        docs/fractions.md) ``memory_cap`` (hard GPU memory limit, whole MiB, e.g.
        ``"5632Mi"``, at most ``gpu_memory``) and ``cores_percent`` (1-100) instead of
        ``resources``; for any kind ``scheduler_name`` (e.g. ``"hami-scheduler"``) and
        ``pod_annotations``. Checked at hub start with the path
        of every error. Default: none (use this or ``catalog_file``). Example::

            c.GPUaaSSpawner.offerings = [{"slug": "h100", "kind": "gpu",
                "resources": {"nvidia.com/gpu": 1}, "flavor": "h100",
                "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}]
        """,
    )
    tenants = List(
        Dict(),
        config=True,
        help="""
        Teams: which JupyterHub groups charge which Kueue LocalQueue, with which offerings.

        Each is a dict: ``name``, ``display_name``, ``groups`` (JupyterHub group names),
        ``local_queue`` (in ``namespace``, default ``KubeSpawner.namespace``), ``cluster_queue``
        (optional; read from the LocalQueue otherwise), ``offerings`` (slugs),
        ``default_offering``, per-user caps ``max_gpu_servers_per_user`` (servers) and
        ``max_gpus_per_user`` (GPU-equivalents), ``max_queued`` (servers of the team waiting in
        the queue at once) and ``priority_class`` (WorkloadPriorityClass, default
        ``priority_class``). A user in several teams picks one. Default: none. Example::

            c.GPUaaSSpawner.tenants = [{"name": "team-a", "groups": ["team-a"],
                "local_queue": "team-a", "offerings": ["h100", "cpu"],
                "max_gpu_servers_per_user": 1}]
        """,
    )
    images = List(
        Dict(),
        config=True,
        help="""
        Images users may pick: dicts with ``slug``, ``display_name``, ``image``, ``description``.
        Default: none (``KubeSpawner.image`` is used and no image field is shown). Example::

            c.GPUaaSSpawner.images = [{"slug": "pytorch", "display_name": "PyTorch",
                "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02"}]
        """,
    )
    sizes = List(
        Dict(),
        config=True,
        help="""
        CPU and memory choices: dicts with ``slug``, ``display_name``, ``description``,
        ``cpu_guarantee``/``cpu_limit`` (cores), ``mem_guarantee``/``mem_limit`` (e.g. "8Gi").
        Default: none (the offering's or KubeSpawner's CPU/memory settings apply). Example::

            c.GPUaaSSpawner.sizes = [{"slug": "small", "cpu_limit": 2, "mem_limit": "8Gi"}]
        """,
    )
    resource_transformations = List(
        Dict(),
        config=True,
        help="""
        Kueue's resource transformations, written exactly as in Kueue's Configuration
        (``resources.transformations``: ``input``, ``strategy``, ``multiplyBy``, ``outputs``).
        The form's headroom applies them to each offering's requests, so it counts what Kueue
        counts; keep them equal to Kueue's own. Required for fraction offerings (HAMi's
        per-vGPU memory and cores, multiplied by ``nvidia.com/gpu``). Default: none. Example::

            c.GPUaaSSpawner.resource_transformations = [{"input": "nvidia.com/gpumem",
                "strategy": "Replace", "multiplyBy": "nvidia.com/gpu",
                "outputs": {"nvidia.com/total-gpumem": "1"}}]
        """,
    )
    catalog_file = Unicode(
        "",
        config=True,
        help="""
        Path of a YAML file with ``offerings``, ``tenants``, ``images``, ``sizes`` and
        ``resource_transformations`` (same
        fields as the traitlets; both are combined, a slug defined twice is an error). Read at
        hub start and again when it changes. Default: "" (none). Example::

            c.GPUaaSSpawner.catalog_file = "/etc/jupyterhub/gpuaas-catalog.yaml"
        """,
    )
    default_team = Unicode(
        "",
        config=True,
        help="""
        Team preselected for users in several teams, and used for REST spawns that name no team.
        Default: "" (such users must choose). Example::

            c.GPUaaSSpawner.default_team = "team-a"
        """,
    )
    priority_class = Unicode(
        "interactive",
        config=True,
        help="""
        Kueue WorkloadPriorityClass of notebook pods (label ``kueue.x-k8s.io/priority-class``),
        unless a tenant sets its own. Default: "interactive". Example::

            c.GPUaaSSpawner.priority_class = "interactive"
        """,
    )
    after_reclaim_priority_class = Unicode(
        "interactive-after-reclaim",
        config=True,
        help="""
        Kueue WorkloadPriorityClass of a server's first start after the gpuaas service
        reclaimed it, until that start is admitted. It must be lower than the priority of the
        Jobs reclaimed GPUs are handed to, and the notebooks' ClusterQueues must reclaim only
        from lower priorities (``reclaimWithinCohort: LowerPriority``): then the restart queues
        behind the Job its GPU went to instead of preempting it, while an ordinary start still
        takes back what training borrowed. "" starts it with its usual class. Default:
        "interactive-after-reclaim" (value 0 in devcluster/manifests). Example::

            c.GPUaaSSpawner.after_reclaim_priority_class = "notebook-after-reclaim"
        """,
    )
    queue_timeout = Float(
        3600.0,
        config=True,
        help="""
        Seconds a server may wait in its team's Kueue queue before the spawn is given up with a
        clear message to the user (not counted as a hub error). 0 waits without limit (still
        bounded by one week). The ordinary ``start_timeout`` applies only after Kueue admits the
        pod. Queued spawns hold ``JupyterHub.concurrent_spawn_limit`` slots while they wait.
        Default: 3600 (1 hour). Example::

            c.GPUaaSSpawner.queue_timeout = 1800
        """,
    )
    stop_timeout = Float(
        60.0,
        config=True,
        help="""
        Seconds ``stop`` waits for the pod to go away (instead of KubeSpawner's
        ``start_timeout``, which is long while spawns may queue). After that, a pod held only by
        Kueue's finalizer is released. Default: 60. Example::

            c.GPUaaSSpawner.stop_timeout = 60
        """,
    )
    queue_poll_interval = Float(
        2.0,
        config=True,
        help="""
        Seconds between checks of a waiting spawn (progress messages, timeouts) and between
        polls of Kueue's visibility API for queue positions. Default: 2. Example::

            c.GPUaaSSpawner.queue_poll_interval = 2
        """,
    )
    kueue_api_version = Unicode(
        "v1beta2",
        config=True,
        help="""
        Version of the ``kueue.x-k8s.io`` and ``visibility.kueue.x-k8s.io`` APIs to read.
        Default: "v1beta2" (Kueue 0.15+). Example::

            c.GPUaaSSpawner.kueue_api_version = "v1beta1"
        """,
    )

    size_advice = Bool(
        True,
        config=True,
        help="""
        Preselect, for each user, the smallest offering that holds the GPU-memory peak of their
        recent sessions (with ``size_advice_headroom``) and starts now — where the smallest
        that holds it would queue and a larger one starts now, that one, saying so — and say
        why in one line on the form.
        The peaks are those the gpuaas service records from the servers' activity reports
        (ConfigMap ``gpuaas-usage-history`` in the servers' namespace; the hub needs ``get``
        on it). Users with no recorded session (and everyone, when this is off) get their
        team's ``default_offering``, or where it would queue the smallest offering at least as
        large that starts now; anyone may pick another. Advice only: a user's own server
        reports the peaks, so they are never a limit. Default: True. Example::

            c.GPUaaSSpawner.size_advice = False
        """,
    )
    size_advice_headroom = Float(
        DEFAULT_HEADROOM,
        min=1.0,
        config=True,
        help="""
        Room above a user's largest recent GPU-memory peak that the advised offering must hold,
        as a factor (1.25: 25% more than the peak). Default: 1.25. Example::

            c.GPUaaSSpawner.size_advice_headroom = 1.5
        """,
    )
    usage_history_max_age = Float(
        30.0,
        config=True,
        help="""
        Seconds the hub reuses the usage history it read for the size advice before reading it
        again (one small read per period, not one per form). Default: 30. Example::

            c.GPUaaSSpawner.usage_history_max_age = 60
        """,
    )

    # Inherited traitlet, annotated for the type checker only (no value: the trait stays).
    start_timeout: int

    # Collaborators (not configuration): the Kueue reads and the clock.
    kueue_view = AnyTrait(None, allow_none=True, help="A KueueView; default: the shared watches.")
    clock = CallableTrait(help="Returns the current time (aware UTC datetime).")

    @default("clock")
    def _default_clock(self) -> Callable[[], datetime]:
        return lambda: datetime.now(timezone.utc)

    @default("options_form")
    def _gpuaas_options_form_default(self) -> Callable[[Any], Any]:
        return self._render_gpuaas_form

    @default("options_from_form")
    def _gpuaas_options_from_form_default(self) -> Callable[[dict[str, list[Any]]], dict[str, Any]]:
        return self._gpuaas_options_from_form

    # ------------------------------------------------------------------ state

    _catalogs: ClassVar[dict[str, Catalog | CatalogError]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.profile_list:
            self.log.warning("GPUaaSSpawner ignores profile_list; describe choices as offerings")
        self._gpuaas_default_namespace: str = self.namespace
        self._gpuaas_base_start_timeout: int = self.start_timeout
        self._gpuaas_long_timeout: int | None = None
        self._gpuaas_choice: Choice | None = None
        self._gpuaas_settings: PodSettings | None = None
        self._gpuaas_submitted_at: datetime | None = None
        self._gpuaas_admitted_at: datetime | None = None
        self._gpuaas_stale_uid: str | None = None
        self._gpuaas_pod_uid: str = ""
        self._gpuaas_earlier_uid: str = ""
        self._gpuaas_secret_owned = False
        self._gpuaas_starts = 0  # a background delete of the token Secret stops at the next
        self._gpuaas_secret_retry: asyncio.Future[None] | None = None
        self._gpuaas_notice = ""
        self._gpuaas_yields: bool = False
        """The service reclaimed this server and no start of it has been admitted since: the next
        start yields to the work its GPU was handed to (``after_reclaim_priority_class``)."""
        self._gpuaas_last_status: SpawnStatus | None = None
        self._gpuaas_claim_checked_at = float("-inf")
        self._gpuaas_home_recreated = False
        """This start makes the home claim again: the one the saved state named was gone."""

    # ------------------------------------------------------------------ hub state

    def get_state(self) -> dict[str, Any]:
        """KubeSpawner's state, plus the notice for the user's next visit.

        JupyterHub clears and then saves the state when a server stops; the notice is not
        cleared with the rest, since it tells what happened to the server that just stopped. It
        lives until a new spawn of this server starts.
        """
        state: dict[str, Any] = super().get_state()
        if self._gpuaas_notice:
            state[_NOTICE_STATE] = self._gpuaas_notice
        if self._gpuaas_yields:
            state[_YIELDS_STATE] = True
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self._gpuaas_notice = str(state.get(_NOTICE_STATE) or "")
        self._gpuaas_yields = state.get(_YIELDS_STATE) is True

    def _save_state(self) -> None:
        """Write the state to the hub's database now, not only when ``start`` returns: a notice
        already shown is forgotten as soon as a new spawn begins, and a hub restart during the
        wait finds this spawn's pod name and namespace."""
        orm_spawner = self.orm_spawner
        if orm_spawner is None:  # not run by a hub (unit tests)
            return
        orm_spawner.state = self.get_state()
        self.db.commit()

    # ------------------------------------------------------------------ catalog and policy

    @property
    def catalog(self) -> Catalog:
        """The checked catalog (cached per configuration and file version)."""
        values = {
            k: getattr(self, k)
            for k in ("offerings", "tenants", "images", "sizes", "resource_transformations")
        }
        stamp = ""
        if self.catalog_file:
            with contextlib.suppress(OSError):
                stamp = str(os.stat(self.catalog_file).st_mtime_ns)
        key = json.dumps(
            [values, self.catalog_file, stamp, self._gpuaas_default_namespace],
            sort_keys=True,
            default=str,
        )
        cached = self._catalogs.get(key)
        if cached is None:
            try:
                cached = build_catalog(
                    _catalog_sources(values, self.catalog_file),
                    default_namespace=self._gpuaas_default_namespace,
                )
            except CatalogError as e:
                self.log.error("%s", e)
                cached = e
            self._catalogs[key] = cached
        if isinstance(cached, CatalogError):
            raise cached
        return cached

    def _view(self) -> KueueView:
        if self.kueue_view is None:
            namespaces = {self._gpuaas_default_namespace}
            with contextlib.suppress(CatalogError):
                namespaces |= {t.namespace for t in self.catalog.tenants.values() if t.namespace}
            self.kueue_view = WatchedKueueView.shared(
                namespaces=sorted(namespaces),
                custom_objects_api=_kubespawner_custom_objects_api,
                api_version=self.kueue_api_version,
                visibility_version=self.kueue_api_version,
                poll_interval=self.queue_poll_interval,
                request_timeout=float(self.k8s_api_request_timeout),
                log=self.log,
            )
        view: KueueView = self.kueue_view
        return view

    def _held_by_others(self, catalog: Catalog, user: UserContext) -> list[Choice | None]:
        """What each of the user's other active servers holds: the choice this hub process
        validated for it, else (started before a hub restart) its stored options, re-read."""
        held: list[Choice | None] = []
        for spawner in getattr(self.user, "spawners", {}).values():
            if spawner is self or not getattr(spawner, "active", False):
                continue
            if isinstance(spawner, GPUaaSSpawner):
                choice = spawner._gpuaas_choice or stored_choice(
                    spawner.user_options or {}, catalog, user, default_team=self.default_team
                )
                held.append(choice)
        return held

    def _user_context(self, catalog: Catalog) -> UserContext:
        groups = tuple(g.name for g in getattr(self.user, "groups", []) or [])
        user = UserContext(self.user.name, groups)
        return UserContext(user.name, groups, user_usage(self._held_by_others(catalog, user)))

    def _validate(self, options: object, *, log_queued: bool = False) -> Choice:
        """The one validation (form, query, REST, stored options); raises OptionsError.

        A start refused for its team's queue or quota is logged (with Kueue's explanation, for
        an admin: the user is told in plain words); with ``log_queued``, one that will queue
        too (once per start: the spawn's own validation, not the form post's)."""
        catalog = self.catalog
        user = self._user_context(catalog)
        state = self._view().queue_state()
        rooms: list[Headroom] = []

        def room(tenant: Any, offering: Any, count: int) -> Headroom:
            answer = compute_headroom(
                tenant,
                offering,
                state,
                namespace=self._gpuaas_default_namespace,
                count=count,
                usage=user.usage,
            )
            rooms.append(answer)
            return answer

        try:
            choice = validate_options(
                options, catalog, user, default_team=self.default_team, headroom=room
            )
        except OptionsError:
            self._log_quota(rooms, queued=False)
            raise
        if log_queued:
            self._log_quota(rooms, queued=True)
        return choice

    def _log_quota(self, rooms: list[Headroom], *, queued: bool) -> None:
        """One line per start refused (``queued=False``) or queued (``queued=True``) for a
        quota reason: who, which team, and where an admin should look (``admin_detail``)."""
        for r in rooms:
            if queued and r.fit is Fit.QUEUE:
                self.log.info(
                    "gpuaas: start queues user=%s team=%s offering=%s cluster_queue=%s detail=%s",
                    self.user.name,
                    r.tenant,
                    r.offering,
                    r.cluster_queue or "-",
                    r.admin_detail or r.message,
                )
            elif not queued and not r.fit.selectable:
                self.log.warning(
                    "gpuaas: start refused user=%s team=%s offering=%s fit=%s cluster_queue=%s"
                    " detail=%s",
                    self.user.name,
                    r.tenant,
                    r.offering,
                    r.fit.value,
                    r.cluster_queue or "-",
                    r.admin_detail or r.message,
                )

    # ------------------------------------------------------------------ form

    # The usage history by namespace: when it was read (monotonic seconds) and what it said.
    _usage_history: ClassVar[dict[str, tuple[float, PeakHistory]]] = {}

    async def _read_usage_history(self, namespace: str) -> PeakHistory:
        """The users' recent session peaks, read at most every ``usage_history_max_age``
        seconds; on any failure the last one read (or none: the form then uses the teams'
        defaults), with a log line that says what is wrong."""
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        now = asyncio.get_running_loop().time()
        read_at, history = self._usage_history.get(namespace, (-1e18, PeakHistory({})))
        if now - read_at < self.usage_history_max_age:
            return history
        self._usage_history[namespace] = (now, history)  # one read per period, even if it fails
        try:
            cm = await asyncio.wait_for(
                self.api.read_namespaced_config_map(HISTORY_CONFIGMAP, namespace),
                self.k8s_api_request_timeout,
            )
        except ApiException as e:
            if e.status != 404:  # 404: no session recorded yet
                self.log.warning(
                    "gpuaas: cannot read %s: %s %s", HISTORY_CONFIGMAP, e.status, e.reason
                )
            return history
        except (ClientError, OSError, asyncio.TimeoutError) as e:
            self.log.warning("gpuaas: cannot read %s: %s", HISTORY_CONFIGMAP, e or type(e).__name__)
            return history
        history, problems = history_from_configmap(getattr(cm, "data", None))
        for problem in problems[:5]:
            self.log.warning("gpuaas: %s: ignored: %s", HISTORY_CONFIGMAP, problem)
        self._usage_history[namespace] = (now, history)
        return history

    async def _session_peaks(self, user: UserContext) -> tuple[int, ...]:
        """The GPU-memory peaks of this user's recent sessions (see ``size_advice``)."""
        if not self.size_advice:
            return ()
        history = await self._read_usage_history(self._gpuaas_default_namespace)
        return history.of(user.name)

    async def _render_gpuaas_form(self, spawner: Any = None) -> str:
        try:
            catalog = self.catalog
        except CatalogError:
            return render_form(
                FormModel(
                    teams=(),
                    problem=say("form.misconfigured.page"),
                )
            )
        view = self._view()
        await view.start(timeout=2.0)  # first render after a hub start: else headroom "unknown"
        previous = dict(getattr(getattr(self, "orm_spawner", None), "user_options", None) or {})
        user = self._user_context(catalog)
        model = build_form_model(
            catalog,
            user,
            view.queue_state(),
            namespace=self._gpuaas_default_namespace,
            default_team=self.default_team,
            previous=previous,
            notice=self._gpuaas_notice,
            peaks_mib=await self._session_peaks(user),
            advice_headroom=self.size_advice_headroom,
        )
        return render_form(model)

    def _gpuaas_options_from_form(self, formdata: dict[str, list[Any]]) -> dict[str, Any]:
        """Form post → canonical user_options; OptionsError re-renders the form with its text."""
        options = options_from_form_data(formdata, self.catalog)
        return self._validate(options).as_user_options()

    async def _run_apply_user_options(self, user_options: dict[str, Any]) -> None:
        """Every spawn passes here (JupyterHub 5.3+ ``User.spawn``), REST API included."""
        self._gpuaas_choice = None  # a refused request keeps no choice of an earlier spawn
        try:
            choice = self._validate(user_options, log_queued=True)
        except OptionsError as e:
            refusal = _user_error(e.jupyterhub_message, reason="invalid_options")
            not_counted(self, refusal)
            raise refusal from e
        except CatalogError as e:
            raise _user_error(
                say("form.misconfigured"),
                reason="misconfigured",
                status_code=500,
            ) from e
        self._gpuaas_choice = choice
        self._store_user_options(choice.as_user_options())
        if self.apply_user_options:  # an admin's own hook still runs, after ours
            await super()._run_apply_user_options(self.user_options)

    def _store_user_options(self, options: dict[str, Any]) -> None:
        """Keep the canonical choice as this server's ``user_options`` (the hub stored the raw
        request): the user's other spawns count it, a hub restart re-reads it, and the REST
        API and the next form show what the server really got."""
        self.user_options = options
        orm_spawner = self.orm_spawner
        if orm_spawner is None:  # not run by a hub (unit tests)
            return
        orm_spawner.user_options = options
        self.db.commit()

    async def load_user_options(self) -> None:
        """Called inside KubeSpawner's ``_start``: our options were applied before ``start``."""
        if self._gpuaas_settings is None:
            self._prepare()

    def _prepare(self) -> PodSettings:
        if self._gpuaas_choice is None:  # e.g. an older JupyterHub without the hook
            try:
                self._gpuaas_choice = self._validate(self.user_options)
            except OptionsError as e:
                raise _user_error(e.jupyterhub_message, reason="invalid_options") from e
        settings = pod_settings(
            self._gpuaas_choice,
            priority_class=self.priority_class,
            default_namespace=self._gpuaas_default_namespace,
            yielding_priority_class=(
                self.after_reclaim_priority_class if self._gpuaas_yields else ""
            ),
        )
        self.namespace = settings.namespace
        self._gpuaas_settings = settings
        return settings

    # ------------------------------------------------------------------ pod

    @property
    def _token_secret_name(self) -> str:
        return f"{self.pod_name}{HUB_TOKEN_SECRET_SUFFIX}"

    async def get_pod_manifest(self) -> Any:
        pod = await super().get_pod_manifest()
        settings = self._gpuaas_settings or self._prepare()
        data = shape_pod(to_api_json(pod), settings)
        data = externalize_secrets(
            data, secret_name=self._token_secret_name, secrets={_TOKEN_KEY: self.api_token or ""}
        )
        return _from_api_json(data, "V1Pod")

    async def _make_create_pod_request(self, pod: Any, request_timeout: int) -> Any:
        """Create the token Secret, then the pod; ``False`` (KubeSpawner retries, with backoff,
        until ``k8s_api_request_retry_timeout``) while the API server does not answer.

        Both steps are safe to repeat: the Secret is replaced if it exists, and KubeSpawner
        handles a pod that an unanswered request did create (409). KubeSpawner itself retries
        only a timed-out pod request; a refused or dropped connection is a moment of the same
        kind and is retried the same way."""
        leaks = find_secrets(to_api_json(pod), [self.api_token or ""])
        if leaks:  # e.g. a modify_pod_hook put it back: never create such a pod
            raise _user_error(
                say("start.token_in_spec"),
                reason="secret_in_pod",
                status_code=500,
            )
        step = "token-secret"
        try:
            await self._ensure_token_secret(request_timeout)
            step = "pod"
            return await super()._make_create_pod_request(pod, request_timeout)
        except Exception as e:
            if not cluster_not_answering(e):
                raise
            self.log.warning(
                "gpuaas: event=cluster-not-answering step=%s pod=%s, retrying: %s",
                step,
                self.pod_name,
                e or type(e).__name__,
            )
            return False

    async def _ensure_token_secret(self, request_timeout: int) -> None:
        from kubernetes_asyncio.client.rest import ApiException

        body = token_secret_manifest(
            self._token_secret_name,
            self.namespace,
            {_TOKEN_KEY: self.api_token or ""},
            labels={
                **self._build_common_labels(self._expand_all(self.extra_labels)),
                HUB_TOKEN_SECRET_LABEL: "true",
            },
        )
        try:
            await asyncio.wait_for(
                self.api.create_namespaced_secret(self.namespace, body), request_timeout
            )
        except ApiException as e:
            if e.status != 409:
                raise
            await asyncio.wait_for(
                self.api.replace_namespaced_secret(self._token_secret_name, self.namespace, body),
                request_timeout,
            )
        self._gpuaas_secret_owned = False

    async def _own_token_secret(self, pod_uid: str) -> None:
        """Make the pod own its token Secret, so Kubernetes removes it with the pod."""
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        patch = {"metadata": {"ownerReferences": [owner_reference(self.pod_name, pod_uid)]}}
        try:
            await asyncio.wait_for(
                self.api.patch_namespaced_secret(self._token_secret_name, self.namespace, patch),
                self.k8s_api_request_timeout,
            )
            self._gpuaas_secret_owned = True
        except (ApiException, ClientError, OSError, asyncio.TimeoutError) as e:
            # retried at the next check
            self.log.warning("gpuaas: could not set owner of %s: %s", self._token_secret_name, e)

    async def _delete_token_secret(self) -> None:
        """Delete this server's token Secret. Where the API server does not answer in time,
        go on trying in the background: a create sent while it hung (a spawn that failed with
        "the cluster is not answering") may still land after the stop, and would leave the
        server's token in a Secret that no pod owns. A new start of this server ends the
        tries: the name is its Secret's then."""
        if await self._try_delete_token_secret():
            return
        start = self._gpuaas_starts

        async def later() -> None:
            for wait in TOKEN_SECRET_RETRY_SECONDS:
                await asyncio.sleep(wait)
                if self._gpuaas_starts != start or await self._try_delete_token_secret():
                    return
            self.log.warning("gpuaas: gave up deleting %s", self._token_secret_name)

        self._gpuaas_secret_retry = asyncio.ensure_future(later())

    async def _try_delete_token_secret(self) -> bool:
        """Whether the token Secret is gone (deleted now, or there was none)."""
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        try:
            await asyncio.wait_for(
                self.api.delete_namespaced_secret(self._token_secret_name, self.namespace),
                self.k8s_api_request_timeout,
            )
        except ApiException as e:
            if e.status == 404:
                return True
            self.log.warning("gpuaas: could not delete %s: %s", self._token_secret_name, e)
            return False
        except (ClientError, OSError, asyncio.TimeoutError) as e:
            self.log.warning(
                "gpuaas: could not delete %s, trying again: %s",
                self._token_secret_name,
                e or type(e).__name__,
            )
            return False
        return True

    # ------------------------------------------------------------------ status

    def _current_pod(self) -> dict[str, Any] | None:
        reflector = getattr(self, "pod_reflector", None)
        if reflector is None:
            return None
        pod = reflector.pods.get(f"{self.namespace}/{self.pod_name}")
        if pod is None:
            return None
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        if uid and uid == self._gpuaas_stale_uid:
            return None  # a previous pod of the same name, still going away
        if uid:
            self._gpuaas_pod_uid = uid
        return dict(pod)

    def _status(self) -> SpawnStatus | None:
        choice, settings = self._gpuaas_choice, self._gpuaas_settings
        if choice is None or settings is None:
            return None
        view = self._view()
        pod = self._current_pod()
        uid = self._gpuaas_pod_uid
        workload = view.workload_for_pod(settings.namespace, uid, self.pod_name) if uid else None
        pending = (
            view.pending_workload(
                settings.namespace,
                choice.tenant.local_queue,
                workload_name=workload.name if workload else "",
                pod_uid=uid,
            )
            if uid
            else None
        )
        events = list(self.events) if getattr(self, "event_reflector", None) else []
        status = spawn_status(
            team=choice.tenant.display_name,
            pod=pod,
            workload=workload,
            pending=pending,
            events=events,
            pod_seen=bool(uid),
            offering=choice.offering.display_name,
            now=self.clock(),
            own_team=choice.tenant.name,
            teams=self._team_names(),
        )
        yields = self._gpuaas_yields and self.after_reclaim_priority_class
        if yields and status.phase is Phase.QUEUED:
            status = replace(status, message=f"{status.message}. {say('queued.yields')}")
        self._gpuaas_last_status = status
        return status

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> asyncio.Future[Any]:
        """Set the hub's own timeout to cover the queue, then start (see module docstring)."""
        if self.start_timeout != self._gpuaas_long_timeout:
            self._gpuaas_base_start_timeout = self.start_timeout
        queue = self.queue_timeout if self.queue_timeout > 0 else _WEEK
        self._gpuaas_long_timeout = int(queue + self._gpuaas_base_start_timeout + 60)
        # JupyterHub reads start_timeout right after this synchronous part returns.
        self.start_timeout = self._gpuaas_long_timeout
        self._gpuaas_submitted_at = self.clock()
        self._gpuaas_admitted_at = None
        # The previous pod of this server (same name): its Workload must be gone before the new
        # pod exists (see _wait_for_earlier_workloads).
        self._gpuaas_earlier_uid = self._gpuaas_pod_uid
        self._gpuaas_pod_uid = ""
        self._gpuaas_notice = ""
        self._gpuaas_settings = None
        self._gpuaas_claim_checked_at = float("-inf")
        self._start_future = asyncio.ensure_future(self._gpuaas_start())
        self._start_future.add_done_callback(lambda _: self._restore_start_timeout())
        return self._start_future

    def _restore_start_timeout(self) -> None:
        self.start_timeout = self._gpuaas_base_start_timeout

    async def _gpuaas_start(self) -> Any:
        try:
            return await self._gpuaas_queued_start()
        except web.HTTPError as e:
            not_counted(self, e)  # queue timeout, preemption, refused options: not hub errors
            raise
        except Exception as e:
            failure = classify_start_error(e)
            if failure is None:
                raise
            # a cluster that is down: a hub restart would not mend it (see gpuaas_spawner.failures)
            self.log.error(
                "gpuaas: event=spawn-failed reason=%s user=%s server=%s: %s",
                failure.reason,
                self.user.name,
                self.name,
                e,
            )
            refusal = _user_error(
                failure.message, reason=failure.reason, status_code=failure.status_code
            )
            not_counted(self, refusal)
            raise refusal from e

    async def _gpuaas_queued_start(self) -> Any:
        self._gpuaas_starts += 1
        settings = self._prepare()
        self._save_state()
        await self._recreate_a_missing_home_claim()
        await self._start_watching_pods()
        stale = self.pod_reflector.pods.get(f"{self.namespace}/{self.pod_name}")
        self._gpuaas_stale_uid = str(stale["metadata"].get("uid")) if stale else None
        await self._view().start()
        earlier = {u for u in (self._gpuaas_earlier_uid, self._gpuaas_stale_uid) if u}
        await self._wait_for_earlier_workloads(settings.namespace, earlier)
        release = self._view().track_local_queue(
            settings.namespace, settings.labels["kueue.x-k8s.io/queue-name"]
        )
        token = _STARTING.set(id(self))  # seen by every task KubeSpawner's _start creates
        try:
            task = asyncio.ensure_future(self._start())
        finally:
            _STARTING.reset(token)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.queue_poll_interval)
                if task in done:
                    url = task.result()
                    self._gpuaas_pod_uid = str(getattr(self, "pod_id", "") or self._gpuaas_pod_uid)
                    if self._gpuaas_pod_uid and not self._gpuaas_secret_owned:
                        # admitted and running before the first check: own the Secret now
                        await self._own_token_secret(self._gpuaas_pod_uid)
                    await self._wait_until_listening(url)
                    return url
                await self._check_spawn()
        finally:
            release()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _wait_for_earlier_workloads(self, namespace: str, earlier_uids: set[str]) -> None:
        """Wait until the Workloads of this server's earlier pods are gone.

        Kueue 0.17 finds a plain pod's Workloads by the pod's *name*: a new pod created while
        an earlier same-named pod's Workload remains is taken for that Workload's pod, and is
        stopped (deleted) once the garbage collector removes the old Workload. A quick
        stop-and-start would lose its new pod; waiting for the old Workload avoids it. Kueue
        0.18+ compares the owner's UID only with FinishOrphanedWorkloads on, which the
        configuration we ask for turns off (docs/queue.md), so the wait holds for every version.
        """
        view = self._view()

        def gone() -> bool:
            # what Kueue holds now: the view also remembers deleted Workloads (for the reason a
            # server stopped), and one of those never goes
            return not any(
                view.has_workload_for_pod(namespace, uid, self.pod_name) for uid in earlier_uids
            )

        if not earlier_uids or gone():
            return
        self.log.info("gpuaas: event=wait-for-earlier-workload pod=%s", self.pod_name)
        try:
            await exponential_backoff(  # checked at least as often as the queue
                gone,
                f"the earlier Workload of {self.pod_name}",
                start_wait=min(0.2, self.queue_poll_interval),
                max_wait=self.queue_poll_interval,
                timeout=self.stop_timeout,
            )
        except asyncio.TimeoutError:  # jupyterhub's exponential_backoff
            raise _user_error(
                say("start.earlier"),
                reason="earlier_workload",
            ) from None

    async def _wait_until_listening(self, url: str) -> None:
        """Between "running" and "listening": a server that exits there (its own config, a
        crash at start) ends the spawn as a clean failure, not as the hub's error of a server
        that never answered. KubeSpawner returns once the pod is Running, which a container
        that exits at once may be for a moment. Bounded by ``http_timeout``, after which
        JupyterHub's own wait takes over as usual."""
        parsed = urlparse(url)
        if not parsed.hostname or not parsed.port:
            return
        deadline = asyncio.get_running_loop().time() + self.http_timeout
        while asyncio.get_running_loop().time() < deadline:
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(parsed.hostname, parsed.port), 1.0
                )
            except (OSError, asyncio.TimeoutError):
                await self._check_spawn()  # raises the clean failure once the pod has exited
                await asyncio.sleep(min(0.2, self.queue_poll_interval))
                continue
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
            return

    async def _check_spawn(self) -> None:
        status = self._status()
        if status is None or self._gpuaas_choice is None or self._gpuaas_submitted_at is None:
            return
        if self._gpuaas_pod_uid and not self._gpuaas_secret_owned:
            await self._own_token_secret(self._gpuaas_pod_uid)
        now = self.clock()
        if status.admitted and self._gpuaas_admitted_at is None:
            self._gpuaas_admitted_at = now
            if self._gpuaas_yields:  # it got a GPU of its own again: later starts are ordinary
                self._gpuaas_yields = False
                self._save_state()
        if status.phase is Phase.PREEMPTED:
            self._gpuaas_notice = status.message  # also shown on the next visit
            raise _user_error(status.message, reason="preempted")
        if status.phase is Phase.WAITING_FOR_NODE:
            await self._check_home_volume()
        if status.terminal:
            reason = status.failure_reason or (
                "server_exited" if status.phase is Phase.FAILED else "stopped"
            )
            self.log.warning(
                "gpuaas: event=spawn-ended reason=%s user=%s server=%s: %s",
                reason,
                self.user.name,
                self.name,
                exit_details(self._current_pod(), secrets=[self.api_token or ""]),
            )
            raise _user_error(status.message, reason=reason)
        deadline = check_deadline(
            status,
            team=self._gpuaas_choice.tenant.display_name,
            submitted_at=self._gpuaas_submitted_at,
            admitted_at=self._gpuaas_admitted_at,
            now=now,
            queue_timeout=self.queue_timeout,
            start_timeout=float(self._gpuaas_base_start_timeout),
        )
        if deadline is not None:
            if deadline.kind == "queue":
                self._gpuaas_notice = deadline.message  # also shown on the next visit
                raise _user_error(deadline.message, reason="queue_timeout")
            # admitted, then not ready in time: the cluster's or the server's doing, not the hub's
            raise _user_error(deadline.message, reason="start_timeout")

    async def _recreate_a_missing_home_claim(self) -> None:
        """Make KubeSpawner create the home claim again when the one its saved state names is
        gone (deleted behind the hub's back, or the cluster is a new one): its state says the
        claim exists, so it would not create it, and the pod would wait for it until the start
        timeout. Said on the progress page and in the log; the files of the old claim are gone
        with it. A claim that cannot be read (API error) is left to KubeSpawner as before."""
        self._gpuaas_home_recreated = False
        if not self.storage_pvc_ensure or not getattr(self, "_pvc_exists", False):
            return  # no claims, or KubeSpawner creates it anyway (409 when it exists)
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        try:
            await asyncio.wait_for(
                self.api.read_namespaced_persistent_volume_claim(self.pvc_name, self.namespace),
                self.k8s_api_request_timeout,
            )
            return
        except ApiException as e:
            if e.status != 404:
                self.log.warning("gpuaas: cannot read the claim %s: %s", self.pvc_name, e)
                return
        except (ClientError, OSError, asyncio.TimeoutError) as e:
            self.log.warning("gpuaas: cannot read the claim %s: %s", self.pvc_name, e)
            return
        self.log.warning(
            "gpuaas: event=home-claim-missing user=%s server=%s claim=%s: creating it again "
            "(a new, empty home)",
            self.user.name,
            self.name,
            self.pvc_name,
        )
        self._pvc_exists = False  # KubeSpawner's _start creates it (and sets this again)
        self._gpuaas_home_recreated = True

    async def _check_home_volume(self) -> None:
        """End the start, saying why, when the home volume cannot be provisioned: the pod
        would wait for its claim until the start timeout with no word of the reason, which is
        an Event on the claim (the pod's own Events only say the claim is unbound)."""
        if not self.storage_pvc_ensure:
            return
        now = asyncio.get_running_loop().time()
        if now - self._gpuaas_claim_checked_at < _CLAIM_CHECK_INTERVAL:
            return
        self._gpuaas_claim_checked_at = now
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        selector = f"involvedObject.kind=PersistentVolumeClaim,involvedObject.name={self.pvc_name}"
        try:
            claim = await asyncio.wait_for(
                self.api.read_namespaced_persistent_volume_claim(self.pvc_name, self.namespace),
                self.k8s_api_request_timeout,
            )
            events = await asyncio.wait_for(
                self.api.list_namespaced_event(self.namespace, field_selector=selector),
                self.k8s_api_request_timeout,
            )
        except ApiException as e:
            if e.status == 404:  # deleted since this start made or found it
                self.log.error(
                    "gpuaas: event=spawn-failed reason=home_gone user=%s claim=%s",
                    self.user.name,
                    self.pvc_name,
                )
                self._pvc_exists = False  # the next start makes it again
                raise _user_error(
                    say("start.home_gone", claim=self.pvc_name),
                    reason="home_volume",
                    status_code=503,
                ) from e
            self.log.warning("gpuaas: cannot read the claim %s or its events: %s", self.pvc_name, e)
            return
        except (ClientError, OSError, asyncio.TimeoutError) as e:
            self.log.warning("gpuaas: cannot read the claim %s or its events: %s", self.pvc_name, e)
            return
        why = home_volume_failure(to_api_json(claim), [to_api_json(e) for e in events.items])
        if why:
            self.log.error(
                "gpuaas: event=spawn-failed reason=home_volume user=%s claim=%s: %s",
                self.user.name,
                self.pvc_name,
                why,
            )
            raise _user_error(
                say("start.home_volume", why=why, claim=self.pvc_name),
                reason="home_volume",
                status_code=503,
            )

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        """Yield the spawn's phase whenever it changes; safe to run several at once."""
        last: dict[str, Any] | None = None
        home_said = False
        while True:
            future = self._start_future
            status = self._status()
            if status is not None:
                event = status.event()
                if self._gpuaas_home_recreated and not home_said:
                    home_said = True
                    yield {
                        "progress": event["progress"],
                        "message": say("start.home_recreated", claim=self.pvc_name),
                    }
                if event != last:
                    last = event
                    yield event
            if future is None or future.done():
                break
            await asyncio.sleep(self.queue_poll_interval)

    async def poll(self) -> int | None:
        """KubeSpawner's poll, plus: a spawn whose pod the watch has not shown yet counts as
        running, so that JupyterHub's stop (cancel) still deletes it (no orphan pod); a pod left
        waiting in the queue by an earlier hub process is ended (see :meth:`_left_in_queue`)."""
        result: int | None = await super().poll()
        if result is None and self._left_in_queue():
            # JupyterHub would wait http_timeout for a server that cannot answer and then stop
            # it; stop it now instead (as KubeSpawner's poll removes a pod that has exited).
            await self.stop(now=True)
            return 1
        if result is not None and self._gpuaas_settings is not None and not self._gpuaas_pod_uid:
            return None
        if result is not None and self._gpuaas_choice is not None and self._gpuaas_pod_uid:
            status = self._status()
            if status is not None and status.phase in (Phase.PREEMPTED, Phase.STOPPED):
                self._gpuaas_notice = status.message  # shown on the user's next visit
        return result

    async def stop(self, now: bool = False) -> None:
        """Stop within ``stop_timeout``; release a pod held only by Kueue's finalizer."""
        if _STARTING.get() == id(self):
            # KubeSpawner's own _start removing a same-named old pod (409): this spawn goes on.
            long_timeout = self.start_timeout
            self.start_timeout = max(1, int(self.stop_timeout))
            try:
                await self._stop_pod(now)
            finally:
                self.start_timeout = long_timeout
            return
        notice = self._orphaned_queue_notice() or self._left_queue_notice()
        if not notice:
            notice = self._reclaimed_notice()
            # Its GPU goes to queued work: the next start must not take it back (see
            # after_reclaim_priority_class). A cancelled yielding start keeps yielding.
            self._gpuaas_yields = self._gpuaas_yields or bool(notice)
        self.start_timeout = max(1, int(self.stop_timeout))
        try:
            await self._stop_pod(now)
        finally:
            self.start_timeout = self._gpuaas_base_start_timeout
        if notice:
            self._gpuaas_notice = notice
        await self._delete_token_secret()
        self._gpuaas_choice = None
        self._gpuaas_settings = None

    def _left_in_queue(self) -> bool:
        """Whether this server's pod waits in Kueue's queue with no start of this hub process
        behind it: a spawn that was queued when the hub restarted."""
        if self._gpuaas_settings is not None:
            return False
        if self._start_future is not None and not self._start_future.done():
            return False
        reflector = getattr(self, "pod_reflector", None)
        pod = reflector.pods.get(f"{self.namespace}/{self.pod_name}") if reflector else None
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        return is_gated(pod)

    @property
    def gpuaas_page_words(self) -> dict[str, str]:
        """The spawn progress page's own words ("Leave the queue", ...): read by the page
        template in ``HUB_TEMPLATES``."""
        return page_words()

    def _team_names(self) -> dict[str, str]:
        """The teams' display names by name (none while the catalog cannot be read)."""
        try:
            return {t.name: t.display_name for t in self.catalog.tenants.values()}
        except CatalogError:
            return {}

    def _left_queue_notice(self) -> str:
        """A stop of this hub process's own spawn while it still waits in the queue: the user
        left the queue ("Leave the queue" on the progress page). Nothing was started."""
        status = self._gpuaas_last_status
        if self._gpuaas_settings is None or status is None or not status.in_queue:
            return ""
        if self._gpuaas_admitted_at is not None or self._gpuaas_notice:
            return ""  # admitted meanwhile, or ended for a reason already told
        self.log.info("gpuaas: event=left-queue user=%s server=%s", self.user.name, self.name)
        return say("left_queue")

    def _reclaimed_notice(self) -> str:
        """Why the gpuaas service is stopping this server (the marks it left on the pod before
        asking the hub): shown to the user on their next visit; "" for any other stop."""
        reflector = getattr(self, "pod_reflector", None)
        pod = reflector.pods.get(f"{self.namespace}/{self.pod_name}") if reflector else None
        meta = (pod or {}).get("metadata") or {}
        team = str((meta.get("labels") or {}).get(TEAM_LABEL, ""))
        notice = reclaim_notice(
            meta.get("annotations") or {}, team=team, team_names=self._team_names()
        )
        if notice:
            self.log.info(
                "gpuaas: event=reclaimed user=%s server=%s: told on the next visit",
                self.user.name,
                self.name,
            )
        return notice

    def _orphaned_queue_notice(self) -> str:
        """Why a queued pod this hub process did not start is being stopped: a hub restart.

        JupyterHub stops servers that were still pending when it (re)starts; a server waiting in
        Kueue's queue is one. Logged, and shown to the user on their next visit.
        """
        if not self._left_in_queue():
            return ""
        pod = self.pod_reflector.pods[f"{self.namespace}/{self.pod_name}"]
        team = (pod.get("metadata", {}).get("labels") or {}).get(TEAM_LABEL, "")
        self.log.warning(
            "gpuaas: event=queued-spawn-ended-by-hub-restart user=%s server=%s team=%s pod=%s",
            self.user.name,
            self.name,
            team,
            self.pod_name,
        )
        name = self._team_names().get(team)
        return say(
            "ended.hub_restart", queue=say("queue.of", team=name) if name else say("queue.own")
        )

    async def _stop_pod(self, now: bool) -> None:
        try:
            await super().stop(now)
        except asyncio.TimeoutError:  # KubeSpawner's wait for the pod to go
            await self._release_kueue_finalizer()
            ref_key = f"{self.namespace}/{self.pod_name}"
            await exponential_backoff(
                lambda: self.pod_reflector.pods.get(ref_key) is None,
                f"pod {ref_key} did not go away in {self.stop_timeout} seconds",
                timeout=self.stop_timeout,
            )

    async def _release_kueue_finalizer(self) -> None:
        pod = self.pod_reflector.pods.get(f"{self.namespace}/{self.pod_name}")
        patch = finalizer_patch(pod or {})
        if patch is None:
            return
        self.log.warning(
            "gpuaas: removing Kueue's finalizer from %s/%s", self.namespace, self.pod_name
        )
        from aiohttp import ClientError
        from kubernetes_asyncio.client.rest import ApiException

        with contextlib.suppress(ApiException, ClientError, OSError, asyncio.TimeoutError):
            await asyncio.wait_for(
                self.api.patch_namespaced_pod(
                    self.pod_name,
                    self.namespace,
                    patch,
                    _content_type="application/json-patch+json",
                ),
                self.k8s_api_request_timeout,
            )

    def gpu_equivalents(self) -> Fraction:
        """GPU-equivalents this server holds (0 when not started with a GPU offering)."""
        choice = self._gpuaas_choice
        return choice.offering.gpu_equivalents_for(choice.count) if choice else Fraction(0)

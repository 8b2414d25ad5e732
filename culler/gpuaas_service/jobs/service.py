"""The gpuaas service's notebook Jobs: submit, list, cancel, log, result, and the runner's side
(docs/jobs.md). Decisions (validation, manifests, states) are pure functions of this package;
this class does the I/O, through :class:`~gpuaas_service.jobs.kube.JobsKube`.

Who may do what: a user sees, cancels and reads only Jobs labelled with their own name, in the
namespaces of their own teams (hub groups → catalog tenants); the runner only its own Job's
input and result, proven by the token in that Job's Secret.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import secrets
import string
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from gpuaas_service.api_types import (
    ServiceJobResult,
    ServiceJobRunnerInput,
    ServiceJobRunnerTaken,
)
from gpuaas_service.jobs.build import (
    INPUT_NOTEBOOK_KEY,
    INPUT_REQUEST_KEY,
    JOB_KIND,
    build_input_config_map,
    build_job,
    build_token_secret,
    input_name,
    job_name,
    job_topology,
    owner_reference,
    result_name,
    token_name,
    token_sha256,
)
from gpuaas_service.jobs.kube import JobsKube
from gpuaas_service.jobs.logs import MAX_LOG, RunnerLogs
from gpuaas_service.jobs.request import (
    JobRequest,
    JobRequestError,
    NotAllowed,
    job_teams,
    validate_job_request,
)
from gpuaas_service.jobs.status import job_summary
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.catalog import Catalog, Offering, Tenant
from jupyter_gpuaas.core.choice import HeadroomFn
from jupyter_gpuaas.core.durations import isoformat_z
from jupyter_gpuaas.core.headroom import Headroom, QueueState, compute_headroom
from jupyter_gpuaas.core.labels import (
    JOB_COLLECTED_ANNOTATION,
    JOB_LABEL,
    JOB_NOTEBOOK_ANNOTATION,
    JOB_NOTIFIED_ANNOTATION,
    JOB_RESULT_ANNOTATION,
    JOB_TOKEN_ANNOTATION,
    USER_LABEL,
)

__all__ = ["CapReached", "JobError", "JobService"]

log = logging.getLogger("gpuaas.jobs")

_SUFFIX_CHARS = string.ascii_lowercase + string.digits
RESULT_STATUSES = ("succeeded", "failed")


class JobError(Exception):
    """An answer other than 200: ``status`` and a message a person can act on."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


class CapReached(JobError):
    def __init__(self, message: str, *, cap: str, limit: int, active: int) -> None:
        super().__init__(409, message, cap=cap, limit=limit, active=active)


def _suffix() -> str:
    return "".join(secrets.choice(_SUFFIX_CHARS) for _ in range(5))


def _active(job: Mapping[str, Any]) -> bool:
    """Queued or running: not finished."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return False
    return True


def _job_tenant(tenant: Tenant) -> Tenant:
    """The tenant as its training queue sees it (for the headroom words of the spawn form)."""
    assert tenant.jobs is not None
    return replace(
        tenant,
        namespace=tenant.jobs.namespace,
        local_queue=tenant.jobs.local_queue,
        cluster_queue=None,
        max_gpu_servers_per_user=None,
        max_gpus_per_user=None,
        max_queued=None,
    )


def _log_quota_refusal(user: str, rooms: Sequence[Headroom]) -> None:
    """One line for an admin per job refused for its team's queue or quota: the user was told
    in plain words; Kueue's explanation (``admin_detail``) says where to look."""
    for room in rooms:
        if not room.fit.selectable:
            log.warning(
                "job.refused user=%s team=%s offering=%s fit=%s cluster_queue=%s detail=%s",
                user,
                room.tenant,
                room.offering,
                room.fit.value,
                room.cluster_queue or "-",
                room.admin_detail or room.message,
            )


class JobService:
    def __init__(
        self,
        kube: JobsKube,
        catalog: Callable[[], Catalog | None],
        *,
        service_url: str,
        queue_state: Callable[[], QueueState] | None = None,
        positions: Callable[[str, Sequence[str]], Mapping[tuple[str, str], Mapping[str, Any]]]
        | None = None,
        workloads: Callable[[str], Sequence[Mapping[str, Any]]] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        token: Callable[[], str] = lambda: secrets.token_urlsafe(32),
        suffix: Callable[[], str] = _suffix,
        max_notebook_bytes: int = 900_000,
        topology_level: str = "",
        flavor_topologies: Callable[[], Awaitable[Mapping[str, str]]] | None = None,
    ) -> None:
        self.kube = kube
        self._catalog = catalog
        self.service_url = service_url
        self.queue_state = queue_state
        self.positions = positions
        self.workloads = workloads
        self.clock = clock
        self.token = token
        self.suffix = suffix
        self.max_notebook_bytes = max_notebook_bytes
        self.topology_level = topology_level
        self.flavor_topologies = flavor_topologies
        """ResourceFlavor name → its topologyName ('' none), read at each submit."""
        self.logs = RunnerLogs()
        """The runners' log tails (bounded in total and aged out)."""
        self._locks: dict[str, asyncio.Lock] = {}

    # ---------------------------------------------------------------- helpers

    def catalog(self) -> Catalog:
        catalog = self._catalog()
        if catalog is None:
            raise JobError(
                503, "no catalog is configured for GPU jobs (c.GPUaaSService.catalog_file)"
            )
        return catalog

    def _teams(self, groups: Sequence[str]) -> list[Tenant]:
        return job_teams(self.catalog(), groups)

    def _team(self, groups: Sequence[str], team: str) -> Tenant:
        for tenant in self._teams(groups):
            if tenant.name == team:
                return tenant
        raise JobError(404, f"no job of yours in team {team!r}")

    @staticmethod
    def _selector(user: str | None = None) -> str:
        sel = f"{JOB_LABEL}={JOB_KIND}"
        return f"{sel},{USER_LABEL}={user}" if user else sel

    async def _own_job(
        self, user: str, groups: Sequence[str], team: str, name: str
    ) -> tuple[Tenant, dict[str, Any]]:
        """The caller's own Job, or 404 (also for another user's: its existence is not told)."""
        tenant = self._team(groups, team)
        assert tenant.jobs is not None
        job = await self.kube.get("job", tenant.jobs.namespace, name)
        labels = (job or {}).get("metadata", {}).get("labels") or {}
        if job is None or labels.get(JOB_LABEL) != JOB_KIND or labels.get(USER_LABEL) != user:
            raise JobError(404, f"no job {name!r} of yours in team {team!r}")
        return tenant, job

    def _headroom(self, seen: list[Headroom] | None = None) -> HeadroomFn | None:
        """The training queue's headroom, for refusing what could never start there; each
        one computed is added to ``seen`` (for the log line of a refusal)."""
        if self.queue_state is None:
            return None
        state = self.queue_state()

        def room(tenant: Tenant, offering: Offering, count: int) -> Headroom:
            assert tenant.jobs is not None
            answer = compute_headroom(
                _job_tenant(tenant),
                offering,
                state,
                namespace=tenant.jobs.namespace,
                count=count,
                workload="job",
            )
            if seen is not None:
                seen.append(answer)
            return answer

        return room

    # ---------------------------------------------------------------- the user's side

    async def options(self, user: str, groups: Sequence[str]) -> api.ServiceJobOptions:
        """What the dialog offers: per team its offerings with headroom, images, sizes, time
        limits, and the caps with how much of them is used."""
        catalog = self.catalog()
        teams: list[api.ServiceJobTeam] = []
        state = self.queue_state() if self.queue_state else None
        for tenant in self._teams(groups):
            jobs = tenant.jobs
            assert jobs is not None
            active = [
                j for j in await self.kube.list_jobs(jobs.namespace, self._selector()) if _active(j)
            ]
            mine = [j for j in active if j["metadata"].get("labels", {}).get(USER_LABEL) == user]
            offerings: list[api.ServiceJobOffering] = []
            for slug in jobs.offerings:
                off = catalog.offerings.get(slug)
                if off is None:
                    continue
                room = (
                    compute_headroom(
                        _job_tenant(tenant), off, state, namespace=jobs.namespace, workload="job"
                    )
                    if state is not None
                    else None
                )
                offerings.append(
                    {
                        "slug": off.slug,
                        "display_name": off.display_name,
                        "kind": off.kind,
                        "min_count": off.min_count,
                        "max_count": off.max_count,
                        "default_count": off.default_count,
                        "unit": off.unit,
                        "units": off.units,
                        "isolation": off.isolation_text,
                        "images": [
                            {"slug": i.slug, "display_name": i.display_name}
                            for i in catalog.images_for(off)
                        ],
                        "sizes": [
                            {"slug": s.slug, "display_name": s.display_name}
                            for s in catalog.sizes_for(off)
                        ],
                        "headroom": None
                        if room is None
                        else {
                            "fit": room.fit.value,
                            "message": room.message,
                            "detail": room.detail,
                            "ahead": room.ahead,
                            "selectable": room.fit.selectable,
                        },
                    }
                )
            teams.append(
                {
                    "team": tenant.name,
                    "display_name": tenant.display_name,
                    "default_offering": tenant.default_offering
                    if tenant.default_offering in jobs.offerings
                    else (jobs.offerings[0] if jobs.offerings else None),
                    "offerings": offerings,
                    "default_time_limit": jobs.default_time_limit,
                    "max_time_limit": jobs.max_time_limit,
                    "caps": {
                        "per_user": {"limit": jobs.max_per_user, "active": len(mine)},
                        "per_team": {"limit": jobs.max_per_team, "active": len(active)},
                    },
                    "cap_message": _cap_message(tenant, len(mine), len(active)),
                }
            )
        return {"user": user, "teams": teams}

    async def submit(
        self, user: str, groups: Sequence[str], body: object, body_bytes: int = 0
    ) -> api.ServiceJob:
        """Validate, check the caps, create input, token, Job; answer the Job's summary."""
        rooms: list[Headroom] = []
        try:
            req = validate_job_request(
                body, self.catalog(), user, groups, headroom=self._headroom(rooms)
            )
        except NotAllowed as e:
            raise JobError(403, str(e), errors=[{"path": e.path, "message": str(e)}]) from e
        except JobRequestError:
            _log_quota_refusal(user, rooms)
            raise
        size = len(json.dumps(req.notebook, separators=(",", ":")))
        if size > self.max_notebook_bytes:
            raise JobError(
                413,
                f"the notebook is {size} bytes; the most a job takes is {self.max_notebook_bytes}"
                " (clear its outputs, or ask an admin: c.GPUaaSService.job_max_notebook_bytes)",
            )
        ns = req.jobs.namespace
        lock = self._locks.setdefault(ns, asyncio.Lock())
        async with lock:  # two submits at once must not both pass the caps
            active = [j for j in await self.kube.list_jobs(ns, self._selector()) if _active(j)]
            mine = [j for j in active if j["metadata"].get("labels", {}).get(USER_LABEL) == user]
            message = _cap_message(req.tenant, len(mine), len(active))
            if message:
                per_user = req.jobs.max_per_user is not None and len(mine) >= req.jobs.max_per_user
                raise CapReached(
                    message,
                    cap="per_user" if per_user else "per_team",
                    limit=(req.jobs.max_per_user if per_user else req.jobs.max_per_team) or 0,
                    active=len(mine) if per_user else len(active),
                )
            created = await self._create(req)
        log.info(
            "job.submitted user=%s team=%s job=%s/%s offering=%s count=%d time_limit=%s",
            user,
            req.tenant.name,
            ns,
            created["metadata"]["name"],
            req.offering.slug,
            req.count,
            req.time_limit,
        )
        return self._summary(req.tenant, created, {})

    async def _required_topology(self, req: JobRequest) -> str:
        """The topology level the Job must require ('' none): read from its offering's
        ResourceFlavor at each submit (an admin may add a Topology at any time)."""
        if not self.topology_level or self.flavor_topologies is None:
            return ""
        try:
            topologies = await self.flavor_topologies()
        except Exception as e:
            log.warning("job.submit could not read the ResourceFlavors: %s", e)
            raise JobError(
                503, "the queue's flavors could not be read; try again in a moment"
            ) from e
        return job_topology(req.offering.flavor, topologies, self.topology_level)

    async def _create(self, req: JobRequest) -> dict[str, Any]:
        ns = req.jobs.namespace
        required_topology = await self._required_topology(req)
        token = self.token()
        for _ in range(3):
            name = job_name(req.notebook_name, self.suffix())
            if await self.kube.get("job", ns, name) is None:
                break
        else:
            raise JobError(503, "no free job name found; try again")
        made: list[tuple[str, str]] = []
        try:
            await self.kube.create("configmap", ns, build_input_config_map(req, name=name))
            made.append(("configmap", input_name(name)))
            await self.kube.create("secret", ns, build_token_secret(req, name=name, token=token))
            made.append(("secret", token_name(name)))
            job = build_job(
                req,
                name=name,
                token_sha=token_sha256(token),
                service_url=self.service_url,
                required_topology=required_topology,
            )
            job["metadata"]["annotations"][JOB_NOTEBOOK_ANNOTATION] = req.notebook_name
            created = await self.kube.create("job", ns, job)
        except Exception:
            for kind, obj in reversed(made):  # a failed submit leaves nothing behind
                try:
                    await self.kube.delete(kind, ns, obj)
                except Exception:
                    log.exception("job.cleanup failed %s %s/%s", kind, ns, obj)
            raise
        owner = {"metadata": {"ownerReferences": [owner_reference(created)]}}
        for kind, obj in made:
            await self.kube.patch(kind, ns, obj, owner)
        return created

    async def list(self, user: str, groups: Sequence[str]) -> api.ServiceJobs:
        """The caller's notebook Jobs in all their teams, newest first; on a hub that runs no
        GPU jobs (no catalog), none and ``enabled: false``, so that the sidebar has no section
        that only ever says so."""
        if self._catalog() is None:
            return {
                "user": user,
                "generated_at": isoformat_z(self.clock()),
                "jobs": [],
                "enabled": False,
            }
        out = []
        positions = self.positions(user, groups) if self.positions else {}
        for tenant in self._teams(groups):
            assert tenant.jobs is not None
            for job in await self.kube.list_jobs(tenant.jobs.namespace, self._selector(user)):
                out.append(self._summary(tenant, job, positions))
        out.sort(key=lambda j: j["created_at"] or "", reverse=True)
        return {"user": user, "generated_at": isoformat_z(self.clock()), "jobs": out}

    def _summary(
        self,
        tenant: Tenant,
        job: Mapping[str, Any],
        positions: Mapping[tuple[str, str], Mapping[str, Any]],
    ) -> api.ServiceJob:
        meta = job["metadata"]
        workload = None
        if self.workloads is not None:
            uid = meta.get("uid")
            workload = next(
                (
                    w
                    for w in self.workloads(meta["namespace"])
                    if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])
                ),
                None,
            )
        catalog = self._catalog()
        return job_summary(
            tenant,
            job,
            workload=workload,
            position=positions.get((meta["namespace"], meta["name"])),
            catalog=catalog,
        )

    async def cancel(
        self, user: str, groups: Sequence[str], team: str, name: str
    ) -> api.ServiceJobCancelled:
        tenant, job = await self._own_job(user, groups, team, name)
        ns = job["metadata"]["namespace"]
        await self.kube.delete("job", ns, name)
        self.logs.drop(f"{ns}/{name}")
        log.info("job.cancelled user=%s job=%s/%s", user, ns, name)
        return {"cancelled": True, "team": tenant.name, "name": name}

    async def log_of(
        self, user: str, groups: Sequence[str], team: str, name: str
    ) -> api.ServiceJobLog:
        _, job = await self._own_job(user, groups, team, name)
        ns = job["metadata"]["namespace"]
        text = self.logs.get(f"{ns}/{name}", self.clock())
        if text is None:
            result = await self.kube.get("configmap", ns, result_name(name))
            text = ((result or {}).get("data") or {}).get("log.txt", "")
        return {"team": team, "name": name, "log": text}

    async def result(
        self, user: str, groups: Sequence[str], team: str, name: str
    ) -> ServiceJobResult:
        """The executed notebook, how it ended, and the source path it came from."""
        _, job = await self._own_job(user, groups, team, name)
        ns = job["metadata"]["namespace"]
        stored = await self.kube.get("configmap", ns, result_name(name))
        if stored is None:
            raise JobError(404, f"job {name!r} has no result yet")
        data = stored.get("data") or {}
        source = await self.kube.get("configmap", ns, input_name(name))
        request = json.loads(((source or {}).get("data") or {}).get(INPUT_REQUEST_KEY) or "{}")
        outcome = json.loads(data.get("result.json") or "{}")
        return {
            "team": team,
            "name": name,
            "path": request.get("path"),
            "status": outcome.get("status"),
            "error": outcome.get("error"),
            "notebook": json.loads(data.get(INPUT_NOTEBOOK_KEY) or "null"),
        }

    async def mark(
        self,
        user: str,
        groups: Sequence[str],
        team: str,
        name: str,
        *,
        collected: str | None = None,
        notified: bool = False,
    ) -> api.ServiceJobMarked:
        """Record that the user's server wrote the result to ``collected`` / that their
        JupyterLab showed the notice (annotations on the Job; a restart forgets neither)."""
        _, job = await self._own_job(user, groups, team, name)
        annotations: dict[str, str] = {}
        marked: api.ServiceJobMarked = {"team": team, "name": name}
        if collected is not None:
            annotations[JOB_COLLECTED_ANNOTATION] = marked["collected"] = collected[:1024]
        if notified:
            annotations[JOB_NOTIFIED_ANNOTATION] = marked["notified"] = isoformat_z(self.clock())
        if annotations:
            await self.kube.patch(
                "job",
                job["metadata"]["namespace"],
                name,
                {"metadata": {"annotations": annotations}},
            )
        return marked

    # ---------------------------------------------------------------- the runner's side

    async def runner_job(self, who: str, token: str) -> dict[str, Any]:
        """The Job whose pod calls (``X-GPUaaS-Job: namespace/name`` and its token), or 403."""
        ns, _, name = who.partition("/")
        namespaces = {t.jobs.namespace for t in self.catalog().tenants.values() if t.jobs}
        if not token or ns not in namespaces or not name:
            raise JobError(403, "a notebook Job's own token is needed")
        job = await self.kube.get("job", ns, name)
        meta = (job or {}).get("metadata") or {}
        expected = (meta.get("annotations") or {}).get(JOB_TOKEN_ANNOTATION, "")
        if (
            job is None
            or (meta.get("labels") or {}).get(JOB_LABEL) != JOB_KIND
            or not expected
            or not hmac.compare_digest(token_sha256(token), expected)
        ):
            raise JobError(403, "a notebook Job's own token is needed")
        return job

    async def runner_input(self, job: Mapping[str, Any]) -> ServiceJobRunnerInput:
        meta = job["metadata"]
        source = await self.kube.get("configmap", meta["namespace"], input_name(meta["name"]))
        if source is None:
            raise JobError(404, "this job's input is gone")
        data = source.get("data") or {}
        request = json.loads(data.get(INPUT_REQUEST_KEY) or "{}")
        return {
            "notebook": json.loads(data[INPUT_NOTEBOOK_KEY]),
            "parameters": request.get("parameters") or {},
            "kernel_name": request.get("kernel_name"),
        }

    def runner_log(self, job: Mapping[str, Any], text: object) -> None:
        if not isinstance(text, str):
            raise JobError(400, "log must be text")
        meta = job["metadata"]
        self.logs.put(f"{meta['namespace']}/{meta['name']}", text, self.clock())

    async def runner_result(self, job: Mapping[str, Any], body: object) -> ServiceJobRunnerTaken:
        if not isinstance(body, Mapping) or body.get("status") not in RESULT_STATUSES:
            raise JobError(400, "a result needs status (succeeded or failed) and notebook")
        notebook = body.get("notebook")
        if not isinstance(notebook, Mapping) or not isinstance(notebook.get("cells"), list):
            raise JobError(400, "notebook must be the executed notebook's JSON")
        text = json.dumps(notebook, separators=(",", ":"))
        if len(text) > self.max_notebook_bytes:
            raise JobError(
                413,
                f"the executed notebook is {len(text)} bytes;"
                f" the most is {self.max_notebook_bytes}",
            )
        error = body.get("error")
        log_text = body.get("log") if isinstance(body.get("log"), str) else ""
        meta = job["metadata"]
        ns, name = meta["namespace"], meta["name"]
        outcome = {
            "status": body["status"],
            "error": error if isinstance(error, Mapping) else None,
            "received_at": isoformat_z(self.clock()),
        }
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": result_name(name),
                "namespace": ns,
                "labels": {JOB_LABEL: JOB_KIND, USER_LABEL: meta["labels"][USER_LABEL]},
                "ownerReferences": [owner_reference(job)],
            },
            "data": {
                INPUT_NOTEBOOK_KEY: text,
                "result.json": json.dumps(outcome),
                "log.txt": str(log_text)[-MAX_LOG:],
            },
        }
        if await self.kube.get("configmap", ns, result_name(name)) is not None:
            raise JobError(409, "this job's result was already sent")
        await self.kube.create("configmap", ns, cm)
        await self.kube.patch(
            "job", ns, name, {"metadata": {"annotations": {JOB_RESULT_ANNOTATION: body["status"]}}}
        )
        self.logs.put(f"{ns}/{name}", str(log_text), self.clock())
        log.info("job.result job=%s/%s status=%s", ns, name, body["status"])
        return {"accepted": True}


def _cap_message(tenant: Tenant, mine: int, team: int) -> str:
    jobs = tenant.jobs
    assert jobs is not None
    if jobs.max_per_user is not None and mine >= jobs.max_per_user:
        return (
            f"You have {mine} GPU job(s) queued or running in {tenant.display_name}, the most"
            f" allowed ({jobs.max_per_user}); wait for one to finish or cancel one."
        )
    if jobs.max_per_team is not None and team >= jobs.max_per_team:
        return (
            f"{tenant.display_name} has {team} GPU job(s) queued or running, the most allowed"
            f" ({jobs.max_per_team}); try again when one has finished."
        )
    return ""

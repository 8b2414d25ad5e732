"""The gpuaas service's notebook-Job endpoints (docs/jobs.md, docs/api.md), under its prefix:

For users (their server's own token, forwarded by the server extension: scopes
``access:servers!server=USER/NAME`` and ``access:services!service=gpuaas``; a user's personal
token is refused with 403, as for ``api/activity``), each answering for the caller's own Jobs
only:

- ``GET api/jobs/options`` — the dialog's teams, offerings with headroom, caps and their use;
- ``POST api/jobs`` — submit (400 with field paths, 403 another team, 409 a cap, 413 too big);
- ``GET api/jobs`` — the caller's notebook Jobs with their state and queue position;
- ``DELETE api/jobs/{team}/{name}`` — cancel: the Job goes, and with it its pod, Workload,
  input, token and result;
- ``GET api/jobs/{team}/{name}/log``, ``GET .../result``;
- ``POST .../collected`` (``{"path": ...}``: where the server wrote the executed copy),
  ``POST .../notified`` (the finish notice was shown).

For the Job's own pod (``Authorization: Bearer <its token>``, ``X-GPUaaS-Job: ns/name``; no
hub token): ``GET api/job-runner/input``, ``POST api/job-runner/log``,
``POST api/job-runner/result``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Any, ClassVar

from tornado import web

from gpuaas_service.api_types import ServiceJobRunnerTaken
from gpuaas_service.jobs.request import JobRequestError
from gpuaas_service.jobs.service import JobError, JobService
from gpuaas_service.web.base import (
    JSONHandler,
    ServerTokenHandler,
    admit_body,
    error_answer,
    limit,
    operations,
)
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.fields import FieldError

__all__ = ["jobs_handlers"]

NOTEBOOK_DEPTH = 100
"""How deep a body that carries a notebook may nest: its outputs may nest a displayed value a
little deeper than the default (core/parsing.py)."""


class _Errors(JSONHandler):
    """Answers :class:`JobError` and :class:`JobRequestError` as JSON with their details."""

    def answer_error(self, e: Exception) -> None:
        if isinstance(e, JobRequestError):
            self.set_status(400)
            self.finish(json.dumps(error_answer(400, f"invalid job request: {e}", e.errors)))
            return
        assert isinstance(e, JobError)
        self.set_status(e.status)
        extra = dict(e.extra)
        paths = extra.pop("errors", None)
        errors = [FieldError(x["path"], x["message"]) for x in paths] if paths else None
        self.finish(json.dumps(error_answer(e.status, str(e), errors, **extra)))


class _UserHandler(_Errors, ServerTokenHandler):
    service: JobService

    def initialize(self, context: ServiceContext, service: JobService) -> None:
        self.bind(context)
        self.service = service

    def caller(self) -> tuple[str, list[str]]:
        """(user, hub groups) of the calling server's own token, or 403: the server extension
        forwards with it; a user's personal token, even with the service's scope, is refused."""
        name, _server = self.server_caller
        limit(self.context, "queue", name)
        return name, [str(g) for g in self.current_user.get("groups") or ()]

    async def run(self, call: Awaitable[object]) -> None:
        try:
            self.finish(json.dumps(await call))
        except (JobError, JobRequestError) as e:
            self.answer_error(e)


@operations(get="getJobOptions")
class OptionsHandler(_UserHandler):
    async def get(self) -> None:
        user, groups = self.caller()
        await self.run(self.service.options(user, groups))


class _Body:
    """A streamed request body, kept up to ``limit`` bytes once :meth:`admit` let it in (the
    caller known first: web/base.py ``admit_body``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.too_large: web.HTTPError | None = None
        """The 413 to answer once an over-limit body has been read."""

    def admit(self, handler: web.RequestHandler, too_large: str, timeout: float) -> None:
        self.too_large = admit_body(handler, self.limit, too_large, timeout)

    def received(self, chunk: bytes) -> None:
        if self.too_large is None:
            self.data += chunk[: max(0, self.limit - len(self.data))]


class _Streamed(_Errors):
    """A handler whose request body streams in, kept up to ``max_body`` bytes (the notebook
    and the results travel in it, so these take more than ``max_request_bytes``)."""

    service: JobService

    def initialize(
        self, context: ServiceContext, service: JobService, max_body: int = 1_100_000
    ) -> None:
        self.bind(context)
        self.service = service
        self.body = _Body(max_body)

    def data_received(self, chunk: bytes) -> None:
        self.body.received(chunk)


@operations(get="getJobs", post="postJob")
@web.stream_request_body
class JobsHandler(_Streamed, _UserHandler):
    """``GET``: the caller's jobs; ``POST``: submit (a body up to ``max_body`` bytes: the
    notebook travels in it, so this endpoint alone takes more than ``max_request_bytes``)."""

    async def prepare(self) -> None:
        await super().prepare()  # the caller first: 403 before a byte of the body is read
        if self.request.method == "POST":
            self.body.admit(
                self,
                f"the request is over {self.body.limit} bytes: clear the notebook's outputs and"
                " submit it again (or ask an admin: c.GPUaaSService.job_max_notebook_bytes)",
                self.context.body_timeout,
            )

    async def get(self) -> None:
        user, groups = self.caller()
        await self.run(self.service.list(user, groups))

    async def post(self) -> None:
        if self.body.too_large is not None:
            raise self.body.too_large  # its body read and dropped
        user, groups = self.caller()
        body = self.json_body(
            "postJob", bytes(self.body.data), what="job request", max_depth=NOTEBOOK_DEPTH
        )
        self.set_status(201)
        await self.run(self.service.submit(user, groups, body))


@operations(delete="deleteJob")
class JobHandler(_UserHandler):
    async def delete(self, team: str, name: str) -> None:
        user, groups = self.caller()
        await self.run(self.service.cancel(user, groups, team, name))


@operations(get="getJobLog")
class JobLogHandler(_UserHandler):
    async def get(self, team: str, name: str) -> None:
        user, groups = self.caller()
        await self.run(self.service.log_of(user, groups, team, name))


@operations(get="getJobResult")
class JobResultHandler(_UserHandler):
    async def get(self, team: str, name: str) -> None:
        user, groups = self.caller()
        await self.run(self.service.result(user, groups, team, name))


@operations(post=("postJobCollected", "postJobNotified"))
class JobMarkHandler(_UserHandler):
    async def post(self, team: str, name: str, what: str) -> None:
        user, groups = self.caller()
        if what == "collected":
            path = self.json_body("postJobCollected")["path"]
            await self.run(self.service.mark(user, groups, team, name, collected=path))
        else:  # notified: takes no body
            await self.run(self.service.mark(user, groups, team, name, notified=True))


@operations(get="getJobRunnerInput", post=("postJobRunnerLog", "postJobRunnerResult"))
@web.stream_request_body
class RunnerHandler(_Streamed):
    """The Job's pod: its token, never a hub token, checked in :meth:`prepare`."""

    access: ClassVar[str] = "job-token"

    job: Any
    """The Job whose token the request carries (:meth:`JobService.runner_job`)."""

    async def prepare(self) -> None:
        self.refuse_unanswered_method()
        # the Job's token first: 403 before a byte of the body is read
        scheme, _, token = self.request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            token = ""
        try:
            self.job = await self.service.runner_job(
                self.request.headers.get("X-GPUaaS-Job", ""), token.strip()
            )
        except JobError as e:
            self.answer_error(e)
            return
        self.caller_known()
        if self.request.method == "POST":
            self.body.admit(
                self, f"an upload of at most {self.body.limit} bytes", self.context.body_timeout
            )

    async def get(self, what: str) -> None:
        try:
            if what != "input":
                raise JobError(404, "no such runner endpoint")
            self.finish(json.dumps(await self.service.runner_input(self.job)))
        except JobError as e:
            self.answer_error(e)

    async def post(self, what: str) -> None:
        if self.body.too_large is not None:
            raise self.body.too_large  # its body read and dropped
        job = self.job
        try:
            if what == "log":
                body = self.json_body("postJobRunnerLog", bytes(self.body.data))
                self.service.runner_log(job, body["log"])
                taken: ServiceJobRunnerTaken = {"accepted": True}
                self.finish(json.dumps(taken))
            elif what == "result":
                data = bytes(self.body.data)
                body = self.json_body("postJobRunnerResult", data, max_depth=NOTEBOOK_DEPTH)
                self.finish(json.dumps(await self.service.runner_result(job, body)))
            else:
                raise JobError(404, "no such runner endpoint")
        except JobError as e:
            self.answer_error(e)


def jobs_handlers(
    context: ServiceContext, service: JobService
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The notebook-Job endpoints, for :func:`gpuaas_service.web.app.make_app`."""
    prefix = context.root
    kw: dict[str, object] = {"context": context, "service": service}
    big: dict[str, object] = {**kw, "max_body": context.job_max_body}
    part = r"([a-z0-9][-a-z0-9.]{0,252})"
    return [
        (prefix + "api/jobs/options", OptionsHandler, kw),
        (prefix + "api/jobs", JobsHandler, big),
        (prefix + f"api/jobs/{part}/{part}", JobHandler, kw),
        (prefix + f"api/jobs/{part}/{part}/log", JobLogHandler, kw),
        (prefix + f"api/jobs/{part}/{part}/result", JobResultHandler, kw),
        (prefix + f"api/jobs/{part}/{part}/(collected|notified)", JobMarkHandler, kw),
        (prefix + "api/job-runner/(input|log|result)", RunnerHandler, big),
    ]

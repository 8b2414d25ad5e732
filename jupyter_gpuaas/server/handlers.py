"""HTTP handlers of `{base_url}gpuaas/api/` (docs/api.md).

Every handler is given the extension's :class:`~jupyter_gpuaas.server.context.ServerState` and
only translates between HTTP and it: the GPU sample, the activity payload, the gpuaas hub
service's answers (queue, reclaim warning, GPU jobs), and the kernels' saved variables.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

from jupyter_core.utils import ensure_async
from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.api_documents import (
    BodyRefused,
    RequestBodies,
    declare_operations,
    document_text,
)
from jupyter_gpuaas.core.kernel_state import summarise
from jupyter_gpuaas.core.parsing import MAX_BYTES
from jupyter_gpuaas.server.context import ServerState
from jupyter_gpuaas.server.jobs import SUBMIT_TIMEOUT, collect_results, job_submission
from jupyter_gpuaas.server.kernel_requests import (
    KernelStateUnavailable,
    restore_kernel,
    snapshot_all_kernels,
    snapshot_info,
    snapshot_kernel,
    state_estimate,
)
from jupyter_gpuaas.server.queue import fetch_queue
from jupyter_gpuaas.server.service_client import ServiceAnswer, ServiceClient, ServiceProblem

__all__ = ["BodyError", "GPUaaSHandler", "handlers", "operations"]

_H = TypeVar("_H", bound=type)


def operations(**ids: str) -> Callable[[_H], _H]:
    """Declare the operations (``operationId`` in the extension's OpenAPI document) a handler
    answers for each HTTP method, e.g. ``@operations(get="getJobs", post="postJob")``. Its
    ``auth_resource`` (the jupyter-server permission ``@authorized`` checks) must be each
    operation's ``x-gpuaas-access`` ``check`` (``jupyter-server:RESOURCE``), or the import
    fails (:class:`~jupyter_gpuaas.core.api_documents.AccessMismatch`): the document, the
    handlers and the route tests' table (docs/security.md) say one thing."""
    return declare_operations("extension", lambda cls: f"jupyter-server:{cls.auth_resource}", **ids)


class BodyError(web.HTTPError):
    """400: a request body that is not JSON, or not what its operation in the extension's
    OpenAPI document allows. Answered as jupyter-server answers an error (``message``,
    ``reason``) with every problem at its field path (``errors``, ``more_errors``), as the
    gpuaas service answers its own (``server_error`` in the document)."""

    def __init__(self, refused: BodyRefused) -> None:
        self.text = f"invalid request body: {refused}"
        # tornado formats log_message with %: the body's own text must not be read as a format
        super().__init__(400, self.text.replace("%", "%%"))
        self.errors = refused.errors
        self.more = refused.more

    def as_json(self) -> api.ServerError:
        return {
            "message": self.text,
            "reason": None,
            "errors": [{"path": e.path, "message": e.message} for e in self.errors],
            "more_errors": self.more,
        }


class GPUaaSHandler(ExtensionHandlerMixin, APIHandler):
    """Base of our handlers: JSON APIs that never count as user activity.

    An open sidebar polls these endpoints every few seconds. jupyter-server's APIHandler.finish()
    calls update_api_activity(), which sets settings["api_last_activity"] for every
    authenticated request unless the handler's _track_activity is False; that setting feeds
    ServerApp.last_activity(), which JupyterHub and idle cullers read. Counting polls would
    let an idle browser tab hold a GPU forever, so both are switched off here: the flag, and
    the method itself in case a jupyter-server version stops checking the flag.
    """

    _track_activity = False
    # The GPU figures describe kernels, so reading them takes the kernels read permission.
    auth_resource = "kernels"
    api_operations: ClassVar[dict[str, tuple[str, ...]]] = {}
    """What :func:`operations` declared: HTTP method -> the operations it answers."""

    def initialize(self, name: str, *args: Any, state: ServerState, **kwargs: Any) -> None:
        self.state = state
        super().initialize(name, *args, **kwargs)

    def update_api_activity(self) -> None:
        """Polling is not activity (see the class docstring)."""

    def set_default_headers(self) -> None:
        super().set_default_headers()
        self.set_header("Cache-Control", "no-store")

    def json_body(self, operation: str) -> Any:
        """The request's body for ``operation`` (its ``operationId``), checked against the
        extension's OpenAPI document (:class:`BodyError` otherwise); ``None`` when there is
        none and the operation takes none."""
        return _json_body(self, self.state.bodies, operation)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = (kwargs.get("exc_info") or (None, None))[1]
        if isinstance(error, BodyError):
            self.set_header("Content-Type", "application/json")
            self.finish(json.dumps(error.as_json()))
            return
        super().write_error(status_code, **kwargs)


def _unreachable(problem: ServiceProblem, status: int | None = None) -> api.ServiceUnreachable:
    """What the extension answers where the service gave no usable answer (``status``: the
    service's own, where it gave one)."""
    fields = problem.as_json()
    out: api.ServiceUnreachable = {"error": fields["error"], "error_kind": fields["error_kind"]}
    if status is not None:
        out["status"] = status
    return out


async def _pass_on(handler: GPUaaSHandler, path: str, unknown: Literal["warning", "known"]) -> None:
    """The service's answer to ``GET path`` as it is; where there is none, the problem with
    ``unknown`` said so (``warning: null``, ``known: false``): the sidebar shows what it can
    and says why."""
    answer = await handler.state.client.request(path)
    if answer.problem:
        out = _unreachable(answer.problem)
        if unknown == "warning":
            out["warning"] = None
        else:
            out["known"] = False
        await handler.finish(out)
    else:
        await handler.finish(answer.data)


@operations(get="getOpenAPIDocument")
class DocumentHandler(GPUaaSHandler):
    """``GET gpuaas/api/openapi.json``: the extension's OpenAPI document, for API tools, with
    the permission jupyter-server asks for its own ``api/spec.yaml``."""

    auth_resource = "api"

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(document_text("extension"))


@operations(get="getUsage")
class UsageHandler(GPUaaSHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        sample = await self.state.sampler.sample()
        await self.finish(sample.usage_json)


@operations(get="getActivity")
class ActivityHandler(GPUaaSHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(await self.state.activity_now())


@operations(get="getQueue")
class QueueHandler(GPUaaSHandler):
    """Reads the user's queue; like the other endpoints, polling it is not activity."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(await fetch_queue(self.state.client))


@operations(get="getReclaim")
class ReclaimHandler(GPUaaSHandler):
    """``GET gpuaas/api/reclaim``: this server's pending reclaim warning (or ``null``)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await _pass_on(self, "api/reclaim", unknown="warning")


@operations(get="getReclaimStanding")
class StandingHandler(GPUaaSHandler):
    """``GET gpuaas/api/reclaim/standing``: the reclaim policy that applies to this server and
    where it stands (the service's last plan, for this server only)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await _pass_on(self, "api/reclaim/standing", unknown="known")


@operations(post="postReclaimSnooze")
class SnoozeHandler(GPUaaSHandler):
    """``POST gpuaas/api/reclaim/snooze``: "Keep my GPU" (409 when no snooze is left)."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        answer = await self.state.client.request(
            "api/reclaim/snooze", method="POST", accept=(200, 409)
        )
        if answer.problem:
            self.set_status(502)
            await self.finish(_unreachable(answer.problem))
        else:
            self.set_status(answer.status)
            await self.finish(answer.data)


def _answer(handler: web.RequestHandler, answer: ServiceAnswer) -> None:
    if answer.problem is not None and answer.status in (0, 401, 403) and not answer.data:
        handler.set_status(200 if answer.status == 0 else 502)
        handler.finish(json.dumps(_unreachable(answer.problem, answer.status)))
        return
    handler.set_status(answer.status or 502)
    handler.finish(json.dumps(answer.data))


def _json_body(handler: web.RequestHandler, bodies: RequestBodies, operation: str) -> Any:
    """The request's body as JSON, checked against ``operation``'s in the document (``None``:
    none sent, where the operation allows that); :class:`BodyError` when it is not JSON, is
    nested deeper than the project's JSON reader takes, or is not what the document allows."""
    data = handler.request.body or b""
    try:
        return bodies.read(operation, data, max_bytes=max(len(data), MAX_BYTES))
    except BodyRefused as e:
        raise BodyError(e) from None


class _JobsHandler(GPUaaSHandler):
    def client(self, timeout: float | None = None) -> ServiceClient:
        client = self.state.client
        return replace(client, timeout=timeout) if timeout else client


@operations(get="getJobOptions")
class JobsOptionsHandler(_JobsHandler):
    @web.authenticated
    @authorized
    async def get(self) -> None:
        _answer(self, await self.client().request("api/jobs/options"))


@operations(get="getJobs", post="postJob")
class JobsHandler(_JobsHandler):
    """``GET gpuaas/api/jobs``: the user's jobs (collecting finished ones' results);
    ``POST`` (``{"path", "offering", "count", "image", "size", "time_limit", "parameters",
    "team"}``): reads the notebook from the contents manager and sends it."""

    auth_resource = "contents"  # it reads the notebook to send

    @web.authenticated
    @authorized
    async def get(self) -> None:
        client = self.client()
        answer = await client.request("api/jobs")
        if answer.problem is None:
            await collect_results(client, self.contents_manager, answer.data.get("jobs") or [])
        _answer(self, answer)

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("postJob")
        path = body["path"].strip("/")
        model = await ensure_async(
            self.contents_manager.get(path, content=True, type="notebook")  # type: ignore[no-untyped-call]
        )
        notebook = json.loads(json.dumps(model["content"]))  # NotebookNode → plain JSON
        answer = await self.client(SUBMIT_TIMEOUT).request(
            "api/jobs", method="POST", body=job_submission(body, path, notebook), accept=(201,)
        )
        _answer(self, answer)


@operations(delete="deleteJob")
class JobHandler(_JobsHandler):
    @web.authenticated
    @authorized
    async def delete(self, team: str, name: str) -> None:
        _answer(self, await self.client().request(f"api/jobs/{team}/{name}", method="DELETE"))


@operations(get="getJobLog")
class JobLogHandler(_JobsHandler):
    @web.authenticated
    @authorized
    async def get(self, team: str, name: str) -> None:
        _answer(self, await self.client().request(f"api/jobs/{team}/{name}/log"))


@operations(post="postJobNotified")
class JobNotifiedHandler(_JobsHandler):
    @web.authenticated
    @authorized
    async def post(self, team: str, name: str) -> None:
        answer = await self.client().request(f"api/jobs/{team}/{name}/notified", method="POST")
        _answer(self, answer)


@operations(get="getResize", post="postResize")
class ResizeHandler(_JobsHandler):
    """``GET gpuaas/api/resize``: this server's offering and the next size up; ``POST``
    (``{}`` or ``{"offering": SLUG}``): the gpuaas service stops this server and starts it
    again on the bigger offering (it answers 202 first; docs/api.md). The sidebar saves every
    open document before it asks; with ``c.GPUaaS.kernel_state_on_reclaim`` every idle kernel
    saves its variables first (within ``kernel_state_timeout``), so that each notebook gets
    them back when it opens on the bigger share. The server reports its activity just before
    it asks: the service records the GPU memory then held as the peak the move was made for
    (the size advice's history), which may have come after the last periodic report."""

    auth_resource = "server"  # it ends this server

    @web.authenticated
    @authorized
    async def get(self) -> None:
        _answer(self, await self.client(RESIZE_TIMEOUT).request("api/resize"))

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("postResize") or {}
        if self.state.reporter is not None:
            try:
                await self.state.reporter.report_once()
            except Exception:  # the move goes on: its peak is then the last report's
                self.log.exception("GPUaaS: the activity report before the move failed")
        if self.state.keeps_state_on_moves:
            settings = self.state.kernel_state
            outcomes = await snapshot_all_kernels(
                self.serverapp, settings, deadline_s=settings.timeout
            )
            if outcomes:
                self.log.info("GPUaaS: before the move to a bigger GPU: %s", summarise(outcomes))
        answer = await self.client(RESIZE_TIMEOUT).request(
            "api/resize", method="POST", body=body, accept=(202,)
        )
        _answer(self, answer)


@operations(get="getKernelState")
class KernelStateHandler(GPUaaSHandler):
    """``GET gpuaas/api/kernel-state?path=NOTEBOOK``: what the notebook's saved variables are,
    read from the snapshot's manifest (nothing is loaded; docs/kernel-state.md)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = _notebook(self.get_query_argument("path", ""))
        await self.finish(snapshot_info(path, self.state.kernel_state, Path.home()))


@operations(get="getKernelStateEstimate")
class KernelStateEstimateHandler(GPUaaSHandler):
    """``GET gpuaas/api/kernel-state/estimate``: what a reclaim now would keep of each kernel's
    variables and in all, and about how long saving them would take (each idle kernel's own
    estimate, asked at most every 5 minutes with a silent request; nothing is saved)."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self.finish(await state_estimate(self.serverapp, self.state.state_sizes))


@operations(post="postKernelStateSnapshot")
class KernelSnapshotHandler(GPUaaSHandler):
    """``POST gpuaas/api/kernel-state/snapshot`` (``{}``: every kernel; ``{"kernel_id"}``:
    one): each idle kernel saves its variables, within ``c.GPUaaS.kernel_state_timeout``."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        kernel_id = (self.json_body("postKernelStateSnapshot") or {}).get("kernel_id")
        settings = self.state.kernel_state
        if kernel_id is None:
            outcomes = await snapshot_all_kernels(
                self.serverapp, settings, deadline_s=settings.timeout
            )
        else:
            kernel_id = _kernel(self, kernel_id)
            notebook = await _session_path(self, kernel_id)
            outcomes = [
                await snapshot_kernel(
                    self.kernel_manager,
                    kernel_id,
                    notebook,
                    settings,
                    deadline_s=settings.timeout,
                )
            ]
        answer: api.KernelStateSnapshot = {
            "outcomes": [o.to_json() for o in outcomes],
            "summary": summarise(outcomes),
        }
        await self.finish(answer)


@operations(post="postKernelStateRestore")
class KernelRestoreHandler(GPUaaSHandler):
    """``POST gpuaas/api/kernel-state/restore`` (``{"kernel_id", "path", "force"}``): the
    notebook's saved variables into its new kernel; a kernel that has run cells is left alone
    unless ``force``. A refused snapshot is a 200 with ``status: "refused"`` and why."""

    @web.authenticated
    @authorized
    async def post(self) -> None:
        body = self.json_body("postKernelStateRestore")
        path = _notebook(body["path"])
        kernel_id = _kernel(self, body["kernel_id"])
        answer: api.KernelStateRestore
        try:
            answer = await restore_kernel(
                self.kernel_manager,
                kernel_id,
                path,
                self.state.kernel_state,
                force=body.get("force", False),
            )
        except KernelStateUnavailable as e:
            self.set_status(409)
            answer = {
                "path": path,
                "kernel_id": kernel_id,
                "status": "unavailable",
                "message": str(e),
            }
        await self.finish(answer)


def _notebook(path: str) -> str:
    path = path.strip("/")
    if not path:
        raise web.HTTPError(400, "name the notebook: path=<notebook>.ipynb")
    return path


def _kernel(handler: GPUaaSHandler, kernel_id: str) -> str:
    """``kernel_id`` (a non-empty string: the document says so) of a running kernel; 404 when
    none runs."""
    if kernel_id not in handler.kernel_manager:
        raise web.HTTPError(404, f"no running kernel {kernel_id[:40]}")
    return kernel_id


async def _session_path(handler: GPUaaSHandler, kernel_id: str) -> str:
    """The path of the kernel's notebook (or console) session; ``""`` if it has none."""
    sessions: Any = handler.session_manager
    for session in await sessions.list_sessions():
        if (session.get("kernel") or {}).get("id") == kernel_id:
            return str(session.get("path") or "")
    return ""


RESIZE_TIMEOUT = 20.0
"""Seconds the service may take to check a move (it asks the hub) before it answers."""


def handlers(state: ServerState) -> list[tuple[str, type, dict[str, Any]]]:
    """The extension's routes, relative to ``base_url``, each handler given ``state``."""
    base = r"/gpuaas/api/"
    part = r"([a-z0-9][-a-z0-9.]{0,252})"
    kw = {"state": state}
    return [
        (base + "openapi.json", DocumentHandler, kw),
        (base + "usage", UsageHandler, kw),
        (base + "activity", ActivityHandler, kw),
        (base + "queue", QueueHandler, kw),
        (base + "reclaim", ReclaimHandler, kw),
        (base + "reclaim/snooze", SnoozeHandler, kw),
        (base + "jobs/options", JobsOptionsHandler, kw),
        (base + "jobs", JobsHandler, kw),
        (base + f"jobs/{part}/{part}", JobHandler, kw),
        (base + f"jobs/{part}/{part}/log", JobLogHandler, kw),
        (base + f"jobs/{part}/{part}/notified", JobNotifiedHandler, kw),
        (base + "reclaim/standing", StandingHandler, kw),
        (base + "resize", ResizeHandler, kw),
        (base + "kernel-state", KernelStateHandler, kw),
        (base + "kernel-state/estimate", KernelStateEstimateHandler, kw),
        (base + "kernel-state/snapshot", KernelSnapshotHandler, kw),
        (base + "kernel-state/restore", KernelRestoreHandler, kw),
    ]

"""Tornado bases of the gpuaas service's handlers: JSON answers and errors, the hub's auth.

Who may call a route is said once, in its operation's ``x-gpuaas-access`` ``check`` in the
service's OpenAPI document. Each base here makes one check, named by its ``access``; each
handler declares the operations it answers with :func:`operations`, which refuses (as the
module is imported) a handler whose base makes another check than the document's. The route
tests' tables are the same document's (tests/unit/service/web/test_routes.py)."""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar, cast

from jupyterhub.services.auth import HubAuthenticated
from tornado import web

from gpuaas_service.reclaim.loop import ReclaimLoop
from gpuaas_service.web.connections import ConnectionGate, identified
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.api_documents import BodyRefused, declare_operations
from jupyter_gpuaas.core.fields import FieldError
from jupyter_gpuaas.core.parsing import MAX_DEPTH

__all__ = [
    "BodyAfterCaller",
    "BodyError",
    "HubJSONHandler",
    "HubUserHandler",
    "JSONHandler",
    "OperatorTokenHandler",
    "ServerHandler",
    "ServerTokenHandler",
    "TooManyRequests",
    "admit_body",
    "check_operator_token",
    "error_answer",
    "limit",
    "operations",
]

_H = TypeVar("_H", bound=type)


def operations(**ids: str | tuple[str, ...]) -> Callable[[_H], _H]:
    """Declare the operations (``operationId`` in the service's OpenAPI document) a handler
    answers for each HTTP method, e.g. ``@operations(get="getJobs", post="postJob")``; a
    tuple where the path picks one of several. Its base's check (``access``) must be each
    operation's ``x-gpuaas-access`` ``check``, or the import fails
    (:class:`~jupyter_gpuaas.core.api_documents.AccessMismatch`)."""
    return declare_operations("service", lambda cls: cls.access, **ids)


MAX_ERRORS_SHOWN = 20


def error_answer(
    status: int,
    message: str,
    errors: Sequence[FieldError] | None = None,
    *,
    more_errors: int = 0,
    **extra: Any,
) -> api.ServiceError:
    """The JSON of every refused request (``service_error`` in the API schema): the status and
    why; with ``errors``, the first :data:`MAX_ERRORS_SHOWN` problems at their field paths and
    how many more (``more_errors``: those the caller left out already); ``extra``: what a
    refusal adds (a job cap's ``cap``, ``limit``, ``active``)."""
    answer: api.ServiceError = {"status": status, "message": message}
    answer.update(cast(api.ServiceError, extra))  # a refusal's own fields: checked by its tests
    if errors is not None:
        shown = errors[:MAX_ERRORS_SHOWN]
        answer["errors"] = [{"path": e.path, "message": e.message} for e in shown]
        answer["more_errors"] = more_errors + len(errors) - len(shown)
    return answer


class BodyError(web.HTTPError):
    """400: a request body that is not JSON, or not what its operation in the service's
    OpenAPI document allows; answered as ``service_error`` with every problem at its field
    path (:func:`error_answer`)."""

    def __init__(self, refused: BodyRefused, what: str = "request body") -> None:
        self.text = f"invalid {what}: {refused}"
        # tornado formats log_message with %: the body's own text must not be read as a format
        super().__init__(400, self.text.replace("%", "%%"))
        self.errors = refused.errors
        self.more = refused.more

    def as_json(self) -> api.ServiceError:
        return error_answer(400, self.text, self.errors, more_errors=self.more)


@web.stream_request_body
class BodyAfterCaller(web.RequestHandler):
    """A handler whose request body is read only after ``prepare()`` (where the caller is
    checked, on the headers alone), so that an anonymous client cannot hold a connection open
    by trickling a body: it is answered 403 (or 405) and cut off first. Every handler of the
    service is one (tests/unit/service/web/test_routes.py); the body, within the server's
    ``max_request_bytes`` and body timeout (web/connections.py), is ``self.request.body``
    when the method runs."""

    access: ClassVar[str] = "none"
    """The check this handler makes before its method runs (``x-gpuaas-access`` ``check``):
    none here; each base that makes one names it."""
    api_operations: ClassVar[dict[str, tuple[str, ...]]] = {}
    """What :func:`operations` declared: HTTP method -> the operations it answers."""

    def data_received(self, chunk: bytes) -> None:
        self.request.body += chunk

    def refuse_unanswered_method(self) -> None:
        """405 for a method this handler does not answer, before its body is read (tornado's
        own 405 comes after it). Call first in ``prepare()``."""
        method = self.request.method or ""
        name = method.lower()
        if method in self.SUPPORTED_METHODS and getattr(type(self), name, None) is getattr(
            web.RequestHandler, name, None
        ):
            raise web.HTTPError(405)

    def prepare(self) -> Any:
        self.refuse_unanswered_method()


class JSONHandler(BodyAfterCaller):
    """Answers JSON, never cached; errors as ``{"status", "message"}`` with the reason given.

    Each handler's ``initialize()`` takes the service's context (and its part) and calls
    :meth:`bind`."""

    context: ServiceContext

    def bind(self, context: ServiceContext) -> None:
        self.context = context

    def caller_known(self) -> None:
        """The caller passed its check: this connection no longer counts against the cap on
        connections that have not shown who they are (web/connections.py)."""
        identified(self, self.context.connections)

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    def json_body(
        self,
        operation: str,
        data: bytes | None = None,
        *,
        what: str = "request body",
        max_bytes: int | None = None,
        max_depth: int = MAX_DEPTH,
    ) -> Any:
        """The request's body (``data``: the handler's own copy of it) for ``operation`` (its
        ``operationId``), checked against the service's OpenAPI document; ``None`` when there is
        none and the operation takes none. :class:`BodyError` (a 400 saying it is an invalid
        ``what``, with every problem at its field path) when it is not JSON, not within
        ``max_bytes`` (default: as the server bounded it) and ``max_depth``, or not what the
        document allows. Call it once the caller is known and counted against its limits."""
        body = self.request.body if data is None else data
        try:
            return self.context.bodies.read(
                operation, body, max_bytes=max_bytes, max_depth=max_depth
            )
        except BodyRefused as e:
            raise BodyError(e, what) from None

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        reason = self._reason
        exc = kwargs.get("exc_info")
        if exc and isinstance(exc[1], BodyError):
            self.finish(json.dumps(exc[1].as_json()))
            return
        if exc and isinstance(exc[1], web.HTTPError) and exc[1].log_message:
            reason = exc[1].log_message
        if exc and isinstance(exc[1], TooManyRequests):
            # send_error() clears the headers set before the error was raised: set it here
            self.set_header("Retry-After", str(exc[1].retry_after))
        self.finish(json.dumps(error_answer(status_code, reason)))


def admit_body(
    handler: web.RequestHandler, max_body: int, too_large: str, timeout: float
) -> web.HTTPError | None:
    """Let a streamed request's body in (call from ``prepare()``, once the caller is known):
    up to ``max_body`` bytes (more, in chunks: the connection is closed), arriving within
    ``timeout`` seconds; until then the server's ``max_request_bytes`` holds.

    A body whose Content-Length is over ``max_body`` is answered 413 with ``too_large``: one of
    up to :data:`DRAINED_OVER_LIMIT` times the limit once it has been read (and dropped: the
    handler keeps none of it), so that a proxy in between, still sending it, passes the answer
    on rather than a cut connection; this returns that answer for the handler to raise when
    the body is in. A larger one is answered at once (raised here) and the connection cut."""
    connection = handler.request.connection
    length = handler.request.headers.get("Content-Length", "")
    over = length.isdigit() and int(length) > max_body
    if over and int(length) > DRAINED_OVER_LIMIT * max_body:
        raise web.HTTPError(413, too_large)
    connection.set_body_timeout(timeout)  # type: ignore[union-attr]
    connection.set_max_body_size(int(length) if over else max_body)  # type: ignore[union-attr]
    return web.HTTPError(413, too_large) if over else None


DRAINED_OVER_LIMIT = 4
"""How many times its limit a body answered 413 may be and still be read (and dropped)."""


class TooManyRequests(web.HTTPError):
    """429 with ``Retry-After`` (whole seconds, at least 1)."""

    def __init__(self, wait: float) -> None:
        super().__init__(429, f"too many requests: try again in {wait:.0f}s")
        self.retry_after = max(1, round(wait))


def check_operator_token(
    handler: web.RequestHandler, expected: str, gate: ConnectionGate | None = None
) -> None:
    """403 unless the request carries the service's ``operator_token`` (``/metrics`` and
    ``api/health`` are for Prometheus and operators, not for every hub user behind the
    proxy). No token configured: refused to everyone, with how to set one."""
    if not expected:
        raise web.HTTPError(
            403,
            "set c.GPUaaSService.operator_token (or $GPUAAS_OPERATOR_TOKEN) and send it as"
            " 'Authorization: Bearer TOKEN'",
        )
    given = handler.request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    if scheme.lower() not in ("bearer", "token") or not hmac.compare_digest(
        token.strip().encode(), expected.encode()
    ):
        raise web.HTTPError(403, "the operator token is needed (Authorization: Bearer TOKEN)")
    identified(handler, gate)


class OperatorTokenHandler(BodyAfterCaller):
    """Only with the service's ``operator_token`` (:func:`check_operator_token`), checked in
    :meth:`prepare`, before a method runs or a body is read. ``initialize()`` sets ``context``."""

    access: ClassVar[str] = "operator-token"
    context: ServiceContext

    def prepare(self) -> None:
        self.refuse_unanswered_method()
        check_operator_token(self, self.context.operator_token, self.context.connections)


def limit(context: ServiceContext, name: str, key: str) -> None:
    """429 with ``Retry-After`` when ``key`` has used up its share of the limit ``name``
    (a :class:`~gpuaas_service.web.limits.RateLimit` of the context, if configured)."""
    limiter = context.limits.get(name)
    if limiter is None:
        return
    wait = limiter.take(key, context.monotonic())
    if wait > 0:
        if context.on_refused is not None:  # the metric gpuaas_service_requests_refused
            context.on_refused(name)
        raise TooManyRequests(wait)


class HubJSONHandler(HubAuthenticated, JSONHandler):  # type: ignore[misc]
    """A :class:`JSONHandler` whose caller the hub identifies (``self.current_user``: the
    token's owner model, or ``None``)."""

    def bind(self, context: ServiceContext) -> None:
        super().bind(context)
        if context.hub_auth is not None:
            self.hub_auth = context.hub_auth

    async def prepare(self) -> None:
        self.refuse_unanswered_method()
        # HubAuthenticated's own lookup blocks on the hub; ask asynchronously instead
        # (answers are cached by HubAuth for cache_max_age seconds).
        model = await self.hub_auth.get_user(self, sync=False)
        allowed = None
        if model:
            try:
                allowed = self.check_hub_user(model)
            except Exception:  # noqa: BLE001 - UserNotAllowed: not allowed
                allowed = None
        self._hub_auth_user_cache = allowed
        if allowed:
            self.caller_known()


class HubUserHandler(HubJSONHandler):
    """A request that a hub user makes with a token of theirs (or of their server) that holds
    ``access:services!service=gpuaas``: anything else (no token, a service's, the operator
    token) is refused in :meth:`prepare`."""

    access: ClassVar[str] = "hub-user"

    async def prepare(self) -> None:
        await super().prepare()
        user = self.current_user
        if not user or user.get("kind", "user") != "user":
            raise web.HTTPError(
                403, "a user's token with the scope access:services!service=gpuaas is needed"
            )


class ServerTokenHandler(HubJSONHandler):
    """A request that only a single-user server may make, with the token the hub issued to
    it, while the hub has it running (:class:`~gpuaas_service.web.servers.ServerTokens`):
    anything else is refused in :meth:`prepare`, before any method runs or a body is read."""

    access: ClassVar[str] = "server-token"

    server_caller: tuple[str, str]
    """(user, server) of the calling server."""

    async def prepare(self) -> None:
        await super().prepare()
        if self.context.servers is None:
            raise web.HTTPError(503, "this service was started without the hub's server check")
        self.server_caller = await self.context.servers.server_of(self.current_user)


class ServerHandler(ServerTokenHandler):
    """A request from a single-user server, made with that server's own hub token, about what
    the reclaim loop knows of it."""

    loop: ReclaimLoop

    def initialize(self, context: ServiceContext, loop: ReclaimLoop) -> None:
        self.bind(context)
        self.loop = loop

    def caller(self) -> tuple[str, str]:
        """(user, server) of the calling server (checked in :meth:`prepare`)."""
        return self.server_caller

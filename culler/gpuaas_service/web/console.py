"""The GPU console's handlers (docs/console.md), under the service prefix:

- ``GET console/`` — the page (HTML + JS, polling the API below); a browser is sent through
  the hub's OAuth (``oauth_callback``), and needs the console scope.
- ``GET api/console[?team=T&team=U]`` — everything the page shows: teams, workbenches with the
  live plan, reclaims and hand-offs, the policy in force (``team=``: only those teams).
- ``GET api/console/gpus[?team=T]`` — every GPU, per node: whole GPUs, MIG slices, shares
  and fractions, with who holds each, since when, idle since, memory and utilisation, and
  what is free on each node.
- ``GET api/console/fit[?team=T]`` — per team, each GPU server's offering, its user's recent
  peak, the advised offering and the GPU-equivalents following the advice would free.
- ``GET api/console/snapshot`` — the last cycle's inputs for ``gpuaas-admin --explain``.
- ``GET api/console/export?day=YYYY-MM-DD&format=csv|json`` — GPU-equivalent hours, reclaims
  and failed starts by team, user and offering.
- ``POST api/console/preview`` — a pasted policy (the body, YAML): its field errors, or what it
  would do now on the live state. Never changes the policy in force.
- ``GET api/reclaim/standing`` — for a server's own token: its policy and where it stands.

The console's endpoints need the custom hub scope :data:`CONSOLE_SCOPE` (``custom:gpuaas:console``;
``custom:gpuaas:console!group=G``: only team ``G``); the rest get 403. A cookie-authenticated POST
needs the hub's XSRF token (``X-XSRFToken``, given in the page), as JupyterHub checks its forms.
Every answer comes from the service's memory
(:class:`~gpuaas_service.console.answers.ConsoleState`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date
from importlib import resources
from typing import Any, ClassVar, Literal

from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
from tornado import escape, web

from gpuaas_service import api_types as service_api
from gpuaas_service.console.answers import ConsoleState, export_csv, export_rows
from gpuaas_service.console.preview import MAX_POLICY_BYTES, PreviewError, preview
from gpuaas_service.console.standing import standing
from gpuaas_service.reclaim.activity_store import server_key
from gpuaas_service.web.base import BodyAfterCaller, JSONHandler, ServerHandler, operations
from gpuaas_service.web.context import ServiceContext

__all__ = ["CONSOLE_SCOPE", "console_access", "console_handlers"]

CONSOLE_SCOPE = "custom:gpuaas:console"
"""The hub scope that opens the console (defined in ``c.JupyterHub.custom_scopes``)."""


def console_access(scopes: object) -> set[str] | Literal[False] | None:
    """``None``: every team; a set: those teams only (``!group=`` filters); ``False``: none."""
    teams: set[str] = set()
    for scope in scopes if isinstance(scopes, list) else ():
        base, _, filter_ = str(scope).partition("!")
        if base != CONSOLE_SCOPE:
            continue
        if not filter_:
            return None
        kind, _, value = filter_.partition("=")
        if kind == "group" and value:
            teams.add(value)
    return teams or False


def _asset(name: str) -> str:
    return (resources.files("gpuaas_service.console") / "static" / name).read_text("utf-8")


class _ConsoleHandler(HubOAuthenticated, JSONHandler):  # type: ignore[misc]
    """Who may see the console, and which teams (``self.teams``: ``None`` = all)."""

    access: ClassVar[str] = "console"
    console: ConsoleState
    page = False
    """A page (not the API): without a login the browser is sent to the hub's."""

    def initialize(self, context: ServiceContext, console: ConsoleState) -> None:
        self.bind(context)
        if context.console_auth is not None:
            self.hub_auth = context.console_auth
        self.console = console

    async def prepare(self) -> None:
        self.refuse_unanswered_method()
        model = await self.hub_auth.get_user(self, sync=False)
        self._hub_auth_user_cache = model or None
        if not model:
            if self.page:
                return  # the page: @web.authenticated sends the browser to the hub's login
            raise web.HTTPError(
                403,
                f"a hub token or login with the scope {CONSOLE_SCOPE} is needed (and, for a"
                " POST from a browser, the XSRF token of the console page)",
            )
        access = console_access(model.get("scopes"))
        if access is False:
            raise web.HTTPError(
                403,
                f"{model.get('kind', 'user')} {model.get('name')} lacks the scope {CONSOLE_SCOPE}"
                " (an admin grants it with a role: docs/console.md)",
            )
        self.teams: set[str] | None = access
        self.caller_known()

    def get_current_user(self) -> Any:
        return self._hub_auth_user_cache

    def finish_answer(self, plain: Callable[[], bytes], gzipped: Callable[[], bytes]) -> None:
        """Send an answer built elsewhere: gzipped to a client that takes gzip."""
        self.set_header("Vary", "Accept-Encoding")
        if "gzip" in self.request.headers.get("Accept-Encoding", ""):
            self.set_header("Content-Encoding", "gzip")
            self.finish(gzipped())
        else:
            self.finish(plain())

    def visible(self) -> set[str] | None:
        """The teams this answer holds: the caller's, narrowed by ``team=`` arguments."""
        asked = {t for t in self.get_arguments("team") if t}
        if not asked:
            return self.teams
        return asked if self.teams is None else self.teams & asked


@operations(get="getConsolePage")
class ConsolePageHandler(_ConsoleHandler):
    page = True

    @web.authenticated
    def get(self) -> None:
        self.set_header("Content-Type", "text/html; charset=utf-8")
        self.set_header(
            "Content-Security-Policy",
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
            " img-src 'self' data:; frame-ancestors 'none'",
        )
        page = _asset("console.html")
        self.finish(page.replace("{{xsrf}}", escape.xhtml_escape(self.xsrf_token)))


ASSET_TYPES = {".js": "text/javascript", ".css": "text/css"}
ASSET_PATH = re.compile(r"(?:[a-z_]+/)*[a-z_]+\.(?:js|css)")
"""The page's assets: the stylesheet and the ES modules built from console/src (``js/...``);
no dots but the extension's, so no path leaves the static folder."""


@operations(get="getConsoleStatic")
class ConsoleAssetHandler(BodyAfterCaller):
    """The page's code and stylesheet, served to anyone: they are the same for every caller and
    hold no data (the page and the API need the console scope). Not behind the hub's login:
    a browser fetches a module script in CORS mode, and JupyterHub takes a cookie on such a
    request only with an XSRF header, which a module loader cannot send (every module of the
    page would be sent to the login instead)."""

    def initialize(self, context: ServiceContext, console: ConsoleState) -> None:
        """The console's keyword arguments, as its other routes take them; nothing is needed."""

    def get(self, name: str) -> None:
        if not ASSET_PATH.fullmatch(name):
            raise web.HTTPError(404, f"no asset {name[:80]}")
        try:
            text = _asset(name)
        except (FileNotFoundError, IsADirectoryError):
            raise web.HTTPError(
                404, f"no asset {name} (is the console built? make install)"
            ) from None
        self.set_header("Content-Type", ASSET_TYPES[name[name.rindex(".") :]] + "; charset=utf-8")
        self.finish(text)


@operations(get="getConsole")
class ConsoleAPIHandler(_ConsoleHandler):
    """The last build's bytes (gzipped for a client that takes gzip): nothing is built or
    serialised per request (console/answers.py)."""

    def get(self) -> None:
        only = self.visible()
        self.finish_answer(
            lambda: self.console.answer_json(only), lambda: self.console.answer_gzip(only)
        )


@operations(get="getConsoleGpus")
class ConsoleGpusHandler(_ConsoleHandler):
    """Every GPU, held or free: node, holding, holder, since, activity, memory, utilisation (the
    cycle's bytes, as ``api/console``'s)."""

    view = "gpus"

    def get(self) -> None:
        only = self.visible()
        self.finish_answer(
            lambda: self.console.view_json(self.view, only),
            lambda: self.console.view_gzip(self.view, only),
        )


@operations(get="getConsoleFit")
class ConsoleFitHandler(ConsoleGpusHandler):
    """Each GPU server against its user's recent peaks and the advised offering."""

    view = "fit"


class _AllTeamsHandler(_ConsoleHandler):
    """For those who see every team only: a team lead's ``!group=T`` is refused in
    :meth:`prepare`, saying why (``every_team``)."""

    access: ClassVar[str] = "console-all-teams"
    every_team = "it holds every team"

    async def prepare(self) -> None:
        await super().prepare()
        if self.teams is not None:
            raise web.HTTPError(403, f"{self.every_team}: {CONSOLE_SCOPE} unfiltered")


@operations(get="getConsoleSnapshot")
class ConsoleSnapshotHandler(_AllTeamsHandler):
    every_team = "the snapshot holds every team"

    def get(self) -> None:
        snap = self.console.snapshot()
        if snap is None:
            raise web.HTTPError(409, "no complete reclaim cycle yet (is a policy in force?)")
        self.finish(json.dumps(snap))


@operations(get="getConsoleChecks")
class ConsoleChecksHandler(_AllTeamsHandler):
    """The doctor's checks (``gpuaas-admin --doctor``, as the service's own account): for
    those who see every team only; ``?fresh=1`` runs them again now."""

    every_team = "the checks are the operators'"

    async def get(self) -> None:
        if self.context.checks is None:
            raise web.HTTPError(404, "the checks are not offered by this service")
        fresh = self.get_argument("fresh", "") in ("1", "true")
        self.finish(json.dumps(await self.context.checks(fresh=fresh)))


def export_day(raw: str, today: date) -> date:
    """The export's ``day`` query parameter: ``YYYY-MM-DD``, today when absent; a
    :class:`ValueError` that says what is wrong (quoting at most 20 characters) otherwise."""
    if not raw:
        return today
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise ValueError(f"day={raw[:20]!r} is not a date (YYYY-MM-DD)") from None


@operations(get="getConsoleExport")
class ConsoleExportHandler(_ConsoleHandler):
    def get(self) -> None:
        try:
            day = export_day(self.get_argument("day", ""), self.console.clock().date())
        except ValueError as e:
            raise web.HTTPError(400, str(e)) from None
        fmt = self.get_argument("format", "json")
        record = self.console.record
        rows = export_rows(record.ledger, day, self.teams, record.journal.entries)
        name = f"gpuaas-gpu-hours-{day.isoformat()}"
        if fmt == "csv":
            self.set_header("Content-Type", "text/csv; charset=utf-8")
            self.set_header("Content-Disposition", f'attachment; filename="{name}.csv"')
            self.finish(export_csv(rows))
        elif fmt == "json":
            answer: service_api.ServiceConsoleExport = {
                "day": day.isoformat(),
                "unit": "GPU-equivalent hours",
                "rows": rows,
            }
            self.finish(json.dumps(answer))
        else:
            raise web.HTTPError(400, f"format={fmt[:20]!r}: csv or json")


@operations(post="postConsolePreview")
class ConsolePreviewHandler(_ConsoleHandler):
    def post(self) -> None:
        body = self.request.body or b""
        if len(body) > MAX_POLICY_BYTES:
            raise web.HTTPError(413, f"a policy of at most {MAX_POLICY_BYTES} bytes")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise web.HTTPError(400, "the policy must be UTF-8 text") from None
        snap = self.console.snapshot()
        if snap is None:
            raise web.HTTPError(409, "no complete reclaim cycle yet: nothing to preview on")
        cycle = self.console.loop.state
        inputs = cycle.last_inputs
        try:
            answer = preview(
                snap,
                text,
                cycle.last_plan,
                dry_run=bool(inputs and inputs.dry_run),
                teams=self.teams,
            )
        except PreviewError as e:
            self.set_status(400)
            self.finish(json.dumps(e.as_json()))
            return
        self.finish(json.dumps(answer))


@operations(get="getReclaimStanding")
class StandingHandler(ServerHandler):
    """``GET api/reclaim/standing``: this server's policy and next step (its own token)."""

    def get(self) -> None:
        user, server = self.caller()
        state = self.loop.state
        key, now = server_key(user, server), self.loop.clock()
        report = self.loop.store.report(key)
        size = report.activity.kernel_state_bytes if report is not None else None
        answer = standing(state.last_plan, state.policies, key, now=now, state_bytes=size)
        self.finish(json.dumps(answer))


@operations(get="getOauthCallback")
class OAuthCallbackHandler(BodyAfterCaller, HubOAuthCallbackHandler):  # type: ignore[misc]
    """The hub's OAuth callback, with the console's :class:`HubOAuth`."""

    def initialize(self, context: ServiceContext) -> None:
        if context.console_auth is not None:
            self.hub_auth = context.console_auth


@operations(get="getRoot")
class _Root(BodyAfterCaller):
    def get(self) -> None:
        self.redirect(self.request.path.rstrip("/") + "/console/")


def console_handlers(
    context: ServiceContext, console: ConsoleState
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The console's endpoints, for :func:`gpuaas_service.web.app.make_app` (the app needs a
    ``cookie_secret`` for the OAuth state cookie)."""
    prefix = context.root
    kw: dict[str, object] = {"context": context, "console": console}
    return [
        (prefix, _Root, {}),
        (prefix + "oauth_callback", OAuthCallbackHandler, {"context": context}),
        (prefix + "console/?", ConsolePageHandler, kw),
        (prefix + r"console/static/([a-z_/.]+)", ConsoleAssetHandler, kw),
        (prefix + "api/console", ConsoleAPIHandler, kw),
        (prefix + "api/console/gpus", ConsoleGpusHandler, kw),
        (prefix + "api/console/fit", ConsoleFitHandler, kw),
        (prefix + "api/console/snapshot", ConsoleSnapshotHandler, kw),
        (prefix + "api/console/checks", ConsoleChecksHandler, kw),
        (prefix + "api/console/export", ConsoleExportHandler, kw),
        (prefix + "api/console/preview", ConsolePreviewHandler, kw),
        (
            prefix + "api/reclaim/standing",
            StandingHandler,
            {"context": context, "loop": console.loop},
        ),
    ]

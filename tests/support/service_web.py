"""Stand-ins for the parts of the service that its web tests do not exercise, and the service's
whole web application with every part (for the route and connection tests)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, cast

from jupyterhub.services.auth import HubOAuth
from tornado import web
from tornado.routing import PathMatches

from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.servers import ServerTokens
from tests.support.hub_tokens import TokenHub
from tests.support.jobs_samples import FakeKube, service
from tests.support.route_table import answered_methods
from tests.support.service_samples import NS
from tests.support.service_world import World


class QueueIndexStub:
    """The queue index as the handlers read it: synced, nobody has queued work."""

    rebuilds = 0
    polled_queues = ()

    class view:
        @staticmethod
        def queue_state() -> Any:
            return type("S", (), {"synced": True})()

    def answer(self, user: str, groups: Any) -> dict[str, Any]:
        """An empty queue, as the service's API document describes its answer."""
        return {
            "user": user,
            "generated_at": "2026-12-01T00:00:00+00:00",
            "synced": True,
            "items": [],
            "teams": [],
            "error": None,
            "error_kind": None,
        }


PREFIX = "/services/gpuaas/"


def registered(app: web.Application) -> list[tuple[re.Pattern[str], type, list[str]]]:
    """Each route's pattern, handler and the methods it answers."""
    out = []
    for rule in app.wildcard_router.rules:
        assert isinstance(rule.matcher, PathMatches)
        handler = cast(type, rule.target)
        out.append((rule.matcher.regex, handler, answered_methods(handler)))
    return out


def full_context() -> ServiceContext:
    """Every part of the service, so that every route is registered."""
    w, hub = World(), TokenHub()
    console = ConsoleState(
        w.loop,
        w.view,
        notebook_namespace=NS,
        job_namespaces=["team-a"],
        regret_window=timedelta(hours=1),
    )
    return ServiceContext(
        hub_auth=cast(Any, hub),
        console_auth=HubOAuth(
            api_token="service-token",
            api_url="http://127.0.0.1:9/hub/api",
            oauth_client_id="service-gpuaas",
            oauth_redirect_uri="http://127.0.0.1/services/gpuaas/oauth_callback",
        ),
        servers=ServerTokens(hub),
        operator_token="op-secret",
        index=cast(Any, QueueIndexStub()),
        loop=w.loop,
        console=console,
        jobs=service(FakeKube()),
        resize=Resizer(cast(Any, hub), lambda: None),  # no catalog: 503 once let in
    )

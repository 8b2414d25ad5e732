"""The gpuaas service's queue endpoints, under the service prefix (``/services/gpuaas/``):

- ``GET api/queue`` — the calling user's pending GPU work with Kueue queue positions and
  per-team counts, for the sidebar (through the server extension, with the server's own token,
  scope ``access:services!service=gpuaas``);
- ``GET api/health`` — whether its caches are synced, which LocalQueues it polls, how many
  requests it served and how often it rebuilt its index, the policy's state (docs/queue.md);
  only with the operator token (``Authorization: Bearer``, docs/security.md).

Everything is answered from memory (:class:`gpuaas_service.queue.index.QueueIndex`); callers are
identified by the hub (``HubAuth``, cached for ``cache_max_age``).
"""

from __future__ import annotations

import json
from typing import Any

from tornado import web

from gpuaas_service.queue.index import QueueIndex
from gpuaas_service.web.base import HubJSONHandler, JSONHandler, check_operator_token, limit
from gpuaas_service.web.limits import RateLimit

__all__ = ["HealthHandler", "QueueHandler", "make_app"]


class QueueHandler(HubJSONHandler):
    """``GET api/queue``: the caller's own pending GPU work (never anybody else's)."""

    def get(self) -> None:
        user = self.current_user
        if not user or user.get("kind", "user") != "user":
            raise web.HTTPError(
                403, "a user's token with the scope access:services!service=gpuaas is needed"
            )
        limit(self, "queue", str(user["name"]))
        index: QueueIndex = self.settings["queue_index"]
        self.settings["stats"]["requests"] += 1
        self.finish(json.dumps(index.answer(user["name"], user.get("groups") or ())))


class HealthHandler(JSONHandler):
    def get(self) -> None:
        check_operator_token(self)
        index: QueueIndex = self.settings["queue_index"]
        stats = self.settings["stats"]
        self.finish(
            json.dumps(
                {
                    "synced": index.view.queue_state().synced,
                    "polled_queues": index.polled_queues,
                    "requests_served": stats["requests"],
                    "index_rebuilds": index.rebuilds,
                    **{k: f() for k, f in self.settings["health_extra"].items()},
                }
            )
        )


def make_app(
    index: QueueIndex,
    *,
    prefix: str = "/services/gpuaas/",
    hub_auth: Any = None,
    operator_token: str = "",
    limits: dict[str, RateLimit] | None = None,
) -> web.Application:
    """The service's tornado app with its queue endpoints (the culler adds its own:
    :func:`gpuaas_service.web.reclaim.reclaim_handlers`)."""
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    settings: dict[str, Any] = {
        "queue_index": index,
        "stats": {"requests": 0},
        "operator_token": operator_token,
        "limits": limits or {},
        "health_extra": {},
    }
    if hub_auth is not None:
        settings["hub_auth"] = hub_auth
    app = web.Application(
        [
            (prefix + "api/queue", QueueHandler),
            (prefix + "api/health", HealthHandler),
        ],
        **settings,
    )
    if hub_auth is not None:
        QueueHandler.hub_auth = hub_auth
    return app

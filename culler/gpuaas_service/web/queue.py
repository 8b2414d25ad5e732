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

from tornado import web

from gpuaas_service import api_types as service_api
from gpuaas_service.queue.index import QueueIndex
from gpuaas_service.web.base import (
    HubUserHandler,
    JSONHandler,
    OperatorTokenHandler,
    limit,
    operations,
)
from gpuaas_service.web.context import ServiceContext

__all__ = ["HealthHandler", "QueueHandler", "queue_handlers"]


@operations(get="getQueue")
class QueueHandler(HubUserHandler):
    """``GET api/queue``: the caller's own pending GPU work (never anybody else's)."""

    def initialize(self, context: ServiceContext, index: QueueIndex) -> None:
        self.bind(context)
        self.index = index

    def get(self) -> None:
        user = self.current_user
        limit(self.context, "queue", str(user["name"]))
        self.context.stats.requests += 1
        self.finish(json.dumps(self.index.answer(user["name"], user.get("groups") or ())))


@operations(get="getHealth")
class HealthHandler(OperatorTokenHandler, JSONHandler):
    def initialize(self, context: ServiceContext, index: QueueIndex) -> None:
        self.bind(context)
        self.index = index

    def get(self) -> None:
        index = self.index
        answer: service_api.ServiceHealth = {
            "synced": index.view.queue_state().synced,
            "polled_queues": index.polled_queues,
            "requests_served": self.context.stats.requests,
            "index_rebuilds": index.rebuilds,
        }
        if self.context.health_policy is not None:
            answer["policy"] = self.context.health_policy()
        self.finish(json.dumps(answer))


def queue_handlers(
    context: ServiceContext, index: QueueIndex
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The queue's endpoints, for :func:`gpuaas_service.web.app.make_app`."""
    kw: dict[str, object] = {"context": context, "index": index}
    return [
        (context.root + "api/queue", QueueHandler, kw),
        (context.root + "api/health", HealthHandler, kw),
    ]

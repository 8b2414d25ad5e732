"""``GET``/``POST api/resize``: the endpoint of the way up and the way down (docs/api.md);
what a move is and how it is carried out is :mod:`gpuaas_service.resize`."""

from __future__ import annotations

import json

from tornado import web

from gpuaas_service.resize.plan import ResizeRefused
from gpuaas_service.resize.resizer import Resizer
from gpuaas_service.web.base import ServerTokenHandler, error_answer, limit, operations
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.fields import FieldError

__all__ = ["ResizeHandler", "resize_handlers"]


@operations(get="getResize", post="postResize")
class ResizeHandler(ServerTokenHandler):
    """``GET``/``POST api/resize``: only the server's own token, for that server."""

    resizer: Resizer

    def initialize(self, context: ServiceContext, resizer: Resizer) -> None:
        self.bind(context)
        self.resizer = resizer

    def _caller(self) -> tuple[str, str, list[str]]:
        user, server = self.server_caller
        limit(self.context, "queue", user)
        return user, server, [str(g) for g in self.current_user.get("groups") or ()]

    def _refused(self, e: ResizeRefused) -> None:
        self.set_status(e.status)
        errors = [FieldError(e.path, str(e))] if e.path else None
        self.finish(json.dumps(error_answer(e.status, str(e), errors)))

    async def get(self) -> None:
        user, server, groups = self._caller()
        try:
            self.finish(json.dumps(await self.resizer.offer(user, server, groups)))
        except ResizeRefused as e:
            self._refused(e)

    async def post(self) -> None:
        user, server, groups = self._caller()
        body = self.json_body("postResize", max_bytes=4096)
        try:
            answer = await self.resizer.move(user, server, groups, body)
        except ResizeRefused as e:
            self._refused(e)
            return
        self.set_status(202)
        self.finish(json.dumps(answer))


def resize_handlers(
    context: ServiceContext, resizer: Resizer
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    kw: dict[str, object] = {"context": context, "resizer": resizer}
    return [(context.root + "api/resize", ResizeHandler, kw)]

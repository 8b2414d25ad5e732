"""``GET api/openapi.json``: the service's own OpenAPI document, self-contained, for the tools a
reader points at an API (a validator, Swagger UI or Redoc, a client generator), as
jupyter-server serves its ``api/spec.yaml``."""

from __future__ import annotations

from tornado import web

from gpuaas_service.web.base import HubUserHandler, operations
from gpuaas_service.web.context import ServiceContext
from jupyter_gpuaas.core.api_documents import document_text

__all__ = ["DocumentHandler", "document_handlers"]


@operations(get="getOpenAPIDocument")
class DocumentHandler(HubUserHandler):
    """Any hub user may read it: it says what the API is, nothing about anybody's work."""

    def initialize(self, context: ServiceContext) -> None:
        self.bind(context)

    def get(self) -> None:
        self.finish(document_text("service"))


def document_handlers(
    context: ServiceContext,
) -> list[tuple[str, type[web.RequestHandler], dict[str, object]]]:
    """The document's endpoint, for :func:`gpuaas_service.web.app.make_app`."""
    return [(context.root + "api/openapi.json", DocumentHandler, {"context": context})]

"""The service's tornado application: every endpoint of the parts its context holds
(:class:`~gpuaas_service.web.context.ServiceContext`)."""

from __future__ import annotations

import os

from tornado import web

from gpuaas_service.web.console import console_handlers
from gpuaas_service.web.console_history import History, history_handlers
from gpuaas_service.web.context import ServiceContext
from gpuaas_service.web.document import document_handlers
from gpuaas_service.web.jobs import jobs_handlers
from gpuaas_service.web.queue import queue_handlers
from gpuaas_service.web.reclaim import reclaim_handlers
from gpuaas_service.web.resize import resize_handlers

__all__ = ["make_app"]


def make_app(
    context: ServiceContext, *, cookie_secret: bytes | None = None, history: History | None = None
) -> web.Application:
    """The app serving ``context``'s parts. The console's OAuth state cookie is signed with
    ``cookie_secret`` (default: random; a restart only asks browsers to log in again).
    ``history``: the console's Prometheus (default: none, and its history says so)."""
    # The document is for hub users: without the hub there is nobody it could admit.
    handlers = document_handlers(context) if context.hub_auth is not None else []
    if context.index is not None:
        handlers += queue_handlers(context, context.index)
    if context.loop is not None:
        handlers += reclaim_handlers(context, context.loop)
    if context.console is not None:
        handlers += console_handlers(context, context.console)
        handlers += history_handlers(context, context.console, history or History(None))
    if context.jobs is not None:
        handlers += jobs_handlers(context, context.jobs)
    if context.resize is not None:
        handlers += resize_handlers(context, context.resize)
    if context.console is None:
        return web.Application(handlers)
    secret = cookie_secret if cookie_secret is not None else os.urandom(32)
    return web.Application(handlers, cookie_secret=secret)

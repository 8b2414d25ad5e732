"""Who may call a route is said once: its operation's ``x-gpuaas-access`` ``check``. Each
handler of both servers declares the operations it answers (``@operations``), and a handler
whose check is not its operations' fails as its class is defined; the route tests' tables are
the same documents' (tests/unit/service/web/test_routes.py, tests/real_server/test_routes.py)."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest

from gpuaas_service.web.app import make_app
from gpuaas_service.web.base import JSONHandler, ServerTokenHandler
from gpuaas_service.web.base import operations as service_operations
from jupyter_gpuaas.core.api_documents import AccessMismatch, Server
from jupyter_gpuaas.server.handlers import GPUaaSHandler, handlers
from jupyter_gpuaas.server.handlers import operations as extension_operations
from tests.support.openapi import PREFIXES, operations
from tests.support.route_table import answered_methods, concrete
from tests.support.service_web import PREFIX, full_context, registered


def _routes(server: Server) -> list[tuple[re.Pattern[str], type, list[str]]]:
    if server == "service":
        return registered(make_app(full_context()))
    return [
        (re.compile(pattern + "$"), handler, answered_methods(handler))
        for pattern, handler, _ in handlers(cast(Any, None))
    ]


@pytest.mark.parametrize("server", ["service", "extension"])
def test_each_handler_declares_the_operation_of_each_method_it_answers(server: Server) -> None:
    """For every registered route and method, the handler's declared operations are those of
    the document at that method and path: none missing, none of another route."""
    prefix = {"service": PREFIX, "extension": PREFIXES["extension"] + "/"}[server]
    by_id = {op["operationId"]: (method, path) for method, path, op in operations(server)}
    checked = 0
    for regex, handler, methods in _routes(server):
        declared: dict[str, tuple[str, ...]] = getattr(handler, "api_operations", {})
        assert sorted(declared) == sorted(methods), (handler.__name__, declared, methods)
        for method, ids in declared.items():
            for operation_id in ids:
                doc_method, path = by_id[operation_id]
                assert doc_method == method, (handler.__name__, operation_id)
                assert regex.fullmatch(prefix + concrete(path)), (handler.__name__, path)
                checked += 1
    assert checked == len(by_id)


def test_a_service_handler_whose_check_is_not_the_documents_fails_as_it_is_defined() -> None:
    with pytest.raises(AccessMismatch, match=r"getJobs.*'server-token'.*makes 'none'"):

        @service_operations(get="getJobs")
        class _Open(JSONHandler):
            def get(self) -> None: ...

    with pytest.raises(AccessMismatch, match=r"getHealth.*'operator-token'.*'server-token'"):

        @service_operations(get="getHealth")
        class _Server(ServerTokenHandler):
            def get(self) -> None: ...


def test_an_extension_handler_whose_permission_is_not_the_documents_fails() -> None:
    with pytest.raises(AccessMismatch, match=r"postResize.*'jupyter-server:server'.*kernels"):

        @extension_operations(post="postResize")
        class _Resize(GPUaaSHandler):
            async def post(self) -> None: ...


def test_an_operation_the_document_does_not_have_fails() -> None:
    with pytest.raises(AccessMismatch, match="no operation 'getNothing'"):

        @service_operations(get="getNothing")
        class _Nothing(JSONHandler):
            def get(self) -> None: ...

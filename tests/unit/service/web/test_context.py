"""What the service's handlers are given (gpuaas_service.web.context): the URL prefix, however
it was written, and a context that, unless told, serves no part and leaves the operator's
endpoints closed."""

from __future__ import annotations

import dataclasses

import pytest

from gpuaas_service.web.context import RequestStats, ServiceContext, service_prefix


@pytest.mark.parametrize(
    ("prefix", "root"),
    [
        ("/services/gpuaas/", "/services/gpuaas/"),
        ("services/gpuaas", "/services/gpuaas/"),
        ("//services/gpuaas//", "/services/gpuaas/"),
        ("", "/"),
        ("/", "/"),
        ("///", "/"),
    ],
)
def test_the_prefix_has_one_slash_each_side(prefix: str, root: str) -> None:
    assert service_prefix(prefix) == root
    assert ServiceContext(prefix=prefix).root == root


def test_the_default_context_serves_nothing_and_keeps_the_operators_routes_closed() -> None:
    context = ServiceContext()
    assert context.root == "/services/gpuaas/"
    parts = (context.index, context.loop, context.console, context.jobs, context.resize)
    assert parts == (None, None, None, None, None)
    assert context.operator_token == ""
    assert (context.servers, context.checks, context.connections) == (None, None, None)
    assert dict(context.limits) == {}


def test_each_context_counts_its_own_requests() -> None:
    one, two = ServiceContext(), ServiceContext()
    one.stats.requests += 1
    assert (one.stats, two.stats) == (RequestStats(1), RequestStats(0))


def test_a_context_is_built_by_keyword_and_not_changed_after() -> None:
    with pytest.raises(TypeError):
        ServiceContext("/x/")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        ServiceContext().operator_token = "x"  # type: ignore[misc]

"""The service's tornado application (gpuaas_service.web.app): a part of the context that is
absent has no routes, and the console's login cookie is signed with the secret given, else a
random one. Every route's access is tests/unit/service/web/test_routes.py's."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from gpuaas_service.web.app import make_app
from gpuaas_service.web.context import ServiceContext
from tests.support.service_web import PREFIX, QueueIndexStub, full_context, registered


def paths(context: ServiceContext, **kw: Any) -> set[str]:
    return {
        pattern.pattern.removeprefix(PREFIX)
        for pattern, _, _ in registered(make_app(context, **kw))
    }


def test_an_empty_context_has_no_routes() -> None:
    assert paths(ServiceContext()) == set()


def test_the_queue_alone_has_its_two_routes_and_no_cookie_secret() -> None:
    context = ServiceContext(index=cast(Any, QueueIndexStub()))
    assert paths(context) == {"api/queue$", "api/health$"}
    assert "cookie_secret" not in make_app(context).settings


def test_each_part_adds_its_routes_and_only_its_own() -> None:
    full = full_context()
    everything = paths(full)
    # The service's own OpenAPI document is no part's, and served wherever the hub is known.
    assert "api/openapi.json$" in everything
    assert "api/openapi.json$" not in paths(dataclasses.replace(full, hub_auth=None))
    everything.discard("api/openapi.json$")
    parts = ("index", "loop", "console", "jobs", "resize")
    seen: set[str] = set()
    for part in parts:
        absent: dict[str, Any] = {p: None for p in parts if p != part}
        alone = dataclasses.replace(full, **absent)
        own = paths(alone) - {"api/openapi.json$"}
        assert own, part
        assert not own & seen, part  # no route is two parts'
        seen |= own
    assert seen == everything


def test_the_consoles_cookie_is_signed_with_the_secret_given_else_a_random_one() -> None:
    context = full_context()
    assert make_app(context, cookie_secret=b"k" * 32).settings["cookie_secret"] == b"k" * 32
    one = make_app(context).settings["cookie_secret"]
    two = make_app(context).settings["cookie_secret"]
    assert len(one) == 32
    assert one != two

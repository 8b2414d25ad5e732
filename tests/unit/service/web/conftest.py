"""Every answer a handler of the service sends in these tests conforms to the service's OpenAPI
document (openapi-core: its operation, the status, the body's schema): a handler that answers
a status or a body its operation does not list fails the test that made it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openapi import every_answer_checked


@pytest.fixture(autouse=True)
def answers_conform_to_the_document() -> Iterator[list[str]]:
    with every_answer_checked("service", "gpuaas_service") as found:
        yield found
    assert found == []

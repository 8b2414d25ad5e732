"""Every answer a handler of the service sends in these tests conforms to the service's OpenAPI
document (openapi-core: its operation, the status, the body's schema): a handler that answers
a status or a body its operation does not list fails the test that made it."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from typing import Any

import pytest
from tornado import web

from tests.support.openapi import answer_errors

WARM_UP = b'{"status": 403, "message": "the operator token is needed"}'


@pytest.fixture(autouse=True)
def answers_conform_to_the_document(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    found: list[str] = []
    finish = web.RequestHandler.finish
    # openapi-core builds its validators on first use (about a second): not inside a timed test
    answer_errors("service", "GET", "/services/gpuaas/api/health", 403, WARM_UP)

    def checked_finish(self: web.RequestHandler, chunk: Any = None) -> Any:
        if chunk is not None:
            self.write(chunk)
        status = self.get_status()
        if (
            type(self).__module__.startswith("gpuaas_service.")
            and not self._headers_written
            and status != 405  # a method the route does not answer: no operation to check
        ):
            body = b"".join(self._write_buffer)
            if self._headers.get("Content-Encoding") == "gzip":  # an answer kept compressed
                body = gzip.decompress(body)
            content_type = str(self._headers.get("Content-Type", "application/json"))
            uri = self.request.uri or ""
            if "/services/gpuaas" in uri:
                for problem in answer_errors(
                    "service", self.request.method or "GET", uri, status, body, content_type
                ):
                    found.append(f"{self.request.method} {uri} {status}: {problem}")
        return finish(self)

    monkeypatch.setattr(web.RequestHandler, "finish", checked_finish)
    yield found
    assert found == []

"""Fourth audit, finding 2, on a real ``gpuaas-service`` process under the real hub, on its own
port (which a notebook Job's pod reaches directly): slow clients hold no connection.

- anonymous clients trickling bodies to every route that takes one are answered 403 and
  cut off at once (before: 400 such connections stayed open after 30 s);
- headers that do not arrive within ``request_header_timeout`` close the connection;
- over ``max_unidentified_connections`` silent connections, a new one is answered 503 and
  closed (and counted), and the service answers again once they are gone.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest

from devcluster.queue_hub import OPERATOR_TOKEN
from devcluster.testing import Cluster
from tests.support.hub import CullerHub, run_culler_hub

pytestmark = pytest.mark.integration

HEADER_TIMEOUT = 2
CAP = 150
BODY_ROUTES = [
    "api/activity",
    "api/resize",
    "api/reclaim/snooze",
    "api/console/preview",
    "api/jobs/team-a/nb-x/collected",
]


@pytest.fixture(scope="module")
def served(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CullerHub]:
    state = tmp_path_factory.mktemp("service-slow-clients")
    extra = [
        f"--GPUaaSService.request_header_timeout={HEADER_TIMEOUT}",
        f"--GPUaaSService.max_unidentified_connections={CAP}",
    ]
    with run_culler_hub(cluster, state, extra_args=extra) as hub:
        wait_health(hub.port)
        yield hub


def wait_health(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/services/gpuaas/api/health",
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                json.loads(r.read())
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


async def trickle(port: int, path: str) -> tuple[bytes, float]:
    """A POST announcing 100 kB without a token, sending a byte every 0.2 s: what the
    service answers before it closes the connection (``(still open)`` after 10 s), and when."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /services/gpuaas/{path} HTTP/1.1\r\nHost: x\r\n"
        "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    )
    writer.write(head.encode())
    t0 = time.monotonic()
    answer = b""

    async def send() -> None:
        try:
            for _ in range(50):
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.2)
        except ConnectionError:
            pass  # the service closed it

    sender = asyncio.ensure_future(send())
    try:
        while time.monotonic() - t0 < 10:
            chunk = await asyncio.wait_for(reader.read(4096), 10)
            if not chunk:
                return answer, time.monotonic() - t0
            answer += chunk
        return answer + b"(still open)", time.monotonic() - t0
    except ConnectionError:  # closed with bytes of ours unread: a reset, not a FIN
        return answer, time.monotonic() - t0
    except asyncio.TimeoutError:
        return answer + b"(still open)", time.monotonic() - t0
    finally:
        sender.cancel()
        writer.close()


def test_anonymous_trickled_bodies_are_refused_on_their_headers_and_cut_off(
    served: CullerHub,
) -> None:
    async def all_of_them() -> list[tuple[bytes, float]]:
        return await asyncio.gather(*(trickle(served.port, p) for p in BODY_ROUTES * 20))

    answers = asyncio.run(all_of_them())
    assert len(answers) == 100
    for answer, took in answers:
        assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
        assert not answer.endswith(b"(still open)"), answer[:200]
        assert took < 5, took


def test_headers_that_never_end_are_given_up(served: CullerHub) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as s:
        s.sendall(b"GET /services/gpuaas/api/health HTTP/1.1\r\nHost: x\r\n")
        t0 = time.monotonic()
        assert s.recv(4096) == b""  # closed, unanswered
        took = time.monotonic() - t0
    assert HEADER_TIMEOUT - 0.5 < took < HEADER_TIMEOUT + 3, took


def test_over_the_cap_a_new_connection_is_answered_503_and_a_server_is_served_after(
    served: CullerHub,
) -> None:
    silent = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(CAP)]
    try:
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"Retry-After:" in answer
    finally:
        for s in silent:
            s.close()
    time.sleep(0.5)
    wait_health(served.port, timeout=5)  # served again once they are gone
    assert 'gpuaas_service_requests_refused_total{endpoint="connections"}' in served.metrics()

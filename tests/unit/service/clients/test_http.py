"""Each collaborator's own HTTP client (``gpuaas_service.clients.http``)."""

from __future__ import annotations

from tornado.httpclient import AsyncHTTPClient

from gpuaas_service.clients.http import OwnClient


async def test_the_client_is_made_once_on_first_use_with_its_own_slots() -> None:
    own = OwnClient(max_clients=3)
    client = own()
    try:
        assert own() is client
        assert client is not AsyncHTTPClient()  # not the loop's shared instance
        assert client.max_clients == 3
    finally:
        client.close()


async def test_two_collaborators_share_nothing_and_at_least_one_slot_is_kept() -> None:
    hub, prometheus = OwnClient(max_clients=0), OwnClient(max_clients=10)
    a, b = hub(), prometheus()
    try:
        assert a is not b
        assert (a.max_clients, b.max_clients) == (1, 10)
    finally:
        a.close()
        b.close()

"""Each collaborator of the service gets an HTTP client of its own.

tornado's ``AsyncHTTPClient()`` is one instance per event loop, with at most 10 requests in
flight and the rest queued behind them: a webhook that accepts connections and never answers
would fill those 10 slots for its whole timeout and stall the Hub and Prometheus requests
queued behind it. Own instances share nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["OwnClient"]


class OwnClient:
    """A lazily made ``AsyncHTTPClient(force_instance=True)`` with ``max_clients`` slots (made
    on first use, inside the running event loop)."""

    def __init__(self, max_clients: int) -> None:
        self.max_clients = max(1, max_clients)
        self._client: Any = None

    def __call__(self) -> Any:
        if self._client is None:
            from tornado.httpclient import AsyncHTTPClient

            self._client = AsyncHTTPClient(force_instance=True, max_clients=self.max_clients)
        return self._client

"""Each collaborator of the service gets an HTTP client of its own.

tornado's ``AsyncHTTPClient()`` is one instance per event loop, with at most 10 requests in
flight and the rest queued behind them: a webhook that accepts connections and never answers
would fill those 10 slots for its whole timeout and stall the Hub and Prometheus requests
queued behind it. Own instances share nothing.

A URL's credentials (``https://user:password@host/``) are taken apart from it here, once
(:func:`split_credentials`): the URL without them is the one shown in logs, errors and
answers, the credentials go only into the request's basic auth (the Prometheus client), or the
URL is refused (the policy's webhook).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["OwnClient", "SplitURL", "split_credentials"]


@dataclass(frozen=True)
class SplitURL:
    """A URL without its credentials (``url``, the one to show), and the credentials
    (``None``: the URL carried none), percent-decoded as RFC 3986 writes them."""

    url: str
    username: str | None = None
    password: str | None = None

    @property
    def has_credentials(self) -> bool:
        return self.username is not None or self.password is not None


def split_credentials(url: str) -> SplitURL:
    """``url``'s ``user:password@`` taken out of it. A URL that does not parse keeps no
    credentials either: everything up to an ``@`` in its authority is cut."""
    try:
        parts = urlsplit(url)
        username, password = parts.username, parts.password
    except ValueError:  # e.g. an unclosed IPv6 bracket or a bad port
        return SplitURL(re.sub(r"^([^:/?#]*://)[^/?#]*@", r"\1", url))
    if username is None and password is None:
        return SplitURL(url)
    host = parts.netloc.rpartition("@")[2]
    return SplitURL(
        urlunsplit(parts._replace(netloc=host)),
        unquote(username or ""),
        None if password is None else unquote(password),
    )


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

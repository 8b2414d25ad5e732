"""Tornado bases of the gpuaas service's handlers: JSON answers and errors, the hub's auth."""

from __future__ import annotations

import json
from typing import Any

from jupyterhub.services.auth import HubAuthenticated
from tornado import web

__all__ = ["HubJSONHandler", "JSONHandler"]


class JSONHandler(web.RequestHandler):
    """Answers JSON, never cached; errors as ``{"status", "message"}`` with the reason given."""

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        reason = self._reason
        exc = kwargs.get("exc_info")
        if exc and isinstance(exc[1], web.HTTPError) and exc[1].log_message:
            reason = exc[1].log_message
        self.finish(json.dumps({"status": status_code, "message": reason}))


class HubJSONHandler(HubAuthenticated, JSONHandler):  # type: ignore[misc]
    """A :class:`JSONHandler` whose caller the hub identifies (``self.current_user``: the
    token's owner model, or ``None``)."""

    async def prepare(self) -> None:
        # HubAuthenticated's own lookup blocks on the hub; ask asynchronously instead
        # (answers are cached by HubAuth for cache_max_age seconds).
        model = await self.hub_auth.get_user(self, sync=False)
        allowed = None
        if model:
            try:
                allowed = self.check_hub_user(model)
            except Exception:  # noqa: BLE001 - UserNotAllowed: not allowed
                allowed = None
        self._hub_auth_user_cache = allowed

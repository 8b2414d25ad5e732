"""The Hub API client against a real tornado app standing in for the hub's REST API."""

from __future__ import annotations

import pytest

from gpuaas_service.clients.hub import HubError


async def test_hub_client_asks_for_users_and_pages_of_groups_and_stops_servers() -> None:
    import socket

    from tornado import web

    from gpuaas_service.clients.hub import HubClient

    seen: list[str] = []
    groups = [{"name": f"g{i}", "users": ["u0", f"u{i}"]} for i in range(1, 6)]

    class Groups(web.RequestHandler):
        def get(self) -> None:
            seen.append(self.request.uri or "")
            assert self.request.headers["Authorization"] == "token culler-token"
            assert "jupyterhub-pagination" in self.request.headers["Accept"]
            offset = int(self.get_argument("offset"))
            limit = int(self.get_argument("limit"))
            nxt = offset + limit
            self.finish(
                {
                    "items": groups[offset:nxt],
                    "_pagination": {
                        "offset": offset,
                        "limit": limit,
                        "total": len(groups),
                        "next": {"offset": nxt, "limit": limit} if nxt < len(groups) else None,
                    },
                }
            )

    class User(web.RequestHandler):
        def get(self, name: str) -> None:
            seen.append(f"GET {name}")
            if name != "u1":
                raise web.HTTPError(404)
            self.finish({"name": name, "servers": {"": {"ready": True}}})

    class Server(web.RequestHandler):
        def delete(self, user: str, name: str = "") -> None:
            seen.append(f"DELETE {user}/{name}")
            self.set_status(202 if user != "gone" else 400)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = web.Application(
        [
            (r"/hub/api/groups", Groups),
            (r"/hub/api/users/([^/]+)", User),
            (r"/hub/api/users/([^/]+)/server", Server),
            (r"/hub/api/users/([^/]+)/servers/([^/]*)", Server),
        ]
    )
    server = app.listen(port, "127.0.0.1")
    try:
        hub = HubClient(f"http://127.0.0.1:{port}/hub/api", "culler-token")
        hub.page_size = 2
        members = await hub.group_members()
        assert members["u0"] == ["g1", "g2", "g3", "g4", "g5"]
        assert members["u3"] == ["g3"]
        assert hub.requests == 3  # pages of groups
        assert (await hub.user("u1") or {})["servers"] == {"": {"ready": True}}
        assert await hub.user("nobody") is None  # 404: no such user
        assert await hub.stop_server("u1", "") == 202
        assert await hub.stop_server("u2", "gpu") == 202
        assert await hub.stop_server("gone", "") == 400  # not running: nothing to stop
        assert seen[-3:] == ["DELETE u1/", "DELETE u2/gpu", "DELETE gone/"]
        hub.api_url = "http://127.0.0.1:1/hub/api"
        with pytest.raises(HubError):
            await hub.user("u1")
    finally:
        server.stop()

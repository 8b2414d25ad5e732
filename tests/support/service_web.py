"""Stand-ins for the parts of the service that its web tests do not exercise."""

from __future__ import annotations

from typing import Any


class QueueIndexStub:
    """The queue index as the handlers read it: synced, nobody has queued work."""

    rebuilds = 0
    polled_queues = ()

    class view:
        @staticmethod
        def queue_state() -> Any:
            return type("S", (), {"synced": True})()

    def answer(self, user: str, groups: Any) -> dict[str, Any]:
        return {"user": user, "items": []}

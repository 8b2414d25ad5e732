"""What single-user servers report, and what the culler tells them back (pure, in memory).

Each server's extension (``jupyter_gpuaas/server/reporter.py``) posts its ``activity`` payload to
the gpuaas service with the server's own hub token. The service accepts a report only for the
server that token belongs to: a server token carries the scope
``access:servers!server=<user>/<server>`` (JupyterHub's ``server`` role) — a first filter only,
since a user may mint such a token; the web layer also asks the hub whether the token is the
one it issued to that server, and whether it runs (:mod:`gpuaas_service.web.servers`).
:class:`ActivityStore` keeps the latest report per server with the service's arrival time,
and the reclaim loop's :class:`Notice` for it (a pending warning, or "saving" at the
deadline), which the server reads back for its sidebar.

A server that stops reporting simply keeps an old report: :func:`.idleness.judge` turns a report
older than ``report_stale_after`` into "unknown".

Before the loop stops a server that keeps its kernels' state, it asks for a snapshot
(:meth:`ActivityStore.ask_snapshot`): the answer to that server's next report carries the
request, and the report it sends back with the outcomes (``kernel_state``) is kept as the
answer and wakes the loop (:meth:`ActivityStore.wait_snapshot`), which never waits past the
request's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from gpuaas_service.reclaim.idleness import ActivityReport, Idleness
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.activity import KernelStateReport, SnapshotRequest, parse_activity
from jupyter_gpuaas.core.durations import isoformat_z

__all__ = [
    "ActivityStore",
    "Notice",
    "SnapshotAsk",
    "report_again_in",
    "server_key",
    "server_of_token",
]

REPORT_NEAR_STOP = 10.0
"""Seconds between the reports of a warned server that keeps kernel state, from its "saving"
on, so that it sees a snapshot request soon after the stop step makes it (the service's default
rate limit, 6 reports a minute, allows it)."""
ANSWER_MARGIN = timedelta(seconds=2)
"""Of a snapshot request's time, what the server is told to leave for reporting its answer."""

SERVER_SCOPE_PREFIX = "access:servers!server="


def server_key(user: str, server: str = "") -> str:
    """``alice`` for the default server, ``alice/gpu2`` for a named one (as decide.py keys)."""
    return f"{user}/{server}" if server else user


def server_of_token(model: Mapping[str, Any]) -> str | None:
    """The server a hub token belongs to (``""``: the default server), from ``GET /hub/api/user``.

    ``None`` unless the token is a server's own: exactly one ``access:servers!server=U/S`` scope
    with ``U`` the token's user (a user's personal token has ``access:servers!user=...`` or
    broader scopes instead, and may not report for any server).
    """
    if model.get("kind", "user") != "user":
        return None
    name = model.get("name")
    scopes = model.get("scopes")
    if not isinstance(name, str) or not isinstance(scopes, list):
        return None
    servers: set[str] = set()
    for scope in scopes:
        if not isinstance(scope, str):
            continue
        if scope.startswith("access:servers") and not scope.startswith(SERVER_SCOPE_PREFIX):
            return None  # broader than one server: not a server's token
        if scope.startswith(SERVER_SCOPE_PREFIX):
            user, sep, server = scope[len(SERVER_SCOPE_PREFIX) :].partition("/")
            if not sep or user != name:
                return None
            servers.add(server)
    if len(servers) != 1:
        return None
    return servers.pop()


@dataclass(frozen=True)
class Notice:
    """What the culler has told a server: a warning with its deadline (``None``: nothing)."""

    warned_at: datetime
    reclaim_at: datetime
    reason: str
    snoozes_left: int
    dry_run: bool = False
    cause: api.ServiceReclaimCause | None = None
    """Why, in plain fields for the banner's words (the loop's :meth:`cause`): ``code``,
    ``kind``, ``idle_seconds``, ``limit_seconds``, ``for`` (``{"team": "own"|"other", ...}``)."""

    def payload(self, now: datetime, save_lead: timedelta) -> api.ServiceWarning:
        """The ``api/reclaim`` answer's ``warning``; ``saving`` from ``save_lead`` before the
        deadline on, so that an open JupyterLab saves its documents before the stop."""
        return {
            "warned_at": isoformat_z(self.warned_at),
            "reclaim_at": isoformat_z(self.reclaim_at),
            "seconds_left": max(0, int((self.reclaim_at - now).total_seconds())),
            "reason": self.reason,
            "snoozes_left": self.snoozes_left,
            "dry_run": self.dry_run,
            "saving": not self.dry_run and now >= self.reclaim_at - save_lead,
            "cause": self.cause.copy() if self.cause is not None else None,
        }


def report_again_in(
    notice: Notice | None, *, keeps_state: bool, now: datetime, save_lead: timedelta
) -> float | None:
    """Seconds until a server should report again (``None``: at its own interval): a warned
    server that keeps kernel state reports when its "saving" starts, then every
    :data:`REPORT_NEAR_STOP` seconds, so that the stop step's snapshot request reaches it
    within the bound."""
    if not keeps_state or notice is None or notice.dry_run:
        return None
    until_saving = (notice.reclaim_at - save_lead - now).total_seconds()
    return max(until_saving, REPORT_NEAR_STOP)


@dataclass
class SnapshotAsk:
    """A snapshot request the loop made of one server, and its answer once reported."""

    requested_at: datetime
    deadline: datetime
    wait_until: float = 0.0
    """The deadline on the waiter's monotonic clock (``time.monotonic()``): waits end there,
    however the service's clock is set."""
    answer: KernelStateReport | None = None
    answered: asyncio.Event = field(default_factory=asyncio.Event)

    def request(self, now: datetime) -> SnapshotRequest:
        """What the server is told: the time it has left, less :data:`ANSWER_MARGIN`."""
        left = (self.deadline - ANSWER_MARGIN - now).total_seconds()
        return SnapshotRequest(self.requested_at, max(left, 0.0))

    def answers(self, report: KernelStateReport) -> bool:
        return isoformat_z(report.requested_at) == isoformat_z(self.requested_at)


DEFAULT_MAX_SERVERS = 10_000
DEFAULT_MAX_PER_USER = 100
DEFAULT_FORGET_AFTER = timedelta(days=1)


class ActivityStore:
    """Latest report per server (``server_key``), the last verdict on it, and its notice.

    Reports are bounded whether or not a reclaim loop runs (the loop also drops servers that
    stopped): at most ``max_per_user`` per user (their longest silent is forgotten first), at
    most ``max_servers`` in all (then the longest silent of the user holding the most goes, so
    no user's reports push out another's), none older than ``forget_after`` (pruned as reports
    arrive). Forgetting a report keeps the server's verdict and notice: those exist only for
    servers the loop saw running (its pods, pruned by :meth:`keep_only`), and the verdict is
    what keeps a server whose report was forgotten from being judged as if it never reported
    (:func:`.gather.workbenches`).
    """

    def __init__(
        self,
        *,
        max_servers: int = DEFAULT_MAX_SERVERS,
        max_per_user: int = DEFAULT_MAX_PER_USER,
        forget_after: timedelta = DEFAULT_FORGET_AFTER,
        opened_at: datetime | None = None,
    ) -> None:
        self.opened_at = opened_at
        """When the service began taking reports (``None``: unknown): a server started before
        then is judged from then on, not as if it never reported since its start."""
        self.max_servers = max_servers
        self.max_per_user = max_per_user
        self.forget_after = forget_after
        self._reports: dict[str, ActivityReport] = {}
        """By key, from the longest silent on (a new report is put last)."""
        self._owners: dict[str, str] = {}
        """Key → its user (a user's name may hold a slash: keys are not split)."""
        self._by_user: dict[str, dict[str, None]] = {}
        """User → the keys of their reports, longest silent first."""
        self._verdicts: dict[str, Idleness] = {}
        self._notices: dict[str, Notice] = {}
        self._snapshots: dict[str, SnapshotAsk] = {}
        self.accepted = 0
        self.rejected = 0

    def record(
        self, user: str, server: str, payload: object, received_at: datetime
    ) -> ActivityReport:
        """Keep a report (raises :class:`~jupyter_gpuaas.core.activity.ReportError` for a malformed
        payload)."""
        try:
            report = ActivityReport(received_at, parse_activity(payload, now=received_at))
        except ValueError:
            self.rejected += 1
            raise
        key = server_key(user, server)
        self._drop_report(key)  # re-inserted last: the tables run from longest silent
        self._reports[key] = report
        self._owners[key] = user
        self._by_user.setdefault(user, {})[key] = None
        self.accepted += 1
        self._prune(user, received_at)
        ask, state = self._snapshots.get(key), report.activity.kernel_state
        if ask is not None and ask.answer is None and state is not None and ask.answers(state):
            ask.answer = state
            ask.answered.set()
        return report

    def _prune(self, user: str, now: datetime) -> None:
        oldest = now - self.forget_after
        while self._reports:
            key, first = next(iter(self._reports.items()))
            if first.received_at >= oldest:
                break
            self._drop_report(key)
        own = self._by_user.get(user, {})
        while len(own) > max(self.max_per_user, 1):
            self._drop_report(next(iter(own)))
        while len(self._reports) > max(self.max_servers, 1):
            most = max(len(keys) for keys in self._by_user.values())
            key = next(k for k in self._reports if len(self._by_user[self._owners[k]]) == most)
            self._drop_report(key)

    def _drop_report(self, key: str) -> None:
        """Forget the server's report only (its verdict and notice stay)."""
        if self._reports.pop(key, None) is None:
            return
        user = self._owners.pop(key)
        keys = self._by_user[user]
        del keys[key]
        if not keys:
            del self._by_user[user]

    def forget(self, key: str) -> None:
        """Forget everything about a server (its report, verdict and notice)."""
        self._drop_report(key)
        self._verdicts.pop(key, None)
        self._notices.pop(key, None)
        self._snapshots.pop(key, None)

    def report(self, key: str) -> ActivityReport | None:
        return self._reports.get(key)

    def verdict(self, key: str) -> Idleness | None:
        return self._verdicts.get(key)

    def set_verdict(self, key: str, idleness: Idleness) -> None:
        self._verdicts[key] = idleness

    def notice(self, key: str) -> Notice | None:
        return self._notices.get(key)

    def set_notice(self, key: str, notice: Notice | None) -> None:
        if notice is None:
            self._notices.pop(key, None)
        else:
            self._notices[key] = notice

    def ask_snapshot(
        self, key: str, at: datetime, timeout: timedelta, *, wait_until: float = 0.0
    ) -> SnapshotAsk:
        """Ask the server for a snapshot of its kernels (its next report's answer carries the
        request), to be answered by ``at + timeout`` (``wait_until`` on the monotonic clock);
        replaces an earlier ask."""
        ask = SnapshotAsk(requested_at=at, deadline=at + timeout, wait_until=wait_until)
        self._snapshots[key] = ask
        return ask

    def snapshot_ask(self, key: str) -> SnapshotAsk | None:
        return self._snapshots.get(key)

    def drop_snapshot(self, key: str) -> None:
        """Forget the ask; a stop still waiting for its answer stops waiting (unanswered)."""
        ask = self._snapshots.pop(key, None)
        if ask is not None:
            ask.answered.set()

    async def wait_snapshot(self, key: str, seconds: float) -> KernelStateReport | None:
        """The server's answer to the pending ask, waiting at most ``seconds`` (real time) for
        it; ``None`` when there is no ask or no answer came in time."""
        ask = self._snapshots.get(key)
        if ask is None:
            return None
        if ask.answer is None and seconds > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(ask.answered.wait(), seconds)
        return ask.answer

    def keep_only(self, keys: Iterable[str]) -> None:
        """Forget servers that are no longer running (a new server starts afresh)."""
        live = set(keys)
        for key in [k for k in self._reports if k not in live]:
            self._drop_report(key)
        for table in (self._verdicts, self._notices, self._snapshots):
            for key in [k for k in table if k not in live]:
                del table[key]

    def __len__(self) -> int:
        return len(self._reports)

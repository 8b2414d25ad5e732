"""What differs between the two JupyterHub lines the spawner runs on, in one place.

Zero to JupyterHub's hub image ships JupyterHub 5.5 (chart 4.x and main of 2026-07); current
JupyterHub is 6.x. Both call ``Spawner._run_apply_user_options`` in ``User.spawn`` before
``start`` (5.5: ``jupyterhub/user.py`` line 909; so every REST spawn is validated first on both),
both stream ``progress()`` the same way and show a failed spawn as ``Spawn failed: `` followed by
``exc.jupyterhub_message`` (``utils.format_exception``). Two things differ:

* ``jupyterhub.spawner.SpawnException`` (a clean, user-facing refusal) is new in 6.0. On 5.5 this
  module defines an ``HTTPError`` with the same constructor, so the spawner raises one kind of
  error on both lines.
* ``BaseHandler.spawn_single_user`` counts failed spawns towards
  ``Spawner.consecutive_failure_limit`` (z2jh: 5), after which the hub exits (``SystemExit`` two
  seconds later, dropping every queued spawn). 6.x counts only errors (non-HTTP exceptions and
  HTTP >= 500); 5.5 counts every failure (``jupyterhub/handlers/base.py`` 5.5.0 lines 1197-1227,
  ``self.settings['failure_count'] += 1``): five queue timeouts, refused REST requests or
  preemptions in a row would stop a 5.5 hub. :func:`not_counted` gives 5.5 the 6.x rule.
"""

from __future__ import annotations

from typing import Any

from tornado import web

__all__ = ["COUNTS_EVERY_FAILURE", "SpawnException", "not_counted"]

try:  # JupyterHub >= 6
    from jupyterhub.spawner import SpawnException

    COUNTS_EVERY_FAILURE = False
except ImportError:  # JupyterHub 5.5: no SpawnException, and every failed spawn is counted
    COUNTS_EVERY_FAILURE = True

    class SpawnException(web.HTTPError):  # type: ignore[no-redef]
        """JupyterHub 6's ``SpawnException`` constructor on 5.5 (an ``HTTPError``, as there)."""

        def __init__(
            self,
            message: str,
            *,
            reason: str,
            log_message: str = "",
            message_html: str = "",
            status_code: int = 400,
        ) -> None:
            # "%s" keeps a "%" in the message from being read as a format by tornado
            super().__init__(status_code, "%s", log_message or message, reason=reason)
            self.message = message
            self.message_html = message_html


# The key JupyterHub 5.5's handlers keep the count under, in the tornado settings every handler
# shares (``self.settings``).
_FAILURE_COUNT = "failure_count"


def not_counted(spawner: Any, exc: BaseException) -> None:
    """Keep a clean refusal (a ``SpawnException``, or an HTTP error below 500) of this spawn out
    of the hub's count of consecutive failed spawns, as JupyterHub 6 does; on 6.x, nothing to do.

    Call it just before the refusal leaves ``start`` or ``_run_apply_user_options``. JupyterHub
    5.5 adds one to the count when the spawn's future fails; taking one off first leaves the count
    as it was, so only errors bring the hub towards ``consecutive_failure_limit``. Only for a spawn
    that ``spawn_single_user`` tracks (its ``_spawn_future`` is pending and the requesting
    handler is set, as ``User.spawn`` does until ``start`` ends): otherwise nothing adds one back.
    """
    if not COUNTS_EVERY_FAILURE:
        return
    if not isinstance(exc, web.HTTPError):
        return  # an error: counted, as on 6.x
    if exc.status_code >= 500 and not isinstance(exc, SpawnException):
        return  # an error: counted, as on 6.x (which never counts a SpawnException)
    future = getattr(spawner, "_spawn_future", None)
    handler = getattr(spawner, "handler", None)
    settings = getattr(handler, "settings", None)
    if future is None or future.done() or not isinstance(settings, dict):
        return
    settings[_FAILURE_COUNT] = int(settings.get(_FAILURE_COUNT, 0)) - 1

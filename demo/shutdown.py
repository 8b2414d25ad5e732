"""How the demo ends: on SIGTERM or SIGINT (also one it inherited as ignored) it stops the hub,
its servers and the cluster, and a further signal while it does so does not cut that short.

``make demo`` stopped by a service manager or by ``kill`` on its process group gets SIGTERM
twice (the group's, then the one make relays): with the clean-up interruptible, the second one
left the hub, its servers and the whole cluster running.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["run_until_stopped", "uninterrupted"]

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextmanager
def uninterrupted(log: Callable[[str], None] = _stderr) -> Iterator[None]:
    """Run the block with SIGTERM and SIGINT only noted, then put their handlers back."""

    def note(signum: int, frame: FrameType | None) -> None:
        log(f"{signal.Signals(signum).name} while stopping: finishing the clean-up first")

    previous = {s: signal.signal(s, note) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run_until_stopped(
    body: Callable[[], None], cleanup: Callable[[], None], log: Callable[[str], None] = _stderr
) -> None:
    """Run ``body`` until it returns or SIGTERM/SIGINT arrives; then always run ``cleanup`` to
    its end, whatever signals come meanwhile. Main thread only (signal handlers).

    Both handlers are set here, whatever was inherited: a shell that starts a command in the
    background without job control starts it with SIGINT ignored, and Python then leaves SIGINT
    ignored (no KeyboardInterrupt), so Ctrl-C or ``kill -INT`` would not stop it."""
    previous = {s: signal.signal(s, _interrupt) for s in _STOP_SIGNALS}
    try:
        body()
    except KeyboardInterrupt:
        pass
    finally:
        # (a signal can still land between the end of body and here, not after)
        try:
            with uninterrupted(log):
                cleanup()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

"""Who uses a dev cluster: the demo alone, or any number of test sessions, never both.

Each cluster has a claim file beside its state directory, locked with ``flock`` for as long as its
user runs: ``make demo`` holds it exclusively and writes who it is into it (for the message a
second user gets); test sessions hold it shared. The lock, not the file's content, decides: the
kernel drops it when its holder ends, however it ends, so a crashed demo never blocks the next.

- a second demo on the same cluster (in one clone: ``.demo/cluster``) is refused, naming the
  running one;
- a test session on a cluster a demo holds is refused (tests run on their own cluster), and a
  demo is refused on a cluster test sessions hold;
- ``devcluster down`` refuses while a demo holds the cluster.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from typing import IO, Any

from devcluster.config import Settings

__all__ = ["ClusterInUse", "demo_holder", "describe_holder", "exclusive", "shared"]


class ClusterInUse(RuntimeError):
    """The cluster is held by another user (the message says whom and what to do)."""


def _open(settings: Settings) -> IO[str]:
    settings.claim_file.parent.mkdir(parents=True, exist_ok=True)
    return settings.claim_file.open("a+")


def _try(fh: IO[str], operation: int) -> bool:
    try:
        fcntl.flock(fh, operation | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read_holder(fh: IO[str]) -> dict[str, Any]:
    fh.seek(0)
    try:
        data = json.loads(fh.read() or "{}")
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    """'make demo (pid 123, hub http://127.0.0.1:8000)' from what a holder wrote."""
    what = str(holder.get("what") or "another process")
    details = [f"pid {holder['pid']}"] if holder.get("pid") else []
    if holder.get("url"):
        details.append(f"hub {holder['url']}")
    return f"{what} ({', '.join(details)})" if details else what


def demo_holder(settings: Settings) -> str | None:
    """Who holds the cluster exclusively (a running demo), or None."""
    with _open(settings) as fh:
        if _try(fh, fcntl.LOCK_SH):
            fcntl.flock(fh, fcntl.LOCK_UN)
            return None
        return describe_holder(_read_holder(fh))


class Claim:
    """A held claim; :meth:`note` adds to what a refused user is told."""

    def __init__(self, fh: IO[str], holder: dict[str, Any] | None) -> None:
        self._fh = fh
        self._holder = holder

    def note(self, **fields: Any) -> None:
        if self._holder is None:
            raise RuntimeError("only an exclusive claim says who holds it")
        self._holder.update(fields)
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(json.dumps(self._holder))
        self._fh.flush()

    def release(self) -> None:
        if self._fh.closed:
            return
        if self._holder is not None:
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.flush()
        fcntl.flock(self._fh, fcntl.LOCK_UN)
        self._fh.close()


@contextlib.contextmanager
def exclusive(settings: Settings, what: str) -> Iterator[Claim]:
    """Hold the cluster alone (the demo); ClusterInUse if anyone else holds it."""
    fh = _open(settings)
    try:
        # A shared lock first: it fails only while another exclusive holder runs, and then the
        # file says who. Converting it to exclusive fails only while test sessions hold it.
        if not _try(fh, fcntl.LOCK_SH):
            holder = _read_holder(fh)
            raise ClusterInUse(
                f"the dev cluster {settings.state_dir} is in use by {describe_holder(holder)}. "
                "Stop that one first: Ctrl-C in its terminal, or "
                f"kill -INT {holder.get('pid') or '<its pid>'}"
            )
        if not _try(fh, fcntl.LOCK_EX):
            raise ClusterInUse(
                f"the dev cluster {settings.state_dir} is in use by test sessions; "
                "wait for them to end"
            )
    except BaseException:
        fh.close()
        raise
    claim = Claim(fh, {"what": what, "pid": os.getpid(), "since": time.time()})
    claim.note()
    try:
        yield claim
    finally:
        claim.release()


@contextlib.contextmanager
def shared(settings: Settings) -> Iterator[Claim]:
    """Hold the cluster beside other test sessions; ClusterInUse while a demo holds it."""
    fh = _open(settings)
    if not _try(fh, fcntl.LOCK_SH):
        holder = describe_holder(_read_holder(fh))
        fh.close()
        raise ClusterInUse(
            f"the dev cluster {settings.state_dir} is in use by {holder}; tests never use a "
            "demo's cluster. Unset GPUAAS_CLUSTER_DIR (the tests' own cluster is the default) "
            "or stop the demo."
        )
    claim = Claim(fh, None)
    try:
        yield claim
    finally:
        claim.release()

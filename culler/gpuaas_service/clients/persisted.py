"""State the service keeps across restarts as text in a ConfigMap of the notebook namespace
(the reclaim loop's hand-off records, the console's journal), with one lifecycle for each:
read once per process (retried until it can be read), written only when its text changed
since it was last read or written; a failed write is kept in memory and retried.
"""

from __future__ import annotations

import logging
from typing import Protocol

__all__ = ["PersistedState", "StateStore", "StateUnreadable"]

log = logging.getLogger("gpuaas.culler")


class StateStore(Protocol):
    """Reads and writes the text of one state ConfigMap (``None``: there is none yet)."""

    async def read_state(self, namespace: str, name: str) -> str | None: ...

    async def write_state(self, namespace: str, name: str, text: str) -> None: ...


class StateUnreadable(Exception):
    """The ConfigMap could not be read now (the reason is logged); try again later."""


class PersistedState:
    """One ConfigMap's text: :meth:`read` it, decode it (or say it is :meth:`unusable`), and
    :meth:`write` the new text when it may have changed.

    ``owner`` starts the log lines (``culler``, ``console``); ``what`` names the state in them;
    ``empty`` is the text of the state with nothing in it (not written over an absent
    ConfigMap)."""

    def __init__(
        self,
        store: StateStore,
        namespace: str,
        name: str,
        *,
        owner: str,
        what: str,
        empty: str = "",
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.name = name
        self.owner = owner
        self.what = what
        self.empty = empty
        self._written: str | None = None
        """The text as last read or written (``None``: not read yet)."""

    @property
    def loaded(self) -> bool:
        """Whether the ConfigMap has been read by this process."""
        return self._written is not None

    async def read(self) -> str | None:
        """The text a previous run kept (``None``: none kept); :class:`StateUnreadable` when the
        ConfigMap cannot be read now."""
        try:
            text = await self.store.read_state(self.namespace, self.name)
        except Exception as e:  # any API failure: the caller retries later
            log.warning(
                "%s: cannot read ConfigMap %s/%s: %s", self.owner, self.namespace, self.name, e
            )
            raise StateUnreadable(str(e)) from e
        self._written = text or self.empty
        return text or None

    def unusable(self, error: Exception) -> None:
        """Say in the log that the kept text could not be decoded (the state starts empty and
        the ConfigMap is rewritten at its next change)."""
        log.warning(
            "%s: ConfigMap %s/%s holds no usable %s (%s); starting without it (it is"
            " rewritten at the next change)",
            self.owner,
            self.namespace,
            self.name,
            self.what,
            error,
        )

    async def write(self, text: str) -> bool:
        """Write ``text`` unless it is what was last read or written; ``False`` when the write
        failed (logged; the caller tries again at its next change or cycle)."""
        if text == self._written:
            return True
        try:
            await self.store.write_state(self.namespace, self.name, text)
        except Exception as e:  # noqa: BLE001 - kept in memory; written at the next try
            log.warning(
                "%s: cannot write ConfigMap %s/%s: %s", self.owner, self.namespace, self.name, e
            )
            return False
        self._written = text
        return True

"""What each user really needs: their sessions' GPU-memory peaks and the offering that fits them.

Pure. One home for both sides of the contract:

* the gpuaas service records, per user, the GPU-memory peak of each of their recent sessions
  (what their own server's activity reports said, at most :data:`SESSIONS_KEPT` per user and
  :data:`USERS_KEPT` users) and keeps them in the ConfigMap :data:`HISTORY_CONFIGMAP`, key
  :data:`HISTORY_KEY`, as :func:`history_json` writes it;
* the spawner reads it back with :func:`parse_history` and preselects what :func:`advise`
  picks, with the one line that says why.

The peaks come from reports that the user's own server makes, so a user can make them say
anything: they size advice, never a limit.

:func:`advise`, in order (``starts_now``: the offerings the user can start now — the form's
headroom "available now" or "by borrowing"; ``None``: not known, nothing is said to queue):

1. No recorded session: the user's last choice, else the team's default offering ("no GPU use
   measured yet"). Where it would queue, the smallest offering at least as large (memory) that
   starts now, saying so; where none does, that choice, saying that it would queue.
2. Recent sessions that held no GPU memory at all, where the team offers a CPU-only choice: that.
3. The need is the largest recent peak times ``headroom``. Of the offerings whose memory (a
   fraction's cap, a MIG slice's or a whole GPU's memory) holds the need, the smallest (memory,
   then GPU-equivalents, then catalog order) that starts now, saying so when the smallest that
   holds it would queue; where none starts now, the smallest, saying that it would queue.
   Time-shared GPUs never: their memory is not the user's alone.
4. Nothing holds it: the offering with the most memory, saying that it has only so much (and
   that it would queue, where it would).

"Your last N sessions" counts sessions: each entry of the history is one run of one server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from jupyter_gpuaas.core.catalog import Offering
from jupyter_gpuaas.core.kueue import QuantityError, parse_quantity
from jupyter_gpuaas.core.labels import STATE_KEY

__all__ = [
    "DEFAULT_HEADROOM",
    "HISTORY_CONFIGMAP",
    "HISTORY_KEY",
    "SESSIONS_KEPT",
    "USERS_KEPT",
    "Advice",
    "PeakHistory",
    "advise",
    "format_gib",
    "history_from_configmap",
    "history_json",
    "offering_memory",
    "parse_history",
    "record_peak",
]

HISTORY_CONFIGMAP = "gpuaas-usage-history"
"""ConfigMap (in the namespace of users' servers) that holds every user's recent peaks."""
HISTORY_KEY = STATE_KEY
"""Its one key (as for every state the service keeps in a ConfigMap)."""
SESSIONS_KEPT = 8
"""Recent sessions kept per user: enough to see a habit, few enough to follow a change."""
USERS_KEPT = 5000
"""Users kept (the most recently seen): about 60 bytes each, far below a ConfigMap's 1 MiB."""
DEFAULT_HEADROOM = 1.25
"""The need is the peak times this: room for a somewhat larger batch than last time."""
_MIB = 1 << 20
_GIB = 1 << 30


@dataclass(frozen=True)
class PeakHistory:
    """Every user's recent session peaks in MiB, newest first, users in the order last seen
    (most recent first)."""

    peaks: Mapping[str, tuple[int, ...]]

    def of(self, user: str) -> tuple[int, ...]:
        return self.peaks.get(user, ())


def record_peak(history: PeakHistory, user: str, peak_bytes: int) -> PeakHistory:
    """``history`` with one more session of ``user`` (its peak in bytes), bounded."""
    mib = max(0, -(-peak_bytes // _MIB))  # rounded up: advice never sizes below what was used
    mine = ((mib, *history.of(user)))[:SESSIONS_KEPT]
    rest = [(u, p) for u, p in history.peaks.items() if u != user]
    return PeakHistory(dict([(user, mine), *rest][:USERS_KEPT]))


def history_json(history: PeakHistory) -> str:
    """The ConfigMap value: ``{"version": 1, "peaks_mib": {"alice": [6144, 3100], ...}}``."""
    peaks = {user: list(p) for user, p in history.peaks.items()}
    return json.dumps({"version": 1, "peaks_mib": peaks}, separators=(",", ":"))


def parse_history(text: str) -> tuple[PeakHistory, list[str]]:
    """The history in ``text`` and what was wrong with it (each problem with its path).

    A damaged history loses only what is damaged: a user whose entry is not a list of
    non-negative whole MiB is left out (their advice falls back to the default), the rest is
    kept; text that is not the document at all gives an empty history."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        return PeakHistory({}), [f"{HISTORY_KEY}: not JSON ({str(e)[:200]})"]
    if not isinstance(data, dict) or not isinstance(data.get("peaks_mib"), dict):
        return PeakHistory({}), [f"{HISTORY_KEY}: want an object with peaks_mib, an object"]
    problems: list[str] = []
    peaks: dict[str, tuple[int, ...]] = {}
    for user, values in list(data["peaks_mib"].items())[:USERS_KEPT]:
        ok = isinstance(values, list) and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << 40) for v in values
        )
        if not ok:
            problems.append(f"peaks_mib[{json.dumps(user)[:80]}]: want a list of whole MiB ≥ 0")
            continue
        peaks[str(user)] = tuple(values[:SESSIONS_KEPT])
    return PeakHistory(peaks), problems


def offering_memory(offering: Offering) -> int | None:
    """Bytes of GPU memory one unit of ``offering`` gives its user alone; ``None``: not known,
    or not theirs alone (a time-shared GPU), or no GPU."""
    if offering.kind in ("cpu", "shared"):
        return None
    size = offering.memory_cap if offering.kind == "fraction" else offering.gpu_memory
    if not size:
        return None
    try:
        return int(parse_quantity(size))
    except QuantityError:
        return None


def format_gib(size_bytes: int) -> str:
    """ "6.1 GiB", "512 MiB": one decimal, as the form and the console show memory."""
    if size_bytes >= _GIB:
        return f"{size_bytes / _GIB:.1f}".removesuffix(".0") + " GiB"
    return f"{max(0, round(size_bytes / _MIB))} MiB"


@dataclass(frozen=True)
class Advice:
    """The offering to preselect and why, in one line a data scientist reads."""

    offering: str
    reason: str
    measured: bool
    """Whether it rests on measured sessions (``False``: the team's default, or one at least as
    large that starts now)."""
    queues: bool = False
    """It would queue: nothing that fits starts now (the reason says so)."""


def _sessions(n: int) -> str:
    return "your last session" if n == 1 else f"your last {n} sessions"


def _ranked(sized: Sequence[tuple[int, Offering]], floor: int) -> list[tuple[int, Offering]]:
    """The offerings of at least ``floor`` bytes, smallest first (memory, then
    GPU-equivalents, then catalog order)."""
    fits = [(m, Fraction(o.gpu_equivalents), i, o) for i, (m, o) in enumerate(sized) if m >= floor]
    return [(m, o) for m, _, _, o in sorted(fits, key=lambda f: (f[0], f[1], f[2]))]


def advise(
    offerings: Sequence[Offering],
    peaks_mib: Iterable[int],
    *,
    default: str,
    headroom: float = DEFAULT_HEADROOM,
    starts_now: Collection[str] | None = None,
    last: str | None = None,
) -> Advice | None:
    """The offering among ``offerings`` (the team's, in catalog order) that fits a user whose
    recent sessions peaked at ``peaks_mib`` (one per session); rules in the module docstring.
    ``last``: the user's last choice, which stands for the team's ``default`` when nothing was
    measured. ``None`` when the team offers nothing to advise (no GPU offering, and neither
    ``default`` nor ``last`` among ``offerings``)."""

    def starts(offering: Offering) -> bool:
        return starts_now is None or offering.slug in starts_now

    peaks = list(peaks_mib)
    sized = [(m, o) for o in offerings if (m := offering_memory(o)) is not None]
    if not peaks:
        by_slug = {o.slug: o for o in offerings}
        usual = by_slug.get(last or "") or by_slug.get(default)
        if usual is None:
            return None
        named = "your last choice" if usual.slug == last else "your team's usual choice"
        return _advise_unmeasured(usual, named, sized, starts)
    top = max(peaks) * _MIB
    cpu = next((o for o in offerings if o.kind == "cpu"), None)
    if top == 0 and cpu is not None:
        why = f"{_sessions(len(peaks)).capitalize()} used no GPU memory: {cpu.display_name} fits."
        return Advice(cpu.slug, why, True)
    if not sized:
        return None
    need = int(top * max(1.0, headroom))
    fits = _ranked(sized, need)
    peaked = f"{_sessions(len(peaks)).capitalize()} peaked at {format_gib(top)}"
    if fits:
        memory, best = fits[0]
        enough = f"{peaked}; {format_gib(memory)} is enough"
        if starts(best):
            return Advice(best.slug, f"{enough}: {best.display_name}.", True)
        starting = next(((m, o) for m, o in fits if starts(o)), None)
        if starting is not None:
            why = (
                f"{enough}, but {best.display_name} would queue: {starting[1].display_name} "
                f"({format_gib(starting[0])}) fits and starts now."
            )
            return Advice(starting[1].slug, why, True)
        why = f"{enough}: {best.display_name}. It would queue: {_NONE_NOW}."
        return Advice(best.slug, why, True, queues=True)
    memory, largest = max(sized, key=lambda s: s[0])
    why = f"{peaked}; the largest here has only {format_gib(memory)}: {largest.display_name}."
    if not starts(largest):
        return Advice(largest.slug, f"{why} It would queue.", True, queues=True)
    return Advice(largest.slug, why, True)


_NONE_NOW = "nothing that fits starts now"


def _advise_unmeasured(
    usual: Offering,
    named: str,
    sized: Sequence[tuple[int, Offering]],
    starts: Callable[[Offering], bool],
) -> Advice:
    """Nothing measured yet: the ``usual`` choice (``named`` so), or the smallest at least as
    large that starts now where it would queue."""
    if starts(usual):
        return Advice(usual.slug, f"No GPU use measured yet: {named}.", False)
    floor = offering_memory(usual)
    larger = [o for _, o in _ranked(sized, floor) if starts(o)] if floor is not None else []
    if larger:
        why = (
            f"No GPU use measured yet. {named.capitalize()}, {usual.display_name}, would "
            f"queue; {larger[0].display_name}, at least as large, starts now."
        )
        return Advice(larger[0].slug, why, False)
    why = f"No GPU use measured yet: {named}. It would queue: nothing at least as large starts now."
    return Advice(usual.slug, why, False, queues=True)


def history_from_configmap(data: Mapping[str, Any] | None) -> tuple[PeakHistory, list[str]]:
    """The history in a ConfigMap's ``data`` (``None`` or no key: none yet, not a problem)."""
    text = (data or {}).get(HISTORY_KEY)
    if not isinstance(text, str):
        return PeakHistory({}), []
    return parse_history(text)

"""Every figure the ladder prints for a run, recomputed from its events file alone.

``python -m benchmarks replay --org dgx-4 --events run.jsonl --rung L1 --size 32 --seed 3``
writes one run's events (JSON lines, schema in docs/replay.md); :func:`figures` reads them back
and gives the same figures as the replay's own summary (:func:`.metrics.summarize`), so that a
reader can check any run, for any seed, without the simulator:

- the measured window is ``[burn_in_s, end_s)`` of the ``run`` event;
- training wait: a Job submitted in the window waits from its ``submit`` to its first
  ``admission`` (never admitted: to ``end_s``), or, when that admission is followed by an
  ``unplaceable`` at the same moment (no card holds it), to its ``placed``; p90 by linear
  interpolation; the GPU-hour-weighted mean (the large-Job level) weighs each wait by
  ``gpus × duration_s``; the 8-GPU Jobs' p90 is the same over the ``submit`` events with
  ``gpus`` 8; Jobs never started: those submitted in the window with no such admission (or
  ``placed``) by ``end_s``;
- spawn wait: from a ``spawn`` in the window to its workload's ``ready``; a spawn still waiting
  when the trace ends (its session's ``session_end`` has reason ``trace_end`` in phase
  ``waiting`` or ``starting``) counts to ``end_s``; a spawn withdrawn when its session ended
  counts not at all;
- interrupted per 100 session-hours: ``reclaim`` events in the window with ``active_later``,
  and ``way_up`` events in the window (a kernel that hit its share's cap), over the
  session-hours in the window (each session from ``session_start`` to ``session_end``); on L4
  those with ``kept`` true do not count (the session moved with its state);
- allocation share: each ``allocation`` lasts until its workload's next ``preemption`` or
  ``release`` (or ``end_s``), in GPU-equivalents, over ``capacity_gpu_equivalents`` × the
  window; on B0 the notebooks' allocations are replaced by the ``reserved_gpu_equivalents``
  of the ``run`` event (its per-user reservations, held all the time);
- busy share: each ``compute``'s overlap with the window × ``utilization`` ×
  ``gpu_equivalents``, over the same;
- share slowdown: Σ ``slowdown_s`` ÷ Σ ``burst_s`` of the ``compute`` events that have them
  (the whole run);
- unplaceable Jobs: training ``unplaceable`` events in the window; the GPU-hours of quota they
  hold: from each such event to the workload's ``placed`` or ``preemption`` (or ``end_s``),
  its overlap with the window × the Job's ``gpus``.

The diagnosis (:func:`diagnosis`: the GPU-hours of the window by what holds the cards) comes
from the ``cards`` events: each gives, in GPUs, what holds the cards from its ``t`` until the
next one (training Jobs, notebooks in a GPU burst or idle, free whole cards, free scraps
beside shares, or any free card while a training Job waits for a node), written whenever that
changes; its overlap with the window, summed. The classification is the simulator's, read
off the cards at each event; the events file carries it so that the page's diagnosis table
can be checked against any run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .metrics import percentile
from .sim import HOLDINGS


def read(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def figures(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    events = list(events)
    run = next(e for e in events if e["event"] == "run")
    lo, hi = float(run["burn_in_s"]), float(run["end_s"])
    window = hi - lo
    capacity = float(run["capacity_gpu_equivalents"])
    tally = _Tally(lo, hi, float(run.get("reserved_gpu_equivalents") or 0.0))
    for e in events:
        tally.read(e)
    tally.close()
    waits, weighted, weights = tally.training_waits()
    large = tally.training_waits(gpus=8)[0]
    spawn_waits = tally.spawn_waits()
    session_h = max(tally.session_seconds() / 3600, 1e-9)
    return {
        "wait_p90_min": percentile(waits, 90) / 60,
        "wait_gpu_hour_weighted_mean_min": weighted / weights / 60 if weights else 0.0,
        "jobs": float(len(waits)),
        "jobs_never_admitted": float(tally.never_started()),
        "wait_p90_min_8gpu": percentile(large, 90) / 60,
        "spawn_wait_p90_min": percentile(spawn_waits, 90) / 60 if spawn_waits else 0.0,
        "interrupted_per_100h": tally.interrupted * 100 / session_h,
        "allocation_share": tally.allocated / (capacity * window),
        "busy_share": tally.busy / (capacity * window),
        "share_slowdown": tally.slowdown / tally.burst if tally.burst else 0.0,
        "jobs_unplaceable": float(tally.unplaceable),
        "unplaced_job_gpu_h": tally.unplaced_gpu_s / 3600,
    }


def diagnosis(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """GPU-hours of the measured window by what holds the cards (:data:`.sim.HOLDINGS`), from
    the ``cards`` events alone."""
    events = list(events)
    run = next(e for e in events if e["event"] == "run")
    lo, hi = float(run["burn_in_s"]), float(run["end_s"])
    out = dict.fromkeys(HOLDINGS, 0.0)
    cards = [e for e in events if e["event"] == "cards"]
    for e, following in zip(cards, [*cards[1:], None], strict=True):
        until = hi if following is None else float(following["t"])
        dt = _overlap(float(e["t"]), until, lo, hi)
        for k in HOLDINGS:
            out[k] += float(e[k]) * dt / 3600
    return out


@dataclass
class _Tally:
    """What the events say, read in order, for the measured window ``[lo, hi)``; on B0
    ``reserved`` GPU-equivalents of per-user reservations held all the time."""

    lo: float
    hi: float
    reserved: float
    submits: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    """Training Jobs' first admission (or, after an ``unplaceable``, their ``placed``)."""
    unplaced: set[str] = field(default_factory=set)
    waiting_cards: dict[str, float] = field(default_factory=dict)
    unplaceable: int = 0
    unplaced_gpu_s: float = 0.0
    spawns: list[tuple[str, str, float]] = field(default_factory=list)
    ready: dict[str, float] = field(default_factory=dict)
    started: dict[str, float] = field(default_factory=dict)
    ended: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    open_alloc: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    allocated: float = 0.0
    busy: float = 0.0
    burst: float = 0.0
    slowdown: float = 0.0
    interrupted: int = 0

    def read(self, e: Mapping[str, Any]) -> None:
        kind, t = e["event"], float(e["t"])
        if kind in ("submit", "admission", "unplaceable", "placed", "preemption"):
            self._training(e, kind, t)
        if kind in ("spawn", "ready", "session_start", "session_end"):
            self._session(e, kind, t)
        elif kind in ("allocation", "preemption", "release", "compute"):
            self._usage(e, kind, t)
        elif self.lo <= t < self.hi and (
            (kind == "reclaim" and e["active_later"]) or kind == "way_up"
        ):
            self.interrupted += not e.get("kept", False)  # L4: a kept session moved

    def _training(self, e: Mapping[str, Any], kind: str, t: float) -> None:
        """A training Job's submission, admission, and wait for cards on one node."""
        workload = e["workload"]
        training = e.get("kind") == "training"
        if kind == "submit":
            self.submits[workload] = e
        elif kind == "admission" and training:
            self.admitted.setdefault(workload, t)
        elif kind == "unplaceable" and training and self.admitted.get(workload) == t:
            del self.admitted[workload]  # admitted on quota, no card: it waits on
            self.unplaced.add(workload)
        if kind == "unplaceable" and training:
            self.waiting_cards[workload] = t
            self.unplaceable += self.lo <= t < self.hi
        elif kind in ("placed", "preemption") and workload in self.waiting_cards:
            since = self.waiting_cards.pop(workload)
            gpus = self.submits[workload]["gpus"]
            self.unplaced_gpu_s += _overlap(since, t, self.lo, self.hi) * gpus
        if kind == "placed" and workload in self.unplaced:
            self.unplaced.discard(workload)
            self.admitted.setdefault(workload, t)

    def _session(self, e: Mapping[str, Any], kind: str, t: float) -> None:
        if kind == "spawn":
            self.spawns.append((e["workload"], e["session"], t))
        elif kind == "ready" and e["workload"] is not None:
            self.ready.setdefault(e["workload"], t)
        elif kind == "session_start":
            self.started[e["session"]] = t
        elif kind == "session_end":
            self.ended[e["session"]] = e

    def _usage(self, e: Mapping[str, Any], kind: str, t: float) -> None:
        """Allocations from ``allocation`` to the next ``preemption`` or ``release``; busy
        GPU time and the shares' slowdown from ``compute``."""
        if kind == "allocation":
            self.open_alloc[e["workload"]] = (t, float(e["gpu_equivalents"]), e["kind"])
        elif kind in ("preemption", "release") and e["workload"] in self.open_alloc:
            start, eq, what = self.open_alloc.pop(e["workload"])
            self._allocated(start, t, eq, what)
        elif kind == "compute":
            start, end = float(e["start"]), float(e["end"])
            share = float(e["utilization"]) * e["gpu_equivalents"]
            self.busy += _overlap(start, end, self.lo, self.hi) * share
            if "burst_s" in e:
                self.burst += float(e["burst_s"])
                self.slowdown += float(e["slowdown_s"])

    def _allocated(self, start: float, end: float, eq: float, what: str) -> None:
        if not (self.reserved and what == "notebook"):  # within B0's reservations
            self.allocated += _overlap(start, end, self.lo, self.hi) * eq

    def close(self) -> None:
        """What is still waiting for cards or allocated at the end counts until it; B0's
        reservations all the window."""
        for key, since in self.waiting_cards.items():
            self.unplaced_gpu_s += (
                _overlap(since, self.hi, self.lo, self.hi) * (self.submits[key]["gpus"])
            )
        for start, eq, what in self.open_alloc.values():
            self._allocated(start, self.hi, eq, what)
        self.allocated += self.reserved * (self.hi - self.lo)

    def training_waits(self, gpus: int = 0) -> tuple[list[float], float, float]:
        """The waits of the Jobs (of ``gpus`` GPUs; 0: all) submitted in the window, and the
        GPU-hour weighted sum and weights."""
        waits: list[float] = []
        weighted = weights = 0.0
        for key, e in self.submits.items():
            submitted = float(e["t"])
            if not self.lo <= submitted < self.hi or (gpus and e["gpus"] != gpus):
                continue
            wait = self.admitted.get(key, self.hi) - submitted
            waits.append(wait)
            weight = e["gpus"] * float(e["duration_s"])
            weighted += wait * weight
            weights += weight
        return waits, weighted, weights

    def never_started(self) -> int:
        """The Jobs submitted in the window that never ran by its end."""
        return sum(
            1
            for key, e in self.submits.items()
            if self.lo <= float(e["t"]) < self.hi and key not in self.admitted
        )

    def spawn_waits(self) -> list[float]:
        """Each spawn in the window to its ``ready``; one still waiting at the trace's end to
        the end; one withdrawn not at all."""
        out: list[float] = []
        for workload, session, t in self.spawns:
            if not self.lo <= t < self.hi:
                continue
            if workload in self.ready:
                out.append(self.ready[workload] - t)
                continue
            closing = self.ended.get(session)
            waiting = closing is not None and closing["phase"] in ("waiting", "starting")
            if waiting and closing is not None and closing["reason"] == "trace_end":
                out.append(self.hi - t)
        return out

    def session_seconds(self) -> float:
        return sum(
            _overlap(self.started[s], float(e["t"]), self.lo, self.hi)
            for s, e in self.ended.items()
            if s in self.started
        )

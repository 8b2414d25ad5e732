"""Every figure the ladder prints for a run, recomputed from its events file alone.

``python -m benchmarks replay --org dgx-4 --events run.jsonl --rung L1 --size 32 --seed 3``
writes one run's events (JSON lines, schema in docs/replay.md); :func:`figures` reads them back
and gives the same figures as the replay's own summary (:func:`.metrics.summarize`), so that a
reader can check any run, for any seed, without the simulator:

- the measured window is ``[burn_in_s, end_s)`` of the ``run`` event;
- training wait: a Job submitted in the window waits from its ``submit`` to its first
  ``admission`` (never admitted: to ``end_s``), or, when that admission is followed by an
  ``unplaceable`` at the same moment (no card holds it), to its ``placed``; p90 by linear
  interpolation; the GPU-hour-weighted mean weighs each wait by ``gpus × duration_s``;
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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .metrics import percentile


def read(lines: Iterable[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.strip()]


def _overlap(a: float, b: float, lo: float, hi: float) -> float:
    return max(0.0, min(b, hi) - max(a, lo))


def figures(events: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    events = list(events)
    run = next(e for e in events if e["event"] == "run")
    reserved = float(run.get("reserved_gpu_equivalents") or 0.0)
    lo, hi = float(run["burn_in_s"]), float(run["end_s"])
    window = hi - lo
    capacity = float(run["capacity_gpu_equivalents"])

    submits: dict[str, Mapping[str, Any]] = {}
    admitted: dict[str, float] = {}
    unplaced: set[str] = set()
    waiting_cards: dict[str, float] = {}
    unplaceable = 0
    unplaced_gpu_s = 0.0
    spawns: list[tuple[str, str, float]] = []
    ready: dict[str, float] = {}
    started: dict[str, float] = {}
    ended: dict[str, Mapping[str, Any]] = {}
    open_alloc: dict[str, tuple[float, float, str]] = {}
    allocated = 0.0
    busy = 0.0
    burst = slowdown = 0.0
    interrupted = 0
    for e in events:
        kind, t = e["event"], float(e["t"])
        if kind == "submit":
            submits[e["workload"]] = e
        elif kind == "admission" and e["kind"] == "training":
            admitted.setdefault(e["workload"], t)
        elif kind == "unplaceable" and e["kind"] == "training" and admitted.get(e["workload"]) == t:
            del admitted[e["workload"]]  # admitted on quota, no card: it waits on
            unplaced.add(e["workload"])
        if kind == "unplaceable" and e["kind"] == "training":
            waiting_cards[e["workload"]] = t
            unplaceable += lo <= t < hi
        elif kind in ("placed", "preemption") and e["workload"] in waiting_cards:
            since = waiting_cards.pop(e["workload"])
            unplaced_gpu_s += _overlap(since, t, lo, hi) * submits[e["workload"]]["gpus"]
        if kind == "placed" and e["workload"] in unplaced:
            unplaced.discard(e["workload"])
            admitted.setdefault(e["workload"], t)
        elif kind == "spawn":
            spawns.append((e["workload"], e["session"], t))
        elif kind == "ready" and e["workload"] is not None:
            ready.setdefault(e["workload"], t)
        elif kind == "session_start":
            started[e["session"]] = t
        elif kind == "session_end":
            ended[e["session"]] = e
        elif kind == "allocation":
            open_alloc[e["workload"]] = (t, float(e["gpu_equivalents"]), e["kind"])
        elif kind in ("preemption", "release") and e["workload"] in open_alloc:
            start, eq, what = open_alloc.pop(e["workload"])
            if not (reserved and what == "notebook"):  # within B0's reservations
                allocated += _overlap(start, t, lo, hi) * eq
        elif kind == "compute":
            start, end = float(e["start"]), float(e["end"])
            busy += _overlap(start, end, lo, hi) * float(e["utilization"]) * e["gpu_equivalents"]
            if "burst_s" in e:
                burst += float(e["burst_s"])
                slowdown += float(e["slowdown_s"])
        elif lo <= t < hi and ((kind == "reclaim" and e["active_later"]) or kind == "way_up"):
            interrupted += not e.get("kept", False)  # L4: a session whose state was kept moved
    for key, since in waiting_cards.items():
        unplaced_gpu_s += _overlap(since, hi, lo, hi) * submits[key]["gpus"]
    for start, eq, what in open_alloc.values():
        if not (reserved and what == "notebook"):
            allocated += _overlap(start, hi, lo, hi) * eq
    allocated += reserved * window

    waits: list[float] = []
    weighted = weights = 0.0
    for key, e in submits.items():
        submitted = float(e["t"])
        if not lo <= submitted < hi:
            continue
        wait = admitted.get(key, hi) - submitted
        waits.append(wait)
        weight = e["gpus"] * float(e["duration_s"])
        weighted += wait * weight
        weights += weight

    spawn_waits: list[float] = []
    for workload, session, t in spawns:
        if not lo <= t < hi:
            continue
        if workload in ready:
            spawn_waits.append(ready[workload] - t)
            continue
        closing = ended.get(session)
        waiting = closing is not None and closing["phase"] in ("waiting", "starting")
        if waiting and closing is not None and closing["reason"] == "trace_end":
            spawn_waits.append(hi - t)

    session_s = sum(
        _overlap(started[s], float(e["t"]), lo, hi) for s, e in ended.items() if s in started
    )
    session_h = max(session_s / 3600, 1e-9)
    return {
        "wait_p90_min": percentile(waits, 90) / 60,
        "wait_gpu_hour_weighted_mean_min": weighted / weights / 60 if weights else 0.0,
        "jobs": float(len(waits)),
        "spawn_wait_p90_min": percentile(spawn_waits, 90) / 60 if spawn_waits else 0.0,
        "interrupted_per_100h": interrupted * 100 / session_h,
        "allocation_share": allocated / (capacity * window),
        "busy_share": busy / (capacity * window),
        "share_slowdown": slowdown / burst if burst else 0.0,
        "jobs_unplaceable": float(unplaceable),
        "unplaced_job_gpu_h": unplaced_gpu_s / 3600,
    }

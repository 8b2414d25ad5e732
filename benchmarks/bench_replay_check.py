"""The replay's Kueue model against the real dev cluster (a benchmark, not part of make test).

Measures the control plane's latencies, picks the compression factor k from them (the control plane
runs at its own speed, so the trace's durations are divided by k), replays one window per kind of
rung on the dev cluster compressed by k and through the simulator, with the real gpuaas service
deciding on the cluster: cohort preemption (a window of the seeded trace in which training that
borrows notebook quota is preempted) and shares on the training GPUs (notebooks on HAMi shares of
local-0's H100s beside whole-card Jobs, one pending on scraps until a reclaim frees a card), and,
with ``--kinds tas`` or ``all``, Kueue's Topology Aware Scheduling (8-GPU Jobs asking for one
node of the h200 pool, held by Kueue until a node frees).
Compares admissions, order, waits, warnings, reclaims, hand-offs, preemptions and placements, at k,
k/2 and 2k. See benchmarks/replay/check.py.

    python -m benchmarks replay-check [--seed 1] [--start-h 10.5] [--hours 2] [--k 30]
        [--kinds both|cohort|shares|tas|all] [--also-k 0.5,2]
"""

from __future__ import annotations

import sys

from benchmarks.replay.check import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

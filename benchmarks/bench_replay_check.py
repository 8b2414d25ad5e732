"""The replay's Kueue model against the real dev cluster (a benchmark, not part of make test).

Measures the control plane's latencies, picks the compression factor k from them (replay note
§5.6), replays a window of the same seeded trace on the dev cluster compressed by k and through
the simulator, with the real gpuaas service deciding on the cluster, and compares admissions,
waits, warnings, reclaims and hand-offs, at k, k/2 and 2k. See benchmarks/replay/check.py.

    python -m benchmarks replay-check [--seed 1] [--start-h 10.5] [--hours 2] [--k 30]
"""

from __future__ import annotations

import sys

from benchmarks.replay.check import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The utilisation replay: does jupyter-gpuaas get more GPU work done with the same GPUs?

Static reservations, jupyterhub-idle-culler and jupyter-gpuaas (the culler's own decision code)
on the same seeded traces of a simulated day; writes docs/replay.md and its plots.

    python -m benchmarks replay [--seeds 5] [--days 1] [--scale 1] [--policy-file F] [--catalog F]
    python -m benchmarks.bench_replay --help
"""

from __future__ import annotations

import sys

from benchmarks.replay.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

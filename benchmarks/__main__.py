"""Run the benchmarks: every benchmarks/bench_*.py module's main(), with its defaults.

python -m benchmarks               # all of them
python -m benchmarks usage         # only bench_usage (names without the bench_ prefix)
python -m benchmarks replay --seeds 3   # one benchmark with its options
python -m benchmarks.bench_usage --help    # one module, with its own options
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    # ``replay-check`` is benchmarks/bench_replay_check.py (module names take no hyphen).
    # Only the names before the first option: the options' values (file names such as
    # my-policy.yaml) are passed on as given.
    names = 0
    while names < len(argv) and not argv[names].startswith("-"):
        names += 1
    argv = [a.replace("-", "_") for a in argv[:names]] + argv[names:]
    found = sorted(
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name.startswith("bench_")
    )
    # One name followed by options: those options are the benchmark's own.
    if argv and argv[0] in found and len(argv) > 1 and argv[1].startswith("-"):
        print(f"== benchmarks.bench_{argv[0]}", flush=True)
        own: int = importlib.import_module(f"benchmarks.bench_{argv[0]}").main(argv[1:]) or 0
        return own
    unknown = set(argv) - set(found)
    if unknown:
        print(f"no such benchmark: {', '.join(sorted(unknown))}; have: {', '.join(found)}")
        return 2
    status = 0
    for name in argv or found:
        print(f"== benchmarks.bench_{name}", flush=True)
        module = importlib.import_module(f"benchmarks.bench_{name}")
        status = module.main([]) or status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

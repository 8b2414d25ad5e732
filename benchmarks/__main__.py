"""Run the benchmarks: every benchmarks/bench_*.py module's main(), with its defaults.

python -m benchmarks               # all of them
python -m benchmarks usage         # only bench_usage (names without the bench_ prefix)
python -m benchmarks.bench_usage --help    # one module, with its own options
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    found = sorted(
        m.name[len("bench_") :]
        for m in pkgutil.iter_modules([str(Path(__file__).parent)])
        if m.name.startswith("bench_")
    )
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

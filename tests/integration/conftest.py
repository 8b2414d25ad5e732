"""Cluster tests: the session fixture ``cluster`` comes from :mod:`devcluster.testing`."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # devcluster is run from the repository, not installed
    sys.path.insert(0, str(REPO_ROOT))

from devcluster.testing import cluster  # noqa: E402

__all__ = ["cluster"]

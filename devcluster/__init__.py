"""A local Kubernetes + Kueue cluster with simulated GPU node pools, for tests and the demo.

Run from the repository root::

    python -m devcluster up       # build what is missing, start, print where the kubeconfig is
    python -m devcluster status
    python -m devcluster down

The pytest fixture in ``tests/integration/conftest.py`` and the benchmarks use the same
:func:`devcluster.cluster.running` (``up``, then ``down`` if it started the cluster).
See ``docs/dev-cluster.md``.
"""

from devcluster.cluster import ClusterError, ClusterInfo, down, running, status, up
from devcluster.config import Settings, load_settings

__all__ = [
    "ClusterError",
    "ClusterInfo",
    "Settings",
    "down",
    "load_settings",
    "running",
    "status",
    "up",
]

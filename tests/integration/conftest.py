"""Cluster tests: the session fixture ``cluster`` comes from :mod:`devcluster.testing`."""

from __future__ import annotations

from devcluster.testing import cluster

__all__ = ["cluster"]

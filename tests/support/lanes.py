"""Pytest plugin: each pytest-xdist worker runs on a dev cluster of its own.

``make test`` runs the cluster, hub and browser suites as ``pytest -n 2 --dist loadfile -p
tests.support.lanes``: a module's tests stay together on one worker, and worker ``gwN`` uses
test lane N's cluster (:func:`devcluster.config.lane_environ`). Worker gw0 uses the tests'
cluster as the environment chooses it; the others' clusters are started by the ``cluster``
session fixture on first use and stopped when their worker ends. The tests are waits on hubs,
servers and Kueue far more than they are CPU, so two lanes on two cores take about half the time.
"""

from __future__ import annotations

import os

import pytest

from devcluster.config import lane_environ


def lane_of_this_worker() -> int:
    """N for pytest-xdist's worker ``gwN``; 0 outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # Before any fixture reads the cluster's settings or a hub takes a port of its block.
    lane = lane_environ(lane_of_this_worker())
    for name in [k for k in os.environ if k not in lane]:
        del os.environ[name]
    os.environ.update(lane)

"""Fixtures of the spawner's unit tests: ``kubeconfig``, a kube config for KubeSpawner's
constructor (tests/support/samples.py)."""

from __future__ import annotations

from tests.support.samples import kubeconfig_fixture

__all__ = ["kubeconfig_fixture"]

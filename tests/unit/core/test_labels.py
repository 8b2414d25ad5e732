"""The labels and annotations jupyter-gpuaas writes are keys Kubernetes accepts
(``jupyter_gpuaas.core.labels``), each defined once."""

from __future__ import annotations

import re

import pytest

from jupyter_gpuaas.core import labels

# Kubernetes' qualified name (apimachinery validation.IsQualifiedName): an optional DNS
# subdomain prefix (at most 253 characters) and "/", then a name of at most 63 characters,
# alphanumeric at both ends, with "-", "_" and "." inside.
NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
KEYS = {
    name: getattr(labels, name)
    for name in labels.__all__
    if name not in {"STATE_KEY", "RECLAIM_PREFIX", "HUB_TOKEN_SECRET_SUFFIX"}
}


def qualified_name_errors(key: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    errors = []
    if not (NAME.fullmatch(name) and len(name) <= 63):
        errors.append(f"name {name!r}")
    if prefix and not (SUBDOMAIN.fullmatch(prefix) and len(prefix) <= 253):
        errors.append(f"prefix {prefix!r}")
    return errors


@pytest.mark.parametrize("name", sorted(KEYS))
def test_each_key_is_a_qualified_name_kubernetes_accepts(name: str) -> None:
    assert qualified_name_errors(KEYS[name]) == []


@pytest.mark.parametrize(
    "bad", ["gpuaas.jupyter.org/", "gpuaas.jupyter.org/-x", "Gpuaas.org/x", "a/" + "x" * 64]
)
def test_the_check_refuses_what_kubernetes_refuses(bad: str) -> None:
    assert qualified_name_errors(bad)


def test_every_key_is_defined_once_and_ours_are_under_the_projects_prefix() -> None:
    values = list(KEYS.values())
    assert len(values) == len(set(values)), "two names for one key"
    ours = {
        n: k for n, k in KEYS.items() if not n.startswith("HUB_") or n == "HUB_TOKEN_SECRET_LABEL"
    }
    assert all(k.startswith("gpuaas.jupyter.org/") for k in ours.values()), ours
    # KubeSpawner's own, read as it writes them
    assert labels.HUB_USERNAME_ANNOTATION == "hub.jupyter.org/username"
    assert labels.HUB_SERVERNAME_ANNOTATION == "hub.jupyter.org/servername"


def test_the_reclaim_state_annotations_share_the_prefix_a_restart_reads() -> None:
    reclaim = [
        k
        for n, k in KEYS.items()
        if n
        in {
            "WARNED_AT",
            "RECLAIM_DEADLINE",
            "RECLAIM_REASON",
            "SNOOZES_USED",
            "SNOOZED_UNTIL",
            "RECLAIMED_AT",
            "RECLAIMED_FOR",
            "RECLAIMED_FOR_TEAM",
            "RECLAIMED_KERNEL_STATE",
            "RECLAIM_OUTLOOK",
        }
    ]
    assert len(reclaim) == 10
    assert all(k.startswith(labels.RECLAIM_PREFIX) for k in reclaim)


def test_all_names_every_constant_of_the_module() -> None:
    constants = {n for n in vars(labels) if n.isupper() and not n.startswith("_")}
    assert constants == set(labels.__all__)

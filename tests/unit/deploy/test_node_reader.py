"""The console's free GPUs read the Node objects: the deployed service's account and the dev
cluster's may get, list and watch nodes, and no more on them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _node_verbs(docs: list[dict[str, Any]], account: tuple[str, str]) -> set[str]:
    """Every verb on nodes that ClusterRoleBindings give the ServiceAccount ``account``."""
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    verbs: set[str] = set()
    for binding in (d for d in docs if d["kind"] == "ClusterRoleBinding"):
        subjects = {
            (s.get("namespace"), s["name"])
            for s in binding.get("subjects") or []
            if s["kind"] == "ServiceAccount"
        }
        if account not in subjects:
            continue
        for rule in roles[binding["roleRef"]["name"]].get("rules") or []:
            if "" in rule.get("apiGroups", []) and "nodes" in rule.get("resources", []):
                verbs |= set(rule["verbs"])
    return verbs


@pytest.mark.parametrize(
    ("manifests", "account"),
    [
        ([ROOT / "culler" / "deploy" / "gpuaas-service.yaml"], ("jupyterhub", "gpuaas-service")),
        (sorted((ROOT / "devcluster" / "manifests").glob("*.yaml")), ("jupyterhub", "gpuaas")),
    ],
)
def test_the_service_reads_nodes_and_nothing_more(
    manifests: list[Path], account: tuple[str, str]
) -> None:
    docs = [d for path in manifests for d in _docs(path)]
    assert _node_verbs(docs, account) == {"get", "list", "watch"}

"""The doctor's lists of what culler/deploy/ ships are the files' (no drift): the admission
policies with their bindings, the alert rules, and the RBAC it reviews is what gpuaas-service.yaml
grants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gpuaas_service.doctor.checks import ADMISSION_POLICIES, ALERTS, access_needs

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "culler" / "deploy"


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def test_admission_policies_are_the_shipped_ones() -> None:
    policies, bindings = set(), {}
    for path in DEPLOY.glob("*.yaml"):
        for doc in _docs(path):
            if doc.get("kind") == "ValidatingAdmissionPolicy":
                policies.add(doc["metadata"]["name"])
            if doc.get("kind") == "ValidatingAdmissionPolicyBinding":
                bindings[doc["metadata"]["name"]] = doc["spec"]["policyName"]
    assert set(ADMISSION_POLICIES) == policies
    assert set(bindings.values()) == policies


def test_alerts_are_the_shipped_rules() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus-rules.yaml").read_text())
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r}
    assert set(ALERTS) == alerts


def _granted(docs: list[dict[str, Any]], account: tuple[str, str]) -> set[tuple[str, ...]]:
    """(verb, group, resource, namespace, name) the account gets; namespace "" = everywhere."""
    roles = {
        (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
    }
    out: set[tuple[str, ...]] = set()
    for b in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any((s.get("namespace"), s["name"]) == account for s in b.get("subjects") or []):
            continue
        ns = b["metadata"].get("namespace", "")
        ref = b["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else "", ref["name"])]
        for rule in role.get("rules") or []:
            for verb in rule["verbs"]:
                for group in rule["apiGroups"]:
                    for res in rule["resources"]:
                        for name in rule.get("resourceNames") or [""]:
                            out.add((verb, group, res, ns, name))
    return out


def test_every_verb_the_doctor_reviews_is_granted_by_culler_yaml() -> None:
    from jupyter_gpuaas.core.catalog import build_catalog, load_catalog_file

    docs = _docs(DEPLOY / "gpuaas-service.yaml")
    granted = _granted(docs, ("jupyterhub", "gpuaas-service"))
    config = next(
        d
        for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpuaas-service-config"
    )
    text = "\n".join(config["data"].values())
    assert "jupyter-users" in text
    catalog = build_catalog([load_catalog_file(str(ROOT / "spawner" / "demo-catalog.yaml"))])
    for need in access_needs("jupyter-users", ["team-a", "team-b"], catalog):
        keys = {
            (need.verb, need.group, need.resource, ns, name)
            for ns in (need.namespace, "")
            for name in (need.name, "")
        }
        assert keys & granted, f"gpuaas-service.yaml does not grant {need}"

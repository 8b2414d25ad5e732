"""The production manifests for notebook Jobs (culler/deploy/) grant and limit what the dev
cluster's do (devcluster/manifests/62-, 63-; those are exercised on the real cluster by
tests/integration/test_admission_policies.py and test_notebook_jobs.py), for the service's own
identity and for every namespace the service is configured to run Jobs in."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "culler" / "deploy"
DEV = ROOT / "devcluster" / "manifests"
DEV_IDENTITY = "system:serviceaccount:jupyterhub:gpuaas"
DEV_NOTEBOOKS = "jupyter-users"


def docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def of_kind(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in items if d["kind"] == kind]


DEPLOYED = docs(DEPLOY / "gpuaas-service.yaml")
JOBS_POLICY = docs(DEPLOY / "gpuaas-service-jobs-policy.yaml")


def service_config() -> Any:
    """The service's configuration file from the ConfigMap, read as traitlets reads it."""
    (cm,) = [d for d in of_kind(DEPLOYED, "ConfigMap") if d["metadata"]["name"].endswith("config")]
    config = Config()
    exec(cm["data"]["gpuaas_service_config.py"], {"get_config": lambda: config})
    return config.GPUaaSService


def identity() -> str:
    """The username the service's pod has towards the API server."""
    (deployment,) = of_kind(DEPLOYED, "Deployment")
    ns = deployment["metadata"]["namespace"]
    return (
        f"system:serviceaccount:{ns}:{deployment['spec']['template']['spec']['serviceAccountName']}"
    )


def as_deployed(dev_policy: dict[str, Any]) -> dict[str, Any]:
    """A dev cluster's admission policy with the deployment's service identity and notebook
    namespace put in place of the dev cluster's."""
    notebooks = service_config().notebook_namespace
    policy = copy.deepcopy(dev_policy)
    for cond in policy["spec"]["matchConditions"]:
        cond["expression"] = (
            cond["expression"]
            .replace(f"'{DEV_IDENTITY}'", f"'{identity()}'")
            .replace(f"'{DEV_NOTEBOOKS}'", f"'{notebooks}'")
        )
    return policy


def test_the_jobs_role_is_the_dev_clusters_and_bound_in_every_job_namespace() -> None:
    (dev_role,) = of_kind(docs(DEV / "62-gpuaas-jobs-rbac.yaml"), "ClusterRole")
    roles = {r["metadata"]["name"]: r for r in of_kind(DEPLOYED, "ClusterRole")}
    role = roles["gpuaas-service-notebook-jobs"]
    assert role["rules"] == dev_role["rules"]
    # least privilege: never pods, never reading Secrets
    granted = {
        (res, verb) for rule in role["rules"] for res in rule["resources"] for verb in rule["verbs"]
    }
    assert not {r for r, _ in granted} & {"pods", "pods/exec", "serviceaccounts"}
    assert ("secrets", "get") not in granted
    assert ("secrets", "list") not in granted

    namespaces = list(service_config().job_namespaces)
    assert namespaces, "gpuaas-service.yaml configures job_namespaces"
    bound = {}
    for rb in of_kind(DEPLOYED, "RoleBinding"):
        if rb["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "gpuaas-service-notebook-jobs",
        }:
            (subject,) = rb["subjects"]
            who = f"system:serviceaccount:{subject['namespace']}:{subject['name']}"
            bound[rb["metadata"]["namespace"]] = who
    assert bound == dict.fromkeys(namespaces, identity())
    # and no ClusterRoleBinding hands the jobs role out cluster-wide
    assert all(
        b["roleRef"]["name"] != "gpuaas-service-notebook-jobs"
        for b in of_kind(DEPLOYED, "ClusterRoleBinding")
    )


def test_the_jobs_admission_policies_are_the_dev_clusters_for_the_services_identity() -> None:
    dev = docs(DEV / "63-gpuaas-jobs-policy.yaml")
    notebooks = service_config().notebook_namespace
    # the same policies once the identity and the service's own namespace are put in its place
    assert of_kind(JOBS_POLICY, "ValidatingAdmissionPolicy") == [
        as_deployed(p) for p in of_kind(dev, "ValidatingAdmissionPolicy")
    ]
    assert of_kind(JOBS_POLICY, "ValidatingAdmissionPolicyBinding") == of_kind(
        dev, "ValidatingAdmissionPolicyBinding"
    )
    policies = {p["metadata"]["name"]: p for p in of_kind(JOBS_POLICY, "ValidatingAdmissionPolicy")}
    shape = policies["gpuaas-service-notebook-jobs"]
    conditions = {c["name"]: c["expression"] for c in shape["spec"]["matchConditions"]}
    assert f"'{identity()}'" in conditions["the-gpuaas-service"]
    assert f"'{notebooks}'" in conditions["not-its-own-state"]
    assert "paramKind" not in shape["spec"]  # nothing it refuses depends on a ConfigMap
    images = policies["gpuaas-service-notebook-job-images"]
    (condition,) = images["spec"]["matchConditions"]
    assert f"'{identity()}'" in condition["expression"]
    # The apiserver reads a binding's parameter before the matchConditions: with the ConfigMap
    # missing, the images policy refuses all it matches, so it matches only notebook Jobs.
    assert images["spec"]["matchConstraints"] == {
        "resourceRules": [
            {
                "apiGroups": ["batch"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["jobs"],
            }
        ],
        "objectSelector": {"matchLabels": {"gpuaas.jupyter.org/job": "notebook"}},
    }
    bindings = {
        b["metadata"]["name"]: b["spec"]
        for b in of_kind(JOBS_POLICY, "ValidatingAdmissionPolicyBinding")
    }
    assert bindings == {
        "gpuaas-service-notebook-jobs": {
            "policyName": "gpuaas-service-notebook-jobs",
            "validationActions": ["Deny"],
        },
        "gpuaas-service-notebook-job-images": {
            "policyName": "gpuaas-service-notebook-job-images",
            "validationActions": ["Deny"],
            "paramRef": {
                "name": "gpuaas-job-images",
                "namespace": "jupyterhub",
                "parameterNotFoundAction": "Deny",
            },
        },
    }
    # the ConfigMap comes first: created before the binding that reads it
    for manifest in (JOBS_POLICY, dev):
        assert manifest[0]["kind"] == "ConfigMap"
        assert manifest[0]["metadata"]["name"] == "gpuaas-job-images"


def images_param(items: list[dict[str, Any]]) -> list[str]:
    """The images a policy's parameter ConfigMap lists (as the policy's CEL reads them)."""
    (cm,) = [d for d in of_kind(items, "ConfigMap") if d["metadata"]["name"] == "gpuaas-job-images"]
    assert cm["metadata"]["namespace"] == "jupyterhub"  # where the service writes nothing
    return [line.strip() for line in cm["data"]["images"].split("\n") if line.strip()]


def test_notebook_jobs_may_run_exactly_the_catalogs_images() -> None:
    demo = yaml.safe_load((ROOT / "spawner" / "demo-catalog.yaml").read_text())
    assert images_param(docs(DEV / "63-gpuaas-jobs-policy.yaml")) == [
        i["image"] for i in demo["images"]
    ]
    values = yaml.safe_load((ROOT / "spawner" / "z2jh-values.example.yaml").read_text())
    catalog = values["hub"]["extraFiles"]["gpuaas-catalog"]["data"]
    assert images_param(JOBS_POLICY) == [i["image"] for i in catalog["images"]]
    # the service's grants reach no other ConfigMap of the hub's namespace, and that one (the
    # images, its own policy's parameter) only to read it: the console's checks compare it
    for role in of_kind(DEPLOYED, "Role"):
        if role["metadata"]["namespace"] != "jupyterhub":
            continue
        for rule in role["rules"]:
            if "configmaps" in rule["resources"]:
                assert rule["verbs"] == ["get"], rule
                assert rule.get("resourceNames") == ["gpuaas-job-images"], rule


def test_the_state_policy_is_the_dev_clusters_and_names_the_services_state() -> None:
    from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
    from gpuaas_service.reclaim.handoffs import HANDOFFS_CONFIGMAP
    from jupyter_gpuaas.core.sizing import HISTORY_CONFIGMAP

    (dev,) = of_kind(docs(DEV / "59-gpuaas-service-state-policy.yaml"), "ValidatingAdmissionPolicy")
    deployed = docs(DEPLOY / "gpuaas-service-state-policy.yaml")
    (ours,) = of_kind(deployed, "ValidatingAdmissionPolicy")
    notebooks = service_config().notebook_namespace
    assert ours == as_deployed(dev)
    (names,) = [v["expression"] for v in ours["spec"]["variables"] if v["name"] == "own"]
    assert names == f"['{HANDOFFS_CONFIGMAP}', '{JOURNAL_CONFIGMAP}', '{HISTORY_CONFIGMAP}']"
    # the Role's update grant names the same ConfigMaps
    (role,) = [r for r in of_kind(DEPLOYED, "Role") if r["metadata"]["namespace"] == notebooks]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [sorted(r["resourceNames"]) for r in named] == [
        sorted([HANDOFFS_CONFIGMAP, JOURNAL_CONFIGMAP, HISTORY_CONFIGMAP])
    ]
    (binding,) = of_kind(deployed, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {
        "policyName": ours["metadata"]["name"],
        "validationActions": ["Deny"],
    }


def test_job_pods_are_told_the_services_in_cluster_address() -> None:
    url = urlsplit(service_config().job_service_url)
    (svc,) = of_kind(DEPLOYED, "Service")
    (port,) = svc["spec"]["ports"]
    host = url.hostname or ""
    assert host in (
        f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc",
        f"{svc['metadata']['name']}.{svc['metadata']['namespace']}.svc.cluster.local",
    )
    assert url.port == port["port"]
    (deployment,) = of_kind(DEPLOYED, "Deployment")
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert url.path == env["JUPYTERHUB_SERVICE_PREFIX"]

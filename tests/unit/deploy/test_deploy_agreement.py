"""The two z2jh values examples, the service's manifests and docs/deploy.md agree: the service's
name, address, port and prefix, the pod labels the NetworkPolicies select, the Secret and its
keys, the hub scopes the service needs (the doctor's list), the console's scope, the image, and
every file and object the page names. Parsed as YAML (no helm here), compared field by field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from gpuaas_service.doctor.checks import ADMISSION_POLICIES, hub_scopes_needed

ROOT = Path(__file__).resolve().parents[3]
DEPLOY = ROOT / "culler" / "deploy"
SERVICE_VALUES = DEPLOY / "z2jh-values.yaml"
SPAWNER_VALUES = ROOT / "spawner" / "z2jh-values.example.yaml"
PAGE = ROOT / "docs" / "deploy.md"


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def _manifests() -> dict[tuple[str, str], dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "gpuaas-service.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return dict(_load(SERVICE_VALUES))


@pytest.fixture(scope="module")
def spawner_values() -> dict[str, Any]:
    return dict(_load(SPAWNER_VALUES))


@pytest.fixture(scope="module")
def objs() -> dict[tuple[str, str], dict[str, Any]]:
    return _manifests()


def _env(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_the_hub_reaches_the_service_where_it_listens(
    values: dict[str, Any], objs: dict[tuple[str, str], dict[str, Any]]
) -> None:
    service = values["hub"]["services"]["gpuaas"]
    url = urlparse(service["url"])
    host = (url.hostname or "").split(".")
    svc = objs[("Service", host[0])]
    assert host[1] == svc["metadata"]["namespace"]
    [port] = svc["spec"]["ports"]
    assert url.port == port["port"]
    deployment = objs[("Deployment", "gpuaas-service")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    by_name = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert by_name[port["targetPort"]] == port["port"]
    env = _env(deployment)
    assert urlparse(env["JUPYTERHUB_SERVICE_URL"]).port == port["port"]
    assert env["JUPYTERHUB_SERVICE_NAME"] == "gpuaas"
    assert env["JUPYTERHUB_CLIENT_ID"] == "service-gpuaas"
    prefix = env["JUPYTERHUB_SERVICE_PREFIX"]
    assert service["oauth_redirect_uri"] == prefix + "oauth_callback"
    assert env["JUPYTERHUB_OAUTH_CALLBACK_URL"] == prefix + "oauth_callback"
    # servers reach it through the proxy under the same prefix
    assert urlparse(values["singleuser"]["extraEnv"]["GPUAAS_SERVICE_URL"]).path == prefix
    # the job runner's address (gpuaas-service.yaml's configuration) is the same Service
    config = objs[("ConfigMap", "gpuaas-service-config")]["data"]["gpuaas_service_config.py"]
    job_url = re.search(r'job_service_url = "([^"]+)"', config)
    assert job_url is not None
    assert urlparse(job_url.group(1)).netloc == url.netloc
    assert urlparse(job_url.group(1)).path == prefix


def test_the_network_policies_select_the_service_pods(
    values: dict[str, Any],
    spawner_values: dict[str, Any],
    objs: dict[tuple[str, str], dict[str, Any]],
) -> None:
    pod_labels = objs[("Deployment", "gpuaas-service")]["spec"]["template"]["metadata"]["labels"]
    port = objs[("Service", "gpuaas-service")]["spec"]["ports"][0]["port"]
    egress = values["proxy"]["chp"]["networkPolicy"]["egress"]
    # Helm replaces lists: both values files carry the same one
    assert egress == spawner_values["proxy"]["chp"]["networkPolicy"]["egress"]
    to_service = [
        rule
        for rule in egress
        for peer in rule["to"]
        if set(peer.get("podSelector", {}).get("matchLabels", {}).items())
        <= set(pod_labels.items())
        and "namespaceSelector" not in peer
    ]
    assert [p["port"] for r in to_service for p in r["ports"]] == [port]
    policy = objs[("NetworkPolicy", "gpuaas-service")]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    # the Deployment's selector picks the same pods as the Service's
    selector = objs[("Deployment", "gpuaas-service")]["spec"]["selector"]["matchLabels"]
    assert objs[("Service", "gpuaas-service")]["spec"]["selector"] == selector
    assert pod_labels.get("hub.jupyter.org/network-access-hub") == "true"


def test_the_token_secret_is_the_one_the_values_name(
    objs: dict[tuple[str, str], dict[str, Any]],
) -> None:
    env = _env(objs[("Deployment", "gpuaas-service")])
    refs = {
        name: (v["secretKeyRef"]["name"], v["secretKeyRef"]["key"])
        for name, v in env.items()
        if isinstance(v, dict) and "secretKeyRef" in v
    }
    assert refs == {
        "JUPYTERHUB_API_TOKEN": ("gpuaas-service-token", "token"),
        "GPUAAS_OPERATOR_TOKEN": ("gpuaas-service-token", "operator-token"),
    }
    page = PAGE.read_text()
    values_head = SERVICE_VALUES.read_text()
    for text in (page, values_head):
        assert "create secret generic gpuaas-service-token --from-literal=token=" in text
        assert "--from-literal=operator-token=" in text


def test_the_hub_role_holds_what_the_service_needs(values: dict[str, Any]) -> None:
    role = values["hub"]["loadRoles"]["gpuaas-service"]
    assert role["services"] == ["gpuaas"]
    # the doctor's list (with a policy: the culler's scopes too) is exactly the role's
    assert set(role["scopes"]) == set(hub_scopes_needed(True))
    page = PAGE.read_text()
    for scope in hub_scopes_needed(True):
        assert f"`{scope}`" in page, scope
    user = values["hub"]["loadRoles"]["user"]["scopes"]
    assert "access:services!service=gpuaas" in user
    server_scopes = values["hub"]["config"]["Spawner"]["server_token_scopes"]
    assert "access:services!service=gpuaas" in server_scopes


def test_the_console_scope_is_one_name(values: dict[str, Any]) -> None:
    from gpuaas_service.web.console import CONSOLE_SCOPE

    hub = values["hub"]
    assert hub["services"]["gpuaas"]["oauth_client_allowed_scopes"] == [CONSOLE_SCOPE]
    assert CONSOLE_SCOPE in hub["config"]["JupyterHub"]["custom_scopes"]
    assert hub["config"]["JupyterHub"]["template_vars"]["gpuaas_console"]["scope"] == CONSOLE_SCOPE
    assert CONSOLE_SCOPE in hub["loadRoles"]["gpuaas-console"]["scopes"]


def test_both_values_files_name_the_same_hub_image(
    values: dict[str, Any], spawner_values: dict[str, Any]
) -> None:
    assert values["hub"]["image"] == spawner_values["hub"]["image"]
    image = f"{values['hub']['image']['name']}:{values['hub']['image']['tag']}"
    assert image in PAGE.read_text()
    # the page's build argument is the Dockerfile's
    dockerfile = (ROOT / "spawner" / "hub-image" / "Dockerfile").read_text()
    arg = re.search(r"--build-arg (\w+)=", PAGE.read_text())
    assert arg is not None
    assert f"ARG {arg.group(1)}=" in dockerfile


def test_the_notebook_namespace_is_one_name(
    spawner_values: dict[str, Any], objs: dict[tuple[str, str], dict[str, Any]]
) -> None:
    ns = spawner_values["hub"]["config"]["KubeSpawner"]["namespace"]
    config = objs[("ConfigMap", "gpuaas-service-config")]["data"]["gpuaas_service_config.py"]
    assert f'notebook_namespace = "{ns}"' in config
    assert objs[("Role", "gpuaas-service")]["metadata"]["namespace"] == ns


def test_every_file_and_object_the_page_names_exists() -> None:
    page = PAGE.read_text()
    for path in set(re.findall(r"\b((?:culler|spawner|devcluster)/[\w./-]+\.(?:yaml|py))\b", page)):
        assert (ROOT / path).is_file(), path
    for policy in ADMISSION_POLICIES:
        files = [p for p in DEPLOY.glob("*policy.yaml") if f"name: {policy}" in p.read_text()]
        assert files, policy
        assert f"kubectl apply -f culler/deploy/{files[0].name}" in page
    assert "kubectl apply -f culler/deploy/gpuaas-service.yaml" in page
    # the service account the page names is gpuaas-service.yaml's
    sa = _manifests()[("ServiceAccount", "gpuaas-service")]
    assert f"--as-service-account {sa['metadata']['namespace']}/gpuaas-service" in page
    # the supported Kueue is the doctor's
    from gpuaas_service.doctor.checks import KUEUE_MINIMUM

    assert f"Kueue **{'.'.join(map(str, KUEUE_MINIMUM))} or newer**" in page
    # the page links back from the pages it gathers
    for doc in ("spawner.md", "queue.md", "fractions.md", "console.md", "culler.md"):
        assert "deploy.md" in (ROOT / "docs" / doc).read_text(), doc
    for yaml_file in (DEPLOY / "gpuaas-service.yaml", SERVICE_VALUES, SPAWNER_VALUES):
        assert "docs/deploy.md" in yaml_file.read_text(), yaml_file

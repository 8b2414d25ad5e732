"""Do z2jh's NetworkPolicies, with the rules our values examples add, let the gpuaas flows through?

A model of NetworkPolicy semantics, not a CNI: no packet is sent. z2jh's three policies (hub,
proxy, singleuser) are derived by hand from the chart's templates (``templates/{hub,proxy,
singleuser}/netpol.yaml`` and ``_helpers-netpol.tpl``, identical in chart 4.4.0 and in main
48ea50e3 of 2026-07-24; no helm here) and fed with the chart's defaults merged with our values
files as Helm merges them (maps deeply, lists replaced). The service's own NetworkPolicy and its
pod's labels and ports are read from culler/deploy/gpuaas-service.yaml.

The evaluation follows the Kubernetes NetworkPolicy rules: a pod selected by no policy of a
direction is open in that direction; otherwise some rule of a selecting policy must match the
peer and the port; a ``podSelector`` alone means the policy's namespace; named ports resolve on
the destination pod. ``ipBlock`` is taken to match only addresses outside the pod network (the
API server here): whether it matches pod IPs is up to the CNI (Cilium: no), so in-cluster flows
must be allowed by selectors to count as allowed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from ipaddress import ip_address, ip_network
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuaas_service.jobs.build import JOB_KIND
from jupyter_gpuaas.core.labels import JOB_LABEL, TEAM_LABEL, USER_LABEL

ROOT = Path(__file__).resolve().parents[3]
SPAWNER_VALUES = ROOT / "spawner" / "z2jh-values.example.yaml"
SERVICE_VALUES = ROOT / "culler" / "deploy" / "z2jh-values.yaml"
SERVICE_MANIFESTS = ROOT / "culler" / "deploy" / "gpuaas-service.yaml"

HUB_NS, USERS_NS = "jupyterhub", "jupyter-users"
RELEASE = "jupyterhub"
API_SERVER_IP = "203.0.113.10"  # gpuaas-service.yaml's placeholder for the API server's address
ELSEWHERE_IP = "198.51.100.7"  # any other address outside the cluster
CLOUD_METADATA_IP = "169.254.169.254"  # z2jh's singleuser.cloudMetadata.ip

# z2jh's values.yaml defaults for what the three policies read
_EGRESS_ALLOW_OPEN = {
    "cloudMetadataServer": True,
    "dnsPortsCloudMetadataServer": True,
    "dnsPortsKubeSystemNamespace": True,
    "dnsPortsPrivateIPs": True,
    "nonPrivateIPs": True,
    "privateIPs": True,
}
CHART_DEFAULTS: dict[str, Any] = {
    "hub": {
        "networkPolicy": {
            "enabled": True,
            "ingress": [],
            "egress": [],
            "egressAllowRules": dict(_EGRESS_ALLOW_OPEN),
            "interNamespaceAccessLabels": "ignore",
            "allowedIngressPorts": [],
        }
    },
    "proxy": {
        "chp": {
            "networkPolicy": {
                "enabled": True,
                "ingress": [],
                "egress": [],
                "egressAllowRules": dict(_EGRESS_ALLOW_OPEN),
                "interNamespaceAccessLabels": "ignore",
                "allowedIngressPorts": ["http", "https"],
            }
        }
    },
    "singleuser": {
        "networkPolicy": {
            "enabled": True,
            "ingress": [],
            "egress": [],
            "egressAllowRules": {
                **_EGRESS_ALLOW_OPEN,
                "cloudMetadataServer": False,
                "privateIPs": False,
            },
            "interNamespaceAccessLabels": "ignore",
            "allowedIngressPorts": [],
        },
        "extraLabels": {"hub.jupyter.org/network-access-hub": "true"},
    },
}
PRIVATE = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]


def helm_merge(base: Any, override: Any) -> Any:
    """Helm's merge of values files: maps deeply, anything else (lists too) replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for key, value in override.items():
            out[key] = helm_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return out
    return copy.deepcopy(override)


def values_of(*files: Path) -> dict[str, Any]:
    values: dict[str, Any] = copy.deepcopy(CHART_DEFAULTS)
    for f in files:
        values = helm_merge(values, yaml.safe_load(f.read_text()) or {})
    return values


# ------------------------------------------------------------------ z2jh's policies, as templated


def _match(component: str) -> dict[str, Any]:  # jupyterhub.matchLabels
    return {"matchLabels": {"component": component, "app": "jupyterhub", "release": RELEASE}}


def _labelled(label: str, accept: bool) -> list[dict[str, Any]]:
    peer: dict[str, Any] = {"podSelector": {"matchLabels": {label: "true"}}}
    if not accept:
        return [peer]
    peer["namespaceSelector"] = {"matchLabels": {}}
    return [peer, {"namespaceSelector": {"matchLabels": {label: "true"}}}]


def _egress_allow_rules(netpol: dict[str, Any]) -> list[dict[str, Any]]:
    allow = netpol["egressAllowRules"]
    rules: list[dict[str, Any]] = []
    if (
        allow["dnsPortsCloudMetadataServer"]
        or allow["dnsPortsKubeSystemNamespace"]
        or allow["dnsPortsPrivateIPs"]
    ):
        to: list[dict[str, Any]] = []
        if allow["dnsPortsCloudMetadataServer"]:
            to.append({"ipBlock": {"cidr": f"{CLOUD_METADATA_IP}/32"}})
        if allow["dnsPortsKubeSystemNamespace"]:
            kube_system = {"kubernetes.io/metadata.name": "kube-system"}
            to.append({"namespaceSelector": {"matchLabels": kube_system}})
        if allow["dnsPortsPrivateIPs"]:
            to += [{"ipBlock": {"cidr": c}} for c in PRIVATE]
        rules.append(
            {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], "to": to}
        )
    if allow["nonPrivateIPs"]:
        block = {"cidr": "0.0.0.0/0", "except": [*PRIVATE, f"{CLOUD_METADATA_IP}/32"]}
        rules.append({"to": [{"ipBlock": block}]})
    if allow["privateIPs"]:
        rules.append({"to": [{"ipBlock": {"cidr": c}} for c in PRIVATE]})
    if allow["cloudMetadataServer"]:
        rules.append({"to": [{"ipBlock": {"cidr": f"{CLOUD_METADATA_IP}/32"}}]})
    return rules + list(netpol.get("egress") or [])


def _ingress(netpol: dict[str, Any], fixed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    if netpol.get("allowedIngressPorts"):
        rules.append({"ports": [{"port": p} for p in netpol["allowedIngressPorts"]]})
    return rules + fixed + list(netpol.get("ingress") or [])


def z2jh_policies(values: dict[str, Any]) -> list[dict[str, Any]]:
    hub = values["hub"]["networkPolicy"]
    proxy = values["proxy"]["chp"]["networkPolicy"]
    single = values["singleuser"]["networkPolicy"]

    def accept(netpol: dict[str, Any]) -> bool:
        return bool(netpol["interNamespaceAccessLabels"] == "accept")

    def policy(name: str, selector: dict[str, Any], ingress: Any, egress: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": HUB_NS},
            "spec": {
                "podSelector": selector,
                "policyTypes": ["Ingress", "Egress"],
                "ingress": ingress,
                "egress": egress,
            },
        }

    out = []
    if hub["enabled"]:
        from_labelled = _labelled("hub.jupyter.org/network-access-hub", accept(hub))
        out.append(
            policy(
                "hub",
                _match("hub"),
                _ingress(hub, [{"ports": [{"port": "http"}], "from": from_labelled}]),
                [
                    {"to": [{"podSelector": _match("proxy")}], "ports": [{"port": 8001}]},
                    {
                        "to": [{"podSelector": _match("singleuser-server")}],
                        "ports": [{"port": 8888}],
                    },
                    *_egress_allow_rules(hub),
                ],
            )
        )
    if proxy["enabled"]:
        http = _labelled("hub.jupyter.org/network-access-proxy-http", accept(proxy))
        api = _labelled("hub.jupyter.org/network-access-proxy-api", accept(proxy))
        out.append(
            policy(
                "proxy",
                _match("proxy"),
                _ingress(
                    proxy,
                    [
                        {"ports": [{"port": "http"}], "from": http},
                        {"ports": [{"port": "api"}], "from": api},
                    ],
                ),
                [
                    {"to": [{"podSelector": _match("hub")}], "ports": [{"port": 8081}]},
                    {
                        "to": [{"podSelector": _match("singleuser-server")}],
                        "ports": [{"port": 8888}],
                    },
                    *_egress_allow_rules(proxy),
                ],
            )
        )
    if single["enabled"]:
        from_labelled = _labelled("hub.jupyter.org/network-access-singleuser", accept(single))
        out.append(
            policy(
                "singleuser",
                _match("singleuser-server"),
                _ingress(single, [{"ports": [{"port": "notebook-port"}], "from": from_labelled}]),
                [
                    {"to": [{"podSelector": _match("hub")}], "ports": [{"port": 8081}]},
                    {"to": [{"podSelector": _match("proxy")}], "ports": [{"port": 8000}]},
                    {
                        "to": [{"podSelector": _match("autohttps")}],
                        "ports": [{"port": 8080}, {"port": 8443}],
                    },
                    *_egress_allow_rules(single),
                ],
            )
        )
    return out


# ------------------------------------------------------------------ the model


@dataclass(frozen=True)
class Endpoint:
    """A pod (namespace, labels, named container ports), or an address outside the pod network."""

    name: str
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    ip: str | None = None


JOB_NAMESPACES = ("team-a", "team-b")  # c.GPUaaSService.job_namespaces in gpuaas-service.yaml
NAMESPACE_LABELS = {
    ns: {"kubernetes.io/metadata.name": ns}
    for ns in (HUB_NS, USERS_NS, "kube-system", "other", *JOB_NAMESPACES)
}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, f"model knows matchLabels only: {selector}"
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def _peer_matches(peer: dict[str, Any], policy_ns: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        if other.ip is None:
            return False  # a pod: not matched by ipBlock in this model (CNI-dependent)
        block = peer["ipBlock"]
        addr = ip_address(other.ip)
        return addr in ip_network(block["cidr"]) and not any(
            addr in ip_network(c) for c in block.get("except", [])
        )
    if other.namespace is None:
        return False  # selectors select pods only
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], NAMESPACE_LABELS[other.namespace]):
            return False
    elif other.namespace != policy_ns:
        return False
    return "podSelector" not in peer or _selects(peer["podSelector"], other.labels)


def _port_matches(ports: list[dict[str, Any]] | None, dst: Endpoint, port: int, proto: str) -> bool:
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != proto:
            continue
        want = p.get("port")
        if want is None or want == port or (isinstance(want, str) and dst.ports.get(want) == port):
            return True
    return False


def _direction_allows(
    policies: list[dict[str, Any]],
    pod: Endpoint,
    peer: Endpoint,
    dst: Endpoint,
    port: int,
    proto: str,
    kind: str,
) -> bool:
    key, peers_key = ("ingress", "from") if kind == "Ingress" else ("egress", "to")
    selecting = [
        p
        for p in policies
        if pod.namespace == p["metadata"]["namespace"]
        and _selects(p["spec"]["podSelector"], pod.labels)
        and kind in p["spec"].get("policyTypes", ["Ingress"])
    ]
    if not selecting:
        return True  # no policy isolates this pod in this direction
    for p in selecting:
        for rule in p["spec"].get(key) or []:
            peers = rule.get(peers_key)
            if peers is not None and not any(
                _peer_matches(x, p["metadata"]["namespace"], peer) for x in peers
            ):
                continue
            if _port_matches(rule.get("ports"), dst, port, proto):
                return True
    return False


def allowed(
    policies: list[dict[str, Any]], src: Endpoint, dst: Endpoint, port: int, proto: str = "TCP"
) -> bool:
    egress = src.namespace is None or _direction_allows(
        policies, src, dst, dst, port, proto, "Egress"
    )
    ingress = dst.namespace is None or _direction_allows(
        policies, dst, src, dst, port, proto, "Ingress"
    )
    return egress and ingress


# ------------------------------------------------------------------ the deployment


def _chart_labels(component: str) -> dict[str, str]:
    return {"component": component, "app": "jupyterhub", "release": RELEASE}


HUB = Endpoint(
    "hub",
    HUB_NS,
    {
        **_chart_labels("hub"),
        "hub.jupyter.org/network-access-proxy-api": "true",
        "hub.jupyter.org/network-access-proxy-http": "true",
        "hub.jupyter.org/network-access-singleuser": "true",
    },
    {"http": 8081},
)
PROXY = Endpoint(
    "proxy",
    HUB_NS,
    {
        **_chart_labels("proxy"),
        "hub.jupyter.org/network-access-hub": "true",
        "hub.jupyter.org/network-access-singleuser": "true",
    },
    {"http": 8000, "https": 8443, "api": 8001},
)
DNS = Endpoint("kube-dns", "kube-system", {"k8s-app": "kube-dns"}, {"dns": 53})
API_SERVER = Endpoint("kube-apiserver", ip=API_SERVER_IP)
ELSEWHERE = Endpoint("an address on the internet", ip=ELSEWHERE_IP)
STRANGER = Endpoint("another pod", HUB_NS, {"app": "something-else"})


def server(values: dict[str, Any], namespace: str = USERS_NS) -> Endpoint:
    """A user's server as z2jh's KubeSpawner config labels it (common labels + extraLabels)."""
    labels = {
        **_chart_labels("singleuser-server"),
        **values["singleuser"].get("extraLabels", {}),
    }
    return Endpoint("alice's server", namespace, labels, {"notebook-port": 8888})


def _manifests(kind: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SERVICE_MANIFESTS.read_text()) if d and d["kind"] == kind]


def service_pod() -> Endpoint:
    (deployment,) = _manifests("Deployment")
    template = deployment["spec"]["template"]
    ports = {
        p["name"]: p["containerPort"]
        for c in template["spec"]["containers"]
        for p in c.get("ports", [])
        if "name" in p
    }
    labels = template["metadata"]["labels"]
    return Endpoint("gpuaas service", deployment["metadata"]["namespace"], labels, ports)


def our_policies() -> list[dict[str, Any]]:
    policies = _manifests("NetworkPolicy")
    assert policies, "gpuaas-service.yaml has the service's NetworkPolicy"
    return policies


def both_examples() -> list[dict[str, Any]]:
    values = values_of(SPAWNER_VALUES, SERVICE_VALUES)
    return z2jh_policies(values) + our_policies()


# ------------------------------------------------------------------ the flows


def test_the_service_is_reachable_through_the_proxy_and_reaches_what_it_needs() -> None:
    values = values_of(SPAWNER_VALUES, SERVICE_VALUES)
    policies = both_examples()
    alice, gpuaas = server(values), service_pod()
    assert allowed(policies, alice, PROXY, 8000)  # server --> /services/gpuaas/ on the proxy
    assert allowed(policies, PROXY, gpuaas, 10101)  # proxy --> the service
    assert allowed(policies, gpuaas, HUB, 8081)  # the service --> hub API
    assert allowed(policies, gpuaas, API_SERVER, 443)  # the service --> Kubernetes API
    assert allowed(policies, gpuaas, DNS, 53, "UDP")


def test_servers_in_the_users_namespace_work_with_the_hub_and_the_proxy() -> None:
    values = values_of(SPAWNER_VALUES, SERVICE_VALUES)
    policies = both_examples()
    alice = server(values)
    assert allowed(policies, alice, HUB, 8081)  # activity, token checks
    assert allowed(policies, HUB, alice, 8888)  # the hub's check that the server answers
    assert allowed(policies, PROXY, alice, 8888)  # users' requests


def test_nothing_else_reaches_the_service_and_it_enters_no_server() -> None:
    values = values_of(SPAWNER_VALUES, SERVICE_VALUES)
    policies = both_examples()
    alice, gpuaas = server(values), service_pod()
    # gpuaas-service.yaml also lets servers call it directly
    assert allowed(policies, alice, gpuaas, 10101)
    assert not allowed(policies, server(values, namespace="other"), gpuaas, 10101)
    assert not allowed(policies, STRANGER, gpuaas, 10101)
    assert not allowed(policies, HUB, gpuaas, 10101)
    assert not allowed(policies, gpuaas, alice, 8888)  # nothing on the hub side enters servers
    assert not allowed(policies, gpuaas, PROXY, 8001)  # nor the proxy's API


def runner(namespace: str, labels: dict[str, str] | None = None) -> Endpoint:
    """A notebook Job's pod, with the labels jobs/build.py gives its pod template."""
    if labels is None:
        labels = {JOB_LABEL: JOB_KIND, USER_LABEL: "alice", TEAM_LABEL: namespace}
    return Endpoint("a notebook job's pod", namespace, labels)


def test_notebook_job_pods_reach_the_service_and_nothing_else_of_theirs_does() -> None:
    """The runner fetches its input and sends its result to job_service_url (docs/jobs.md)."""
    policies = both_examples()
    gpuaas = service_pod()
    for ns in JOB_NAMESPACES:
        assert allowed(policies, runner(ns), gpuaas, 10101), ns
        assert not allowed(policies, runner(ns, {"app": "training"}), gpuaas, 10101), ns
    assert not allowed(policies, runner("other"), gpuaas, 10101)  # not a job namespace
    assert not allowed(policies, runner(HUB_NS), gpuaas, 10101)


def test_without_the_added_rules_the_flows_are_blocked() -> None:
    """Why the values carry them: z2jh's defaults open no managed service's port, and select
    pods of the release's namespace only."""
    defaults = copy.deepcopy(CHART_DEFAULTS)
    gpuaas, alice = service_pod(), server(defaults)
    policies = z2jh_policies(defaults) + our_policies()
    assert not allowed(policies, PROXY, gpuaas, 10101)  # proxy egress: hub and servers only
    assert not allowed(policies, alice, HUB, 8081)  # hub ingress: labelled pods of its namespace
    assert not allowed(policies, PROXY, alice, 8888)  # proxy egress: servers of its namespace
    # and without its own policy the service's pod is open to every pod (no policy selects it)
    values = values_of(SPAWNER_VALUES, SERVICE_VALUES)
    assert allowed(z2jh_policies(values), STRANGER, gpuaas, 10101)


def test_the_service_values_alone_keep_the_proxys_rule_for_servers() -> None:
    """Helm replaces lists: the service's values repeat the servers' rule, in either order."""
    for files in ((SPAWNER_VALUES, SERVICE_VALUES), (SERVICE_VALUES, SPAWNER_VALUES)):
        values = values_of(*files)
        policies = z2jh_policies(values) + our_policies()
        assert allowed(policies, PROXY, server(values), 8888), files
        assert allowed(policies, PROXY, service_pod(), 10101), files


@pytest.mark.parametrize(
    ("peer", "expected"),
    [
        ({"podSelector": {"matchLabels": {"component": "proxy"}}}, True),
        ({"namespaceSelector": {"matchLabels": {}}}, True),
        ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}, False),
        ({"ipBlock": {"cidr": "0.0.0.0/0"}}, False),  # pods are not matched by ipBlock here
    ],
)
def test_the_model_reads_peers_as_kubernetes_does(peer: dict[str, Any], expected: bool) -> None:
    assert _peer_matches(peer, HUB_NS, PROXY) is expected
    assert _peer_matches({"podSelector": {}}, USERS_NS, PROXY) is False  # policy's namespace


def test_the_service_reaches_out_to_the_api_server_only() -> None:
    """Its token reads Kueue objects and patches pods: a service that could reach any address
    on 443 could send what it reads anywhere (a bug, or code run in it)."""
    policies = both_examples()
    gpuaas = service_pod()
    for port in (443, 6443):
        assert allowed(policies, gpuaas, API_SERVER, port)
        assert not allowed(policies, gpuaas, ELSEWHERE, port)
    assert not allowed(policies, gpuaas, API_SERVER, 80)
    assert not allowed(policies, gpuaas, ELSEWHERE, 80)

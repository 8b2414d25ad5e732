"""The doctor's I/O: reads the cluster, the hub and Prometheus into :class:`~.checks.Facts`.

Kubernetes with ``kubernetes_asyncio`` and the credentials in effect (the service's own in its
pod, or a kubeconfig); each verb the service uses is asked of the apiserver with a
SelfSubjectAccessReview, as the service's account itself or, with ``service_account``, as that
account through impersonation (an administrator's kubeconfig may ``impersonate`` it). The Hub
API and Prometheus through the service's own clients. Anything that cannot be read becomes a
:class:`~.checks.Read` with the reason; nothing here judges.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from gpuaas_service.doctor.checks import (
    ADMISSION_POLICIES,
    JOB_IMAGES_POLICY,
    Access,
    AccessNeed,
    Facts,
    HubFacts,
    NodeFacts,
    PrometheusFacts,
    Read,
    access_needs,
    job_image_names,
)
from jupyter_gpuaas.core.catalog import Catalog
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_cohort, read_local_queue

__all__ = ["DoctorSettings", "gather"]

T = TypeVar("T")

KUEUE_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True)
class DoctorSettings:
    """What the doctor checks against: the service's own settings (app.py's options)."""

    hub_api_url: str = ""
    hub_token: str = ""
    prometheus_url: str = ""
    prometheus_queries: Mapping[str, str] | None = None
    """Name → PromQL of every query the culler and the console ask (:func:`service_queries`)."""
    prometheus_timeout: float = 10.0
    catalog_file: str = ""
    policy_file: str = ""
    notebook_namespace: str = "jupyter-users"
    job_namespaces: tuple[str, ...] = ()
    kueue_api_version: str = "v1beta2"
    visibility_api_version: str = "v1beta2"
    kueue_namespace: str = "kueue-system"
    kueue_deployment: str = "kueue-controller-manager"
    service_account: str = ""
    """``namespace/name``: review the RBAC as this account (impersonated); "": as oneself."""
    job_topology_level: str = "kubernetes.io/hostname"
    timeout: float = 20.0


def service_queries(culler_query: str, hami_query: str) -> dict[str, str]:
    """The PromQL the service asks: the culler's per-pod utilisation (and HAMi's last kernel),
    and the console's history charts."""
    from gpuaas_service.clients.prometheus import history_queries

    queries = {"culler utilisation": culler_query} if culler_query else {}
    if hami_query:
        queries["HAMi last kernel"] = hami_query
    queries.update({f"history {q.name}": q.expr for q in history_queries(None, 60)})
    return queries


def _error(e: BaseException) -> tuple[str, bool]:
    """A short reason, and whether it is a 403."""
    status = getattr(e, "status", None) or getattr(e, "code", None)
    reason = getattr(e, "reason", None)
    if status is not None and reason is not None:
        body = getattr(e, "body", "") or ""
        try:
            message = json.loads(body).get("message", "") if body else ""
        except (ValueError, AttributeError):
            message = ""
        return f"HTTP {status} {message or reason}".strip(), status == 403
    return (str(e) or type(e).__name__)[:300], False


async def _read(call: Callable[[], Awaitable[T]]) -> Read[T]:
    try:
        return Read(await call())
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - every failure is a fact for the checks
        reason, forbidden = _error(e)
        return Read.failed(reason, forbidden=forbidden)


def _load_catalog(path: str) -> Read[Catalog]:
    if not path:
        return Read.failed("no catalog_file")
    from jupyter_gpuaas.core.catalog import CatalogError, build_catalog, load_catalog_file

    try:
        return Read(build_catalog([load_catalog_file(path)]))
    except CatalogError as e:
        return Read.failed("; ".join(str(err) for err in e.errors))


def _policy_problems(path: str, catalog: Catalog | None) -> Read[list[str]]:
    if not path:
        return Read([])
    from gpuaas_service.reclaim.policy import PolicyError, load_policy_file

    teams = list(catalog.tenants) if catalog is not None else None
    try:
        load_policy_file(path, known_teams=teams)
    except PolicyError as e:
        return Read([str(err) for err in e.errors])
    return Read([])


class _Kube:
    """The reads of the doctor, on one ``ApiClient`` (``review``: the one for access reviews)."""

    def __init__(self, api: Any, review: Any, settings: DoctorSettings) -> None:
        self.api = api
        self.review_api = review
        self.s = settings

    def _custom(self) -> Any:
        from kubernetes_asyncio import client

        return client.CustomObjectsApi(self.api)

    async def list_kueue(self, plural: str) -> list[dict[str, Any]]:
        listing = await self._custom().list_cluster_custom_object(
            KUEUE_GROUP, self.s.kueue_api_version, plural, _request_timeout=self.s.timeout
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def api_groups(self) -> dict[str, list[str]]:
        from kubernetes_asyncio import client

        groups = await client.ApisApi(self.api).get_api_versions(_request_timeout=self.s.timeout)
        return {g.name: [v.version for v in g.versions or []] for g in groups.groups or []}

    async def kueue_version(self) -> tuple[str, str]:
        """Kueue's version and where it was read: the manager Deployment's image tag (as
        ``kubectl kueue version`` reads it), else an ``app.kubernetes.io/version`` label on its
        ClusterQueue CRD, where the installer put one (the dev cluster, whose Kueue runs out
        of cluster, does). A 403 is raised only where neither may be read."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.rest import ApiException

        s = self.s
        reasons: list[str] = []
        denied: ApiException | None = None
        try:
            dep = await client.AppsV1Api(self.api).read_namespaced_deployment(
                s.kueue_deployment, s.kueue_namespace, _request_timeout=s.timeout
            )
            for c in dep.spec.template.spec.containers or []:
                image = str(c.image or "")
                if "kueue" in image and ":" in image.rsplit("/", 1)[-1]:
                    tag = image.rsplit(":", 1)[-1]
                    return tag, f"image of {s.kueue_namespace}/{s.kueue_deployment}"
            reasons.append(f"no tagged kueue image in {s.kueue_namespace}/{s.kueue_deployment}")
        except ApiException as e:
            if e.status != 403:
                reasons.append(f"no Deployment {s.kueue_namespace}/{s.kueue_deployment}")
            denied = e if e.status == 403 else None
        try:
            crd = await client.ApiextensionsV1Api(self.api).read_custom_resource_definition(
                f"clusterqueues.{KUEUE_GROUP}", _request_timeout=s.timeout
            )
        except ApiException as e:
            if e.status == 403:
                raise denied or e from None
            raise
        labels = crd.metadata.labels or {}
        version = labels.get("app.kubernetes.io/version")
        if version:
            return str(version), f"label of CRD clusterqueues.{KUEUE_GROUP}"
        if denied is not None:
            raise denied  # what the operator must fix: the Deployment could not be read
        reasons.append(f"no app.kubernetes.io/version label on CRD clusterqueues.{KUEUE_GROUP}")
        raise LookupError("; ".join(reasons))

    async def nodes(self) -> list[NodeFacts]:
        from kubernetes_asyncio import client

        resp: Any = await client.CoreV1Api(self.api).list_node(
            _preload_content=False, _request_timeout=self.s.timeout
        )
        items = json.loads(await resp.read())["items"]
        return [
            NodeFacts(
                name=str(n["metadata"]["name"]),
                labels={str(k): str(v) for k, v in (n["metadata"].get("labels") or {}).items()},
                allocatable={
                    str(k): str(v)
                    for k, v in ((n.get("status") or {}).get("allocatable") or {}).items()
                },
                unschedulable=bool((n.get("spec") or {}).get("unschedulable")),
            )
            for n in items
        ]

    async def notebook_pods(self) -> list[dict[str, Any]]:
        """The pods of the notebook namespace (the homes check reads their volumes)."""
        from kubernetes_asyncio import client

        resp: Any = await client.CoreV1Api(self.api).list_namespaced_pod(
            self.s.notebook_namespace, _preload_content=False, _request_timeout=self.s.timeout
        )
        items: list[dict[str, Any]] = json.loads(await resp.read())["items"]
        return items

    async def review(self, need: AccessNeed) -> Access:
        from kubernetes_asyncio import client

        attrs: dict[str, str] = {"verb": need.verb, "group": need.group}
        resource, _, sub = need.resource.partition("/")
        attrs["resource"] = resource
        if sub:
            attrs["subresource"] = sub
        if need.namespace:
            attrs["namespace"] = need.namespace
        if need.name:
            attrs["name"] = need.name
        body: Any = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        }
        try:
            answer = await client.AuthorizationV1Api(
                self.review_api
            ).create_self_subject_access_review(body, _request_timeout=self.s.timeout)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - a review that fails is a fact
            return Access(need, None, _error(e)[0])
        status = answer.status
        return Access(need, bool(status.allowed), str(status.reason or ""))

    async def admission(self) -> tuple[Read[list[str]], Read[dict[str, str]], dict[str, str]]:
        """Of culler/deploy/'s policies (:data:`~.checks.ADMISSION_POLICIES`), those that exist,
        their bindings of the same name (→ their policy), and each binding's paramRef
        (``namespace/name``). Each is read by its name (``get``), so that the service's account
        needs to read only these (RBAC ``resourceNames``), never list every policy."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.rest import ApiException

        adm = client.AdmissionregistrationV1Api(self.api)
        timeout = self.s.timeout

        async def named(read: Callable[..., Awaitable[Any]]) -> dict[str, Any]:
            found: dict[str, Any] = {}
            for name in ADMISSION_POLICIES:
                try:
                    found[name] = await read(name, _request_timeout=timeout)
                except ApiException as e:
                    if e.status != 404:
                        raise
            return found

        async def policies() -> list[str]:
            return list(await named(adm.read_validating_admission_policy))

        refs: dict[str, str] = {}

        async def bindings() -> dict[str, str]:
            found = await named(adm.read_validating_admission_policy_binding)
            for name, b in found.items():
                ref = b.spec.param_ref
                if ref is not None and ref.name:
                    refs[name] = f"{ref.namespace or ''}/{ref.name}"
            return {name: str(b.spec.policy_name) for name, b in found.items()}

        return await _read(policies), await _read(bindings), refs

    async def config_map_data(self, ref: str) -> dict[str, str]:
        from kubernetes_asyncio import client

        ns, _, name = ref.partition("/")
        cm = await client.CoreV1Api(self.api).read_namespaced_config_map(
            name, ns, _request_timeout=self.s.timeout
        )
        return {str(k): str(v) for k, v in (cm.data or {}).items()}


def _impersonating(api: Any, service_account: str) -> Any:
    """A second ApiClient on the same configuration that acts as ``namespace/name``."""
    from kubernetes_asyncio import client

    ns, _, name = service_account.partition("/")
    other = client.ApiClient(api.configuration)
    other.set_default_header("Impersonate-User", f"system:serviceaccount:{ns}:{name}")
    return other


async def _hub(s: DoctorSettings) -> HubFacts | None:
    if not s.hub_api_url or not s.hub_token:
        return None
    from gpuaas_service.clients.http import split_credentials
    from gpuaas_service.clients.hub import HubClient

    hub = HubClient(s.hub_api_url, s.hub_token, timeout=min(s.timeout, 10.0), max_clients=2)
    info = await _read(hub.info)
    whoami = await _read(hub.whoami) if info.value is not None else Read.failed(info.error)
    return HubFacts(split_credentials(s.hub_api_url).url, info, whoami)


async def _prometheus(s: DoctorSettings) -> PrometheusFacts | None:
    if not s.prometheus_url:
        return None
    from gpuaas_service.clients.prometheus import PrometheusClient, PrometheusError

    prom = PrometheusClient(s.prometheus_url, timeout=s.prometheus_timeout)

    async def ask(expr: str) -> Any:
        answer = await prom.instant(expr)
        if not isinstance(answer, dict) or answer.get("status") != "success":
            error = answer.get("error") if isinstance(answer, dict) else answer
            raise PrometheusError(f"query failed: {error!r}")
        return answer

    rules = await _read(prom.rules)
    queries: dict[str, Read[Any]] = {}
    for name, expr in (s.prometheus_queries or {}).items():
        if rules.value is None and "HTTP" not in rules.error:
            queries[name] = Read.failed(rules.error)  # unreachable: no query would answer
        else:
            queries[name] = await _read(functools.partial(ask, expr))
    return PrometheusFacts(prom.url, queries, rules)  # the URL without its credentials


async def gather(s: DoctorSettings, api: Any) -> Facts:
    """Read everything the checks judge, with ``api`` (a ``kubernetes_asyncio`` ApiClient).
    An apiserver that does not answer discovery is asked nothing more (each request would wait
    its timeout)."""
    kube = _Kube(api, api, s)
    catalog = _load_catalog(s.catalog_file)
    groups = await _read(kube.api_groups)
    hint = (
        "run gpuaas-admin --doctor with a kubeconfig that may read it (an administrator's) and"
        " --as-service-account NAMESPACE/NAME of the service"
    )
    common: dict[str, Any] = {
        "api_groups": groups,
        "hub": await _hub(s),
        "prometheus": await _prometheus(s),
        "catalog": catalog,
        "catalog_file": s.catalog_file,
        "policy_file": s.policy_file,
        "policy_problems": _policy_problems(s.policy_file, catalog.value),
        "kueue_api_version": s.kueue_api_version,
        "visibility_api_version": s.visibility_api_version,
        "notebook_namespace": s.notebook_namespace,
        "job_namespaces": s.job_namespaces,
        "identity_hint": hint,
        "job_topology_level": s.job_topology_level,
        "kueue_deployment": f"{s.kueue_namespace}/{s.kueue_deployment}",
    }
    if groups.value is None and not groups.forbidden and "HTTP" not in groups.error:
        down: Read[Any] = Read.failed(groups.error)
        return Facts(
            kueue_version=down,
            kueue_version_source="",
            flavors=down,
            cluster_queues=down,
            cohorts=down,
            local_queues=down,
            nodes=down,
            access=[],
            admission_policies=down,
            admission_bindings=down,
            **common,
        )
    review_api = _impersonating(api, s.service_account) if s.service_account else api
    kube = _Kube(api, review_api, s)
    needs = access_needs(s.notebook_namespace, s.job_namespaces, catalog.value)
    try:
        access = [await kube.review(n) for n in needs]
    finally:
        if review_api is not api:
            await review_api.close()
    version = await _read(kube.kueue_version)

    async def flavors() -> dict[str, Mapping[str, Any]]:
        return {
            str(f["metadata"]["name"]): f.get("spec") or {}
            for f in await kube.list_kueue("resourceflavors")
        }

    async def cqs() -> dict[str, Any]:
        return {i.name: i for i in map(read_cluster_queue, await kube.list_kueue("clusterqueues"))}

    async def cohorts() -> dict[str, Any]:
        return {i.name: i for i in map(read_cohort, await kube.list_kueue("cohorts"))}

    async def topologies() -> dict[str, list[str]]:
        """Kueue's Topologies: name → its levels' node labels (Topology Aware Scheduling)."""
        return {
            str(t["metadata"]["name"]): [
                str(level.get("nodeLabel") or "")
                for level in (t.get("spec") or {}).get("levels") or []
                if isinstance(level, Mapping)
            ]
            for t in await kube.list_kueue("topologies")
        }

    async def lqs() -> dict[tuple[str, str], Any]:
        return {
            (i.namespace, i.name): i
            for i in map(read_local_queue, await kube.list_kueue("localqueues"))
        }

    policies, bindings, refs = await kube.admission()
    images_ref = refs.get(JOB_IMAGES_POLICY, "jupyterhub/gpuaas-job-images")
    images: Read[Any] | None = None
    if catalog.value is not None and job_image_names(catalog.value):
        images = await _read(functools.partial(kube.config_map_data, images_ref))
    return Facts(
        notebook_pods=await _read(kube.notebook_pods),
        kueue_version=Read(version.value[0])
        if version.value
        else Read.failed(version.error, forbidden=version.forbidden),
        kueue_version_source=version.value[1] if version.value else "",
        flavors=await _read(flavors),
        cluster_queues=await _read(cqs),
        cohorts=await _read(cohorts),
        local_queues=await _read(lqs),
        nodes=await _read(kube.nodes),
        access=access,
        admission_policies=policies,
        admission_bindings=bindings,
        job_images=images,
        job_images_ref=images_ref,
        topologies=await _read(topologies),
        **common,
    )

"""The doctor's checks: pure functions from gathered plain data to one line each.

Every check says ``ok``, ``missing`` (something to create), ``wrong`` (something there but not
as jupyter-gpuaas needs it) or ``unknown`` (the doctor could not read what it would judge), with
the fix in the operator's words. Nothing here does I/O: :mod:`gpuaas_service.doctor.reads`
reads the cluster, the hub and Prometheus into :class:`Facts`, and :func:`run_checks` judges
them; each check is tested with tables of plain data (tests/unit/service/doctor/).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from gpuaas_service import api_types as service_api
from gpuaas_service.doctor.homes import server_users, shared_homes
from jupyter_gpuaas.core.catalog import HAMI_CORES, HAMI_MEMORY, Catalog, Offering, Tenant
from jupyter_gpuaas.core.kueue import ClusterQueueInfo, CohortInfo, LocalQueueInfo

__all__ = [
    "ADMISSION_POLICIES",
    "ALERTS",
    "KUEUE_MINIMUM",
    "Access",
    "AccessNeed",
    "Check",
    "Facts",
    "HubFacts",
    "NodeFacts",
    "PrometheusFacts",
    "Read",
    "Status",
    "access_needs",
    "admission_checks",
    "cohort_check",
    "gpu_checks",
    "homes_check",
    "hub_checks",
    "hub_scopes_needed",
    "job_image_names",
    "job_images_check",
    "kueue_checks",
    "local_queue_checks",
    "parse_version",
    "policy_check",
    "prometheus_checks",
    "queue_checks",
    "rbac_checks",
    "run_checks",
    "topology_checks",
]

Status = Literal["ok", "missing", "wrong", "unknown"]

T = TypeVar("T", covariant=True)

KUEUE_MINIMUM = (0, 18)
"""The oldest Kueue whose queue positions are right (docs/queue.md, "Kueue configuration": on
0.17 and older the LocalQueue visibility endpoint counted same-named LocalQueues of other
namespaces)."""

JOB_IMAGES_POLICY = "gpuaas-service-notebook-job-images"
"""The jobs policy whose binding takes the images ConfigMap (``Facts.job_images_ref``)."""

ADMISSION_POLICIES = (
    "gpuaas-service-pod-writes",
    "gpuaas-service-state-writes",
    "gpuaas-service-notebook-jobs",
    JOB_IMAGES_POLICY,
    "gpuaas-gpu-share-size",
)
"""The ValidatingAdmissionPolicies of culler/deploy/ (each with a binding of the same name);
tests/unit/deploy/test_doctor_manifests.py keeps this list equal to the files."""

ALERTS = (
    "GPUaaSIdleGPUsWhileTeamQueueWaits",
    "GPUaaSHandOffFailed",
    "GPUaaSCullerNoCompletedCycle",
    "GPUaaSPolicyInvalid",
)
"""The alerts of culler/deploy/prometheus-rules.yaml (kept equal by the same test)."""

_DEPLOY = "culler/deploy"


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def line(self) -> str:
        text = f"{self.status:<7} {self.name}: {self.detail}"
        return f"{text} -> fix: {self.fix}" if self.fix and not self.ok else text

    def as_dict(self) -> service_api.ServiceDoctorCheck:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}


@dataclass(frozen=True)
class Read(Generic[T]):
    """What was read (``value``), or why it could not be (``error``)."""

    value: T | None = None
    error: str = ""
    forbidden: bool = False
    """The error is a 403: the doctor's identity may not read it."""

    @classmethod
    def failed(cls, error: str, *, forbidden: bool = False) -> Read[T]:
        return cls(None, error or "unreadable", forbidden)


@dataclass(frozen=True)
class NodeFacts:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    unschedulable: bool = False


@dataclass(frozen=True)
class AccessNeed:
    """One thing the service does in Kubernetes (a verb on a resource, maybe one object)."""

    verb: str
    group: str
    resource: str
    namespace: str = ""  # "": cluster-wide
    name: str = ""
    fix: str = ""

    @property
    def where(self) -> str:
        return f"in {self.namespace}" if self.namespace else "cluster-wide"

    @property
    def what(self) -> str:
        res = f"{self.group}/{self.resource}" if self.group else self.resource
        return f"{res} {self.name}" if self.name else res


@dataclass(frozen=True)
class Access:
    need: AccessNeed
    allowed: bool | None  # None: the review itself failed
    reason: str = ""


@dataclass(frozen=True)
class HubFacts:
    url: str
    info: Read[Mapping[str, Any]]
    """``GET /hub/api/`` (the hub's version)."""
    whoami: Read[Mapping[str, Any]]
    """``GET /hub/api/user`` with the service's token (its kind, name and scopes)."""


@dataclass(frozen=True)
class PrometheusFacts:
    url: str
    queries: Mapping[str, Read[Any]]
    """Query name → its answer (``status: success``) or the error."""
    rules: Read[Any]
    """``GET /api/v1/rules``."""


@dataclass(frozen=True)
class Facts:
    """Everything the checks judge, as read by the doctor (reads.py)."""

    api_groups: Read[Mapping[str, Sequence[str]]]
    """API group → the versions the apiserver serves (discovery)."""
    kueue_version: Read[str]
    """Kueue's version (``v0.19.2``) and where it was read."""
    kueue_version_source: str
    flavors: Read[Mapping[str, Mapping[str, Any]]]
    """ResourceFlavor name → its spec."""
    cluster_queues: Read[Mapping[str, ClusterQueueInfo]]
    cohorts: Read[Mapping[str, CohortInfo]]
    local_queues: Read[Mapping[tuple[str, str], LocalQueueInfo]]
    nodes: Read[Sequence[NodeFacts]]
    access: Sequence[Access]
    admission_policies: Read[Sequence[str]]
    admission_bindings: Read[Mapping[str, str]]
    """Binding name → the policy it binds."""
    hub: HubFacts | None
    prometheus: PrometheusFacts | None
    catalog: Read[Catalog]
    catalog_file: str
    policy_file: str
    policy_problems: Read[Sequence[str]]
    """The policy file's problems (empty: valid), as ``--check-policy`` lists them."""
    kueue_api_version: str = "v1beta2"
    visibility_api_version: str = "v1beta2"
    notebook_namespace: str = "jupyter-users"
    notebook_pods: Read[Sequence[Mapping[str, Any]]] | None = None
    """The users' servers' pods in the notebook namespace (``None``: not read)."""
    job_namespaces: tuple[str, ...] = ()
    identity_hint: str = ""
    """How to run the doctor so it may read what it could not (said with ``unknown``)."""
    job_images: Read[Mapping[str, str]] | None = None
    """The data of the ConfigMap of notebook Jobs' images (``None``: not read, no team runs
    notebooks as Jobs)."""
    job_images_ref: str = "jupyterhub/gpuaas-job-images"
    """Where that ConfigMap is (the jobs policy binding's ``paramRef``)."""
    topologies: Read[Mapping[str, Sequence[str]]] | None = None
    """Kueue Topology name → its levels' node labels, coarsest first (``None``: not read)."""
    job_topology_level: str = "kubernetes.io/hostname"
    """The level notebook Jobs on a topology flavor require (c.GPUaaSService.job_topology_level)."""
    kueue_deployment: str = "kueue-system/kueue-controller-manager"
    """Kueue's manager Deployment (``namespace/name``), whose image tag is Kueue's version."""


_DOCTOR_RBAC = "Role and ClusterRole gpuaas-service-doctor in culler/deploy/gpuaas-service.yaml"


def _unknown(name: str, what: str, read: Read[Any], hint: str, rule: str = "") -> Check:
    """A line for what could not be read; a 403 of a read with an RBAC ``rule`` is said in
    words, with the rule to add (the service runs these checks as its own account)."""
    if read.forbidden and rule:
        return Check(
            name,
            "unknown",
            f"may not read {what}: the account these checks run as lacks {rule}",
            f"grant it {rule} ({_DOCTOR_RBAC}), or {hint}",
        )
    fix = hint if read.forbidden else "make it reachable from where the doctor runs"
    return Check(name, "unknown", f"cannot read {what}: {read.error}", fix)


# --------------------------------------------------------------------------- Kueue


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``v0.19.2`` / ``0.19.2-rc.1`` / ``v0.19`` → (0, 19, 2); ``None`` if not a version."""
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def kueue_checks(facts: Facts) -> list[Check]:
    """Kueue's APIs served in the versions the service reads, and its version supported."""
    out: list[Check] = []
    groups = facts.api_groups
    if groups.value is None:
        out.append(_unknown("kueue.api", "the API groups", groups, facts.identity_hint))
    else:
        wanted = [
            ("kueue.x-k8s.io", facts.kueue_api_version, "c.GPUaaSService.kueue_api_version"),
            (
                "visibility.kueue.x-k8s.io",
                facts.visibility_api_version,
                "c.GPUaaSService.kueue_visibility_api_version",
            ),
        ]
        absent = [(g, v, opt) for g, v, opt in wanted if v not in (groups.value.get(g) or ())]
        if not absent:
            out.append(
                Check(
                    "kueue.api",
                    "ok",
                    "serves " + ", ".join(f"{g}/{v}" for g, v, _ in wanted),
                )
            )
        elif all(not groups.value.get(g) for g, _, _ in absent):
            names = ", ".join(g for g, _, _ in absent)
            out.append(
                Check(
                    "kueue.api",
                    "missing",
                    f"the apiserver serves no {names}: Kueue is not installed (or its"
                    " visibility APIService is not available)",
                    "install Kueue 0.18 or newer with the Configuration of docs/deploy.md"
                    " (step 1); `kubectl get apiservice v1beta2.visibility.kueue.x-k8s.io`"
                    " says why the visibility API is not available",
                )
            )
        else:
            have = "; ".join(
                f"{g} serves {', '.join(groups.value.get(g) or ()) or 'nothing'}"
                for g, _, _ in absent
            )
            out.append(
                Check(
                    "kueue.api",
                    "wrong",
                    f"the service reads {', '.join(f'{g}/{v}' for g, v, _ in absent)}, but {have}",
                    "upgrade Kueue to 0.18 or newer, or set "
                    + " and ".join(opt for _, _, opt in absent)
                    + " to a version it serves",
                )
            )
    version = facts.kueue_version
    minimum = ".".join(map(str, KUEUE_MINIMUM))
    if version.value is None and version.forbidden:
        ns, _, deployment = facts.kueue_deployment.partition("/")
        rule = (
            f"get on deployments {deployment} in {ns} (apps) or on customresourcedefinitions"
            " clusterqueues.kueue.x-k8s.io (apiextensions.k8s.io)"
        )
        out.append(_unknown("kueue.version", "Kueue's version", version, facts.identity_hint, rule))
        return out
    if version.value is None:
        out.append(
            Check(
                "kueue.version",
                "unknown",
                f"cannot tell Kueue's version: {version.error}",
                f"make sure it is {minimum} or newer (docs/queue.md); "
                + (facts.identity_hint if version.forbidden else "see docs/deploy.md, step 1"),
            )
        )
        return out
    parsed = parse_version(version.value)
    where = f" ({facts.kueue_version_source})" if facts.kueue_version_source else ""
    if parsed is None:
        out.append(
            Check(
                "kueue.version",
                "unknown",
                f"{version.value!r}{where} is not a version",
                f"make sure Kueue is {minimum} or newer (docs/queue.md)",
            )
        )
    elif parsed[:2] < KUEUE_MINIMUM:
        out.append(
            Check(
                "kueue.version",
                "wrong",
                f"Kueue {version.value}{where} is older than {minimum}: its queue positions"
                " count other namespaces' same-named LocalQueues",
                f"upgrade Kueue to {minimum} or newer (docs/deploy.md, step 1)",
            )
        )
    else:
        out.append(Check("kueue.version", "ok", f"Kueue {version.value}{where}"))
    return out


# --------------------------------------------------------------------------- queues


def _tenant_namespace(tenant: Tenant, facts: Facts) -> str:
    return tenant.namespace or facts.notebook_namespace


def local_queue_checks(facts: Facts, catalog: Catalog) -> list[Check]:
    """Every team's namespace has its LocalQueue, pointing at an existing ClusterQueue (the
    notebooks' and, where the team sends notebooks as Jobs, the training one)."""
    lqs, cqs = facts.local_queues, facts.cluster_queues
    if lqs.value is None:
        return [_unknown("localqueues", "the LocalQueues", lqs, facts.identity_hint)]
    out: list[Check] = []
    for tenant in catalog.tenants.values():
        wanted = [
            (
                f"localqueue.{tenant.name}",
                _tenant_namespace(tenant, facts),
                tenant.local_queue,
                tenant.cluster_queue,
            )
        ]
        if tenant.jobs is not None:
            wanted.append(
                (
                    f"localqueue.{tenant.name}.jobs",
                    tenant.jobs.namespace,
                    tenant.jobs.local_queue,
                    None,
                )
            )
        for name, ns, lq_name, cq_name in wanted:
            lq = lqs.value.get((ns, lq_name))
            target = cq_name or (lq.cluster_queue if lq else f"team {tenant.name}'s ClusterQueue")
            if lq is None:
                out.append(
                    Check(
                        name,
                        "missing",
                        f"no LocalQueue {ns}/{lq_name} (team {tenant.name}'s servers would"
                        " wait forever)",
                        f"create LocalQueue {lq_name} in namespace {ns} with spec.clusterQueue"
                        f" {target} (devcluster/manifests/40-local-queues.yaml is an example)",
                    )
                )
                continue
            if cq_name and lq.cluster_queue != cq_name:
                out.append(
                    Check(
                        name,
                        "wrong",
                        f"LocalQueue {ns}/{lq_name} feeds ClusterQueue {lq.cluster_queue}, the"
                        f" catalog says {cq_name}",
                        f"set its spec.clusterQueue to {cq_name}, or the tenant's cluster_queue"
                        f" to {lq.cluster_queue}",
                    )
                )
                continue
            if cqs.value is not None and lq.cluster_queue not in cqs.value:
                out.append(
                    Check(
                        name,
                        "missing",
                        f"LocalQueue {ns}/{lq_name} feeds ClusterQueue {lq.cluster_queue},"
                        " which does not exist",
                        f"create ClusterQueue {lq.cluster_queue} (docs/deploy.md, step 2)",
                    )
                )
                continue
            if lq.stopped:
                out.append(
                    Check(
                        name,
                        "wrong",
                        f"LocalQueue {ns}/{lq_name} is stopped",
                        f"kubectl -n {ns} patch localqueue {lq_name} --type merge"
                        ' -p \'{"spec":{"stopPolicy":"None"}}\'',
                    )
                )
                continue
            out.append(
                Check(name, "ok", f"LocalQueue {ns}/{lq_name} -> ClusterQueue {lq.cluster_queue}")
            )
    return out


def _tenant_cluster_queue(
    tenant: Tenant, facts: Facts, cqs: Mapping[str, ClusterQueueInfo]
) -> ClusterQueueInfo | None:
    name = tenant.cluster_queue
    if name is None:
        lq = (facts.local_queues.value or {}).get(
            (_tenant_namespace(tenant, facts), tenant.local_queue)
        )
        name = lq.cluster_queue if lq else None
    return cqs.get(name) if name else None


def _cohort_root(name: str | None, cohorts: Mapping[str, CohortInfo]) -> str | None:
    seen: set[str] = set()
    while name and name not in seen:
        seen.add(name)
        parent = cohorts[name].parent if name in cohorts else None
        if not parent:
            return name
        name = parent
    return name


def _lent_in_cohort(
    cq: ClusterQueueInfo,
    key: tuple[str, str],
    cqs: Mapping[str, ClusterQueueInfo],
    cohorts: Mapping[str, CohortInfo],
) -> list[str]:
    """Who in ``cq``'s cohort tree has nominal quota for (flavor, resource) it may borrow."""
    root = _cohort_root(cq.cohort, cohorts)
    if root is None:
        return []
    out = [
        other.name
        for other in cqs.values()
        if other.name != cq.name
        and _cohort_root(other.cohort, cohorts) == root
        and other.quotas.get(key) is not None
        and other.quotas[key].nominal > 0
        and other.quotas[key].lending_limit != 0
    ]
    out += [
        f"cohort {c.name}"
        for c in cohorts.values()
        if _cohort_root(c.name, cohorts) == root
        and c.quotas.get(key) is not None
        and c.quotas[key].nominal > 0
    ]
    return out


def _quota_resources(offering: Offering) -> list[str]:
    return sorted(offering.quota_requests(offering.min_count or 1))


def _queue_needs(
    facts: Facts, catalog: Catalog, cqs: Mapping[str, ClusterQueueInfo]
) -> dict[tuple[str, str], tuple[list[str], set[str]]]:
    """(ClusterQueue, flavor) → the offerings of its teams there, and the resources they need."""
    needs: dict[tuple[str, str], tuple[list[str], set[str]]] = {}
    lqs = facts.local_queues.value or {}
    for tenant in catalog.tenants.values():
        # notebooks in the team's ClusterQueue; its notebook Jobs in their LocalQueue's
        queued: list[tuple[ClusterQueueInfo | None, Sequence[str]]] = [
            (_tenant_cluster_queue(tenant, facts, cqs), tenant.offerings)
        ]
        if tenant.jobs is not None:
            lq = lqs.get((tenant.jobs.namespace, tenant.jobs.local_queue))
            queued.append((cqs.get(lq.cluster_queue) if lq else None, tenant.jobs.offerings))
        for cq, slugs in queued:
            if cq is None:
                continue  # said by the LocalQueue's line
            for slug in dict.fromkeys(slugs):
                offering = catalog.offerings.get(slug)
                if offering is None:
                    continue
                resources = _quota_resources(offering)
                flavor = offering.flavor or ""
                if not flavor:
                    found = {f for r in resources for f in cq.flavors_for(r)}
                    flavor = sorted(found)[0] if len(found) == 1 else ""
                entry = needs.setdefault((cq.name, flavor), ([], set()))
                if slug not in entry[0]:  # a team's servers and its Jobs in one queue
                    entry[0].append(slug)
                entry[1].update(resources)
    return needs


def _quota_problems(
    cq: ClusterQueueInfo,
    flavor: str,
    resources: Iterable[str],
    cqs: Mapping[str, ClusterQueueInfo],
    cohorts: Mapping[str, CohortInfo],
) -> list[str]:
    problems: list[str] = []
    for resource in sorted(resources):
        if not cq.covers(resource):
            problems.append(f"{resource} is not in its coveredResources")
            continue
        key = (flavor, resource)
        quota = cq.quotas.get(key)
        if quota is None:
            problems.append(f"flavor {flavor} lists no {resource}")
        elif quota.nominal <= 0 and (
            quota.borrowing_limit == 0 or not _lent_in_cohort(cq, key, cqs, cohorts)
        ):
            problems.append(f"no quota for {resource} (nominal 0, nothing to borrow)")
    return problems


def _queue_check(
    cq: ClusterQueueInfo,
    flavor: str,
    slugs: Sequence[str],
    resources: set[str],
    facts: Facts,
) -> Check:
    flavors = facts.flavors.value or {}
    name = f"queue.{cq.name}.{flavor or 'any'}"
    who = f"offering{'s' if len(slugs) > 1 else ''} {', '.join(slugs)}"
    if flavor and flavor not in flavors:
        return Check(
            name,
            "missing",
            f"ResourceFlavor {flavor} ({who}) does not exist",
            f"create ResourceFlavor {flavor} with the node labels of its nodes"
            " (devcluster/manifests/20-resource-flavors.yaml is an example)",
        )
    listed = {f for _, fl in cq.resource_groups for f in fl}
    if flavor and flavor not in listed:
        res = ", ".join(sorted(resources)) or "cpu, memory"
        return Check(
            name,
            "missing",
            f"ClusterQueue {cq.name} has no flavor {flavor}: {who} can never be admitted",
            f"add flavor {flavor} with quotas for {res} to the spec.resourceGroups of"
            f" ClusterQueue {cq.name}",
        )
    problems = _quota_problems(
        cq, flavor, resources, facts.cluster_queues.value or {}, facts.cohorts.value or {}
    )
    if problems:
        return Check(
            name,
            "wrong",
            f"ClusterQueue {cq.name}, flavor {flavor} ({who}): " + "; ".join(problems),
            f"give ClusterQueue {cq.name} a nominalQuota for each of these on flavor"
            f" {flavor} (or let it borrow them in its cohort)",
        )
    return Check(
        name, "ok", f"ClusterQueue {cq.name} has quota on {flavor or 'its flavors'} for {who}"
    )


def queue_checks(facts: Facts, catalog: Catalog) -> list[Check]:
    """Each team's offerings map to a flavor that exists and that the team's ClusterQueue lists
    with quota (its own, or borrowable in its cohort) for every resource Kueue counts; one line
    per (ClusterQueue, flavor)."""
    cqs, flavors = facts.cluster_queues.value, facts.flavors.value
    if cqs is None:
        return [
            _unknown(
                "clusterqueues", "the ClusterQueues", facts.cluster_queues, facts.identity_hint
            )
        ]
    if flavors is None:
        return [
            _unknown("clusterqueues", "the ResourceFlavors", facts.flavors, facts.identity_hint)
        ]
    return [
        _queue_check(cqs[cq_name], flavor, slugs, resources, facts)
        for (cq_name, flavor), (slugs, resources) in sorted(
            _queue_needs(facts, catalog, cqs).items()
        )
    ]


def cohort_check(facts: Facts, catalog: Catalog, policy_in_force: bool) -> Check:
    """The reclaim loop frees notebook GPUs for queued training Jobs: that helps only where a
    training ClusterQueue shares a cohort with the notebooks' queues and may borrow the GPUs
    they lend (docs/culler.md)."""
    name = "cohort"
    if not policy_in_force:
        return Check(name, "ok", "no policy file: reclaim is off, nothing is assumed of cohorts")
    cqs, lqs = facts.cluster_queues.value, facts.local_queues.value
    if cqs is None or lqs is None:
        read = facts.cluster_queues if cqs is None else facts.local_queues
        return _unknown(name, "the Kueue queues", read, facts.identity_hint)
    cohorts = facts.cohorts.value or {}
    notebooks = {
        cq.name: cq
        for t in catalog.tenants.values()
        if (cq := _tenant_cluster_queue(t, facts, cqs)) is not None
    }
    training_ns = set(facts.job_namespaces) | {
        t.jobs.namespace for t in catalog.tenants.values() if t.jobs is not None
    }
    training = {
        lq.cluster_queue: cqs[lq.cluster_queue]
        for (ns, _), lq in lqs.items()
        if ns in training_ns and lq.cluster_queue in cqs and lq.cluster_queue not in notebooks
    }
    if not training:
        return Check(
            name,
            "wrong",
            "a policy is in force but no training ClusterQueue is known (no LocalQueue in"
            f" {', '.join(sorted(training_ns)) or 'any job namespace'}): reclaim frees GPUs"
            " for nobody",
            "set c.GPUaaSService.job_namespaces to the teams' training namespaces, each with a"
            " LocalQueue (docs/deploy.md, step 2)",
        )
    problems: list[str] = []
    for tq in sorted(training.values(), key=lambda q: q.name):
        root = _cohort_root(tq.cohort, cohorts)
        lenders = [
            nq
            for nq in notebooks.values()
            if root is not None and _cohort_root(nq.cohort, cohorts) == root
        ]
        if not lenders:
            problems.append(
                f"ClusterQueue {tq.name} shares no cohort with the notebooks' queues"
                f" ({', '.join(sorted(notebooks))})"
            )
            continue
        borrowable = [
            key
            for key, q in tq.quotas.items()
            if key[1].startswith("nvidia.com/")
            and q.borrowing_limit != 0
            and any(
                (lq := nq.quotas.get(key)) is not None and lq.nominal > 0 and lq.lending_limit != 0
                for nq in lenders
            )
        ]
        if not borrowable:
            problems.append(
                f"ClusterQueue {tq.name} may borrow no GPU that the notebooks' queues lend"
                " (borrowingLimit 0, lendingLimit 0, or no common flavor)"
            )
    if problems:
        return Check(
            name,
            "wrong",
            "; ".join(problems),
            "put each team's training and notebook ClusterQueues in one cohort, the notebooks'"
            " lending and the training one borrowing their GPU flavors (docs/deploy.md, step 2)",
        )
    return Check(
        name,
        "ok",
        f"training queues {', '.join(sorted(training))} borrow the GPUs that"
        f" {', '.join(sorted(notebooks))} lend",
    )


# --------------------------------------------------------------------------- nodes


def _node_resources(offering: Offering) -> list[str]:
    """The extended resources a node must advertise for the offering: HAMi's memory and cores
    are HAMi's scheduler's book-keeping (a node annotation), not node resources."""
    return sorted(r for r in offering.requests(1) if r not in (HAMI_MEMORY, HAMI_CORES))


def _positive(value: str) -> bool:
    try:
        return float(value) > 0
    except ValueError:
        return value not in ("", "0")


def gpu_checks(facts: Facts, catalog: Catalog) -> list[Check]:
    """Every GPU offering's resources are advertised by some node its pods may land on (the
    offering's node selector and its flavor's node labels)."""
    nodes = facts.nodes
    if nodes.value is None:
        return [_unknown("gpu", "the nodes", nodes, facts.identity_hint)]
    flavors = facts.flavors.value or {}
    out: list[Check] = []
    for offering in catalog.offerings.values():
        resources = _node_resources(offering)
        if not offering.is_gpu or not resources:
            continue
        selector = dict(offering.node_selector)
        flavor = flavors.get(offering.flavor or "") or {}
        selector.update({str(k): str(v) for k, v in (flavor.get("nodeLabels") or {}).items()})
        name = f"gpu.{offering.slug}"
        placed = [n for n in nodes.value if all(n.labels.get(k) == v for k, v in selector.items())]
        serving = [
            n
            for n in placed
            if not n.unschedulable and all(_positive(n.allocatable.get(r, "0")) for r in resources)
        ]
        res = ", ".join(resources)
        where = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "any labels"
        if serving:
            shown = ", ".join(n.name for n in serving[:3]) + (
                f" and {len(serving) - 3} more" if len(serving) > 3 else ""
            )
            out.append(Check(name, "ok", f"{res} advertised by {shown}"))
            continue
        elsewhere = [
            n.name
            for n in nodes.value
            if all(_positive(n.allocatable.get(r, "0")) for r in resources)
        ]
        detail = f"no schedulable node with {where} advertises {res}"
        if elsewhere:
            detail += f" (nodes {', '.join(elsewhere[:3])} do, with other labels)"
        out.append(
            Check(
                name,
                "missing",
                detail,
                _advertise_fix(offering, where),
            )
        )
    return out


# --------------------------------------------------------------------------- topology

_TAS_DOC = "docs/deploy.md, Topology Aware Scheduling"


def _job_flavors(catalog: Catalog | None) -> set[str]:
    """The flavors of the offerings any team runs notebook Jobs on."""
    if catalog is None:
        return set()
    return {
        flavor
        for t in catalog.tenants.values()
        if t.jobs is not None
        for slug in t.jobs.offerings
        if slug in catalog.offerings and (flavor := catalog.offerings[slug].flavor)
    }


def _topology_flavor(
    facts: Facts,
    flavor: str,
    spec: Mapping[str, Any],
    topology: str,
    levels: Sequence[str],
    jobs_on_it: bool,
) -> Check:
    """A topology flavor whose Topology exists: its nodes carry every level, and notebook Jobs
    on it (``jobs_on_it``) require one of its levels."""
    name = f"topology.{flavor}"
    if facts.nodes.value is None:
        return _unknown(name, "the nodes", facts.nodes, facts.identity_hint)
    selector = {str(k): str(v) for k, v in (spec.get("nodeLabels") or {}).items()}
    where = ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "any labels"
    placed = [
        n for n in facts.nodes.value if all(n.labels.get(k) == v for k, v in selector.items())
    ]
    lacking = sorted(
        (n.name, missing)
        for n in placed
        if (missing := [lv for lv in levels if lv not in n.labels])
    )
    if not placed:
        return Check(
            name,
            "missing",
            f"no node carries ResourceFlavor {flavor}'s labels ({where})",
            f"label the pool's nodes {where}, and each with its place in Topology {topology}"
            f" ({', '.join(levels)})",
        )
    if lacking:
        shown = "; ".join(f"{node}: {', '.join(m)}" for node, m in lacking[:3])
        more = f" and {len(lacking) - 3} more" if len(lacking) > 3 else ""
        first, labels = lacking[0]
        return Check(
            name,
            "wrong",
            f"{len(lacking)} of {len(placed)} nodes of ResourceFlavor {flavor} lack a level of"
            f" Topology {topology}, so Kueue counts no room on them ({shown}{more})",
            f"kubectl label node {first} "
            + " ".join(f"{lv}=<its {lv.rsplit('/', 1)[-1]}>" for lv in labels),
        )
    if jobs_on_it and facts.job_topology_level not in ("", *levels):
        return Check(
            name,
            "wrong",
            f"notebook Jobs on ResourceFlavor {flavor} require the level"
            f" {facts.job_topology_level}, which Topology {topology} does not have"
            f" ({', '.join(levels)}): Kueue never admits them",
            f"c.GPUaaSService.job_topology_level = {levels[-1]!r}",
        )
    return Check(
        name,
        "ok",
        f"Topology {topology} ({', '.join(levels)}); {len(placed)} nodes carry every level",
    )


def topology_checks(facts: Facts, catalog: Catalog | None) -> list[Check]:
    """Kueue's Topology Aware Scheduling (docs/deploy.md): each ResourceFlavor with a
    ``topologyName`` names a Topology that exists; every node the flavor selects carries a label
    for each level of it (Kueue counts no room on a node without them); every Topology is named
    by a flavor; and the level notebook Jobs require on such a flavor is one of its levels
    (else Kueue never admits them: 'does not contain the requested level'). One ``ok`` line
    when no flavor has a topology: it is optional, recommended for multi-GPU training pools."""
    flavors, read = facts.flavors.value, facts.topologies
    if flavors is None or read is None:
        return []  # the flavors' own line says they are unreadable; or not gathered
    tas = {
        name: str(spec.get("topologyName"))
        for name, spec in sorted(flavors.items())
        if spec.get("topologyName")
    }
    if read.value is None:
        return [_unknown("topology", "Kueue's Topologies", read, facts.identity_hint)]
    if not tas and not read.value:
        return [
            Check(
                "topology",
                "ok",
                "no ResourceFlavor has a topologyName: Kueue's Topology Aware Scheduling places"
                f" nothing (set it up for multi-GPU training pools: {_TAS_DOC})",
            )
        ]
    out: list[Check] = []
    jobs_on = _job_flavors(catalog)
    for flavor, topology in tas.items():
        if topology not in read.value:
            out.append(
                Check(
                    f"topology.{flavor}",
                    "missing",
                    f"ResourceFlavor {flavor} names the Topology {topology}, which does not"
                    " exist: Kueue admits nothing on this flavor",
                    f"create the Topology {topology}: a level per node label of the pool's"
                    f" place, kubernetes.io/hostname last ({_TAS_DOC})",
                )
            )
        else:
            levels = list(read.value[topology])
            spec = flavors[flavor]
            out.append(_topology_flavor(facts, flavor, spec, topology, levels, flavor in jobs_on))
    for topology in sorted(set(read.value) - set(tas.values())):
        out.append(
            Check(
                f"topology.{topology}",
                "missing",
                f"no ResourceFlavor names the Topology {topology}: it places nothing",
                f"a ResourceFlavor of the training pool with spec.topologyName: {topology} (a new"
                f" flavor: Kueue makes a flavor's spec immutable once it has one; {_TAS_DOC})",
            )
        )
    return out


def _advertise_fix(offering: Offering, where: str) -> str:
    if offering.kind == "mig":
        how = "enable MIG (mixed strategy) on those GPUs with the GPU operator's MIG manager"
    elif offering.kind == "fraction":
        how = "install HAMi's device plugin on those nodes (docs/fractions.md)"
    elif offering.kind == "shared":
        how = "turn on time-slicing with renamed resources in the device plugin's config"
    else:
        how = "install the NVIDIA device plugin (or GPU operator) on those nodes"
    return (
        f"{how}, and label them {where}; or correct offering {offering.slug}'s node_selector/flavor"
    )


# --------------------------------------------------------------------------- RBAC


def access_needs(
    notebook_namespace: str,
    job_namespaces: Sequence[str],
    catalog: Catalog | None,
) -> list[AccessNeed]:
    """What the service does in Kubernetes (culler/deploy/gpuaas-service.yaml grants it)."""
    rbac = f"{_DEPLOY}/culler.yaml"
    ns = notebook_namespace
    own = f"Role gpuaas-service in {ns} ({rbac})"
    needs = [AccessNeed(v, "", "pods", ns, fix=own) for v in ("get", "list", "watch", "patch")]
    needs.append(AccessNeed("create", "", "events", ns, fix=own))
    needs.append(AccessNeed("create", "", "configmaps", ns, fix=own))
    for cm in ("gpuaas-culler-handoffs", "gpuaas-console-journal", "gpuaas-usage-history"):
        needs += [AccessNeed(v, "", "configmaps", ns, cm, fix=own) for v in ("get", "update")]
    kueue = f"ClusterRole gpuaas-service-kueue-reader ({rbac})"
    for res in ("clusterqueues", "cohorts", "localqueues", "workloads", "resourceflavors"):
        needs += [AccessNeed(v, "kueue.x-k8s.io", res, fix=kueue) for v in ("list", "watch")]
    needs += [
        AccessNeed("get", "visibility.kueue.x-k8s.io", f"{kind}/pendingworkloads", fix=kueue)
        for kind in ("localqueues", "clusterqueues")
    ]
    nodes = f"ClusterRole gpuaas-service-node-reader and its binding ({rbac})"
    needs += [AccessNeed(v, "", "nodes", fix=nodes) for v in ("get", "list", "watch")]
    jobs_ns = list(job_namespaces)
    if catalog is not None:
        jobs_ns += [t.jobs.namespace for t in catalog.tenants.values() if t.jobs is not None]
    for jns in dict.fromkeys(jobs_ns):
        pool = f"RoleBinding gpuaas-service-pool-pods-reader in {jns} ({rbac})"
        needs.append(AccessNeed("list", "", "pods", jns, fix=pool))
    if catalog is not None:
        for jns in dict.fromkeys(
            t.jobs.namespace for t in catalog.tenants.values() if t.jobs is not None
        ):
            jobs = f"RoleBinding gpuaas-service-notebook-jobs in {jns} ({rbac})"
            needs += [
                AccessNeed(v, "batch", "jobs", jns, fix=jobs)
                for v in ("get", "list", "create", "patch", "delete")
            ]
            needs += [
                AccessNeed(v, "", "configmaps", jns, fix=jobs)
                for v in ("get", "create", "patch", "delete")
            ]
            needs += [
                AccessNeed(v, "", "secrets", jns, fix=jobs) for v in ("create", "patch", "delete")
            ]
    return needs


def rbac_checks(facts: Facts) -> list[Check]:
    """One line per (resource, namespace, object): the verbs the service's account may not use."""
    grouped: dict[tuple[str, str, str, str], list[Access]] = {}
    for access in facts.access:
        n = access.need
        grouped.setdefault((n.group, n.resource, n.namespace, n.name), []).append(access)
    out: list[Check] = []
    for (_group, resource, namespace, obj), accesses in grouped.items():
        need = accesses[0].need
        name = "rbac." + ".".join(p for p in (resource, namespace or "cluster", obj) if p)
        verbs = ", ".join(a.need.verb for a in accesses)
        denied = [a for a in accesses if a.allowed is False]
        failed = [a for a in accesses if a.allowed is None]
        if denied:
            out.append(
                Check(
                    name,
                    "missing",
                    f"may not {', '.join(a.need.verb for a in denied)} {need.what} {need.where}",
                    f"apply {need.fix}",
                )
            )
        elif failed:
            out.append(
                Check(
                    name,
                    "unknown",
                    f"cannot review {verbs} {need.what} {need.where}: {failed[0].reason}",
                    facts.identity_hint,
                )
            )
        else:
            out.append(Check(name, "ok", f"may {verbs} {need.what} {need.where}"))
    return out


# --------------------------------------------------------------------------- admission


def admission_checks(facts: Facts) -> list[Check]:
    """The ValidatingAdmissionPolicies of culler/deploy/ are in place, each bound."""
    pols, binds = facts.admission_policies, facts.admission_bindings
    if pols.value is None or binds.value is None:
        read = pols if pols.value is None else binds
        rule = (
            "get on validatingadmissionpolicies and validatingadmissionpolicybindings"
            f" (admissionregistration.k8s.io) named {', '.join(ADMISSION_POLICIES)}"
        )
        return [_unknown("admission", "the admission policies", read, facts.identity_hint, rule)]
    out: list[Check] = []
    bound = set(binds.value.values())
    files = {
        "gpuaas-service-pod-writes": "gpuaas-service-pod-policy.yaml",
        "gpuaas-service-state-writes": "gpuaas-service-state-policy.yaml",
        "gpuaas-service-notebook-jobs": "gpuaas-service-jobs-policy.yaml",
        JOB_IMAGES_POLICY: "gpuaas-service-jobs-policy.yaml",
        "gpuaas-gpu-share-size": "gpu-share-size-policy.yaml",
    }
    for policy in ADMISSION_POLICIES:
        name = f"admission.{policy}"
        fix = f"kubectl apply -f {_DEPLOY}/{files.get(policy, '')}"
        if policy not in pols.value:
            out.append(Check(name, "missing", f"no ValidatingAdmissionPolicy {policy}", fix))
        elif policy not in bound:
            out.append(
                Check(name, "missing", f"ValidatingAdmissionPolicy {policy} has no binding", fix)
            )
        else:
            out.append(Check(name, "ok", f"ValidatingAdmissionPolicy {policy} is bound"))
    return out


# --------------------------------------------------------------------------- hub


def hub_scopes_needed(policy_in_force: bool) -> list[str]:
    """The Hub API scopes the service uses (culler/deploy/z2jh-values.yaml's role)."""
    scopes = ["read:servers", "read:tokens", "delete:servers", "servers"]
    if policy_in_force:
        scopes += ["read:users:groups", "list:groups", "read:groups"]
    return scopes


def hub_checks(facts: Facts, policy_in_force: bool) -> list[Check]:
    """The hub answers, and the service's token holds every scope the service uses."""
    hub = facts.hub
    if hub is None:
        return [
            Check(
                "hub",
                "missing",
                "no Hub API URL and token",
                "set $JUPYTERHUB_API_URL and $JUPYTERHUB_API_TOKEN (the service's token)",
            )
        ]
    out: list[Check] = []
    if hub.info.value is None:
        out.append(
            Check(
                "hub",
                "missing",
                f"the Hub API at {hub.url} does not answer: {hub.info.error}",
                "check c.GPUaaSService.hub_api_url / $JUPYTERHUB_API_URL and that the hub runs",
            )
        )
        return out
    version = str(hub.info.value.get("version") or "?")
    out.append(Check("hub", "ok", f"JupyterHub {version} at {hub.url}"))
    who = hub.whoami
    if who.value is None:
        out.append(
            Check(
                "hub.scopes",
                "wrong",
                f"the service's token is refused: {who.error}",
                "set $JUPYTERHUB_API_TOKEN to the token of hub.services.gpuaas (apiToken)",
            )
        )
        return out
    held = {str(s) for s in who.value.get("scopes") or ()}
    needed = hub_scopes_needed(policy_in_force)
    lacking = [s for s in needed if s not in held]
    ident = f"{who.value.get('kind', 'token')} {who.value.get('name', '?')}"
    if lacking:
        filtered = [s for s in lacking if any(h.startswith(s + "!") for h in held)]
        detail = f"{ident} lacks {', '.join(lacking)}"
        if filtered:
            detail += f" ({', '.join(filtered)} only filtered)"
        out.append(
            Check(
                "hub.scopes",
                "missing",
                detail,
                f"add {', '.join(lacking)} to the scopes of the hub role of the service"
                f" (hub.loadRoles.gpuaas-service in {_DEPLOY}/z2jh-values.yaml)",
            )
        )
    else:
        out.append(Check("hub.scopes", "ok", f"{ident} holds {', '.join(needed)}"))
    return out


# --------------------------------------------------------------------------- Prometheus


def prometheus_checks(facts: Facts) -> list[Check]:
    """Prometheus answers the console's and the culler's queries and has the alert rules."""
    prom = facts.prometheus
    if prom is None:
        return [
            Check(
                "prometheus",
                "missing",
                "no prometheus_url: no utilisation for the culler, no history in the console",
                'set c.GPUaaSService.prometheus_url = "http://prometheus:9090"',
            )
        ]
    failed = {n: r.error for n, r in prom.queries.items() if r.value is None}
    out: list[Check] = []
    if len(failed) == len(prom.queries) and failed:
        first = next(iter(failed.values()))
        out.append(
            Check(
                "prometheus",
                "missing",
                f"{prom.url} does not answer: {first}",
                "start Prometheus or correct c.GPUaaSService.prometheus_url",
            )
        )
        return out
    if failed:
        out.append(
            Check(
                "prometheus",
                "wrong",
                "queries refused: " + "; ".join(f"{n}: {e}" for n, e in failed.items()),
                "correct c.GPUaaSService.prometheus_query / hami_last_kernel_query",
            )
        )
    else:
        out.append(Check("prometheus", "ok", f"{prom.url} answers the {len(prom.queries)} queries"))
    rules = prom.rules
    if rules.value is None:
        out.append(Check("prometheus.rules", "unknown", f"cannot list rules: {rules.error}"))
        return out
    answer: Mapping[str, Any] = rules.value if isinstance(rules.value, Mapping) else {}
    raw = answer.get("data")
    data: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    loaded = {
        str(rule.get("name"))
        for group in data.get("groups") or []
        if isinstance(group, Mapping)
        for rule in group.get("rules") or []
        if isinstance(rule, Mapping)
    }
    absent = [a for a in ALERTS if a not in loaded]
    if absent:
        out.append(
            Check(
                "prometheus.rules",
                "missing",
                f"alert rules not loaded: {', '.join(absent)}",
                f"load {_DEPLOY}/prometheus-rules.yaml (rule_files, or a PrometheusRule)",
            )
        )
    else:
        out.append(Check("prometheus.rules", "ok", f"the {len(ALERTS)} alerts are loaded"))
    return out


# --------------------------------------------------------------------------- notebook Jobs


def job_image_names(catalog: Catalog) -> list[str]:
    """The images notebook Jobs may run: those of the offerings the teams' ``jobs`` list."""
    names: list[str] = []
    for tenant in catalog.tenants.values():
        for slug in tenant.jobs.offerings if tenant.jobs is not None else ():
            offering = catalog.offerings.get(slug)
            if offering is not None:
                names += [i.image for i in catalog.images_for(offering)]
    return list(dict.fromkeys(names))


def job_images_check(facts: Facts, catalog: Catalog) -> Check | None:
    """The jobs admission policy's ConfigMap lists every image a notebook Job may run (without
    it every submission is refused); ``None`` where no team runs notebooks as Jobs."""
    wanted = job_image_names(catalog)
    read = facts.job_images
    if not wanted or read is None:
        return None
    name = "jobs.images"
    ns, _, cm = facts.job_images_ref.partition("/")
    lines = "\\n".join(wanted)
    create = f"kubectl -n {ns} create configmap {cm} --from-literal=images=\"$(printf '{lines}')\""
    if read.value is None:
        if "404" in read.error:
            return Check(
                name,
                "missing",
                f"no ConfigMap {facts.job_images_ref}: every notebook Job is refused (the"
                f" binding {JOB_IMAGES_POLICY}'s parameterNotFoundAction is Deny)",
                create,
            )
        rule = f"get on configmaps {cm} in {ns}"
        what = f"ConfigMap {facts.job_images_ref}"
        return _unknown(name, what, read, facts.identity_hint, rule)
    listed = {line.strip() for line in str(read.value.get("images", "")).splitlines()}
    absent = [w for w in wanted if w not in listed]
    if absent:
        return Check(
            name,
            "wrong",
            f"ConfigMap {facts.job_images_ref} does not list {', '.join(absent)}: notebook Jobs"
            " in those images are refused",
            "add them to its key images, one per line",
        )
    return Check(
        name,
        "ok",
        f"ConfigMap {facts.job_images_ref} lists every image notebook Jobs may run"
        f" ({', '.join(wanted)})",
    )


# --------------------------------------------------------------------------- files


def catalog_check(facts: Facts) -> Check:
    if facts.catalog.value is None:
        if not facts.catalog_file:
            return Check(
                "catalog",
                "missing",
                "no catalog_file: the doctor cannot check offerings and teams",
                'set c.GPUaaSService.catalog_file = "/etc/gpuaas/catalog.yaml" (the'
                " spawner's catalog)",
            )
        return Check(
            "catalog", "wrong", f"{facts.catalog_file}: {facts.catalog.error}", "fix the file"
        )
    cat = facts.catalog.value
    return Check(
        "catalog",
        "ok",
        f"{facts.catalog_file}: {len(cat.offerings)} offerings, {len(cat.tenants)} teams",
    )


# --------------------------------------------------------------------------- homes


_OWNER_CHECK = (
    "a kernel-state snapshot is loaded only when its files are the kernel's user id's, which"
    " tells users apart only where no other user's server can write into their home"
    " (docs/security.md)"
)


def homes_check(facts: Facts) -> Check | None:
    """Under z2jh every server runs as uid 1000: kernel-state snapshots are told apart by the
    home they lie in, so no user's server may write into another's (:mod:`.homes`)."""
    read = facts.notebook_pods
    if read is None:
        return None
    if read.value is None:
        return _unknown("homes", "the servers' pods", read, facts.identity_hint)
    users = server_users(read.value)
    if not users:
        return Check("homes", "ok", f"no running servers to read; {_OWNER_CHECK}")
    shared = shared_homes(read.value)
    if not shared:
        return Check(
            "homes",
            "ok",
            f"no server of {len(users)} users can write into another user's home: {_OWNER_CHECK}",
        )
    first = shared[0]
    uid = f"user id {first.uid}" if first.uid is not None else "the image's user id"
    others = len(shared) - 1
    more = f" ({others} more pair{'s' if others > 1 else ''})" if others else ""
    return Check(
        "homes",
        "wrong",
        f"{first.writer}'s server can write into {first.owner}'s home ({first.volume},"
        f" {first.path}), both as {uid}{more}: a kernel-state snapshot {first.writer} puts there"
        f" passes {first.owner}'s owner check, and restoring it runs {first.writer}'s code as"
        f" {first.owner}",
        "mount each user's home from a volume or subPath of their own (KubeSpawner's"
        " claim-{username}; z2jh singleuser.storage), mount shared volumes readOnly or"
        " elsewhere than the homes, or give each user a user id of their own"
        " (c.KubeSpawner.uid)",
    )


def policy_check(facts: Facts) -> Check:
    """The policy file is valid against the catalog (``--check-policy``'s rules)."""
    if not facts.policy_file:
        return Check("policy", "ok", "no policy file: the culler reclaims nothing")
    problems = facts.policy_problems
    if problems.value is None:
        return Check("policy", "wrong", f"{facts.policy_file}: {problems.error}", "fix the file")
    if problems.value:
        return Check(
            "policy",
            "wrong",
            f"{facts.policy_file}: " + "; ".join(problems.value),
            f"gpuaas-admin --check-policy {facts.policy_file} --catalog CATALOG lists them",
        )
    return Check("policy", "ok", f"{facts.policy_file} is valid against the catalog")


# --------------------------------------------------------------------------- all


def run_checks(facts: Facts) -> list[Check]:
    """Every check, in the order of docs/deploy.md. An apiserver that does not answer at all
    is one line, not one per Kubernetes check."""
    groups = facts.api_groups
    reachable = groups.value is not None or groups.forbidden or "HTTP" in groups.error
    catalog = facts.catalog.value
    policy_in_force = bool(facts.policy_file) and facts.policy_problems.value == []
    if reachable:
        out = kueue_checks(facts)
    else:
        out = [
            Check(
                "kubernetes",
                "missing",
                f"the apiserver does not answer: {groups.error}",
                "check the credentials in effect ($KUBECONFIG, or the pod's service account)"
                " and that the apiserver is reachable from here",
            )
        ]
    out.append(catalog_check(facts))
    if catalog is not None and reachable:
        out += local_queue_checks(facts, catalog)
        out += queue_checks(facts, catalog)
        out.append(cohort_check(facts, catalog, policy_in_force))
        out += gpu_checks(facts, catalog)
        jobs = job_images_check(facts, catalog)
        if jobs is not None:
            out.append(jobs)
    if reachable:
        out += topology_checks(facts, catalog)
        out += rbac_checks(facts)
        out += admission_checks(facts)
    out += hub_checks(facts, policy_in_force)
    out += prometheus_checks(facts)
    out.append(policy_check(facts))
    homes = homes_check(facts) if reachable else None
    if homes is not None:
        out.append(homes)
    return out


def all_ok(checks: Iterable[Check]) -> bool:
    return all(c.ok for c in checks)

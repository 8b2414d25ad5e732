"""The doctor's pure checks, table by table: each area from plain data, ok and each way wrong."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuaas_service.doctor.checks import (
    Access,
    AccessNeed,
    Check,
    Facts,
    HubFacts,
    NodeFacts,
    PrometheusFacts,
    Read,
    access_needs,
    admission_checks,
    cohort_check,
    gpu_checks,
    hub_checks,
    kueue_checks,
    local_queue_checks,
    parse_version,
    policy_check,
    prometheus_checks,
    queue_checks,
    rbac_checks,
    run_checks,
)
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog
from jupyter_gpuaas.core.kueue import read_cluster_queue, read_cohort, read_local_queue

CATALOG = build_catalog(
    [
        CatalogSource(
            "test.",
            {
                "offerings": [
                    {
                        "slug": "h100",
                        "display_name": "H100",
                        "kind": "gpu",
                        "resources": {"nvidia.com/gpu": 1},
                        "flavor": "h100",
                        "node_selector": {"pool": "h100"},
                    },
                    {
                        "slug": "mig",
                        "display_name": "MIG",
                        "kind": "mig",
                        "resources": {"nvidia.com/mig-1g.5gb": 1},
                        "gpu_equivalents": "1/7",
                        "flavor": "a100",
                    },
                    {"slug": "cpu", "display_name": "CPU", "kind": "cpu", "flavor": "h100"},
                ],
                "tenants": [
                    {
                        "name": "team-a",
                        "display_name": "A",
                        "groups": ["a"],
                        "local_queue": "team-a",
                        "offerings": ["h100", "mig", "cpu"],
                        "default_offering": "h100",
                    },
                ],
            },
        )
    ],
    default_namespace="users",
)


def _cq(name: str, quotas: dict[str, dict[str, Any]], cohort: str | None = "org") -> dict[str, Any]:
    """A ClusterQueue: quotas as flavor -> {resource: nominal or (nominal, borrowingLimit)}."""
    flavors = []
    covered: list[str] = []
    for flavor, res in quotas.items():
        entries = []
        for r, q in res.items():
            nominal, borrow = q if isinstance(q, tuple) else (q, None)
            entry: dict[str, Any] = {"name": r, "nominalQuota": nominal}
            if borrow is not None:
                entry["borrowingLimit"] = borrow
            entries.append(entry)
            if r not in covered:
                covered.append(r)
        flavors.append({"name": flavor, "resources": entries})
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": covered, "flavors": flavors}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"metadata": {"name": name}, "spec": spec}


HEALTHY_CQS = [
    _cq("a-nb", {"h100": {"cpu": 8, "nvidia.com/gpu": 2}, "a100": {"nvidia.com/mig-1g.5gb": 4}}),
    _cq("a-train", {"h100": {"cpu": 0, "nvidia.com/gpu": 0}}),
]
HEALTHY_LQS = [
    {"metadata": {"name": "team-a", "namespace": "users"}, "spec": {"clusterQueue": "a-nb"}},
    {"metadata": {"name": "training", "namespace": "team-a"}, "spec": {"clusterQueue": "a-train"}},
]


def facts(**changes: Any) -> Facts:
    base = Facts(
        api_groups=Read(
            {"kueue.x-k8s.io": ["v1beta2", "v1beta1"], "visibility.kueue.x-k8s.io": ["v1beta2"]}
        ),
        kueue_version=Read("v0.19.2"),
        kueue_version_source="image",
        flavors=Read({"h100": {"nodeLabels": {"pool": "h100"}}, "a100": {}}),
        cluster_queues=Read({c["metadata"]["name"]: read_cluster_queue(c) for c in HEALTHY_CQS}),
        cohorts=Read({"org": read_cohort({"metadata": {"name": "org"}, "spec": {}})}),
        local_queues=Read({(q.namespace, q.name): q for q in map(read_local_queue, HEALTHY_LQS)}),
        nodes=Read(
            [
                NodeFacts("gpu-1", {"pool": "h100"}, {"nvidia.com/gpu": "8"}),
                NodeFacts("mig-1", {"pool": "a100"}, {"nvidia.com/mig-1g.5gb": "7"}),
            ]
        ),
        access=[Access(AccessNeed("list", "", "nodes"), True)],
        admission_policies=Read(
            [
                "gpuaas-service-pod-writes",
                "gpuaas-service-state-writes",
                "gpuaas-service-notebook-jobs",
                "gpuaas-service-notebook-job-images",
                "gpuaas-gpu-share-size",
            ]
        ),
        admission_bindings=Read(
            {
                n: n
                for n in [
                    "gpuaas-service-pod-writes",
                    "gpuaas-service-state-writes",
                    "gpuaas-service-notebook-jobs",
                    "gpuaas-service-notebook-job-images",
                    "gpuaas-gpu-share-size",
                ]
            }
        ),
        hub=HubFacts(
            "http://hub/hub/api",
            Read({"version": "5.4.0"}),
            Read(
                {
                    "kind": "service",
                    "name": "gpuaas",
                    "scopes": [
                        "read:servers",
                        "read:tokens",
                        "delete:servers",
                        "servers",
                        "read:users:groups",
                        "list:groups",
                        "read:groups",
                    ],
                }
            ),
        ),
        prometheus=PrometheusFacts(
            "http://prom",
            {"q": Read({"status": "success"})},
            # GET /api/v1/rules as Prometheus answers it
            Read(
                {
                    "status": "success",
                    "data": {
                        "groups": [
                            {
                                "name": "gpuaas",
                                "rules": [
                                    {"name": a, "type": "alerting"}
                                    for a in (
                                        "GPUaaSIdleGPUsWhileTeamQueueWaits",
                                        "GPUaaSHandOffFailed",
                                        "GPUaaSCullerNoCompletedCycle",
                                        "GPUaaSPolicyInvalid",
                                    )
                                ],
                            }
                        ]
                    },
                }
            ),
        ),
        catalog=Read(CATALOG),
        catalog_file="catalog.yaml",
        policy_file="policy.yaml",
        policy_problems=Read([]),
        notebook_namespace="users",
        job_namespaces=("team-a",),
        identity_hint="run as admin",
    )
    return dataclasses.replace(base, **changes)


def not_ok(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def test_healthy_facts_are_all_ok() -> None:
    checks = run_checks(facts())
    assert not_ok(checks) == [], [c.line() for c in not_ok(checks)]
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), "every check has its own name"


@pytest.mark.parametrize(
    ("text", "want"),
    [("v0.19.2", (0, 19, 2)), ("0.18", (0, 18, 0)), ("v0.20.0-rc.1", (0, 20, 0)), ("latest", None)],
)
def test_parse_version(text: str, want: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == want


@pytest.mark.parametrize(
    ("changes", "name", "status", "fix_says"),
    [
        ({"api_groups": Read({})}, "kueue.api", "missing", "install Kueue"),
        (
            {
                "api_groups": Read(
                    {"kueue.x-k8s.io": ["v1beta1"], "visibility.kueue.x-k8s.io": ["v1beta1"]}
                )
            },
            "kueue.api",
            "wrong",
            "kueue_api_version",
        ),
        (
            {"api_groups": Read.failed("HTTP 403", forbidden=True)},
            "kueue.api",
            "unknown",
            "run as admin",
        ),
        ({"kueue_version": Read("v0.17.4")}, "kueue.version", "wrong", "upgrade Kueue to 0.18"),
        ({"kueue_version": Read("v0.18.0")}, "kueue.version", "ok", ""),
        ({"kueue_version": Read.failed("no Deployment")}, "kueue.version", "unknown", "0.18"),
    ],
)
def test_kueue(changes: dict[str, Any], name: str, status: str, fix_says: str) -> None:
    [check] = [c for c in kueue_checks(facts(**changes)) if c.name == name]
    assert check.status == status, check.line()
    assert fix_says in check.fix


def _lqs(*objs: dict[str, Any]) -> Read[Any]:
    return Read({(q.namespace, q.name): q for q in map(read_local_queue, objs)})


@pytest.mark.parametrize(
    ("local_queues", "status", "says"),
    [
        (_lqs(*HEALTHY_LQS), "ok", "users/team-a -> ClusterQueue a-nb"),
        (_lqs(HEALTHY_LQS[1]), "missing", "create LocalQueue team-a in namespace users"),
        (
            _lqs(
                {
                    "metadata": {"name": "team-a", "namespace": "users"},
                    "spec": {"clusterQueue": "gone"},
                }
            ),
            "missing",
            "create ClusterQueue gone",
        ),
        (
            _lqs(
                {
                    "metadata": {"name": "team-a", "namespace": "users"},
                    "spec": {"clusterQueue": "a-nb", "stopPolicy": "Hold"},
                }
            ),
            "wrong",
            "stopPolicy",
        ),
    ],
)
def test_local_queues(local_queues: Read[Any], status: str, says: str) -> None:
    [check] = local_queue_checks(facts(local_queues=local_queues), CATALOG)
    assert check.name == "localqueue.team-a"
    assert check.status == status
    assert says in check.line()


def _cqs(*objs: dict[str, Any]) -> Read[Any]:
    return Read({c["metadata"]["name"]: read_cluster_queue(c) for c in objs})


@pytest.mark.parametrize(
    ("cluster_queues", "flavors", "bad", "says"),
    [
        (_cqs(*HEALTHY_CQS), None, {}, ""),
        # the h100 flavor taken out of the team's queue: one line names it and the fix
        (
            _cqs(_cq("a-nb", {"a100": {"nvidia.com/mig-1g.5gb": 4}}), HEALTHY_CQS[1]),
            None,
            {"queue.a-nb.h100": "missing"},
            "add flavor h100 with quotas for nvidia.com/gpu",
        ),
        # nominal 0 and not allowed to borrow
        (
            _cqs(
                _cq(
                    "a-nb",
                    {
                        "h100": {"cpu": 8, "nvidia.com/gpu": (0, 0)},
                        "a100": {"nvidia.com/mig-1g.5gb": 4},
                    },
                ),
                HEALTHY_CQS[1],
            ),
            None,
            {"queue.a-nb.h100": "wrong"},
            "no quota for nvidia.com/gpu",
        ),
        # nominal 0 but another queue of the cohort lends it: fine
        (
            _cqs(
                _cq(
                    "a-nb",
                    {
                        "h100": {"cpu": 8, "nvidia.com/gpu": 0},
                        "a100": {"nvidia.com/mig-1g.5gb": 4},
                    },
                ),
                _cq("other", {"h100": {"cpu": 0, "nvidia.com/gpu": 4}}),
            ),
            None,
            {},
            "",
        ),
        # the flavor object itself is gone
        (
            _cqs(*HEALTHY_CQS),
            {"h100": {"nodeLabels": {"pool": "h100"}}},
            {"queue.a-nb.a100": "missing"},
            "create ResourceFlavor a100",
        ),
    ],
)
def test_queues(
    cluster_queues: Read[Any], flavors: dict[str, Any] | None, bad: dict[str, str], says: str
) -> None:
    changes: dict[str, Any] = {"cluster_queues": cluster_queues}
    if flavors is not None:
        changes["flavors"] = Read(flavors)
    checks = queue_checks(facts(**changes), CATALOG)
    assert {c.name: c.status for c in not_ok(checks)} == bad
    assert all(says in c.line() for c in not_ok(checks))
    assert {c.name for c in checks} >= {"queue.a-nb.h100", "queue.a-nb.a100"}


@pytest.mark.parametrize(
    ("policy", "cqs", "job_namespaces", "status", "says"),
    [
        (True, HEALTHY_CQS, ("team-a",), "ok", "borrow"),
        (False, HEALTHY_CQS, (), "ok", "reclaim is off"),
        (True, HEALTHY_CQS, (), "wrong", "job_namespaces"),
        (
            True,
            [HEALTHY_CQS[0], _cq("a-train", {"h100": {"nvidia.com/gpu": 0}}, cohort=None)],
            ("team-a",),
            "wrong",
            "shares no cohort",
        ),
        (
            True,
            [HEALTHY_CQS[0], _cq("a-train", {"h100": {"nvidia.com/gpu": (0, 0)}})],
            ("team-a",),
            "wrong",
            "may borrow no GPU",
        ),
    ],
)
def test_cohort(
    policy: bool,
    cqs: list[dict[str, Any]],
    job_namespaces: tuple[str, ...],
    status: str,
    says: str,
) -> None:
    check = cohort_check(
        facts(cluster_queues=_cqs(*cqs), job_namespaces=job_namespaces), CATALOG, policy
    )
    assert (check.status, check.name) == (status, "cohort")
    assert says in check.line()


@pytest.mark.parametrize(
    ("nodes", "bad", "says"),
    [
        (
            [
                NodeFacts("g", {"pool": "h100"}, {"nvidia.com/gpu": "8"}),
                NodeFacts("m", {}, {"nvidia.com/mig-1g.5gb": "7"}),
            ],
            {},
            "",
        ),
        # the GPUs are there but not on nodes the offering's labels select
        (
            [
                NodeFacts("g", {"pool": "other"}, {"nvidia.com/gpu": "8"}),
                NodeFacts("m", {}, {"nvidia.com/mig-1g.5gb": "7"}),
            ],
            {"gpu.h100": "missing"},
            "nodes g do, with other labels",
        ),
        # no MIG anywhere; a cordoned node does not count
        (
            [
                NodeFacts("g", {"pool": "h100"}, {"nvidia.com/gpu": "8"}),
                NodeFacts("m", {}, {"nvidia.com/mig-1g.5gb": "7"}, unschedulable=True),
            ],
            {"gpu.mig": "missing"},
            "enable MIG",
        ),
        (
            [
                NodeFacts("g", {"pool": "h100"}, {"nvidia.com/gpu": "0"}),
                NodeFacts("m", {}, {"nvidia.com/mig-1g.5gb": "7"}),
            ],
            {"gpu.h100": "missing"},
            "device plugin",
        ),
    ],
)
def test_gpu_resources(nodes: list[NodeFacts], bad: dict[str, str], says: str) -> None:
    checks = gpu_checks(facts(nodes=Read(nodes)), CATALOG)
    assert [c.name for c in checks] == ["gpu.h100", "gpu.mig"]  # no line for the CPU offering
    assert {c.name: c.status for c in not_ok(checks)} == bad
    assert all(says in c.line() for c in not_ok(checks))


def test_fraction_needs_only_the_vgpu_on_the_node() -> None:
    cat = build_catalog(
        [
            CatalogSource(
                "t.",
                {
                    "offerings": [
                        {
                            "slug": "q",
                            "display_name": "Q",
                            "kind": "fraction",
                            "flavor": "hami",
                            "memory_cap": "6Gi",
                            "cores_percent": 25,
                            "gpu_memory": "24Gi",
                            "gpu_equivalents": 0.25,
                        }
                    ],
                    "resource_transformations": [
                        {
                            "input": r,
                            "strategy": "Replace",
                            "multiplyBy": "nvidia.com/gpu",
                            "outputs": {f"nvidia.com/total-{r.split('/')[1]}": "1"},
                        }
                        for r in ("nvidia.com/gpumem", "nvidia.com/gpucores")
                    ],
                    "tenants": [
                        {
                            "name": "t",
                            "display_name": "T",
                            "groups": ["t"],
                            "local_queue": "t",
                            "offerings": ["q"],
                            "default_offering": "q",
                        }
                    ],
                },
            )
        ]
    )
    [check] = gpu_checks(facts(nodes=Read([NodeFacts("h", {}, {"nvidia.com/gpu": "40"})])), cat)
    assert check.ok, check.line()


def test_rbac_one_line_per_resource() -> None:
    need = AccessNeed("get", "", "nodes", fix="ClusterRole gpuaas-service-node-reader")
    accesses = [
        Access(dataclasses.replace(need, verb=v), allowed=False) for v in ("get", "list", "watch")
    ] + [Access(AccessNeed("create", "", "events", "users", fix="Role"), allowed=True)]
    checks = rbac_checks(facts(access=accesses))
    assert [(c.name, c.status) for c in checks] == [
        ("rbac.nodes.cluster", "missing"),
        ("rbac.events.users", "ok"),
    ]
    assert "may not get, list, watch nodes cluster-wide" in checks[0].detail
    assert checks[0].fix == "apply ClusterRole gpuaas-service-node-reader"
    failed = rbac_checks(facts(access=[Access(need, None, "HTTP 403")]))
    assert failed[0].status == "unknown"


def test_access_needs_cover_the_deployed_verbs() -> None:
    needs = access_needs("users", ["team-a"], CATALOG)
    seen = {(n.verb, n.resource, n.namespace, n.name) for n in needs}
    assert ("watch", "nodes", "", "") in seen
    assert ("patch", "pods", "users", "") in seen
    assert ("list", "pods", "team-a", "") in seen
    assert ("update", "configmaps", "users", "gpuaas-culler-handoffs") in seen
    assert ("get", "localqueues/pendingworkloads", "", "") in seen
    assert all(n.fix for n in needs)


@pytest.mark.parametrize(
    ("policies", "bindings", "bad"),
    [
        (["gpuaas-service-pod-writes"], {}, 5),
        (None, {}, 1),
    ],
)
def test_admission(policies: list[str] | None, bindings: dict[str, str], bad: int) -> None:
    pols: Read[Any] = Read(policies) if policies is not None else Read.failed("403", forbidden=True)
    checks = admission_checks(facts(admission_policies=pols, admission_bindings=Read(bindings)))
    assert len(not_ok(checks)) == bad
    if policies is not None:
        assert "has no binding" in checks[0].detail
        assert "kubectl apply -f culler/deploy/gpu-share-size-policy.yaml" in checks[-1].fix


def _hub(info: Read[Any], scopes: list[str] | None) -> HubFacts:
    who: Read[Any] = (
        Read({"kind": "service", "name": "gpuaas", "scopes": scopes})
        if scopes is not None
        else Read.failed("HTTP 403 Forbidden")
    )
    return HubFacts("http://hub/hub/api", info, who)


ALL_SCOPES = [
    "read:servers",
    "read:tokens",
    "delete:servers",
    "servers",
    "read:users:groups",
    "list:groups",
    "read:groups",
]


@pytest.mark.parametrize(
    ("hub", "policy", "bad", "says"),
    [
        (_hub(Read({"version": "5"}), ALL_SCOPES), True, {}, ""),
        (
            _hub(Read({"version": "5"}), [s for s in ALL_SCOPES if s != "read:tokens"]),
            True,
            {"hub.scopes": "missing"},
            "lacks read:tokens",
        ),
        # without a policy the culler's group scopes are not needed
        (_hub(Read({"version": "5"}), ALL_SCOPES[:4]), False, {}, ""),
        (
            _hub(Read({"version": "5"}), ["read:servers!group=x", *ALL_SCOPES[1:]]),
            True,
            {"hub.scopes": "missing"},
            "only filtered",
        ),
        (
            _hub(Read.failed("Connection refused"), None),
            True,
            {"hub": "missing"},
            "does not answer",
        ),
        (_hub(Read({"version": "5"}), None), True, {"hub.scopes": "wrong"}, "apiToken"),
        (None, True, {"hub": "missing"}, "JUPYTERHUB_API_TOKEN"),
    ],
)
def test_hub(hub: HubFacts | None, policy: bool, bad: dict[str, str], says: str) -> None:
    checks = hub_checks(facts(hub=hub), policy)
    assert {c.name: c.status for c in not_ok(checks)} == bad
    assert all(says in c.line() for c in not_ok(checks))


RULES = Read(
    {"status": "success", "data": {"groups": [{"rules": [{"name": "GPUaaSHandOffFailed"}]}]}}
)


@pytest.mark.parametrize(
    ("prom", "bad"),
    [
        (None, {"prometheus": "missing"}),
        (
            PrometheusFacts(
                "http://p",
                {"a": Read.failed("refused"), "b": Read.failed("refused")},
                Read.failed("refused"),
            ),
            {"prometheus": "missing"},
        ),
        (
            PrometheusFacts("http://p", {"a": Read({}), "b": Read.failed("HTTP 400 bad")}, RULES),
            {"prometheus": "wrong", "prometheus.rules": "missing"},
        ),
    ],
)
def test_prometheus(prom: PrometheusFacts | None, bad: dict[str, str]) -> None:
    checks = prometheus_checks(facts(prometheus=prom))
    assert {c.name: c.status for c in not_ok(checks)} == bad


def test_unreachable_prometheus_is_one_line() -> None:
    prom = PrometheusFacts("http://p", {"a": Read.failed("refused")}, Read.failed("refused"))
    checks = prometheus_checks(facts(prometheus=prom))
    assert [c.name for c in checks] == ["prometheus"]


@pytest.mark.parametrize(
    ("policy_file", "problems", "status"),
    [
        ("", Read([]), "ok"),
        ("p.yaml", Read([]), "ok"),
        ("p.yaml", Read(["policies[0].match.teams: unknown team 'x'"]), "wrong"),
    ],
)
def test_policy(policy_file: str, problems: Read[Any], status: str) -> None:
    check = policy_check(facts(policy_file=policy_file, policy_problems=problems))
    assert check.status == status


def test_line_and_json_shape() -> None:
    check = Check("hub.scopes", "missing", "lacks read:tokens", "add it")
    assert check.line() == "missing hub.scopes: lacks read:tokens -> fix: add it"
    assert check.as_dict() == {
        "name": "hub.scopes",
        "status": "missing",
        "detail": "lacks read:tokens",
        "fix": "add it",
    }
    assert Check("x", "ok", "fine", "never shown").line() == "ok      x: fine"


def test_no_catalog_skips_the_catalog_checks() -> None:
    checks = run_checks(facts(catalog=Read.failed("no catalog_file"), catalog_file=""))
    assert [c.name for c in not_ok(checks)] == ["catalog"]
    assert not any(c.name.startswith(("queue.", "gpu.", "localqueue.")) for c in checks)


def test_an_apiserver_that_does_not_answer_is_one_line() -> None:
    down: Read[Any] = Read.failed("Cannot connect to host 127.0.0.1:1")
    checks = run_checks(
        facts(api_groups=down, access=[Access(AccessNeed("list", "", "nodes"), None, "refused")])
    )
    assert [c.name for c in not_ok(checks)] == ["kubernetes"]
    assert "KUBECONFIG" in checks[0].fix
    # a 403 on discovery is an answer: the checks go on, each saying what it cannot read
    denied = run_checks(facts(api_groups=Read.failed("HTTP 403 Forbidden", forbidden=True)))
    assert [c.name for c in not_ok(denied)] == ["kueue.api"]


JOBS_CATALOG = build_catalog(
    [
        CatalogSource(
            "t.",
            {
                "images": [
                    {"slug": "py", "display_name": "Py", "image": "reg/py:1"},
                    {"slug": "torch", "display_name": "Torch", "image": "reg/torch:2"},
                ],
                "offerings": [
                    {
                        "slug": "h100",
                        "display_name": "H100",
                        "kind": "gpu",
                        "resources": {"nvidia.com/gpu": 1},
                        "flavor": "h100",
                    }
                ],
                "tenants": [
                    {
                        "name": "team-a",
                        "display_name": "A",
                        "groups": ["a"],
                        "local_queue": "team-a",
                        "offerings": ["h100"],
                        "default_offering": "h100",
                        "jobs": {
                            "namespace": "team-a",
                            "local_queue": "training",
                            "offerings": ["h100"],
                        },
                    }
                ],
            },
        )
    ],
    default_namespace="users",
)


@pytest.mark.parametrize(
    ("job_images", "status", "says"),
    [
        (
            Read({"images": "reg/py:1\nreg/torch:2\n"}),
            "ok",
            "lists every image notebook Jobs may run (reg/py:1, reg/torch:2)",
        ),
        (Read({"images": "reg/py:1\n"}), "wrong", "does not list reg/torch:2"),
        (
            Read.failed("HTTP 404 configmaps not found"),
            "missing",
            "kubectl -n jupyterhub create configmap gpuaas-job-images",
        ),
        (Read.failed("HTTP 403 forbidden", forbidden=True), "unknown", "run as admin"),
    ],
)
def test_job_images(job_images: Read[Any], status: str, says: str) -> None:
    from gpuaas_service.doctor.checks import job_image_names, job_images_check

    assert job_image_names(JOBS_CATALOG) == ["reg/py:1", "reg/torch:2"]
    check = job_images_check(facts(job_images=job_images), JOBS_CATALOG)
    assert check is not None
    assert (check.name, check.status) == ("jobs.images", status)
    assert says in check.line()


def test_no_job_images_check_without_notebook_jobs() -> None:
    from gpuaas_service.doctor.checks import job_images_check

    assert job_images_check(facts(job_images=Read({})), CATALOG) is None


def test_notebook_jobs_count_against_their_own_queue() -> None:
    cqs = _cqs(
        _cq("a-nb", {"h100": {"nvidia.com/gpu": 2}}),
        _cq("a-train", {"h100": {"nvidia.com/gpu": 4}}),
    )
    lqs = _lqs(
        {"metadata": {"name": "team-a", "namespace": "users"}, "spec": {"clusterQueue": "a-nb"}},
        {
            "metadata": {"name": "training", "namespace": "team-a"},
            "spec": {"clusterQueue": "a-train"},
        },
    )
    checks = queue_checks(facts(cluster_queues=cqs, local_queues=lqs), JOBS_CATALOG)
    assert [(c.name, c.status) for c in checks] == [
        ("queue.a-nb.h100", "ok"),
        ("queue.a-train.h100", "ok"),
    ]


def test_an_offering_is_named_once_where_servers_and_jobs_share_a_queue() -> None:
    """The demo's checks said "local-mig-1g, local-mig-1g": a team's
    servers and its notebook Jobs were counted into one ClusterQueue line each."""
    cqs = _cqs(_cq("a-nb", {"h100": {"nvidia.com/gpu": 2}}))
    lqs = _lqs(
        {"metadata": {"name": "team-a", "namespace": "users"}, "spec": {"clusterQueue": "a-nb"}},
        {"metadata": {"name": "training", "namespace": "team-a"}, "spec": {"clusterQueue": "a-nb"}},
    )
    [check] = queue_checks(facts(cluster_queues=cqs, local_queues=lqs), JOBS_CATALOG)
    assert check.detail == "ClusterQueue a-nb has quota on h100 for offering h100", check.line()


DENIED: Read[Any] = Read.failed(
    'HTTP 403 deployments.apps "kueue-controller-manager" is forbidden: User'
    ' "system:serviceaccount:jupyterhub:gpuaas" cannot get resource "deployments"',
    forbidden=True,
)


def test_a_read_the_service_may_not_do_is_said_in_words_with_the_rule_to_add() -> None:
    """The console's checks showed raw HTTP 403 texts (Kueue's
    Deployment, the Jobs' image ConfigMap, the admission policies)."""
    version = [c for c in kueue_checks(facts(kueue_version=DENIED)) if c.name == "kueue.version"]
    admission = admission_checks(facts(admission_policies=DENIED))
    from gpuaas_service.doctor.checks import job_images_check

    images = job_images_check(facts(job_images=DENIED), JOBS_CATALOG)
    assert images is not None
    lines = {c.name: c for c in [*version, *admission, images]}
    assert lines["kueue.version"].detail == (
        "may not read Kueue's version: the account these checks run as lacks get on deployments"
        " kueue-controller-manager in kueue-system (apps) or on customresourcedefinitions"
        " clusterqueues.kueue.x-k8s.io (apiextensions.k8s.io)"
    )
    assert lines["admission"].detail.startswith(
        "may not read the admission policies: the account these checks run as lacks get on"
        " validatingadmissionpolicies and validatingadmissionpolicybindings"
        " (admissionregistration.k8s.io) named gpuaas-service-pod-writes, "
    )
    assert lines["jobs.images"].detail == (
        "may not read ConfigMap jupyterhub/gpuaas-job-images: the account these checks run as"
        " lacks get on configmaps gpuaas-job-images in jupyterhub"
    )
    for check in lines.values():
        assert check.status == "unknown"
        assert "HTTP" not in check.detail, check.detail
        assert "403" not in check.detail, check.detail
        assert "gpuaas-service-doctor in culler/deploy/gpuaas-service.yaml" in check.fix
        assert "run as admin" in check.fix  # the identity hint stays

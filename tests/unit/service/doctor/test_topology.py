"""The doctor's checks of Kueue's Topology Aware Scheduling (doctor/checks.py
``topology_checks``): a Topology for each flavor that names one, its levels' labels on the
flavor's nodes, a flavor for each Topology, and notebook Jobs' level among the levels."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpuaas_service.doctor.checks import Facts, NodeFacts, Read, run_checks, topology_checks
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog

JOBS_CATALOG = build_catalog(
    [
        CatalogSource(
            "t.",
            {
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
                        "jobs": {"namespace": "team-a", "local_queue": "training"},
                    }
                ],
            },
        )
    ],
    default_namespace="users",
)

LEVELS = ["gpuaas.dev/rack", "kubernetes.io/hostname"]
MIG_NODE = NodeFacts("mig-1", {"pool": "a100"}, {"nvidia.com/mig-1g.5gb": "7"})
TAS_FLAVOR = {"nodeLabels": {"pool": "h100"}, "topologyName": "gpu-racks"}


def node(name: str, rack: str | None = "rack-1", pool: str = "h100") -> NodeFacts:
    labels = {"pool": pool, "kubernetes.io/hostname": name}
    if rack is not None:
        labels["gpuaas.dev/rack"] = rack
    return NodeFacts(name, labels, {"nvidia.com/gpu": "8"})


def tas_facts(**changes: Any) -> Facts:
    """What topology_checks reads (the rest of the deployment is other checks' business)."""
    unread: Read[Any] = Read.failed("not read in this test")
    base = Facts(
        api_groups=Read({"kueue.x-k8s.io": ["v1beta2"]}),
        kueue_version=Read("v0.19.2"),
        kueue_version_source="image",
        flavors=Read({"h100": TAS_FLAVOR, "a100": {}}),
        cluster_queues=unread,
        cohorts=unread,
        local_queues=unread,
        nodes=Read([node("gpu-1"), node("gpu-2", "rack-2"), MIG_NODE]),
        access=[],
        admission_policies=unread,
        admission_bindings=unread,
        hub=None,
        prometheus=None,
        catalog=Read(None),
        catalog_file="",
        policy_file="",
        policy_problems=Read([]),
        identity_hint="run as admin",
        topologies=Read({"gpu-racks": LEVELS}),
    )
    return dataclasses.replace(base, **changes)


def lines(checks: list[Any]) -> list[tuple[str, str]]:
    return [(c.name, c.status) for c in checks]


@pytest.mark.parametrize(
    ("changes", "expected", "says"),
    [
        pytest.param({}, [("topology.h100", "ok")], "2 nodes carry every level", id="healthy"),
        pytest.param(
            {"flavors": Read({"h100": {"nodeLabels": {"pool": "h100"}}}), "topologies": Read({})},
            [("topology", "ok")],
            "no ResourceFlavor has a topologyName",
            id="no-tas-at-all",
        ),
        pytest.param(
            {"topologies": Read({})},
            [("topology.h100", "missing")],
            "names the Topology gpu-racks, which does not exist",
            id="topology-missing",
        ),
        pytest.param(
            {"nodes": Read([node("gpu-1"), node("gpu-2", None)])},
            [("topology.h100", "wrong")],
            "1 of 2 nodes of ResourceFlavor h100 lack a level of Topology gpu-racks, so Kueue"
            " counts no room on them (gpu-2: gpuaas.dev/rack)",
            id="a-node-without-its-rack",
        ),
        pytest.param(
            {"nodes": Read([MIG_NODE])},
            [("topology.h100", "missing")],
            "no node carries ResourceFlavor h100's labels (pool=h100)",
            id="no-node-of-the-flavor",
        ),
        pytest.param(
            {"topologies": Read({"gpu-racks": LEVELS, "spare": ["kubernetes.io/hostname"]})},
            [("topology.h100", "ok"), ("topology.spare", "missing")],
            "no ResourceFlavor names the Topology spare",
            id="a-topology-no-flavor-names",
        ),
        pytest.param(
            {"topologies": Read.failed("forbidden", forbidden=True)},
            [("topology", "unknown")],
            "cannot read Kueue's Topologies",
            id="unreadable",
        ),
        pytest.param(
            {"catalog": Read(JOBS_CATALOG), "job_topology_level": "cloud.provider.com/block"},
            [("topology.h100", "wrong")],
            "require the level cloud.provider.com/block, which Topology gpu-racks does not have",
            id="jobs-level-not-in-the-topology",
        ),
        pytest.param(
            {"catalog": Read(JOBS_CATALOG), "job_topology_level": "gpuaas.dev/rack"},
            [("topology.h100", "ok")],
            "Topology gpu-racks",
            id="jobs-level-a-rack",
        ),
    ],
)
def test_topology_checks(
    changes: dict[str, Any], expected: list[tuple[str, str]], says: str
) -> None:
    f = tas_facts(**changes)
    checks = topology_checks(f, f.catalog.value)
    assert lines(checks) == expected, [c.line() for c in checks]
    assert any(says in c.detail for c in checks), [c.line() for c in checks]


def test_the_fix_labels_the_node_with_each_missing_level() -> None:
    f = tas_facts(nodes=Read([node("gpu-1", None)]))
    (check,) = topology_checks(f, f.catalog.value)
    assert check.fix == "kubectl label node gpu-1 gpuaas.dev/rack=<its rack>"


def test_not_gathered_says_nothing_and_the_doctor_runs_the_checks() -> None:
    assert topology_checks(tas_facts(topologies=None), None) == []  # not read
    assert ("topology.h100", "ok") in lines(run_checks(tas_facts()))

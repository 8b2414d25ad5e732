"""Notebook Jobs on a flavor that Kueue's Topology Aware Scheduling places: the required
topology annotation, only there (jobs/build.py ``job_topology``, jobs/service.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from gpuaas_service.jobs.build import build_job, job_topology
from gpuaas_service.jobs.request import validate_job_request
from gpuaas_service.jobs.service import JobError, JobService
from tests.support.jobs_samples import FakeKube, jobs_catalog, request_body

HOST = "kubernetes.io/hostname"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"


@pytest.mark.parametrize(
    ("flavor", "topologies", "level", "expected"),
    [
        pytest.param("h100", {"h100": "gpu-racks"}, HOST, HOST, id="topology-flavor"),
        pytest.param("h100", {"h100": ""}, HOST, "", id="flavor-without-topology"),
        pytest.param("h100", {}, HOST, "", id="flavor-not-listed"),
        pytest.param(None, {"h100": "gpu-racks"}, HOST, "", id="offering-without-flavor"),
        pytest.param("h100", {"h100": "gpu-racks"}, "", "", id="annotation-turned-off"),
        pytest.param(
            "h100", {"h100": "gpu-racks"}, "gpuaas.dev/rack", "gpuaas.dev/rack", id="a-rack"
        ),
    ],
)
def test_the_level_only_on_a_flavor_with_a_topology(
    flavor: str | None, topologies: dict[str, str], level: str, expected: str
) -> None:
    assert job_topology(flavor, topologies, level) == expected


def _template_annotations(job: Mapping[str, Any]) -> dict[str, str]:
    return dict(job["spec"]["template"]["metadata"]["annotations"])


def test_the_pod_template_carries_kueues_annotation() -> None:
    req = validate_job_request(request_body(), jobs_catalog(), "alice", ["team-a"])
    job = build_job(
        req,
        name="nb-a-00000",
        token_sha="0" * 64,
        service_url="http://svc/",
        required_topology=HOST,
    )
    assert _template_annotations(job)[REQUIRED] == HOST
    # the Job's own metadata is not where Kueue reads it
    assert REQUIRED not in job["metadata"]["annotations"]
    plain = build_job(req, name="nb-a-00000", token_sha="0" * 64, service_url="http://svc/")
    assert REQUIRED not in _template_annotations(plain)


def _service(kube: FakeKube, topologies: dict[str, str] | Exception) -> JobService:
    async def flavor_topologies() -> dict[str, str]:
        if isinstance(topologies, Exception):
            raise topologies
        return topologies

    return JobService(
        kube,
        jobs_catalog,
        service_url="http://svc/",
        topology_level=HOST,
        flavor_topologies=flavor_topologies,
    )


async def test_a_job_on_the_topology_flavor_requires_one_node() -> None:
    kube = FakeKube()
    job = await _service(kube, {"h100": "gpu-racks", "a100-mig": ""}).submit(
        "alice", ["team-a"], request_body(offering="h100", count=2)
    )
    created = kube.objects[("job", "team-a", job["name"])]
    assert _template_annotations(created)[REQUIRED] == HOST
    mig = await _service(kube, {"h100": "gpu-racks", "a100-mig": ""}).submit(
        "alice", ["team-a"], request_body(offering="mig-1g", count=1)
    )
    assert REQUIRED not in _template_annotations(kube.objects[("job", "team-a", mig["name"])])


async def test_unreadable_flavors_refuse_the_submit_and_create_nothing() -> None:
    kube = FakeKube()
    with pytest.raises(JobError) as info:
        await _service(kube, OSError("connection refused")).submit(
            "alice", ["team-a"], request_body()
        )
    assert info.value.status == 503
    assert kube.calls == []

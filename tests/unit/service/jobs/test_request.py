"""Validation of "Run as GPU job" requests (culler/gpuaas_service/jobs/request.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas_service.jobs.build import build_input_config_map, build_job
from gpuaas_service.jobs.request import (
    REQUEST_KEYS,
    JobRequestError,
    NotAllowed,
    validate_job_request,
)
from jupyter_gpuaas.core.catalog import CatalogError, CatalogSource, build_catalog
from tests.support.jobs_samples import NOTEBOOK, jobs_catalog, jobs_catalog_data, request_body

CATALOG = jobs_catalog()


def errors_of(body: Any, groups: tuple[str, ...] = ("team-a",)) -> dict[str, str]:
    with pytest.raises(JobRequestError) as info:
        validate_job_request(body, CATALOG, "alice", groups)
    return {e.path: e.message for e in info.value.errors}


def test_a_valid_request_is_read_with_the_catalogs_choices() -> None:
    req = validate_job_request(request_body(), CATALOG, "alice", ["team-a"])
    assert req.user == "alice"
    assert req.tenant.name == "team-a"
    assert req.jobs.namespace == "team-a"
    assert req.jobs.local_queue == "training"
    assert req.offering.slug == "h100"
    assert req.count == 2
    assert req.image is not None
    assert req.image.slug == "pytorch"  # the offering's only image
    assert req.size is not None
    assert req.size.slug == "large"
    assert req.time_limit == 7200
    assert req.parameters == {"epochs": 3, "lr": 0.01, "name": "run 1", "layers": [1, 2]}
    assert req.notebook_name == "train.ipynb"


def test_defaults_team_offering_time_limit() -> None:
    body = {"path": "a.ipynb", "notebook": NOTEBOOK}
    req = validate_job_request(body, CATALOG, "alice", ["team-a"])
    assert req.offering.slug == "mig-1g"  # the tenant's default, which its jobs offer
    assert req.count == 1
    assert req.time_limit == 4 * 3600
    assert req.parameters == {}


def test_every_problem_is_listed_with_its_field_path() -> None:
    errs = errors_of(
        request_body(
            offering="h10",
            time_limit="3d",
            path="../x.ipynb",
            parameters={"1x": 1, "ok": {"nested": 1}, "class": 2, "inf": float("inf")},
            nodeSelector={"a": "b"},
            kernel_name="bad name",
        )
    )
    assert "did you mean 'h100'" in errs["offering"]
    assert errs["time_limit"] == "3d is over the team's limit of 1d"
    assert "without . or .." in errs["path"]
    assert "Python variable name" in errs['parameters["1x"]']
    assert "not a mapping" in errs["parameters.ok"]
    assert "Python variable name" in errs["parameters.class"]
    assert errs["parameters.inf"] == "must be a finite number"
    assert "unknown field" in errs["nodeSelector"]
    assert "not a kernel name" in errs["kernel_name"]


def test_count_image_size_are_the_offerings() -> None:
    errs = errors_of(request_body(count=3, image="scipy", size="small"))
    # the same words as a spawn's (one validation: jupyter_gpuaas/core/choice.py)
    assert errs["count"] == "NVIDIA H100: count must be 1 to 2, not 3"
    assert errs["image"] == "Image 'scipy' is not offered with NVIDIA H100"
    assert errs["size"] == "Size 'small' is not offered with NVIDIA H100"
    # the team's, not its jobs'
    assert errors_of(request_body(offering="mig-3g"))["offering"].startswith(
        "A100 MIG 3g.20gb is not available to Team A's jobs"
    )


def test_another_teams_queue_is_not_allowed() -> None:
    with pytest.raises(NotAllowed) as info:
        validate_job_request(request_body(team="team-b"), CATALOG, "alice", ["team-a"])
    assert info.value.path == "team"
    assert "not one of your teams" in str(info.value)
    with pytest.raises(NotAllowed, match="not in any team that runs notebooks as GPU jobs"):
        validate_job_request(request_body(team=None), CATALOG, "eve", ["outsiders"])
    with pytest.raises(NotAllowed, match="several teams"):
        validate_job_request(request_body(team=None), CATALOG, "x", ["team-a", "team-b"])


def test_notebook_must_be_a_notebook() -> None:
    assert "must be the notebook's JSON" in errors_of(request_body(notebook="x"))["notebook"]
    errs = errors_of(request_body(notebook={"nbformat": 3, "cells": [1]}))
    assert "must be 4" in errs["notebook.nbformat"]
    assert "must be a cell" in errs["notebook.cells[0]"]
    assert "not a notebook" in errors_of(request_body(path="train.py"))["path"]


def test_a_notebook_without_cells_is_a_notebook() -> None:
    # valid nbformat; the admission-policy test submits one
    empty = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}
    req = validate_job_request(request_body(notebook=empty), CATALOG, "alice", ["team-a"])
    assert req.notebook_name == "train.ipynb"


def test_missing_fields_and_short_limits_name_their_path() -> None:
    errs = errors_of(request_body(path=None, notebook={"nbformat": 4}, time_limit="30s"))
    assert errs["path"] == (
        "is required (the notebook's path in your server, e.g. work/train.ipynb)"
    )
    assert errs["notebook.cells"] == "is required (a list of cells)"
    assert errs["time_limit"] == "must be at least 1m (use e.g. 30m, 2h)"
    assert "notebook" not in errs  # a notebook without cells is reported once, at its cells


def test_catalog_jobs_section_errors_have_paths() -> None:
    data = jobs_catalog_data()
    data["tenants"][0]["jobs"] = {
        "namespace": "Team A",
        "offerings": ["h100", "mig-3gg"],
        "max_per_user": -1,
        "default_time_limit": "2d",
        "max_time_limit": "1d",
        "colour": "red",
    }
    with pytest.raises(CatalogError) as info:
        build_catalog([CatalogSource("", data)])
    got = {e.path: e.message for e in info.value.errors}
    assert "not a namespace name" in got["tenants[0].jobs.namespace"]
    assert got["tenants[0].jobs.local_queue"] == "is required"
    assert "did you mean 'mig-3g'" in got["tenants[0].jobs.offerings[1]"]
    assert "at least 0" in got["tenants[0].jobs.max_per_user"]
    assert got["tenants[0].jobs.default_time_limit"] == "must not exceed max_time_limit"
    assert "unknown field" in got["tenants[0].jobs.colour"]


# ------------------------------------------------------------------ forged requests

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
forged_keys = st.sampled_from(
    [*REQUEST_KEYS, "namespace", "labels", "queue", "user", "image_ref", "command", "env"]
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(
    changes=st.dictionaries(forged_keys, json_values, max_size=6),
    groups=st.sampled_from([("team-a",), ("team-b",), ("outsiders",), ()]),
)
def test_forged_requests_never_reach_a_manifest_unchecked(
    changes: dict[str, Any], groups: tuple[str, ...]
) -> None:
    """Whatever is sent, a request either is refused, or its Job is exactly what the catalog
    allows for one of the caller's teams: its queue, namespace, user, image and resources."""
    body = request_body(**changes)
    try:
        req = validate_job_request(body, CATALOG, "alice", groups)
    except (JobRequestError, NotAllowed):
        return
    assert req.tenant.name in groups or any(g in req.tenant.groups for g in groups)
    assert req.jobs is req.tenant.jobs
    assert req.offering.slug in req.jobs.offerings
    job = build_job(req, name="nb-x-abcde", token_sha="0" * 64, service_url="http://svc/")
    labels = job["metadata"]["labels"]
    assert job["metadata"]["namespace"] == req.jobs.namespace
    assert labels["gpuaas.jupyter.org/user"] == "alice"
    assert labels["kueue.x-k8s.io/queue-name"] == req.jobs.local_queue
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["python", "-m", "jupyter_gpuaas.job_pod"]
    allowed_images = {i.image for i in CATALOG.images_for(req.offering)}
    assert container.get("image") in allowed_images | {None}
    gpu = {k: v for k, v in container["resources"]["limits"].items() if "/" in k}
    # the catalog's per-unit resources times the count (no fractions in this catalog)
    assert gpu == {k: str(v * req.count) for k, v in req.offering.resources.items()}
    spec_text = json.dumps(job)
    # nothing the caller sent beyond the validated choices is in the Job (the notebook and the
    # parameters travel in the ConfigMap only)
    assert "print(epochs)" not in spec_text
    assert "parameters" not in spec_text
    cm = build_input_config_map(req, name="nb-x-abcde")
    assert json.loads(cm["data"]["request.json"])["parameters"] == dict(req.parameters)

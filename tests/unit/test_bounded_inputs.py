"""Fourth audit, findings 4 and 8: every name is checked as a whole (``$`` matched before a
trailing newline) and every number is finite (a NaN passes every bound: each comparison is
false), in the typed readers (core/fields.py) and in each input they serve: the catalog, the
culler's policy (file and YAML text), job submissions and spawn options."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuaas_service.jobs.request import JobRequestError, validate_job_request
from gpuaas_service.reclaim.policy import PolicyError, load_policy
from gpuaas_spawner.validate import OptionsError, UserContext, validate_options
from jupyter_gpuaas.core.catalog import CatalogError, CatalogSource, build_catalog
from jupyter_gpuaas.core.durations import parse_duration
from jupyter_gpuaas.core.fields import (
    DNS_SUBDOMAIN_RE,
    NAME_RE,
    SLUG_RE,
    FieldErrors,
    is_qualified_name,
    key_path,
    read_number,
    read_str,
)
from jupyter_gpuaas.core.mig_geometry import parse_geometry
from jupyter_gpuaas.gpu.spec import parse_profile
from tests.support.jobs_samples import jobs_catalog, request_body
from tests.support.samples import NAMESPACE, catalog_data, sample_catalog

NON_FINITE = [float("nan"), float("inf"), float("-inf")]


# --------------------------------------------------------------------------- names (finding 4)


@pytest.mark.parametrize("pattern", [SLUG_RE, NAME_RE, DNS_SUBDOMAIN_RE])
@pytest.mark.parametrize("tail", ["\n", "\r\n", " "])
def test_a_name_with_anything_after_it_is_not_a_name(pattern: Any, tail: str) -> None:
    errs = FieldErrors()
    assert read_str(errs, "", {"n": "ok" + tail}, "n", pattern=pattern, what="a name") is None
    assert [e.path for e in errs.items] == ["n"]
    assert read_str(FieldErrors(), "", {"n": "ok"}, "n", pattern=pattern) == "ok"


def test_keys_and_qualified_names_are_matched_whole() -> None:
    assert key_path("a", "b\n") == 'a["b\\n"]'
    assert key_path("a", "b") == "a.b"
    assert not is_qualified_name("example.org/name\n")
    assert not is_qualified_name("example.org\n/name")
    assert is_qualified_name("example.org/name")


def test_a_job_parameter_or_kernel_name_with_a_trailing_newline_is_refused() -> None:
    body = request_body(parameters={"lr\n": 0.1, "epochs": 3}, kernel_name="python3\n")
    with pytest.raises(JobRequestError) as info:
        validate_job_request(body, jobs_catalog(), "alice", ["team-a"])
    errors = {e.path: e.message for e in info.value.errors}
    assert "Python variable name" in errors['parameters["lr\\n"]']
    assert "not a kernel name" in errors["kernel_name"]
    assert "parameters.epochs" not in errors


def test_catalog_slugs_and_label_values_with_a_trailing_newline_are_refused() -> None:
    data = catalog_data()
    data["offerings"][0]["slug"] = data["offerings"][0]["slug"] + "\n"
    data["offerings"][1].setdefault("node_selector", {})["gpuaas.dev/pool"] = "a100\n"
    with pytest.raises(CatalogError) as info:
        build_catalog([CatalogSource("", data)], default_namespace=NAMESPACE)
    text = "\n".join(str(e) for e in info.value.errors)
    assert "offerings[0].slug" in text
    assert "node_selector" in text


def test_a_policy_name_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(PolicyError) as info:
        load_policy({"policies": [{"name": "p\n", "idle_after": "30m"}]})
    assert any("policies[0].name" in str(e) for e in info.value.errors)


@pytest.mark.parametrize(
    ("parse", "text"),
    [(parse_duration, "30m\n"), (parse_geometry, "2x1g.5gb\n+1x3g.20gb")],
)
def test_durations_and_geometries_are_matched_whole(parse: Any, text: str) -> None:
    if parse is parse_duration:
        assert parse(text).total_seconds() == 1800  # surrounding whitespace is stripped
        with pytest.raises(ValueError, match="not a duration"):
            parse("30m\nx")
    else:
        assert parse(text)  # each group is stripped


def test_a_simulated_mig_profile_with_a_trailing_newline_is_refused() -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the spec parser's own message
        parse_profile("1g.5gb\n")


# --------------------------------------------------------------------------- numbers (finding 8)


@pytest.mark.parametrize("value", NON_FINITE)
def test_the_number_reader_refuses_non_finite_numbers_with_their_path(value: float) -> None:
    errs = FieldErrors()
    bounded = read_number(errs, "p", {"x": value}, "x", minimum=0, maximum=100)
    assert bounded is None
    assert [(e.path, e.message) for e in errs.items] == [
        ("p.x", f"must be a finite number, not {value}")
    ]


@pytest.mark.parametrize("text", [".nan", ".inf", "-.inf", ".NaN", ".Inf"])
def test_a_policy_with_a_non_finite_busy_threshold_is_refused(text: str) -> None:
    """The regression: ``busy_utilization_percent: .nan`` was "policy OK"."""
    data = yaml.safe_load(
        f"policies:\n  - name: p\n    idle_after: 30m\n    busy_utilization_percent: {text}\n"
    )
    with pytest.raises(PolicyError) as info:
        load_policy(data)
    (error,) = info.value.errors
    assert error.path.endswith("policies[0].busy_utilization_percent"), error
    assert "finite" in error.message
    data = yaml.safe_load(f"defaults:\n  busy_utilization_percent: {text}\npolicies: []\n")
    with pytest.raises(PolicyError) as info:
        load_policy(data)
    assert any("defaults.busy_utilization_percent" in str(e) for e in info.value.errors)


@pytest.mark.parametrize("value", NON_FINITE)
@pytest.mark.parametrize("field", ["gpu_equivalents", "cpu_guarantee", "cpu_limit"])
def test_a_catalog_with_a_non_finite_number_is_refused_at_its_path(
    value: float, field: str
) -> None:
    data = catalog_data()
    data["offerings"][0][field] = value
    with pytest.raises(CatalogError) as info:  # inf was an OverflowError (a traceback)
        build_catalog([CatalogSource("", data)], default_namespace=NAMESPACE)
    text = [str(e) for e in info.value.errors]
    assert any(f"offerings[0].{field}" in t and "finite" in t for t in text), text


@pytest.mark.parametrize("value", NON_FINITE)
def test_a_job_parameter_that_is_not_finite_is_refused(value: float) -> None:
    with pytest.raises(JobRequestError) as info:
        validate_job_request(
            request_body(parameters={"lr": value}), jobs_catalog(), "alice", ["team-a"]
        )
    assert {e.path: e.message for e in info.value.errors} == {
        "parameters.lr": "must be a finite number"
    }


@pytest.mark.parametrize("value", [*NON_FINITE, "nan", "inf", "1e999"])
def test_spawn_options_with_a_non_finite_count_are_refused(value: object) -> None:
    """JupyterHub's REST API reads bodies with Python's json, which takes NaN and Infinity."""
    user = UserContext("alice", ("team-a",))
    with pytest.raises(OptionsError) as info:
        validate_options({"offering": "h100", "count": value}, sample_catalog(), user)
    assert info.value.field == "count"

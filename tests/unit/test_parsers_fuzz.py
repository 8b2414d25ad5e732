"""Property-based fuzzing of every parser of outside input reachable as a pure function: for
any input, a valid result or the parser's own error with field paths, never another exception;
messages of bounded size (they quote at most a bounded part of the input).

Inputs are arbitrary JSON-like values and, closer to what gets through to the deep checks,
valid samples with a few fields replaced, removed or added (:func:`mutated`).

- spawn options: ``core/choice.py`` ``read_server_choice`` (the form's offering, count, image,
  size);
- activity reports: ``core/activity.py`` ``parse_activity``;
- job submissions: ``gpuaas_service/jobs/request.py`` ``validate_job_request``;
- policy text: ``gpuaas_service/console/preview.py`` ``parse_policy_text`` (the console's
  preview), and ``reclaim/policy.py`` ``load_policy`` on parsed data (the policy file);
- catalogs: ``core/catalog.py`` ``build_catalog``;
- the text itself: ``core/parsing.py`` ``load_json`` and ``load_yaml``;
- query parameters: the console export's ``day`` (``gpuaas_service/web/console.py``
  ``export_day``; its ``team`` and ``format`` are compared as they are, never parsed).

Each example has a deadline (hypothesis's ``deadline``, far above what an example takes) so an
input that makes a parser slow shows up as a failure; the runs are derandomised and keep no
example database, so a run is reproducible and leaves nothing behind.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuaas_service.console.preview import PreviewError, parse_policy_text
from gpuaas_service.jobs.request import JobRequestError, NotAllowed, validate_job_request
from gpuaas_service.reclaim.policy import PolicyError, PolicySet, load_policy
from gpuaas_service.web.console import export_day
from jupyter_gpuaas.core.activity import Activity, ReportError, parse_activity
from jupyter_gpuaas.core.catalog import Catalog, CatalogError, CatalogSource, build_catalog
from jupyter_gpuaas.core.choice import Choice, read_server_choice
from jupyter_gpuaas.core.fields import FieldError, FieldErrors
from jupyter_gpuaas.core.parsing import ParseError, load_json, load_yaml
from tests.support.console_samples import EXAMPLES
from tests.support.jobs_samples import jobs_catalog, request_body
from tests.support.samples import catalog_data

FUZZ = settings(
    max_examples=100,
    deadline=timedelta(seconds=5),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MAX_MESSAGE = 600
"""The longest message a problem may have: the parsers quote at most 40-60 characters of a
value, a "did you mean" and the names of the allowed choices."""

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=40)
    | st.sampled_from(["", "0", "-1", "1e999", "1/7", "30m", "10000d", "2026-11-30T12:00:00Z"])
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=25,
)


@st.composite
def mutated(draw: st.DrawFn, sample: Any) -> Any:
    """``sample`` with one to three changes, each somewhere down a random path: a value
    replaced by any JSON value, a key or item removed, or an unknown key added."""
    data = copy.deepcopy(sample)
    for _ in range(draw(st.integers(1, 3))):
        holder: Any = None
        key: Any = None
        node = data
        while isinstance(node, (dict, list)) and node and draw(st.booleans()):
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            holder, key = node, draw(st.sampled_from(keys))
            node = holder[key]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if holder is None:
            if action == "replace":
                data = draw(JSON)
            elif isinstance(data, dict):
                data[draw(st.text(max_size=12))] = draw(JSON)
        elif action == "replace":
            holder[key] = draw(JSON)
        elif action == "remove":
            del holder[key]
        elif isinstance(node, dict):
            node[draw(st.text(max_size=12))] = draw(JSON)
        elif isinstance(node, list):
            node.append(draw(JSON))
    return data


def check_errors(errors: Any) -> None:
    """Problems with a path and a bounded message."""
    assert errors, "an error without problems"
    for e in errors:
        path, message = (e.path, e.message) if isinstance(e, FieldError) else e
        assert isinstance(path, str)
        assert isinstance(message, str)
        assert message
        assert len(message) <= MAX_MESSAGE, message[:200]
        assert len(path) <= MAX_MESSAGE, path[:200]


# --------------------------------------------------------------------------- spawn options

CATALOG = build_catalog([CatalogSource("", catalog_data())], default_namespace="users")
TENANT = CATALOG.tenants["team-a"]
CHOICE_KEYS = st.sampled_from(["offering", "count", "image", "size"])
CHOICE_VALUES = JSON | st.sampled_from([*CATALOG.offerings, *CATALOG.images, *CATALOG.sizes])


@FUZZ
@given(st.dictionaries(CHOICE_KEYS | st.text(max_size=10), CHOICE_VALUES, max_size=5))
def test_spawn_options_are_a_choice_or_field_errors(data: dict[str, Any]) -> None:
    errs = FieldErrors()
    choice = read_server_choice(errs, data, CATALOG, TENANT)
    if choice is None:
        check_errors(errs.items)
        assert {e.path for e in errs.items} <= {"offering", "count", "image", "size"}
    else:
        assert isinstance(choice, Choice)
        assert not errs.items
        assert choice.offering.slug in TENANT.offerings
        assert choice.offering.min_count <= choice.count <= choice.offering.max_count


# --------------------------------------------------------------------------- activity reports

REPORT = {
    "sampled_at": "2026-11-30T11:59:50Z",
    "source": "nvml",
    "kernels": [
        {"kernel_id": "k", "execution_state": "idle", "last_activity": "2026-11-30T11:00:00Z"}
    ],
    "terminals": [{"name": "1", "last_activity": "2026-11-30T11:00:00Z"}],
    "gpu_memory": 0,
    "gpu_utilization": [{"uuid": "GPU-1", "utilization": 3}],
    "idle_since": "2026-11-30T11:00:00Z",
}


@FUZZ
@given(JSON | mutated(REPORT))
def test_activity_reports_are_read_or_refused_with_paths(payload: Any) -> None:
    try:
        activity = parse_activity(payload, now=NOW)
    except ReportError as e:
        check_errors(e.errors)
        return
    assert isinstance(activity, Activity)
    assert activity.gpu_memory is None or activity.gpu_memory >= 0


# --------------------------------------------------------------------------- job submissions

JOBS_CATALOG = jobs_catalog()


@FUZZ
@given(JSON | mutated(request_body()))
def test_job_submissions_are_a_request_or_field_errors(body: Any) -> None:
    try:
        request = validate_job_request(body, JOBS_CATALOG, "alice", ["team-a"])
    except JobRequestError as e:
        check_errors(e.errors)
        return
    except NotAllowed as e:
        check_errors([(e.path, str(e))])
        return
    assert request.user == "alice"
    assert request.tenant.name == "team-a"
    assert request.offering.slug in request.jobs.offerings


# --------------------------------------------------------------------------- policy text

POLICY = yaml.safe_load((EXAMPLES / "policy.yaml").read_text())


@FUZZ
@given(JSON | mutated(POLICY))
@example({"dry_run": list(range(500)), "policies": [{"name": "x", "idle_after": [0] * 500}]})
@example({"policies": [{"name": "x", "match": {"kinds": ["k" * 5000]}, "idle_after": "1h"}]})
def test_policy_data_is_a_policy_set_or_field_errors(data: Any) -> None:
    try:
        policies = load_policy(data, origin="fuzz")
    except PolicyError as e:
        check_errors(e.errors)
        return
    assert isinstance(policies, PolicySet)
    assert policies.policies


@FUZZ
@given(
    st.text(max_size=300)
    | mutated(POLICY).map(lambda d: yaml.safe_dump(d, allow_unicode=True))
    | st.sampled_from(["*a", "&a [*a]", "[" * 200, "a: !!python/name:os.system", "\t- x", "{"])
)
def test_pasted_policy_text_is_a_policy_set_or_field_errors(text: str) -> None:
    try:
        policies = parse_policy_text(text)
    except PreviewError as e:
        check_errors([(x["path"], x["message"]) for x in e.errors])
        return
    assert isinstance(policies, PolicySet)


# --------------------------------------------------------------------------- catalogs


@FUZZ
@given(JSON | mutated(catalog_data()))
def test_catalogs_are_built_or_refused_with_paths(data: Any) -> None:
    if not isinstance(data, dict):
        data = {"offerings": data}
    try:
        catalog = build_catalog([CatalogSource("fuzz: ", data)], default_namespace="users")
    except CatalogError as e:
        check_errors(e.errors)
        return
    assert isinstance(catalog, Catalog)
    for tenant in catalog.tenants.values():
        assert set(tenant.offerings) <= set(catalog.offerings)


# --------------------------------------------------------------------------- the text itself


LOADERS: list[Callable[[str | bytes], Any]] = [load_json, load_yaml]


@FUZZ
@given(st.sampled_from(LOADERS), st.text(max_size=300) | st.binary(max_size=300))
def test_any_text_is_json_and_yaml_or_a_parse_error(
    load: Callable[[str | bytes], Any], text: str | bytes
) -> None:
    try:
        load(text)
    except ParseError as e:
        check_errors([(e.path, e.message)])


FINITE_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)


@FUZZ
@given(FINITE_JSON)
def test_what_json_and_yaml_write_is_read_back_the_same(value: Any) -> None:
    assert load_json(json.dumps(value)) == value
    dumped = yaml.safe_dump(value)  # non-ASCII escaped: NEL (\x85) would read as a break
    read = load_yaml(dumped)
    assert read == yaml.safe_load(dumped)
    if not any(isinstance(x, float) and math.isnan(x) for x in _leaves(read)):
        assert read == value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


@FUZZ
@given(st.text(max_size=200))
@example("2026-11-30")
@example("")
def test_the_exports_day_is_a_date_or_says_what_is_wrong(raw: str) -> None:
    outcome: date | str
    try:
        outcome = export_day(raw, NOW.date())
    except ValueError as e:
        outcome = str(e)
    if isinstance(outcome, str):  # quotes at most 20 characters of the input, escaped
        assert outcome.startswith("day="), outcome
        assert len(outcome) < MAX_MESSAGE, outcome
    else:
        assert outcome == (date.fromisoformat(raw) if raw else NOW.date())


# --------------------------------------------------------------------------- non-finite, newlines

# Fourth audit, findings 4 and 8: a NaN passed every bound of the policy's numbers (each comparison
# is false) and ``$`` matched before a trailing newline. Over valid samples: any number of the
# input replaced by NaN or an infinity, and any name given a trailing newline, is refused at a
# path (never taken, never another exception).

NON_FINITE = st.sampled_from([math.nan, math.inf, -math.inf])
NAME_KEYS = frozenset(
    {"slug", "name", "team", "offering", "image", "size", "kernel_name", "flavor", "namespace"}
)
"""Keys whose string values are names (matched whole), in the samples below."""


def _leaf_paths(
    value: Any, keep: Callable[[Any, Any], bool], path: tuple[Any, ...] = ()
) -> list[tuple[Any, ...]]:
    """The paths (key sequences) of ``value``'s leaves that ``keep(key, leaf)`` holds for."""
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return [path] if path and keep(path[-1], value) else []
    return [p for k, v in items if k != "notebook" for p in _leaf_paths(v, keep, (*path, k))]


def _set(sample: Any, path: tuple[Any, ...], value: Any) -> Any:
    data = copy.deepcopy(sample)
    node = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


def _is_number(_key: Any, leaf: Any) -> bool:
    return isinstance(leaf, int | float) and not isinstance(leaf, bool)


def _is_name(key: Any, leaf: Any) -> bool:
    return isinstance(leaf, str) and key in NAME_KEYS


def _parameter_names(body: Any) -> list[tuple[Any, ...]]:
    return [("parameters", name) for name in body.get("parameters", {})]


SAMPLES: dict[str, tuple[Any, Callable[[Any], Any], tuple[type[Exception], ...]]] = {
    "policy": (POLICY, lambda d: load_policy(d, origin="fuzz"), (PolicyError,)),
    "catalog": (
        catalog_data(),
        lambda d: build_catalog([CatalogSource("fuzz: ", d)], default_namespace="users"),
        (CatalogError,),
    ),
    "job": (
        request_body(),
        lambda d: validate_job_request(d, JOBS_CATALOG, "alice", ["team-a"]),
        (JobRequestError, NotAllowed),  # a team that is not the user's: 403, in words
    ),
}


def _refused(kind: str, data: Any) -> None:
    _sample, parse, errors = SAMPLES[kind]
    try:
        parse(data)
    except errors as e:
        problems = [("", str(e))] if isinstance(e, NotAllowed) else getattr(e, "errors", None)
        check_errors(problems)
        return
    raise AssertionError(f"{kind} taken: {data!r:.300}")


@FUZZ
@given(st.sampled_from(sorted(SAMPLES)), st.data(), NON_FINITE)
def test_a_non_finite_number_anywhere_is_refused_at_a_path(
    kind: str, data: st.DataObject, value: float
) -> None:
    sample = SAMPLES[kind][0]
    path = data.draw(st.sampled_from(_leaf_paths(sample, _is_number)))
    _refused(kind, _set(sample, path, value))


@FUZZ
@given(st.sampled_from(sorted(SAMPLES)), st.data(), st.sampled_from(["\n", "\r\n", "\n\n"]))
def test_a_name_with_a_trailing_newline_is_refused_at_a_path(
    kind: str, data: st.DataObject, tail: str
) -> None:
    sample = SAMPLES[kind][0]
    paths = _leaf_paths(sample, _is_name)
    if kind == "job":  # parameter names are keys: renamed, not changed in place
        paths += _parameter_names(sample)
    path = data.draw(st.sampled_from(paths))
    if kind == "job" and path[0] == "parameters":
        changed = copy.deepcopy(sample)
        changed["parameters"][path[1] + tail] = changed["parameters"].pop(path[1])
    else:
        node: Any = sample
        for key in path:
            node = node[key]
        changed = _set(sample, path, node + tail)
    _refused(kind, changed)

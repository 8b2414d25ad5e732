"""The culler's policy file: every field, defaults, matching, and errors with field paths."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuaas_service.reclaim.policy import (
    Match,
    PolicyError,
    PolicyFile,
    PolicySet,
    load_policy,
    load_policy_file,
)
from tests.support.service_world import POLICY

EXAMPLE = Path(__file__).resolve().parents[4] / "culler" / "examples" / "policy.yaml"


def errors_of(data: Any, **kw: Any) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(data, **kw)
    return [str(e) for e in info.value.errors]


def one(**fields: Any) -> dict[str, Any]:
    return {"policies": [{"name": "p", "idle_after": "30m", **fields}]}


def test_minimal_policy_gets_the_documented_defaults() -> None:
    ps = load_policy(one())
    assert isinstance(ps, PolicySet)
    (p,) = ps.policies
    assert p.name == "p"
    assert p.idle_after == timedelta(minutes=30)
    assert p.match == Match()
    assert p.reclaim == "when-queued"
    assert p.max_idle is None
    assert p.max_age is None
    assert p.warn_before == timedelta(minutes=15)
    assert p.max_snoozes == 1
    assert p.snooze_for == timedelta(hours=1)
    assert p.exempt_users == frozenset()
    assert p.dry_run is False
    assert p.busy_utilization_percent == 10.0
    assert p.unknown_grace == timedelta(hours=1)
    assert ps.dry_run is False
    assert ps.report_stale_after == timedelta(minutes=10)
    assert ps.handoff_timeout == timedelta(minutes=10)


def test_every_field_is_read() -> None:
    ps = load_policy(
        {
            "dry_run": True,
            "report_stale_after": "3m",
            "handoff_timeout": "20m",
            "exempt": {"users": ["root"], "groups": ["ops"]},
            "policies": [
                {
                    "name": "all-fields",
                    "match": {
                        "teams": ["team-a"],
                        "kinds": ["gpu", "mig"],
                        "offerings": ["h100"],
                        "users": ["alice"],
                        "groups": ["ml"],
                    },
                    "idle_after": "20m",
                    "reclaim": "always",
                    "max_idle": "6h",
                    "max_age": "2d",
                    "warn_before": "5m",
                    "max_snoozes": 3,
                    "snooze_for": "30m",
                    "exempt": {"users": ["bob"], "groups": ["vip"]},
                    "dry_run": True,
                    "busy_utilization_percent": 25,
                    "unknown_grace": "0",
                }
            ],
        }
    )
    (p,) = ps.policies
    assert p.match == Match(
        teams=frozenset({"team-a"}),
        kinds=frozenset({"gpu", "mig"}),
        offerings=frozenset({"h100"}),
        users=frozenset({"alice"}),
        groups=frozenset({"ml"}),
    )
    assert (p.reclaim, p.max_idle, p.max_age) == ("always", timedelta(hours=6), timedelta(days=2))
    assert (p.warn_before, p.max_snoozes, p.snooze_for) == (
        timedelta(minutes=5),
        3,
        timedelta(minutes=30),
    )
    assert (p.exempt_users, p.exempt_groups) == (frozenset({"bob"}), frozenset({"vip"}))
    assert p.dry_run is True
    assert p.busy_utilization_percent == 25.0
    assert p.unknown_grace == timedelta(0)
    assert ps.dry_run is True
    assert ps.report_stale_after == timedelta(minutes=3)
    assert ps.handoff_timeout == timedelta(minutes=20)
    assert (ps.exempt_users, ps.exempt_groups) == (frozenset({"root"}), frozenset({"ops"}))


def test_defaults_apply_and_a_policy_value_wins() -> None:
    ps = load_policy(
        {
            "defaults": {"idle_after": "1h", "warn_before": "2m", "max_snoozes": 0},
            "policies": [
                {"name": "a", "match": {"kinds": ["gpu"]}, "warn_before": "9m"},
                {"name": "b", "idle_after": "3h"},
            ],
        }
    )
    a, b = ps.policies
    assert (a.idle_after, a.warn_before, a.max_snoozes) == (
        timedelta(hours=1),
        timedelta(minutes=9),
        0,
    )
    assert (b.idle_after, b.warn_before) == (timedelta(hours=3), timedelta(minutes=2))


def test_the_example_file_is_valid() -> None:
    ps = load_policy_file(str(EXAMPLE))
    assert [p.name for p in ps.policies] == ["whole-gpus", "slices-and-fractions", "cpu-only"]


# --------------------------------------------------------------------------- matching


def test_first_matching_policy_applies() -> None:
    ps = load_policy(
        {
            "policies": [
                {"name": "vip", "match": {"users": ["alice"]}, "idle_after": "8h"},
                {
                    "name": "a-gpu",
                    "match": {"teams": ["team-a"], "kinds": ["gpu"]},
                    "idle_after": "1h",
                },
                {"name": "ml", "match": {"groups": ["ml", "research"]}, "idle_after": "2h"},
                {"name": "rest", "idle_after": "3h"},
            ]
        }
    )

    def name(**kw: Any) -> str | None:
        args = {"team": "team-a", "kind": "gpu", "offering": "h100", "user": "bob", "groups": ()}
        p = ps.policy_for(**{**args, **kw})
        return p.name if p else None

    assert name(user="alice") == "vip"
    assert name() == "a-gpu"
    assert name(kind="mig") == "rest"
    assert name(kind="mig", groups=("research",)) == "ml"
    assert name(team="team-b", groups=("x", "ml")) == "ml"


def test_no_policy_matches() -> None:
    ps = load_policy(one(match={"kinds": ["gpu"]}))
    assert ps.policy_for(team="t", kind="cpu", offering="cpu", user="u", groups=()) is None


def test_exemptions_global_and_per_policy() -> None:
    ps = load_policy(
        {
            "exempt": {"users": ["root"], "groups": ["ops"]},
            "policies": [
                {"name": "p", "idle_after": "1h", "exempt": {"users": ["bob"], "groups": ["vip"]}}
            ],
        }
    )
    p = ps.policies[0]
    assert ps.exemption(p, "root", ()) == "user root is exempt (exempt.users)"
    assert ps.exemption(p, "x", ("ops",)) == "group ops is exempt (exempt.groups)"
    assert ps.exemption(p, "bob", ()) == "user bob is exempt by policy p"
    assert ps.exemption(p, "x", ("a", "vip")) == "group vip is exempt by policy p"
    assert ps.exemption(p, "alice", ("a",)) is None
    assert ps.exemption(None, "bob", ()) is None


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            k: st.frozensets(st.sampled_from(["a", "b", "c"]), min_size=1)
            for k in ("teams", "kinds", "users", "groups")
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            k: st.frozensets(st.sampled_from(["a", "b", "c"]), min_size=1)
            for k in ("teams", "kinds", "users", "groups")
        },
    ),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from(["a", "b", "c"]),
    st.frozensets(st.sampled_from(["a", "b", "c"])),
)
def test_covers_means_every_match_of_the_other_matches_this(
    m1: dict[str, frozenset[str]],
    m2: dict[str, frozenset[str]],
    team: str,
    kind: str,
    user: str,
    groups: frozenset[str],
) -> None:
    first, second = Match(**m1), Match(**m2)
    kw: dict[str, Any] = {
        "team": team,
        "kind": kind,
        "offering": "o",
        "user": user,
        "groups": groups,
    }
    if first.covers(second) and second.matches(**kw):
        assert first.matches(**kw)


# --------------------------------------------------------------------------- errors


def test_bad_duration_has_its_field_path() -> None:
    data = {
        "policies": [
            {"name": "ok", "match": {"kinds": ["gpu"]}, "idle_after": "30m"},
            {"name": "bad", "idle_after": "5 parsecs"},
        ]
    }
    assert errors_of(data) == [
        'policies[1].idle_after: "5 parsecs" is not a duration (use e.g. 30m, 2h)'
    ]


def test_every_error_is_reported_at_once() -> None:
    data = {
        "dry_run": "yes",
        "report_stale_after": "0",
        "handoff_timeout": "soon",
        "exempt": {"users": "alice", "teams": ["x"]},
        "defaults": {"warn_before": "later", "name": "x"},
        "polices": [],
        "policies": [
            {
                "name": "Bad Name!",
                "match": {"kinds": ["gpus", "tpu"], "teams": [], "user": ["a"]},
                "idle_after": 30,
                "reclaim": "sometimes",
                "max_idle": "1x",
                "max_age": "0",
                "max_snoozes": -1,
                "snooze_for": "0",
                "exempt": ["bob"],
                "dry_run": 1,
                "busy_utilization_percent": 150,
                "unknown_grace": "a while",
                "warn_befor": "5m",
            },
            "not a mapping",
            {"idle_after": "1h"},
            {"name": "no-idle-after"},
        ],
    }
    errors = errors_of(data)
    expected = [
        "dry_run: must be true or false, not 'yes'",
        "report_stale_after: must be longer than 0 (use e.g. 30m, 2h)",
        'handoff_timeout: "soon" is not a duration (use e.g. 30m, 2h)',
        "exempt.teams: unknown field",
        "exempt.users: must be a list of names, not a string",
        "defaults.name: belongs in each policy, not in defaults",
        'defaults.warn_before: "later" is not a duration (use e.g. 30m, 2h)',
        "polices: unknown field (did you mean 'policies'?)",
        "policies[0].warn_befor: unknown field (did you mean 'warn_before'?)",
        "policies[0].name: 'Bad Name!' is not a name",
        "policies[0].match.user: unknown field (did you mean 'users'?)",
        "policies[0].match.teams: must not be empty",
        "policies[0].match.kinds[0]: 'gpus' is not a kind: one of gpu, mig, shared, fraction, cpu"
        " (did you mean 'gpu'?)",
        "policies[0].match.kinds[1]: 'tpu' is not a kind",
        "policies[0].idle_after: 30 is not a duration (a number needs a unit) (use e.g. 30m, 2h)",
        "policies[0].reclaim: 'sometimes' is not one of when-queued, always",
        'policies[0].max_idle: "1x" is not a duration',
        "policies[0].max_age: must be longer than 0",
        "policies[0].max_snoozes: must be a whole number, 0 or more, not -1",
        "policies[0].snooze_for: must be longer than 0",
        "policies[0].exempt: must be a mapping",
        "policies[0].dry_run: must be true or false, not 1",
        "policies[0].busy_utilization_percent: must be a percentage from 0 to 100, not 150",
        'policies[0].unknown_grace: "a while" is not a duration',
        "policies[1]: must be a mapping",
        "policies[2].name: is required",
        "policies[3].idle_after: is required (here or in defaults)",
    ]
    for want in expected:
        assert any(e.startswith(want) for e in errors), f"missing {want!r} in:\n" + "\n".join(
            errors
        )
    assert len(errors) == len(expected)  # one each, nothing twice


def test_shadowed_policy_is_an_error() -> None:
    data = {
        "policies": [
            {"name": "gpus", "match": {"kinds": ["gpu", "mig"]}, "idle_after": "1h"},
            {
                "name": "a-gpus",
                "match": {"kinds": ["gpu"], "teams": ["team-a"]},
                "idle_after": "2h",
            },
            {"name": "all", "idle_after": "3h"},
            {"name": "late", "match": {"users": ["x"]}, "idle_after": "3h"},
        ]
    }
    errors = errors_of(data)
    assert errors[0].startswith("policies[1].match: never applies: policies[0] (gpus) comes first")
    assert errors[1].startswith("policies[3].match: never applies: policies[2] (all) comes first")
    assert len(errors) == 2


def test_duplicate_names_and_max_idle_below_idle_after() -> None:
    data = {
        "defaults": {"max_idle": "20m"},
        "policies": [
            {"name": "p", "match": {"kinds": ["gpu"]}, "idle_after": "10m"},
            {"name": "p", "match": {"kinds": ["mig"]}, "idle_after": "30m"},
            {"name": "q", "match": {"kinds": ["cpu"]}, "idle_after": "2h", "max_idle": "1h"},
        ],
    }
    assert errors_of(data) == [
        "policies[1].max_idle: 20m (from defaults.max_idle) is shorter than idle_after 30m: it"
        " would apply before the workbench counts as idle",
        "policies[1].name: 'p' is already used by policies[0]",
        "policies[2].max_idle: 1h is shorter than idle_after 2h: it would apply before the"
        " workbench counts as idle",
    ]


def test_known_teams_are_checked() -> None:
    data = one(match={"teams": ["team-a", "taem-b"]})
    assert errors_of(data, known_teams=["team-a", "team-b"]) == [
        "policies[0].match.teams[1]: 'taem-b' is not a team in the catalog (did you mean 'team-b'?)"
    ]


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (None, "policies: is required: the file is empty"),
        ([1], "(top level): must be a mapping with 'policies', not a list"),
        ({}, "policies: is required (a list of policies)"),
        ({"policies": []}, "policies: must not be empty"),
        ({"policies": {"a": 1}}, "policies: must be a list of policies, not a mapping"),
        (
            {"defaults": [], "policies": [{"name": "p", "idle_after": "1m"}]},
            "defaults: must be a mapping",
        ),
    ],
)
def test_shape_errors(data: Any, error: str) -> None:
    errors = errors_of(data)
    assert errors[0].startswith(error)


def test_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        load_policy_file(str(missing))
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [\n", encoding="utf-8")
    with pytest.raises(PolicyError, match="not valid YAML") as info:
        load_policy_file(str(bad))
    assert info.value.origin == str(bad)


def test_busy_signal_is_a_policy_field_with_a_path() -> None:
    first: dict[str, Any] = json.loads(json.dumps(POLICY["policies"]))[0]
    p = load_policy({**POLICY, "policies": [{**first, "busy_signal": "gpu"}]})
    assert p.policies[0].busy_signal == "gpu"
    with pytest.raises(PolicyError) as e:
        load_policy({**POLICY, "policies": [{**first, "busy_signal": "gpus"}]})
    assert [x.path for x in e.value.errors] == ["policies[0].busy_signal"]
    assert "did you mean 'gpu'" in e.value.errors[0].message


def test_way_down_after_is_a_policy_field_with_a_clear_error() -> None:
    """way_down_after was a service option only, so the demo's policy
    could not shorten it and a newcomer never saw the way down."""
    (p,) = load_policy(one()).policies
    assert p.way_down_after is None  # the service's c.GPUaaSService.way_down_after
    ps = load_policy(
        {
            "defaults": {"way_down_after": "10m"},
            "policies": [
                {
                    "name": "fast",
                    "match": {"kinds": ["fraction"]},
                    "idle_after": "5m",
                    "way_down_after": "0",
                },
                {"name": "rest", "idle_after": "5m"},
            ],
        }
    )
    assert [q.way_down_after for q in ps.policies] == [timedelta(0), timedelta(minutes=10)]
    assert "a smaller share offered after 10m" in ps.policies[1].describe()
    assert errors_of(one(way_down_after="soon")) == [
        "policies[0].way_down_after: " + errors_of(one(idle_after="soon"))[0].split(": ", 1)[1]
    ]
    (negative,) = errors_of(one(way_down_after="-5m"))
    assert negative.startswith("policies[0].way_down_after: "), negative
    (too_long,) = errors_of(one(way_down_after="30d"))
    assert too_long.startswith("policies[0].way_down_after: 30d is longer than 7d"), too_long
    assert "c.GPUaaSService.way_down_below = 0" in too_long


@pytest.mark.parametrize("path", ["culler/examples/policy.yaml", "demo/policy.yaml"])
def test_the_shipped_policies_set_max_age(path: str) -> None:
    from gpuaas_service.reclaim.policy import load_policy_file

    root = Path(__file__).resolve().parents[4]
    ps = load_policy_file(str(root / path))
    assert all(
        p.max_age is not None
        for p in ps.policies
        if "gpu" in p.match.kinds or "mig" in p.match.kinds or not p.match.kinds
    )


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # a visible change


def test_the_policy_file_is_reloaded_and_a_bad_one_keeps_the_last_good(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "policies: [{name: a, idle_after: 5m}]")
    source = PolicyFile(str(path))
    assert source.check()
    assert source.policies.policies[0].name == "a"
    assert not source.check()  # unchanged: not read again
    _write(path, "policies: [{name: b, idle_after: 99999999999999999999w}]")
    assert not source.check()
    assert "policies[0].idle_after" in source.error
    assert "longest duration" in source.error
    assert source.policies.policies[0].name == "a"  # the last good one stays in force
    _write(path, "policies: [{name: c, idle_after: 1h}]")
    assert source.check()
    assert source.policies.policies[0].name == "c"
    assert not source.error


def test_a_bad_file_at_start_means_reclaim_off_not_no_service(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    _write(path, "policies: [{name: a, idle_after: soon}]")
    source = PolicyFile(str(path))
    assert not source.check()
    assert source.policies.policies == ()
    assert "idle_after" in source.error

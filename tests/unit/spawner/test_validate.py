"""One validation for form posts and REST user_options: table-driven, then forged at random."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuaas_spawner import hubcompat
from gpuaas_spawner.hubcompat import SpawnException
from gpuaas_spawner.pod import pod_settings
from gpuaas_spawner.validate import (
    OPTION_KEYS,
    Choice,
    OptionsError,
    UserContext,
    options_from_form_data,
    stored_choice,
    user_usage,
    validate_options,
)
from jupyter_gpuaas.core.catalog import Offering, Tenant
from jupyter_gpuaas.core.headroom import Headroom, UserUsage, compute_headroom
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import (
    NAMESPACE,
    FakeUser,
    local_queue,
    make_spawner,
    sample_catalog,
    state,
    team_a_notebooks,
)

CATALOG = sample_catalog()
ALICE = UserContext("alice", ("team-a",))  # one team
BOB = UserContext("bob", ("team-b", "staff"))  # one team, other groups
CAROL = UserContext("carol", ("team-a", "team-b"))  # two teams
NOBODY = UserContext("dave", ("staff",))  # no team

ACCEPTED: list[tuple[str, UserContext, object, dict[str, Any]]] = [
    (
        "empty options: team defaults",
        ALICE,
        {},
        {"team": "team-a", "offering": "mig-1g", "count": 1, "image": "scipy", "size": "small"},
    ),
    (
        "None like a REST spawn without body",
        BOB,
        None,
        {"team": "team-b", "offering": "mig-1g", "count": 1, "image": "scipy", "size": "small"},
    ),
    (
        "whole GPU, two of them",
        ALICE,
        {"offering": "h100", "count": 2},
        {"team": "team-a", "offering": "h100", "count": 2, "image": "pytorch", "size": "large"},
    ),
    (
        "count as form text",
        ALICE,
        {"offering": "h100", "count": "2"},
        {"team": "team-a", "offering": "h100", "count": 2, "image": "pytorch", "size": "large"},
    ),
    (
        "two teams: picks the one asked for",
        CAROL,
        {"team": "team-b", "offering": "shared"},
        {"team": "team-b", "offering": "shared", "count": 1, "image": "scipy", "size": "small"},
    ),
    (
        "image and size",
        ALICE,
        {"offering": "cpu", "image": "pytorch", "size": "large"},
        {"team": "team-a", "offering": "cpu", "count": 1, "image": "pytorch", "size": "large"},
    ),
]

REFUSED: list[tuple[str, UserContext, object, str]] = [
    ("not a mapping", ALICE, ["h100"], "The server's options must be an object, not list"),
    (
        "injected resources",
        ALICE,
        {"offering": "h100", "extra_resource_limits": {"nvidia.com/gpu": 8}},
        "Unknown option(s) 'extra_resource_limits'; allowed: team, offering, count, image, size",
    ),
    (
        "injected labels and overrides",
        ALICE,
        {"kubespawner_override": {}, "extra_labels": {}, "profile": "x"},
        "Unknown option(s) 'extra_labels', 'kubespawner_override', 'profile'; "
        "allowed: team, offering, count, image, size",
    ),
    (
        "injected queue",
        ALICE,
        {"queue": "team-b"},
        "Unknown option(s) 'queue'; allowed: team, offering, count, image, size",
    ),
    (
        "another team's queue",
        ALICE,
        {"team": "team-b"},
        "'team-b' is not one of your teams (yours: Team A)",
    ),
    ("unknown team", ALICE, {"team": "root"}, "'root' is not one of your teams (yours: Team A)"),
    (
        "no team at all",
        NOBODY,
        {},
        "You are not in any team that may start GPU servers; ask an admin to add you to a "
        "team's group.",
    ),
    (
        "two teams and no choice",
        CAROL,
        {},
        "You are in several teams (Team A, Team B); choose which to charge.",
    ),
    ("unknown offering", ALICE, {"offering": "b200"}, "Unknown offering 'b200'"),
    (
        "offering not allowed to the team",
        BOB,
        {"offering": "h100"},
        "NVIDIA H100 is not available to Team B",
    ),
    (
        "count too high",
        ALICE,
        {"offering": "h100", "count": 3},
        "NVIDIA H100: count must be 1 to 2, not 3",
    ),
    (
        "count zero",
        ALICE,
        {"offering": "h100", "count": 0},
        "NVIDIA H100: count must be 1 to 2, not 0",
    ),
    (
        "count on a single-unit offering",
        ALICE,
        {"offering": "mig-1g", "count": 2},
        "A100 MIG 1g.5gb: count must be exactly 1, not 2",
    ),
    (
        "count as float",
        ALICE,
        {"offering": "h100", "count": 1.0},
        "count must be a whole number, not 1.0",
    ),
    ("count as bool", ALICE, {"offering": "h100", "count": True}, "count must be a whole number"),
    (
        "count as negative text",
        ALICE,
        {"offering": "h100", "count": "-1"},
        "count must be a whole number, not '-1'",
    ),
    (
        "offering not a string",
        ALICE,
        {"offering": ["h100"]},
        "offering must be a string, not a list",
    ),
    (
        "image not offered with the offering",
        ALICE,
        {"offering": "h100", "image": "scipy"},
        "Image 'scipy' is not offered with NVIDIA H100",
    ),
    (
        "image reference instead of slug",
        ALICE,
        {"image": "evil.io/miner:latest"},
        "Image 'evil.io/miner:latest' is not offered here",
    ),
    (
        "size not offered",
        ALICE,
        {"offering": "h100", "size": "small"},
        "Size 'small' is not offered with NVIDIA H100",
    ),
    ("empty string", ALICE, {"offering": ""}, "offering '' is not a valid choice"),
]


@pytest.mark.parametrize(
    ("name", "user", "options", "expected"), ACCEPTED, ids=[c[0] for c in ACCEPTED]
)
def test_accepted(name: str, user: UserContext, options: object, expected: dict[str, Any]) -> None:
    choice = validate_options(options, CATALOG, user)
    assert choice.as_user_options() == expected
    # what the hub stores is accepted again, to the same choice
    assert validate_options(choice.as_user_options(), CATALOG, user) == choice


@pytest.mark.parametrize(
    ("name", "user", "options", "message"), REFUSED, ids=[c[0] for c in REFUSED]
)
def test_refused(name: str, user: UserContext, options: object, message: str) -> None:
    with pytest.raises(OptionsError) as info:
        validate_options(options, CATALOG, user)
    assert str(info.value) == message
    assert info.value.jupyterhub_message == message


def test_default_team_breaks_the_tie() -> None:
    assert validate_options({}, CATALOG, CAROL, default_team="team-b").tenant.name == "team-b"
    with pytest.raises(OptionsError, match="choose which to charge"):
        validate_options({}, CATALOG, CAROL, default_team="team-c")


def test_live_headroom_refuses_what_cannot_start() -> None:
    qs = state([team_a_notebooks()])

    def room(tenant: Tenant, offering: Offering, count: int) -> Headroom:
        usage = UserUsage(gpu_servers=2, gpu_equivalents=Fraction(2))
        return compute_headroom(tenant, offering, qs, namespace=NAMESPACE, count=count, usage=usage)

    with pytest.raises(OptionsError) as info:
        validate_options({"offering": "h100"}, CATALOG, ALICE, headroom=room)
    assert str(info.value) == (
        "NVIDIA H100 cannot start for Team A: limit: 2 GPU servers per user. "
        "You already have 2; stop one to start this."
    )
    assert (
        validate_options({"offering": "cpu"}, CATALOG, ALICE, headroom=room).offering.slug == "cpu"
    )


def test_form_fields_become_options() -> None:
    form = {
        "team": ["team-a"],
        "offering": ["h100"],
        "count-h100": ["2"],
        "count-mig-3g": ["1"],
        "image": ["pytorch"],
    }
    assert options_from_form_data(form, CATALOG) == {
        "team": "team-a",
        "offering": "h100",
        "count": "2",
        "image": "pytorch",
    }
    assert options_from_form_data({"_xsrf": ["x"], "offering": ["cpu"]}, CATALOG) == {
        "offering": "cpu"
    }


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"offering": ["h100", "cpu"]}, "Form field 'offering' must be given once"),
        ({"offering": []}, "Form field 'offering' must be given once"),
        ({"count": ["2"]}, "Unknown form field 'count'"),
        ({"count-b200": ["2"]}, "Unknown form field 'count-b200'"),
        ({"extra_resource_limits": ["x"]}, "Unknown form field 'extra_resource_limits'"),
        ({"image_file": [b"bytes"]}, "Unknown form field 'image_file'"),
    ],
)
def test_forged_form_fields(form: dict[str, list[Any]], message: str) -> None:
    with pytest.raises(OptionsError) as info:
        options_from_form_data(form, CATALOG)
    assert str(info.value) == message


def _held(options: object, user: UserContext = ALICE) -> Choice | None:
    return stored_choice(options, CATALOG, user, default_team="team-a")


def test_user_usage_counts_validated_choices() -> None:
    usage = user_usage(
        [
            _held({"offering": "h100", "count": 2}),
            _held({"offering": "mig-3g"}),
            _held({"offering": "cpu"}),
            _held({"offering": "gone"}),
            None,
        ]
    )
    assert usage == UserUsage(gpu_servers=2, gpu_equivalents=Fraction(2) + Fraction(3, 7))


# Every spelling of "the team's default GPU offering, one unit" and of "two H100s" a REST spawn
# may send: each is the same holding once validated. Before, usage was read from these raw
# options, and the first four counted as nothing, "2" as one GPU.
HELD_SPELLINGS: list[tuple[object, str, int]] = [
    ({}, "mig-1g", 1),
    (None, "mig-1g", 1),
    ({"offering": None}, "mig-1g", 1),
    ({"team": "team-a"}, "mig-1g", 1),
    ({"count": "1"}, "mig-1g", 1),
    ({"offering": "mig-1g", "count": None}, "mig-1g", 1),
    ({"offering": "h100", "count": "2"}, "h100", 2),
    ({"offering": "h100", "count": "02"}, "h100", 2),
    ({"team": "team-a", "offering": "h100", "count": 2}, "h100", 2),
]


@pytest.mark.parametrize(("options", "slug", "count"), HELD_SPELLINGS)
def test_stored_options_are_counted_as_what_they_started(
    options: object, slug: str, count: int
) -> None:
    choice = _held(options)
    assert choice is not None
    assert (choice.offering.slug, choice.count) == (slug, count)
    assert user_usage([choice]).gpu_servers == 1


def test_stored_options_that_no_longer_validate_count_by_their_canonical_form() -> None:
    # alice left team-a after starting two H100s: still counted until the server stops
    gone = _held({"team": "team-a", "offering": "h100", "count": 2}, NOBODY)
    assert gone is not None
    assert (gone.offering.slug, gone.count) == ("h100", 2)
    assert _held({"team": "team-a", "offering": "retired"}, NOBODY) is None
    assert _held("not a mapping", NOBODY) is None


# ----------------------------------------------------------------------------- forged at random

_slugs = [
    "team-a",
    "team-b",
    "team-c",
    "h100",
    "mig-1g",
    "mig-3g",
    "shared",
    "cpu",
    "b200",
    "scipy",
    "pytorch",
    "small",
    "large",
    "",
]
values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-3, max_value=10**6),
        st.floats(allow_nan=True),
        st.sampled_from(_slugs),
        st.text(max_size=20),
        st.sampled_from(["1", "2", "3", "0", "-1", "01", "1e1", " 1", "1 ", "٣"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)
keys = st.one_of(
    st.sampled_from(
        [
            *OPTION_KEYS,
            "extra_resource_limits",
            "kubespawner_override",
            "profile",
            "queue",
            "namespace",
            "node_selector",
            "count-h100",
        ]
    ),
    st.text(max_size=12),
)
forged = st.one_of(
    st.dictionaries(st.sampled_from(OPTION_KEYS), values, max_size=5),
    st.dictionaries(keys, values, max_size=6),
    values,
)
users = st.sampled_from([ALICE, BOB, CAROL, NOBODY])


def _assert_within_policy(choice: Choice, user: UserContext, options: object) -> None:
    assert isinstance(options, dict) or options is None
    assert set(options or {}) <= set(OPTION_KEYS)
    tenant, offering = choice.tenant, choice.offering
    assert set(tenant.groups) & set(user.groups), "charged to a team the user is not in"
    assert offering.slug in tenant.offerings, "offering not allowed to the team"
    assert offering.min_count <= choice.count <= offering.max_count
    assert choice.image is None or choice.image in CATALOG.images_for(offering)
    assert choice.size is None or choice.size in CATALOG.sizes_for(offering)
    # and nothing from the request reaches the pod except through the catalog
    settings_ = pod_settings(choice, priority_class="interactive", default_namespace=NAMESPACE)
    assert settings_.labels["kueue.x-k8s.io/queue-name"] == tenant.local_queue
    assert settings_.namespace == NAMESPACE
    extended = {k: v for k, v in settings_.limits.items() if k not in ("cpu", "memory")}
    assert extended == {k: str(v * choice.count) for k, v in offering.resources.items()}
    assert settings_.requests.keys() >= extended.keys()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(options=forged, user=users)
def test_forged_user_options_are_never_accepted_beyond_policy(
    options: object, user: UserContext
) -> None:
    try:
        choice = validate_options(options, CATALOG, user, default_team="team-a")
    except OptionsError as e:
        message = str(e)
    else:
        _assert_within_policy(choice, user, options)
        return
    assert 0 < len(message) < 400  # refused with a message a person can read


form_values = st.lists(
    st.one_of(st.sampled_from([*_slugs, "1", "2", "3"]), st.text(max_size=10)), max_size=2
)
form_keys = st.one_of(
    st.sampled_from(
        [
            "team",
            "offering",
            "image",
            "size",
            "count-h100",
            "count-mig-1g",
            "count",
            "_xsrf",
            "profile",
        ]
    ),
    st.text(max_size=10),
)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(form=st.dictionaries(form_keys, form_values, max_size=6), user=users)
def test_forged_form_posts_are_never_accepted_beyond_policy(
    form: dict[str, list[Any]], user: UserContext
) -> None:
    try:
        options = options_from_form_data(form, CATALOG)
        choice = validate_options(options, CATALOG, user, default_team="team-a")
    except OptionsError:
        return
    _assert_within_policy(choice, user, options)
    if "offering" in form and f"count-{choice.offering.slug}" in form:
        assert choice.count == int(form[f"count-{choice.offering.slug}"][0])
    else:
        assert choice.count == choice.offering.default_count


# ----------------------------------------------------------------------------- through the spawner


def _spawner(user: FakeUser) -> Any:
    view = StaticKueueView(
        cluster_queues=[team_a_notebooks()],
        local_queues=[
            local_queue("team-a", "team-a-notebooks"),
            local_queue("team-b", "team-a-notebooks"),
        ],
    )
    return make_spawner(user, view)


@pytest.mark.usefixtures("kubeconfig")
async def test_rest_user_options_are_validated_where_jupyterhub_applies_them() -> None:
    """JupyterHub's User.spawn calls _run_apply_user_options for every spawn, REST included."""
    spawner = _spawner(FakeUser("bob", ["team-b"]))
    for forged, message in [
        ({"offering": "h100"}, "NVIDIA H100 is not available to Team B"),
        ({"team": "team-a"}, "'team-a' is not one of your teams (yours: Team B)"),
        (
            {"offering": "mig-1g", "node_selector": {}},
            "Unknown option(s) 'node_selector'; allowed: team, offering, count, image, size",
        ),
    ]:
        with pytest.raises(SpawnException) as info:
            await spawner._run_apply_user_options(forged)
        assert (info.value.status_code, info.value.reason, info.value.message) == (
            400,
            "invalid_options",
            message,
        )
        assert spawner._gpuaas_choice is None  # nothing to build a pod from
    await spawner._run_apply_user_options({"offering": "shared"})
    assert spawner._gpuaas_choice.as_user_options()["team"] == "team-b"


@pytest.mark.usefixtures("kubeconfig")
async def test_a_refused_rest_spawn_is_not_a_hub_error_on_jupyterhub_55(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """5.5 adds one to its consecutive-failure count for every failed spawn (the hub exits at
    the limit): the refusal takes one off first, so the count stays where it was."""
    monkeypatch.setattr(hubcompat, "COUNTS_EVERY_FAILURE", True)
    spawner = _spawner(FakeUser("bob", ["team-b"]))
    spawner.handler = SimpleNamespace(settings={"failure_count": 2})
    spawner._spawn_future = asyncio.get_running_loop().create_future()  # spawn_single_user's
    with pytest.raises(SpawnException):
        await spawner._run_apply_user_options({"offering": "h100"})
    assert spawner.handler.settings["failure_count"] == 1  # the hub's +1 makes it 2 again


@pytest.mark.usefixtures("kubeconfig")
async def test_form_posts_are_validated_and_stored_canonically() -> None:
    spawner = _spawner(FakeUser("alice", ["team-a"]))
    assert spawner.run_options_from_form(
        {"team": ["team-a"], "offering": ["h100"], "count-h100": ["2"]}
    ) == {"team": "team-a", "offering": "h100", "count": 2, "image": "pytorch", "size": "large"}
    with pytest.raises(OptionsError, match="Unknown form field 'kubespawner_override'"):
        spawner.run_options_from_form({"kubespawner_override": ["{}"]})
    # GET /hub/spawn?offering=cpu goes through the same path
    assert spawner.options_from_query({"offering": ["cpu"]})["offering"] == "cpu"


@pytest.mark.usefixtures("kubeconfig")
async def test_caps_count_the_users_other_servers() -> None:
    user = FakeUser("bob", ["team-b"])
    first = _spawner(user)
    first.user_options = {"team": "team-b", "offering": "mig-1g", "count": 1}
    first._spawn_pending = True  # active: starting
    second = make_spawner(user, first.kueue_view)
    user.spawners = {"": first, "second": second}
    with pytest.raises(SpawnException, match="limit: 1 GPU server per user"):
        await second._run_apply_user_options({"offering": "shared"})
    await second._run_apply_user_options({"offering": "cpu"})


@pytest.mark.usefixtures("kubeconfig")
@pytest.mark.parametrize(("options", "slug", "count"), HELD_SPELLINGS)
async def test_the_canonical_choice_is_stored_and_counted_for_every_spelling(
    options: object, slug: str, count: int
) -> None:
    """A REST spawn's raw options (no offering: the team default; count as text) become the
    server's user_options in canonical form, and the user's next spawn counts them."""
    user = FakeUser("alice", ["team-a"])
    first = _spawner(user)
    await first._run_apply_user_options(options)
    assert first.user_options == {
        "team": "team-a",
        "offering": slug,
        "count": count,
        "image": "pytorch" if slug == "h100" else "scipy",
        "size": "large" if slug == "h100" else "small",
    }
    first._spawn_pending = True  # active: starting
    second = make_spawner(user, first.kueue_view)
    user.spawners = {"": first, "second": second}
    # team-a: 2 GPU servers, 2 GPUs per user
    if slug == "h100":
        with pytest.raises(SpawnException, match="limit: 2 GPUs per user"):
            await second._run_apply_user_options({"offering": "mig-1g"})
    else:
        await second._run_apply_user_options({"offering": "mig-1g"})
        second._spawn_pending = True
        third = make_spawner(user, first.kueue_view)
        user.spawners = {"": first, "second": second, "third": third}
        with pytest.raises(SpawnException, match="limit: 2 GPU servers per user"):
            await third._run_apply_user_options({})
    # and the same holds for a server this hub process did not validate (a hub restart):
    # its stored, canonical options are re-read
    first._gpuaas_choice = None
    later = make_spawner(user, first.kueue_view)
    user.spawners = {"": first, "later": later}
    held = later._held_by_others(later.catalog, UserContext("alice", ("team-a",)))
    assert [(c.offering.slug, c.count) for c in held if c] == [(slug, count)]

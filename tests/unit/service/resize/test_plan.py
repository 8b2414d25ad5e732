"""The decisions of a move (resize/plan.py): which offering is the next size up, which is
the way down, which moves are refused and why."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from gpuaas_service.resize.plan import (
    ResizeRefused,
    WayDownRule,
    bigger_offerings,
    current_choice,
    others_usage,
    plan_resize,
    smaller_offerings,
    way_down,
)
from jupyter_gpuaas.core.catalog import Offering, Tenant
from jupyter_gpuaas.core.headroom import Fit, Headroom
from tests.support.hub_moves import TEAM_A
from tests.support.samples import fraction_catalog

CATALOG = fraction_catalog()


def running(offering: str, team: str = "team-a", **more: Any) -> Any:
    return current_choice(CATALOG, [team], {"team": team, "offering": offering, "count": 1, **more})


def refusal(call: Any) -> ResizeRefused:
    with pytest.raises(ResizeRefused) as caught:
        call()
    return caught.value


# --------------------------------------------------------------------------- next size up


@pytest.mark.parametrize(
    ("now", "next_up"),
    [
        ("l4-quarter", "l4-half"),  # the same pool (the same L4s) first
        ("mig-1g", "mig-3g"),  # not the smaller l4-half of another pool
        ("l4-half", "mig-3g"),  # nothing bigger in its pool: the smallest bigger elsewhere
        ("mig-3g", "h100"),
        ("cpu", "mig-1g"),  # no GPU memory yet: the smallest GPU, the team's order breaking ties
    ],
)
def test_the_next_size_up_is_the_smallest_bigger_offering_of_the_same_pool_first(
    now: str, next_up: str
) -> None:
    assert plan_resize(CATALOG, running(now), None).offering.slug == next_up
    assert plan_resize(CATALOG, running(now), {}).offering.slug == next_up


def test_bigger_offerings_never_include_a_time_shared_gpu_or_a_smaller_one() -> None:
    slugs = [o.slug for o in bigger_offerings(CATALOG, running("l4-quarter"))]
    assert slugs == ["l4-half", "mig-3g", "h100"]
    assert "shared" not in [o.slug for o in bigger_offerings(CATALOG, running("cpu"))]


def test_the_move_keeps_the_team_and_the_size_where_the_bigger_offering_allows_them() -> None:
    choice = running("l4-quarter")
    planned = plan_resize(CATALOG, choice, {"offering": "h100"})
    assert planned.tenant.name == "team-a"
    assert planned.as_user_options()["offering"] == "h100"
    assert planned.count == 1
    assert planned.size is not None
    assert planned.size.slug == "large"


def test_nothing_bigger_is_refused_409_naming_what_runs() -> None:
    e = refusal(lambda: plan_resize(CATALOG, running("h100"), None))
    assert e.status == 409
    assert "Team A offers nothing bigger than your NVIDIA H100 (80 GiB)" in str(e)


# --------------------------------------------------------------------------- the way down

GiB = 1 << 30
HOUR = 3600.0
RULE = WayDownRule(below=0.25, after_seconds=1800, headroom=1.25)


@pytest.mark.parametrize(
    ("now", "peak", "down"),
    [
        ("l4-half", 2 * GiB, "l4-quarter"),  # the same pool (the same L4s) first
        ("h100", 3 * GiB, "mig-1g"),  # none in its pool: the smallest elsewhere that holds it
        ("mig-3g", 5 * GiB, "l4-half"),  # 6.25 GiB needed: not mig-1g nor l4-quarter
        ("h100", 0, "mig-1g"),  # no GPU memory used: the smallest GPU
    ],
)
def test_a_session_far_below_its_share_for_long_is_offered_the_smallest_that_holds_its_peak(
    now: str, peak: int, down: str
) -> None:
    offered = way_down(CATALOG, running(now), (peak, 2 * HOUR), RULE)
    assert offered is not None
    assert offered.slug == down


@pytest.mark.parametrize(
    ("now", "peak", "seconds"),
    [
        ("l4-half", 2 * GiB, 1799.0),  # not long enough yet
        ("l4-half", 3 * GiB, 2 * HOUR),  # 27 % of 11 GiB: not far enough below
        ("mig-1g", 0, 2 * HOUR),  # nothing smaller with a GPU
        ("cpu", 0, 2 * HOUR),  # no GPU memory to go down from
        ("shared", 0, 2 * HOUR),  # a time-shared GPU's memory is not the user's alone
    ],
)
def test_no_way_down_too_soon_too_close_or_with_nothing_smaller(
    now: str, peak: int, seconds: float
) -> None:
    assert way_down(CATALOG, running(now), (peak, seconds), RULE) is None


def test_no_way_down_for_a_session_never_measured() -> None:
    assert way_down(CATALOG, running("h100"), None, RULE) is None


def test_smaller_offerings_are_of_the_same_pool_first_then_the_smallest() -> None:
    assert [o.slug for o in smaller_offerings(CATALOG, running("h100"))] == [
        "mig-1g",
        "l4-quarter",
        "l4-half",
        "mig-3g",
    ]
    assert [o.slug for o in smaller_offerings(CATALOG, running("mig-3g"))] == [
        "mig-1g",
        "l4-quarter",
        "l4-half",
    ]


def test_the_way_down_offered_is_a_move_a_smaller_one_not_offered_is_refused_400() -> None:
    choice = running("l4-half")
    down = way_down(CATALOG, choice, (2 * GiB, 2 * HOUR), RULE)
    planned = plan_resize(CATALOG, choice, {"offering": "l4-quarter"}, down=down)
    assert planned.offering.slug == "l4-quarter"
    e = refusal(lambda: plan_resize(CATALOG, choice, {"offering": "mig-1g"}, down=down))
    assert e.status == 400
    assert e.path == "offering"
    assert str(e).startswith("A100 MIG 1g.5gb is not bigger than your l4-half (11 GiB)")
    # Without an offer (never measured, or not far enough below), no move down at all.
    e = refusal(lambda: plan_resize(CATALOG, choice, {"offering": "l4-quarter"}))
    assert e.status == 400


# --------------------------------------------------------------------------- refusals


def test_a_smaller_or_equal_offering_is_refused_400_naming_the_next_size_up() -> None:
    e = refusal(lambda: plan_resize(CATALOG, running("l4-quarter"), {"offering": "mig-1g"}))
    assert e.status == 400
    assert e.path == "offering"
    assert str(e) == (
        "A100 MIG 1g.5gb is not bigger than your l4-quarter (5.5 GiB); the next size up is l4-half"
    )
    same = refusal(lambda: plan_resize(CATALOG, running("l4-half"), {"offering": "l4-half"}))
    assert same.status == 400
    shared = refusal(lambda: plan_resize(CATALOG, running("cpu"), {"offering": "shared"}))
    assert shared.status == 400  # its memory is not the user's alone: never "bigger"


def test_an_offering_the_team_does_not_have_is_refused_403() -> None:
    e = refusal(lambda: plan_resize(CATALOG, running("mig-1g", "team-b"), {"offering": "h100"}))
    assert e.status == 403
    assert str(e) == "NVIDIA H100 is not offered to Team B"


@pytest.mark.parametrize(
    ("body", "path", "words"),
    [
        ([], "", "the body must be a JSON object"),
        ({"offering": "h100", "count": 8}, "count", "unknown field 'count'"),
        ({"offering": "h100", "resources": {"nvidia.com/gpu": 8}}, "resources", "a move takes"),
        ({"offering": 5}, "offering", "offering must be an offering's slug"),
        ({"offering": "h10"}, "offering", "unknown offering 'h10' (did you mean 'h100'?)"),
    ],
)
def test_a_forged_or_malformed_body_is_a_clear_400(body: Any, path: str, words: str) -> None:
    e = refusal(lambda: plan_resize(CATALOG, running("l4-quarter"), body))
    assert e.status == 400
    assert e.path == path
    assert words in str(e)


def test_a_move_the_live_headroom_refuses_is_a_409_with_its_words() -> None:
    def never(tenant: Tenant, offering: Offering, count: int) -> Headroom:
        return Headroom(
            tenant.name,
            offering.slug,
            count,
            Fit.NOT_ALLOWED,
            "not allowed: you already hold 2 GPUs",
        )

    e = refusal(lambda: plan_resize(CATALOG, running("l4-quarter"), None, headroom=never))
    assert e.status == 409
    assert str(e) == "l4-half cannot start for Team A: not allowed: you already hold 2 GPUs."


def test_a_server_whose_choice_the_catalog_no_longer_knows_cannot_be_moved() -> None:
    e = refusal(lambda: current_choice(CATALOG, TEAM_A, {"team": "team-a", "offering": "gone"}))
    assert e.status == 409
    assert "no longer offered" in str(e)
    e = refusal(lambda: current_choice(CATALOG, ["nobody"], {"offering": "h100"}))
    assert e.status == 409


def test_the_other_servers_of_the_user_count_towards_the_caps() -> None:
    servers = {
        "": {"user_options": {"team": "team-a", "offering": "l4-quarter"}},
        "big": {"user_options": {"team": "team-a", "offering": "h100", "count": 2}},
        "notes": {"user_options": {"team": "team-a", "offering": "cpu"}},
        "odd": {"user_options": "not options"},
    }
    usage = others_usage(CATALOG, TEAM_A, servers, "")
    assert usage.gpu_servers == 1
    assert usage.gpu_equivalents == Fraction(2)


def test_a_server_of_a_team_the_user_left_still_counts_as_the_spawner_counts_it() -> None:
    """Fourth audit, finding 5: its options no longer validate, but it holds its GPU until it
    stops; the spawner counted it at the start, the service's check skipped it."""
    servers = {
        "": {"user_options": {"team": "team-a", "offering": "l4-quarter"}},
        "old": {"user_options": {"team": "team-b", "offering": "mig-1g", "count": 1}},
        "text": {"user_options": {"team": "team-a", "offering": "l4-half", "count": "1"}},
        "extra": {"user_options": {"team": "team-a", "offering": "mig-1g", "env": "x"}},
    }
    usage = others_usage(CATALOG, TEAM_A, servers, "")
    assert usage.gpu_servers == 3
    assert usage.gpu_equivalents == Fraction(1, 2) + 2 * CATALOG.offerings[
        "mig-1g"
    ].gpu_equivalents_for(1)

"""The choice a spawn and a notebook Job share (jupyter_gpuaas/core/choice.py): table-driven."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from jupyter_gpuaas.core.catalog import Offering, Size, Tenant
from jupyter_gpuaas.core.choice import (
    Choice,
    TeamRefused,
    choice_resources,
    pick_team,
    read_choice,
    shm_volume,
)
from jupyter_gpuaas.core.fields import FieldErrors
from jupyter_gpuaas.core.headroom import Fit, Headroom
from tests.support.samples import sample_catalog

CATALOG = sample_catalog()
TEAM_A = CATALOG.tenants["team-a"]
TEAM_B = CATALOG.tenants["team-b"]
H100 = CATALOG.offerings["h100"]


def read(
    data: dict[str, Any], tenant: Tenant = TEAM_A, **kw: Any
) -> tuple[Choice | None, dict[str, str]]:
    errs = FieldErrors()
    kw.setdefault("offerings", tenant.offerings)
    kw.setdefault("default_offering", tenant.default_offering)
    kw.setdefault("where", tenant.display_name)
    choice = read_choice(errs, data, CATALOG, tenant, **kw)
    return choice, {e.path: e.message for e in errs.items}


def test_a_choice_takes_the_catalogs_defaults() -> None:
    choice, errs = read({})
    assert errs == {}
    assert choice == Choice(
        tenant=TEAM_A,
        offering=CATALOG.offerings["mig-1g"],
        count=1,
        image=CATALOG.images["scipy"],
        size=CATALOG.sizes["small"],
    )
    choice, _ = read({"offering": "h100", "count": "2"})  # the form's text
    assert choice is not None
    assert (choice.count, choice.image, choice.size) == (
        2,
        CATALOG.images["pytorch"],
        CATALOG.sizes["large"],
    )


REFUSED: list[tuple[dict[str, Any], dict[str, Any], dict[str, str]]] = [
    ({"offering": 7}, {}, {"offering": "offering must be a string, not a number"}),
    ({"offering": "h10"}, {}, {"offering": "Unknown offering 'h10' (did you mean 'h100'?)"}),
    (
        {"offering": "h100"},
        {"offerings": ("mig-1g",), "where": "Team A's jobs"},
        {"offering": "NVIDIA H100 is not available to Team A's jobs"},
    ),
    (
        {},
        {"offerings": (), "default_offering": None},
        {"offering": "nothing is offered to Team A; ask an admin to add offerings"},
    ),
    (
        {"offering": "h100", "count": 3, "image": "scipy", "size": "larg"},
        {},
        {
            "count": "NVIDIA H100: count must be 1 to 2, not 3",
            "image": "Image 'scipy' is not offered with NVIDIA H100",
            "size": "Size 'larg' is not offered here (did you mean 'large'?)",
        },
    ),
    ({"offering": "h100", "count": True}, {}, {"count": "count must be a whole number"}),
    ({"offering": "h100", "count": 1.5}, {}, {"count": "count must be a whole number, not 1.5"}),
    (
        {"offering": "h100", "count": "two"},
        {},
        {"count": "count must be a whole number, not 'two'"},
    ),
    (
        {"offering": "h100", "count": "00002"},  # more digits than a form's count has
        {},
        {"count": "count must be a whole number, not '00002'"},
    ),
    (
        {"offering": "h100", "count": "0"},
        {},
        {"count": "NVIDIA H100: count must be 1 to 2, not 0"},
    ),
    ({"offering": ""}, {}, {"offering": "offering '' is not a valid choice"}),
    (
        {"offering": "h100", "image": "p" * 254},
        {},
        {"image": f"image {'p' * 254!r:.57}... is not a valid choice"},
    ),
    ({"offering": "h100", "size": ["large"]}, {}, {"size": "size must be a string, not a list"}),
]


@pytest.mark.parametrize(("data", "kw", "expected"), REFUSED)
def test_every_problem_has_its_field_path(
    data: dict[str, Any], kw: dict[str, Any], expected: dict[str, str]
) -> None:
    choice, errs = read(data, **kw)
    assert choice is None
    assert errs == expected


def _room(fit: Fit) -> Any:
    def room(tenant: Tenant, offering: Offering, count: int) -> Headroom:
        assert (tenant, offering, count) == (TEAM_A, H100, 2)
        return Headroom(
            tenant=tenant.name,
            offering=offering.slug,
            count=count,
            fit=fit,
            message="limit: 1 GPU server per user",
            gpu_equivalents=Fraction(2),
            detail="You already have 1; stop one to start this.",
        )

    return room


def test_headroom_that_is_not_selectable_refuses_the_choice() -> None:
    choice, errs = read({"offering": "h100", "count": 2}, headroom=_room(Fit.NOT_ALLOWED))
    assert choice is None
    assert errs == {
        "offering": "NVIDIA H100 cannot start for Team A: limit: 1 GPU server per user. "
        "You already have 1; stop one to start this."
    }
    for fit in (Fit.NOW, Fit.BORROW, Fit.QUEUE, Fit.UNKNOWN):
        choice, errs = read({"offering": "h100", "count": 2}, headroom=_room(fit))
        assert errs == {}, fit
        assert choice is not None


def test_pick_team() -> None:
    both = [TEAM_A, TEAM_B]
    assert pick_team([TEAM_A], None, purpose="x") is TEAM_A
    assert pick_team(both, "team-b", purpose="x") is TEAM_B
    assert pick_team(both, None, default_team="team-b", purpose="x") is TEAM_B
    cases: list[tuple[list[Tenant], object, str]] = [
        (
            [],
            None,
            "You are not in any team that runs jobs; ask an admin to add you to a team's group.",
        ),
        ([TEAM_A], "team-b", "'team-b' is not one of your teams (yours: Team A)"),
        (both, None, "You are in several teams (Team A, Team B); choose which to charge."),
        (both, ["team-a"], "team must be a string, not a list"),
    ]
    for mine, requested, message in cases:
        with pytest.raises(TeamRefused) as info:
            pick_team(mine, requested, purpose="runs jobs")
        assert (info.value.error.path, info.value.error.message) == ("team", message)


def test_resources_come_from_the_size_then_the_offering() -> None:
    offering = replace(
        H100, cpu_guarantee=2.0, cpu_limit=None, mem_guarantee="8Gi", mem_limit="8Gi"
    )
    size = Size("s", "S", cpu_guarantee=0.5, cpu_limit=1.25, mem_guarantee=None, mem_limit="4Gi")
    assert choice_resources(offering, size, 2) == (
        {"nvidia.com/gpu": "2", "cpu": "500m", "memory": "8Gi"},
        {"nvidia.com/gpu": "2", "cpu": "1250m", "memory": "4Gi"},
    )
    assert choice_resources(offering, None, 1) == (
        {"nvidia.com/gpu": "1", "cpu": "2", "memory": "8Gi"},
        {"nvidia.com/gpu": "1", "memory": "8Gi"},
    )


def test_shm_for_gpu_offerings_only() -> None:
    assert shm_volume(H100) == (
        {"name": "gpuaas-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
        {"name": "gpuaas-shm", "mountPath": "/dev/shm"},
    )
    assert shm_volume(replace(H100, shm_size=None)) is None
    assert shm_volume(replace(H100, kind="cpu")) is None

"""Memory-capped fractions (HAMi): the catalog's validation, Kueue's resource transformations,
and the headroom counted in the transformed resources (docs/fractions.md)."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuaas.core.catalog import CatalogError, CatalogSource, build_catalog
from jupyter_gpuaas.core.headroom import Fit, compute_headroom, released_by
from jupyter_gpuaas.core.kueue import ResourceTransformation, transform_requests
from tests.support.samples import (
    GPU,
    GPUCORES,
    GPUMEM,
    HAMI_TRANSFORMATIONS,
    NAMESPACE,
    TOTAL_GPUCORES,
    TOTAL_GPUMEM,
    cluster_queue,
    fraction_catalog,
    fraction_catalog_data,
    state,
)

F = Fraction


def _errors(data: dict[str, Any]) -> list[str]:
    with pytest.raises(CatalogError) as info:
        build_catalog([CatalogSource("GPUaaSSpawner.", data)], default_namespace=NAMESPACE)
    return [str(e) for e in info.value.errors]


# --------------------------------------------------------------------------- the catalog


def test_a_fraction_asks_for_hamis_resources_and_kueue_counts_them_per_vgpu() -> None:
    quarter = fraction_catalog().offerings["l4-quarter"]
    assert quarter.kind == "fraction"
    assert quarter.requests(1) == {GPU: 1, GPUMEM: 5632, GPUCORES: 25}
    # Two vGPUs: HAMi's memory and cores stay per vGPU; Kueue multiplies them.
    assert quarter.requests(2) == {GPU: 2, GPUMEM: 5632, GPUCORES: 25}
    assert quarter.quota_requests(1) == {GPU: 1, TOTAL_GPUMEM: 5632, TOTAL_GPUCORES: 25}
    assert quarter.quota_requests(2) == {GPU: 2, TOTAL_GPUMEM: 11264, TOTAL_GPUCORES: 50}
    assert quarter.isolation == "memory-limited"
    assert quarter.isolation_text == (
        "memory-limited, no fault isolation; a cap against accidents, not a hard limit"
    )
    assert quarter.gpu_equivalents == F(1, 4)
    assert quarter.memory_quota_resource == (TOTAL_GPUMEM, Fraction(1))
    assert quarter.scheduler_name == "hami-scheduler"
    assert quarter.pod_annotations == {"nvidia.com/use-gputype": "L4"}
    # Transformations reach every offering: a whole GPU is not transformed.
    assert fraction_catalog().offerings["h100"].quota_requests(2) == {GPU: 2}


def _fraction(**changes: Any) -> dict[str, Any]:
    data = fraction_catalog_data()
    off = next(o for o in data["offerings"] if o["slug"] == "l4-quarter")
    for key, value in changes.items():
        if value is None:
            off.pop(key, None)
        else:
            off[key] = value
    return data


P = "GPUaaSSpawner.offerings[4]"  # l4-quarter in fraction_catalog_data()
T = "GPUaaSSpawner.resource_transformations"

FIX = (
    "{input: nvidia.com/gpumem, strategy: Replace, multiplyBy: nvidia.com/gpu, outputs: "
    "{nvidia.com/total-gpumem: 1}} to resource_transformations and the same to Kueue's "
    "Configuration (resources.transformations)"
)

CATALOG_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "cap above the GPU's memory",
        _fraction(memory_cap="24Gi"),
        [
            f"{P}.memory_cap: 24Gi is more than the GPU's memory (gpu_memory: 23034Mi): lower "
            "memory_cap, or correct gpu_memory if the GPU is larger"
        ],
    ),
    (
        "cores over 100",
        _fraction(cores_percent=150),
        [
            f"{P}.cores_percent: must be at most 100, not 150: nvidia.com/gpucores is a "
            "percentage of one GPU's compute (a fraction is on one GPU)"
        ],
    ),
    (
        "size that is not its compute share",
        _fraction(gpu_equivalents="1/3"),
        [
            f"{P}.gpu_equivalents: is 1/3 but cores_percent says 1/4 of a GPU: a fraction's "
            "size is its compute share (the quota counts nvidia.com/gpucores); give "
            'gpu_equivalents: "1/4" or change cores_percent'
        ],
    ),
    ("5.5Gi is whole MiB: accepted", _fraction(memory_cap="5.5Gi"), []),
    (
        "cap and GPU memory missing",
        _fraction(memory_cap=None, gpu_memory=None),
        [
            f"{P}.gpu_memory: is required for a fraction offering: the memory of its GPU model, "
            'e.g. "23034Mi" (an NVIDIA L4, as nvidia-smi and the node\'s nvidia.com/gpu.memory '
            "label say)",
            f"{P}.memory_cap: is required for a fraction offering: its hard GPU memory limit, "
            'e.g. "5632Mi"',
        ],
    ),
    (
        "resources given by hand",
        _fraction(resources={GPU: 1}),
        [
            f"{P}.resources: a fraction's resources come from memory_cap and cores_percent "
            "(nvidia.com/gpu, nvidia.com/gpumem, nvidia.com/gpucores as HAMi expects them): "
            "remove resources"
        ],
    ),
    (
        "isolation overstated",
        _fraction(isolation="hardware"),
        [
            f"{P}.isolation: a HAMi fraction caps memory but shares faults and bandwidth with "
            "its neighbours: memory-limited (or leave it out)"
        ],
    ),
]


@pytest.mark.parametrize(
    ("data", "expected"), [c[1:] for c in CATALOG_CASES], ids=[c[0] for c in CATALOG_CASES]
)
def test_fraction_validation_names_the_field_and_the_fix(
    data: dict[str, Any], expected: list[str]
) -> None:
    if not expected:
        build_catalog([CatalogSource("GPUaaSSpawner.", data)], default_namespace=NAMESPACE)
        return
    assert _errors(data) == expected


def test_a_cap_that_is_not_whole_mib_is_refused() -> None:
    assert _errors(_fraction(memory_cap="5632500Ki")) == [
        f"{P}.memory_cap: HAMi counts nvidia.com/gpumem in whole MiB: '5632500Ki' is not; use "
        'a multiple of 1Mi such as "5632Mi"'
    ]


def test_a_missing_transformation_is_an_error_with_the_entry_to_add() -> None:
    data = fraction_catalog_data()
    data["resource_transformations"] = [data["resource_transformations"][1]]  # cores only
    errors = _errors(data)
    assert errors == [
        f"{P}.memory_cap: nvidia.com/gpumem has no entry in resource_transformations: Kueue "
        f"would count it per pod, not per vGPU. Add {FIX}",
        "GPUaaSSpawner.offerings[5].memory_cap: nvidia.com/gpumem has no entry in "
        f"resource_transformations: Kueue would count it per pod, not per vGPU. Add {FIX}",
    ]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {"input": GPUMEM, "strategy": "Replace", "outputs": {TOTAL_GPUMEM: "1"}},
            [
                f"{P}.memory_cap: the transformation of nvidia.com/gpumem must have multiplyBy: "
                "nvidia.com/gpu (HAMi counts it per vGPU), not nothing",
                "GPUaaSSpawner.offerings[5].memory_cap: the transformation of nvidia.com/gpumem "
                "must have multiplyBy: nvidia.com/gpu (HAMi counts it per vGPU), not nothing",
            ],
        ),
        (
            {"input": GPUMEM, "multiply_by": GPU, "outputs": {TOTAL_GPUMEM: "1"}},
            [f"{T}[0].multiply_by: unknown field (did you mean 'multiplyBy'?)"],
        ),
        (
            {"input": GPUMEM, "multiplyBy": GPU, "outputs": {TOTAL_GPUMEM: "1"}},
            [
                f"{T}[0].strategy: must be Replace with multiplyBy: Kueue before v0.19 keeps the "
                "multiplied amount under a retained input, so the quota would differ by Kueue "
                "version"
            ],
        ),
        (
            {"input": GPUMEM, "strategy": "Swap", "multiplyBy": GPU, "outputs": {"x y": "-1"}},
            [
                f"{T}[0].strategy: must be Retain or Replace, not 'Swap'",
                f'{T}[0].outputs["x y"]: is not a resource name (such as nvidia.com/total-gpumem)',
            ],
        ),
        (
            {"input": GPUMEM, "strategy": "Replace", "multiplyBy": GPU},
            [
                f"{T}[0].outputs: is required: Replace without outputs makes Kueue ignore the "
                "input entirely"
            ],
        ),
    ],
    ids=["no multiplyBy", "misspelt key", "Retain with multiplyBy", "bad strategy", "no outputs"],
)
def test_transformation_entries_are_checked_as_kueue_would_and_more(
    entry: dict[str, Any], expected: list[str]
) -> None:
    data = fraction_catalog_data()
    data["resource_transformations"][0] = entry
    errors = _errors(data)
    # A refused entry also leaves the offerings without their memory transformation.
    assert errors[: len(expected)] == expected


def test_the_same_input_twice_is_refused() -> None:
    data = fraction_catalog_data()
    data["resource_transformations"].append(copy.deepcopy(data["resource_transformations"][0]))
    assert _errors(data) == [
        f"{T}[2].input: nvidia.com/gpumem is already transformed at {T}[0]",
    ]


def test_fraction_fields_on_another_kind_are_refused() -> None:
    data = fraction_catalog_data()
    data["offerings"][0]["memory_cap"] = "8Gi"
    assert _errors(data) == [
        "GPUaaSSpawner.offerings[0].memory_cap: is only for a fraction offering, not a gpu one"
    ]


def test_the_demo_catalog_configures_kueue_with_the_same_transformations() -> None:
    """devcluster renders Kueue's Configuration from the demo catalog: one definition, and the
    same as the sample catalog's (HAMI_TRANSFORMATIONS in tests/support/samples.py: gpumem and
    gpucores each replaced by its total, multiplied by nvidia.com/gpu)."""
    from devcluster.cluster import kueue_transformations

    assert kueue_transformations() == HAMI_TRANSFORMATIONS


# --------------------------------------------------------------------------- Kueue's arithmetic

MEM = ResourceTransformation(GPUMEM, {TOTAL_GPUMEM: F(1)}, "Replace", GPU)
CORES = ResourceTransformation(GPUCORES, {TOTAL_GPUCORES: F(1)}, "Replace", GPU)


@pytest.mark.parametrize(
    ("requests", "transformations", "counted"),
    [
        # Kueue's HAMi page: 2 vGPUs x 1024 MiB, 2 x 20 % cores.
        (
            {GPU: 2, GPUMEM: 1024, GPUCORES: 20},
            [MEM, CORES],
            {GPU: 2, TOTAL_GPUMEM: 2048, TOTAL_GPUCORES: 40},
        ),
        ({GPU: 1, "cpu": F(1, 2)}, [MEM, CORES], {GPU: 1, "cpu": F(1, 2)}),  # nothing to do
        ({GPUMEM: 1024}, [MEM], {TOTAL_GPUMEM: 1024}),  # no multiplier asked for: x1
        (
            {GPU: 3, GPUMEM: 100},
            [ResourceTransformation(GPUMEM, {TOTAL_GPUMEM: F(2), "x/y": F(1)}, "Retain", GPU)],
            {GPU: 3, GPUMEM: 100, TOTAL_GPUMEM: 600, "x/y": 300},  # v0.19: retained as asked
        ),
        (
            {GPU: 1, "a/b": 5, "c/d": 2},
            [
                ResourceTransformation("a/b", {"out/x": F(1)}, "Replace"),
                ResourceTransformation("c/d", {"out/x": F(-1)}, "Replace"),
            ],
            {GPU: 1, "out/x": 3},  # outputs summed over inputs
        ),
        (
            {"c/d": 2},
            [ResourceTransformation("c/d", {"out/x": F(-1)}, "Replace")],
            {"out/x": 0},  # a negative total is clamped
        ),
    ],
    ids=["hami", "untouched", "no multiplier", "retain", "summed", "clamped"],
)
def test_transform_requests_as_kueue_does(
    requests: dict[str, Any], transformations: list[ResourceTransformation], counted: Any
) -> None:
    as_fractions = {k: F(v) for k, v in requests.items()}
    assert transform_requests(as_fractions, transformations) == {
        k: F(v) for k, v in counted.items()
    }


# --------------------------------------------------------------------------- headroom

Q = (("l4-hami", GPU), ("l4-hami", TOTAL_GPUMEM), ("l4-hami", TOTAL_GPUCORES))


def _notebooks(quota: tuple[int, int, int], used: tuple[int, int, int], pending: int = 0) -> Any:
    return cluster_queue(
        "team-a-notebooks",
        quotas={fr: (q, 0, None) for fr, q in zip(Q, quota, strict=True)},
        usage={fr: u for fr, u in zip(Q, used, strict=True) if u},
        pending=pending,
    )


# Per case: the offering asked for; team-a's quota and its use on l4-hami, each as (vGPUs, MiB of
# total-gpumem, % of total-gpucores); the fit and the form's message; the fractional memory
# (free, total) MiB the form shows.
# fmt: off
HEADROOM_CASES = [
    pytest.param("l4-quarter", (8, 22528, 100), (0, 0, 0), Fit.NOW,
                 "available now (4 of 4 quarter-L4s free)", (22528, 22528), id="empty pool"),
    pytest.param("l4-quarter", (16, 98304, 400), (13, 81920, 325), Fit.NOW,
                 "available now (2 of 16 quarter-L4s free)", (16384, 98304),
                 id="memory binds before vGPU slots"),
    pytest.param("l4-quarter", (16, 98304, 400), (2, 11264, 380), Fit.QUEUE,
                 "will queue: first in line once a quarter-L4 frees up", (87040, 98304),
                 id="cores bind"),
    pytest.param("l4-half", (8, 22528, 100), (4, 22528, 100), Fit.QUEUE,
                 "will queue: about 2 ahead of you", (0, 22528), id="full, others waiting"),
    pytest.param("l4-half", (8, 5632, 100), (0, 0, 0), Fit.NEVER,
                 "your team's maximum is 0 half-L4s", (5632, 5632),
                 id="larger than the team's pool"),
]
# fmt: on


@pytest.mark.parametrize(("offering", "quota", "used", "fit", "message", "memory"), HEADROOM_CASES)
def test_headroom_in_the_transformed_resources(
    offering: str,
    quota: tuple[int, int, int],
    used: tuple[int, int, int],
    fit: Fit,
    message: str,
    memory: tuple[int, int],
) -> None:
    cat = fraction_catalog()
    qs = state([_notebooks(quota, used, pending=2 if "ahead of you" in message else 0)])
    room = compute_headroom(cat.tenants["team-a"], cat.offerings[offering], qs, namespace=NAMESPACE)
    assert (room.fit, room.message) == (fit, message)
    assert (room.free_memory_mib, room.total_memory_mib) == memory


def test_a_move_counts_the_share_it_stops_as_freed() -> None:
    """A quarter-L4 moving up to a half in a pool of one half per team
    was told "will queue: first in line once a half-L4 frees up", and started at once: the
    quota of the quarter it stops first was not counted as freed."""
    cat = fraction_catalog()
    team, quarter, half = (
        cat.tenants["team-a"],
        cat.offerings["l4-quarter"],
        cat.offerings["l4-half"],
    )
    qs = state([_notebooks((2, 11264, 50), (1, 5632, 25))])
    before = compute_headroom(team, half, qs, namespace=NAMESPACE)
    assert (before.fit, before.message) == (
        Fit.QUEUE,
        "will queue: first in line once a half-L4 frees up",
    )
    moved = compute_headroom(team, half, qs, namespace=NAMESPACE, released=released_by(quarter, 1))
    assert (moved.fit, moved.message) == (Fit.NOW, "available now (1 of 1 half-L4 free)")
    # what is freed is the share's own, in its flavor: another flavor's frees nothing here
    assert released_by(quarter, 1) == {
        ("l4-hami", GPU): 1,
        ("l4-hami", TOTAL_GPUMEM): 5632,
        ("l4-hami", TOTAL_GPUCORES): 25,
    }
    elsewhere = {("other", r): q for (_f, r), q in released_by(quarter, 1).items()}
    still = compute_headroom(team, half, qs, namespace=NAMESPACE, released=elsewhere)
    assert still.fit is Fit.QUEUE
    # someone else's quarter beside it still holds its share: a half must wait for it
    qs = state([_notebooks((2, 11264, 50), (2, 11264, 50))])
    both = compute_headroom(team, half, qs, namespace=NAMESPACE, released=released_by(quarter, 1))
    assert both.fit is Fit.QUEUE


@settings(max_examples=300, deadline=None)
@given(
    quota=st.tuples(st.integers(0, 40), st.integers(0, 4 * 23034), st.integers(0, 400)),
    pods=st.lists(st.sampled_from(["l4-quarter", "l4-half"]), max_size=12),
    ask=st.sampled_from(["l4-quarter", "l4-half"]),
)
def test_headroom_starts_now_exactly_when_kueue_arithmetic_admits(
    quota: tuple[int, int, int], pods: list[str], ask: str
) -> None:
    """Against an oracle written out by hand: Kueue counts vGPUs, MiB x vGPUs, % x vGPUs."""
    cat = fraction_catalog()
    caps = {"l4-quarter": (5632, 25), "l4-half": (11264, 50)}
    used = [0, 0, 0]
    for slug in pods:  # admitted as long as they fit, as Kueue would have
        mem, cores = caps[slug]
        if all(u + r <= q for u, r, q in zip(used, (1, mem, cores), quota, strict=True)):
            used = [used[0] + 1, used[1] + mem, used[2] + cores]
    room = compute_headroom(
        cat.tenants["team-a"],
        cat.offerings[ask],
        state([_notebooks(quota, (used[0], used[1], used[2]))]),
        namespace=NAMESPACE,
    )
    mem, cores = caps[ask]
    fits = all(u + r <= q for u, r, q in zip(used, (1, mem, cores), quota, strict=True))
    never = any(r > q for r, q in zip((1, mem, cores), quota, strict=True))
    assert room.fit is (Fit.NEVER if never else Fit.NOW if fits else Fit.QUEUE)
    free = min((q - u) // r for u, r, q in zip(used, (1, mem, cores), quota, strict=True))
    assert room.free_units == free
    assert room.free_memory_mib == quota[1] - used[1]

"""Headroom from ClusterQueue spec + status (and the Kueue readers it stands on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuaas.core.headroom import Fit, UserUsage, compute_headroom
from jupyter_gpuaas.core.kueue import (
    QuantityError,
    format_quantity,
    parse_quantity,
    read_cluster_queue,
    read_local_queue,
)
from tests.support.samples import (
    GPU,
    MIG1,
    MIG3,
    NAMESPACE,
    SHARED,
    cluster_queue,
    cohort,
    local_queue,
    sample_catalog,
    state,
    team_a_notebooks,
)

CATALOG = sample_catalog()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        (2, Fraction(2)),
        ("500m", Fraction(1, 2)),
        ("8Gi", Fraction(8 << 30)),
        ("1.5G", Fraction(1_500_000_000)),
        ("1e3", Fraction(1000)),
        ("2E-1", Fraction(1, 5)),
        (".5", Fraction(1, 2)),
        ("100n", Fraction(1, 10**7)),
    ],
)
def test_parse_quantity(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "Gi", "1 Gi", "1GB", "one", True, None, [1], float("nan")])
def test_parse_quantity_refuses(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_format_quantity() -> None:
    assert [format_quantity(Fraction(x)) for x in (2, Fraction(1, 2), Fraction(1, 3))] == [
        "2",
        "500m",
        "0.333333",
    ]


def test_read_cluster_queue_both_api_versions() -> None:
    for api in ("v1beta2", "v1beta1"):
        obj = team_a_notebooks(usage={("h100", GPU): 1}, pending=4, api=api)
        cq = read_cluster_queue(obj)
        assert cq.name == "team-a-notebooks"
        assert cq.cohort == "gpus"
        assert cq.quotas[("h100", GPU)].nominal == 2
        assert cq.quotas[("h100", GPU)].borrowing_limit == 0
        assert cq.usage(("h100", GPU)) == 1
        assert cq.usage(("a100-mig", MIG1)) == 0
        assert cq.pending_workloads == 4
        assert cq.covers(MIG3)
        assert not cq.covers("cpu")
        assert cq.flavors_for(MIG3) == ("a100-mig",)
        assert cq.active is True


def test_readers_survive_garbage() -> None:
    cq = read_cluster_queue(
        {"metadata": "x", "spec": {"resourceGroups": [None, {"flavors": 3}]}, "status": []}
    )
    assert (cq.name, cq.cohort, dict(cq.quotas), cq.pending_workloads) == ("", None, {}, 0)
    lq = read_local_queue({})
    assert (lq.name, lq.cluster_queue, lq.stopped) == ("", "", False)


@dataclass
class Case:
    name: str
    offering: str
    cqs: list[dict[str, Any]]
    fit: Fit
    message: str
    count: int | None = None
    tenant: str = "team-a"
    usage: UserUsage = field(default_factory=UserUsage)
    lqs: list[dict[str, Any]] | None = None
    cohorts: list[dict[str, Any]] = field(default_factory=list)
    detail: str | None = None
    synced: bool = True
    admin: str | None = None
    """What an admin is told (:attr:`Headroom.admin_detail`), in Kueue's words."""


def _peer(**kw: Any) -> dict[str, Any]:
    """team-a's training queue in the same cohort: lends what it does not use."""
    quotas = kw.pop("quotas", {("h100", GPU): (4, None, None), ("a100-mig", MIG1): (7, None, None)})
    return cluster_queue("team-a-training", quotas=quotas, **kw)


CASES = [
    Case(
        "free whole GPU",
        "h100",
        [team_a_notebooks(usage={("h100", GPU): 1})],
        Fit.NOW,
        "available now (1 of 2 free)",
    ),
    Case("nothing used", "mig-1g", [team_a_notebooks()], Fit.NOW, "available now (7 of 7 free)"),
    Case(
        "shared counts replicas",
        "shared",
        [team_a_notebooks(usage={("l4-shared", SHARED): 12})],
        Fit.NOW,
        "available now (4 of 16 free)",
    ),
    Case(
        "full, notebooks do not borrow: queue",
        "h100",
        [team_a_notebooks(usage={("h100", GPU): 2}, pending=3), _peer()],
        Fit.QUEUE,
        "will queue: about 3 ahead of you",
    ),
    Case(
        "two GPUs when one is free: queue",
        "h100",
        [team_a_notebooks(usage={("h100", GPU): 1}), _peer()],
        Fit.QUEUE,
        "will queue: first in line once a GPU frees up",
        count=2,
    ),
    Case(
        "more than the team's maximum: never",
        "h100",
        [team_a_notebooks(quotas={("h100", GPU): (1, 0, None)})],
        Fit.NEVER,
        "your team's maximum is 1 GPU",
        count=2,
        detail="This asks for 2 GPUs.",
        admin="at most 1 GPU (1 GPU-equivalents)",
    ),
    Case(
        "MIG maximum in slices; GPU-equivalents for the admin only",
        "mig-3g",
        [team_a_notebooks(quotas={("a100-mig", MIG3): (0, 0, None)})],
        Fit.NEVER,
        "your team's maximum is 0 MIG slices",
        admin="at most 0 MIG slices (0 GPU-equivalents)",
    ),
    Case(
        "borrowing allowed by the admin, peer idle",
        "h100",
        [team_a_notebooks(quotas={("h100", GPU): (2, 2, None)}, usage={("h100", GPU): 2}), _peer()],
        Fit.BORROW,
        "available by borrowing",
        detail="Uses quota your team borrows from other teams it shares GPUs with.",
    ),
    Case(
        "borrowing from a lender that reclaims: warned",
        "h100",
        [
            team_a_notebooks(quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2}),
            _peer(reclaim="Any"),
        ],
        Fit.BORROW,
        "available by borrowing",
        detail="Uses quota your team borrows from other teams it shares GPUs with. If a lending "
        "team needs its quota back, the queue may stop this server without warning; save your "
        "work often.",
    ),
    Case(
        "peer busy: queue even with borrowing",
        "h100",
        [
            team_a_notebooks(
                quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2}, pending=1
            ),
            _peer(usage={("h100", GPU): 4}),
        ],
        Fit.QUEUE,
        "will queue: about 1 ahead of you",
    ),
    Case(
        "lending limit keeps the lender's guaranteed part",
        "h100",
        [
            team_a_notebooks(quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2}),
            _peer(quotas={("h100", GPU): (4, None, 1)}, usage={("h100", GPU): 1}),
        ],
        Fit.BORROW,
        "available by borrowing",
        count=1,
    ),
    Case(
        "lending limit: beyond what is lent queues",
        "h100",
        [
            team_a_notebooks(quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2}),
            _peer(quotas={("h100", GPU): (4, None, 1)}, usage={("h100", GPU): 1}),
        ],
        Fit.QUEUE,
        "will queue: first in line once a GPU frees up",
        count=2,
        usage=UserUsage(),
    ),
    Case(
        "cohort object quota can be borrowed",
        "h100",
        [team_a_notebooks(quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2})],
        Fit.BORROW,
        "available by borrowing",
        cohorts=[cohort("gpus", quotas={("h100", GPU): (1, None, None)})],
    ),
    Case(
        "hierarchical cohorts: the parent lends",
        "h100",
        [team_a_notebooks(quotas={("h100", GPU): (2, None, None)}, usage={("h100", GPU): 2})],
        Fit.BORROW,
        "available by borrowing",
        cohorts=[
            cohort("gpus", parent="org"),
            cohort("org", quotas={("h100", GPU): (3, None, None)}),
        ],
    ),
    Case(
        "resource not covered by the queue",
        "shared",
        [cluster_queue("team-a-notebooks", quotas={("h100", GPU): (2, 0, None)})],
        Fit.NEVER,
        "your team has no quota for Shared L4",
        detail="Team A's queue has no quota for this kind of GPU; ask an admin.",
        admin="ClusterQueue team-a-notebooks does not cover nvidia.com/gpu.shared.",
    ),
    Case(
        "per-user server cap",
        "mig-1g",
        [team_a_notebooks()],
        Fit.NOT_ALLOWED,
        "limit: 1 GPU server per user",
        tenant="team-b",
        usage=UserUsage(gpu_servers=1, gpu_equivalents=Fraction(1, 7)),
        lqs=[local_queue("team-b", "team-a-notebooks")],
        detail="You already have 1; stop one to start this.",
    ),
    Case(
        "per-user GPU cap counts GPU-equivalents",
        "h100",
        [team_a_notebooks()],
        Fit.NOT_ALLOWED,
        "limit: 2 GPUs per user",
        usage=UserUsage(gpu_servers=1, gpu_equivalents=Fraction(3, 2)),
        detail="Your other servers already use 1.5 GPU; this one needs 1 GPU.",
        admin="max_gpus_per_user 2 GPU-equivalents; held 1.5, asked 1",
    ),
    Case(
        "CPU is not capped by GPU caps",
        "cpu",
        [team_a_notebooks()],
        Fit.NOW,
        "available now",
        usage=UserUsage(gpu_servers=9, gpu_equivalents=Fraction(9)),
    ),
    Case(
        "caches not synced yet", "h100", [], Fit.UNKNOWN, "quota state not known yet", synced=False
    ),
    Case(
        "missing LocalQueue",
        "h100",
        [team_a_notebooks()],
        Fit.NOT_ALLOWED,
        "Team A's queue is not set up; ask an admin",
        lqs=[],
        admin="LocalQueue gpuaas-users/team-a does not exist",
    ),
    Case(
        "missing ClusterQueue",
        "h100",
        [],
        Fit.NOT_ALLOWED,
        "Team A's queue is not set up; ask an admin",
        admin="ClusterQueue 'team-a-notebooks' does not exist",
    ),
    Case(
        "stopped ClusterQueue",
        "h100",
        [team_a_notebooks(stop_policy="Hold")],
        Fit.NOT_ALLOWED,
        "Team A's queue is stopped by an admin",
        admin="ClusterQueue team-a-notebooks is stopped",
    ),
    Case(
        "inactive ClusterQueue",
        "h100",
        [team_a_notebooks(active=False)],
        Fit.NOT_ALLOWED,
        "Team A's queue is not taking new work right now; ask an admin",
        admin="ClusterQueue team-a-notebooks is not active: Can't admit new workloads: "
        "references missing ResourceFlavor(s): h100",
    ),
    Case(
        "team cap on waiting servers",
        "h100",
        [team_a_notebooks(usage={("h100", GPU): 2}, pending=9)],
        Fit.NOT_ALLOWED,
        "limit: 5 waiting servers per team",
        lqs=[local_queue("team-a", "team-a-notebooks", pending=5)],
        detail="Team A already has 5 servers waiting in the queue; try again when one has started.",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_headroom(case: Case) -> None:
    tenant = CATALOG.tenants[case.tenant]
    offering = CATALOG.offerings[case.offering]
    qs = state(case.cqs, case.lqs, case.cohorts, synced=case.synced)
    room = compute_headroom(
        tenant, offering, qs, namespace=NAMESPACE, count=case.count, usage=case.usage
    )
    assert (room.fit, room.message) == (case.fit, case.message)
    if case.detail is not None:
        assert room.detail == case.detail
    assert room.admin_detail == (case.admin or "")


def test_gpu_equivalents_are_given_alongside_the_counted_resource() -> None:
    qs = state([team_a_notebooks(usage={("l4-shared", SHARED): 12, ("a100-mig", MIG1): 3})])
    shared = compute_headroom(
        CATALOG.tenants["team-a"], CATALOG.offerings["shared"], qs, namespace=NAMESPACE
    )
    assert (shared.free_units, shared.total_units, shared.max_units) == (4, 16, 16)
    assert (shared.free_gpu_equivalents, shared.total_gpu_equivalents) == (Fraction(1), Fraction(4))
    assert shared.gpu_equivalents == Fraction(1, 4)
    (rf,) = shared.resources
    assert (rf.flavor, rf.resource) == ("l4-shared", SHARED)
    assert [rf.requested, rf.nominal, rf.used, rf.free] == [Fraction(n) for n in (1, 16, 12, 4)]
    mig = compute_headroom(
        CATALOG.tenants["team-a"], CATALOG.offerings["mig-1g"], qs, namespace=NAMESPACE
    )
    assert (mig.free_units, mig.free_gpu_equivalents) == (4, Fraction(4, 7))


def test_extra_requests_count_where_the_queue_covers_them() -> None:
    cq = team_a_notebooks(quotas={("default", "cpu"): (8, 0, None)}, usage={("default", "cpu"): 7})
    qs = state([cq])
    tenant, offering = CATALOG.tenants["team-a"], CATALOG.offerings["h100"]
    room = compute_headroom(
        tenant, offering, qs, namespace=NAMESPACE, extra_requests={"cpu": Fraction(4)}
    )
    assert room.fit is Fit.QUEUE
    room = compute_headroom(
        tenant,
        offering,
        qs,
        namespace=NAMESPACE,
        extra_requests={"cpu": Fraction(1), "memory": Fraction(1 << 30)},
    )
    assert room.fit is Fit.NOW  # memory is not covered: Kueue is configured to ignore it


def test_team_queued_override_and_cluster_queue_named_by_tenant() -> None:
    from dataclasses import replace

    tenant = replace(CATALOG.tenants["team-a"], cluster_queue="team-a-notebooks")
    qs = state([team_a_notebooks(usage={("h100", GPU): 2})], lqs=[])
    room = compute_headroom(
        tenant, CATALOG.offerings["h100"], qs, namespace=NAMESPACE, team_queued=2
    )
    assert (room.fit, room.cluster_queue, room.ahead) == (Fit.QUEUE, "team-a-notebooks", 0)
    room = compute_headroom(
        tenant, CATALOG.offerings["h100"], qs, namespace=NAMESPACE, team_queued=5
    )
    assert room.fit is Fit.NOT_ALLOWED


quota = st.integers(min_value=0, max_value=8)
limit = st.one_of(st.none(), st.integers(min_value=0, max_value=8))


def _cohort_ok(nominal: list[int], lending: list[int | None], used: list[int]) -> bool:
    """Kueue's cohort invariant, computed independently: usage past each member's guaranteed
    part (nominal - lendingLimit) never exceeds what the members lend."""
    pool = sum(
        n if lend is None else min(lend, n) for n, lend in zip(nominal, lending, strict=True)
    )
    past = sum(
        max(0, u - (0 if lend is None else max(0, n - lend)))
        for n, lend, u in zip(nominal, lending, used, strict=True)
    )
    return past <= pool


@settings(max_examples=400, deadline=None)
@given(
    nominal=st.lists(quota, min_size=2, max_size=4),
    borrowing=st.lists(limit, min_size=4, max_size=4),
    lending=st.lists(limit, min_size=4, max_size=4),
    used=st.lists(quota, min_size=4, max_size=4),
    request=st.integers(min_value=1, max_value=6),
)
def test_what_headroom_says_fits_keeps_kueue_invariants(
    nominal: list[int],
    borrowing: list[int | None],
    lending: list[int | None],
    used: list[int],
    request: int,
) -> None:
    """now/borrow: admitting the request keeps cohort and borrowing limits; else it would not."""
    from dataclasses import replace

    n = len(nominal)
    borrowing, lending, used = borrowing[:n], lending[:n], used[:n]
    if not _cohort_ok(nominal, lending, used) or (
        borrowing[0] is not None and used[0] > nominal[0] + borrowing[0]
    ):
        return  # an over-admitted start state (Kueue can be there after quota cuts)
    cqs = [
        cluster_queue(
            f"cq-{i}",
            quotas={("h100", GPU): (nominal[i], borrowing[i], lending[i])},
            usage={("h100", GPU): used[i]},
        )
        for i in range(n)
    ]
    qs = state(cqs, lqs=[local_queue("team-a", "cq-0")])
    offering = replace(CATALOG.offerings["h100"], max_count=10)
    tenant = replace(CATALOG.tenants["team-a"], max_gpus_per_user=None, max_queued=None)
    room = compute_headroom(
        tenant, offering, qs, namespace=NAMESPACE, count=request, usage=UserUsage()
    )
    after = [u + (request if i == 0 else 0) for i, u in enumerate(used)]
    within_borrowing = borrowing[0] is None or after[0] <= nominal[0] + borrowing[0]
    fits = _cohort_ok(nominal, lending, after) and within_borrowing
    assert room.fit in (Fit.NOW, Fit.BORROW, Fit.QUEUE, Fit.NEVER)
    assert (room.fit in (Fit.NOW, Fit.BORROW)) == fits
    if room.fit is Fit.NOW:
        assert after[0] <= nominal[0]
    if room.fit is Fit.BORROW:
        assert after[0] > nominal[0]

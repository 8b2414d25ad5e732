"""The replay's world: never beyond capacity or quota, admits in Kueue's order, and its quota
arithmetic agrees with the project's (the headroom tree the spawn form and the culler use)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.replay import brain
from benchmarks.replay.world import DEFAULT_CATALOG, Kueue, Workload, load_organisation

ORG = load_organisation(scale=0.5)
CATALOG = brain.load_catalog(str(DEFAULT_CATALOG))
SHAPES = [
    ("team-a", "training", "nvidia.com/gpu", {}),
    ("team-b", "training", "nvidia.com/gpu", {}),
    ("jupyter-users", "team-a", "nvidia.com/gpu", {"gpuaas.dev/pool": "h100"}),
    ("jupyter-users", "team-a", "nvidia.com/mig-1g.5gb", {"gpuaas.dev/pool": "a100-mig"}),
    ("jupyter-users", "team-b", "nvidia.com/gpu.shared", {"gpuaas.dev/pool": "l4-shared"}),
    ("jupyter-users", "team-a", "l4-quarter", {}),
    ("jupyter-users", "team-b", "l4-half", {}),
]

step = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, len(SHAPES) - 1), st.sampled_from([1, 2, 4, 8])),
    st.tuples(st.just("release"), st.integers(0, 10_000), st.just(0)),
)


def _fraction(n: int, team: str, slug: str, now: float) -> Workload:
    """A notebook on a HAMi fraction, as the replay's spawner makes it (Kueue's counting)."""
    offering = CATALOG.offerings[slug]
    (resource, amount), *rest = offering.quota_requests(1).items()
    return Workload(
        key=f"jupyter-users/w{n}",
        namespace="jupyter-users",
        local_queue=team,
        cluster_queue=ORG.local_queues[("jupyter-users", team)],
        priority=1000,
        priority_class="interactive",
        created=now,
        resource=resource,
        amount=amount,
        kind="notebook",
        owner=f"w{n}",
        node_selector=dict(offering.node_selector),
        also=dict(rest),
        tolerations=offering.tolerations,
    )


def _workload(n: int, shape: int, amount: int, now: float) -> Workload:
    namespace, lq, resource, selector = SHAPES[shape]
    if resource in CATALOG.offerings:
        return _fraction(n, lq, resource, now)
    notebook = namespace == "jupyter-users"
    return Workload(
        key=f"{namespace}/w{n}",
        namespace=namespace,
        local_queue=lq,
        cluster_queue=ORG.local_queues[(namespace, lq)],
        priority=1000 if notebook else 500,
        priority_class="interactive" if notebook else "training",
        created=now,
        resource=resource,
        amount=1 if notebook else amount,
        kind="notebook" if notebook else "training",
        owner=f"w{n}",
        node_selector=selector,
    )


def _agrees_with_the_project(kueue: Kueue) -> None:
    state = brain.QueueState(
        cluster_queues={
            o["metadata"]["name"]: brain.read_cluster_queue(o)
            for o in kueue.cluster_queue_objects()
        },
        cohorts={o["metadata"]["name"]: brain.read_cohort(o) for o in ORG.cohort_objects},
    )
    tree = state.tree()
    for cq in ORG.cluster_queues:
        for fr in ORG.capacity:
            assert kueue.available(cq, fr) == tree.available(("cq", cq), fr), (cq, fr)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, min_size=1, max_size=60))
def test_never_beyond_capacity_or_quota_and_work_conserving(
    steps: list[tuple[str, int, int]],
) -> None:
    kueue = Kueue(ORG)
    now = 0.0
    for n, (what, a, b) in enumerate(steps):
        now += 1.0
        if what == "submit":
            kueue.submit(_workload(n, a, b, now))
        elif kueue.admitted:
            keys = sorted(kueue.admitted)
            kueue.release(keys[a % len(keys)])
        admitted, evicted = kueue.schedule(now)
        assert kueue.over_capacity() == []
        while evicted:  # the victims' pods go (the simulator waits release_s): quota is free
            for v in evicted:
                kueue.finish_eviction(v.key, now)
            more, evicted = kueue.schedule(now)
            admitted += more
            assert kueue.over_capacity() == []
        # Nothing left pending that fits now (BestEffortFIFO: none blocks the others).
        for queue in kueue.pending.values():
            for wl in queue:
                assert kueue.fits(wl) is None, wl.key
        # Within a queue, of two workloads of the same shape, the older is admitted first.
        for wl in admitted:
            for other in kueue.pending[wl.cluster_queue]:
                same = (other.requests, other.priority) == (wl.requests, wl.priority)
                assert not (same and other.created < wl.created), (other.key, wl.key)
        _agrees_with_the_project(kueue)


def test_notebooks_take_back_what_training_borrowed() -> None:
    kueue = Kueue(ORG)
    h100 = ("h100", "nvidia.com/gpu")
    total = ORG.capacity[h100]
    for n in range(total):
        kueue.submit(_workload(n, 0, 1, float(n)))
        kueue.schedule(float(n))
    assert kueue.used("team-a-training", h100) == total  # borrowed the whole cohort
    kueue.submit(_workload(999, 2, 1, 101.0))
    admitted, evicted = kueue.schedule(101.0)
    # As in Kueue: the preemption is issued, the notebook waits until the victim is gone.
    assert admitted == []
    assert [w.key for w in evicted] == [f"team-a/w{total - 1}"]
    assert kueue.schedule(101.5) == ([], [])  # its quota is still held: nothing moves
    kueue.finish_eviction(evicted[0].key, 101.5)
    admitted, evicted = kueue.schedule(101.5)
    assert [w.key for w in admitted] == ["jupyter-users/w999"]
    assert evicted == []
    assert [w.key for w in kueue.pending["team-a-training"]] == [f"team-a/w{total - 1}"]
    assert kueue.over_capacity() == []


def test_an_evicted_workload_keeps_its_place_by_creation_time() -> None:
    """Kueue orders a ClusterQueue by creation time unless a workload was evicted for a
    pods-ready timeout or an admission check (``workload.Ordering.GetQueueOrderTimestamp``):
    a borrower preempted by a reclaim goes back ahead of the Jobs created after it."""
    kueue = Kueue(ORG)
    h100 = ("h100", "nvidia.com/gpu")
    total = ORG.capacity[h100]
    for n in range(total + 1):  # the last one finds the cohort full and waits
        kueue.submit(_workload(n, 0, 1, float(n)))
        kueue.schedule(float(n))
    assert [w.key for w in kueue.pending["team-a-training"]] == [f"team-a/w{total}"]
    kueue.submit(_workload(999, 2, 1, 101.0))
    _admitted, evicted = kueue.schedule(101.0)
    assert [w.key for w in evicted] == [f"team-a/w{total - 1}"]
    requeued = kueue.finish_eviction(evicted[0].key, 101.5)
    assert requeued is not None
    assert requeued.created == float(total - 1)
    assert requeued.queued_at == 101.5  # the admission's ``waited`` counts from here
    kueue.schedule(101.5)
    assert [w.key for w in kueue.pending["team-a-training"]] == [
        f"team-a/w{total - 1}",
        f"team-a/w{total}",
    ]
    kueue.release("team-a/w0")
    admitted, _ = kueue.schedule(102.0)
    assert [w.key for w in admitted] == [f"team-a/w{total - 1}"]


def test_one_head_per_cluster_queue_per_cycle() -> None:
    """Kueue's cycle takes one head per ClusterQueue: team B's older 1-GPU Job is admitted in
    the same cycle as team A's head, before team A's next Job (newer) gets a look; the old
    model took the best of the heads once per round and gave team A both GPUs."""
    org = load_organisation()
    kueue = Kueue(org)
    h100 = ("h100", "nvidia.com/gpu")
    total = org.capacity[h100]
    # Fill the H100s but 2: team B's training uses its nominal quota, team A the rest.
    b_nominal = org.nominal("team-b-training", h100)
    n = 0
    for _ in range(b_nominal):
        kueue.submit(_workload(n, 1, 1, float(n)))
        n += 1
    for _ in range(total - b_nominal - 2):
        kueue.submit(_workload(n, 0, 1, float(n)))
        n += 1
    kueue.schedule(float(n))
    assert sum(kueue.used(cq, h100) for cq in org.cluster_queues) == total - 2
    a1 = _workload(100, 0, 1, 200.0)  # team A, borrowing (beyond its nominal 6)
    a2 = _workload(101, 0, 1, 201.0)  # team A, borrowing
    b1 = _workload(102, 1, 1, 202.0)  # team B, borrowing too (its nominal is used up)
    for wl in (a1, a2, b1):
        kueue.submit(wl)
    admitted, _ = kueue.schedule(203.0)
    assert [w.key for w in admitted] == [a1.key, b1.key]
    assert [w.key for w in kueue.pending["team-a-training"]] == [a2.key]


def test_an_inadmissible_head_waits_for_quota_to_be_released() -> None:
    """BestEffortFIFO: a head that fits nowhere is parked; the next one becomes the head; the
    parked one is looked at again only after quota is released in the cohort."""
    org = load_organisation()
    kueue = Kueue(org)
    h100 = ("h100", "nvidia.com/gpu")
    total = org.capacity[h100]
    filler = [_workload(n, 0, 1, float(n)) for n in range(total - 1)]
    for wl in filler:
        kueue.submit(wl)
    kueue.schedule(50.0)
    big = _workload(200, 0, 8, 60.0)
    small = _workload(201, 0, 1, 61.0)
    kueue.submit(big)
    kueue.submit(small)
    admitted, _ = kueue.schedule(62.0)
    assert [w.key for w in admitted] == [small.key]
    assert big.key in kueue.inadmissible["team-a-training"]
    for wl in filler[:8]:
        kueue.release(wl.key)
    assert kueue.inadmissible["team-a-training"] == set()  # released: queued again
    admitted, _ = kueue.schedule(63.0)
    assert [w.key for w in admitted] == [big.key]


def test_capacity_and_quota_come_from_the_dev_cluster_files() -> None:
    org = load_organisation()
    assert org.capacity[("h100", "nvidia.com/gpu")] == 16
    assert org.capacity[("a100-mig", "nvidia.com/mig-1g.5gb")] == 28
    # 16 H100 + 8 A100 (MIG) + 4 L4 (time-sliced ×4) + 4 L4 (HAMi, 10 vGPUs each)
    assert org.physical_gpus == 32
    assert org.nominal("team-a-notebooks", ("h100", "nvidia.com/gpu")) == 2
    # The HAMi pool in what Kueue counts (node totals, not multiplied by the vGPUs), and in
    # GPU-equivalents by its cores (400 % = 4 L4s), not by its 40 vGPU slots.
    assert org.capacity[("l4-hami", "nvidia.com/gpu")] == 40
    assert org.capacity[("l4-hami", "nvidia.com/total-gpumem")] == 4 * 23034
    assert org.capacity[("l4-hami", "nvidia.com/total-gpucores")] == 400
    assert org.gpu_equivalents == 16 + Fraction(28, 7) + Fraction(8 * 3, 7) + 4 + 4
    assert org.flavor_taints["l4-hami"] == (
        {"key": "gpuaas.dev/hami-vgpu", "value": "true", "effect": "NoSchedule"},
    )
    assert "local" not in org.flavor_labels
    assert "demo-training" not in org.cluster_queues


def test_a_fraction_fits_only_while_slots_memory_and_cores_all_do() -> None:
    org = load_organisation()
    kueue = Kueue(org)
    quarters = [_fraction(n, "team-a", "l4-quarter", float(n)) for n in range(5)]
    for wl in quarters:
        kueue.submit(wl)
    admitted, _ = kueue.schedule(10.0)
    # team-a-notebooks has 8 vGPUs, 22528 MiB and 100 % on l4-hami, lends none: four quarters.
    assert [w.key for w in admitted] == [w.key for w in quarters[:4]]
    hami = ("l4-hami", "nvidia.com/total-gpucores")
    assert kueue.used("team-a-notebooks", hami) == 100
    assert kueue.used("team-a-notebooks", ("l4-hami", "nvidia.com/gpu")) == 4  # slots are left
    assert kueue.fits(quarters[4]) is None  # ...but no memory nor cores
    kueue.release(quarters[0].key)
    half = _fraction(9, "team-a", "l4-half", 11.0)
    kueue.submit(half)
    admitted, _ = kueue.schedule(11.0)
    assert [w.key for w in admitted] == [quarters[4].key]  # older, and fits; the half does not
    assert kueue.over_capacity() == []


def test_training_never_lands_on_the_tainted_hami_flavor() -> None:
    org = load_organisation()
    kueue = Kueue(org)
    h100 = org.capacity[("h100", "nvidia.com/gpu")]
    for n in range(h100 + 3):
        kueue.submit(_workload(n, 0, 1, float(n)))
    admitted, _ = kueue.schedule(100.0)
    assert len(admitted) == h100
    assert {w.flavor for w in admitted} == {"h100"}  # 40 vGPU slots of nvidia.com/gpu unused
    assert kueue.used("team-a-training", ("l4-hami", "nvidia.com/gpu")) == 0
    assert len(kueue.pending["team-a-training"]) == 3

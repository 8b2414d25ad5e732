"""The replay's world: never beyond capacity or quota, admits in Kueue's order, and its quota
arithmetic agrees with the project's (the headroom tree the spawn form and the culler use)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.replay import brain
from benchmarks.replay.world import Kueue, Workload, load_organisation

ORG = load_organisation(scale=0.5)
SHAPES = [
    ("team-a", "training", "nvidia.com/gpu", {}),
    ("team-b", "training", "nvidia.com/gpu", {}),
    ("jupyter-users", "team-a", "nvidia.com/gpu", {"gpuaas.dev/pool": "h100"}),
    ("jupyter-users", "team-a", "nvidia.com/mig-1g.5gb", {"gpuaas.dev/pool": "a100-mig"}),
    ("jupyter-users", "team-b", "nvidia.com/gpu.shared", {"gpuaas.dev/pool": "l4-shared"}),
]

step = st.one_of(
    st.tuples(st.just("submit"), st.integers(0, len(SHAPES) - 1), st.sampled_from([1, 2, 4, 8])),
    st.tuples(st.just("release"), st.integers(0, 10_000), st.just(0)),
)


def _workload(n: int, shape: int, amount: int, now: float) -> Workload:
    namespace, lq, resource, selector = SHAPES[shape]
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
        admitted, _evicted = kueue.schedule(now)
        assert kueue.over_capacity() == []
        # Nothing left pending that fits now (BestEffortFIFO: none blocks the others).
        for queue in kueue.pending.values():
            for wl in queue:
                assert kueue.fits(wl) is None, wl.key
        # Within a queue, of two workloads of the same shape, the older is admitted first.
        for wl in admitted:
            for other in kueue.pending[wl.cluster_queue]:
                same = (other.resource, other.amount, other.priority) == (
                    wl.resource,
                    wl.amount,
                    wl.priority,
                )
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
    assert [w.key for w in admitted][-1] == "jupyter-users/w999"
    assert len(evicted) == 1
    assert evicted[0].key == f"team-a/w{total - 1}"
    assert kueue.over_capacity() == []


def test_capacity_and_quota_come_from_the_dev_cluster_files() -> None:
    org = load_organisation()
    assert org.capacity[("h100", "nvidia.com/gpu")] == 16
    assert org.capacity[("a100-mig", "nvidia.com/mig-1g.5gb")] == 28
    assert org.physical_gpus == 28  # 16 H100 + 8 A100 (MIG) + 4 L4 (time-sliced ×4)
    assert org.nominal("team-a-notebooks", ("h100", "nvidia.com/gpu")) == 2
    assert org.gpu_equivalents == 16 + Fraction(28, 7) + Fraction(8 * 3, 7) + 4
    assert "local" not in org.flavor_labels
    assert "demo-training" not in org.cluster_queues

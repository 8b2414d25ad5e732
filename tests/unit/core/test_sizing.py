"""Advice from measured peaks, and the history's contract (jupyter_gpuaas.core.sizing)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpuaas.core.catalog import Kind, Offering
from jupyter_gpuaas.core.sizing import (
    SESSIONS_KEPT,
    USERS_KEPT,
    Advice,
    PeakHistory,
    advise,
    format_gib,
    history_from_configmap,
    history_json,
    offering_memory,
    parse_history,
    record_peak,
)

GIB = 1024  # MiB


def gpu(slug: str, memory: str, kind: Kind = "gpu", eq: Fraction = Fraction(1)) -> Offering:
    return Offering(
        slug=slug, display_name=slug.title(), kind=kind, gpu_memory=memory, gpu_equivalents=eq
    )


def share(slug: str, cap: str, eq: Fraction) -> Offering:
    return Offering(
        slug=slug,
        display_name=f"{cap} share",
        kind="fraction",
        gpu_memory="80Gi",
        memory_cap=cap,
        gpu_equivalents=eq,
    )


CPU = Offering(slug="cpu", display_name="CPU only", kind="cpu")
TEAM = [
    gpu("h100", "80Gi"),
    share("h100-10g", "10Gi", Fraction(1, 8)),
    share("h100-20g", "20Gi", Fraction(1, 4)),
    gpu("mig-1g", "10Gi", kind="mig", eq=Fraction(1, 7)),
    gpu("l4-shared", "24Gi", kind="shared", eq=Fraction(1, 4)),
    CPU,
]


@pytest.mark.parametrize(
    ("peaks", "expected"),
    [
        ([], Advice("h100", "No GPU use measured yet: your team's usual choice.", False)),
        (
            [3 * GIB, 2 * GIB],
            # 10 GiB holds 3 GiB x 1.25; of the two, the share is fewer GPU-equivalents
            Advice(
                "h100-10g",
                "Your last 2 sessions peaked at 3 GiB; 10 GiB is enough: 10Gi share.",
                True,
            ),
        ),
        (
            [6246],  # 6.1 GiB x 1.25 = 7.6 GiB
            Advice(
                "h100-10g",
                "Your last session peaked at 6.1 GiB; 10 GiB is enough: 10Gi share.",
                True,
            ),
        ),
        (
            [9 * GIB],  # x 1.25 = 11.25 GiB: not 10
            Advice(
                "h100-20g", "Your last session peaked at 9 GiB; 20 GiB is enough: 20Gi share.", True
            ),
        ),
        (
            [0, 0, 0],
            Advice("cpu", "Your last 3 sessions used no GPU memory: CPU only fits.", True),
        ),
        (
            [100 * GIB],
            Advice(
                "h100",
                "Your last session peaked at 100 GiB; the largest here has only 80 GiB: H100.",
                True,
            ),
        ),
    ],
)
def test_advise(peaks: list[int], expected: Advice) -> None:
    assert advise(TEAM, peaks, default="h100") == expected


@pytest.mark.parametrize(
    ("peaks", "starts_now", "last", "expected"),
    [
        (  # the smallest that holds 3.75 GiB (the 10 GiB share) queues: the 1g slice starts now
            [3 * GIB],
            {"mig-1g", "h100", "cpu"},
            None,
            Advice(
                "mig-1g",
                "Your last session peaked at 3 GiB; 10 GiB is enough, but 10Gi share would "
                "queue: Mig-1G (10 GiB) fits and starts now.",
                True,
            ),
        ),
        (  # nothing that holds it starts now: the smallest, saying it would queue
            [3 * GIB],
            {"cpu"},
            None,
            Advice(
                "h100-10g",
                "Your last session peaked at 3 GiB; 10 GiB is enough: 10Gi share. "
                "It would queue: nothing that fits starts now.",
                True,
                queues=True,
            ),
        ),
        (  # no session: the usual choice queues, the smallest at least as large starts now
            [],
            {"h100-20g", "h100"},
            None,
            Advice(
                "h100-20g",
                "No GPU use measured yet. Your team's usual choice, Mig-1G, would queue; "
                "20Gi share, at least as large, starts now.",
                False,
            ),
        ),
        (  # no session: the last choice stands for the usual one
            [],
            {"h100-10g", "mig-1g"},
            "h100-20g",
            Advice(
                "h100-20g",
                "No GPU use measured yet: your last choice. "
                "It would queue: nothing at least as large starts now.",
                False,
                queues=True,
            ),
        ),
        (
            [],
            {"mig-1g"},
            None,
            Advice("mig-1g", "No GPU use measured yet: your team's usual choice.", False),
        ),
    ],
)
def test_advise_prefers_what_starts_now(
    peaks: list[int], starts_now: set[str], last: str | None, expected: Advice
) -> None:
    assert advise(TEAM, peaks, default="mig-1g", starts_now=starts_now, last=last) == expected


def test_time_shared_gpus_are_never_advised() -> None:
    only_shared = [gpu("l4-shared", "24Gi", kind="shared"), gpu("a100", "40Gi")]
    assert advise(only_shared, [GIB], default="a100") == Advice(
        "a100", "Your last session peaked at 1 GiB; 40 GiB is enough: A100.", True
    )
    assert offering_memory(only_shared[0]) is None


def test_nothing_to_advise() -> None:
    assert advise([CPU], [GIB], default="cpu") is None
    assert advise([CPU], [], default="gone") is None


offering_sets = st.lists(
    st.builds(
        lambda i, mib, eq: share(f"s{i}", f"{mib}Mi", Fraction(eq, 64)),
        st.integers(0, 10_000),
        st.integers(1, 100_000),
        st.integers(1, 64),
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda o: o.slug,
)


@given(offering_sets, st.lists(st.integers(0, 100_000), min_size=1, max_size=SESSIONS_KEPT))
def test_advice_never_smaller_than_the_measured_peak(
    offerings: list[Offering], peaks: list[int]
) -> None:
    advice = advise(offerings, peaks, default=offerings[0].slug)
    assert advice is not None
    chosen = next(o for o in offerings if o.slug == advice.offering)
    memory = offering_memory(chosen)
    assert memory is not None
    largest = max(m for o in offerings if (m := offering_memory(o)) is not None)
    need = max(peaks) * (1 << 20) * 1.25
    if largest >= need:
        assert memory >= need  # fits with headroom, so never below the peak
        # and nothing smaller fits
        assert all(
            (offering_memory(o) or 0) >= memory
            for o in offerings
            if (offering_memory(o) or 0) >= need
        )
    else:
        assert memory == largest  # nothing holds it: the largest, said to be tight
        assert "the largest here has only" in advice.reason


def test_record_peak_is_bounded_and_newest_first() -> None:
    history = PeakHistory({})
    for i in range(SESSIONS_KEPT + 3):
        history = record_peak(history, "alice", i * (1 << 20) + 1)  # rounded up to whole MiB
    assert history.of("alice") == tuple(range(SESSIONS_KEPT + 3, 3, -1))
    many = PeakHistory({f"u{i}": (1,) for i in range(USERS_KEPT)})
    many = record_peak(many, "newcomer", 1 << 20)
    assert len(many.peaks) == USERS_KEPT
    assert next(iter(many.peaks)) == "newcomer"  # the longest unseen user goes
    assert "u4999" not in many.peaks


def test_history_round_trip() -> None:
    history = record_peak(record_peak(PeakHistory({}), "bob", 3 << 30), "alice", 6 << 30)
    assert parse_history(history_json(history)) == (history, [])
    assert history_from_configmap(None) == (PeakHistory({}), [])


@pytest.mark.parametrize(
    ("text", "kept", "problem"),
    [
        ("{not json", {}, "state.json: not JSON"),
        ('{"version": 1}', {}, "state.json: want an object with peaks_mib"),
        ("[" * 100_000, {}, "state.json: not JSON"),
        (
            '{"peaks_mib": {"alice": [1024], "mallory": ["lots"], "eve": [-1]}}',
            {"alice": (1024,)},
            'peaks_mib["mallory"]: want a list of whole MiB',
        ),
    ],
)
def test_a_damaged_history_loses_only_what_is_damaged(
    text: str, kept: dict[str, tuple[int, ...]], problem: str
) -> None:
    history, problems = parse_history(text)
    assert dict(history.peaks) == kept
    assert problems, text
    assert problems[0].startswith(problem), problems


def test_format_gib() -> None:
    assert [format_gib(b) for b in (6_550_000_000, 1 << 30, 512 << 20)] == [
        "6.1 GiB",
        "1 GiB",
        "512 MiB",
    ]

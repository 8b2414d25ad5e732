"""What the sidebar is told before a reclaim (``GET gpuaas/api/kernel-state/estimate``): a
kernel's own estimate read back, bounded, and nothing said where state is not kept. The route
against real kernels is tests/real_server/test_kernel_state.py's."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from jupyter_gpuaas.server.kernel_requests import (
    ESTIMATE_EVERY,
    MAX_NOT_KEPT,
    KernelEstimate,
    StateSizes,
    _estimate_of,
    state_estimate,
)


def test_a_kernels_estimate_is_read_with_what_it_never_keeps() -> None:
    answer = {
        "bytes": 3 << 30,
        "variables": 4,
        "not_kept": [{"name": "batches", "reason": "a generator"}],
    }
    assert _estimate_of(answer) == KernelEstimate(3 << 30, 4, (("batches", "a generator"),))


@pytest.mark.parametrize("answer", [None, [], {"bytes": -1}, {"bytes": True}, {"bytes": "3"}, {}])
def test_an_answer_that_is_not_an_estimate_is_none(answer: object) -> None:
    assert _estimate_of(answer) is None


def test_a_hostile_answer_stays_small() -> None:
    many = [{"name": "x" * 10_000, "reason": "r"} for _ in range(MAX_NOT_KEPT * 3)]
    estimate = _estimate_of({"bytes": 1, "variables": -3, "not_kept": many})
    assert estimate is not None
    assert estimate.variables == 0
    assert len(estimate.not_kept) == MAX_NOT_KEPT
    assert all(len(name) <= 200 for name, _ in estimate.not_kept)


async def test_a_server_that_keeps_no_state_says_so_and_asks_no_kernel() -> None:
    answer = await state_estimate(cast(Any, object()), None)
    assert answer == {"keeps": False, "bytes": 0, "seconds": 0.0, "kernels": []}


class _Kernels:
    """The kernel manager's two calls StateSizes makes, for kernels that are all idle."""

    def __init__(self, *ids: str) -> None:
        self.ids = list(ids)

    def list_kernel_ids(self) -> list[str]:
        return list(self.ids)


async def test_a_kernel_is_asked_by_one_caller_at_a_time_and_then_not_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The activity report and the sidebar ask together: one question reaches the kernel, and
    its figure serves both until ESTIMATE_EVERY has passed."""
    now = [1000.0]
    sizes = StateSizes(clock=lambda: now[0])
    asked: list[str] = []
    answer = asyncio.Event()

    async def ask(_km: Any, kernel_id: str, _timeout: float) -> KernelEstimate:
        asked.append(kernel_id)
        await answer.wait()
        return KernelEstimate(7 << 20, 1)

    monkeypatch.setattr(sizes, "_ask", ask)
    km = cast(Any, _Kernels("k1"))
    first = asyncio.ensure_future(sizes.kernels(km))
    second = asyncio.ensure_future(sizes.kernels(km))
    for _ in range(20):  # let both callers reach the kernel's question (a few loop turns)
        await asyncio.sleep(0)
    assert asked == ["k1"]
    assert await second == {"k1": None}  # not known yet: the other caller is asking
    answer.set()
    assert await first == {"k1": KernelEstimate(7 << 20, 1)}
    now[0] += ESTIMATE_EVERY - 1
    assert await sizes.total(km) == 7 << 20
    assert asked == ["k1"]
    now[0] += 2
    await sizes.kernels(km)
    assert asked == ["k1", "k1"]

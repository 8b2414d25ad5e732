"""What the sidebar is told before a reclaim (``GET gpuaas/api/kernel-state/estimate``): a
kernel's own estimate read back, bounded, and nothing said where state is not kept. The route
against real kernels is tests/real_server/test_kernel_state.py's."""

from __future__ import annotations

from typing import Any, cast

import pytest

from jupyter_gpuaas.server.kernel_state import (
    MAX_NOT_KEPT,
    KernelEstimate,
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

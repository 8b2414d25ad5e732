"""Per-caller request limits (pure: times are passed in)."""

from __future__ import annotations

from gpuaas_service.web.limits import RateLimit


def test_the_rate_limit_is_per_key_and_remembers_a_bounded_number_of_keys() -> None:
    limit = RateLimit(1.0, 2, max_keys=100)
    assert [limit.take("a", 0.0) for _ in range(3)] == [0.0, 0.0, 1.0]
    assert limit.take("b", 0.0) == 0.0
    assert limit.take("a", 1.0) == 0.0  # refilled
    for i in range(1000):
        limit.take(f"k{i}", 2.0)
    assert len(limit) == 100

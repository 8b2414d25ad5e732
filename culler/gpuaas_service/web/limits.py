"""Per-caller request limits of the shared service (pure: times are passed in).

One user's server (or script with its token) must not slow the others' queue answers or
activity intake: each caller gets a token bucket, and what is remembered about callers is
bounded.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["RateLimit"]


class RateLimit:
    """A token bucket per key: ``burst`` requests at once, refilled at ``rate`` per second.

    At most ``max_keys`` keys are remembered (the least recently seen is forgotten first, so a
    flood of new keys costs memory only up to the bound).
    """

    def __init__(self, rate: float, burst: float, *, max_keys: int = 10_000) -> None:
        self.rate = rate
        self.burst = max(burst, 1.0)
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self.refused = 0

    def take(self, key: str, now: float) -> float:
        """``0``: allowed (one token taken); otherwise the seconds until one is free."""
        if self.rate <= 0:
            return 0.0  # no limit
        tokens, last = self._buckets.pop(key, (self.burst, now))
        tokens = min(self.burst, tokens + max(now - last, 0.0) * self.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate
            self.refused += 1
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return wait

    def __len__(self) -> int:
        return len(self._buckets)

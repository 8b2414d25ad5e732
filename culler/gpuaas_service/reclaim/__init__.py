"""Reclaim idle GPU workbenches for queued work: policy, idleness, decision (pure), the loop's
inputs, the loop, and what it publishes to its listeners (:mod:`.events`)."""

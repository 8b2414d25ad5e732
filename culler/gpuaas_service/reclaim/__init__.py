"""Reclaim idle GPU workbenches for queued work: policy, idleness, decision (pure), the loop."""

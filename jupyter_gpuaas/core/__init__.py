"""Shared by every part and pure: the catalog, Kueue readers and the watch cache, headroom, labels,
the activity payload, GPU-equivalents, field-path validation, durations.

It knows no hub, no Jupyter server and no NVML (checked by ``lint-imports``).
"""

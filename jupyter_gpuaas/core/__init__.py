"""Shared by every part and pure: the catalog, Kueue readers, headroom, labels,
the activity payload, GPU-equivalents, field-path validation, durations.

It knows no hub, no Jupyter server and no NVML, and talks to no network or cluster (its one
I/O is reading a catalog or policy file it is named): the Kueue watch cache lives with the
hub-side code in :mod:`jupyter_gpuaas.hub` (checked by ``lint-imports``).
"""

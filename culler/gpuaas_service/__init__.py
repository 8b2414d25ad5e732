"""The gpuaas hub service (``gpuaas-service``, :mod:`.app`) and its ``gpuaas-culler`` CLI.

One process beside the hub, split by job:

- :mod:`.reclaim` — idle GPU workbenches back to the queue: the policy file, idleness, the pure
  decision (:mod:`.reclaim.decide`), the loop's inputs, the loop, hand-off records, notices;
- :mod:`.queue` — each user's queued GPU work with its positions, from the watch caches;
- :mod:`.jobs` — a notebook turned into a queued Kueue Job for its user (the user's server
  holds no Kubernetes credentials; the service creates the Job in the team's namespace);
- :mod:`.console` — the ITOps console: quotas against use, every workbench, hand-offs, the
  journal, showback and the policy preview;
- :mod:`.web` — the service's HTTP handlers (hub-authenticated);
- :mod:`.clients` — the Hub API, the Kubernetes API and Prometheus;
- :mod:`.metrics` — the Prometheus metrics it exposes; :mod:`.cli` — ``--check-policy``,
  ``--explain``.
"""

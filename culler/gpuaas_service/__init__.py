"""The gpuaas hub service (``gpuaas-service``, :mod:`.app`) and its ``gpuaas-admin`` CLI.

One process beside the hub, split by job:

- :mod:`.reclaim` — idle GPU workbenches back to the queue: the policy file, idleness, the pure
  decision (:mod:`.reclaim.decide`), the loop's inputs, the loop, hand-off records, notices;
- :mod:`.queue` — each user's queued GPU work with its positions, from the watch caches;
- :mod:`.jobs` — a notebook turned into a queued Kueue Job for its user (the user's server
  holds no Kubernetes credentials; the service creates the Job in the team's namespace);
- :mod:`.console` — the ITOps console: quotas against use, every workbench, hand-offs, the
  journal, showback and the policy preview;
- :mod:`.web` — the service's HTTP app and handlers (hub-authenticated), handed one typed
  context built by :mod:`.app`;
- :mod:`.clients` — the Hub API, the Kubernetes API, Prometheus, and the state kept in
  ConfigMaps across restarts;
- :mod:`.model` — plain data shared by the layers (where a pod is);
- :mod:`.metrics` — the Prometheus metrics it exposes; :mod:`.cli` — ``--check-policy``,
  ``--explain``.

The parts are layers, checked by ``lint-imports``: ``app | cli`` > ``web`` >
``console | jobs | queue`` > ``reclaim`` > ``clients | metrics`` > ``model``. The console
listens to the reclaim loop; the loop never imports the console.
"""

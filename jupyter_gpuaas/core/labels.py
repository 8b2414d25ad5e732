"""The labels and annotations jupyter-gpuaas puts on Kubernetes objects: their one home.

The spawner writes them on notebook pods, the gpuaas service reads them (and writes its own
reclaim state), and the dev cluster's admission policy and Kueue's ``labelKeysToCopy`` name
them. Kueue's own labels (queue name, priority class, ...) live in :mod:`.kueue`.
"""

from __future__ import annotations

__all__ = [
    "GPU_EQUIVALENTS_ANNOTATION",
    "HUB_SERVERNAME_ANNOTATION",
    "HUB_TOKEN_SECRET_LABEL",
    "HUB_TOKEN_SECRET_SUFFIX",
    "HUB_USERNAME_ANNOTATION",
    "JOB_COLLECTED_ANNOTATION",
    "JOB_LABEL",
    "JOB_NOTEBOOK_ANNOTATION",
    "JOB_NOTIFIED_ANNOTATION",
    "JOB_RESULT_ANNOTATION",
    "JOB_TOKEN_ANNOTATION",
    "OFFERING_LABEL",
    "RECLAIMED_AT",
    "RECLAIMED_FOR",
    "RECLAIMED_FOR_TEAM",
    "RECLAIMED_KERNEL_STATE",
    "RECLAIM_DEADLINE",
    "RECLAIM_OUTLOOK",
    "RECLAIM_PREFIX",
    "RECLAIM_REASON",
    "SNOOZED_UNTIL",
    "SNOOZES_USED",
    "STATE_KEY",
    "TEAM_LABEL",
    "USER_LABEL",
    "WARNED_AT",
]

TEAM_LABEL = "gpuaas.jupyter.org/team"
"""Pod label: the tenant (team) a notebook server runs for."""
OFFERING_LABEL = "gpuaas.jupyter.org/offering"
"""Pod label: the catalog offering's slug."""
GPU_EQUIVALENTS_ANNOTATION = "gpuaas.jupyter.org/gpu-equivalents"
"""Pod annotation: the server's size in GPU-equivalents as the catalog states it, exact ("1/7");
read back with :func:`.gpu_equivalents.pod_gpu_equivalents`."""
USER_LABEL = "gpuaas.jupyter.org/user"
"""Job/pod label: the hub user whose work it is. Kueue copies it to the Workload
(``integrations.labelKeysToCopy``); an admission policy accepts it only from that user."""

HUB_TOKEN_SECRET_LABEL = "gpuaas.jupyter.org/hub-token"
"""Secret label ("true"): the per-server Secret holding a server's hub token, named
``<pod>`` + :data:`HUB_TOKEN_SECRET_SUFFIX`. The hub may write only Secrets that carry it
(devcluster/manifests/58-hub-secrets-policy.yaml)."""
HUB_TOKEN_SECRET_SUFFIX = "-hub-token"

# Written by KubeSpawner on every server pod.
HUB_USERNAME_ANNOTATION = "hub.jupyter.org/username"
HUB_SERVERNAME_ANNOTATION = "hub.jupyter.org/servername"

# The key of each ConfigMap in which the gpuaas service keeps a state across restarts (hand-off
# records, the console's journal, the users' GPU-memory peaks, which the hub reads too).
STATE_KEY = "state.json"

# The reclaim loop's state, kept on the pod so that a restarted service carries on.
RECLAIM_PREFIX = "gpuaas.jupyter.org/reclaim-"
WARNED_AT = RECLAIM_PREFIX + "warned-at"
"""Pod annotation: when the service warned this server (a restart does not warn again)."""
RECLAIM_DEADLINE = RECLAIM_PREFIX + "deadline"
"""Pod annotation: the deadline the warning told its user (never stopped before it)."""
RECLAIM_REASON = RECLAIM_PREFIX + "reason"
"""Pod annotation: the warning's reason as its user was told it (a restart shows it again)."""
SNOOZES_USED = RECLAIM_PREFIX + "snoozes-used"
SNOOZED_UNTIL = RECLAIM_PREFIX + "snoozed-until"
RECLAIMED_AT = RECLAIM_PREFIX + "stopped-at"
"""Pod annotation: the service asked the hub to stop it (a restart does not stop it twice)."""
RECLAIMED_FOR = RECLAIM_PREFIX + "for"
"""Pod annotation: the queued work it was stopped for (``namespace/name``)."""
RECLAIMED_FOR_TEAM = RECLAIM_PREFIX + "for-team"
"""Pod annotation: the team of that work (queued notebooks share one namespace, so the
namespace does not say whose it is)."""
RECLAIMED_KERNEL_STATE = RECLAIM_PREFIX + "kernel-state"
"""Pod annotation: what the snapshot before the stop kept of each kernel (JSON, read with
``jupyter_gpuaas.core.activity.read_kernel_state_mark``), for the notice on the user's return."""
RECLAIM_OUTLOOK = RECLAIM_PREFIX + "outlook"
"""Pod annotation on a server waiting in the queue, written by the service after each reclaim
cycle: what holds the quota it needs and when the reclaim plan frees some for it (JSON, see
``gpuaas_service.queue.outlook``); the spawner's progress page puts it in words."""

# Notebooks run as training Jobs (docs/jobs.md), created by the gpuaas service.
JOB_LABEL = "gpuaas.jupyter.org/job"
"""Job, pod, ConfigMap and Secret label ("notebook"): a notebook Job the gpuaas service created
and the objects that belong to it; the service lists, reads and deletes only objects with it."""
JOB_TOKEN_ANNOTATION = "gpuaas.jupyter.org/job-token-sha256"
"""Job annotation: the SHA-256 of the token its pod proves itself with to the service (the token
itself is only in the Job's Secret)."""
JOB_COLLECTED_ANNOTATION = "gpuaas.jupyter.org/job-collected"
"""Job annotation: the path the user's server wrote the executed notebook to."""
JOB_NOTIFIED_ANNOTATION = "gpuaas.jupyter.org/job-notified"
"""Job annotation: when the user's JupyterLab showed that the job finished."""
JOB_NOTEBOOK_ANNOTATION = "gpuaas.jupyter.org/job-notebook"
"""Job annotation: the notebook's file name (not its folder: that stays in the input ConfigMap)."""
JOB_RESULT_ANNOTATION = "gpuaas.jupyter.org/job-result"
"""Job annotation: ``succeeded`` or ``failed``, once its pod sent the executed notebook."""

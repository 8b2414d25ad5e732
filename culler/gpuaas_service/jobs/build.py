"""The Kubernetes objects of a notebook Job, from a validated request (pure; docs/jobs.md).

- the Job: the team's training LocalQueue, the user label (set by the service, never by the
  caller), the offering's resources, node selector, tolerations, scheduler name and pod
  annotations (a HAMi fraction needs ``hami-scheduler``, as a server does), a sized
  ``/dev/shm``, the time limit as Kueue's maximum execution time, the catalog image running
  ``python -m jupyter_gpuaas.job_pod`` — and no secret or notebook content as a literal: Kueue
  copies the pod template into the Workload, which teammates may read;
- on a flavor that Kueue's Topology Aware Scheduling places (a ``topologyName``), the
  pod-template annotation ``kueue.x-k8s.io/podset-required-topology`` (:func:`job_topology`):
  Kueue admits it only once one domain of that level (by default a node) has room for it;
- its input ConfigMap (the notebook, its parameters): teammates' role grants no ConfigMaps;
- its token Secret: what its pod proves itself with when it fetches the input and sends the
  result; the Job carries only the token's SHA-256.

The ConfigMap and the Secret are created before the Job (so the pod never starts without them)
and get the Job as their owner right after it exists: deleting the Job deletes them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from gpuaas_service.jobs.request import JobRequest
from jupyter_gpuaas.core.choice import choice_resources, shm_volume
from jupyter_gpuaas.core.gpu_equivalents import exact_gpu_equivalents
from jupyter_gpuaas.core.kueue import (
    MAX_EXEC_TIME_LABEL,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    REQUIRED_TOPOLOGY_ANNOTATION,
)
from jupyter_gpuaas.core.labels import (
    GPU_EQUIVALENTS_ANNOTATION,
    JOB_LABEL,
    JOB_TOKEN_ANNOTATION,
    OFFERING_LABEL,
    TEAM_LABEL,
    USER_LABEL,
)

__all__ = [
    "CONTAINER",
    "INPUT_NOTEBOOK_KEY",
    "INPUT_REQUEST_KEY",
    "JOB_KIND",
    "RUNNER_COMMAND",
    "build_input_config_map",
    "build_job",
    "build_token_secret",
    "input_name",
    "job_name",
    "job_topology",
    "owner_reference",
    "result_name",
    "token_name",
    "token_sha256",
]

JOB_KIND = "notebook"
"""The value of :data:`JOB_LABEL` on everything of a notebook Job."""
CONTAINER = "notebook"
RUNNER_COMMAND = ("python", "-m", "jupyter_gpuaas.job_pod")
"""What the Job's container runs: the runner shipped with the server extension, which every
notebook image that runs the sidebar has."""
INPUT_NOTEBOOK_KEY = "notebook.ipynb"
INPUT_REQUEST_KEY = "request.json"
TOKEN_KEY = "token"
_STEM_RE = re.compile(r"[^a-z0-9]+")


def job_name(notebook_name: str, suffix: str) -> str:
    """``nb-<stem>-<suffix>``: the notebook's file name made a Kubernetes name (at most 30
    characters of it), then the random ``suffix`` (lowercase letters and digits)."""
    stem = notebook_name[: -len(".ipynb")] if notebook_name.endswith(".ipynb") else notebook_name
    stem = _STEM_RE.sub("-", stem.lower()).strip("-")[:30].strip("-") or "notebook"
    return f"nb-{stem}-{suffix}"


def input_name(job: str) -> str:
    return f"{job}-input"


def token_name(job: str) -> str:
    return f"{job}-token"


def result_name(job: str) -> str:
    return f"{job}-result"


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _labels(req: JobRequest) -> dict[str, str]:
    return {
        JOB_LABEL: JOB_KIND,
        USER_LABEL: req.user,
        TEAM_LABEL: req.tenant.name,
        OFFERING_LABEL: req.offering.slug,
    }


def _resources(req: JobRequest) -> dict[str, dict[str, str]]:
    """Requests and limits, as a server's for the same choice (core/choice.py)."""
    requests, limits = choice_resources(req.offering, req.size, req.count)
    out: dict[str, dict[str, str]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def job_topology(flavor: str | None, topologies: Mapping[str, str], level: str) -> str:
    """The topology level a Job on ``flavor`` requires ('' none): ``level`` (the service's
    ``job_topology_level``) where the flavor has a ``topologyName`` in ``topologies`` (flavor
    name → its topologyName, '' none). Never on a flavor without one: Kueue would refuse the
    Job there ('Flavor ... does not support TopologyAwareScheduling')."""
    return level if flavor and topologies.get(flavor) else ""


def build_job(
    req: JobRequest,
    *,
    name: str,
    token_sha: str,
    service_url: str,
    required_topology: str = "",
) -> dict[str, Any]:
    """The Job manifest. ``service_url``: where its pod reaches the gpuaas service;
    ``required_topology``: the level of :func:`job_topology` ('' none)."""
    offering = req.offering
    labels = {**_labels(req), QUEUE_NAME_LABEL: req.jobs.local_queue}
    if req.jobs.priority_class:
        labels[PRIORITY_CLASS_LABEL] = req.jobs.priority_class
    if req.time_limit is not None:
        labels[MAX_EXEC_TIME_LABEL] = str(req.time_limit)
    gpu_eq = exact_gpu_equivalents(offering.gpu_equivalents_for(req.count))
    env: list[dict[str, Any]] = [
        {"name": "GPUAAS_JOB_SERVICE_URL", "value": service_url},
        {"name": "GPUAAS_JOB_NAMESPACE", "value": req.jobs.namespace},
        {"name": "GPUAAS_JOB_NAME", "value": name},
        {
            "name": "GPUAAS_JOB_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": token_name(name), "key": TOKEN_KEY}},
        },
        {"name": "GPUAAS_TEAM", "value": req.tenant.name},
        {"name": "GPUAAS_OFFERING", "value": offering.slug},
        {"name": "GPUAAS_GPU_EQUIVALENTS", "value": gpu_eq},
    ]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": req.image.image if req.image is not None else "",
        "command": list(RUNNER_COMMAND),
        "env": env,
        "resources": _resources(req),
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [container],
    }
    shm = shm_volume(offering)
    if shm is not None:
        pod_spec["volumes"] = [shm[0]]
        container["volumeMounts"] = [shm[1]]
    if offering.node_selector:
        pod_spec["nodeSelector"] = dict(offering.node_selector)
    if offering.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in offering.tolerations]
    if offering.scheduler_name:
        pod_spec["schedulerName"] = offering.scheduler_name
    if not container["image"]:
        del container["image"]
    pod_annotations = {**offering.pod_annotations, GPU_EQUIVALENTS_ANNOTATION: gpu_eq}
    if required_topology:
        pod_annotations[REQUIRED_TOPOLOGY_ANNOTATION] = required_topology
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": req.jobs.namespace,
            "labels": labels,
            "annotations": {GPU_EQUIVALENTS_ANNOTATION: gpu_eq, JOB_TOKEN_ANNOTATION: token_sha},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "suspend": True,
            "template": {
                "metadata": {
                    "labels": _labels(req),
                    "annotations": pod_annotations,
                },
                "spec": pod_spec,
            },
        },
    }


def build_input_config_map(req: JobRequest, *, name: str) -> dict[str, Any]:
    """The Job's input: the notebook as sent, and what the runner needs to run it."""
    request = {
        "path": req.path,
        "parameters": dict(req.parameters),
        "kernel_name": req.kernel_name,
        "time_limit": req.time_limit,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": input_name(name),
            "namespace": req.jobs.namespace,
            "labels": _labels(req),
        },
        "data": {
            INPUT_NOTEBOOK_KEY: json.dumps(req.notebook, separators=(",", ":")),
            INPUT_REQUEST_KEY: json.dumps(request, sort_keys=True),
        },
    }


def build_token_secret(req: JobRequest, *, name: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": token_name(name),
            "namespace": req.jobs.namespace,
            "labels": _labels(req),
        },
        "stringData": {TOKEN_KEY: token},
    }


def owner_reference(job: Mapping[str, Any]) -> dict[str, Any]:
    """An ownerReference to a created Job (its uid): deleting the Job deletes the owned."""
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }

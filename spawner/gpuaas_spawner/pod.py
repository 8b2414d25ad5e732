"""The pod a validated choice becomes. Pure functions over plain dicts.

:func:`pod_settings` turns a :class:`~gpuaas_spawner.validate.Choice` into what the pod needs:
the team's LocalQueue and the interactive priority class as Kueue labels, the offering's
resources (requests = limits; a HAMi fraction's ``nvidia.com/gpu``, ``nvidia.com/gpumem``,
``nvidia.com/gpucores``), its scheduler name and pod annotations, its flavor's node selector
and tolerations, a memory-backed ``/dev/shm`` sized for data loaders, and for a time-sliced
(shared) GPU ``--GPUaaS.shared_devices=all`` on the server's command line. :func:`shape_pod`
applies those settings to the pod KubeSpawner built (its JSON form), and
:func:`externalize_secrets` moves the hub token out of the spec into a per-server Secret: Kueue
copies a pod's spec into its Workload, which more people may read than the pod.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jupyter_gpuaas.core.choice import SHM_VOLUME, Choice, choice_resources, shm_volume
from jupyter_gpuaas.core.gpu_equivalents import exact_gpu_equivalents
from jupyter_gpuaas.core.kueue import (
    POD_FINALIZER,
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    parse_quantity,
)
from jupyter_gpuaas.core.labels import GPU_EQUIVALENTS_ANNOTATION, OFFERING_LABEL, TEAM_LABEL

__all__ = [
    "NOTEBOOK_CONTAINER",
    "SHM_VOLUME",
    "PodSettings",
    "SecretInSpecError",
    "externalize_secrets",
    "finalizer_patch",
    "find_secrets",
    "owner_reference",
    "pod_settings",
    "shape_pod",
    "token_secret_manifest",
]

NOTEBOOK_CONTAINER = "notebook"


@dataclass(frozen=True)
class PodSettings:
    """Everything a choice contributes to the pod, as Kubernetes JSON fragments."""

    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    requests: Mapping[str, str]
    limits: Mapping[str, str]
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...] = ()
    volumes: tuple[Mapping[str, Any], ...] = ()
    volume_mounts: tuple[Mapping[str, Any], ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    image: str | None = None
    scheduler_name: str | None = None
    args: tuple[str, ...] = ()
    """Appended to the notebook container's ``args`` (the server's command line)."""


def pod_settings(
    choice: Choice,
    *,
    priority_class: str,
    default_namespace: str,
    yielding_priority_class: str = "",
) -> PodSettings:
    """The pod settings of a validated choice.

    ``yielding_priority_class``, where not "", is the server's class instead of its team's or
    ``priority_class``: a start after a reclaim, which must not take back the GPU it gave away.
    """
    tenant, offering, count = choice.tenant, choice.offering, choice.count
    labels = {
        QUEUE_NAME_LABEL: tenant.local_queue,
        PRIORITY_CLASS_LABEL: yielding_priority_class or tenant.priority_class or priority_class,
        TEAM_LABEL: tenant.name,
        OFFERING_LABEL: offering.slug,
    }
    annotations = {
        **offering.pod_annotations,
        GPU_EQUIVALENTS_ANNOTATION: exact_gpu_equivalents(offering.gpu_equivalents_for(count)),
    }
    requests, limits = choice_resources(offering, choice.size, count)
    volumes: tuple[Mapping[str, Any], ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = ()
    shm = shm_volume(offering)
    if shm is not None:
        volumes, mounts = (shm[0],), (shm[1],)

    # NVML cannot tell that a time-sliced GPU is shared with other pods: the server is told, so
    # it shows the GPU's used memory as possibly others' and never counts its utilisation as this
    # server's activity (jupyter_gpuaas/server/app.py). A fraction's server knows from HAMi's env.
    args = ("--GPUaaS.shared_devices=all",) if offering.kind == "shared" else ()
    env = {
        "GPUAAS_TEAM": tenant.name,
        "GPUAAS_OFFERING": offering.slug,
        "GPUAAS_OFFERING_KIND": offering.kind,
        "GPUAAS_GPU_EQUIVALENTS": annotations[GPU_EQUIVALENTS_ANNOTATION],
    }
    return PodSettings(
        namespace=tenant.namespace or default_namespace,
        labels=labels,
        annotations=annotations,
        requests=requests,
        limits=limits,
        node_selector=dict(offering.node_selector),
        tolerations=tuple(dict(t) for t in offering.tolerations),
        volumes=volumes,
        volume_mounts=mounts,
        env=env,
        image=choice.image.image if choice.image else None,
        scheduler_name=offering.scheduler_name,
        args=args,
    )


def _container(spec: dict[str, Any], name: str) -> dict[str, Any]:
    containers = spec.get("containers") or []
    for c in containers:
        if c.get("name") == name:
            return c  # type: ignore[no-any-return]
    if not containers:
        raise ValueError("the pod has no containers")
    return containers[0]  # type: ignore[no-any-return]


def shape_pod(
    pod: Mapping[str, Any], settings: PodSettings, *, container: str = NOTEBOOK_CONTAINER
) -> dict[str, Any]:
    """Apply ``settings`` to a pod manifest (Kubernetes JSON); the input is not modified.

    Ours win over the admin's base values where both set the same key (queue label, node
    selector, extended resources); the admin's volumes, tolerations and env stay.
    """
    out = copy.deepcopy(dict(pod))
    meta = out.setdefault("metadata", {})
    meta["namespace"] = settings.namespace
    meta["labels"] = {**(meta.get("labels") or {}), **settings.labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **settings.annotations}

    spec = out.setdefault("spec", {})
    _place(spec, settings)
    c = _container(spec, container)
    # A server that dies before it is ready leaves the tail of its log in its pod's status,
    # where the spawner's log line for the admin reads it (an admin's own policy stays).
    c.setdefault("terminationMessagePolicy", "FallbackToLogsOnError")
    if settings.image:
        c["image"] = settings.image
    if settings.args:
        args = list(c.get("args") or [])
        c["args"] = args + [a for a in settings.args if a not in args]
    resources = c.setdefault("resources", {})
    if settings.requests:
        resources["requests"] = {**(resources.get("requests") or {}), **settings.requests}
    if settings.limits:
        resources["limits"] = {**(resources.get("limits") or {}), **settings.limits}

    if settings.volume_mounts:
        _mount_volumes(spec, c, settings)
    if settings.env:
        c["env"] = _env(c, settings)
    return out


def _place(spec: dict[str, Any], settings: PodSettings) -> None:
    """Where the pod may run: our scheduler, node selector and tolerations over the admin's."""
    if settings.scheduler_name:
        spec["schedulerName"] = settings.scheduler_name
    if settings.node_selector:
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **settings.node_selector}
    if settings.tolerations:
        tolerations = list(spec.get("tolerations") or [])
        for tol in settings.tolerations:
            if dict(tol) not in tolerations:
                tolerations.append(dict(tol))
        spec["tolerations"] = tolerations


def _mount_volumes(spec: dict[str, Any], c: dict[str, Any], settings: PodSettings) -> None:
    """Our mounts replace the admin's at the same path or name; a volume only those replaced
    mounts used goes with them."""
    paths = {m["mountPath"] for m in settings.volume_mounts}
    names = {m["name"] for m in settings.volume_mounts}
    base_mounts = list(c.get("volumeMounts") or [])
    replaced = {m.get("name") for m in base_mounts if m.get("mountPath") in paths}
    kept = [
        m for m in base_mounts if m.get("mountPath") not in paths and m.get("name") not in names
    ]
    c["volumeMounts"] = kept + [dict(m) for m in settings.volume_mounts]
    still_mounted = {
        m.get("name")
        for ctr in (spec.get("containers") or []) + (spec.get("initContainers") or [])
        for m in (ctr.get("volumeMounts") or [])
    }
    ours = {v["name"] for v in settings.volumes}
    volumes = [
        v
        for v in (spec.get("volumes") or [])
        if v.get("name") not in ours
        and not (v.get("name") in replaced and v.get("name") not in still_mounted)
    ]
    spec["volumes"] = volumes + [copy.deepcopy(dict(v)) for v in settings.volumes]


def _env(c: dict[str, Any], settings: PodSettings) -> list[dict[str, Any]]:
    """The container's env with ours set (and the image's names pointing at our image)."""
    env = [e for e in (c.get("env") or []) if e.get("name") not in settings.env]
    env += [{"name": k, "value": v} for k, v in settings.env.items()]
    if settings.image:
        env = [
            {"name": e["name"], "value": settings.image}
            if e.get("name") in ("JUPYTER_IMAGE", "JUPYTER_IMAGE_SPEC")
            else e
            for e in env
        ]
    return env


# --------------------------------------------------------------------------- secrets


class SecretInSpecError(ValueError):
    """A secret value would end up in the pod spec (and so in its Kueue Workload)."""


def _walk_strings(obj: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from _walk_strings(v, f"{path}.{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from _walk_strings(v, f"{path}[{i}]")


def find_secrets(obj: Any, secrets: Iterable[str]) -> list[str]:
    """Paths of every string in ``obj`` that contains one of ``secrets`` (empty ones ignored)."""
    values = [s for s in secrets if s]
    return [p for p, text in _walk_strings(obj, "") if any(v in text for v in values)]


def externalize_secrets(
    pod: Mapping[str, Any], *, secret_name: str, secrets: Mapping[str, str]
) -> dict[str, Any]:
    """Replace env vars whose value is a secret by ``secretKeyRef`` to ``secret_name``.

    ``secrets`` maps the key in the Secret to its value (``{"token": api_token}``). Raises
    :class:`SecretInSpecError` if a secret is still anywhere in the result (embedded in a longer
    env value, an argument, an annotation, ...): a pod that would leak is never created.
    """
    out = copy.deepcopy(dict(pod))
    by_value = {v: k for k, v in secrets.items() if v}
    spec = out.get("spec") or {}
    for ctr in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for env in ctr.get("env") or []:
            value = env.get("value")
            if isinstance(value, str) and value in by_value:
                env.pop("value")
                env["valueFrom"] = {
                    "secretKeyRef": {"name": secret_name, "key": by_value[value], "optional": False}
                }
    leaks = find_secrets(out, by_value)
    if leaks:
        raise SecretInSpecError(f"a secret would be stored in the pod spec at {', '.join(leaks)}")
    return out


def owner_reference(pod_name: str, pod_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": pod_name,
        "uid": pod_uid,
        "blockOwnerDeletion": True,
        "controller": False,
    }


def token_secret_manifest(
    name: str,
    namespace: str,
    data: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """The per-server Secret holding the hub token; owned by the pod once it has a uid."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(*owner)]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": meta,
        "stringData": dict(data),
    }


def finalizer_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """JSON patch that drops Kueue's finalizer from a pod being deleted, or ``None``.

    Only for a pod that is already being deleted (``deletionTimestamp``): Kueue removes its
    finalizer itself when healthy; this is the fallback so a stopped server never stays
    Terminating and the next spawn of the same name gets no 409.
    """
    meta = pod.get("metadata") or {}
    finalizers = list(meta.get("finalizers") or [])
    if not meta.get("deletionTimestamp") or POD_FINALIZER not in finalizers:
        return None
    index = finalizers.index(POD_FINALIZER)
    return [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": POD_FINALIZER},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]


def memory_bytes(value: str) -> int:
    """``"8Gi"`` → bytes (for display)."""
    return int(parse_quantity(value))


def to_api_json(obj: Any) -> Any:
    """A kubernetes client model (``V1Pod``, ...) → its API JSON (camelCase), recursively.

    Duck-typed on the generated models' ``openapi_types``/``attribute_map``, so this module needs
    no client library; plain dicts, lists and scalars pass through.
    """
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if isinstance(obj, list | tuple):
        return [to_api_json(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: to_api_json(v) for k, v in obj.items()}
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    types = getattr(obj, "openapi_types", None)
    names = getattr(obj, "attribute_map", None)
    if isinstance(types, Mapping) and isinstance(names, Mapping):
        out: dict[str, Any] = {}
        for attr in types:
            value = getattr(obj, attr, None)
            if value is not None:
                out[names[attr]] = to_api_json(value)
        return out
    raise TypeError(f"cannot serialize {type(obj).__name__}")

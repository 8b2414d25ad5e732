"""A small kubelet for one node: runs each pod's containers as real local processes.

``devcluster up`` starts it (``python -m devcluster.nodeagent``) with a kubelet's identity
(``system:node:<node>``, so the Node authorizer and NodeRestriction apply). It

- keeps its Node Ready: renews the node Lease every 10 s and refreshes the Ready condition;
- list-watches the pods bound to its node (``spec.nodeName``);
- for each pod: gives it its own loopback address 127.<p>.x.y as pod IP (so that many servers
  can listen on the same port), a directory whose ``home`` is the working directory and ``HOME``
  (its ``logs`` and ``tmp``, the ``TMPDIR``, sit beside it, not in it), runs the init containers
  in turn and then each container's ``command`` + ``args`` (``args`` alone when there is no
  ``command``: there is no image to take an entrypoint from) with the container's environment;
- hands each container the node's simulated GPUs that Kubernetes gave it (``--gpus``, from
  ``simulatedGpus`` in nodes.yaml), as the device plugins would (devcluster/gpualloc.py): a
  whole GPU, a MIG device, a replica of a time-sliced GPU or a HAMi vGPU, in
  ``NVIDIA_VISIBLE_DEVICES`` and HAMi's ``CUDA_DEVICE_MEMORY_LIMIT_<i>`` /
  ``CUDA_DEVICE_SM_LIMIT``; every container gets the node's one GPU state directory
  (``$JUPYTER_GPUAAS_SIM_DIR``, the agent's ``gpus/``) and its own name in it
  (``$JUPYTER_GPUAAS_SIM_CONTAINER``), so that each pod's fake NVML shows its own devices and a
  neighbour's memory on a shared GPU (jupyter_gpuaas/gpu/simulate.py). HAMi's vGPUs are those
  HAMi's scheduler chose (the pod's ``hami.io/vgpu-devices-to-allocate``: cards, memory caps,
  cores), as HAMi's device plugin hands them over, which then sets ``hami.io/bind-phase:
  success``; the agent places nothing itself. A finished pod
  (Succeeded, Failed) holds no devices, though it stays until deleted, as with a kubelet. A pod
  whose devices are not there fails as a kubelet fails it (UnexpectedAdmissionError, "Pod was
  rejected: Allocate failed due to ..."): the node's doing, not the pod's;
- honours NVIDIA's MIG manager label ``nvidia.com/mig.config`` on its node: once no pod holds a
  GPU of the node, re-cuts its MIG-mode GPUs to the named config and re-advertises the node's
  ``nvidia.com/mig-*`` resources (``nvidia.com/mig.config.state=success``); while one does, keeps
  the old geometry (state ``failed``) and posts a Warning Event naming the pods;
- reports what a kubelet reports: phase, podIP(s), hostIP, startTime, the PodReadyToStartContainers,
  Initialized, ContainersReady and Ready conditions, and container statuses (running, terminated
  with exit code, restart count); honours ``restartPolicy`` and httpGet/tcpSocket readiness probes;
- on deletion sends SIGTERM to each container's process group, SIGKILL after the pod's grace
  period, reports the terminal phase, then deletes the pod with grace period 0 (as a kubelet does),
  so that finalizers (Kueue's) are released and a same-named pod can be created at once.

Volumes: a PersistentVolumeClaim mounted at a container's home (its ``HOME`` in the spec, else
its ``workingDir``, else ``/home/jovyan`` as in Jupyter's images; with ``subPath`` if given) makes
that volume's directory (devcluster/provisioner.py's ``hostPath``) the container's working
directory and ``HOME``, so that what a user saves outlives the pod, as a home on a persistent
volume does; a claim not readable or not bound yet keeps the pod Pending and is read again, as
a kubelet's volume manager does (FailedMount Warnings; see MOUNT_RETRY). Without
one, the pod's own ``home`` is the working directory and goes with the pod.

What it does not do: pull or unpack images (the command runs from this machine's PATH, the
agent's own virtualenv first), mount other volumes (no mount namespaces: other paths are not
there), isolate anything (no namespaces, cgroups, limits, users:
the processes run as the agent's user and see the whole machine), read ConfigMaps or whole
Secrets (``configMapKeyRef``/``envFrom`` fail the container unless marked optional; a
``secretKeyRef`` is read, and waited for as a kubelet does), exec or
liveness probes, ``kubectl logs``/``exec`` (logs are in the pod directory), or services.

Jupyter: KubeSpawner passes the address to bind in ``JUPYTERHUB_SERVICE_URL`` (host ``0.0.0.0``
by default), which jupyterhub-singleuser binds. The agent replaces an all-interfaces host there
(``0.0.0.0``, ``::``, empty) and in ``--ip=``/``--ServerApp.ip=``/``--NotebookApp.ip=`` arguments
by the pod IP, so each server binds only its own address, where the hub reaches it.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import dcgm, procs
from devcluster.gpualloc import (
    MIG_PREFIX,
    AllocationError,
    ContainerDevices,
    Grant,
    MigConfigError,
    allocate,
    capacity,
    reshape,
)
from jupyter_gpuaas.core import hami
from jupyter_gpuaas.core.labels import HUB_USERNAME_ANNOTATION
from jupyter_gpuaas.core.mig_geometry import MIG_CONFIG_LABEL, MIG_CONFIG_STATE_LABEL
from jupyter_gpuaas.gpu.simulate import ENV_CONTAINER, ENV_DIR, HoldReader, write_node
from jupyter_gpuaas.gpu.spec import SimGpu, parse_devices

log = logging.getLogger("devcluster.nodeagent")

LEASE_SECONDS = 40
LEASE_RENEW = 10.0
STATUS_EVERY = 30.0
RESYNC_EVERY = 60.0
MAX_BACKOFF = 30.0
STRATEGIC = "application/strategic-merge-patch+json"
ALL_INTERFACES = ("0.0.0.0", "::", "[::]", "", "*")
IP_ARG = re.compile(r"^(--(?:ip|ServerApp\.ip|NotebookApp\.ip))=(.*)$")
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")
# From the agent's own environment into every container.
TERMINAL_PHASES = ("Succeeded", "Failed")
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SSL_CERT_FILE", "SSL_CERT_DIR")


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class MountError(Exception):
    """A pod's volume is not there yet (kubelet: FailedMount, retried)."""


# A kubelet's volume manager (Kubernetes v1.36.3 pkg/kubelet/volumemanager): the populator reads a
# pod's claims again and again until they resolve, WaitForAttachAndMount gives up after
# podAttachAndMountTimeout (2 min 3 s), then SyncPod posts a FailedMount Warning "Unable to attach
# or mount volumes: ..." (pkg/kubelet/kubelet.go) and the pod worker tries again: a pod whose
# claim cannot be read yet (the Node authorizer has not seen the binding, the claim is still
# binding) stays Pending until it mounts, is deleted, or passes its activeDeadlineSeconds
# (pkg/kubelet/active_deadline.go). The agent reads again after MOUNT_RETRY seconds, growing to
# MOUNT_RETRY_MAX (the kubelet: every 0.1-0.3 s), and posts the Warning as the kubelet does.
MOUNT_RETRY = 0.3
MOUNT_RETRY_MAX = 2.0
MOUNT_TIMEOUT = 123.0
# A container waiting for its config (a Secret) is tried again after this, doubling to MAX_BACKOFF.
CONFIG_RETRY = 1.0
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def mount_failure_message(volumes: Iterable[str], error: str) -> str:
    """The kubelet's FailedMount Warning after WaitForAttachAndMount gave up (kubelet.go and
    volume_manager.go's "unmounted volumes=..., unattached volumes=..., failed to process
    volumes=...: ..."); the agent has no attach step, so every volume is in all three lists."""
    names = "[" + " ".join(sorted(volumes)) + "]"
    return (
        f"Unable to attach or mount volumes: unmounted volumes={names}, unattached volumes="
        f"{names}, failed to process volumes={names}: {error}"
    )


def active_deadline(pod: Mapping[str, Any]) -> float | None:
    """The pod's ``activeDeadlineSeconds`` (None: no deadline)."""
    value = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


# A kubelet's FallbackToLogsOnError: at most this many of the log's last bytes and lines
# (Kubernetes pkg/kubelet/container/runtime.go, MaxContainerTerminationMessageLogLength and
# MaxContainerTerminationMessageLogLines; read in kuberuntime's readLastStringFromContainerLogs).
TERMINATION_LOG_BYTES = 2048
TERMINATION_LOG_LINES = 80


def termination_message(container: Mapping[str, Any], exit_code: int, log: bytes) -> str | None:
    """The message a kubelet reports for a container that exited: with
    ``terminationMessagePolicy: FallbackToLogsOnError`` and an error exit, the end of its log
    (the termination-message file is not emulated); else none."""
    if exit_code == 0 or container.get("terminationMessagePolicy") != "FallbackToLogsOnError":
        return None
    tail = log[-TERMINATION_LOG_BYTES:].decode("utf-8", "replace")
    lines = tail.splitlines()[-TERMINATION_LOG_LINES:]
    return "\n".join(lines) or None


class ContainerConfigError(Exception):
    """The container cannot be created yet (kubelet: CreateContainerConfigError): a Secret or
    key not there or not readable. The kubelet keeps the container Waiting and tries again at
    each sync, whatever the restart policy; so does the agent."""


class UnsupportedSpecError(ContainerConfigError):
    """The spec asks for what the agent cannot do (envFrom, ConfigMaps, no command): no retry can
    help, so the container fails at once (the dev cluster's own; a kubelet would run it)."""


def _tail_of(path: Path) -> bytes:
    """The last bytes of a container's log (empty if it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - TERMINATION_LOG_BYTES))
            return f.read()
    except OSError:
        return b""


# --- pure helpers (unit-testable) ----------------------------------------------------------


DEFAULT_HOME = "/home/jovyan"  # Jupyter's images' home


def container_home(container: Mapping[str, Any]) -> str:
    """Where the container's home is in its image: ``HOME`` of its env, else its
    ``workingDir``, else Jupyter's images' ``/home/jovyan``."""
    for item in container.get("env") or []:
        if item.get("name") == "HOME" and item.get("value"):
            return str(item["value"])
    return str(container.get("workingDir") or DEFAULT_HOME)


def home_mount(container: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The container's volume mount at its home, if it has one."""
    home = container_home(container).rstrip("/")
    for mount in container.get("volumeMounts") or []:
        if str(mount.get("mountPath", "")).rstrip("/") == home:
            return dict(mount)
    return None


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: known names are replaced, ``$$`` escapes, others stay."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return VAR_REF.sub(repl, text)


def _field_path(pod: Mapping[str, Any], path: str, pod_ip: str, host_ip: str) -> str:
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": host_ip,
        "status.hostIPs": host_ip,
    }
    if path in simple:
        return str(simple[path])
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return str(meta.get(m.group(1), {}).get(m.group(2), ""))
    raise UnsupportedSpecError(f"unsupported fieldRef {path!r}")


def _resource_field(container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    kind, _, name = str(ref.get("resource", "")).partition(".")
    value = container.get("resources", {}).get(kind, {}).get(name)
    if value is None and kind == "requests":
        value = container.get("resources", {}).get("limits", {}).get(name)
    return str(value) if value is not None else "0"


def container_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    *,
    pod_ip: str,
    host_ip: str,
    workdir: Path,
    base: Mapping[str, str],
    secrets: Mapping[tuple[str, str], str] | None = None,
    tmpdir: Path | None = None,
    devices: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment a container process gets (base, then the device plugins' ``devices``,
    then the container's env, in order, as a kubelet puts them: the pod spec wins).

    ``secrets`` maps ``(secret name, key)`` to the decoded value, for ``secretKeyRef`` (read by
    the agent as a kubelet does: the Node authorizer lets it read Secrets its pods reference).
    ``tmpdir`` is the ``TMPDIR`` (default ``<workdir>/tmp``).
    """
    env: dict[str, str] = {k: base[k] for k in INHERITED_ENV if k in base}
    env.update(
        HOME=str(workdir),
        PWD=str(workdir),
        HOSTNAME=str(pod.get("spec", {}).get("hostname") or pod["metadata"]["name"]),
        TMPDIR=str(tmpdir if tmpdir is not None else workdir / "tmp"),
    )
    env.update(devices or {})
    if container.get("envFrom"):
        for src in container["envFrom"]:
            ref = src.get("configMapRef") or src.get("secretRef") or {}
            if not ref.get("optional"):
                raise UnsupportedSpecError("envFrom (ConfigMaps/Secrets) is not supported")
    for item in container.get("env", []) or []:
        name = item["name"]
        if "value" in item:
            env[name] = expand(str(item.get("value") or ""), env)
        elif "valueFrom" in item:
            value = _value_from(name, item["valueFrom"], pod, container, pod_ip, host_ip, secrets)
            if value is not None:
                env[name] = value
        else:
            env[name] = ""
    if env["HOME"] == container_home(container):
        env["HOME"] = str(workdir)  # the image's home is the working directory here
    url = env.get("JUPYTERHUB_SERVICE_URL")
    if url:
        env["JUPYTERHUB_SERVICE_URL"] = bind_url_to(url, pod_ip)
    return env


def _value_from(
    name: str,
    vf: Mapping[str, Any],
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    pod_ip: str,
    host_ip: str,
    secrets: Mapping[tuple[str, str], str] | None,
) -> str | None:
    """An env entry's ``valueFrom`` as the kubelet resolves it (``None``: an optional key that
    is missing, so the variable is not set)."""
    if "fieldRef" in vf:
        return _field_path(pod, vf["fieldRef"]["fieldPath"], pod_ip, host_ip)
    if "resourceFieldRef" in vf:
        return _resource_field(container, vf["resourceFieldRef"])
    if "secretKeyRef" in vf and secrets is not None:
        ref = vf["secretKeyRef"]
        key = (str(ref.get("name") or ""), str(ref.get("key") or ""))
        if key in secrets:
            return secrets[key]
        if not ref.get("optional"):
            raise ContainerConfigError(f"env {name}: secret key {key[0]}/{key[1]} not found")
        return None
    ref = vf.get("secretKeyRef") or vf.get("configMapKeyRef") or {}
    if not ref.get("optional"):
        raise UnsupportedSpecError(
            f"env {name}: only value, fieldRef and resourceFieldRef are supported"
        )
    return None


def bind_url_to(url: str, ip: str) -> str:
    """Replace an all-interfaces host in a bind URL by ``ip`` (keeps a specific host)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if host not in ALL_INTERFACES:
        return url
    netloc = ip + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def container_argv(container: Mapping[str, Any], env: Mapping[str, str], pod_ip: str) -> list[str]:
    command = [expand(str(c), env) for c in container.get("command") or []]
    args = [expand(str(a), env) for a in container.get("args") or []]
    argv = command + args
    if not argv:
        raise UnsupportedSpecError(
            "no command or args: images are not run here, so the entrypoint is unknown"
        )
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        m = IP_ARG.match(a)
        if m and m.group(2).strip("'\"") in ALL_INTERFACES:
            out.append(f"{m.group(1)}={pod_ip}")
        elif (
            a in ("--ip", "--ServerApp.ip", "--NotebookApp.ip")
            and i + 1 < len(argv)
            and (argv[i + 1] in ALL_INTERFACES)
        ):
            out += [a, pod_ip]
            i += 1
        else:
            out.append(a)
        i += 1
    return out


class IPPool:
    """Loopback pod IPs ``<prefix>.x.y`` (x 0..255, y 1..254)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.used: dict[str, str] = {}  # ip -> pod uid

    def _all(self) -> list[str]:
        return [f"{self.prefix}.{x}.{y}" for x in range(256) for y in range(1, 255)]

    def claim(self, uid: str, wanted: str | None = None) -> str:
        if wanted and wanted.startswith(self.prefix + ".") and wanted not in self.used:
            self.used[wanted] = uid
            return wanted
        for ip in self._all():
            if ip not in self.used:
                self.used[ip] = uid
                return ip
        raise RuntimeError("no pod IP left")

    def release(self, ip: str) -> None:
        self.used.pop(ip, None)


def pod_phase(restart_policy: str, exit_codes: list[int | None]) -> str | None:
    """Terminal phase once no container will run again, else None (still Running)."""
    if any(code is None for code in exit_codes):
        return None
    codes = [c for c in exit_codes if c is not None]
    if restart_policy == "Always":
        return None
    if restart_policy == "OnFailure":
        if all(c == 0 for c in codes):
            return "Succeeded"
        return None
    return "Succeeded" if all(c == 0 for c in codes) else "Failed"


def devices_held(runs: Iterable[PodRun], but: PodRun | None = None) -> list[Grant]:
    """The devices the pods hold, except ``but``'s. A finished pod (Succeeded, Failed) holds
    none, as a kubelet frees a terminated pod's devices at once: it stays on the node until it is
    deleted (a Job keeps its pods), and counting it left a slice taken for good."""
    return [
        g
        for run in runs
        if run is not but and run.phase not in TERMINAL_PHASES
        for devices in run.devices.values()
        for g in devices.grants
    ]


# --- MIG geometry: the node label nvidia.com/mig.config -----------------------------------

MIG_REFUSED = "MigConfigRefused"
MIG_APPLIED = "MigConfigApplied"
_GFD_MIG_LABEL = re.compile(r"^nvidia\.com/mig-(\d+g\.\d+gb)\.(.+)$")


def gpu_holders(runs: Iterable[PodRun]) -> list[str]:
    """The pods that hold any of the node's GPUs now ("ns/name", with the hub user's name when
    it is a user's server), in a stable order."""
    out = []
    for run in sorted(runs, key=lambda r: (r.namespace, r.name)):
        if run.phase in TERMINAL_PHASES or not any(d.grants for d in run.devices.values()):
            continue
        user = ((run.pod.get("metadata") or {}).get("annotations") or {}).get(
            HUB_USERNAME_ANNOTATION
        )
        out.append(f"{run.namespace}/{run.name}" + (f" ({user}'s server)" if user else ""))
    return out


def mig_target(config: str | None) -> str:
    return config if config is not None else "the node's own geometry (label removed)"


def mig_refusal(node: str, config: str | None, holders: list[str]) -> str:
    """What the operator reads when a geometry change waits for the node's GPUs to be free."""
    return (
        f"MIG geometry change to {mig_target(config)} refused: pods {', '.join(holders)} hold "
        f"GPUs on node {node}; stop them or wait, then set the label again (or remove "
        f"{MIG_CONFIG_STATE_LABEL}: kubectl label node {node} {MIG_CONFIG_STATE_LABEL}-)"
    )


def mig_label_patch(
    labels: Mapping[str, str], gpus: list[SimGpu], seen: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """GPU feature discovery's per-profile labels for the new geometry: nvidia.com/mig-<profile>
    .count (and .memory, MiB, for a new profile: as its label said when the node had it before,
    ``seen``, since GFD writes NVML's one figure each time; else the simulated size); those of
    profiles now gone removed."""
    seen = seen or {}
    counts = {
        r.removeprefix(MIG_PREFIX): n for r, n in capacity(gpus).items() if r.startswith(MIG_PREFIX)
    }
    memory = {m.profile: m.memory // (1024 * 1024) for g in gpus for m in g.mig}
    patch: dict[str, str | None] = {}
    for key in labels:
        match = _GFD_MIG_LABEL.match(key)
        if match is not None and match.group(1) not in counts:
            patch[key] = None
    for profile, n in counts.items():
        patch[f"{MIG_PREFIX}{profile}.count"] = str(n)
        key = f"{MIG_PREFIX}{profile}.memory"
        patch.setdefault(key, labels.get(key) or seen.get(key) or str(memory[profile]))
    return patch


# --- list-watch (shared with devcluster.kwokfinisher) ------------------------------------------


async def list_watch(
    core: Any,
    field_selector: str,
    on_list: Callable[[list[dict[str, Any]]], None],
    on_event: Callable[[str, dict[str, Any]], None],
) -> None:
    """List the pods matching ``field_selector`` (``on_list``), then watch them (``on_event``
    with ADDED/MODIFIED/DELETED and the raw pod); list again every ``RESYNC_EVERY`` seconds
    and after any error. Runs until cancelled."""
    from kubernetes_asyncio import watch

    rv: str | None = None
    last_sync = 0.0
    loop = asyncio.get_running_loop()
    while True:
        try:
            if rv is None or loop.time() - last_sync > RESYNC_EVERY:
                resp = await core.list_pod_for_all_namespaces(
                    field_selector=field_selector, _preload_content=False
                )
                body = await resp.read()
                if resp.status >= 400:  # the client does not check raw responses
                    raise ApiException(status=resp.status, reason=body.decode(errors="replace"))
                data = json.loads(body)
                rv = data["metadata"]["resourceVersion"]
                on_list(data["items"])
                last_sync = loop.time()
            w = watch.Watch(return_type="object")
            async for ev in w.stream(
                core.list_pod_for_all_namespaces,
                field_selector=field_selector,
                resource_version=rv,
                timeout_seconds=int(RESYNC_EVERY),
                allow_watch_bookmarks=True,
            ):
                obj = ev["raw_object"]
                rv = obj.get("metadata", {}).get("resourceVersion", rv)
                on_event(ev["type"], obj)
        except ApiException as e:
            if e.status == 410:
                rv = None
                continue
            log.warning("pod watch failed: %s", e)
            rv = None
            await asyncio.sleep(1)
        except (OSError, asyncio.TimeoutError, ValueError) as e:
            log.warning("pod watch interrupted: %s", e)
            rv = None
            await asyncio.sleep(1)


def uid_bound(uid: str, body: dict[str, Any]) -> dict[str, Any]:
    """A patch body that fails (uid is immutable) unless the pod under the name is ``uid``:
    the kubelet's way (k8s pkg/util/pod PatchPodStatus), so that a late write of a finished pod
    never lands on a new pod of the same name."""
    return {"metadata": {"uid": uid}, **body}


def delete_body(uid: str) -> dict[str, Any]:
    """Delete at once, and only the pod ``uid`` (409 if the name now holds another pod)."""
    return {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}


# --- per-pod runtime ---------------------------------------------------------------------


@dataclass
class Container:
    spec: dict[str, Any]
    init: bool = False
    proc: asyncio.subprocess.Process | None = None
    record: procs.ProcRecord | None = None
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = None
    ready: bool = False
    waiting_reason: str | None = "ContainerCreating"
    waiting_message: str | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def status(self) -> dict[str, Any]:
        st: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "restartCount": self.restart_count,
            "ready": self.ready,
        }
        if self.proc is not None and self.exit_code is None:
            st["state"] = {"running": {"startedAt": self.started_at}}
            st["started"] = True
            st["containerID"] = f"devcluster://{self.proc.pid}"
        elif self.exit_code is not None:
            st["state"] = {
                "terminated": {
                    "exitCode": self.exit_code,
                    "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
                    "startedAt": self.started_at,
                    "finishedAt": self.finished_at,
                    **({"message": self.message} if self.message else {}),
                }
            }
            st["started"] = False
        else:
            waiting: dict[str, str] = {"reason": self.waiting_reason or "ContainerCreating"}
            if self.waiting_message:
                waiting["message"] = self.waiting_message
            st["state"] = {"waiting": waiting}
            st["started"] = False
        if self.last_terminated:
            st["lastState"] = {"terminated": self.last_terminated}
        return st


@dataclass
class PodRun:
    uid: str
    namespace: str
    name: str
    pod: dict[str, Any]
    ip: str
    # The pod's directory: home/ (working directory, HOME), logs/, tmp/ (TMPDIR), vgpu/.
    poddir: Path
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    phase: str = "Pending"
    start_time: str = field(default_factory=now)
    # The same moment on the monotonic clock: activeDeadlineSeconds counts from it.
    started: float = field(default_factory=time.monotonic)
    initialized: bool = False
    stop_requested: asyncio.Event = field(default_factory=asyncio.Event)
    grace: float = 30.0
    task: asyncio.Task[None] | None = None
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    finalized: bool = False
    # Set when the pod failed before its containers ran (e.g. UnexpectedAdmissionError).
    reason: str | None = None
    message: str | None = None
    devices: dict[str, ContainerDevices] = field(default_factory=dict)
    # Containers whose home is a persistent volume: name -> the volume's directory.
    homes: dict[str, Path] = field(default_factory=dict)

    @property
    def workdir(self) -> Path:
        """The pod's own home, for containers without a volume there (goes with the pod)."""
        return self.poddir / "home"

    def home_of(self, c: Container) -> Path:
        return self.homes.get(c.name, self.workdir)

    def _cond(self, ctype: str, status: bool, reason: str | None = None) -> dict[str, Any]:
        value = "True" if status else "False"
        prev = self.transitions.get(ctype)
        if prev is None or prev[0] != value:
            self.transitions[ctype] = (value, now())
        cond: dict[str, Any] = {
            "type": ctype,
            "status": value,
            "lastProbeTime": None,
            "lastTransitionTime": self.transitions[ctype][1],
        }
        if reason and not status:
            cond["reason"] = reason
        return cond

    def status(self) -> dict[str, Any]:
        terminal = self.phase in TERMINAL_PHASES
        all_ready = bool(self.containers) and all(c.ready for c in self.containers) and not terminal
        not_ready_reason = "PodCompleted" if terminal else "ContainersNotReady"
        conditions = [
            self._cond("PodReadyToStartContainers", not terminal),
            self._cond("Initialized", self.initialized, "ContainersNotInitialized"),
            self._cond("ContainersReady", all_ready, not_ready_reason),
            self._cond("Ready", all_ready, not_ready_reason),
        ]
        st: dict[str, Any] = {
            "phase": self.phase,
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": self.start_time,
            "conditions": conditions,
            "containerStatuses": [c.status() for c in self.containers],
        }
        if self.init_containers:
            st["initContainerStatuses"] = [c.status() for c in self.init_containers]
        if self.reason:
            st["reason"], st["message"] = self.reason, self.message or ""
        return st


class NodeAgent:
    def __init__(
        self,
        api: client.ApiClient,
        node: str,
        state_dir: Path,
        ip_prefix: str,
        gpus: str | None = None,
    ) -> None:
        self.api = api
        # Typed loosely: bodies are plain dicts (strategic-merge patches), which the client sends
        # as they are; its annotations only know its model classes.
        self.core: Any = client.CoreV1Api(api)
        self.coord: Any = client.CoordinationV1Api(api)
        self.node = node
        self.state_dir = state_dir
        self.pods_dir = state_dir / "pods"
        self.ips = IPPool(ip_prefix)
        self.runs: dict[str, PodRun] = {}
        self.done: set[str] = set()  # uids finished and finalized (until the pod is gone)
        self.base_env = dict(os.environ)
        self._stopping = False
        self._background: set[asyncio.Task[None]] = set()
        # The node's simulated GPUs and their one state directory (None: a node without GPUs;
        # then servers simulate GPUs of their own, as configured).
        self.gpus: list[SimGpu] = parse_devices(gpus) if gpus else []
        self.gpu_dir: Path | None = None
        self.hold_reader: HoldReader | None = None
        if gpus:
            self.gpu_dir = state_dir / "gpus"
            write_node(self.gpu_dir, gpus)
            self.hold_reader = HoldReader(self.gpu_dir)
        # MIG: the GPUs as nodes.yaml gives them (a node without the label keeps them), the
        # config now applied (None: that boot geometry) and the last one refused.
        self.boot_gpus = gpus or ""
        self.mig_applied: str | None = None
        self.mig_refused: tuple[str | None, ...] = ()  # (label,) when refused
        self.pods_listed = asyncio.Event()
        # GFD's nvidia.com/mig-<profile>.memory labels as first seen: a profile cut again gets
        # the same figure back (NVML's), not the simulated size.
        self.mig_memory_labels: dict[str, str] = {}

    # ---- the node's GPUs as dcgm-exporter serves them (devcluster/dcgm.py) ----

    def dcgm_metrics(self) -> str:
        holders: dict[str, list[dcgm.Holder]] = {}
        for run in self.runs.values():
            if run.phase in TERMINAL_PHASES:
                continue
            for container, devices in run.devices.items():
                for grant in devices.grants:
                    holder = dcgm.Holder(run.namespace, run.name, container)
                    holders.setdefault(grant.uuid, []).append(holder)
        holds = self.hold_reader.read() if self.hold_reader else []
        return dcgm.render(self.node, self.gpus, holds, holders)

    async def _answer_metrics(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            path = request.split(b" ", 2)[1] if request.count(b" ") >= 2 else b""
            if path.split(b"?")[0] == b"/metrics":
                status, ctype, body = "200 OK", dcgm.CONTENT_TYPE, self.dcgm_metrics().encode()
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"only /metrics here\n"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (
            OSError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            asyncio.TimeoutError,
        ):
            pass  # a client that went away or sent no request: nothing to answer
        finally:
            writer.close()

    async def serve_metrics(self, port: int) -> asyncio.Server:
        """``GET http://127.0.0.1:<port>/metrics``: the node's GPUs in dcgm-exporter's format."""
        return await asyncio.start_server(self._answer_metrics, "127.0.0.1", port)

    # ---- process bookkeeping (read by `devcluster down` after a crash) ----

    def _save_processes(self) -> None:
        records = [
            c.record.to_json()
            for run in self.runs.values()
            for c in run.containers + run.init_containers
            if c.record is not None and c.exit_code is None
        ]
        procs.write_json(self.state_dir / "processes.json", {"processes": records})

    # ---- node heartbeat ----

    async def heartbeat(self) -> None:
        last_status = 0.0
        loop = asyncio.get_running_loop()
        while True:
            try:
                await self._renew_lease()
                if loop.time() - last_status > STATUS_EVERY:
                    await self._node_status()
                    last_status = loop.time()
            except (ApiException, OSError, asyncio.TimeoutError) as e:
                log.warning("heartbeat failed: %s", e)
            await asyncio.sleep(LEASE_RENEW)

    async def _renew_lease(self) -> None:
        ts = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": self.node,
                "leaseDurationSeconds": LEASE_SECONDS,
                "renewTime": ts,
            },
        }
        try:
            await self.coord.patch_namespaced_lease(
                self.node,
                "kube-node-lease",
                {"spec": body["spec"]},
                _content_type="application/merge-patch+json",
            )
        except ApiException as e:
            if e.status != 404:
                raise
            await self.coord.create_namespaced_lease("kube-node-lease", body)

    async def _node_status(self) -> None:
        ts = now()
        conds = [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID"),
            ("Ready", "True", "KubeletReady"),
        ]
        body = {
            "status": {
                "conditions": [
                    {
                        "type": t,
                        "status": s,
                        "reason": r,
                        "message": "devcluster node agent",
                        "lastHeartbeatTime": ts,
                        "lastTransitionTime": self._node_started,
                    }
                    for t, s, r in conds
                ],
                "addresses": [
                    {"type": "InternalIP", "address": "127.0.0.1"},
                    {"type": "Hostname", "address": self.node},
                ],
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": "",
                    "containerRuntimeVersion": "devcluster-nodeagent://1",
                    "kernelVersion": os.uname().release,
                    "kubeProxyVersion": "",
                    "kubeletVersion": "devcluster-nodeagent",
                    "machineID": "",
                    "operatingSystem": "linux",
                    "osImage": "devcluster node agent (processes on this machine)",
                    "systemUUID": "",
                },
            }
        }
        await self.core.patch_node_status(self.node, body, _content_type=STRATEGIC)

    _node_started = now()

    # ---- pod watch ----

    async def watch_pods(self) -> None:
        await list_watch(self.core, f"spec.nodeName={self.node}", self._listed, self._event_seen)

    def _listed(self, pods: list[dict[str, Any]]) -> None:
        live = {p["metadata"]["uid"] for p in pods}
        for uid in list(self.runs):
            if uid not in live:
                self._gone(uid)
        self.done &= live
        for pod in pods:
            self.reconcile(pod)
        self.pods_listed.set()

    def _event_seen(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            self._gone(obj["metadata"]["uid"])
            self.done.discard(obj["metadata"]["uid"])
        elif kind in ("ADDED", "MODIFIED"):
            self.reconcile(obj)

    def reconcile(self, pod: dict[str, Any]) -> None:
        if self._stopping:
            return
        meta = pod["metadata"]
        uid = meta["uid"]
        run = self.runs.get(uid)
        deleting = meta.get("deletionTimestamp") is not None
        if run is not None:
            run.pod = pod
            if deleting and not run.stop_requested.is_set():
                run.grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                run.stop_requested.set()
            return
        if uid in self.done:
            return
        phase = pod.get("status", {}).get("phase")
        if phase in TERMINAL_PHASES or deleting:
            # Not ours to run (finished earlier, or deleted before it started): make it terminal
            # if need be and let it go.
            self.done.add(uid)
            task = asyncio.create_task(self._finalize_unstarted(pod))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
            return
        ip = self.ips.claim(uid, pod.get("status", {}).get("podIP"))
        poddir = self.pods_dir / f"{meta['namespace']}_{meta['name']}_{uid[:8]}"
        run = PodRun(
            uid=uid,
            namespace=meta["namespace"],
            name=meta["name"],
            pod=pod,
            ip=ip,
            poddir=poddir,
            containers=[Container(c) for c in pod["spec"].get("containers", [])],
            init_containers=[
                Container(c, init=True) for c in pod["spec"].get("initContainers") or []
            ],
        )
        self.runs[uid] = run
        run.task = asyncio.create_task(self._run_pod(run))

    def _gone(self, uid: str) -> None:
        """The pod object is gone (force-deleted or finalized): stop anything left at once."""
        run = self.runs.get(uid)
        if run is None:
            return
        run.finalized = True
        run.grace = min(run.grace, 2.0)
        run.stop_requested.set()

    async def _finalize_unstarted(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        try:
            if pod.get("status", {}).get("phase") not in TERMINAL_PHASES:
                await self.core.patch_namespaced_pod_status(
                    meta["name"],
                    meta["namespace"],
                    uid_bound(
                        meta["uid"],
                        {
                            "status": {
                                "phase": "Failed",
                                "reason": "Terminated",
                                "message": "deleted before its containers started",
                            }
                        },
                    ),
                    _content_type=STRATEGIC,
                )
            if meta.get("deletionTimestamp"):
                await self._delete_now(meta["namespace"], meta["name"], meta["uid"])
        except ApiException as e:
            if e.status not in (404, 409):
                log.warning("finalizing %s/%s: %s", meta["namespace"], meta["name"], e)

    async def _delete_now(self, namespace: str, name: str, uid: str) -> None:
        await self.core.delete_namespaced_pod(name, namespace, body=delete_body(uid))

    async def _report(self, run: PodRun) -> None:
        if run.finalized:
            return
        body = uid_bound(run.uid, {"status": run.status()})
        if any(g.kind == "vgpu" for d in run.devices.values() for g in d.grants):
            # HAMi's device plugin marks the allocation done (PodAllocationTrySuccess); the
            # status endpoint keeps metadata changes.
            body["metadata"]["annotations"] = {hami.BIND_PHASE: "success"}
        try:
            await self.core.patch_namespaced_pod_status(
                run.name, run.namespace, body, _content_type=STRATEGIC
            )
        except ApiException as e:
            if e.status == 404 or (e.status == 422 and "uid" in str(e.body)):
                # gone, or the name already holds a new pod: nothing of this run to report
                run.finalized = True
            else:
                log.warning("status of %s/%s: %s", run.namespace, run.name, e)

    async def _event(self, run: PodRun, reason: str, message: str, etype: str = "Normal") -> None:
        ts = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "metadata": {"generateName": f"{run.name}.", "namespace": run.namespace},
            "involvedObject": {
                "kind": "Pod",
                "namespace": run.namespace,
                "name": run.name,
                "uid": run.uid,
                "apiVersion": "v1",
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "source": {"component": "kubelet", "host": self.node},
            "firstTimestamp": now(),
            "lastTimestamp": now(),
            "eventTime": ts,
            "reportingComponent": "kubelet",
            "reportingInstance": self.node,
            "action": reason,
            "count": 1,
        }
        with contextlib.suppress(ApiException, OSError):
            await self.core.create_namespaced_event(run.namespace, body)

    # ---- MIG geometry: honour nvidia.com/mig.config as NVIDIA's MIG manager does ----
    #
    # The MIG manager applies the config the label names and reports in the state label
    # (pending, success, failed); it does not evict pods, and NVIDIA requires the GPUs idle, so a
    # change while a pod holds a GPU fails. Here the change is refused at once (state failed and
    # a Warning Event on the node naming the pods), and tried again when the label changes or the
    # state label is removed. Applied: the device plugins' resources re-advertised in the node's
    # capacity and allocatable, GFD's per-profile labels, state success.

    @property
    def has_mig(self) -> bool:
        return any(o.startswith("mig=") for o in self.boot_gpus.replace(",", ":").split(":"))

    async def watch_node(self) -> None:
        """Watch this node's MIG config label (after the first pod list, so that the pods that
        hold GPUs are known)."""
        from kubernetes_asyncio import watch

        await self.pods_listed.wait()
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    resp = await self.core.read_node(self.node, _preload_content=False)
                    node = json.loads(await resp.read())
                    rv = node["metadata"]["resourceVersion"]
                    await self.mig_seen(node)
                w = watch.Watch(return_type="object")
                async for ev in w.stream(
                    self.core.list_node,
                    field_selector=f"metadata.name={self.node}",
                    resource_version=rv,
                    timeout_seconds=int(RESYNC_EVERY),
                ):
                    obj = ev["raw_object"]
                    rv = obj.get("metadata", {}).get("resourceVersion", rv)
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        await self.mig_seen(obj)
            except ApiException as e:
                if e.status != 410:
                    log.warning("node watch failed: %s", e)
                    await asyncio.sleep(1)
                rv = None
            except (OSError, asyncio.TimeoutError, ValueError, KeyError) as e:
                log.warning("node watch interrupted: %s", e)
                rv = None
                await asyncio.sleep(1)

    async def mig_seen(self, node: dict[str, Any]) -> None:
        labels = node.get("metadata", {}).get("labels") or {}
        for key, value in labels.items():  # a profile's memory as first labelled (nodes.yaml)
            if key.endswith(".memory") and _GFD_MIG_LABEL.match(key):
                self.mig_memory_labels.setdefault(key, value)
        wanted = labels.get(MIG_CONFIG_LABEL)
        state = labels.get(MIG_CONFIG_STATE_LABEL)
        if wanted == self.mig_applied:
            self.mig_refused = ()
            if wanted is not None and state != "success":
                await self._patch_labels({MIG_CONFIG_STATE_LABEL: "success"})
            return
        if (wanted,) == self.mig_refused and state is not None:
            return  # refused: tried again when the label changes or its state is removed
        await self._apply_mig(wanted, labels)

    async def _apply_mig(self, wanted: str | None, labels: Mapping[str, str]) -> None:
        try:
            spec = reshape(self.boot_gpus, wanted)
            holders = gpu_holders(self.runs.values())
        except MigConfigError as e:
            await self._refuse_mig(wanted, f"MIG geometry change refused: {e}")
            return
        if holders:
            await self._refuse_mig(wanted, mig_refusal(self.node, wanted, holders))
            return
        # No await from the check to here: no pod is given devices of the old geometry after it.
        old = capacity(self.gpus)
        self.gpus = parse_devices(spec)
        if self.gpu_dir is not None:
            write_node(self.gpu_dir, spec)
        self.mig_applied, self.mig_refused = wanted, ()
        new = capacity(self.gpus)
        resources: dict[str, str | None] = {r: None for r in old if r not in new}
        resources.update({r: str(n) for r, n in new.items()})
        try:
            await self.core.patch_node_status(
                self.node,
                {"status": {"capacity": resources, "allocatable": resources}},
                _content_type=STRATEGIC,
            )
            # No label (back to the node's own geometry): no state to report either.
            state = "success" if wanted is not None else None
            await self._patch_labels(
                {
                    **mig_label_patch(labels, self.gpus, self.mig_memory_labels),
                    MIG_CONFIG_STATE_LABEL: state,
                }
            )
        except ApiException as e:
            log.warning("re-advertising the node's MIG resources: %s", e)
        migs = {r: n for r, n in new.items() if r.startswith(MIG_PREFIX)}
        message = f"MIG geometry {mig_target(wanted)} applied: the node advertises {migs}"
        log.info("%s", message)
        await self._node_event(MIG_APPLIED, message)

    async def _refuse_mig(self, wanted: str | None, message: str) -> None:
        self.mig_refused = (wanted,)
        log.warning("%s", message)
        with contextlib.suppress(ApiException):
            await self._patch_labels({MIG_CONFIG_STATE_LABEL: "failed"})
        await self._node_event(MIG_REFUSED, message, "Warning")

    async def _patch_labels(self, labels: Mapping[str, str | None]) -> None:
        await self.core.patch_node(
            self.node,
            {"metadata": {"labels": dict(labels)}},
            _content_type="application/merge-patch+json",
        )

    async def _node_event(self, reason: str, message: str, etype: str = "Normal") -> None:
        body = {
            "metadata": {"generateName": f"{self.node}.", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": self.node, "apiVersion": "v1"},
            "reason": reason,
            "message": message,
            "type": etype,
            "source": {"component": "nvidia-mig-manager", "host": self.node},
            "firstTimestamp": now(),
            "lastTimestamp": now(),
            "count": 1,
        }
        with contextlib.suppress(ApiException, OSError):
            await self.core.create_namespaced_event("default", body)

    # ---- running a pod ----

    def _device_env(self, run: PodRun, c: Container) -> dict[str, str]:
        """What the device plugins and the node's GPU state give the container."""
        if self.gpu_dir is None:
            return {}
        devices = run.devices.get(c.name) or ContainerDevices(c.name)
        cache = run.poddir / "vgpu" / f"{c.name}.cache"
        return {
            ENV_DIR: str(self.gpu_dir),
            ENV_CONTAINER: f"{run.uid}/{c.name}",
            **devices.env(str(cache)),
        }

    def _allocate(self, run: PodRun) -> None:
        """Pick the pod's devices (raises AllocationError); other running pods keep theirs."""
        run.devices = allocate(self.gpus, devices_held(self.runs.values(), but=run), run.pod)
        (run.poddir / "vgpu").mkdir(exist_ok=True)

    async def _spawn(self, run: PodRun, c: Container) -> bool:
        """Create and start container ``c``. True when it runs; False when it could not start
        (terminated, exit code 128: StartError, or a spec the agent cannot run) or the pod was
        deleted while its config waited for a Secret (see _configure)."""
        configured = await self._configure(run, c)
        if configured is None:
            return False
        env, argv = configured
        logfile = run.poddir / "logs" / f"{c.name}.log"
        logfile.parent.mkdir(parents=True, exist_ok=True)
        try:
            with logfile.open("ab") as out:
                c.proc = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=run.home_of(c),
                    env=env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=out,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as e:
            c.proc = None
            c.exit_code, c.reason, c.message = 128, "StartError", f"{argv[0]}: {e.strerror}"
            c.started_at = c.finished_at = now()
            await self._event(run, "Failed", f"container {c.name}: {c.message}", "Warning")
            return False
        c.started_at, c.exit_code, c.finished_at, c.reason, c.message = (
            now(),
            None,
            None,
            None,
            None,
        )
        ticks = procs.start_ticks(c.proc.pid) or -1
        c.record = procs.ProcRecord(
            f"{run.namespace}/{run.name}/{c.name}", c.proc.pid, ticks, argv, str(logfile)
        )
        self._save_processes()
        await self._event(run, "Started", f"Started container {c.name} (pid {c.proc.pid})")
        return True

    async def _configure(
        self, run: PodRun, c: Container
    ) -> tuple[dict[str, str], list[str]] | None:
        """The container's environment and command line. A Secret or key not there or not
        readable yet keeps it Waiting (CreateContainerConfigError, with the kubelet's Warning
        "Error: ...") and is tried again with back-off until it is, whatever the restart policy,
        as the kubelet's pod worker does (pkg/kubelet/kuberuntime/kuberuntime_container.go
        startContainer; pod_workers.go back-off); None if the pod is deleted meanwhile. A spec the
        agent cannot run fails the container at once (None)."""
        backoff = CONFIG_RETRY
        while True:
            c.waiting_reason = c.waiting_message = None
            try:
                env = container_env(
                    run.pod,
                    c.spec,
                    pod_ip=run.ip,
                    host_ip="127.0.0.1",
                    workdir=run.home_of(c),
                    base=self.base_env,
                    secrets=await self._secret_values(run.namespace, c.spec),
                    tmpdir=run.poddir / "tmp",
                    devices=self._device_env(run, c),
                )
                return env, container_argv(c.spec, env, run.ip)
            except UnsupportedSpecError as e:
                c.exit_code, c.reason, c.message = 128, "CreateContainerConfigError", str(e)
                c.started_at = c.finished_at = now()
                await self._event(run, "Failed", f"container {c.name}: {e}", "Warning")
                return None
            except ContainerConfigError as e:
                # Waiting, not terminated: an earlier run's exit is its lastState.
                c.proc, c.exit_code, c.ready = None, None, False
                c.waiting_reason, c.waiting_message = "CreateContainerConfigError", str(e)
                await self._report(run)
                await self._event(run, "Failed", f"Error: {e}", "Warning")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run.stop_requested.wait(), backoff)
            if run.stop_requested.is_set():
                return None
            backoff = min(backoff * 2, MAX_BACKOFF)

    async def _secret_values(
        self, namespace: str, spec: Mapping[str, Any]
    ) -> dict[tuple[str, str], str]:
        """Values of the Secret keys a container's env references (missing ones left out)."""
        out: dict[tuple[str, str], str] = {}
        names = {
            str(item["valueFrom"]["secretKeyRef"].get("name") or "")
            for item in spec.get("env") or []
            if "secretKeyRef" in (item.get("valueFrom") or {})
        }
        for secret_name in sorted(n for n in names if n):
            try:
                secret = await self.core.read_namespaced_secret(secret_name, namespace)
            except ApiException as e:
                if e.status == 404:
                    continue
                raise ContainerConfigError(f"secret {secret_name}: {e.reason}") from e
            for key, value in (secret.data or {}).items():
                out[(secret_name, key)] = base64.b64decode(value).decode("utf-8", "replace")
        return out

    async def _wait_exit(self, c: Container) -> None:
        assert c.proc is not None
        code = await c.proc.wait()
        c.exit_code = code if code >= 0 else 128 - code  # killed by signal N -> 128+N
        c.finished_at = now()
        if c.record is not None and c.spec.get("terminationMessagePolicy"):
            c.message = termination_message(c.spec, c.exit_code, _tail_of(Path(c.record.log)))
        c.ready = False
        self._save_processes()

    def _kill(self, c: Container, sig: int) -> None:
        if c.proc is None or c.exit_code is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, sig)

    async def _stop_containers(self, run: PodRun) -> None:
        live = [c for c in run.containers + run.init_containers if c.proc and c.exit_code is None]
        if not live:
            return
        for c in live:
            self._kill(c, signal.SIGTERM)
        waits = [asyncio.create_task(self._wait_exit(c)) for c in live]
        _, pending = await asyncio.wait(waits, timeout=max(run.grace, 0.1))
        if pending:
            for c in live:
                self._kill(c, signal.SIGKILL)
            await asyncio.wait(pending, timeout=5)
        for c in live:
            # processes the container left in its group die with it
            if c.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(c.proc.pid, signal.SIGKILL)

    async def _probe(self, run: PodRun, c: Container) -> bool:
        probe = c.spec.get("readinessProbe")
        if not probe:
            return True
        ports = {p.get("name"): p.get("containerPort") for p in c.spec.get("ports") or []}

        def port_of(value: Any) -> int:
            return int(ports.get(value, value) if isinstance(value, str) else value)

        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "httpGet" in probe:
                hg = probe["httpGet"]
                host = hg.get("host") or run.ip
                path = hg.get("path", "/")
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port_of(hg["port"])), timeout
                )
                writer.write(f"GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
                await writer.drain()
                line = await asyncio.wait_for(reader.readline(), timeout)
                writer.close()
                code = int(line.split()[1]) if len(line.split()) > 1 else 0
                return 200 <= code < 400
            if "tcpSocket" in probe:
                ts = probe["tcpSocket"]
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(ts.get("host") or run.ip, port_of(ts["port"])), timeout
                )
                writer.close()
                return True
        except (OSError, asyncio.TimeoutError, ValueError, IndexError):
            return False
        return True  # exec probes are not run: count as ready

    async def _readiness_loop(self, run: PodRun) -> None:
        failures: dict[str, int] = {}
        while True:
            changed = False
            for c in run.containers:
                if c.proc is None or c.exit_code is not None:
                    continue
                probe = c.spec.get("readinessProbe") or {}
                ok = await self._probe(run, c)
                if ok:
                    failures[c.name] = 0
                    if not c.ready:
                        c.ready, changed = True, True
                else:
                    failures[c.name] = failures.get(c.name, 0) + 1
                    if c.ready and failures[c.name] >= int(probe.get("failureThreshold", 3)):
                        c.ready, changed = False, True
            if changed:
                await self._report(run)
            periods = [
                float((c.spec.get("readinessProbe") or {}).get("periodSeconds", 10))
                for c in run.containers
                if c.spec.get("readinessProbe")
            ]
            await asyncio.sleep(min(periods) if periods else 3600)

    async def _run_pod(self, run: PodRun) -> None:
        try:
            await self._run_pod_inner(run)
        except asyncio.CancelledError:
            raise
        except Exception:  # keep the agent alive: one bad pod must not stop the node
            log.exception("pod %s/%s", run.namespace, run.name)

    async def _run_pod_inner(self, run: PodRun) -> None:
        """Admit the pod (its devices), run its init containers, then its containers until they
        end or the pod is deleted."""
        restart_policy = run.pod["spec"].get("restartPolicy", "Always")
        run.workdir.mkdir(parents=True, exist_ok=True)
        (run.poddir / "tmp").mkdir(exist_ok=True)
        if not await self._admit(run):
            if run.stop_requested.is_set():
                await self._terminate(run)
            else:
                await self._wait_for_deletion(run)
            return
        await self._report(run)  # Pending, with the pod IP
        for c in run.init_containers:
            if not await self._run_init_container(run, c, restart_policy):
                await self._wait_for_deletion(run)
                return
            if run.stop_requested.is_set():
                break
        if run.stop_requested.is_set():
            await self._terminate(run)
            return
        run.initialized = True
        await self._run_containers(run, restart_policy)
        if run.stop_requested.is_set():
            await self._terminate(run)
        else:
            await self._wait_for_deletion(run)

    async def _admit(self, run: PodRun) -> bool:
        """Find the pod's volumes (waiting for them as a kubelet does) and pick its devices;
        False when the pod will not run: deleted or past its deadline while its volumes were
        not there, or its devices are not (failed as a kubelet fails it)."""
        if not await self._mount_when_ready(run):
            return False
        if not self.gpus:
            return True
        try:
            self._allocate(run)
        except AllocationError as e:
            run.phase, run.reason = "Failed", "UnexpectedAdmissionError"
            # the kubelet's words, which say it is the node's doing and not the pod's
            run.message = f"Pod was rejected: Allocate failed due to {e}, which is unexpected"
            await self._report(run)
            await self._event(run, "UnexpectedAdmissionError", run.message, "Warning")
            return False
        return True

    async def _mount_when_ready(self, run: PodRun) -> bool:
        """Mount the pod's volumes, trying again while they are not there (see MOUNT_RETRY): the
        pod stays Pending, with the kubelet's FailedMount Warning each MOUNT_TIMEOUT. True once
        mounted; False when the pod was deleted meanwhile, or passed its activeDeadlineSeconds
        (then Failed, DeadlineExceeded, as the kubelet's active deadline handler does)."""
        deadline = active_deadline(run.pod)
        retry, last_warning, last_error = MOUNT_RETRY, time.monotonic(), ""
        while True:
            try:
                await self._mount_homes(run)
                return True
            except MountError as e:
                if not last_error:  # Pending, its containers ContainerCreating
                    await self._report(run)
                if str(e) != last_error:
                    log.info("pod %s/%s waits for its volumes: %s", run.namespace, run.name, e)
                last_error = str(e)
            elapsed = time.monotonic() - run.started
            if deadline is not None and elapsed >= deadline:
                run.phase, run.reason, run.message = "Failed", DEADLINE_REASON, DEADLINE_MESSAGE
                await self._report(run)
                await self._event(run, DEADLINE_REASON, DEADLINE_MESSAGE)
                return False
            if time.monotonic() - last_warning >= MOUNT_TIMEOUT:
                last_warning = time.monotonic()
                message = mount_failure_message(self._home_volumes(run), last_error)
                await self._event(run, "FailedMount", message, "Warning")
            pause = retry if deadline is None else min(retry, max(deadline - elapsed, 0.0))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run.stop_requested.wait(), pause)
            if run.stop_requested.is_set():
                return False
            retry = min(retry * 2, MOUNT_RETRY_MAX)

    @staticmethod
    def _home_volumes(run: PodRun) -> set[str]:
        """The names of the pod's volumes mounted at a container's home."""
        containers = [*run.init_containers, *run.containers]
        return {mount["name"] for c in containers if (mount := home_mount(c.spec)) is not None}

    async def _mount_homes(self, run: PodRun) -> None:
        """The directories of the volumes at the containers' homes (MountError if a claim has
        no local volume)."""
        containers = [*run.init_containers, *run.containers]
        wanted = self._home_volumes(run)
        directories: dict[str, Path] = {}
        for volume in run.pod["spec"].get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and volume["name"] in wanted:
                directories[volume["name"]] = await self._claim_directory(run.namespace, claim)
        for c in containers:
            mount = home_mount(c.spec)
            if mount is not None and mount["name"] in directories:
                home = directories[mount["name"]] / str(mount.get("subPath") or "")
                home.mkdir(parents=True, exist_ok=True)
                run.homes[c.name] = home

    async def _claim_directory(self, namespace: str, claim: str) -> Path:
        # The Node authorizer lets a node read the claims and volumes of its pods, once its graph
        # has the pod's binding: a refusal a moment after the pod was bound is tried again.
        # The words are the kubelet's populator's (desired_state_of_world_populator.go).
        try:
            pvc = await self.core.read_namespaced_persistent_volume_claim(claim, namespace)
        except ApiException as e:
            raise MountError(
                f"error processing PVC {namespace}/{claim}: failed to fetch PVC from API server: "
                f"{e.reason} ({e.status})"
            ) from e
        phase = pvc.status.phase if pvc.status else None
        if not pvc.spec.volume_name or phase != "Bound":
            raise MountError(
                f"error processing PVC {namespace}/{claim}: PVC {namespace}/{claim} has non-bound "
                f"phase ({phase!r}) or empty pvc.Spec.VolumeName ({pvc.spec.volume_name or ''!r})"
            )
        try:
            pv = await self.core.read_persistent_volume(pvc.spec.volume_name)
        except ApiException as e:
            raise MountError(
                f"error processing PVC {namespace}/{claim}: failed to fetch PV "
                f"{pvc.spec.volume_name} from API server: {e.reason} ({e.status})"
            ) from e
        if pv.spec.host_path is None or not pv.spec.host_path.path:
            raise MountError(
                f"volume {pv.metadata.name} of claim {claim} is not a directory of this node "
                "(hostPath): this node can give a pod only those"
            )
        return Path(pv.spec.host_path.path)

    async def _run_init_container(self, run: PodRun, c: Container, restart_policy: str) -> bool:
        """Run one init container to success (again after failures, with backoff, unless the
        policy is Never) or until the pod is deleted; False when the pod failed."""
        backoff = 1.0
        while not run.stop_requested.is_set():
            started = await self._spawn(run, c)
            if run.stop_requested.is_set():
                return True  # deleted while it waited: the caller stops the pod
            if started:
                await self._report(run)
                waiter = asyncio.create_task(self._wait_exit(c))
                stop = asyncio.create_task(run.stop_requested.wait())
                await asyncio.wait({waiter, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if run.stop_requested.is_set():
                    await self._stop_containers(run)
                    return True
            if c.exit_code == 0:
                return True
            if restart_policy == "Never":
                run.phase = "Failed"
                await self._report(run)
                return False
            c.restart_count += 1
            await self._report(run)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(run.stop_requested.wait(), backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
        return True

    async def _run_containers(self, run: PodRun, restart_policy: str) -> None:
        """Start the containers and supervise them, with readiness probes, until they end (as
        the restart policy says) or the pod is deleted."""
        for c in run.containers:
            await self._spawn(run, c)
            if run.stop_requested.is_set():
                return  # deleted while a container waited for its config
        run.phase = "Running"
        for c in run.containers:
            if c.proc is not None and c.exit_code is None and not c.spec.get("readinessProbe"):
                c.ready = True
        await self._report(run)
        probes = asyncio.create_task(self._readiness_loop(run))
        try:
            await self._supervise(run, restart_policy)
        finally:
            probes.cancel()

    async def _supervise(self, run: PodRun, restart_policy: str) -> None:
        backoff: dict[str, float] = {}
        while True:
            waits: dict[asyncio.Task[None], Container] = {}
            for c in run.containers:
                if c.proc is not None and c.exit_code is None:
                    waits[asyncio.create_task(self._wait_exit(c))] = c
            stop = asyncio.create_task(run.stop_requested.wait())
            restart_due = [c for c in run.containers if self._should_restart(c, restart_policy)]
            timeout = None
            if restart_due:
                timeout = min(backoff.get(c.name, 1.0) for c in restart_due)
            done, _ = await asyncio.wait(
                {*waits, stop}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            for t in waits:
                t.cancel()
            stop.cancel()
            if run.stop_requested.is_set():
                return
            if not done and restart_due:  # backoff elapsed: restart
                await self._restart(run, restart_due, backoff)
                continue
            phase = pod_phase(restart_policy, [c.exit_code for c in run.containers])
            if phase is not None:
                run.phase = phase
                await self._report(run)
                await self._event(
                    run, "Completed" if phase == "Succeeded" else "Failed", f"pod {phase.lower()}"
                )
                return
            await self._report(run)

    async def _restart(
        self, run: PodRun, containers: list[Container], backoff: dict[str, float]
    ) -> None:
        """Start ``containers`` again, doubling each one's back-off (at most MAX_BACKOFF)."""
        for c in containers:
            c.last_terminated = c.status()["state"].get("terminated")
            c.restart_count += 1
            await self._spawn(run, c)
            backoff[c.name] = min(backoff.get(c.name, 1.0) * 2, MAX_BACKOFF)
            if c.proc is not None and c.exit_code is None and not c.spec.get("readinessProbe"):
                c.ready = True
        await self._report(run)

    @staticmethod
    def _should_restart(c: Container, restart_policy: str) -> bool:
        if c.exit_code is None:
            return False
        if restart_policy == "Always":
            return True
        return restart_policy == "OnFailure" and c.exit_code != 0

    async def _wait_for_deletion(self, run: PodRun) -> None:
        """A finished pod keeps its IP and directory until it is deleted, like a real one."""
        await run.stop_requested.wait()
        await self._terminate(run)

    async def _terminate(self, run: PodRun) -> None:
        had_live = any(c.proc and c.exit_code is None for c in run.containers + run.init_containers)
        if had_live:
            await self._event(run, "Killing", f"Stopping containers (grace {run.grace:.0f}s)")
        await self._stop_containers(run)
        if run.phase not in TERMINAL_PHASES:
            codes = [c.exit_code for c in run.containers if c.exit_code is not None]
            run.phase = (
                "Succeeded"
                if codes and all(c == 0 for c in codes) and len(codes) == len(run.containers)
                else "Failed"
            )
        await self._report(run)
        if not run.finalized:
            try:
                await self._delete_now(run.namespace, run.name, run.uid)
            except ApiException as e:
                if e.status not in (404, 409):
                    log.warning("deleting %s/%s: %s", run.namespace, run.name, e)
        self._cleanup(run)

    def _cleanup(self, run: PodRun) -> None:
        self.runs.pop(run.uid, None)
        self.done.add(run.uid)
        self.ips.release(run.ip)
        self._save_processes()
        shutil.rmtree(run.poddir, ignore_errors=True)

    async def shutdown(self) -> None:
        """Stop every pod's processes (the cluster is going down; statuses are not reported)."""
        self._stopping = True
        for run in list(self.runs.values()):
            run.grace = min(run.grace, 5.0)
            run.finalized = True
            if run.task is not None:
                run.task.cancel()
        await asyncio.gather(
            *(self._stop_containers(run) for run in list(self.runs.values())),
            return_exceptions=True,
        )
        self._save_processes()


async def amain(args: argparse.Namespace) -> int:
    state_dir = Path(args.state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    cfg = client.Configuration()
    await config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    async with client.ApiClient(cfg) as api:
        agent = NodeAgent(api, args.node, state_dir, args.ip_prefix, gpus=args.gpus)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        tasks = [asyncio.create_task(agent.heartbeat()), asyncio.create_task(agent.watch_pods())]
        if agent.has_mig:
            tasks.append(asyncio.create_task(agent.watch_node()))
        metrics = await agent.serve_metrics(args.metrics_port) if args.metrics_port else None
        log.info("node agent for %s running (pod IPs %s.x.y)", args.node, args.ip_prefix)
        await stop.wait()
        log.info("stopping: terminating %d pod(s)", len(agent.runs))
        for t in tasks:
            t.cancel()
        if metrics is not None:
            metrics.close()
        await agent.shutdown()
    return 0


def run_logged(amain: Coroutine[Any, Any, int]) -> int:
    """Run a dev-cluster process's ``amain`` to its exit code, logging INFO and above to
    stderr with a time, a level and the logger's name (the cluster keeps each process's log)."""
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    return asyncio.run(amain)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.nodeagent",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--ip-prefix", default="127.42")
    parser.add_argument(
        "--gpus",
        default=None,
        help="the node's simulated GPUs, a spec such as '1xA100-40GB,1xL4-24GB:hami=4' "
        "(jupyter_gpuaas/gpu/spec.py); default: none (servers simulate their own)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=0,
        help="serve the node's simulated GPUs in dcgm-exporter's format at "
        "http://127.0.0.1:<port>/metrics (devcluster/dcgm.py); default 0: not served",
    )
    return run_logged(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

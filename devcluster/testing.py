"""Pytest support: the ``cluster`` session fixture and helpers for tests that use it.

Use it from any test folder's ``conftest.py``::

    from devcluster.testing import cluster  # noqa: F401  (registers the session fixture)

The fixture starts the dev cluster with :func:`devcluster.up` (the same code as ``make
cluster-up``; a failed build or start fails it with that message) or reuses the one already running
under the same state directory. If it started the cluster, it stops it at the end of the session
and asserts that nothing is left behind. Tests act as ServiceAccounts: ``cluster.api(ns, name)``
yields a ``kubernetes_asyncio`` ApiClient with a token from the TokenRequest API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import cluster as devcluster
from devcluster import procs
from devcluster.cluster import ClusterInfo
from devcluster.config import (
    DEMO_POD_IP_PREFIX,
    DEMO_PORT_BASE,
    HOST,
    PORT_OFFSETS,
    Settings,
    load_settings,
)
from devcluster.hub import DEMO_CATALOG, port_block
from jupyter_gpuaas.core.kueue import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    REQUIRED_TOPOLOGY_ANNOTATION,
)
from jupyter_gpuaas.core.labels import USER_LABEL

T = TypeVar("T")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"


class Cluster:
    """The running dev cluster, and ServiceAccount tokens issued for the tests."""

    def __init__(self, info: ClusterInfo) -> None:
        self.info = info
        self._tokens: dict[tuple[str, str], str] = {}

    def token(self, namespace: str, name: str) -> str:
        key = (namespace, name)
        if key not in self._tokens:
            # Issued with the admin identity, as an admin hands out credentials; the tests then
            # act only as the ServiceAccount.
            self._tokens[key] = self.info.admin().create_token(namespace, name, 3600)
        return self._tokens[key]

    @asynccontextmanager
    async def api(self, namespace: str, name: str) -> AsyncIterator[client.ApiClient]:
        cfg = client.Configuration(host=self.info.apiserver_url)
        cfg.ssl_ca_cert = str(self.info.ca_file)
        cfg.api_key = {"BearerToken": self.token(namespace, name)}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
        async with client.ApiClient(cfg) as api:
            yield api

    def kubeconfig_for(self, namespace: str, name: str, path: Path) -> Path:
        """Write a kubeconfig that acts as the ServiceAccount (for code that reads one)."""
        from devcluster.kube import write_kubeconfig

        write_kubeconfig(
            path,
            server=self.info.apiserver_url,
            ca_pem=self.info.ca_file.read_bytes(),
            user=f"{namespace}-{name}",
            token=self.token(namespace, name),
            namespace=namespace,
        )
        return path


def runs_from(state_dir: Path, argv: Sequence[str], cwd: str) -> bool:
    """Whether a process with this command line and working directory runs from ``state_dir``:
    the directory itself or a path under it, not a sibling whose name merely starts the same
    (test lane 1's cluster lives in ``<dir>-lane1``)."""
    here = f"{state_dir}/"
    return any(here in f"{word}/" for word in (cwd, *argv))


def leftovers(settings: Settings, records: list[procs.ProcRecord]) -> list[str]:
    """What a stopped cluster left behind: live recorded processes, listening ports, files."""
    out = [f"{r.name} pid {r.pid} still running" for r in records if procs.is_alive(r)]
    listening = procs.listening_sockets()
    ports = {p for _, p in settings.ports.items()}
    for ip, port in listening:
        if (ip in (HOST, "0.0.0.0") and port in ports) or ip.startswith(
            settings.pod_ip_prefix + "."
        ):
            out.append(f"something still listens on {ip}:{port}")
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (
                (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
            stat = (proc / "stat").read_text()
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            cwd = ""
        alive = stat[stat.rfind(")") + 2] not in "ZX"
        if alive and runs_from(settings.state_dir, cmdline.split(" "), cwd):
            out.append(f"pid {proc.name} still runs from the state dir: {cmdline[:120]}")
    if settings.state_dir.exists():
        out.append(f"{settings.state_dir} still exists")
    return out


def free_port_base(start: int = 27400, stop: int = 40000, step: int = 100) -> int:
    """A port base whose whole block is free on 127.0.0.1 (for throwaway second clusters); never
    the demo's, whose ports are free until it starts."""
    for base in range(start, stop, step):
        if base == DEMO_PORT_BASE:
            continue
        if not any(procs.port_in_use(HOST, base + off) for off in PORT_OFFSETS.values()):
            return base
    raise RuntimeError(f"no free block of ports between {start} and {stop}")


def free_pod_ip_prefix(first: int = 43) -> str:
    """A ``127.N`` pod IP prefix nobody listens on (never the demo's)."""
    used = {ip.split(".")[1] for ip, _ in procs.listening_sockets("127.")}
    used.add(DEMO_POD_IP_PREFIX.split(".")[1])
    for n in range(first, 255):
        if str(n) not in used:
            return f"127.{n}"
    raise RuntimeError("no free 127.N prefix")


# --- helpers for tests that talk to the cluster ---------------------------------------------


def on_local_node() -> dict[str, Any]:
    """Pod spec fields that place a pod on the node agent's node without a queue (Kueue leaves
    it alone): its pool's selector and the toleration of its taint."""
    return {
        "nodeSelector": {"gpuaas.dev/pool": "local"},
        "tolerations": [
            {
                "key": "gpuaas.dev/local-node",
                "operator": "Equal",
                "value": "true",
                "effect": "NoSchedule",
            }
        ],
    }


def core(api: client.ApiClient) -> Any:
    """CoreV1Api, typed loosely: the tests pass plain dicts as bodies (the client accepts them)."""
    return client.CoreV1Api(api)


def batch(api: client.ApiClient) -> Any:
    return client.BatchV1Api(api)


async def wait_for(
    what: str, probe: Callable[[], Awaitable[T | None]], timeout: float = 30.0, every: float = 0.2
) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = await probe()
        except ApiException as e:
            value, last = None, e
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last})")
        await asyncio.sleep(every)


async def raw_json(resp: Any) -> Any:
    """The JSON body of a ``_preload_content=False`` response (which the client never checks)."""
    body = await resp.read()
    if resp.status >= 400:
        raise ApiException(status=resp.status, reason=body.decode("utf-8", "replace"))
    return json.loads(body)


async def get_json(api: client.ApiClient, path: str) -> dict[str, Any]:
    resp = await api.call_api(
        path,
        "GET",
        header_params={"Accept": "application/json"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        response_types_map={},
    )
    data: dict[str, Any] = await raw_json(resp)
    return data


async def pending_workloads(
    api: client.ApiClient, namespace: str, local_queue: str
) -> list[dict[str, Any]]:
    data = await get_json(
        api, f"{VISIBILITY}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
    )
    items: list[dict[str, Any]] = data.get("items", [])
    return items


def queued_metadata(name: str, queue: str, priority: str, **more: Any) -> dict[str, Any]:
    """The metadata of a workload Kueue queues: its name, its LocalQueue and its priority class
    (Kueue's labels), and ``more`` (``annotations=...``)."""
    return {
        "name": name,
        "labels": {QUEUE_NAME_LABEL: queue, PRIORITY_CLASS_LABEL: priority},
        **more,
    }


def job_manifest(
    name: str,
    *,
    queue: str = "training",
    priority: str = "training",
    pods: int = 1,
    gpus: int = 1,
    run_seconds: int | None = None,
) -> dict[str, Any]:
    annotations = {"gpuaas.dev/run-seconds": str(run_seconds)} if run_seconds is not None else {}
    resources = {
        "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
        "limits": {"nvidia.com/gpu": str(gpus)},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": queued_metadata(name, queue, priority),
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:sim",
                            "command": ["sleep", "infinity"],
                            "resources": resources,
                        }
                    ],
                },
            },
        },
    }


def queued_pod_manifest(
    name: str,
    *,
    queue: str,
    node_selector: Mapping[str, str],
    gpu: Mapping[str, str],
    cpu: str = "1",
    memory: str = "2Gi",
    tolerations: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A notebook pod as GPUaaSSpawner queues it: Kueue's queue and interactive priority labels,
    ``gpu`` (extended resources) as requests = limits, beside ``cpu``/``memory`` requests."""
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "nodeSelector": dict(node_selector),
        "containers": [
            {
                "name": "notebook",
                "image": "quay.io/jupyter/base-notebook",
                "args": ["jupyterhub-singleuser"],
                "resources": {
                    "requests": {"cpu": cpu, "memory": memory, **gpu},
                    "limits": dict(gpu),
                },
            }
        ],
    }
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": queued_metadata(
            name, queue, "interactive", annotations=dict(annotations or {})
        ),
        "spec": spec,
    }


async def delete_pods(api: client.ApiClient, namespace: str, grace_period_seconds: int = 1) -> None:
    """Delete every pod of ``namespace`` (one already gone is fine)."""
    v1 = core(api)
    for pod in (await v1.list_namespaced_pod(namespace)).items:
        try:
            await v1.delete_namespaced_pod(
                pod.metadata.name, namespace, grace_period_seconds=grace_period_seconds
            )
        except ApiException as e:
            if e.status != 404:
                raise


async def create_job(
    api: client.ApiClient, namespace: str, manifest: dict[str, Any]
) -> dict[str, Any]:
    resp = await batch(api).create_namespaced_job(namespace, manifest, _preload_content=False)
    job: dict[str, Any] = await raw_json(resp)
    return job


async def workload_of(api: client.ApiClient, namespace: str, job_uid: str) -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(api)
    out = await custom.list_namespaced_custom_object(
        *KUEUE, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job_uid}"
    )
    items: list[dict[str, Any]] = out.get("items", [])
    return items[0] if items else None


def has_condition(obj: dict[str, Any] | None, ctype: str, status: str = "True") -> bool:
    if not obj:
        return False
    return any(
        c.get("type") == ctype and c.get("status") == status
        for c in obj.get("status", {}).get("conditions", []) or []
    )


async def delete_jobs(api: client.ApiClient, namespace: str) -> None:
    jobs = await batch(api).list_namespaced_job(namespace)
    for job in jobs.items:
        try:
            await batch(api).delete_namespaced_job(
                job.metadata.name, namespace, propagation_policy="Background"
            )
        except ApiException as e:
            if e.status != 404:
                raise


async def cluster_queues(api: client.ApiClient) -> list[dict[str, Any]]:
    out = await client.CustomObjectsApi(api).list_cluster_custom_object(*KUEUE, "clusterqueues")
    items: list[dict[str, Any]] = out["items"]
    return items


async def wait_queues_idle(api: client.ApiClient, timeout: float = 60.0) -> None:
    async def idle() -> bool:
        for cq in await cluster_queues(api):
            st = cq.get("status", {})
            if (
                st.get("pendingWorkloads", 0)
                or st.get("reservingWorkloads", 0)
                or st.get("admittedWorkloads", 0)
            ):
                return False
        return True

    await wait_for("all ClusterQueues idle", idle, timeout)


async def old_workloads(api: client.ApiClient, namespace: str, name: str) -> list[str]:
    """Names of the Workloads still owned by a pod called ``name`` (any UID)."""
    out = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        *KUEUE, namespace, "workloads"
    )
    return [
        w["metadata"]["name"]
        for w in out.get("items", [])
        if any(
            o.get("kind") == "Pod" and o.get("name") == name
            for o in w["metadata"].get("ownerReferences") or []
        )
    ]


async def create_when_free(
    api: client.ApiClient,
    namespace: str,
    manifest: dict[str, Any],
    timeout: float = 10.0,
    *,
    wait_for_workloads: bool = True,
) -> Any:
    """Create the pod as soon as its name is free: the old pod gone (409 until then) and, for a
    pod Kueue manages, the old pod's Workload gone too.

    The second wait (``wait_for_workloads``) was Kueue 0.17's rule: it finds a pod's Workloads
    by the owner's *name* (jobframework ``FindMatchingWorkloads``:
    ``OwnerReferenceIndexFieldMatcher(gvk, name)``), so a new pod created while the old pod's
    Workload is still there is taken to own it: ungated on the old admission, its own Workload
    deleted as a duplicate, and stopped ("Missing Workload; unable to restore pod templates")
    once the old one goes. Kueue 0.18+ compares the owner's UID too, but only with its gate
    FinishOrphanedWorkloads on, which the dev cluster turns off (docs/queue.md): the rule holds.
    """
    name = manifest["metadata"]["name"]
    managed = wait_for_workloads and "kueue.x-k8s.io/queue-name" in (
        manifest["metadata"].get("labels") or {}
    )
    deadline = time.monotonic() + timeout
    while True:
        if not managed or not await old_workloads(api, namespace, name):
            try:
                return await core(api).create_namespaced_pod(namespace, manifest)
            except ApiException as e:
                if e.status != 409:
                    raise
        if time.monotonic() > deadline:
            raise AssertionError(f"the name {namespace}/{name} was not free within {timeout}s")
        await asyncio.sleep(0.01)  # as tight as a client that retries at once


async def still_running(v1: Any, namespace: str, name: str, uid: str) -> bool:
    """True once pod ``uid`` is Running and Ready; AssertionError at once if the name no longer
    holds that pod, or the pod was deleted or ended (nobody here asked for either)."""
    try:
        pod = await v1.read_namespaced_pod(name, namespace)
    except ApiException as e:
        if e.status == 404:
            raise AssertionError(f"pod {namespace}/{name} (uid {uid}) vanished") from None
        raise
    where = f"pod {namespace}/{name} (uid {uid})"
    if pod.metadata.uid != uid:
        raise AssertionError(f"{where} was replaced by uid {pod.metadata.uid}")
    if pod.metadata.deletion_timestamp is not None:
        raise AssertionError(f"{where} is being deleted by someone else")
    if pod.status.phase in ("Succeeded", "Failed"):
        raise AssertionError(f"{where} ended: {pod.status.phase}")
    ready = any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])
    return bool(pod.status.phase == "Running" and ready)


async def churn_same_name(
    api: client.ApiClient,
    namespace: str,
    manifest: dict[str, Any],
    rounds: int,
    *,
    grace_seconds: int | None = None,
    timeout: float = 60.0,
) -> list[str]:
    """Run a pod, then ``rounds`` times: delete it and create one of the same name at once,
    each new pod checked to run and stay itself. Returns the pods' UIDs in order.

    This is what a quick stop and restart of a server does (KubeSpawner reuses pod names): if
    anything that finishes the old pod acts on the name rather than the UID, the new pod ends.
    """
    name = manifest["metadata"]["name"]
    v1 = core(api)
    pod = await v1.create_namespaced_pod(namespace, manifest)
    uids = [pod.metadata.uid]
    for i in range(rounds + 1):
        uid = uids[-1]
        try:
            await wait_for(
                f"{name} (uid {uid}) Running",
                partial(still_running, v1, namespace, name, uid),
                timeout,
                every=0.05,
            )
        except AssertionError as e:
            raise AssertionError(f"round {i} of {rounds}: {e}") from None
        if i == rounds:
            break
        await v1.delete_namespaced_pod(name, namespace, grace_period_seconds=grace_seconds)
        pod = await create_when_free(api, namespace, manifest)
        uids.append(pod.metadata.uid)
    return uids


# The user label of docs/queue.md (vouched for by 60-user-label-policy.yaml).
# Jobs that take all team A's training queue can use: 16 h100 GPUs (own 6 + borrowed 10).
TRAINING_FILLERS = (("fill-8", 8), ("fill-7", 7), ("fill-1", 1))


def labelled_job(name: str, user: str | None, gpus: int = 1) -> dict[str, Any]:
    """A training Job on the h100 pool, labelled as ``user``'s (docs/queue.md) if given."""
    job = job_manifest(name, gpus=gpus)
    if user:
        job["metadata"]["labels"][USER_LABEL] = user
    job["spec"]["template"]["spec"]["nodeSelector"] = {"gpuaas.dev/pool": "h100"}
    return job


TOPOLOGY_POOL = "h200"
"""The pool Kueue's Topology Aware Scheduling places (nodes.yaml, manifests/15-topology.yaml):
three nodes of 8 GPUs, flavor h200, 12 + 12 GPUs of training quota."""
HOSTNAME_LEVEL = "kubernetes.io/hostname"
# Three Jobs of 5 GPUs take one node each (5 + 5 > 8), leaving 3 free on every node: 9 GPUs of
# quota free in the cohort, and no node with room for 8.
TOPOLOGY_FILLERS = (("spread-1", 5), ("spread-2", 5), ("spread-3", 5))


def topology_job(
    name: str, user: str | None, gpus: int = 8, level: str | None = HOSTNAME_LEVEL
) -> dict[str, Any]:
    """A training Job on the TAS pool asking for all its pods on one domain of ``level``
    (Kueue's pod-template annotation; ``None``: no topology asked), ``user``'s if given."""
    job = job_manifest(name, gpus=gpus)
    if user:
        job["metadata"]["labels"][USER_LABEL] = user
    template = job["spec"]["template"]
    template["spec"]["nodeSelector"] = {"gpuaas.dev/pool": TOPOLOGY_POOL}
    if level is not None:
        template["metadata"]["annotations"][REQUIRED_TOPOLOGY_ANNOTATION] = level
    return job


async def wait_admitted(api: client.ApiClient, namespace: str, names: Sequence[str]) -> None:
    """Wait until each Job of ``names`` has an admitted Workload."""

    async def admitted() -> bool:
        for name in names:
            job = await batch(api).read_namespaced_job(name, namespace)
            if not has_condition(await workload_of(api, namespace, job.metadata.uid), "Admitted"):
                return False
        return True

    await wait_for(f"{', '.join(names)} admitted", admitted, 60)


async def spread_topology_pool(api: client.ApiClient, namespace: str = "team-a") -> None:
    """:data:`TOPOLOGY_FILLERS` (unlabelled), one per node of the TAS pool, admitted: after
    them every node has 3 GPUs free, so an 8-GPU Job on one node waits for topology."""
    for name, gpus in TOPOLOGY_FILLERS:
        await create_job(api, namespace, topology_job(name, None, gpus))
    await wait_admitted(api, namespace, [name for name, _ in TOPOLOGY_FILLERS])


async def clear_jobs(cluster: Cluster, namespace: str = "team-a", as_user: str = "alice") -> None:
    """Delete every Job in ``namespace`` and wait until no ClusterQueue holds a workload."""
    async with cluster.api(namespace, as_user) as api:
        await delete_jobs(api, namespace)
    async with cluster.api("jupyterhub", "gpuaas") as reader:
        await wait_queues_idle(reader)


async def fill_training_quota(api: client.ApiClient, namespace: str = "team-a") -> None:
    """Create :data:`TRAINING_FILLERS` (unlabelled) and wait until all are admitted.

    Deleting ``fill-1`` afterwards frees one GPU: the first one-GPU Job waiting is admitted.
    """
    for name, gpus in TRAINING_FILLERS:
        await create_job(api, namespace, labelled_job(name, None, gpus))

    async def filled() -> bool:
        for name, _ in TRAINING_FILLERS:
            job = await batch(api).read_namespaced_job(name, namespace)
            if not has_condition(await workload_of(api, namespace, job.metadata.uid), "Admitted"):
                return False
        return True

    await wait_for("fillers admitted", filled, 60)


async def submit_in_order(
    api: client.ApiClient, user: str, names: list[str], namespace: str = "team-a"
) -> None:
    """Submit one-GPU Jobs labelled as ``user``'s, each a creation-timestamp second after the
    one before (and before whatever is submitted next)."""
    for name in names:
        await create_job(api, namespace, labelled_job(name, user))
        await asyncio.sleep(1.1)  # creation timestamps have one-second resolution


def borrowed(cq: dict[str, Any], flavor: str, resource: str) -> str:
    for f in cq.get("status", {}).get("flavorsReservation", []) or []:
        if f.get("name") == flavor:
            for r in f.get("resources", []):
                if r.get("name") == resource:
                    return str(r.get("borrowed", "0"))
    return "0"


def which_cluster(settings: Settings, started: bool) -> str:
    """The line a test session prints about the cluster it runs on."""
    block = port_block({"GPUAAS_CLUSTER_PORT_BASE": str(settings.port_base)})
    how = "started for this session" if started else "already running: left running"
    return (
        f"dev cluster for the tests: {settings.state_dir} ({how}); API {settings.apiserver_url}, "
        f"hubs on ports {block.start}-{block.stop - 1}, pod IPs {settings.pod_ip_prefix}.x.y. "
        "A running `make demo` has its own cluster and is not touched."
    )


def say(config: pytest.Config, line: str) -> None:
    """Write a line on pytest's terminal, past its output capture."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line(line)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The running dev cluster (started for the session unless one was already running); never
    a demo's (devcluster/claim.py). Says which on the terminal."""
    settings = load_settings()
    with devcluster.running(settings) as info:
        say(request.config, which_cluster(settings, info.started))
        yield Cluster(info)
    if info.started:
        left = leftovers(settings, info.processes)
        assert not left, f"devcluster down left things behind: {left}"


def jobs_catalog_file(tmp: Path, queue: str) -> Path:
    """The demo catalog with notebook Jobs on: team A's go to LocalQueue ``queue`` in team-a
    (the local MIG slice, small caps), the other teams' to their ``training`` queue."""
    data = yaml.safe_load(DEMO_CATALOG.read_text())
    for tenant in data["tenants"]:
        if tenant["name"] == "team-a":
            tenant["jobs"] = {
                "namespace": "team-a",
                "local_queue": queue,
                "offerings": ["local-mig-1g"],
                "max_per_user": 2,
                "max_per_team": 3,
                "default_time_limit": "30m",
                "max_time_limit": "2h",
            }
        else:
            tenant["jobs"] = {"namespace": tenant["name"], "local_queue": "training"}
    path = tmp / "catalog.yaml"
    path.write_text(yaml.safe_dump(data))
    return path

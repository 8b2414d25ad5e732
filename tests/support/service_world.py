"""A small world for the reclaim loop's tests: team A's queues, three workbench pods, a Job
that needs two MIG slices, and in-memory stand-ins for the hub, Kubernetes and the Kueue caches
(our own collaborators' interfaces; the real ones are in tests/real_hub). :class:`World` runs a
:class:`ReclaimLoop` over them with the console's record listening, as the service does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from gpuaas_service.clients.hub import HubError
from gpuaas_service.clients.persisted import PersistedState
from gpuaas_service.console.answers import ConsoleState
from gpuaas_service.console.journal import JOURNAL_CONFIGMAP
from gpuaas_service.console.record import ConsoleRecord
from gpuaas_service.model.pods import PodRef
from gpuaas_service.reclaim.activity_store import ActivityStore
from gpuaas_service.reclaim.loop import ReclaimLoop, Settings
from gpuaas_service.reclaim.policy import load_policy
from jupyter_gpuaas.core import api_types as api
from jupyter_gpuaas.core.headroom import QueueState
from jupyter_gpuaas.core.kueue import PendingWorkloadInfo, WorkloadInfo, read_workload
from tests.support import service_samples as world
from tests.support.service_samples import NS, iso

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)
MIG = "nvidia.com/mig-1g.5gb"


def cluster_queue(name: str, nominal: int, used: int) -> dict[str, Any]:
    return world.cluster_queue(name, {("local", MIG): nominal}, {("local", MIG): used})


def queue_state(notebooks_used: int = 3) -> QueueState:
    return world.team_a_queues(
        cluster_queue("team-a-notebooks", 3, notebooks_used),
        cluster_queue("team-a-training", 0, 0),
    )


def pod(user: str, server: str = "", uid: str = "") -> dict[str, Any]:
    return world.workbench_pod(
        user,
        server=server,
        uid=uid,
        offering="local-mig-1g",
        kind="mig",
        requests={MIG: "1", "cpu": "1"},
        limits={MIG: "1"},
        created=T0,
    )


def job_workload(
    name: str = "train", count: int = 2, admitted: datetime | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if admitted is not None:
        status = {
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "lastTransitionTime": iso(admitted)},
                {"type": "Admitted", "status": "True", "lastTransitionTime": iso(admitted)},
            ]
        }
    return world.job_workload_object(
        name, requests={MIG: "1"}, count=count, created=T0, status=status
    )


def idle(at: datetime) -> dict[str, Any]:
    return world.idle_report(at)


def busy(at: datetime) -> dict[str, Any]:
    payload = idle(at)
    payload["kernels"][0]["execution_state"] = "busy"
    payload["idle_since"] = None
    return payload


class FakeHub:
    def __init__(self, servers: list[tuple[str, str]]) -> None:
        self.servers = {
            s: {"name": s[1], "ready": True, "pending": None, "started": iso(T0)} for s in servers
        }
        self.groups: dict[str, list[str]] = {}
        self.stopped: list[tuple[str, str]] = []
        self.down = False
        self.calls = 0
        self.asked: list[str] = []

    async def user(self, name: str) -> dict[str, Any] | None:
        self.calls += 1
        self.asked.append(name)
        if self.down:
            raise HubError(f"GET /users/{name}: connection refused")
        servers = {s: m for (u, s), m in self.servers.items() if u == name}
        if not servers:
            return None
        return {"name": name, "groups": self.groups.get(name, ["team-a"]), "servers": servers}

    async def group_members(self) -> dict[str, list[str]]:
        self.calls += 1
        if self.down:
            raise HubError("GET /groups: connection refused")
        return self.groups

    async def stop_server(self, user: str, server: str) -> int:
        self.stopped.append((user, server))
        self.servers.pop((user, server), None)
        return 202


class FakeKube:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.events: list[tuple[str, str, str]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.configmaps: dict[tuple[str, str], str] = {}
        self.configmaps_down = False
        self.down = False

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        if self.down:
            raise OSError("apiserver unreachable")
        copied: list[dict[str, Any]] = json.loads(json.dumps(list(self.pods.values())))
        return copied

    async def annotate(self, pod: PodRef, annotations: Mapping[str, str | None]) -> None:
        self.patches.append((pod.name, dict(annotations)))
        ann = self.pods[pod.name]["metadata"]["annotations"]
        for k, v in annotations.items():
            if v is None:
                ann.pop(k, None)
            else:
                ann[k] = v

    async def event(
        self, pod: PodRef, reason: str, message: str, type_: str, *, at: datetime
    ) -> None:
        self.events.append((pod.name, reason, type_))

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]:
        return {}

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        return {"local": {"gpuaas.dev/pool": "local"}}

    async def read_state(self, namespace: str, name: str) -> str | None:
        if self.down or self.configmaps_down:
            raise OSError("configmaps: forbidden")
        return self.configmaps.get((namespace, name))

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        if self.down or self.configmaps_down:
            raise OSError("configmaps: forbidden")
        self.configmaps[(namespace, name)] = text


class FakeView:
    def __init__(
        self, state: QueueState, workloads: list[dict[str, Any]], pods: list[dict[str, Any]]
    ) -> None:
        self.state = state
        self.jobs = workloads
        self.pod_workloads = {
            p["metadata"]["uid"]: read_workload(
                {
                    "metadata": {"name": "pod-" + p["metadata"]["name"], "namespace": NS},
                    "status": {
                        "admission": {
                            "clusterQueue": "team-a-notebooks",
                            "podSetAssignments": [{"name": "main", "flavors": {MIG: "local"}}],
                        }
                    },
                }
            )
            for p in pods
        }

    def queue_state(self) -> QueueState:
        return self.state

    def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
        return [w for w in self.jobs if w["metadata"]["namespace"] == namespace]

    def workload_for_pod(self, namespace: str, pod_uid: str, pod_name: str) -> WorkloadInfo | None:
        return self.pod_workloads.get(pod_uid)

    def pending_items(self, namespace: str, local_queue: str) -> list[PendingWorkloadInfo] | None:
        return None


POLICY = {
    "report_stale_after": "5m",
    "handoff_timeout": "1m",
    "policies": [
        {
            "name": "team-a",
            "match": {"teams": ["team-a"]},
            "idle_after": "10s",
            "warn_before": "30s",
            "max_snoozes": 1,
            "snooze_for": "1h",
        }
    ],
}


class World:
    """Team A: alice and bob idle on one MIG slice each, alice/busy busy; a Job needs 2 slices."""

    def __init__(self, policy: Mapping[str, Any] = POLICY, dry_run: bool = False) -> None:
        self.now = T0 + timedelta(seconds=60)
        keys = [("alice", ""), ("bob", ""), ("alice", "busy")]
        self.pods = [pod(u, s) for u, s in keys]
        self.hub = FakeHub(keys)
        self.kube = FakeKube(self.pods)
        self.jobs = [job_workload()]
        self.view = FakeView(queue_state(), self.jobs, self.pods)
        self.store = ActivityStore()
        self.policy = load_policy(policy)
        self.settings = Settings(
            job_namespaces=("team-a",), interval=10, max_backoff=80, dry_run=dry_run
        )
        self.loop = self.new_loop()

    def new_loop(self) -> ReclaimLoop:
        """A loop with the console's record listening, as the service runs them (a restart:
        both start with nothing in memory)."""
        loop = ReclaimLoop(
            hub=self.hub,
            kube=self.kube,
            view=self.view,
            policies=self.policy,
            store=self.store,
            settings=self.settings,
            clock=lambda: self.now,
        )
        journal = PersistedState(self.kube, NS, JOURNAL_CONFIGMAP, owner="console", what="journal")
        self.record = ConsoleRecord(journal)
        loop.listeners.append(self.record)
        return loop

    def add_idle(self, user: str) -> None:
        """Another idle MIG notebook of team A, running and reporting."""
        self.hub.servers[(user, "")] = {"name": "", "ready": True, "started": iso(T0)}
        self.kube.pods[f"jupyter-{user}"] = pod(user)
        self.view.pod_workloads.update(FakeView(self.view.state, [], [pod(user)]).pod_workloads)
        self.store.record(user, "", idle(T0), self.now)

    def report(self) -> None:
        self.store.record("alice", "", idle(T0), self.now)
        self.store.record("bob", "", idle(T0), self.now)
        self.store.record("alice", "busy", busy(T0), self.now)

    async def cycle(self, after: float = 0) -> Any:
        self.now += timedelta(seconds=after)
        self.report()
        return await self.loop.cycle()


async def reclaimed_for_the_job() -> World:
    """alice and bob warned, then stopped for the Job: a hand-off under way."""
    w = World()
    await w.cycle()
    await w.cycle(after=31)
    assert len(w.hub.stopped) == 2
    return w


def world_console(w: World, **options: Any) -> ConsoleState:
    """The console's state over the world's loop and Kueue view, as the service builds it
    (team A's namespace for training, a regret window of an hour); ``options`` add the rest."""
    return ConsoleState(
        w.loop,
        w.view,
        notebook_namespace=NS,
        job_namespaces=["team-a"],
        regret_window=timedelta(hours=1),
        **options,
    )


def warning_of(loop: ReclaimLoop, user: str, server: str = "") -> api.ServiceWarning:
    """The server's pending warning (``api/reclaim``), which the test expects it to have."""
    warning = loop.warning_for(user, server)["warning"]
    assert warning is not None, f"{user}/{server} has no warning"
    return warning


def cause_of(warning: api.ServiceWarning) -> api.ServiceReclaimCause:
    """A warning's cause, which the test expects it to name."""
    cause = warning["cause"]
    assert cause is not None, warning
    return cause

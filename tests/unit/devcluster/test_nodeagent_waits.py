"""The node agent waits as a kubelet does for what a pod needs from the API server: a claim or a
Secret that it cannot read yet (refused by the Node authorizer a moment after the pod was bound,
not there yet) keeps the pod Pending and is read again; only the pod's deletion or its
``activeDeadlineSeconds`` ends the wait. The API server here is a stand-in for the agent's
``CoreV1Api`` that refuses the first reads."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster import nodeagent
from devcluster.nodeagent import Container, NodeAgent, PodRun

NS = "jupyter-users"


class RefusingCore:
    """Answers the agent's reads of claim ``claim-carol``, its volume and Secret ``tokens``,
    refusing the first ``refusals`` of each kind with ``status``; records what the agent posts."""

    def __init__(self, home: Path, refusals: int, status: int = 403) -> None:
        self.home, self.status = home, status
        self.left = {"pvc": refusals, "secret": refusals}
        self.reads = {"pvc": 0, "secret": 0}
        self.statuses: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def _maybe_refuse(self, kind: str) -> None:
        self.reads[kind] += 1
        if self.left[kind] > 0:
            self.left[kind] -= 1
            raise ApiException(status=self.status, reason="Forbidden")

    async def read_namespaced_persistent_volume_claim(self, name: str, namespace: str) -> Any:
        self._maybe_refuse("pvc")
        return SimpleNamespace(
            spec=SimpleNamespace(volume_name="pvc-1"), status=SimpleNamespace(phase="Bound")
        )

    async def read_persistent_volume(self, name: str) -> Any:
        return SimpleNamespace(
            metadata=SimpleNamespace(name=name),
            spec=SimpleNamespace(host_path=SimpleNamespace(path=str(self.home))),
        )

    async def read_namespaced_secret(self, name: str, namespace: str) -> Any:
        self._maybe_refuse("secret")
        return SimpleNamespace(data={"token": base64.b64encode(b"s3cret").decode()})

    async def patch_namespaced_pod_status(self, name: str, ns: str, body: Any, **kw: Any) -> None:
        self.statuses.append(body["status"])

    async def create_namespaced_event(self, namespace: str, body: Any) -> None:
        self.events.append(body)


def pod(deadline: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-carol"}}],
        "containers": [
            {
                "name": "notebook",
                "command": ["true"],
                "volumeMounts": [{"name": "home", "mountPath": "/home/jovyan"}],
                "env": [
                    {
                        "name": "TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "tokens", "key": "token"}},
                    }
                ],
            }
        ],
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {"metadata": {"name": "jupyter-carol", "namespace": NS, "uid": "u1"}, "spec": spec}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MOUNT_RETRY", "MOUNT_RETRY_MAX", "CONFIG_RETRY"):
        monkeypatch.setattr(nodeagent, name, 0.001)


@pytest.fixture
async def api() -> AsyncIterator[client.ApiClient]:
    async with client.ApiClient() as api:  # the agent's own; never used to send
        yield api


def agent_with(core: RefusingCore, tmp_path: Path, api: client.ApiClient) -> NodeAgent:
    agent = NodeAgent(api, "local-0", tmp_path / "agent", "127.99")
    agent.core = core
    return agent


def run_of(spec: dict[str, Any], tmp_path: Path) -> PodRun:
    return PodRun(
        uid="u1",
        namespace=NS,
        name="jupyter-carol",
        pod=spec,
        ip="127.99.0.2",
        poddir=tmp_path / "pod",
        containers=[Container(c) for c in spec["spec"]["containers"]],
    )


async def test_a_claim_read_refused_at_first_mounts_once_allowed(
    tmp_path: Path, api: client.ApiClient
) -> None:
    core = RefusingCore(tmp_path / "volume", refusals=3)
    agent = agent_with(core, tmp_path, api)
    run = run_of(pod(), tmp_path)
    assert await agent._admit(run)
    assert core.reads["pvc"] == 4
    assert run.homes["notebook"] == tmp_path / "volume"
    assert run.phase == "Pending"
    assert run.reason is None
    # while it waited, the pod was reported Pending, its container still being created
    assert core.statuses
    assert core.statuses[0]["phase"] == "Pending"
    waiting = core.statuses[0]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "ContainerCreating"


async def test_the_kubelets_warning_after_its_mount_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: client.ApiClient
) -> None:
    monkeypatch.setattr(nodeagent, "MOUNT_TIMEOUT", 0.0)
    core = RefusingCore(tmp_path / "volume", refusals=1)
    assert await agent_with(core, tmp_path, api)._admit(run_of(pod(), tmp_path))
    [event] = core.events
    assert (event["reason"], event["type"]) == ("FailedMount", "Warning")
    assert event["message"] == (
        "Unable to attach or mount volumes: unmounted volumes=[home], unattached volumes=[home], "
        "failed to process volumes=[home]: error processing PVC jupyter-users/claim-carol: "
        "failed to fetch PVC from API server: Forbidden (403)"
    )


async def test_a_pod_deleted_while_it_waits_is_not_failed(
    tmp_path: Path, api: client.ApiClient
) -> None:
    core = RefusingCore(tmp_path / "volume", refusals=10**9)
    agent = agent_with(core, tmp_path, api)
    run = run_of(pod(), tmp_path)
    admitting = asyncio.create_task(agent._admit(run))
    while core.reads["pvc"] < 3:
        await asyncio.sleep(0)
    run.stop_requested.set()
    assert await admitting is False
    assert run.phase == "Pending"
    assert run.reason is None


async def test_only_the_pods_deadline_fails_it(tmp_path: Path, api: client.ApiClient) -> None:
    core = RefusingCore(tmp_path / "volume", refusals=10**9)
    run = run_of(pod(deadline=60), tmp_path)
    run.started -= 61  # bound to the node 61 s ago
    assert await agent_with(core, tmp_path, api)._admit(run) is False
    assert (run.phase, run.reason, run.message) == (
        "Failed",
        "DeadlineExceeded",
        "Pod was active on the node longer than the specified deadline",
    )
    assert core.statuses[-1]["phase"] == "Failed"


async def test_a_secret_read_refused_at_first_keeps_the_container_waiting(
    tmp_path: Path, api: client.ApiClient
) -> None:
    core = RefusingCore(tmp_path / "volume", refusals=2)
    agent = agent_with(core, tmp_path, api)
    run = run_of(pod(), tmp_path)
    [container] = run.containers
    configured = await agent._configure(run, container)
    assert configured is not None
    env, argv = configured
    assert env["TOKEN"] == "s3cret"
    assert argv == ["true"]
    # never terminated (a restartPolicy Never pod would have failed): Waiting, then tried again
    assert container.exit_code is None
    waiting = [s["containerStatuses"][0]["state"] for s in core.statuses]
    assert waiting[0] == {
        "waiting": {
            "reason": "CreateContainerConfigError",
            "message": "secret tokens: Forbidden",
        }
    }
    assert [e["message"] for e in core.events] == ["Error: secret tokens: Forbidden"] * 2


async def test_a_spec_the_agent_cannot_run_fails_at_once(
    tmp_path: Path, api: client.ApiClient
) -> None:
    spec = pod()
    spec["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "settings"}}]
    run = run_of(spec, tmp_path)
    [container] = run.containers
    assert (
        await agent_with(RefusingCore(tmp_path, 0), tmp_path, api)._configure(run, container)
        is None
    )
    assert (container.exit_code, container.reason) == (128, "CreateContainerConfigError")

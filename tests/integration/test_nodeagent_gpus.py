"""Pods on local-0 get only the simulated GPUs Kubernetes gave them, and share one node-wide GPU
state: a neighbour on a time-sliced GPU shows as other memory; a HAMi fraction shows its cap.

Each pod runs a small HTTP server that reads NVML through the real bindings over the fake
library, built from its environment as the server extension builds it, and holds simulated GPU
memory on request."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import pytest

from devcluster.testing import Cluster, core, on_local_node, wait_for
from jupyter_gpuaas.gpu.spec import GiB, parse_devices

pytestmark = pytest.mark.integration

NS = "jupyter-users"
PORT = 18090

# GET /read: what NVML shows this pod; GET /hold?bytes=N: hold N bytes on its GPU 0.
PROBE = """
import http.server, json, os, urllib.parse as u
from jupyter_gpuaas.gpu import simulate
from jupyter_gpuaas.gpu.fake_nvml import from_environment
from jupyter_gpuaas.gpu.hami import hami_env
from jupyter_gpuaas.gpu.nvml import NvmlReader
from jupyter_gpuaas.gpu.simulate import DriverState
lib, _ = from_environment('', simulate.state_dir(), DriverState(), os.environ)
lib.refresh = 0
reader = NvmlReader(lib, hami=hami_env(os.environ))
held = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = u.urlsplit(self.path)
        if url.path == '/hold':
            held.append(simulate.hold(int(u.parse_qs(url.query)['bytes'][0])))
            body = {'held': held[-1].device}
        else:
            r = reader.read()
            body = {
                'pid': os.getpid(),
                'home': sorted(os.listdir(os.environ['HOME'])),
                'env': {k: v for k, v in os.environ.items() if k.startswith(('NVIDIA_', 'CUDA_'))},
                'devices': [
                    {'uuid': d.uuid, 'index': d.index, 'parent': d.parent_uuid,
                     'total': d.memory_total, 'used': d.memory_used, 'cap': d.memory_cap,
                     'cap_source': d.cap_source}
                    for d in r.devices
                ],
                'processes': [[p.device_uuid, p.pid, p.used_memory] for p in r.processes],
            }
        data = json.dumps(body).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(data)
    def log_message(self, *args):
        pass
http.server.HTTPServer((os.environ['POD_IP'], PORT), H).serve_forever()
"""


def gpu_pod(
    name: str, limits: dict[str, Any], annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # No queue name: Kueue leaves these alone; they test the node agent, not quotas.
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {
            "automountServiceAccountToken": False,
            **on_local_node(),
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "probe",
                    "image": "python:3.11",
                    "command": ["python3", "-c", PROBE.replace("PORT", str(PORT))],
                    "env": [
                        {
                            "name": "POD_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        }
                    ],
                    "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1},
                    "resources": {
                        "requests": {"cpu": "50m", "memory": "64Mi"},
                        "limits": {k: str(v) for k, v in limits.items()},
                    },
                }
            ],
        },
    }


def get(ip: str, path: str) -> Any:
    with urllib.request.urlopen(f"http://{ip}:{PORT}{path}", timeout=10) as resp:
        return json.loads(resp.read())


class Pods:
    def __init__(self, v1: Any) -> None:
        self.v1 = v1
        self.names: list[str] = []

    async def start(
        self, name: str, limits: dict[str, Any], annotations: dict[str, str] | None = None
    ) -> str:
        await self.v1.create_namespaced_pod(NS, gpu_pod(name, limits, annotations))
        self.names.append(name)

        async def ready() -> str | None:
            pod = await self.v1.read_namespaced_pod(name, NS)
            conds = pod.status.conditions or []
            if pod.status.phase == "Failed":
                pytest.fail(f"{name} failed: {pod.status.reason}: {pod.status.message}")
            ok = any(c.type == "Ready" and c.status == "True" for c in conds)
            return str(pod.status.pod_ip) if ok else None

        return await wait_for(f"{name} Ready", ready, 90)


@pytest.fixture
async def pods(cluster: Cluster) -> AsyncIterator[Pods]:
    async with cluster.api("jupyterhub", "hub") as hub:
        started = Pods(core(hub))
        try:
            yield started
        finally:
            for name in started.names:
                await started.v1.delete_namespaced_pod(name, NS, grace_period_seconds=0)

            async def gone() -> bool:
                left = {p.metadata.name for p in (await started.v1.list_namespaced_pod(NS)).items}
                return not left & set(started.names)

            await wait_for("probe pods gone", gone, 60)


async def local_gpus(cluster: Cluster) -> list[Any]:
    async with cluster.api("jupyterhub", "hub") as hub:
        nodes = await core(hub).list_node(label_selector="gpuaas.dev/pool=local")
    assert nodes.items, "no node of pool local"
    from devcluster.nodes import agent_node, load_nodes

    agent = agent_node(load_nodes())
    assert agent is not None
    assert agent.simulated_gpus
    return parse_devices(agent.simulated_gpus)


async def test_two_pods_each_see_only_their_own_devices(cluster: Cluster, pods: Pods) -> None:
    gpus = await local_gpus(cluster)
    whole = next(g for g in gpus if g.sharing == "none" and not g.mig)
    migged = next(g for g in gpus if g.mig)
    mig_3g = next(m for m in migged.mig if m.profile == "3g.20gb")
    ip_a = await pods.start("gpus-whole", {"nvidia.com/gpu": 1})
    ip_b = await pods.start("gpus-mig", {"nvidia.com/mig-3g.20gb": 1})

    a, b = get(ip_a, "/read"), get(ip_b, "/read")
    assert a["env"]["NVIDIA_VISIBLE_DEVICES"] == whole.uuid
    assert [(d["index"], d["uuid"], d["total"]) for d in a["devices"]] == [
        (0, whole.uuid, 40 * GiB)
    ]
    assert b["env"]["NVIDIA_VISIBLE_DEVICES"] == mig_3g.uuid
    assert [(d["uuid"], d["parent"]) for d in b["devices"]] == [
        (migged.uuid, None),
        (mig_3g.uuid, migged.uuid),
    ]
    # The pod's home holds the user's files only: the agent's logs and tmp sit beside it.
    assert "logs" not in a["home"]
    assert "tmp" not in a["home"]

    # B's memory is on B's device; A never sees it.
    get(ip_b, f"/hold?bytes={2 * GiB}")
    a, b = get(ip_a, "/read"), get(ip_b, "/read")
    assert [d["used"] for d in a["devices"]] == [0]
    assert a["processes"] == []
    assert [(u, pid, size) for u, pid, size in b["processes"]] == [(mig_3g.uuid, b["pid"], 2 * GiB)]


async def test_a_time_sliced_neighbour_is_other_memory(cluster: Cluster, pods: Pods) -> None:
    gpus = await local_gpus(cluster)
    sliced = next(g for g in gpus if g.sharing == "time-slicing")
    ip_a = await pods.start("gpus-share-a", {"nvidia.com/gpu.shared": 1})
    ip_b = await pods.start("gpus-share-b", {"nvidia.com/gpu.shared": 1})
    get(ip_a, f"/hold?bytes={1 * GiB}")
    get(ip_b, f"/hold?bytes={3 * GiB}")

    a = get(ip_a, "/read")
    assert a["env"]["NVIDIA_VISIBLE_DEVICES"] == sliced.uuid
    (device,) = a["devices"]
    # Used memory is the whole GPU's (both pods); the process list is A's alone (driver 565
    # inside a PID namespace), so B's 3 GiB is memory of no process A can see: "other".
    assert device["used"] == 4 * GiB
    assert a["processes"] == [[sliced.uuid, a["pid"], 1 * GiB]]


async def test_a_hami_fraction_sees_its_cap(cluster: Cluster, pods: Pods) -> None:
    gpus = await local_gpus(cluster)
    hami = next(g for g in gpus if g.sharing == "hami")
    limits = {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 6144, "nvidia.com/gpucores": 25}
    # HAMi's scheduler places them (its default spread would pick an H100): on the L4.
    l4 = {"nvidia.com/use-gputype": "L4"}
    ip_a = await pods.start("gpus-frac-a", limits, l4)
    ip_b = await pods.start("gpus-frac-b", limits, l4)
    get(ip_b, f"/hold?bytes={4 * GiB}")
    get(ip_a, f"/hold?bytes={1 * GiB}")

    a = get(ip_a, "/read")
    assert a["env"]["NVIDIA_VISIBLE_DEVICES"] == hami.uuid
    assert a["env"]["CUDA_DEVICE_MEMORY_LIMIT_0"] == "6144m"
    assert a["env"]["CUDA_DEVICE_SM_LIMIT"] == "25"
    (device,) = a["devices"]
    # HAMi-core's view: the cap as total, this pod's use only, never the neighbour's 4 GiB.
    assert (device["total"], device["used"], device["cap"], device["cap_source"]) == (
        6 * GiB,
        1 * GiB,
        6 * GiB,
        "CUDA_DEVICE_MEMORY_LIMIT_0",
    )

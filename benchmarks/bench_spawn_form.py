"""Spawn form render time: GPUaaSSpawner vs KubeSpawner's own form, same process, same run.

GPUaaSSpawner: 50 teams (ClusterQueue + LocalQueue each), 20 offerings allowed to every team,
2,000 running pods' Workloads in the Kueue caches (a StaticKueueView: the same in-memory
QueueState the watches keep). KubeSpawner: a callable ``profile_list`` over the same 50 teams x
20 profiles (each with overrides and an image choice) that picks the user's team and counts the
same 2,000 running pods per profile from memory (what an admin's callable needs to show usage).
Both are rendered through ``Spawner.get_options_form()``, as JupyterHub does for /hub/spawn.

    python -m benchmarks.bench_spawn_form [--renders 300]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

TEAMS = 50
OFFERINGS = 20
PODS = 2000
FLAVORS = [
    ("h100", "nvidia.com/gpu"),
    ("a100-mig", "nvidia.com/mig-1g.5gb"),
    ("a100-mig", "nvidia.com/mig-3g.20gb"),
    ("l4-shared", "nvidia.com/gpu.shared"),
]
KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: none}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


class _Named:
    def __init__(self, name: str) -> None:
        self.name = name


class User:
    def __init__(self, name: str, groups: list[str]) -> None:
        self.name, self.id, self.url = name, 1, f"/user/{name}/"
        self.groups = [_Named(g) for g in groups]
        self.spawners: dict[str, Any] = {}


def offerings() -> list[dict[str, Any]]:
    out = []
    for i in range(OFFERINGS):
        flavor, resource = FLAVORS[i % len(FLAVORS)]
        kind = {"nvidia.com/gpu": "gpu", "nvidia.com/gpu.shared": "shared"}.get(resource, "mig")
        o: dict[str, Any] = {
            "slug": f"offer-{i:02d}",
            "display_name": f"Offering {i} ({flavor})",
            "description": "Benchmark offering",
            "kind": kind,
            "resources": {resource: 1},
            "flavor": flavor,
            "node_selector": {"gpuaas.dev/pool": flavor},
            "gpu_model": "NVIDIA A100-SXM4-40GB",
            "gpu_memory": "20Gi",
            "max_count": 2 if kind == "gpu" else 1,
        }
        if kind != "gpu":
            o["gpu_equivalents"] = "1/7" if kind == "mig" else "1/4"
        out.append(o)
    return out


def teams() -> list[dict[str, Any]]:
    return [
        {
            "name": f"team-{t:02d}",
            "groups": [f"team-{t:02d}"],
            "local_queue": f"team-{t:02d}",
            "offerings": [f"offer-{i:02d}" for i in range(OFFERINGS)],
            "max_gpu_servers_per_user": 2,
        }
        for t in range(TEAMS)
    ]


def kueue_objects() -> dict[str, Any]:
    cqs, lqs, wls = [], [], []
    per_team = PODS // TEAMS
    for t in range(TEAMS):
        name = f"team-{t:02d}"
        flavors: dict[str, list[dict[str, Any]]] = {}
        for flavor, resource in FLAVORS:
            flavors.setdefault(flavor, []).append(
                {"name": resource, "nominalQuota": "100", "borrowingLimit": "0"}
            )
        usage = [
            {"name": f, "resources": [{"name": r["name"], "total": "40"} for r in rs]}
            for f, rs in flavors.items()
        ]
        cqs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": f"{name}-notebooks"},
                "spec": {
                    "cohortName": "gpuaas",
                    "resourceGroups": [
                        {
                            "coveredResources": [r for _, r in FLAVORS],
                            "flavors": [{"name": f, "resources": rs} for f, rs in flavors.items()],
                        }
                    ],
                },
                "status": {
                    "flavorsReservation": usage,
                    "flavorsUsage": usage,
                    "pendingWorkloads": 3,
                    "admittedWorkloads": per_team,
                },
            }
        )
        lqs.append(
            {
                "metadata": {"name": name, "namespace": "jupyter-users"},
                "spec": {"clusterQueue": f"{name}-notebooks"},
            }
        )
        for p in range(per_team):
            pod = f"jupyter-{name}-u{p}"
            wls.append(
                {
                    "metadata": {
                        "name": f"pod-{pod}-abcde",
                        "namespace": "jupyter-users",
                        "ownerReferences": [{"kind": "Pod", "name": pod, "uid": f"uid-{t}-{p}"}],
                    },
                    "spec": {"queueName": name},
                    "status": {
                        "conditions": [{"type": "Admitted", "status": "True"}],
                        "admission": {"clusterQueue": f"{name}-notebooks"},
                    },
                }
            )
    return {"cluster_queues": cqs, "local_queues": lqs, "workloads": wls}


def running_pods() -> list[dict[str, Any]]:
    return [
        {
            "metadata": {"labels": {"team": f"team-{i % TEAMS:02d}", "offering": i % OFFERINGS}},
            "status": {"phase": "Running"},
        }
        for i in range(PODS)
    ]


def make_gpuaas(user: User) -> Any:
    from gpuaas_spawner.spawner import GPUaaSSpawner
    from jupyter_gpuaas.hub.kueue_watch import StaticKueueView

    view = StaticKueueView(**kueue_objects())
    spawner = GPUaaSSpawner(
        _mock=True,
        user=user,
        namespace="jupyter-users",
        offerings=offerings(),
        tenants=teams(),
        kueue_view=view,
    )
    user.spawners[""] = spawner
    return spawner


def make_kubespawner(user: User) -> Any:
    from kubespawner import KubeSpawner

    pods = running_pods()
    table = {
        t["name"]: [
            {
                "display_name": o["display_name"],
                "slug": o["slug"],
                "description": o["description"],
                "kubespawner_override": {
                    "extra_resource_limits": o["resources"],
                    "node_selector": o["node_selector"],
                    "extra_labels": {"kueue.x-k8s.io/queue-name": t["local_queue"]},
                },
                "profile_options": {
                    "image": {
                        "display_name": "Image",
                        "choices": {
                            "scipy": {"display_name": "SciPy", "kubespawner_override": {}},
                            "torch": {"display_name": "PyTorch", "kubespawner_override": {}},
                        },
                    }
                },
            }
            for o in offerings()
        ]
        for t in teams()
    }

    def profile_list(spawner: Any) -> list[dict[str, Any]]:
        groups = {g.name for g in spawner.user.groups}
        mine = [p for team, ps in table.items() if team in groups for p in ps]
        used: dict[int, int] = {}
        for pod in pods:  # what an admin's callable needs for "N running"
            if pod["metadata"]["labels"]["team"] in groups:
                i = pod["metadata"]["labels"]["offering"]
                used[i] = used.get(i, 0) + 1
        return [
            dict(p, description=f"{p['description']} ({used.get(i, 0)} running)")
            for i, p in enumerate(mine)
        ]

    spawner = KubeSpawner(_mock=True, user=user, namespace="jupyter-users")
    spawner.profile_list = profile_list
    return spawner


async def timed(render: Callable[[], Coroutine[Any, Any, str]], n: int) -> list[float]:
    for _ in range(10):  # warm-up (templates compiled, catalog checked)
        await render()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        html = await render()
        out.append((time.perf_counter() - t0) * 1000)
        assert html
    return out


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1]


async def run(n: int) -> int:
    gpuaas = make_gpuaas(User("alice", ["team-07"]))
    kube = make_kubespawner(User("bob", ["team-07"]))
    html = await gpuaas.get_options_form()
    assert html.count('class="gpuaas-offering ') == OFFERINGS, "offerings missing"
    assert (await kube.get_options_form()).count('name="profile"') >= OFFERINGS
    # interleaved rounds so both see the same machine load
    g: list[float] = []
    k: list[float] = []
    for _ in range(5):
        g += await timed(gpuaas.get_options_form, n // 5)
        k += await timed(kube.get_options_form, n // 5)
    print(f"spawn form render, {TEAMS} teams, {OFFERINGS} offerings, {PODS} running pods, n={n}")
    print(f"{'form':<38} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8}")
    for name, v in (
        ("GPUaaSSpawner (Kueue caches)", g),
        ("KubeSpawner (callable profile_list)", k),
    ):
        print(f"{name:<38} {pct(v, 50):8.2f} {pct(v, 95):8.2f} {max(v):8.2f}")
    ratio = pct(g, 95) / pct(k, 95)
    print(f"p95 ratio GPUaaS / KubeSpawner: {ratio:.2f} (aim: <= 1.2, and p95 <= 25 ms)")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--renders", type=int, default=300, help="renders per form (default 300)")
    args = parser.parse_args(argv)
    repo = Path(__file__).resolve().parent.parent
    for extra in (repo, repo / "spawner"):
        if str(extra) not in sys.path:
            sys.path.insert(0, str(extra))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "kubeconfig"
        cfg.write_text(KUBECONFIG)  # KubeSpawner's constructor loads one; never contacted
        os.environ["KUBECONFIG"] = str(cfg)
        return asyncio.run(run(args.renders))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The GPU console at an organisation's scale: 50 teams, 2,000 GPU workbenches, 1,000 GPUs.
Each console API's latency, and in headless Chromium the time from navigation to each view
drawn.

The organisation goes through the service's own code, as the service builds it: per team a
notebook and a training ClusterQueue in one cohort, a LocalQueue each (read by
``jupyter_gpuaas.hub.kueue_watch.StaticKueueView``, the same parsed ``QueueState`` the watch caches
keep); 2,000 notebook pods on 125 nodes of 8 GPUs (``h100``: whole GPUs, ``a100-mig``: MIG
1g.10gb slices, ``l4-shared``: four shares a GPU), each with its pod Workload; 100 admitted
training Workloads and 20 queued ones; an activity report per server (60 % idle, 30 % busy,
10 % none); each user's recent peaks and a catalog (the sizing view). Then two real
``ReclaimLoop`` cycles with the ``ConsoleState`` listening, and the service's own tornado app
(``make_app``: the real handlers, the real JSON) on a loopback port, behind the real
``HubOAuth``. Stand-ins, off the measured path: the hub's and Kubernetes' answers to the loop
(in memory, as the watches would hold them), the hub's ``GET /hub/api/user`` for the token
(asked once, then cached by ``HubOAuth``), and a Prometheus on loopback that answers every range
query with one series per team at the step asked (50 series, more than the history keeps).

API: ``--requests`` sequential GETs of each endpoint the page reads (``api/console``, also for
one team as a team lead's page asks; ``api/console/gpus``; ``api/console/fit``;
``api/console/history`` for each range the page offers) over one kept-alive connection, gzip
accepted and decompressed as a browser does; p50, p95, max. The history's answers are checked
for their bounds (points per series, series per chart).

Browser: ``--loads`` navigations of the page in headless Chromium (Playwright, as the e2e
tests), each timed from navigation start to each view drawn: the DOM holding it (a
MutationObserver installed before the page's scripts) and the next frame painted after it.
The page lays out and paints what is near the screen (console.css: ``content-visibility:
auto`` on each team and each drawn section), so on each loaded page every view is then
scrolled into view, top to bottom, and timed from the scroll to the frame painted: what an
admin waits for a view below the first screen. Then, on the loaded page, the "Every GPU"
filters (a team, a state, back to all) from the change to the frame painted, and the longest
main-thread task while the page polls (every 5 s) for ``--steady`` seconds.

    python -m benchmarks.bench_console_views [--requests 200] [--loads 5] [--steady 12]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import secrets
import socket
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TEAMS = 50
NODES_PER_POOL = {"h100": 50, "a100-mig": 40, "l4-shared": 35}
GPUS_PER_NODE = 8
WORKBENCHES = 2000
TRAINING_PER_TEAM = 2
QUEUED_TEAMS = 20
NS = "jupyter-users"
PREFIX = "/services/gpuaas/"
BUILT = REPO / "culler/gpuaas_service/console/static/js/culler/gpuaas_service/console/src/main.js"
RANGES = ("1h", "6h", "1d", "7d")
TARGET_API_MS = 100.0
TARGET_VIEW_MS = 1000.0


@dataclass(frozen=True)
class Pool:
    """A GPU pool: its ResourceFlavor, the resource a workbench asks for, per GPU."""

    flavor: str
    resource: str
    per_gpu: int
    offering: str
    kind: str
    workbenches: int
    per_node: int


POOLS = (
    Pool("h100", "nvidia.com/gpu", 1, "h100", "gpu", 300, 6),
    Pool("a100-mig", "nvidia.com/mig-1g.10gb", 7, "mig-1g", "mig", 1000, 25),
    Pool("l4-shared", "nvidia.com/gpu.shared", 4, "l4-share", "shared", 700, 20),
)
POLICY = {
    "report_stale_after": "10m",
    "policies": [
        {
            "name": "gpus",
            "match": {"kinds": ["gpu", "mig", "shared"]},
            "idle_after": "30m",
            "warn_before": "10m",
            "reclaim": "when-queued",
            "max_idle": "8h",
        }
    ],
}


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def team_name(t: int) -> str:
    return f"team-{t:02d}"


# --------------------------------------------------------------------------- the organisation


@dataclass
class Organisation:
    pods: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[dict[str, Any]] = field(default_factory=list)
    cluster_queues: list[dict[str, Any]] = field(default_factory=list)
    local_queues: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    job_pods: list[dict[str, Any]] = field(default_factory=list)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    peaks_mib: dict[str, tuple[int, ...]] = field(default_factory=dict)


def workbench_pod(i: int, user: str, team: str, pool: Pool, node: str, started: datetime) -> Any:
    name = f"jupyter-{user}"
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "creationTimestamp": iso(started),
            "labels": {
                "component": "singleuser-server",
                "kueue.x-k8s.io/queue-name": team,
                "gpuaas.jupyter.org/team": team,
                "gpuaas.jupyter.org/offering": pool.offering,
            },
            "annotations": {"hub.jupyter.org/username": user, "hub.jupyter.org/servername": ""},
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "notebook",
                    "resources": {
                        "requests": {pool.resource: "1", "cpu": "1", "memory": "8Gi"},
                        "limits": {pool.resource: "1"},
                    },
                    "env": [{"name": "GPUAAS_OFFERING_KIND", "value": pool.kind}],
                }
            ],
        },
        "status": {
            "phase": "Running",
            "startTime": iso(started),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def admitted(at: datetime) -> list[dict[str, str]]:
    return [
        {"type": t, "status": "True", "lastTransitionTime": iso(at)}
        for t in ("QuotaReserved", "Admitted")
    ]


def pod_workload(pod: Mapping[str, Any], team: str, pool: Pool, at: datetime) -> dict[str, Any]:
    meta = pod["metadata"]
    spec = {"containers": [{"name": "notebook", "resources": {"requests": {pool.resource: "1"}}}]}
    return {
        "metadata": {
            "name": f"pod-{meta['name']}-0a1b2",
            "namespace": NS,
            "uid": f"wl-{meta['uid']}",
            "creationTimestamp": iso(at),
            "ownerReferences": [{"kind": "Pod", "name": meta["name"], "uid": meta["uid"]}],
        },
        "spec": {
            "queueName": team,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": spec}}],
        },
        "status": {
            "conditions": admitted(at),
            "admission": {
                "clusterQueue": f"{team}-notebooks",
                "podSetAssignments": [{"name": "main", "flavors": {pool.resource: pool.flavor}}],
            },
        },
    }


def training_workload(team: str, name: str, at: datetime, *, queued: bool) -> dict[str, Any]:
    spec = {"containers": [{"name": "t", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "couldn't assign flavors to pod set main: insufficient quota",
                "lastTransitionTime": iso(at),
            }
        ]
    }
    if not queued:
        status = {
            "conditions": admitted(at),
            "admission": {
                "clusterQueue": f"{team}-training",
                "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "h100"}}],
            },
        }
    return {
        "metadata": {
            "name": name,
            "namespace": team,
            "uid": f"uid-{team}-{name}",
            "creationTimestamp": iso(at),
            "labels": {"gpuaas.jupyter.org/user": f"lead-{team}"},
            "ownerReferences": [{"kind": "Job", "name": name, "uid": f"job-uid-{team}-{name}"}],
        },
        "spec": {
            "queueName": "training",
            "priority": 100,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": spec}}],
        },
        "status": status,
    }


def training_pod(workload: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The pod of a training Workload (the Workload's owner is the pod's), on ``node``."""
    meta = workload["metadata"]
    return {
        "metadata": {
            "name": f"{meta['name']}-0",
            "namespace": meta["namespace"],
            "uid": f"pod-{meta['uid']}",
            "ownerReferences": [{"kind": "Job", "name": meta["name"], "uid": f"job-{meta['uid']}"}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "t", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Running"},
    }


def cluster_queue(name: str, quotas: Mapping[Pool, int], used: Mapping[Pool, int]) -> Any:
    def resources(amounts: Mapping[Pool, int], key: str) -> list[dict[str, Any]]:
        return [
            {"name": p.flavor, "resources": [{"name": p.resource, key: str(amounts.get(p, 0))}]}
            for p in quotas
        ]

    return {
        "metadata": {"name": name},
        "spec": {
            "cohortName": "gpuaas",
            "resourceGroups": [
                {
                    "coveredResources": [p.resource for p in quotas],
                    "flavors": [
                        {
                            "name": p.flavor,
                            "resources": [{"name": p.resource, "nominalQuota": str(q)}],
                        }
                        for p, q in quotas.items()
                    ],
                }
            ],
        },
        "status": {
            "flavorsReservation": resources(used, "total"),
            "flavorsUsage": resources(used, "total"),
        },
    }


def report(now: datetime, i: int) -> dict[str, Any] | None:
    """Server ``i``'s activity report: 60 % idle (10 min to 5 h), 30 % busy, 10 % none."""
    if i % 10 == 9:
        return None
    busy = i % 10 >= 6
    since = now - timedelta(minutes=10 + (i * 37) % 290)
    return {
        "sampled_at": now.isoformat(),
        "source": "simulated",
        "kernels": [
            {
                "kernel_id": "k",
                "execution_state": "busy" if busy else "idle",
                "last_activity": (now if busy else since).isoformat(),
            }
        ],
        "terminals": [],
        "gpu_memory": (1 + i % 9) << 30 if busy else (i % 3) << 28,
        "gpu_utilization": [],
        "idle_since": None if busy else since.isoformat(),
    }


def organisation(now: datetime) -> Organisation:
    org = Organisation()
    counts: dict[str, dict[Pool, int]] = {team_name(t): {} for t in range(TEAMS)}
    i = 0
    for pool in POOLS:
        for j in range(pool.workbenches):
            team = team_name(i % TEAMS)
            user = f"user{i:04d}"
            node = f"{pool.flavor}-{j // pool.per_node:02d}"
            started = now - timedelta(minutes=20 + (i * 53) % 1400)
            pod = workbench_pod(i, user, team, pool, node, started)
            org.pods.append(pod)
            org.workloads.append(pod_workload(pod, team, pool, started))
            counts[team][pool] = counts[team].get(pool, 0) + 1
            org.groups.setdefault(team, []).append(user)
            payload = report(now, i)
            if payload is not None:
                org.reports[user] = payload
            org.peaks_mib[user] = tuple(1024 * (1 + (i + k) % 30) for k in range(3))
            i += 1
    for t in range(TEAMS):
        team = team_name(t)
        used = counts[team]
        org.cluster_queues.append(
            cluster_queue(
                f"{team}-notebooks", {p: max(used.get(p, 0), 4 * p.per_gpu) for p in POOLS}, used
            )
        )
        h100 = POOLS[0]
        org.cluster_queues.append(
            cluster_queue(f"{team}-training", {h100: TRAINING_PER_TEAM}, {h100: TRAINING_PER_TEAM})
        )
        org.local_queues += [
            {"metadata": {"name": name, "namespace": ns}, "spec": {"clusterQueue": queue}}
            for name, ns, queue in (
                (team, NS, f"{team}-notebooks"),
                ("training", team, f"{team}-training"),
            )
        ]
        for k in range(TRAINING_PER_TEAM):
            at = now - timedelta(hours=1 + k)
            job = training_workload(team, f"train-{k}", at, queued=False)
            org.workloads.append(job)
            org.job_pods.append(training_pod(job, f"h100-{t:02d}"))
        if t < QUEUED_TEAMS:
            at = now - timedelta(minutes=5 + t)
            org.workloads.append(training_workload(team, "train-queued", at, queued=True))
    for pool in POOLS:
        for n in range(NODES_PER_POOL[pool.flavor]):
            amount = str(GPUS_PER_NODE * pool.per_gpu)
            org.nodes.append(
                {
                    "metadata": {
                        "name": f"{pool.flavor}-{n:02d}",
                        "labels": {"gpuaas.dev/pool": pool.flavor},
                    },
                    "spec": {},
                    "status": {"allocatable": {pool.resource: amount, "cpu": "96"}},
                }
            )
    return org


def catalog_data() -> dict[str, Any]:
    offerings = [
        {
            "slug": p.offering,
            "display_name": f"{p.offering} ({p.flavor})",
            "kind": p.kind,
            "resources": {p.resource: 1},
            "flavor": p.flavor,
            "gpu_memory": {"h100": "80Gi", "a100-mig": "10Gi", "l4-shared": "6Gi"}[p.flavor],
            **({"gpu_equivalents": f"1/{p.per_gpu}"} if p.per_gpu > 1 else {}),
        }
        for p in POOLS
    ]
    tenants = [
        {
            "name": team_name(t),
            "groups": [team_name(t)],
            "local_queue": team_name(t),
            "offerings": [p.offering for p in POOLS],
        }
        for t in range(TEAMS)
    ]
    return {"offerings": offerings, "tenants": tenants}


# --------------------------------------------------------------------------- the stand-ins


class OrgHub:
    """The hub's answers to the reclaim loop: every user has their server running."""

    def __init__(self, org: Organisation, started: datetime) -> None:
        self.groups = org.groups
        self.team = {u: g for g, users in org.groups.items() for u in users}
        self.started = iso(started)
        self.stopped: list[tuple[str, str]] = []

    async def user(self, name: str) -> dict[str, Any] | None:
        server = {"name": "", "ready": True, "pending": None, "started": self.started}
        return {"name": name, "groups": [self.team.get(name, "")], "servers": {"": server}}

    async def group_members(self) -> dict[str, list[str]]:
        return self.groups

    async def stop_server(self, user: str, server: str) -> int:
        self.stopped.append((user, server))
        return 202


class OrgKube:
    """Kubernetes' answers to the loop: the pods' annotations patched in memory."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = {p["metadata"]["name"]: p for p in pods}
        self.configmaps: dict[tuple[str, str], str] = {}
        self.events = 0

    async def list_pods(self, namespace: str) -> list[dict[str, Any]]:
        return list(self.pods.values())

    async def annotate(self, pod: Any, annotations: Mapping[str, str | None]) -> None:
        ann = self.pods[pod.name]["metadata"]["annotations"]
        for k, v in annotations.items():
            if v is None:
                ann.pop(k, None)
            else:
                ann[k] = v

    async def event(self, pod: Any, reason: str, message: str, type_: str, *, at: Any) -> None:
        self.events += 1

    async def flavor_taints(self) -> dict[str, list[dict[str, str]]]:
        return {}

    async def flavor_labels(self) -> dict[str, dict[str, str]]:
        return {p.flavor: {"gpuaas.dev/pool": p.flavor} for p in POOLS}

    async def read_state(self, namespace: str, name: str) -> str | None:
        return self.configmaps.get((namespace, name))

    async def write_state(self, namespace: str, name: str, text: str) -> None:
        self.configmaps[(namespace, name)] = text


def org_view(org: Organisation) -> Any:
    """The Kueue caches as the service's watch holds them: parsed once, Workloads by owner."""
    from jupyter_gpuaas.core.kueue import WorkloadInfo
    from jupyter_gpuaas.hub.kueue_watch import StaticKueueView

    class OrgView(StaticKueueView):
        generation = 1
        """Constant: nothing changes during the run (the console keeps what it derived)."""

        def __init__(self) -> None:
            super().__init__(
                cluster_queues=org.cluster_queues,
                local_queues=org.local_queues,
                workloads=org.workloads,
            )
            self._by_owner = {w.owner_uid: w for w in self._workloads if w.owner_uid}
            self._raw: dict[str, list[Mapping[str, Any]]] = {}
            for obj in org.workloads:
                self._raw.setdefault(obj["metadata"]["namespace"], []).append(obj)

        def workload_for_pod(
            self, namespace: str, pod_uid: str, pod_name: str
        ) -> WorkloadInfo | None:
            return self._by_owner.get(pod_uid)

        def workloads(self, namespace: str) -> list[Mapping[str, Any]]:
            return list(self._raw.get(namespace, []))

        def pending_items(self, namespace: str, local_queue: str) -> None:
            return None

    return OrgView()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def token_hub(token: str) -> Any:
    """The hub's ``GET /hub/api/user`` for the console token (a service with the scope)."""
    from tornado import web

    model = {
        "kind": "service",
        "name": "ops",
        "scopes": ["custom:gpuaas:console", "access:services!service=gpuaas"],
    }

    class WhoAmI(web.RequestHandler):
        def get(self) -> None:
            given = self.request.headers.get("Authorization", "").split()[-1:]
            if given != [token]:
                raise web.HTTPError(403)
            self.finish(json.dumps(model))

    return web.Application([(r"/hub/api/user", WhoAmI)])


BY = re.compile(r"\bby \((\w+)\)")


def fake_prometheus() -> Any:
    """``/api/v1/query_range``: a series per team (50) or per result, every step asked (each
    answer made once, then served again: its cost is not the service's)."""
    from tornado import web

    made: dict[tuple[str, float, float, float], bytes] = {}

    class QueryRange(web.RequestHandler):
        def get(self) -> None:
            args = parse_qs(urlparse(self.request.uri or "").query)
            query = args["query"][0]
            start, end, step = (float(args[k][0]) for k in ("start", "end", "step"))
            key = (query, start, end, step)
            if key in made:
                self.finish(made[key])
                return
            found = BY.search(query)
            by = found.group(1) if found else "team"
            names = (
                [team_name(t) for t in range(TEAMS)]
                if by == "team"
                else ["admitted", "timed-out", "pending"]
            )
            count = int((end - start) // step) + 1
            result = []
            for n, name in enumerate(names):
                values = [
                    [start + k * step, f"{(n + k) % 17 / 4:g}"]
                    for k in range(count)
                    if (n + k) % 11  # a gap now and then, as scrapes have
                ]
                result.append({"metric": {by: name}, "values": values})
            answer = {"status": "success", "data": {"resultType": "matrix", "result": result}}
            made[key] = json.dumps(answer).encode()
            self.finish(made[key])

    return web.Application([(r"/api/v1/query_range", QueryRange)])


# --------------------------------------------------------------------------- measuring


def serve_stand_ins(token: str, ports: tuple[int, int]) -> None:
    """The hub's token lookup and the Prometheus, each on its port, until killed."""
    from tornado.httpserver import HTTPServer

    async def listen() -> None:
        HTTPServer(token_hub(token)).listen(ports[0], "127.0.0.1")
        HTTPServer(fake_prometheus()).listen(ports[1], "127.0.0.1")
        await asyncio.Event().wait()

    asyncio.run(listen())


def start_stand_ins(token: str) -> tuple[Any, tuple[int, int]]:
    """:func:`serve_stand_ins` in a process of its own (their work is not the service's, and
    neither waits behind the other); the process and the two ports, once both answer."""
    import multiprocessing

    ports = (free_port(), free_port())
    process = multiprocessing.get_context("spawn").Process(
        target=serve_stand_ins, args=(token, ports), daemon=True
    )
    process.start()
    deadline = time.monotonic() + 60
    for port in ports:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or not process.is_alive():
                    raise RuntimeError("the stand-ins did not start") from None
                time.sleep(0.1)
    return process, ports


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass
class Served:
    base: str
    token: str


async def api_latencies(served: Served, requests: int) -> tuple[list[list[str]], list[str]]:
    """Each endpoint's figures (a table's rows) and the history's bounds (lines)."""
    from tornado.httpclient import AsyncHTTPClient

    client = AsyncHTTPClient(force_instance=True)
    headers = {"Authorization": f"token {served.token}", "Accept-Encoding": "gzip"}
    paths = [
        "api/console",
        "api/console?team=team-07",
        "api/console/gpus",
        "api/console/gpus?team=team-07",
        "api/console/fit",
        *(f"api/console/history?range={r}" for r in RANGES),
    ]
    rows: list[list[str]] = []
    bounds: list[str] = []
    for path in paths:
        url = served.base + path
        for _ in range(3):  # the first answer of each: a history not read in time is not kept
            first = await client.fetch(url, headers=headers, decompress_response=False)
            raw = first.body
            zipped = first.headers.get("Content-Encoding") == "gzip"
            body = gzip.decompress(raw) if zipped else raw
            answer = json.loads(body)
            if answer.get("available", True):
                break
        n = requests if "history" not in path else max(20, requests // 4)
        times: list[float] = []
        cpu0 = time.process_time()
        for _ in range(n):
            t0 = time.perf_counter()
            await client.fetch(url, headers=headers)
            times.append((time.perf_counter() - t0) * 1000)
        cpu = (time.process_time() - cpu0) * 1000 / n
        rows.append(
            [
                path,
                str(n),
                f"{pct(times, 50):.1f}",
                f"{pct(times, 95):.1f}",
                f"{max(times):.1f}",
                f"{cpu:.1f}",
                f"{len(body) / 1e3:,.0f} kB"
                + (f" ({len(raw) / 1e3:,.0f} gz)" if raw != body else ""),
                "met" if pct(times, 95) <= TARGET_API_MS else "MISSED",
            ]
        )
        if "history" in path and not answer["available"]:
            bounds.append(f"{path}: {answer['message']}")
        elif "history" in path:
            charts = answer.get("charts", [])
            points = max((len(s["values"]) for c in charts for s in c["series"]), default=0)
            series = max((len(c["series"]) for c in charts), default=0)
            total = max((c["total_series"] for c in charts), default=0)
            bounds.append(
                f"{path}: step {answer.get('step')} s, {len(charts)} charts, at most {points}"
                f" points a series (cap {answer.get('max_points')}), {series} series a chart"
                f" of {total} in Prometheus' answer (cap {answer.get('max_series')})"
            )
    client.close()
    return rows, bounds


INIT_SCRIPT = """
(() => {
  const views = {
    overview: () => document.querySelector('#overview #next') !== null,
    teams: () => document.querySelectorAll('#teams .team').length >= %(teams)d,
    gpus: () => document.querySelector('#gpus tbody tr') !== null,
    sizing: () => document.querySelector('#fit .fit-team') !== null,
    workbenches: () => document.querySelector('#workbenches tbody tr') !== null,
    history: () => document.querySelectorAll('#history-charts .uplot').length >= %(charts)d,
  };
  const drawn = (window.__drawn = {});
  const painted = (window.__painted = {});
  const check = () => {
    for (const [name, ready] of Object.entries(views)) {
      if (!(name in drawn) && ready()) {
        drawn[name] = performance.now();
        requestAnimationFrame(() => setTimeout(() => { painted[name] = performance.now(); }));
      }
    }
  };
  new MutationObserver(check).observe(document, { childList: true, subtree: true });
  window.__longest = 0;
  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) window.__longest = Math.max(window.__longest, e.duration);
    }).observe({ type: 'longtask', buffered: true });
  } catch (e) {}
})();
"""

FILTER = """
async ([id, value]) => {
  const select = document.getElementById(id);
  const t0 = performance.now();
  select.value = value;
  select.dispatchEvent(new Event('input'));
  const dom = performance.now();
  await new Promise(r => requestAnimationFrame(() => setTimeout(r)));
  return [dom - t0, performance.now() - t0, document.querySelectorAll('#gpus tbody tr').length];
}
"""

SCROLL = """
async (selector) => {
  const target = document.querySelector(selector);
  const t0 = performance.now();
  target.scrollIntoView();
  await new Promise(r => requestAnimationFrame(() => setTimeout(r)));
  return performance.now() - t0;
}
"""

SCROLLED_TO = {
    "overview": "#overview-section",
    "teams": "#teams .team:last-of-type",
    "gpus": "#gpus-section",
    "history": "#history",
    "sizing": "#fit-section",
    "workbenches": "#workbenches",
}
"""What each view is scrolled to (the last team: the teams' cards are each drawn when near)."""

TIMELINE = r"""
() => {
  const out = {};
  const nav = performance.getEntriesByType('navigation')[0];
  out['page HTML received'] = nav.responseEnd;
  out['modules loaded (DOMContentLoaded)'] = nav.domContentLoadedEventEnd;
  for (const e of performance.getEntriesByType('resource')) {
    const m = e.name.match(/api\/console(\/\w+)?(?:\?range=\w+)?$/);
    if (m) out[`GET ${m[0]} answered`] = e.responseEnd;
  }
  return out;
}
"""

VIEWS = ("overview", "teams", "gpus", "sizing", "workbenches", "history")


@dataclass
class BrowserTimes:
    drawn: dict[str, list[tuple[float, float]]]
    """Per view, (DOM, painted) ms after navigation start, a pair per load."""
    scrolled: dict[str, list[float]]
    """Per view, ms from its scroll into view to the frame painted, one per load."""
    filters: list[list[str]]
    longest: float
    held: str


FILTERS = {
    "team team-07": ("g-team", "team-07"),
    "all teams again": ("g-team", ""),
    "state idle": ("g-state", "idle"),
    "all states again": ("g-state", ""),
}
"""The filters timed: label → (the control's id, the value chosen)."""


async def views_drawn(page: Any) -> Any:
    """The views' drawn and painted times once every view has both (within 60 s)."""
    # polled from here: the page's CSP forbids the eval of wait_for_function
    deadline = time.monotonic() + 60
    while True:
        times = await page.evaluate("[window.__drawn, window.__painted]")
        if len(times[1]) >= len(VIEWS):
            return times
        if time.monotonic() > deadline:
            raise RuntimeError(f"views not drawn in 60 s: {times}")
        await asyncio.sleep(0.05)


async def filter_times(page: Any, loads: int) -> dict[str, list[tuple[float, float, int]]]:
    """Each filter of :data:`FILTERS`, ``loads`` times: (DOM ms, paint ms, rows shown)."""
    filters: dict[str, list[tuple[float, float, int]]] = {}
    for _ in range(loads):
        for label, (control, value) in FILTERS.items():
            dom, paint, rows = await page.evaluate(FILTER, [control, value])
            filters.setdefault(label, []).append((dom, paint, rows))
    return filters


async def browser_times(served: Served, loads: int, steady: float, charts: int) -> BrowserTimes:
    """Each load's views drawn and scrolled to; the filters' rows; the longest task while
    polling; a line on what the page held."""
    from playwright.async_api import async_playwright

    from devcluster.chromium import CHROMIUM, CHROMIUM_ARGS

    drawn: dict[str, list[tuple[float, float]]] = {v: [] for v in VIEWS}
    scrolled: dict[str, list[float]] = {v: [] for v in VIEWS}
    timeline: dict[str, list[float]] = {}
    async with async_playwright() as p:
        chromium = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await chromium.new_context(
                extra_http_headers={"Authorization": f"Bearer {served.token}"},
                viewport={"width": 1400, "height": 1000},
            )
            await context.add_init_script(INIT_SCRIPT % {"teams": TEAMS, "charts": charts})
            page = await context.new_page()
            page.set_default_timeout(60_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            for _ in range(loads):
                await page.goto(served.base + "console/")
                times = await views_drawn(page)
                for v in VIEWS:
                    drawn[v].append((times[0][v], times[1][v]))
                for name, at in (await page.evaluate(TIMELINE)).items():
                    timeline.setdefault(name, []).append(at)
                for v in VIEWS:
                    scrolled[v].append(float(await page.evaluate(SCROLL, SCROLLED_TO[v])))
                await page.evaluate("window.scrollTo(0, 0)")
            filters = await filter_times(page, loads)
            await page.evaluate("window.__longest = 0")
            await asyncio.sleep(steady)
            longest = float(await page.evaluate("window.__longest"))
            held = await page.evaluate(
                "[document.querySelectorAll('#teams .team').length,"
                " document.querySelectorAll('#gpus tbody tr').length,"
                " document.querySelectorAll('#workbenches tbody tr').length,"
                " document.querySelectorAll('#fit tbody tr').length,"
                " document.querySelectorAll('#history-charts .uplot').length,"
                " document.getElementById('gpu-count').textContent,"
                " document.getElementsByTagName('*').length]"
            )
            if errors:
                raise RuntimeError(f"the page failed: {errors}")
        finally:
            await chromium.close()
    filter_rows = [
        [
            label,
            f"{statistics.median(d for d, _, _ in runs):.1f}",
            f"{statistics.median(p for _, p, _ in runs):.1f}",
            f"{max(p for _, p, _ in runs):.1f}",
            str(runs[-1][2]),
        ]
        for label, runs in filters.items()
    ]
    line = "".join(
        f"  {name}: {statistics.median(at):.0f} ms after navigation start (median;"
        f" each load: {', '.join(f'{x:.0f}' for x in at)})\n"
        for name, at in sorted(timeline.items(), key=lambda item: statistics.median(item[1]))
    )
    line += (
        f"the page held {held[0]} teams, {held[1]} GPU rows {held[5]}, {held[2]} workbench rows,"
        f" {held[3]} sizing rows, {held[4]} charts; {held[6]:,} elements"
    )
    return BrowserTimes(drawn, scrolled, filter_rows, longest, line)


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in [head, *rows]
    ]
    return "\n".join(["  " + lines[0], "  " + "-" * len(lines[0]), *("  " + x for x in lines[1:])])


def print_browser(args: argparse.Namespace, times: BrowserTimes) -> list[list[str]]:
    """Print the browser's tables; the views' rows."""
    print(
        f"\nbrowser: headless Chromium, {args.loads} loads; ms from navigation start"
        f" (aim: each view painted <= {TARGET_VIEW_MS:g} ms); then each view scrolled into"
        " view on the loaded page, ms from the scroll to the frame painted"
    )
    view_rows = []
    for v in VIEWS:
        dom = [d for d, _ in times.drawn[v]]
        paint = [p for _, p in times.drawn[v]]
        scroll = times.scrolled[v]
        view_rows.append(
            [
                v,
                f"{statistics.median(dom):.0f}",
                f"{statistics.median(paint):.0f}",
                f"{max(paint):.0f}",
                f"{statistics.median(scroll):.0f}",
                f"{max(scroll):.0f}",
                "met"
                if max(paint) <= TARGET_VIEW_MS and max(scroll) <= TARGET_VIEW_MS
                else "MISSED",
            ]
        )
    head = ["view", "DOM p50", "painted p50", "painted max", "scrolled p50", "scrolled max", "aim"]
    print(table(head, view_rows))
    print("each load's paint, in order (the first in a new browser):")
    for v in VIEWS:
        print(f"  {v}: {', '.join(f'{p:.0f}' for _, p in times.drawn[v])} ms")
    print("\n'Every GPU' filters on the loaded page (ms from the change):")
    print(table(["filter", "DOM p50", "painted p50", "painted max", "rows"], times.filters))
    print(f"\nlongest main-thread task over {args.steady:g} s of polling: {times.longest:.0f} ms")
    print("timeline of a load:")
    print(times.held)
    return view_rows


async def organisation_console() -> Any:
    """The organisation, two reclaim cycles over it, the console listening: the console."""
    from gpuaas_service.console.answers import ConsoleState
    from gpuaas_service.reclaim.activity_store import ActivityStore
    from gpuaas_service.reclaim.loop import Feeds, ReclaimLoop, Settings
    from gpuaas_service.reclaim.policy import load_policy
    from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog
    from jupyter_gpuaas.core.sizing import PeakHistory

    now = datetime.now(timezone.utc)
    t = time.perf_counter()
    org = organisation(now)
    view = org_view(org)
    store = ActivityStore()
    for user, payload in org.reports.items():
        store.record(user, "", payload, now)
    teams_ns = tuple(team_name(t) for t in range(TEAMS))
    hub = OrgHub(org, now - timedelta(hours=2))
    loop = ReclaimLoop(
        hub=hub,
        kube=OrgKube(org.pods),
        view=view,
        policies=load_policy(POLICY),
        store=store,
        settings=Settings(notebook_namespace=NS, job_namespaces=teams_ns),
        feeds=Feeds(pods=lambda: org.pods),
    )
    catalog = build_catalog([CatalogSource("bench: ", catalog_data())])
    console = ConsoleState(
        loop,
        view,
        notebook_namespace=NS,
        job_namespaces=teams_ns,
        regret_window=timedelta(hours=1),
        usage_history=lambda: PeakHistory(org.peaks_mib),
        catalog=lambda: catalog,
        nodes=lambda: org.nodes,
        job_pods=lambda: org.job_pods,
    )
    loop.listeners.append(console)
    cycles = []
    for _ in range(2):
        c0 = time.perf_counter()
        if await loop.cycle() is None:
            raise RuntimeError(f"reclaim cycle failed: {loop.state.last_error}")
        cycles.append((time.perf_counter() - c0) * 1000)
    plan = loop.state.last_plan
    assert plan is not None
    gpus = sum(NODES_PER_POOL.values()) * GPUS_PER_NODE
    print(
        f"organisation: {TEAMS} teams, {len(org.pods)} GPU workbenches on"
        f" {sum(NODES_PER_POOL.values())} nodes of {GPUS_PER_NODE} GPUs ({gpus} GPUs),"
        f" {TEAMS * TRAINING_PER_TEAM} training jobs running and {QUEUED_TEAMS} queued;"
        f" built in {time.perf_counter() - t:.1f} s; reclaim cycles {cycles[0]:.0f},"
        f" {cycles[1]:.0f} ms; {len(plan.decisions)} decisions",
        flush=True,
    )

    return console


async def run(args: argparse.Namespace) -> int:
    from jupyterhub.services.auth import HubOAuth
    from tornado.httpserver import HTTPServer

    from gpuaas_service.clients.prometheus import PrometheusClient, history_queries
    from gpuaas_service.web.app import make_app
    from gpuaas_service.web.console_history import History
    from gpuaas_service.web.context import ServiceContext

    if not BUILT.is_file():
        print(f"the console page is not built ({BUILT}): npm run build:console")
        return 2
    console = await organisation_console()
    loop = console.loop
    token = secrets.token_hex(24)
    stand_ins, (hub_port, prom_port) = start_stand_ins(token)
    oauth = HubOAuth(
        api_url=f"http://127.0.0.1:{hub_port}/hub/api/",
        api_token=secrets.token_hex(8),
        oauth_client_id="service-gpuaas",
        cache_max_age=3600,
    )
    history = History(PrometheusClient(f"http://127.0.0.1:{prom_port}"))
    app = make_app(
        ServiceContext(console=console, console_auth=oauth, loop=loop),
        cookie_secret=secrets.token_bytes(32),
        history=history,
    )
    port = free_port()
    server = HTTPServer(app)
    server.listen(port, "127.0.0.1")
    served = Served(f"http://127.0.0.1:{port}{PREFIX}", token)
    status = 0
    try:
        rows, bounds = await api_latencies(served, args.requests)
        print(
            "\nAPI: sequential GETs, one kept-alive connection, gzip"
            f" (aim p95 <= {TARGET_API_MS:g} ms)"
        )
        print(
            table(["endpoint", "n", "p50 ms", "p95 ms", "max ms", "CPU ms", "answer", "aim"], rows)
        )
        print("\nhistory bounds (Prometheus answered 50 series, every step):")
        for line in bounds:
            print(f"  {line}")
        status = int(any(r[-1] != "met" for r in rows))
        if args.loads:
            charts = len(history_queries(None, 60))  # a caller who sees every team
            times = await browser_times(served, args.loads, args.steady, charts)
            view_rows = print_browser(args, times)
            status = status or int(any(r[-1] != "met" for r in view_rows))
    finally:
        server.stop()
        stand_ins.kill()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_console_views", description=__doc__
    )
    parser.add_argument("--requests", type=int, default=200, help="GETs per endpoint")
    parser.add_argument("--loads", type=int, default=5, help="page loads in Chromium (0: none)")
    parser.add_argument(
        "--steady", type=float, default=12.0, help="seconds of polling watched for long tasks"
    )
    return asyncio.run(run(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

"""HAMi's scheduler as the dev cluster runs it: an extender of a second kube-scheduler, and the
admission webhook that sends HAMi's pods to it.

HAMi deploys its scheduler as a pod of two containers: the stock kube-scheduler with a profile
``schedulerName: hami-scheduler`` and HAMi's extender (``filterVerb: filter``, ``bindVerb:
bind``, ``nodeCacheCapable: true``, HAMi's resources ``ignoredByScheduler``;
charts/hami/templates/scheduler/configmap.yaml), plus a mutating webhook that sets
``schedulerName: hami-scheduler`` on pods asking for its resources (``pkg/scheduler/webhook.go``).
The dev cluster does the same with its own kube-scheduler binary (``devcluster up`` starts a
second one, ``hami-scheduler``, configured so) and this process in place of HAMi's (its Go
module is not served by the proxy this project builds from). It serves

- ``POST /filter`` (plain HTTP on loopback, as the chart's extender without TLS): the pod's cards
  as HAMi picks them (:mod:`devcluster.hamiplace`), from each candidate node's
  ``hami.io/node-nvidia-register`` and the ``hami.io/vgpu-devices-allocated`` of the pods on it;
  on a fit, HAMi's pod annotations (``hami.io/vgpu-node``, ``vgpu-time``,
  ``vgpu-devices-to-allocate``, ``vgpu-devices-allocated``) and a ``FilteringSucceed`` Event; on
  none, the node's reasons in ``FailedNodes`` (kube-scheduler turns them into the pod's
  ``Unschedulable`` condition) and HAMi's ``FilteringFailed`` Events;
- ``POST /bind``: ``hami.io/bind-phase: allocating`` and ``hami.io/bind-time``, then the Binding,
  and a ``BindingSucceed`` Event (``BindingFailed`` when it fails);
- ``POST /webhook`` (HTTPS, the cluster CA's loopback certificate): HAMi's webhook's routing. It
  takes only pods that ask for a resource that only HAMi serves (``nvidia.com/gpumem``,
  ``gpumem-percentage``, ``gpucores``): the dev cluster's other GPU nodes run NVIDIA's own device
  plugin, whose whole GPUs are also ``nvidia.com/gpu`` (HAMi's webhook takes every pod asking for
  ``nvidia.com/gpu``, on a cluster where HAMi serves them all);
- ``GET /healthz``.

It runs as its own identity (:data:`IDENTITY`), bound to the ClusterRole of :func:`manifests`.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import logging
import signal
import ssl
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from aiohttp import ClientSession, ClientTimeout, TCPConnector, web

from devcluster import hamiplace
from devcluster.nodeagent import run_logged
from jupyter_gpuaas.core import hami

log = logging.getLogger("devcluster.hamischeduler")

IDENTITY = "devcluster:hami-scheduler"
"""The extender's user name (its client certificate's common name)."""
WEBHOOK_NAME = "devcluster-hami-webhook"
MERGE = "application/merge-patch+json"
DEFAULT_SCHEDULER = "default-scheduler"


def manifests() -> str:
    """The extender's RBAC (what HAMi's scheduler ServiceAccount may do, less what the dev
    cluster does not use), applied at start."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": IDENTITY},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
                {
                    "apiGroups": [""],
                    "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "patch", "update"],
                },
                {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": IDENTITY},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": IDENTITY,
            },
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY}
            ],
        },
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def webhook_configuration(url: str, ca_pem: bytes) -> dict[str, Any]:
    """The MutatingWebhookConfiguration that sends HAMi's pods to :data:`hami.SCHEDULER_NAME`
    (HAMi's chart: ``name: vgpu.hami.io``, objects and namespaces labelled ``hami.io/webhook:
    ignore`` left out)."""
    skip = {
        "matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK_NAME},
        "webhooks": [
            {
                "name": "vgpu.hami.io",
                "admissionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "*",
                    }
                ],
                "failurePolicy": "Ignore",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": 10,
                "namespaceSelector": skip,
                "objectSelector": skip,
            }
        ],
    }


def scheduler_configuration(kubeconfig: Path, extender_url: str) -> dict[str, Any]:
    """The second kube-scheduler's configuration, as HAMi's chart writes it."""
    managed = [
        {"name": name, "ignoredByScheduler": True}
        for name in (hamiplace.GPU, *hamiplace.HAMI_ONLY, "nvidia.com/priority")
    ]
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "leaderElection": {"leaderElect": False},
        "enableProfiling": False,
        "profiles": [{"schedulerName": hami.SCHEDULER_NAME}],
        "extenders": [
            {
                "urlPrefix": extender_url,
                "filterVerb": "filter",
                "bindVerb": "bind",
                "enableHTTPS": False,
                "nodeCacheCapable": True,
                "weight": 1,
                "httpTimeout": "30s",
                "managedResources": managed,
            }
        ],
    }


def route(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The webhook's JSON patch for a new pod: ``schedulerName: hami-scheduler`` for a pod that
    asks for HAMi's resources and names no other scheduler (``[]``: left as it is)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName") or not hamiplace.asks_hami(pod):
        return []
    if str(spec.get("schedulerName") or DEFAULT_SCHEDULER) != DEFAULT_SCHEDULER:
        return []
    return [{"op": "add", "path": "/spec/schedulerName", "value": hami.SCHEDULER_NAME}]


class Extender:
    def __init__(self, http: ClientSession, server: str, node_policy: str, gpu_policy: str) -> None:
        self.http = http
        self.server = server.rstrip("/")
        self.node_policy = node_policy
        self.gpu_policy = gpu_policy
        self.lock = asyncio.Lock()  # one decision at a time, as HAMi locks its node usage

    async def _call(
        self, method: str, path: str, body: Any = None, ctype: str = "application/json"
    ) -> Any:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": ctype} if body is not None else {}
        async with self.http.request(
            method, self.server + path, data=data, headers=headers
        ) as resp:
            text = await resp.text()
            if resp.status >= 400:
                raise RuntimeError(f"{method} {path}: {resp.status} {text[:300]}")
            return json.loads(text) if text else None

    async def _event(self, pod: Mapping[str, Any], etype: str, reason: str, message: str) -> None:
        meta = pod.get("metadata") or {}
        ts = dt.datetime.now(dt.timezone.utc)
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {
            "metadata": {
                "generateName": f"{meta.get('name')}.",
                "namespace": meta.get("namespace"),
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": meta.get("namespace"),
                "name": meta.get("name"),
                "uid": meta.get("uid"),
            },
            "reason": reason,
            "message": message,
            "type": etype,
            "source": {"component": hami.SCHEDULER_NAME},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await self._call("POST", f"/api/v1/namespaces/{meta.get('namespace')}/events", body)
        except (RuntimeError, OSError, asyncio.TimeoutError) as e:
            log.warning("event %s on %s/%s: %s", reason, meta.get("namespace"), meta.get("name"), e)

    async def _devices(
        self, names: list[str], pod_uid: str
    ) -> dict[str, list[hamiplace.Device] | None]:
        pods = (await self._call("GET", "/api/v1/pods"))["items"]
        on: dict[str, list[Mapping[str, Any]]] = {}
        for p in pods:
            meta = p.get("metadata") or {}
            if meta.get("uid") == pod_uid:
                continue  # its own earlier choice does not count against it
            node = (meta.get("annotations") or {}).get(hami.ASSIGNED_NODE) or (
                p.get("spec") or {}
            ).get("nodeName")
            if node:
                on.setdefault(str(node), []).append(p)
        out: dict[str, list[hamiplace.Device] | None] = {}
        for name in names:
            try:
                node = await self._call("GET", f"/api/v1/nodes/{name}")
            except RuntimeError:
                out[name] = None
                continue
            cards = hami.read_register((node.get("metadata") or {}).get("annotations") or {})
            out[name] = hamiplace.node_devices(cards, on.get(name, [])) if cards else None
        return out

    async def filter(self, request: web.Request) -> web.Response:
        args = await request.json()
        pod = args.get("Pod") or args.get("pod") or {}
        names = [str(n) for n in (args.get("NodeNames") or args.get("nodenames") or [])]
        meta = pod.get("metadata") or {}
        async with self.lock:
            try:
                nodes = await self._devices(names, str(meta.get("uid")))
                result = hamiplace.filter_pod(
                    pod, nodes, node_policy=self.node_policy, gpu_policy=self.gpu_policy
                )
                if result.chosen is not None:
                    value = hami.encode_pod_devices(result.chosen.containers)
                    notes = {
                        hami.ASSIGNED_NODE: result.chosen.node,
                        hami.ASSIGNED_TIME: str(int(time.time())),
                        hami.TO_ALLOCATE: value,
                        hami.ALLOCATED: value,
                    }
                    path = f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}"
                    await self._call(
                        "PATCH",
                        path,
                        {"metadata": {"uid": meta.get("uid"), "annotations": notes}},
                        MERGE,
                    )
            except (RuntimeError, OSError, asyncio.TimeoutError, KeyError, ValueError) as e:
                log.warning("filter %s/%s: %s", meta.get("namespace"), meta.get("name"), e)
                await self._event(pod, "Warning", hami.FILTERING_FAILED, str(e))
                return web.json_response({"Error": str(e)})
        for etype, reason, message in result.events(len(names)):
            await self._event(pod, etype, reason, message)
        if result.chosen is None:
            log.info(
                "%s/%s fits no card: %s", meta.get("namespace"), meta.get("name"), result.failed
            )
            return web.json_response(
                {"NodeNames": [], "FailedNodes": dict(result.failed), "Error": ""}
            )
        log.info(
            "%s/%s -> %s %s",
            meta.get("namespace"),
            meta.get("name"),
            result.chosen.node,
            result.chosen.containers,
        )
        return web.json_response(
            {"NodeNames": [result.chosen.node], "FailedNodes": dict(result.failed), "Error": ""}
        )

    async def bind(self, request: web.Request) -> web.Response:
        args = await request.json()
        ns, name, uid, node = (
            str(args.get("PodNamespace")),
            str(args.get("PodName")),
            str(args.get("PodUID")),
            str(args.get("Node")),
        )
        pod_path = f"/api/v1/namespaces/{ns}/pods/{name}"
        pod: dict[str, Any] = {"metadata": {"namespace": ns, "name": name, "uid": uid}}
        try:
            notes = {hami.BIND_PHASE: "allocating", hami.BIND_TIME: str(int(time.time()))}
            await self._call(
                "PATCH", pod_path, {"metadata": {"uid": uid, "annotations": notes}}, MERGE
            )
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node},
            }
            await self._call("POST", f"{pod_path}/binding", binding)
        except (RuntimeError, OSError, asyncio.TimeoutError) as e:
            await self._event(pod, "Warning", hami.BINDING_FAILED, str(e))
            return web.json_response({"Error": str(e)})
        await self._event(
            pod,
            "Normal",
            hami.BINDING_SUCCEED,
            f"Successfully binding node [{node}] to {ns}/{name}",
        )
        return web.json_response({"Error": ""})


async def webhook(request: web.Request) -> web.Response:
    review = await request.json()
    req = review.get("request") or {}
    patch = route(req.get("object") or {})
    response: dict[str, Any] = {"uid": req.get("uid"), "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return web.json_response(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    )


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


async def amain(args: argparse.Namespace) -> int:
    client_tls = ssl.create_default_context(cafile=args.ca)
    client_tls.load_cert_chain(args.cert, args.key)
    serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving_tls.load_cert_chain(args.serving_cert, args.serving_key)
    async with ClientSession(
        connector=TCPConnector(ssl=client_tls), timeout=ClientTimeout(total=20)
    ) as http:
        ext = Extender(http, args.server, args.node_policy, args.gpu_policy)
        extender_app = web.Application()
        extender_app.add_routes(
            [
                web.post("/filter", ext.filter),
                web.post("/bind", ext.bind),
                web.get("/healthz", healthz),
            ]
        )
        webhook_app = web.Application()
        webhook_app.add_routes([web.post("/webhook", webhook), web.get("/healthz", healthz)])
        runners = [
            web.AppRunner(extender_app, access_log=None),
            web.AppRunner(webhook_app, access_log=None),
        ]
        for r in runners:
            await r.setup()
        await web.TCPSite(runners[0], "127.0.0.1", args.extender_port).start()
        await web.TCPSite(
            runners[1], "127.0.0.1", args.webhook_port, ssl_context=serving_tls
        ).start()
        log.info(
            "extender on :%d, webhook on :%d (policies: node %s, GPU %s)",
            args.extender_port,
            args.webhook_port,
            args.node_policy,
            args.gpu_policy,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        for r in runners:
            await r.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.hamischeduler",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--server", required=True, help="the apiserver's URL")
    parser.add_argument("--ca", required=True, help="the cluster CA (PEM)")
    parser.add_argument("--cert", required=True, help="client certificate of its identity")
    parser.add_argument("--key", required=True)
    parser.add_argument("--serving-cert", required=True, help="the webhook's certificate")
    parser.add_argument("--serving-key", required=True)
    parser.add_argument("--extender-port", type=int, required=True)
    parser.add_argument("--webhook-port", type=int, required=True)
    parser.add_argument(
        "--node-policy",
        default="binpack",
        choices=("binpack", "spread"),
        help="default node policy (HAMi's --node-scheduler-policy; the chart's: binpack)",
    )
    parser.add_argument(
        "--gpu-policy",
        default="spread",
        choices=("binpack", "spread"),
        help="default card policy (HAMi's --gpu-scheduler-policy; the chart's: spread)",
    )
    return run_logged(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

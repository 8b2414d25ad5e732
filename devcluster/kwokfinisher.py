"""The kubelet's last step on kwok's nodes: remove a deleted pod, by UID, once nothing holds it.

A kubelet deletes a pod it has stopped with grace period 0 and ``preconditions.uid``, so that the
delete can never hit a newer pod of the same name. kwok v0.8.0 (also its main branch) can delete
in a Stage (``next.delete: true``), but by name only: ``PodController.deleteResource`` calls
``Pods(ns).Delete(ctx, pod.Name, metav1.NewDeleteOptions(0))``, from a queued job that may be
stale (jobs are keyed by namespace/name, played by several workers, retried with backoff). When a
client creates a pod under the same name the moment the old one is gone, as KubeSpawner does on a
quick stop and restart, a second delete for the old pod removes the new one.

So ``kwok-stages.yaml`` has no deleting stage, and this process, started by ``devcluster up``
with kwok's identity (``python -m devcluster.kwokfinisher``), does that step instead: it
list-watches the pods bound to kwok's nodes and deletes each pod that has a deletionTimestamp and
no finalizers left, with grace period 0 and its UID as precondition.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from devcluster.nodeagent import delete_body, list_watch, run_logged

log = logging.getLogger("devcluster.kwokfinisher")


def due(pod: dict[str, Any], nodes: frozenset[str]) -> bool:
    """Whether a kubelet would remove the pod now: on one of ``nodes``, deleted, unheld."""
    meta = pod.get("metadata", {})
    return (
        pod.get("spec", {}).get("nodeName") in nodes
        and meta.get("deletionTimestamp") is not None
        and not meta.get("finalizers")
    )


class Finisher:
    def __init__(self, core: Any, nodes: frozenset[str]) -> None:
        self.core = core
        self.nodes = nodes
        self._inflight: dict[str, asyncio.Task[None]] = {}  # uid -> its delete

    def listed(self, pods: list[dict[str, Any]]) -> None:
        for pod in pods:
            self.seen("ADDED", pod)

    def seen(self, kind: str, pod: dict[str, Any]) -> None:
        if kind not in ("ADDED", "MODIFIED"):  # DELETED, and BOOKMARK (no uid)
            return
        uid = pod["metadata"]["uid"]
        if uid in self._inflight or not due(pod, self.nodes):
            return
        task = asyncio.create_task(self._delete(pod["metadata"]))
        self._inflight[uid] = task
        task.add_done_callback(lambda _t: self._inflight.pop(uid, None))

    async def _delete(self, meta: dict[str, Any]) -> None:
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        try:
            await self.core.delete_namespaced_pod(name, ns, body=delete_body(uid))
            log.info("removed pod %s/%s uid %s", ns, name, uid)
        except ApiException as e:
            # 404: already gone; 409: the name holds a newer pod, which is not ours to remove
            if e.status not in (404, 409):
                log.warning("removing pod %s/%s uid %s: %s", ns, name, uid, e)


async def amain(args: argparse.Namespace) -> int:
    cfg = client.Configuration()
    await config.load_kube_config(config_file=args.kubeconfig, client_configuration=cfg)
    nodes = frozenset(args.node)
    async with client.ApiClient(cfg) as api:
        finisher = Finisher(client.CoreV1Api(api), nodes)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

        def listed(pods: list[dict[str, Any]]) -> None:
            finisher.listed(pods)
            if args.ready_file and not args.ready_file.exists():
                args.ready_file.write_text("listed\n")

        # Only scheduled pods: an unscheduled pod is removed by the apiserver on delete.
        watcher = asyncio.create_task(
            list_watch(finisher.core, "spec.nodeName!=", listed, finisher.seen)
        )
        log.info("finishing deleted pods on %s", ", ".join(sorted(nodes)))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({watcher, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if watcher.done():  # it only ends on a bug: exit, so that `status` shows it DOWN
            log.error("the pod watch ended", exc_info=watcher.exception())
            return 1
        watcher.cancel()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devcluster.kwokfinisher",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--node", action="append", required=True, help="a kwok node (repeat)")
    parser.add_argument("--ready-file", type=Path, help="written once the first list is done")
    return run_logged(amain(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

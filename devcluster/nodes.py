"""Node objects from ``nodes.yaml``: what the pools declare, checked, as API objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devcluster.config import NODES_FILE

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"
RUN_BY = ("kwok", "agent")


@dataclass(frozen=True)
class NodeSpec:
    name: str
    pool: str
    run_by: str
    labels: dict[str, str]
    capacity: dict[str, str]
    taints: list[dict[str, str]] = field(default_factory=list)
    # The node's GPUs (a spec of jupyter_gpuaas/gpu/spec.py): what the node agent hands out on
    # its node; on any node, the cards HAMi's device plugin registers (hami=N groups).
    simulated_gpus: str | None = None

    def manifest(self) -> dict[str, Any]:
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            **self.labels,
        }
        annotations = {"node.alpha.kubernetes.io/ttl": "0"}
        if self.simulated_gpus:
            # HAMi's device plugin registers its cards in the node annotation its scheduler reads.
            from devcluster.gpualloc import hami_cards
            from jupyter_gpuaas.core.hami import REGISTER, encode_register
            from jupyter_gpuaas.gpu.spec import parse_devices

            cards = hami_cards(parse_devices(self.simulated_gpus))
            if cards:
                annotations[REGISTER] = encode_register(cards)
        if self.run_by == "kwok":
            annotations[KWOK_ANNOTATION] = KWOK_ANNOTATION_VALUE
        else:
            annotations["gpuaas.dev/run-by"] = "devcluster-nodeagent"
        spec: dict[str, Any] = {}
        if self.taints:
            spec["taints"] = self.taints
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": self.name, "labels": labels, "annotations": annotations},
            "spec": spec,
        }

    def status_patch(self) -> dict[str, Any]:
        return {"status": {"capacity": self.capacity, "allocatable": self.capacity}}


class NodesFileError(ValueError):
    pass


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise NodesFileError(f"{where}: expected a mapping")
    return {str(k): str(v) for k, v in value.items()}


def load_nodes(path: Path = NODES_FILE) -> list[NodeSpec]:
    data = yaml.safe_load(path.read_text()) or {}
    pools = data.get("pools")
    if not isinstance(pools, list) or not pools:
        raise NodesFileError(f"{path}: needs a non-empty `pools:` list")
    nodes = [node for i, pool in enumerate(pools) for node in _pool_nodes(path, i, pool)]
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise NodesFileError(f"{path}: two nodes would have the same name: {names}")
    agents = [n for n in nodes if n.run_by == "agent"]
    if len(agents) > 1:
        raise NodesFileError(f"{path}: at most one node may be run by the agent, got {agents}")
    return nodes


def _pool_nodes(path: Path, index: int, pool: Any) -> list[NodeSpec]:
    """The nodes of ``pools[index]``: ``count`` of them, named ``<pool>-<n>``."""
    where = f"{path}: pools[{index}]"
    if not isinstance(pool, dict) or not pool.get("name"):
        raise NodesFileError(f"{where}: each pool needs a name")
    name = str(pool["name"])
    where = f"{path}: pool {name!r}"
    run_by = str(pool.get("runBy", "kwok"))
    if run_by not in RUN_BY:
        raise NodesFileError(f"{where}: runBy must be one of {RUN_BY}, not {run_by!r}")
    count = pool.get("count", 1)
    if not isinstance(count, int) or count < 0:
        raise NodesFileError(f"{where}: count must be a whole number >= 0")
    capacity = _str_map(pool.get("capacity"), f"{where}.capacity")
    for required in ("cpu", "memory", "pods"):
        if required not in capacity:
            raise NodesFileError(f"{where}: capacity needs {required}")
    taints = pool.get("taints") or []
    if not isinstance(taints, list):
        raise NodesFileError(f"{where}: taints must be a list")
    # Each node's own labels (its place in a Kueue Topology: rack, block), in node order.
    per_node = pool.get("perNodeLabels") or []
    if not isinstance(per_node, list) or len(per_node) > count:
        raise NodesFileError(f"{where}: perNodeLabels must be a list of at most {count} mappings")
    own = [_str_map(m, f"{where}.perNodeLabels[{i}]") for i, m in enumerate(per_node)]
    own += [{}] * (count - len(own))
    labels = _str_map(pool.get("labels"), f"{where}.labels")
    simulated = pool.get("simulatedGpus")
    if simulated is not None:
        check_simulated_gpus(str(simulated), capacity, where)
    return [
        NodeSpec(
            name=f"{name}-{n}",
            pool=name,
            run_by=run_by,
            labels={**labels, **own[n]},
            capacity=capacity,
            taints=[_str_map(t, f"{where}.taints") for t in taints],
            simulated_gpus=None if simulated is None else str(simulated),
        )
        for n in range(count)
    ]


def check_simulated_gpus(spec: str, capacity: dict[str, str], where: str) -> None:
    """The agent's GPUs must give what the node's capacity promises Kubernetes, and no more:
    the device plugins' counts of nvidia.com/gpu, nvidia.com/gpu.shared and nvidia.com/mig-*
    (nvidia.com/gpumem and gpucores, which HAMi's scheduler keeps in annotations, are free)."""
    from devcluster.gpualloc import HAMI_RESOURCES
    from devcluster.gpualloc import capacity as plugin_capacity
    from jupyter_gpuaas.gpu.spec import SpecError, parse_devices

    try:
        gpus = parse_devices(spec)
    except SpecError as e:
        raise NodesFileError(f"{where}.simulatedGpus: {e}") from e
    have = plugin_capacity(gpus)
    declared = {
        k: int(v)
        for k, v in capacity.items()
        if k.startswith("nvidia.com/") and k not in HAMI_RESOURCES and str(v).isdigit()
    }
    declared = {k: v for k, v in declared.items() if v}
    if have != declared:
        raise NodesFileError(
            f"{where}: capacity {declared} does not match what simulatedGpus {spec!r} gives "
            f"the device plugins: {have}; make the capacity say {have}"
        )


def agent_node(nodes: list[NodeSpec]) -> NodeSpec | None:
    return next((n for n in nodes if n.run_by == "agent"), None)

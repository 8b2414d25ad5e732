"""The Node objects' cache (clients/kubernetes.py NodeWatch): listed by name, slimmed to what
the console reads."""

from __future__ import annotations

import json
from typing import Any

from gpuaas_service.clients.kubernetes import NodeWatch

REGISTER = '[{"id":"GPU-1","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA H100"}]'
NODE = {
    "metadata": {
        "name": "h100-0",
        "labels": {"gpuaas.dev/pool": "h100"},
        "uid": "u",
        # HAMi's register of the node's cards is kept (the console's per-card rows); the rest not
        "annotations": {
            "hami.io/node-nvidia-register": REGISTER,
            "kubectl.kubernetes.io/last-applied-configuration": "{...}",
        },
    },
    "spec": {"unschedulable": True, "taints": [{"key": "k"}]},
    "status": {
        "allocatable": {"nvidia.com/gpu": "8"},
        "images": [{"names": ["big"], "sizeBytes": 1}],
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


class _Response:
    async def read(self) -> bytes:
        return json.dumps({"metadata": {"resourceVersion": "42"}, "items": [NODE]}).encode()


class _Core:
    async def list_node(self, **kwargs: Any) -> _Response:
        return _Response()


async def test_the_nodes_are_listed_by_name_with_only_what_the_console_reads() -> None:
    watch = NodeWatch(resync_seconds=60)
    watch._core = _Core  # type: ignore[method-assign]
    assert await watch._list() == "42"
    assert watch.first_load_future.done()
    assert watch.resources == {
        "h100-0": {
            "metadata": {
                "name": "h100-0",
                "labels": {"gpuaas.dev/pool": "h100"},
                "annotations": {"hami.io/node-nvidia-register": REGISTER},
            },
            "spec": {"unschedulable": True},
            "status": {"allocatable": {"nvidia.com/gpu": "8"}},
        }
    }

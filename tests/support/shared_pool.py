"""The pool of H100s that training and notebook shares use together (docs/right-sizing.md):
a training Job shaped for it, for the tests that run one on the dev cluster."""

from __future__ import annotations

from typing import Any

H100_MIB = 81920
"""An H100's memory, as HAMi counts it (MiB)."""
POOL_TOLERATION = {
    "key": "gpuaas.dev/h100-pool",
    "operator": "Equal",
    "value": "true",
    "effect": "NoSchedule",
}


def whole_card_job(name: str, gpu: dict[str, str] | None = None) -> dict[str, Any]:
    """A training Job taking one H100 of the pool whole: all its memory, 100 % compute."""
    gpu = gpu or {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": str(H100_MIB),
        "nvidia.com/gpucores": "100",
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {
                "kueue.x-k8s.io/queue-name": "training",
                "kueue.x-k8s.io/priority-class": "training",
            },
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"nvidia.com/use-gputype": "H100"}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 1,
                    "nodeSelector": {"gpuaas.dev/pool": "local"},
                    "tolerations": [POOL_TOLERATION],
                    "containers": [
                        {
                            "name": "train",
                            "image": "registry.example/train:sim",
                            "command": ["sleep", "600"],
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "64Mi", **gpu},
                                "limits": gpu,
                            },
                        }
                    ],
                },
            },
        },
    }

"""The pod a validated choice becomes: complete expected manifests."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
from kubespawner.objects import make_pod

from gpuaas_spawner.pod import (
    SecretInSpecError,
    externalize_secrets,
    finalizer_patch,
    find_secrets,
    pod_settings,
    shape_pod,
    to_api_json,
    token_secret_manifest,
)
from gpuaas_spawner.validate import UserContext, validate_options
from jupyter_gpuaas.hub.kueue_watch import StaticKueueView
from tests.support.samples import (
    NAMESPACE,
    FakeUser,
    local_queue,
    make_spawner,
    sample_catalog,
    team_a_notebooks,
)

CATALOG = sample_catalog()
TOKEN = "7f3c9a1e5b2d4c6f8a0b1c2d3e4f5a6b"
ALICE = UserContext("alice", ("team-a",))


def base_pod(**extra: Any) -> dict[str, Any]:
    """What KubeSpawner builds from a z2jh-like config (its own make_pod), as API JSON."""
    kwargs: dict[str, Any] = {
        "name": "jupyter-alice",
        "cmd": ["jupyterhub-singleuser"],
        "port": 8888,
        "image": "quay.io/jupyter/base-notebook:2025-06-02",
        "image_pull_policy": "IfNotPresent",
        "env": {
            "JUPYTERHUB_API_TOKEN": TOKEN,
            "JPY_API_TOKEN": TOKEN,
            "JUPYTERHUB_USER": "alice",
            "JUPYTER_IMAGE": "quay.io/jupyter/base-notebook:2025-06-02",
        },
        "labels": {
            "app": "jupyterhub",
            "component": "singleuser-server",
            "hub.jupyter.org/username": "alice",
        },
        "annotations": {"hub.jupyter.org/username": "alice"},
        "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}],
        "volume_mounts": [{"name": "home", "mountPath": "/home/jovyan"}],
        "mem_limit": "4G",
        "mem_guarantee": "1G",
        "node_selector": {"hub.jupyter.org/node-purpose": "user"},
        "tolerations": [
            {
                "key": "hub.jupyter.org/dedicated",
                "operator": "Equal",
                "value": "user",
                "effect": "NoSchedule",
            }
        ],
        "automount_service_account_token": False,
        "uid": 1000,
        "fs_gid": 100,
    }
    kwargs.update(extra)
    return to_api_json(make_pod(**kwargs))  # type: ignore[no-any-return]


def build(options: dict[str, Any], base: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    choice = validate_options(options, CATALOG, ALICE)
    settings = pod_settings(choice, priority_class="interactive", default_namespace=NAMESPACE)
    shaped = shape_pod(base or base_pod(), settings)
    return externalize_secrets(
        shaped, secret_name="jupyter-alice-hub-token", secrets={"token": TOKEN}
    )


SECRET_ENV = [
    {
        "name": "JPY_API_TOKEN",
        "valueFrom": {
            "secretKeyRef": {"name": "jupyter-alice-hub-token", "key": "token", "optional": False}
        },
    },
    {
        "name": "JUPYTERHUB_API_TOKEN",
        "valueFrom": {
            "secretKeyRef": {"name": "jupyter-alice-hub-token", "key": "token", "optional": False}
        },
    },
    {"name": "JUPYTERHUB_USER", "value": "alice"},
]


def test_two_h100s_with_image_and_size() -> None:
    pod = build({"offering": "h100", "count": 2, "image": "pytorch", "size": "large"})
    image = "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02"
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "jupyter-alice",
            "namespace": "gpuaas-users",
            "labels": {
                "app": "jupyterhub",
                "component": "singleuser-server",
                "hub.jupyter.org/username": "alice",
                "kueue.x-k8s.io/queue-name": "team-a",
                "kueue.x-k8s.io/priority-class": "interactive",
                "gpuaas.jupyter.org/team": "team-a",
                "gpuaas.jupyter.org/offering": "h100",
            },
            "annotations": {
                "hub.jupyter.org/username": "alice",
                "gpuaas.jupyter.org/gpu-equivalents": "2",
            },
        },
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "args": ["jupyterhub-singleuser"],
                    "env": [
                        *SECRET_ENV,
                        {"name": "JUPYTER_IMAGE", "value": image},
                        {"name": "GPUAAS_TEAM", "value": "team-a"},
                        {"name": "GPUAAS_OFFERING", "value": "h100"},
                        {"name": "GPUAAS_OFFERING_KIND", "value": "gpu"},
                        {"name": "GPUAAS_GPU_EQUIVALENTS", "value": "2"},
                    ],
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "name": "notebook",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "ports": [{"containerPort": 8888, "name": "notebook-port"}],
                    "resources": {
                        "limits": {"memory": "32Gi", "nvidia.com/gpu": "2", "cpu": "8"},
                        "requests": {"memory": "16Gi", "nvidia.com/gpu": "2", "cpu": "4"},
                    },
                    "securityContext": {"runAsUser": 1000, "allowPrivilegeEscalation": False},
                    "volumeMounts": [
                        {"mountPath": "/home/jovyan", "name": "home"},
                        {"name": "gpuaas-shm", "mountPath": "/dev/shm"},
                    ],
                }
            ],
            "nodeSelector": {
                "hub.jupyter.org/node-purpose": "user",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            "restartPolicy": "OnFailure",
            "securityContext": {"fsGroup": 100},
            "tolerations": [
                {
                    "effect": "NoSchedule",
                    "key": "hub.jupyter.org/dedicated",
                    "operator": "Equal",
                    "value": "user",
                },
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            ],
            "volumes": [
                {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}},
                {"name": "gpuaas-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            ],
        },
    }
    assert find_secrets(pod, [TOKEN]) == []


def test_cpu_only_is_queued_too_but_gets_no_gpu_and_no_shm() -> None:
    pod = build({"offering": "cpu"})
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "jupyter-alice",
            "namespace": "gpuaas-users",
            "labels": {
                "app": "jupyterhub",
                "component": "singleuser-server",
                "hub.jupyter.org/username": "alice",
                "kueue.x-k8s.io/queue-name": "team-a",
                "kueue.x-k8s.io/priority-class": "interactive",
                "gpuaas.jupyter.org/team": "team-a",
                "gpuaas.jupyter.org/offering": "cpu",
            },
            "annotations": {
                "hub.jupyter.org/username": "alice",
                "gpuaas.jupyter.org/gpu-equivalents": "0",
            },
        },
        "spec": {
            "automountServiceAccountToken": False,
            "containers": [
                {
                    "args": ["jupyterhub-singleuser"],
                    "env": [
                        *SECRET_ENV,
                        {
                            "name": "JUPYTER_IMAGE",
                            "value": "quay.io/jupyter/scipy-notebook:2025-06-02",
                        },
                        {"name": "GPUAAS_TEAM", "value": "team-a"},
                        {"name": "GPUAAS_OFFERING", "value": "cpu"},
                        {"name": "GPUAAS_OFFERING_KIND", "value": "cpu"},
                        {"name": "GPUAAS_GPU_EQUIVALENTS", "value": "0"},
                    ],
                    "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "notebook",
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "ports": [{"containerPort": 8888, "name": "notebook-port"}],
                    "resources": {
                        "limits": {"memory": "8Gi", "cpu": "2"},
                        "requests": {"memory": "4Gi", "cpu": "1"},
                    },
                    "securityContext": {"runAsUser": 1000, "allowPrivilegeEscalation": False},
                    "volumeMounts": [{"mountPath": "/home/jovyan", "name": "home"}],
                }
            ],
            "nodeSelector": {"hub.jupyter.org/node-purpose": "user"},
            "restartPolicy": "OnFailure",
            "securityContext": {"fsGroup": 100},
            "tolerations": [
                {
                    "effect": "NoSchedule",
                    "key": "hub.jupyter.org/dedicated",
                    "operator": "Equal",
                    "value": "user",
                },
            ],
            "volumes": [{"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}}],
        },
    }


def test_mig_replaces_an_admin_dev_shm_and_keeps_everything_else() -> None:
    base = base_pod(
        volumes=[
            {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}},
            {"name": "shm", "emptyDir": {"medium": "Memory"}},
            {"name": "unused-but-kept", "emptyDir": {}},
        ],
        volume_mounts=[
            {"name": "home", "mountPath": "/home/jovyan"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    )
    # a forged label in the base (e.g. admin's extra_labels) never wins over the team's queue
    base["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-b"
    pod = build({"offering": "mig-1g"}, base)
    spec, ctr = pod["spec"], pod["spec"]["containers"][0]
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert ctr["volumeMounts"] == [
        {"mountPath": "/home/jovyan", "name": "home"},
        {"name": "gpuaas-shm", "mountPath": "/dev/shm"},
    ]
    assert spec["volumes"] == [
        {"name": "home", "persistentVolumeClaim": {"claimName": "claim-alice"}},
        {"name": "unused-but-kept", "emptyDir": {}},
        {"name": "gpuaas-shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
    ]
    assert ctr["resources"] == {
        "limits": {"memory": "8Gi", "nvidia.com/mig-1g.5gb": "1", "cpu": "2"},
        "requests": {"memory": "4Gi", "nvidia.com/mig-1g.5gb": "1", "cpu": "1"},
    }
    assert pod["metadata"]["annotations"]["gpuaas.jupyter.org/gpu-equivalents"] == "1/7"


def test_tenant_namespace_and_priority_class() -> None:
    tenant = replace(
        CATALOG.tenants["team-a"], namespace="team-a-users", priority_class="interactive-high"
    )
    choice = replace(validate_options({"offering": "shared"}, CATALOG, ALICE), tenant=tenant)
    settings = pod_settings(choice, priority_class="interactive", default_namespace=NAMESPACE)
    assert settings.namespace == "team-a-users"
    assert settings.labels["kueue.x-k8s.io/priority-class"] == "interactive-high"
    assert settings.requests == {**settings.limits, "cpu": "1", "memory": "4Gi"}
    assert settings.limits["nvidia.com/gpu.shared"] == "1"


def test_input_pod_is_not_modified() -> None:
    base = base_pod()
    before = copy.deepcopy(base)
    build({"offering": "h100"}, base)
    assert base == before


@pytest.mark.parametrize(
    "where",
    [
        lambda pod: pod["spec"]["containers"][0]["env"].append(
            {"name": "URL", "value": f"http://x/?token={TOKEN}"}
        ),
        lambda pod: pod["spec"]["containers"][0]["args"].append(f"--token={TOKEN}"),
        lambda pod: pod["metadata"]["annotations"].update({"token": TOKEN}),
    ],
    ids=["embedded in env", "in args", "in an annotation"],
)
def test_a_secret_anywhere_else_refuses_the_pod(where: Any) -> None:
    pod = base_pod()
    where(pod)
    with pytest.raises(SecretInSpecError, match="a secret would be stored in the pod spec at"):
        externalize_secrets(pod, secret_name="s", secrets={"token": TOKEN})


def test_token_secret_is_owned_by_the_pod() -> None:
    assert token_secret_manifest(
        "jupyter-alice-hub-token",
        NAMESPACE,
        {"token": TOKEN},
        labels={"app": "jupyterhub"},
        owner=("jupyter-alice", "uid-1"),
    ) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": "jupyter-alice-hub-token",
            "namespace": NAMESPACE,
            "labels": {"app": "jupyterhub"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "jupyter-alice",
                    "uid": "uid-1",
                    "blockOwnerDeletion": True,
                    "controller": False,
                }
            ],
        },
        "stringData": {"token": TOKEN},
    }


def test_finalizer_patch_only_for_pods_being_deleted() -> None:
    meta = {"name": "p", "finalizers": ["other/x", "kueue.x-k8s.io/managed"]}
    assert finalizer_patch({"metadata": meta}) is None
    assert finalizer_patch({"metadata": {**meta, "deletionTimestamp": "2026-11-30T10:00:00Z"}}) == [
        {"op": "test", "path": "/metadata/finalizers/1", "value": "kueue.x-k8s.io/managed"},
        {"op": "remove", "path": "/metadata/finalizers/1"},
    ]
    assert (
        finalizer_patch({"metadata": {"deletionTimestamp": "x", "finalizers": ["other/x"]}}) is None
    )


# ----------------------------------------------------------------------------- through the spawner


async def test_spawner_pod_holds_no_token_and_carries_the_choice(kubeconfig: None) -> None:
    view = StaticKueueView(
        cluster_queues=[team_a_notebooks()],
        local_queues=[local_queue("team-a", "team-a-notebooks")],
    )
    spawner = make_spawner(FakeUser("alice", ["team-a"]), view)
    spawner.api_token = TOKEN
    await spawner._run_apply_user_options({"offering": "mig-3g"})
    pod = to_api_json(await spawner.get_pod_manifest())  # a V1Pod, as modify_pod_hook expects
    assert find_secrets(pod, [TOKEN]) == []
    ctr = pod["spec"]["containers"][0]
    token_env = {e["name"]: e for e in ctr["env"] if "TOKEN" in e["name"]}
    assert token_env == {
        name: {
            "name": name,
            "valueFrom": {
                "secretKeyRef": {
                    "key": "token",
                    "name": "jupyter-alice-hub-token",
                    "optional": False,
                }
            },
        }
        for name in ("JPY_API_TOKEN", "JUPYTERHUB_API_TOKEN")
    }
    assert {
        k: v for k, v in pod["metadata"]["labels"].items() if k.startswith(("kueue", "gpuaas"))
    } == {
        "kueue.x-k8s.io/queue-name": "team-a",
        "kueue.x-k8s.io/priority-class": "interactive",
        "gpuaas.jupyter.org/team": "team-a",
        "gpuaas.jupyter.org/offering": "mig-3g",
    }
    assert ctr["resources"]["limits"]["nvidia.com/mig-3g.20gb"] == "1"
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}
    assert {"name": "gpuaas-shm", "mountPath": "/dev/shm"} in ctr["volumeMounts"]
    assert pod["metadata"]["namespace"] == NAMESPACE


def test_a_fraction_asks_for_hamis_resources_scheduler_and_annotations() -> None:
    from tests.support.samples import fraction_catalog

    catalog = fraction_catalog()
    choice = validate_options({"team": "team-a", "offering": "l4-quarter"}, catalog, ALICE)
    settings = pod_settings(choice, priority_class="interactive", default_namespace=NAMESPACE)
    pod = shape_pod(base_pod(), settings)
    spec = pod["spec"]
    (container,) = spec["containers"]
    hami = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "5632", "nvidia.com/gpucores": "25"}
    for part in ("requests", "limits"):
        got = container["resources"][part]
        assert {k: v for k, v in got.items() if k.startswith("nvidia.com/")} == hami
    assert spec["schedulerName"] == "hami-scheduler"
    assert pod["metadata"]["annotations"]["nvidia.com/use-gputype"] == "L4"
    assert pod["metadata"]["annotations"]["gpuaas.jupyter.org/gpu-equivalents"] == "1/4"
    assert {"name": "GPUAAS_OFFERING_KIND", "value": "fraction"} in container["env"]
    assert {
        "key": "gpuaas.dev/hami-vgpu",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    } in spec["tolerations"]


def test_a_time_sliced_gpu_tells_the_server_its_devices_are_shared() -> None:
    """NVML cannot tell a time-sliced GPU is shared: the server's command line says so, and the
    server extension reads it as ``shared_devices == ["all"]``; other kinds add nothing."""
    from jupyter_gpuaas.server.app import GPUaaS

    (shared,) = build({"offering": "shared"})["spec"]["containers"]
    assert shared["args"] == ["jupyterhub-singleuser", "--GPUaaS.shared_devices=all"]
    app = GPUaaS()
    app.parse_command_line(shared["args"][1:])
    assert app.shared_devices == ["all"]
    for offering in ("h100", "mig-1g", "cpu"):
        (ctr,) = build({"offering": offering})["spec"]["containers"]
        assert ctr["args"] == ["jupyterhub-singleuser"], offering
    # KubeSpawner's args from the admin's config stay, and ours are not repeated
    admin = ["jupyterhub-singleuser", "--debug"]
    again = build({"offering": "shared"}, base_pod(cmd=admin))
    assert again["spec"]["containers"][0]["args"] == [*admin, "--GPUaaS.shared_devices=all"]
    twice = build({"offering": "shared"}, base_pod(cmd=[*admin, "--GPUaaS.shared_devices=all"]))
    assert twice["spec"]["containers"][0]["args"] == [*admin, "--GPUaaS.shared_devices=all"]


def test_a_server_that_dies_leaves_its_logs_tail_unless_the_admin_chose_otherwise() -> None:
    pod = build({"offering": "h100"}, base_pod())
    assert pod["spec"]["containers"][0]["terminationMessagePolicy"] == "FallbackToLogsOnError"
    base = base_pod()
    base["spec"]["containers"][0]["terminationMessagePolicy"] = "File"
    pod = build({"offering": "h100"}, base)
    assert pod["spec"]["containers"][0]["terminationMessagePolicy"] == "File"

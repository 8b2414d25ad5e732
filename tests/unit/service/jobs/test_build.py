"""The notebook Job's manifests against complete expected objects (jobs/build.py)."""

from __future__ import annotations

import json

from gpuaas_service.jobs.build import (
    build_input_config_map,
    build_job,
    build_token_secret,
    job_name,
    owner_reference,
    token_sha256,
)
from gpuaas_service.jobs.request import validate_job_request
from jupyter_gpuaas.core.catalog import CatalogSource, build_catalog
from tests.support.jobs_samples import NOTEBOOK, jobs_catalog, request_body
from tests.support.samples import HAMI_TOLERATION, fraction_catalog_data

CATALOG = jobs_catalog()
USER = {
    "gpuaas.jupyter.org/job": "notebook",
    "gpuaas.jupyter.org/user": "alice",
    "gpuaas.jupyter.org/team": "team-a",
    "gpuaas.jupyter.org/offering": "h100",
}


def test_job_name() -> None:
    assert job_name("Train ResNet (v2).ipynb", "ab12c") == "nb-train-resnet-v2-ab12c"
    assert job_name("___.ipynb", "ab12c") == "nb-notebook-ab12c"
    assert job_name("x" * 200 + ".ipynb", "ab12c") == "nb-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx-ab12c"
    assert job_name("A -- B.ipynb", "00000") == "nb-a-b-00000"


def test_the_job_is_exactly_this() -> None:
    req = validate_job_request(request_body(), CATALOG, "alice", ["team-a"])
    job = build_job(req, name="nb-train-ab12c", token_sha="f" * 64, service_url="http://svc/x/")
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "nb-train-ab12c",
            "namespace": "team-a",
            "labels": {
                **USER,
                "kueue.x-k8s.io/queue-name": "training",
                "kueue.x-k8s.io/priority-class": "training",
                "kueue.x-k8s.io/max-exec-time-seconds": "7200",
            },
            "annotations": {
                "gpuaas.jupyter.org/gpu-equivalents": "2",
                "gpuaas.jupyter.org/job-token-sha256": "f" * 64,
            },
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "backoffLimit": 0,
            "suspend": True,
            "template": {
                "metadata": {
                    "labels": USER,
                    "annotations": {"gpuaas.jupyter.org/gpu-equivalents": "2"},
                },
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "containers": [
                        {
                            "name": "notebook",
                            "image": "quay.io/jupyter/pytorch-notebook:cuda12-2025-06-02",
                            "command": ["python", "-m", "jupyter_gpuaas.job_pod"],
                            "env": [
                                {"name": "GPUAAS_JOB_SERVICE_URL", "value": "http://svc/x/"},
                                {"name": "GPUAAS_JOB_NAMESPACE", "value": "team-a"},
                                {"name": "GPUAAS_JOB_NAME", "value": "nb-train-ab12c"},
                                {
                                    "name": "GPUAAS_JOB_TOKEN",
                                    "valueFrom": {
                                        "secretKeyRef": {
                                            "name": "nb-train-ab12c-token",
                                            "key": "token",
                                        }
                                    },
                                },
                                {"name": "GPUAAS_TEAM", "value": "team-a"},
                                {"name": "GPUAAS_OFFERING", "value": "h100"},
                                {"name": "GPUAAS_GPU_EQUIVALENTS", "value": "2"},
                            ],
                            "resources": {
                                "requests": {"nvidia.com/gpu": "2", "cpu": "4", "memory": "16Gi"},
                                "limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"},
                            },
                            "volumeMounts": [{"name": "gpuaas-shm", "mountPath": "/dev/shm"}],
                        }
                    ],
                    "volumes": [
                        {
                            "name": "gpuaas-shm",
                            "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"},
                        }
                    ],
                    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                },
            },
        },
    }


def test_no_time_limit_no_priority_no_label() -> None:
    req = validate_job_request(
        request_body(team="team-b", offering="mig-1g", count=None, time_limit=None),
        CATALOG,
        "carol",
        ["team-b"],
    )
    job = build_job(req, name="nb-a-00000", token_sha="0" * 64, service_url="http://svc/")
    labels = job["metadata"]["labels"]
    assert "kueue.x-k8s.io/max-exec-time-seconds" not in labels
    assert "kueue.x-k8s.io/priority-class" not in labels
    assert job["metadata"]["annotations"]["gpuaas.jupyter.org/gpu-equivalents"] == "1/7"
    spec = job["spec"]["template"]["spec"]
    assert spec["volumes"][0]["emptyDir"]["sizeLimit"] == "1Gi"  # the catalog's default shm


def test_a_cpu_job_gets_its_sizes_cpu_and_memory_and_no_shm() -> None:
    req = validate_job_request(
        request_body(team="team-b", offering="cpu", count=None, time_limit=None),
        CATALOG,
        "carol",
        ["team-b"],
    )
    job = build_job(req, name="nb-a-00000", token_sha="0" * 64, service_url="http://svc/")
    assert job["spec"]["template"]["spec"] == {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "containers": [
            {
                "name": "notebook",
                "image": "quay.io/jupyter/scipy-notebook:2025-06-02",
                "command": ["python", "-m", "jupyter_gpuaas.job_pod"],
                "env": [
                    {"name": "GPUAAS_JOB_SERVICE_URL", "value": "http://svc/"},
                    {"name": "GPUAAS_JOB_NAMESPACE", "value": "team-b"},
                    {"name": "GPUAAS_JOB_NAME", "value": "nb-a-00000"},
                    {
                        "name": "GPUAAS_JOB_TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "nb-a-00000-token", "key": "token"}},
                    },
                    {"name": "GPUAAS_TEAM", "value": "team-b"},
                    {"name": "GPUAAS_OFFERING", "value": "cpu"},
                    {"name": "GPUAAS_GPU_EQUIVALENTS", "value": "0"},
                ],
                "resources": {
                    "requests": {"cpu": "1", "memory": "4Gi"},
                    "limits": {"cpu": "2", "memory": "8Gi"},
                },
            }
        ],
    }


def test_input_and_token_objects() -> None:
    req = validate_job_request(request_body(), CATALOG, "alice", ["team-a"])
    cm = build_input_config_map(req, name="nb-train-ab12c")
    assert cm["metadata"] == {"name": "nb-train-ab12c-input", "namespace": "team-a", "labels": USER}
    assert json.loads(cm["data"]["notebook.ipynb"]) == NOTEBOOK
    assert json.loads(cm["data"]["request.json"]) == {
        "path": "work/train.ipynb",
        "parameters": {"epochs": 3, "lr": 0.01, "name": "run 1", "layers": [1, 2]},
        "kernel_name": None,
        "time_limit": 7200,
    }
    secret = build_token_secret(req, name="nb-train-ab12c", token="s3cret")
    assert secret == {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": "nb-train-ab12c-token", "namespace": "team-a", "labels": USER},
        "stringData": {"token": "s3cret"},
    }
    assert token_sha256("s3cret") == (
        "1ec1c26b50d5d3c58d9583181af8076655fe00756bf7285940ba3670f99fcba0"
    )
    ref = owner_reference({"metadata": {"name": "nb-train-ab12c", "uid": "u-1"}})
    assert ref == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "nb-train-ab12c",
        "uid": "u-1",
        "controller": False,
        "blockOwnerDeletion": False,
    }


def test_a_fraction_job_goes_to_hamis_scheduler_with_the_offerings_annotations() -> None:
    """A HAMi fraction's pod only gets its vGPU when HAMi's scheduler places it: the Job's pod
    carries the offering's scheduler name and annotations, as a server's pod does."""
    data = fraction_catalog_data()
    data["tenants"][0]["jobs"] = {
        "namespace": "team-a",
        "local_queue": "training",
        "offerings": ["l4-quarter"],
    }
    catalog = build_catalog([CatalogSource("", data)], default_namespace="users")
    req = validate_job_request(
        request_body(offering="l4-quarter", count=1), catalog, "alice", ["team-a"]
    )
    job = build_job(req, name="nb-train-ab12c", token_sha="f" * 64, service_url="http://svc/")
    template = job["spec"]["template"]
    assert template["spec"]["schedulerName"] == "hami-scheduler"
    assert template["metadata"]["annotations"] == {
        "nvidia.com/use-gputype": "L4",
        "gpuaas.jupyter.org/gpu-equivalents": "1/4",
    }
    assert template["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpumem"] == "5632"
    assert template["spec"]["tolerations"] == [HAMI_TOLERATION]

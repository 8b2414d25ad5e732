"""The sample catalog with jobs sections, a notebook, and the job service over an in-memory
Kubernetes (our own collaborator's interface), for the jobs unit tests."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any

from gpuaas_service.jobs.service import JobService
from jupyter_gpuaas.core.catalog import Catalog, CatalogSource, build_catalog
from tests.support.samples import catalog_data

NOTEBOOK: dict[str, Any] = {
    "nbformat": 4,
    "nbformat_minor": 5,
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    "cells": [
        {
            "cell_type": "code",
            "id": "a",
            "metadata": {"tags": ["parameters"]},
            "outputs": [],
            "execution_count": None,
            "source": "epochs = 1\n",
        },
        {
            "cell_type": "code",
            "id": "b",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": "print(epochs)\n",
        },
    ],
}


def jobs_catalog_data() -> dict[str, Any]:
    data = catalog_data()
    data["tenants"][0]["jobs"] = {
        "namespace": "team-a",
        "local_queue": "training",
        "offerings": ["h100", "mig-1g"],
        "priority_class": "training",
        "max_per_user": 2,
        "max_per_team": 5,
        "default_time_limit": "4h",
        "max_time_limit": "1d",
    }
    data["tenants"][1]["jobs"] = {"namespace": "team-b", "local_queue": "training"}
    return data


def jobs_catalog() -> Catalog:
    return build_catalog([CatalogSource("", jobs_catalog_data())], default_namespace="users")


def request_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "team": "team-a",
        "path": "work/train.ipynb",
        "notebook": NOTEBOOK,
        "offering": "h100",
        "count": 2,
        "time_limit": "2h",
        "parameters": {"epochs": 3, "lr": 0.01, "name": "run 1", "layers": [1, 2]},
    }
    body.update(overrides)
    return body


class FakeKube:
    def __init__(self, fail_job: bool = False) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str, str]] = []
        self.fail_job = fail_job

    async def create(self, kind: str, namespace: str, body: Mapping[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(dict(body))
        name = obj["metadata"]["name"]
        self.calls.append(("create", kind, name))
        if kind == "job" and self.fail_job:
            raise RuntimeError("admission refused")
        obj["metadata"]["uid"] = str(uuid.uuid4())
        obj["metadata"]["namespace"] = namespace
        self.objects[(kind, namespace, name)] = obj
        return copy.deepcopy(obj)

    async def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        obj = self.objects.get((kind, namespace, name))
        return copy.deepcopy(obj) if obj else None

    async def patch(
        self, kind: str, namespace: str, name: str, body: Mapping[str, Any]
    ) -> dict[str, Any]:
        self.calls.append(("patch", kind, name))
        obj = self.objects[(kind, namespace, name)]
        for key, value in body["metadata"].items():
            if isinstance(value, dict):
                obj["metadata"].setdefault(key, {}).update(value)
            else:
                obj["metadata"][key] = value
        return copy.deepcopy(obj)

    async def delete(self, kind: str, namespace: str, name: str) -> bool:
        self.calls.append(("delete", kind, name))
        return self.objects.pop((kind, namespace, name), None) is not None

    async def list_jobs(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(part.split("=") for part in selector.split(","))
        return [
            copy.deepcopy(o)
            for (kind, ns, _), o in self.objects.items()
            if kind == "job"
            and ns == namespace
            and all(o["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]


def service(kube: FakeKube) -> JobService:
    tokens = iter(f"token-{i}" for i in range(100))
    return JobService(kube, jobs_catalog, service_url="http://svc/", token=lambda: next(tokens))

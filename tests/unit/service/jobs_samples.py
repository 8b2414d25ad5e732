"""The sample catalog with jobs sections, and a notebook, for the jobs unit tests."""

from __future__ import annotations

from typing import Any

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

"""The admin catalog: model, defaults, and validation that reports every error with its path."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from jupyter_gpuaas.core.catalog import (
    CatalogError,
    CatalogSource,
    build_catalog,
    load_catalog_file,
)
from tests.support.samples import CATALOG, GPU, MIG1, NAMESPACE, catalog_data, sample_catalog


def _errors(data: dict[str, Any], origin: str = "GPUaaSSpawner.") -> list[str]:
    with pytest.raises(CatalogError) as info:
        build_catalog([CatalogSource(origin, data)], default_namespace=NAMESPACE)
    return [str(e) for e in info.value.errors]


def test_sample_catalog_reads_every_field() -> None:
    cat = sample_catalog()
    assert list(cat.offerings) == ["h100", "mig-1g", "mig-3g", "shared", "cpu"]
    h100 = cat.offerings["h100"]
    assert h100.kind == "gpu"
    assert h100.resources == {GPU: 1}
    assert h100.requests(2) == {GPU: 2}
    assert h100.gpu_equivalents == 1
    assert h100.isolation == "hardware"
    assert (h100.min_count, h100.max_count, h100.default_count) == (1, 2, 1)
    assert h100.shm_size == "16Gi"
    assert h100.tolerations == (
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    )
    assert (h100.unit, h100.units) == ("GPU", "GPUs")
    mig = cat.offerings["mig-1g"]
    assert mig.gpu_equivalents == Fraction(1, 7)
    assert mig.shm_size == "1Gi"  # GPU offerings always get a sized /dev/shm
    assert mig.isolation_text == "hardware-isolated MIG slice"
    assert cat.offerings["shared"].isolation == "none"
    assert cat.offerings["shared"].isolation_text == "time-shared, no memory isolation"
    assert cat.offerings["shared"].gpu_equivalents == Fraction(1, 4)
    cpu = cat.offerings["cpu"]
    assert (cpu.is_gpu, cpu.shm_size) == (False, None)
    assert cpu.gpu_equivalents == 0
    assert dict(cpu.resources) == {}
    team_a = cat.tenants["team-a"]
    assert team_a.default_offering == "mig-1g"
    assert team_a.max_gpus_per_user == 2
    assert cat.tenants["team-b"].default_offering == "mig-1g"  # first listed
    assert [t.name for t in cat.tenants_for_groups(["team-b", "other"])] == ["team-b"]
    assert [t.name for t in cat.tenants_for_groups(["team-b", "team-a"])] == ["team-a", "team-b"]
    assert [i.slug for i in cat.images_for(h100)] == ["pytorch"]
    assert [i.slug for i in cat.images_for(mig)] == ["scipy", "pytorch"]
    size = cat.default_size_for(h100)
    assert size is not None
    assert size.slug == "large"


def test_mig_single_and_unrenamed_time_slicing_use_nvidia_gpu_with_a_product_selector() -> None:
    data = catalog_data()
    data["offerings"].append(
        {
            "slug": "mig-single",
            "kind": "mig",
            "resources": {GPU: 1},
            "flavor": "a100-mig-single",
            "gpu_equivalents": "1/7",
            "node_selector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"},
        }
    )
    data["offerings"].append(
        {
            "slug": "ts",
            "kind": "shared",
            "resources": {GPU: 1},
            "flavor": "t4-ts",
            "gpu_equivalents": 0.25,
            "node_selector": {"nvidia.com/gpu.product": "Tesla-T4-SHARED"},
        }
    )
    cat = build_catalog([CatalogSource("GPUaaSSpawner.", data)])
    assert cat.offerings["mig-single"].resources == {GPU: 1}
    assert cat.offerings["ts"].node_selector == {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}

    data["offerings"][-1].pop("node_selector")
    assert _errors(data) == [
        "GPUaaSSpawner.offerings[6].node_selector: a shared offering requesting nvidia.com/gpu "
        "(MIG single strategy or time-slicing without renaming) needs a node_selector such as "
        "nvidia.com/gpu.product to tell its nodes apart from whole GPUs"
    ]


def test_every_error_is_reported_with_its_field_path() -> None:
    data: dict[str, Any] = {
        "offerings": [
            {
                "slug": "H100!",
                "kind": "gpu",
                "resources": {GPU: 0, "cpu": 2, "bad name": 1},
                "flavor": "h100",
                "tolerations": [{"key": "x", "operator": "Maybe", "effect": "Never"}],
                "min_count": 2,
                "max_count": 1,
                "shm_size": "lots",
                "resource": 1,
            },
            {"slug": "mig", "kind": "mig", "resources": {MIG1: 1}},
            {
                "slug": "shared",
                "kind": "shared",
                "resources": {"nvidia.com/gpu.shared": 1},
                "flavor": "s",
                "gpu_equivalents": "1/4",
                "isolation": "hardware",
            },
            {
                "slug": "cpu",
                "kind": "cpu",
                "resources": {GPU: 1},
                "cpu_guarantee": 4,
                "cpu_limit": 2,
            },
            {"slug": "cpu", "kind": "cpu"},
            {"slug": "tpu", "kind": "tpu"},
            "not a mapping",
        ],
        "tenants": [
            {
                "name": "team-a",
                "groups": [],
                "local_queue": "team-a",
                "offerings": ["mig", "a100"],
                "default_offering": "h100",
                "max_queued": -1,
            },
            {"name": "team-a", "groups": ["b"], "local_queue": "team-b", "offerings": ["cpu"]},
            {
                "name": "team-c",
                "groups": ["c"],
                "local_queue": "team-a",
                "offerings": ["cpu"],
                "max_gpus_per_user": "lots",
            },
        ],
        "profiles": [],
    }
    assert _errors(data) == [
        "GPUaaSSpawner.profiles: unknown field",
        "GPUaaSSpawner.offerings[0].resource: unknown field (did you mean 'resources'?)",
        "GPUaaSSpawner.offerings[0].slug: 'H100!' is not a slug (a-z, 0-9, -)",
        'GPUaaSSpawner.offerings[0].resources["nvidia.com/gpu"]: must be a whole number of at '
        "least 1 (per unit), not 0",
        'GPUaaSSpawner.offerings[0].resources["cpu"]: must be an extended resource name such as '
        "nvidia.com/gpu",
        'GPUaaSSpawner.offerings[0].resources["bad name"]: must be an extended resource name such '
        "as nvidia.com/gpu",
        "GPUaaSSpawner.offerings[0].tolerations[0].operator: must be Equal or Exists, not 'Maybe'",
        "GPUaaSSpawner.offerings[0].tolerations[0].effect: must be one of NoSchedule, "
        "PreferNoSchedule, NoExecute",
        'GPUaaSSpawner.offerings[0].shm_size: \'lots\' is not a size such as "8Gi" or "512Mi"',
        "GPUaaSSpawner.offerings[0].max_count: must be at least min_count (2)",
        "GPUaaSSpawner.offerings[1].flavor: is required for a mig offering (the Kueue "
        "ResourceFlavor whose quota it uses)",
        "GPUaaSSpawner.offerings[1].gpu_equivalents: is required for a mig offering (its size in "
        'whole GPUs, e.g. "1/7")',
        "GPUaaSSpawner.offerings[2].isolation: a shared (time-sliced) GPU is not "
        "hardware-isolated: none or memory-limited",
        "GPUaaSSpawner.offerings[3].cpu_guarantee: must not exceed cpu_limit (2.0)",
        "GPUaaSSpawner.offerings[3].resources: a cpu offering requests no extended resources",
        "GPUaaSSpawner.offerings[4].slug: offering 'cpu' is defined twice",
        "GPUaaSSpawner.offerings[5].kind: must be one of gpu, mig, shared, fraction, cpu, "
        "not 'tpu'",
        "GPUaaSSpawner.offerings[6]: must be a mapping, not a string",
        "GPUaaSSpawner.tenants[0].groups: must not be empty",
        "GPUaaSSpawner.tenants[0].default_offering: 'h100' is not one of this tenant's offerings",
        "GPUaaSSpawner.tenants[0].max_queued: must be at least 0, not -1",
        "GPUaaSSpawner.tenants[0].offerings[1]: unknown offering 'a100'",
        "GPUaaSSpawner.tenants[1].name: tenant 'team-a' is already defined at "
        "GPUaaSSpawner.tenants[0]",
        'GPUaaSSpawner.tenants[2].max_gpus_per_user: must be a number such as 1, 0.25 or "1/7", '
        "not 'lots'",
        "GPUaaSSpawner.tenants[2].local_queue: LocalQueue gpuaas-users/team-a is already used by "
        "tenant 'team-a'",
    ]


def test_duplicate_local_queue_and_unknown_references() -> None:
    data = catalog_data()
    data["tenants"][1]["local_queue"] = "team-a"
    data["tenants"][1]["offerings"] = ["mig-1g", "mig1g"]
    data["offerings"][0]["images"] = ["pytorch", "tensorflow"]
    data["offerings"][0]["default_size"] = "small"
    assert _errors(data) == [
        "GPUaaSSpawner.offerings[0].images[1]: unknown image 'tensorflow'",
        "GPUaaSSpawner.offerings[0].default_size: 'small' is not offered here",
        "GPUaaSSpawner.tenants[1].offerings[1]: unknown offering 'mig1g' (did you mean 'mig-1g'?)",
        "GPUaaSSpawner.tenants[1].local_queue: LocalQueue gpuaas-users/team-a is already used by "
        "tenant 'team-a'",
    ]


def test_empty_configuration_says_where_to_configure() -> None:
    assert _errors({}) == [
        "offerings: no offerings are configured (GPUaaSSpawner.offerings or catalog_file)",
        "tenants: no tenants are configured (GPUaaSSpawner.tenants or catalog_file)",
    ]


def test_yaml_file_and_traitlets_combine_and_errors_name_the_file(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "catalog.yaml"
    file_part = {
        "offerings": CATALOG["offerings"][:2],
        "images": CATALOG["images"],
        "sizes": CATALOG["sizes"],
    }
    path.write_text(yaml.safe_dump(file_part))
    traits = {"offerings": CATALOG["offerings"][2:], "tenants": CATALOG["tenants"]}
    cat = build_catalog([load_catalog_file(str(path)), CatalogSource("GPUaaSSpawner.", traits)])
    assert list(cat.offerings) == ["h100", "mig-1g", "mig-3g", "shared", "cpu"]

    traits["offerings"] = CATALOG["offerings"][1:]
    with pytest.raises(CatalogError) as info:
        build_catalog([load_catalog_file(str(path)), CatalogSource("GPUaaSSpawner.", traits)])
    assert [str(e) for e in info.value.errors] == [
        "GPUaaSSpawner.offerings[0].slug: offering 'mig-1g' is defined twice"
    ]

    file_part["offerings"][0] = {**file_part["offerings"][0], "kind": "fpga"}
    path.write_text(yaml.safe_dump(file_part))
    with pytest.raises(CatalogError) as info:
        build_catalog([load_catalog_file(str(path)), CatalogSource("GPUaaSSpawner.", traits)])
    expected = "offerings[0].kind: must be one of gpu, mig, shared, fraction, cpu, not 'fpga'"
    assert f"{path}: {expected}" in str(info.value)


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot read the catalog file"):
        load_catalog_file(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("offerings: [\n")
    with pytest.raises(CatalogError, match="not valid YAML"):
        load_catalog_file(str(bad))
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n")
    with pytest.raises(CatalogError, match="must hold a mapping"):
        load_catalog_file(str(listy))


def test_the_z2jh_example_catalog_is_valid() -> None:
    import yaml

    root = Path(__file__).resolve().parents[3] / "spawner"
    values = yaml.safe_load((root / "z2jh-values.example.yaml").read_text())
    data = values["hub"]["extraFiles"]["gpuaas-catalog"]["data"]
    namespace = values["hub"]["config"]["KubeSpawner"]["namespace"]
    cat = build_catalog([CatalogSource("catalog.yaml: ", data)], default_namespace=namespace)
    assert set(cat.tenants) == {"team-a", "team-b"}
    assert values["hub"]["config"]["JupyterHub"]["spawner_class"] == "gpuaas"
    assert values["cull"]["enabled"] is False
    rbac = list(yaml.safe_load_all((root / "z2jh-hub-rbac.example.yaml").read_text()))
    rules = [r for doc in rbac if doc["kind"] in ("Role", "ClusterRole") for r in doc["rules"]]
    assert {"secrets"} <= {res for r in rules for res in r["resources"]}

"""MIG geometries: NVIDIA's named configs are valid, and the planner picks the one that
serves most of the measured demand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_gpuaas.core.mig_geometry import (
    COMPUTE_SLICES,
    CONFIGS,
    MODELS,
    advice_text,
    capacity,
    compute_slices,
    config_of,
    format_geometry,
    geometry_of,
    model_of_product,
    node_advice,
    parse_geometry,
    plan,
    problems,
)

A100 = {"A100-40GB": 1}
H100 = {"H100-80GB": 1}


@pytest.mark.parametrize(
    ("config", "model"),
    [(c, m) for c, per_model in CONFIGS.items() for m in per_model],
)
def test_every_named_config_is_valid_for_its_model(config: str, model: str) -> None:
    geometry = geometry_of(config, model)
    assert geometry is not None
    assert problems(model, geometry) == []
    assert compute_slices(model, geometry) <= COMPUTE_SLICES


def test_balanced_is_nvidia_s_balanced_on_each_model() -> None:
    assert format_geometry(CONFIGS["all-balanced"]["A100-40GB"]) == "2x1g.5gb+1x2g.10gb+1x3g.20gb"
    assert format_geometry(CONFIGS["all-balanced"]["H100-80GB"]) == "2x1g.10gb+1x2g.20gb+1x3g.40gb"
    # one name, a different geometry per model
    assert capacity("all-1g.10gb", {"A100-40GB": 1, "H100-80GB": 1}) == {"1g.10gb": 11}


def test_problems_name_what_is_wrong() -> None:
    assert problems("A100-40GB", parse_geometry("8x1g.5gb")) == [
        "A100-40GB holds at most 7 x 1g.5gb, not 8",
        "8x1g.5gb takes 8 compute slices of 7",
    ]
    assert problems("A100-40GB", parse_geometry("1x1g.10gb")) == []
    assert "has no MIG profile 1g.20gb" in problems("A100-40GB", parse_geometry("1g.20gb"))[0]
    assert problems("A100-40GB", parse_geometry("2x3g.20gb+1x1g.5gb")) == [
        "1x1g.5gb+2x3g.20gb takes 9 memory slices of 8"
    ]
    assert problems("T4-16GB", ()) == [
        "no MIG profiles known for T4-16GB (known: A100-40GB, H100-80GB)"
    ]


def test_geometry_text_round_trips_and_names_its_config() -> None:
    g = parse_geometry("1x3g.20gb+2x1g.5gb+1x2g.10gb")
    assert format_geometry(g) == "2x1g.5gb+1x2g.10gb+1x3g.20gb"
    assert config_of({"A100-40GB": g}) == "all-balanced"
    assert config_of({"A100-40GB": parse_geometry("2x1g.5gb+1x3g.20gb")}) is None
    with pytest.raises(ValueError, match="cannot read MIG geometry"):
        parse_geometry("2xbig")


def test_model_of_product_reads_gfd_and_nvml_names() -> None:
    assert model_of_product("NVIDIA-A100-SXM4-40GB") == "A100-40GB"
    assert model_of_product("NVIDIA H100 80GB HBM3") == "H100-80GB"
    assert model_of_product("NVIDIA-H100-80GB-HBM3") == "H100-80GB"
    assert model_of_product("NVIDIA-L4") is None
    assert model_of_product("NVIDIA-A100-SXM4-80GB") is None  # no profiles here for it


def test_small_demand_gets_small_slices_and_a_mix_gets_balanced() -> None:
    assert plan({"1g.5gb": 6}, A100).config == "all-1g.5gb"
    mixed = plan({"1g.5gb": 2, "3g.20gb": 1, "2g.10gb": 1}, A100)
    assert mixed.config == "all-balanced"
    assert mixed.served_slices == mixed.demand_slices == 7
    assert mixed.reason == "serves 7 of 7 compute slices asked for"
    big = plan({"3g.40gb": 3}, {"H100-80GB": 2})
    assert big.config == "all-3g.40gb"
    assert big.served == {"3g.40gb": 3}
    assert big.unserved == {}


def test_unserved_demand_is_named() -> None:
    p = plan({"7g.40gb": 2, "1g.5gb": 1}, A100)
    assert p.config == "all-7g.40gb"
    assert p.unserved == {"7g.40gb": 1, "1g.5gb": 1}
    assert p.reason == "serves 7 of 15 compute slices asked for (not: 1x7g.40gb, 1x1g.5gb)"


def test_no_demand_keeps_the_current_config() -> None:
    assert plan({}, A100, current="all-3g.20gb").config == "all-3g.20gb"
    # a tie keeps the current one: both serve the one 1g.5gb
    assert plan({"1g.5gb": 1}, A100, current="all-balanced").config == "all-balanced"


def test_gpus_no_config_covers_get_no_plan() -> None:
    p = plan({"1g.5gb": 1}, {"L4-24GB": 1})
    assert p.config is None
    assert p.unserved == {"1g.5gb": 1}
    assert (
        advice_text("n", None, p)
        == "node n: no named config now; no named MIG config covers these GPUs"
    )


def test_advice_text_says_how_to_apply() -> None:
    p = plan({"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, A100)
    assert advice_text("local-0", "all-1g.5gb", p) == (
        "node local-0: all-1g.5gb now; demand suggests all-balanced (serves 7 of 7 compute slices "
        "asked for); apply with kubectl label node local-0 nvidia.com/mig.config=all-balanced "
        "--overwrite"
    )
    assert "keeping it" in advice_text("local-0", "all-balanced", p)


_ALL_PROFILES = sorted({p for profiles in MODELS.values() for p in profiles})


@given(
    demand=st.dictionaries(st.sampled_from(_ALL_PROFILES), st.integers(0, 20), max_size=6),
    a100=st.integers(0, 4),
    h100=st.integers(0, 4),
    current=st.sampled_from([None, *CONFIGS]),
)
def test_plan_is_valid_and_serves_the_most(
    demand: dict[str, int], a100: int, h100: int, current: str | None
) -> None:
    gpus = {"A100-40GB": a100, "H100-80GB": h100}
    chosen = plan(demand, gpus, current=current)
    if a100 + h100 == 0:
        assert chosen.config is None
        return
    assert chosen.config is not None
    for model, count in gpus.items():
        if count:
            geometry = geometry_of(chosen.config, model)
            assert geometry is not None
            assert problems(model, geometry) == []
            assert compute_slices(model, geometry) <= COMPUTE_SLICES
    # never serves more than asked or than there is
    for profile, n in chosen.served.items():
        assert n <= demand.get(profile, 0)
        assert n <= chosen.capacity.get(profile, 0)
    assert chosen.served_slices <= chosen.demand_slices
    # no named config serves more compute slices
    for name in CONFIGS:
        cap = capacity(name, gpus)
        if not cap:
            continue
        slices = sum(
            int(p.split("g.")[0]) * min(n, cap.get(p, 0)) for p, n in demand.items() if n > 0
        )
        assert slices <= chosen.served_slices
    if not any(demand.values()) and current is not None and capacity(current, gpus):
        assert chosen.config == current


def _node(name: str, allocatable: dict[str, str], **labels: str) -> dict[str, object]:
    base = {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
        "nvidia.com/mig.strategy": "mixed",
        "gpuaas.dev/pool": "local",
    }
    return {
        "metadata": {"name": name, "labels": {**base, **labels}},
        "status": {"allocatable": {"cpu": "24", **allocatable}},
    }


def _pod(
    profile: str, node: str = "", phase: str = "Running", pool: str | None = None
) -> dict[str, object]:
    spec: dict[str, object] = {
        "containers": [{"resources": {"limits": {f"nvidia.com/mig-{profile}": "1"}}}],
        "nodeSelector": {"gpuaas.dev/pool": pool} if pool else {},
    }
    if node:
        spec["nodeName"] = node
    return {"spec": spec, "status": {"phase": phase}}


def test_node_advice_counts_the_node_s_pods_and_the_pending_ones_that_could_land() -> None:
    node = _node(
        "local-0",
        {"nvidia.com/mig-1g.5gb": "7"},
        **{"nvidia.com/mig.config": "all-1g.5gb"},
    )
    pods = [
        _pod("1g.5gb", node="local-0"),
        _pod("3g.20gb", phase="Pending", pool="local"),
        _pod("2g.10gb", phase="Pending", pool="local"),
        _pod("1g.5gb", node="local-0", phase="Succeeded"),  # finished: no demand
        _pod("3g.20gb", node="other-0"),  # elsewhere
        _pod("3g.20gb", phase="Pending", pool="a100-mig"),  # cannot land here
    ]
    advice = node_advice(node, pods)
    assert advice is not None
    assert (advice.model, advice.gpus, advice.current) == ("A100-40GB", 1, "all-1g.5gb")
    assert advice.demand == {"1g.5gb": 1, "3g.20gb": 1, "2g.10gb": 1}
    assert advice.line == (
        "node local-0: all-1g.5gb now; demand suggests all-balanced (serves 6 of 6 compute "
        "slices asked for); apply with kubectl label node local-0 "
        "nvidia.com/mig.config=all-balanced --overwrite"
    )


def test_node_advice_only_for_mixed_mig_nodes_of_known_models() -> None:
    # a100-mig of the dev cluster: 4 GPUs' worth of 1g.5gb and 4 of 3g.20gb -> 8 GPUs
    big = _node("a100-mig-0", {"nvidia.com/mig-1g.5gb": "28", "nvidia.com/mig-3g.20gb": "8"})
    advice = node_advice(big, [])
    assert advice is not None
    assert advice.gpus == 8
    # no demand: no reshape advised
    assert advice.line == "node a100-mig-0: no named config now; no measured demand for MIG slices"
    assert node_advice(_node("l4", {}, **{"nvidia.com/gpu.product": "NVIDIA-L4"}), []) is None
    assert node_advice(_node("h", {}, **{"nvidia.com/mig.strategy": "none"}), []) is None

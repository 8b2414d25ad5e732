"""Sizes and the simulated device spec."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jupyter_gpuaas.gpu.spec import (
    DEFAULT_SIMULATED_DEVICES,
    GiB,
    MiB,
    SpecError,
    parse_devices,
    parse_size,
    resolve_ref,
)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2GiB", 2 * GiB),
        ("2 gib", 2 * GiB),
        ("512MiB", 512 * 1024**2),
        ("1.5GiB", int(1.5 * GiB)),
        ("2GB", 2 * 10**9),
        ("100", 100),
        ("7B", 7),
        (4096, 4096),
        ("1TiB", 1024**4),
    ],
)
def test_parse_size(text: str | int, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "2 parsecs", "-1GiB", "1e3GiB", -5, True])
def test_parse_size_rejects(text: Any) -> None:
    with pytest.raises(SpecError):
        parse_size(text)


def test_default_spec_two_h100_one_a100_with_seven_mig_devices() -> None:
    gpus = parse_devices(DEFAULT_SIMULATED_DEVICES)
    assert [(g.index, g.name, g.memory) for g in gpus] == [
        (0, "NVIDIA H100 80GB HBM3", 80 * GiB),
        (1, "NVIDIA H100 80GB HBM3", 80 * GiB),
        (2, "NVIDIA A100-SXM4-40GB", 40 * GiB),
    ]
    assert [m.profile for m in gpus[2].mig] == ["1g.5gb"] * 7
    assert all(m.memory == 5 * GiB for m in gpus[2].mig)
    assert not gpus[0].mig_enabled
    assert gpus[2].mig_enabled
    uuids = [g.uuid for g in gpus] + [m.uuid for m in gpus[2].mig]
    assert len(set(uuids)) == 10
    assert all(u.startswith("GPU-") for u in uuids[:3])
    assert all(u.startswith("MIG-") for u in uuids[3:])


def test_uuids_are_stable_across_parses() -> None:
    assert parse_devices("2xH100-80GB") == parse_devices("2xH100-80GB")


@pytest.mark.parametrize(
    ("spec", "layout"),
    [
        # NVML's total for an L4, not its name's 24 GiB (nvidia-smi: 23034MiB)
        ("1xL4-24GB", [("NVIDIA L4", 23034 * MiB, [], 0)]),
        ("T4-16GB", [("Tesla T4", 16 * GiB, [], 0)]),
        ("1xX9-12GB", [("NVIDIA X9 12GB", 12 * GiB, [], 0)]),
        (
            "1xA100-80GB:mig=2x3g.40gb",
            [("NVIDIA A100-SXM4-80GB", 80 * GiB, ["3g.40gb", "3g.40gb"], 0)],
        ),
        (
            "H100-80GB:mig=1x4g.40gb+2x1g.10gb:other=3GiB",
            [("NVIDIA H100 80GB HBM3", 80 * GiB, ["4g.40gb", "1g.10gb", "1g.10gb"], 3 * GiB)],
        ),
        (
            [{"model": "A100-40GB", "count": 2, "mig": ["2g.10gb"], "other": "1GiB"}],
            [("NVIDIA A100-SXM4-40GB", 40 * GiB, ["2g.10gb"], GiB)] * 2,
        ),
        (
            [{"model": "H100-80GB", "mig": "7x1g.10gb"}],
            [("NVIDIA H100 80GB HBM3", 80 * GiB, ["1g.10gb"] * 7, 0)],
        ),
    ],
)
def test_parse_devices(spec: Any, layout: list[tuple[str, int, list[str], int]]) -> None:
    gpus = parse_devices(spec)
    assert [(g.name, g.memory, [m.profile for m in g.mig], g.other) for g in gpus] == layout
    assert [g.index for g in gpus] == list(range(len(layout)))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("H100", "expected [COUNTx]MODEL-MEMORYGB"),
        ("2xH100-80GB:shared", "unknown option"),
        ("1xA100-40GB:mig=8x1g.5gb", "more than 7 compute slices"),
        ("1xA100-40GB:mig=4x2g.10gb", "more than 7 compute slices"),
        ("1xA100-40GB:mig=1x4g.20gb+1x3g.40gb", "more memory"),
        ("1xL4-24GB:mig=1x1g.5gb", "does not support MIG"),
        ("1xA100-40GB:mig=7xbig", "cannot read MIG layout"),
        ("1xA100-40GB:other=50GiB", "more than the GPU"),
        ([{"model": "A100-40GB", "colour": "green"}], "unknown keys"),
        ([{"model": "A100-40GB", "count": 0}], "at least 1"),
        ([{"model": "2xA100-40GB"}], "'model' must look like"),
    ],
)
def test_parse_devices_rejects(spec: Any, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        parse_devices(spec)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("0", "gpu0"),
        ("1", "gpu1-mig0"),  # a MIG-enabled GPU by index: its first MIG device, as CUDA
        ("1:0", "gpu1-mig0"),  # a MIG-enabled GPU: the given MIG device
        ("1:2", "gpu1-mig2"),
        ("1:7", None),
        ("0:0", None),  # GPU 0 has no MIG devices
        ("2", None),
        ("x", None),
        ("uuid0", "gpu0"),
        ("uuid1", "gpu1-mig0"),  # a MIG-enabled GPU's own UUID: its first MIG device, as CUDA
        ("uuid1-mig2", "gpu1-mig2"),
    ],
)
def test_resolve_ref(ref: str, expected: str | None) -> None:
    gpus = parse_devices("1xH100-80GB,1xA100-40GB:mig=3x1g.5gb")
    names = {gpus[0].uuid: "gpu0", gpus[1].uuid: "gpu1"}
    names.update({m.uuid: f"gpu1-mig{i}" for i, m in enumerate(gpus[1].mig)})
    aliases = {"uuid0": gpus[0].uuid, "uuid1": gpus[1].uuid, "uuid1-mig2": gpus[1].mig[2].uuid}
    got = resolve_ref(gpus, aliases.get(ref, ref))
    assert (names[got] if got else None) == expected
